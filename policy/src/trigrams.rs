//! Whether a User-Agent holds any of the prefilter's needles, on a CPU with
//! AVX2: a table of the needles' first three bytes, and a pass over the
//! User-Agent, 32 places at a time, that finds the places starting with one
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
/// A step of the vector pass reads 35 bytes (32 places).
#[cfg(target_arch = "x86_64")]
const STEP_READ: usize = 35;

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
    (a as usize & 31) | ((b as usize & 31) << 5) | ((c as usize & 31) << 10)
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
        if haystack.len() < 3 {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: a Trigrams exists only where avx2() found AVX2 on this CPU.
            unsafe { avx2_pass::<true>(self, haystack) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.any_scalar(haystack)
    }

    /// Whether some place of `haystack` has a needle's first three bytes, as
    /// the table keeps them (five bits of each): true wherever [`Trigrams::any`]
    /// is, and for some haystacks without a needle. The vector pass without its
    /// comparisons: enough to know that a User-Agent the memo already holds is
    /// one (a User-Agent goes into the memo only when `any` is true for it).
    pub fn any_start(&self, haystack: &[u8]) -> bool {
        if haystack.len() < 3 {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: a Trigrams exists only where avx2() found AVX2 on this CPU.
            unsafe { avx2_pass::<false>(self, haystack) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.any_scalar(haystack)
    }

    /// The same as `any`, one place at a time (what the tests compare the vector pass with).
    #[cfg(any(test, not(target_arch = "x86_64")))]
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

/// 32 places at a time: four 32-byte loads at at, at+1, at+2 and at+3; in
/// the load at at+o, the 32-bit lane j holds the bytes of place at+o+4j
/// first. Each lane is cut to its first three bytes, five bits each, and
/// made its key with two multiply-adds (`a + 32b` and `c` in 16 bits, then
/// `+ 1024c` in 32), so that the four loads give the keys of the 32 places
/// as 32-bit indexes, and four gathers the table's entries (an entry is the
/// low byte of each gathered word). A place with an entry is compared with
/// its needles. The last step overlaps the one before so that it ends at
/// the haystack's end (its last place compared on its own); a haystack shorter than one step is looked at from a
/// copy padded with zeros (a padded place may have an entry, and then its
/// comparison, on the haystack itself, finds no needle).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_pass<const COMPARE: bool>(t: &Trigrams, haystack: &[u8]) -> bool {
    if haystack.len() < STEP_READ {
        // SAFETY: per the contract.
        return unsafe { avx2_padded::<COMPARE>(t, haystack) };
    }
    // SAFETY: per the contract; the haystack is at least STEP_READ bytes long.
    unsafe { avx2_steps::<COMPARE>(t, haystack, haystack) }
}

/// The pass over a haystack shorter than a step, from a padded copy (out of
/// line: the copy's frame is not the long haystacks' to set up).
///
/// # Safety
/// The CPU must have AVX2, and `haystack` be shorter than [`STEP_READ`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn avx2_padded<const COMPARE: bool>(t: &Trigrams, haystack: &[u8]) -> bool {
    let mut padded = [0u8; STEP_READ];
    padded[..haystack.len()].copy_from_slice(haystack);
    // SAFETY: per the contract; padded is STEP_READ bytes long.
    unsafe { avx2_steps::<COMPARE>(t, &padded, haystack) }
}

/// The steps over `bytes` (at least [`STEP_READ`] long, and `haystack`
/// followed by zeros), the places compared in `haystack` (without `COMPARE`:
/// true at the first place with an entry).
///
/// # Safety
/// The CPU must have AVX2, and `bytes` be at least [`STEP_READ`] bytes long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_steps<const COMPARE: bool>(t: &Trigrams, bytes: &[u8], haystack: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let (entry, zero) = (_mm256_set1_epi32(0xff), _mm256_setzero_si256());
    // whole steps of 32, then one that ends at the end of `bytes` (overlapping the one
    // before), and the last place, which that step's last lane reads but leaves out
    let last = bytes.len() - STEP_READ;
    let mut at = 0;
    loop {
        let at_now = at.min(last);
        // SAFETY: AVX2 per the contract, and at_now <= bytes.len() - STEP_READ.
        let [a, b, c, d] = unsafe { gathered(t, bytes, at_now) };
        let any = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
        // most steps: no place has an entry
        if _mm256_testz_si256(any, entry) == 0 {
            if !COMPARE {
                return true;
            }
            // bit j of the load at +o stands for the place +o+4j: spread to bit o+4j
            let lanes = |e: __m256i| _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_and_si256(e, entry), zero))) as usize;
            let places = SPREAD[lanes(a)] | SPREAD[lanes(b)] << 1 | SPREAD[lanes(c)] << 2 | SPREAD[lanes(d)] << 3;
            if compare_places(t, haystack, at_now, places) {
                return true;
            }
        }
        if at_now == last {
            let n = bytes.len();
            return t.table[key(bytes[n - 3], bytes[n - 2], bytes[n - 1])] != 0 && (!COMPARE || t.needle_at(haystack, n - 3));
        }
        at += 32;
    }
}

