//! Whether a User-Agent holds any of the prefilter's needles, on a CPU with
//! AVX2: a table of the needles' first three bytes, and a pass over the
//! User-Agent, 16 places at a time, that finds the places starting with one
//! of them; only those places are compared with the needles that start so.
//! Most browsers' User-Agents have no such place. This is the only `unsafe`
//! code of the policy crate: the AVX2 intrinsics, used only on a CPU that
//! has AVX2, reading only inside the User-Agent and the table.
//!
//! A place's key takes the low five bits of each of its three bytes: the same
//! for both cases of a letter, so a needle found case-insensitively always
//! has its key's entry set (other bytes may share a key: a few more places
//! to compare, never one missed).

/// Keys of 15 bits, one byte each; 3 more so that a four-byte read at any key stays inside.
const KEYS: usize = 1 << 15;
/// The vector pass reads 18 bytes at a time (16 places); a shorter User-Agent is looked at place by place.
const MIN_LEN: usize = 18;

#[derive(Clone)]
pub struct Trigrams {
    /// For each key, 0, or 1 + the place in `groups` of the needles whose first three bytes have it.
    table: Box<[u8; KEYS + 3]>,
    /// The needles (lower case) by key.
    groups: Vec<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for Trigrams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trigrams").field("groups", &self.groups.len()).finish_non_exhaustive()
    }
}

fn key(a: u8, b: u8, c: u8) -> usize {
    ((a as usize & 31) << 10) | ((b as usize & 31) << 5) | (c as usize & 31)
}

impl Trigrams {
    /// None on a CPU without AVX2 (a pass one place at a time would be no
    /// faster than the needles' DFA), when a needle is shorter than three
    /// bytes, or with more than 255 keys.
    pub fn new(needles: &[Vec<u8>]) -> Option<Trigrams> {
        if !avx2() || needles.iter().any(|n| n.len() < 3) {
            return None;
        }
        let mut table: Box<[u8; KEYS + 3]> = vec![0u8; KEYS + 3].into_boxed_slice().try_into().ok()?;
        let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
        for n in needles {
            let k = key(n[0], n[1], n[2]);
            if table[k] == 0 {
                groups.push(Vec::new());
                table[k] = u8::try_from(groups.len()).ok()?;
            }
            groups[table[k] as usize - 1].push(n.to_ascii_lowercase());
        }
        Some(Trigrams { table, groups })
    }

