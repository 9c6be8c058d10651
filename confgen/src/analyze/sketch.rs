//! Small summaries of unbounded streams, so that a client costs a few hundred
//! bytes however many requests it sends: a distinct count (exact while small,
//! then HyperLogLog) and the heaviest keys (Space-Saving).

/// Distinct 64-bit hashes: exact up to [`EXACT`], then a HyperLogLog of
/// [`REGISTERS`] registers (standard error 1.04 / sqrt(256), about 6.5%).
#[derive(Debug, Clone, Default)]
pub struct Distinct {
    exact: Vec<u32>,
    registers: Option<Box<[u8; REGISTERS]>>,
}

pub const EXACT: usize = 32;
pub const REGISTERS: usize = 256;

impl Distinct {
    /// Count a key, by its hash (the top 32 bits are the key).
    #[inline]
    pub fn insert(&mut self, hash: u64) {
        let key = (hash >> 32) as u32;
        if let Some(r) = &mut self.registers {
            add_register(r, mix(u64::from(key)));
            return;
        }
        if self.exact.contains(&key) {
            return;
        }
        if self.exact.len() < EXACT {
            self.exact.push(key);
            return;
        }
        // past the exact set: every key seen so far goes into the registers
        let mut r = Box::new([0u8; REGISTERS]);
        for k in self.exact.drain(..).chain(std::iter::once(key)) {
            add_register(&mut r, mix(u64::from(k)));
        }
        self.exact = Vec::new();
        self.registers = Some(r);
    }

    pub fn count(&self) -> f64 {
        match &self.registers {
            None => self.exact.len() as f64,
            Some(r) => {
                let m = REGISTERS as f64;
                let sum: f64 = r.iter().map(|&v| 2f64.powi(-i32::from(v))).sum();
                let zeros = r.iter().filter(|&&v| v == 0).count();
                let raw = 0.7213 / (1.0 + 1.079 / m) * m * m / sum;
                if raw <= 2.5 * m && zeros > 0 {
                    m * (m / zeros as f64).ln()
                } else {
                    raw
                }
            }
        }
    }
}

fn add_register(r: &mut [u8; REGISTERS], hash: u64) {
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = hash >> 8;
    let rank = (rest.trailing_zeros().min(56) + 1) as u8;
    if rank > r[index] {
        r[index] = rank;
    }
}

pub use crawlward_policy::client_window::mix;

/// A fast hash of bytes: the module's ladder's, unkeyed.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    crawlward_policy::client_window::hash_bytes(0, bytes)
}

/// The heaviest keys of a stream, Space-Saving with `cap` counters: a key
/// not held replaces the lightest and inherits its count as error, so
/// `count - error` never overstates a key and any key with more than
/// 1/cap of the stream is held.
#[derive(Debug, Clone, Default)]
pub struct TopK {
    /// (key, count, error): one allocation per table.
    slots: Vec<[u32; 3]>,
}

impl TopK {
    #[inline]
    pub fn add(&mut self, key: u32, cap: usize) {
        if let Some(s) = self.slots.iter_mut().find(|s| s[0] == key) {
            s[1] = s[1].saturating_add(1);
            return;
        }
        if self.slots.len() < cap {
            self.slots.push([key, 1, 0]);
            return;
        }
        // the lightest counter takes the new key
        if let Some(s) = self.slots.iter_mut().min_by_key(|s| s[1]) {
            let least = s[1];
            *s = [key, least.saturating_add(1), least];
        }
    }

    /// (key, guaranteed count: at least 1), heaviest first.
    pub fn heaviest(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = self.slots.iter().map(|s| (s[0], (s[1] - s[2]).max(1))).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The heaviest key and its count (an upper bound).
    pub fn top(&self) -> Option<(u32, u32)> {
        self.slots.iter().max_by_key(|s| s[1]).map(|s| (s[0], s[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_counts_exactly_then_within_its_error() {
        let mut d = Distinct::default();
        for i in 0..EXACT as u64 {
            d.insert(hash_bytes(&i.to_le_bytes()));
            d.insert(hash_bytes(&i.to_le_bytes()));
        }
        assert_eq!(d.count(), EXACT as f64);
        for n in [1_000u64, 41_200, 200_000] {
            let mut d = Distinct::default();
            for i in 0..n {
                d.insert(hash_bytes(format!("/p/{i}").as_bytes()));
            }
            let err = (d.count() - n as f64).abs() / n as f64;
            assert!(err < 0.15, "{n}: estimated {} ({err:.3})", d.count());
        }
    }

    #[test]
    fn topk_holds_the_heavy_keys() {
        let mut t = TopK::default();
        for i in 0..10_000u32 {
            t.add(1, 16);
            if i % 2 == 0 {
                t.add(2, 16);
            }
            t.add(100 + i, 16);
        }
        let h = t.heaviest();
        assert_eq!(h[0], (1, 10_000), "never evicted: counted exactly");
        assert_eq!(h[1].0, 2);
        assert!(h[1].1 >= 4000, "{h:?}");
        // keys seen once each keep a guaranteed count of 1
        let mut u = TopK::default();
        for i in 0..1000 {
            u.add(i, 16);
        }
        assert!(u.heaviest().iter().all(|k| k.1 == 1));
        assert_eq!(u.heaviest().len(), 16);
    }
}