/// The table's words at the keys of the places at+o+4j, j = 0..8, for o = 0..4
/// (an entry is each word's low byte).
///
/// # Safety
/// The CPU must have AVX2, and `at` be at most `bytes.len() - STEP_READ`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn gathered(t: &Trigrams, bytes: &[u8], at: usize) -> [std::arch::x86_64::__m256i; 4] {
    use std::arch::x86_64::*;
    // each lane's first three bytes, five bits each; then a + 32b (and c) in 16 bits, and
    // (a + 32b) + 1024c in 32: the key of `key()`
    let five = _mm256_set1_epi32(0x001f_1f1f);
    let ab_c = _mm256_set1_epi32(i32::from_le_bytes([1, 32, 1, 0]));
    let abc = _mm256_set1_epi32(1 | 1024 << 16);
    let base = t.table.as_ptr() as *const i32;
    // SAFETY: per the contract the loads (bytes at..at+35) are inside `bytes`; every key is
    // below KEYS, so the four bytes gathered at it are inside the table.
    unsafe {
        let p = bytes.as_ptr().add(at);
        let gather = |o: usize| {
            let lanes = _mm256_and_si256(_mm256_loadu_si256(p.add(o) as *const __m256i), five);
            _mm256_i32gather_epi32::<1>(base, _mm256_madd_epi16(_mm256_maddubs_epi16(lanes, ab_c), abc))
        };
        [gather(0), gather(1), gather(2), gather(3)]
    }
}

/// Bit j of a byte moved to bit 4j.
#[cfg(target_arch = "x86_64")]
const SPREAD: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut m = 0;
    while m < 256 {
        let mut j = 0;
        while j < 8 {
            if m & (1 << j) != 0 {
                t[m] |= 1 << (4 * j);
            }
            j += 1;
        }
        m += 1;
    }
    t
};

/// Whether a needle starts at one of the places of the step at `at` that
/// have an entry (bit i of `places`: the place at+i), in order.
#[cfg(target_arch = "x86_64")]
#[cold]
fn compare_places(t: &Trigrams, haystack: &[u8], at: usize, mut places: u32) -> bool {
    while places != 0 {
        if t.needle_at(haystack, at + places.trailing_zeros() as usize) {
            return true;
        }
        places &= places - 1;
    }
    false
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
            // the pass without its comparisons never misses a needle the comparisons find
            assert!(!expected || t.any_start(&h), "any_start: {:?}", String::from_utf8_lossy(&h));
        }
        // a needle at each place of a long haystack, the last ones included
        for len in [3usize, 4, 17, 18, 19, 33, 34, 35, 36, 37, 50, 66, 67, 68, 69, 100, 115, 300] {
            for at in 0..len - 2 {
                let mut h = vec![b'.'; len];
                h[at..at + 3].copy_from_slice(b"BoT");
                assert!(t.any(&h), "len {len}, at {at}");
                assert!(t.any_start(&h), "any_start: len {len}, at {at}");
                h[at + 2] = b'4';
                assert!(!t.any(&h), "a key's place that is not the needle: len {len}, at {at}");
            }
        }
    }
}