    /// Whether a needle is in `haystack`, ASCII case-insensitively.
    pub fn any(&self, haystack: &[u8]) -> bool {
        if haystack.len() < MIN_LEN {
            return self.any_scalar(haystack);
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: a Trigrams exists only where avx2() found AVX2 on this CPU, and the
            // haystack has at least MIN_LEN bytes.
            unsafe { avx2_pass(self, haystack) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.any_scalar(haystack)
    }

    /// The same, one place at a time.
    pub fn any_scalar(&self, haystack: &[u8]) -> bool {
        (0..haystack.len().saturating_sub(2)).any(|at| self.needle_at(haystack, at))
    }

    /// The table's and the needles' bytes.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Trigrams>() + KEYS + 3 + self.groups.iter().flatten().map(|n| n.len() + 24).sum::<usize>()
    }

    /// Whether a needle starts at `at`.
    fn needle_at(&self, haystack: &[u8], at: usize) -> bool {
        let (Some(a), Some(b), Some(c)) = (haystack.get(at), haystack.get(at + 1), haystack.get(at + 2)) else { return false };
        match self.table[key(*a, *b, *c)] {
            0 => false,
            g => self.groups[g as usize - 1].iter().any(|n| haystack.get(at..at + n.len()).is_some_and(|w| w.eq_ignore_ascii_case(n))),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2() -> bool {
    false
}

/// 16 places at a time: three 16-byte loads at at, at+1 and at+2 give the
/// three bytes of places at..at+15, cut to 5 bits; their 15-bit keys are made
/// in 16-bit lanes, widened to two sets of eight 32-bit indexes, and the table
/// entries gathered (an entry is the low byte of each gathered word). A place
/// with an entry is compared with its needles. The last step overlaps the one
/// before so that it ends at the haystack's end.
///
/// # Safety
/// The CPU must have AVX2, and `haystack` be at least [`MIN_LEN`] bytes long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_pass(t: &Trigrams, haystack: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let n = haystack.len();
    let base = t.table.as_ptr() as *const i32;
    let five = _mm_set1_epi8(31);
    let entry = _mm256_set1_epi32(0xff);
    let zero = _mm256_setzero_si256();
    // the places at..at+15 with an entry, as bits
    let step = |at: usize| {
        // SAFETY: at <= n - MIN_LEN, so the loads (bytes at..at+17) are inside the haystack;
        // every key is below KEYS, so the four bytes gathered at it are inside the table.
        unsafe {
            let p = haystack.as_ptr().add(at);
            let byte = |i: usize| _mm256_cvtepu8_epi16(_mm_and_si128(_mm_loadu_si128(p.add(i) as *const __m128i), five));
            let keys = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16::<10>(byte(0)), _mm256_slli_epi16::<5>(byte(1))), byte(2));
            let low = _mm256_i32gather_epi32::<1>(base, _mm256_cvtepu16_epi32(_mm256_castsi256_si128(keys)));
            let high = _mm256_i32gather_epi32::<1>(base, _mm256_cvtepu16_epi32(_mm256_extracti128_si256::<1>(keys)));
            // most steps: no place has an entry
            if _mm256_testz_si256(_mm256_or_si256(low, high), entry) != 0 {
                0
            } else {
                let set = |g: __m256i| _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_and_si256(g, entry), zero))) as u32;
                set(low) | set(high) << 8
            }
        }
    };
    let found = |at: usize, mut bits: u32| {
        while bits != 0 {
            if t.needle_at(haystack, at + bits.trailing_zeros() as usize) {
                return true;
            }
            bits &= bits - 1;
        }
        false
    };
    // whole steps of 16, then one that ends at the haystack's end (overlapping the one before)
    let last = n - MIN_LEN;
    let mut at = 0;
    while at < last {
        let bits = step(at);
        if bits != 0 && found(at, bits) {
            return true;
        }
        at += 16;
    }
    let bits = step(last);
    bits != 0 && found(last, bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(needles: &[Vec<u8>], h: &[u8]) -> bool {
        let h = h.to_ascii_lowercase();
        needles.iter().any(|n| h.windows(n.len()).any(|w| w == &n[..]))
    }

    #[test]
    fn the_vector_pass_finds_every_needle_and_only_needles() {
        let needles: Vec<Vec<u8>> = ["bot", "crawl", "python-", "zgrab", "go-http", "l9scan", "ia_arch", "ia_x"].iter().map(|n| n.as_bytes().to_vec()).collect();
        let Some(t) = Trigrams::new(&needles) else {
            eprintln!("no AVX2 here: the needles' DFA is what runs");
            return;
        };
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // "bo4" and "BOT" share bot's key; "\xff\x00\x80" has bytes of every bit
        let words: [&[u8]; 10] = [b"Mozilla/5.0 ", b"(Windows NT 10.0; Win64; x64) ", b"BOT", b"bo4", b"Crawl", b"x", b"Python-", b"l9Scan", b"\xff\x00\x80", b"IA_"];
        for _ in 0..50_000 {
            let mut h = Vec::new();
            while h.len() < (next() % 90) as usize {
                if next() % 3 == 0 {
                    h.push((next() % 256) as u8);
                } else {
                    h.extend_from_slice(words[(next() % words.len() as u64) as usize]);
                }
            }
            let expected = naive(&needles, &h);
            assert_eq!(t.any(&h), expected, "{:?}", String::from_utf8_lossy(&h));
            assert_eq!(t.any_scalar(&h), expected, "scalar: {:?}", String::from_utf8_lossy(&h));
        }
        // a needle at each place of a long haystack, the last ones included
        for len in [18usize, 19, 33, 34, 35, 50, 100, 115, 300] {
            for at in 0..len - 2 {
                let mut h = vec![b'.'; len];
                h[at..at + 3].copy_from_slice(b"BoT");
                assert!(t.any(&h), "len {len}, at {at}");
                h[at + 2] = b'4';
                assert!(!t.any(&h), "a key's place that is not the needle: len {len}, at {at}");
            }
        }
    }
}
