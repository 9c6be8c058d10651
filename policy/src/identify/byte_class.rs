//! A set of bytes, and how many bytes of the set start a string: 32 at a
//! time on a CPU with AVX2 (the bot detector's script shape measures the
//! first product's name of every User-Agent no pass has turned away, and a
//! farm's random strings are all of that kind). The vector scan is one of
//! the policy crate's few `unsafe` places: AVX2 intrinsics, used only on a
//! CPU that has AVX2, reading only inside the string.
//!
//! A byte is in the set when `low[b & 15] & high[b >> 4]` is not zero: each
//! high nibble's row (the low nibbles it takes) is given a bucket, one bit,
//! and the low nibbles of a row carry its bucket's bit. Eight distinct rows
//! at most; the tables are built when the program is compiled.

pub struct ByteClass {
    member: [bool; 256],
    low: [u8; 16],
    high: [u8; 16],
}

impl ByteClass {
    /// The set of the bytes `member` marks. Fails to compile (a panic in a
    /// constant) for a set whose high nibbles have more than eight distinct rows.
    pub const fn new(member: [bool; 256]) -> ByteClass {
        let mut rows = [0u16; 16];
        let mut b = 0;
        while b < 256 {
            if member[b] {
                rows[b >> 4] |= 1 << (b & 15);
            }
            b += 1;
        }
        // the buckets' rows, in order of first appearance
        let (mut buckets, mut used) = ([0u16; 8], 0);
        let (mut low, mut high) = ([0u8; 16], [0u8; 16]);
        let mut h = 0;
        while h < 16 {
            if rows[h] != 0 {
                let mut i = 0;
                while i < used && buckets[i] != rows[h] {
                    i += 1;
                }
                if i == used {
                    assert!(used < 8, "a byte class has at most eight distinct rows of high nibbles");
                    buckets[used] = rows[h];
                    used += 1;
                }
                high[h] = 1 << i;
            }
            h += 1;
        }
        let mut i = 0;
        while i < used {
            let mut l = 0;
            while l < 16 {
                if buckets[i] & (1 << l) != 0 {
                    low[l] |= 1 << i;
                }
                l += 1;
            }
            i += 1;
        }
        ByteClass { member, low, high }
    }

    pub fn contains(&self, b: u8) -> bool {
        self.member[usize::from(b)]
    }

    /// How many bytes of the set start `s`.
    pub fn leading(&self, s: &[u8]) -> usize {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.leading_avx2(s) };
        }
        self.leading_scalar(s)
    }

    /// One byte at a time: what runs without AVX2, what the vector scan ends
    /// with, and what the tests compare it with.
    fn leading_scalar(&self, s: &[u8]) -> usize {
        s.iter().position(|b| !self.contains(*b)).unwrap_or(s.len())
    }

    /// 32 bytes at a time, then the last ones one at a time.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[allow(
        clippy::multiple_unsafe_ops_per_block,
        reason = "each intrinsic is unsafe only for the CPU feature, which the caller checked; the SAFETY comment in it covers the loads"
    )]
    #[target_feature(enable = "avx2")]
    unsafe fn leading_avx2(&self, s: &[u8]) -> usize {
        use std::arch::x86_64::*;
        // SAFETY: the tables are 16 bytes each (loaded into both halves); every load reads
        // s[at..at + 32] with at + 32 <= s.len().
        unsafe {
            let low = _mm256_broadcastsi128_si256(_mm_loadu_si128(self.low.as_ptr() as *const __m128i));
            let high = _mm256_broadcastsi128_si256(_mm_loadu_si128(self.high.as_ptr() as *const __m128i));
            let nibble = _mm256_set1_epi8(0x0f);
            let mut at = 0;
            while at + 32 <= s.len() {
                let v = _mm256_loadu_si256(s.as_ptr().add(at) as *const __m256i);
                let lo = _mm256_shuffle_epi8(low, _mm256_and_si256(v, nibble));
                let hi = _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble));
                // a byte outside the set: its buckets are zero
                let outside = _mm256_cmpeq_epi8(_mm256_and_si256(lo, hi), _mm256_setzero_si256());
                let mask = _mm256_movemask_epi8(outside) as u32;
                if mask != 0 {
                    return at + mask.trailing_zeros() as usize;
                }
                at += 32;
            }
            at + self.leading_scalar(&s[at..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(f: fn(u8) -> bool) -> [bool; 256] {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 256 {
            t[b] = f(b as u8);
            b += 1;
        }
        t
    }

    #[test]
    fn the_vector_scan_agrees_with_one_byte_at_a_time() {
        let classes = [
            ByteClass::new(table(|c| c.is_ascii_alphanumeric() || matches!(c, b' ' | b'.' | b'_' | b':' | b'%' | b'-'))),
            ByteClass::new(table(|c| c.is_ascii_digit())),
            ByteClass::new(table(|c| c >= 0x80 || c == 0)),
            ByteClass::new([false; 256]),
            ByteClass::new([true; 256]),
        ];
        // every byte is judged as the table says
        for c in &classes {
            for b in 0..=255u8 {
                assert_eq!((c.low[usize::from(b & 15)] & c.high[usize::from(b >> 4)]) != 0, c.contains(b), "byte {b:#x}");
            }
        }
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let len = (next() % 140) as usize;
            // mostly bytes of the first class, so that runs cross the 32-byte steps
            let s: Vec<u8> = (0..len).map(|_| if next() % 40 == 0 { (next() % 256) as u8 } else { b"aZ09 ._:%-"[(next() % 10) as usize] }).collect();
            for c in &classes {
                assert_eq!(c.leading(&s), c.leading_scalar(&s), "{s:?}");
            }
        }
    }
}
