//! The places of a User-Agent where a needle may be: a table of the
//! needles' chosen trigrams (three bytes each, see `matcher.rs`), and a pass
//! over the User-Agent that finds the places whose three bytes have an
//! entry, and the places of an `@`. On a CPU with AVX2 the pass looks at 32
//! places at a time; most browsers' User-Agents have no such place, and are
//! answered by the pass alone. This and the memo's tag compare are the
//! policy crate's only `unsafe` code: the AVX2 intrinsics, used only on a CPU
//! that has AVX2, reading only inside the User-Agent and the table.
//!
//! A place's key takes the low five bits of each of its three bytes: the same
//! for both cases of a letter, so a needle found case-insensitively always
//! has its key's entry set (other bytes may share a key: a few more places
//! to compare, never one missed).

/// Keys of 15 bits.
const KEYS: usize = 1 << 15;
/// A step of the vector pass reads 35 bytes (32 places).
#[cfg(target_arch = "x86_64")]
const STEP_READ: usize = 35;

/// The group of the places that hold an `@`.
pub const AT: u16 = u16::MAX;

#[derive(Clone)]
pub struct Trigrams {
    /// For each key, 0, or 1 + its group; one more entry so that a four-byte
    /// read at any key's entry stays inside.
    table: Box<[u16]>,
    groups: usize,
    avx2: bool,
}

impl std::fmt::Debug for Trigrams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trigrams").field("groups", &self.groups).finish_non_exhaustive()
    }
}

/// The key of three bytes.
pub fn key(a: u8, b: u8, c: u8) -> usize {
    (a as usize & 31) | ((b as usize & 31) << 5) | ((c as usize & 31) << 10)
}

impl Trigrams {
    /// A table over `keys`: group `g` is the `g`th distinct key, in order of
    /// first appearance (the caller's groups are numbered the same way).
    /// None with more than 65,534 distinct keys.
    pub fn new(keys: &[usize]) -> Option<Trigrams> {
        let mut table = vec![0u16; KEYS + 1].into_boxed_slice();
        let mut groups = 0usize;
        for k in keys {
            if table[*k] == 0 {
                groups += 1;
                table[*k] = u16::try_from(groups).ok().filter(|g| *g < AT)?;
            }
        }
        Some(Trigrams { table, groups, avx2: avx2() })
    }

    /// The group of a key, if it has one.
    pub fn group(&self, key: usize) -> Option<u16> {
        self.table[key].checked_sub(1)
    }

    /// Calls `visit` with each place of `haystack` whose key has a group, and
    /// each place of an `@` (group [`AT`]), in order of place (a place may be
    /// visited twice), until `visit` answers true; whether it did.
    pub fn visit(&self, haystack: &[u8], mut visit: impl FnMut(usize, u16) -> bool) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is true only where avx2() found AVX2 on this CPU.
            return unsafe { avx2_pass::<true>(self, haystack, &mut visit) };
        }
        self.visit_scalar(haystack, &mut visit)
    }

    /// Whether `haystack` has a place with a group, or an `@`: true wherever
    /// [`Trigrams::visit`] visits a place, without looking at the places.
    pub fn any(&self, haystack: &[u8]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: as in `visit`.
            return unsafe { avx2_pass::<false>(self, haystack, &mut |_, _| true) };
        }
        self.visit_scalar(haystack, &mut |_, _| true)
    }

    /// The same as `visit`, one place at a time (what runs without AVX2, and
    /// what the tests compare the vector pass with).
    pub fn visit_scalar(&self, haystack: &[u8], visit: &mut impl FnMut(usize, u16) -> bool) -> bool {
        for (at, b) in haystack.iter().enumerate() {
            if *b == b'@' && visit(at, AT) {
                return true;
            }
            if let [a, b, c, ..] = haystack[at..] {
                if let Some(g) = self.group(key(a, b, c)) {
                    if visit(at, g) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// The table's bytes.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Trigrams>() + self.table.len() * 2
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
/// low half of each gathered word); the `@`s are found in the first load.
/// A step where some place has an entry or an `@` visits those places (with
/// `VISIT`: else it answers true at once). The last step overlaps the one
/// before so that it ends at the haystack's end (its last place looked at on
/// its own); a haystack shorter than one step is looked at from a copy padded
/// with zeros (a padded place may have an entry, and is then not visited).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_pass<const VISIT: bool>(t: &Trigrams, haystack: &[u8], visit: &mut impl FnMut(usize, u16) -> bool) -> bool {
    if haystack.len() < STEP_READ {
        // SAFETY: per the contract.
        return unsafe { avx2_padded::<VISIT>(t, haystack, visit) };
    }
    // SAFETY: per the contract; the haystack is at least STEP_READ bytes long.
    unsafe { avx2_steps::<VISIT>(t, haystack, haystack.len(), visit) }
}

/// The pass over a haystack shorter than a step, from a padded copy (out of
/// line: the copy's frame is not the long haystacks' to set up).
///
/// # Safety
/// The CPU must have AVX2, and `haystack` be shorter than [`STEP_READ`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn avx2_padded<const VISIT: bool>(t: &Trigrams, haystack: &[u8], visit: &mut impl FnMut(usize, u16) -> bool) -> bool {
    let mut padded = [0u8; STEP_READ];
    padded[..haystack.len()].copy_from_slice(haystack);
    // SAFETY: per the contract; padded is STEP_READ bytes long.
    unsafe { avx2_steps::<VISIT>(t, &padded, haystack.len(), visit) }
}

/// The steps over `bytes` (at least [`STEP_READ`] long: the haystack, or the
/// haystack followed by zeros), visiting the places of the first `len` bytes.
///
/// # Safety
/// The CPU must have AVX2, and `bytes` be at least [`STEP_READ`] bytes long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_steps<const VISIT: bool>(t: &Trigrams, bytes: &[u8], len: usize, visit: &mut impl FnMut(usize, u16) -> bool) -> bool {
    use std::arch::x86_64::*;
    let (entry, zero, at_sign) = (_mm256_set1_epi32(0xffff), _mm256_setzero_si256(), _mm256_set1_epi8(b'@' as i8));
    // whole steps of 32, then one that ends at the end of `bytes` (overlapping the one
    // before), and the last place, which that step's last lane reads but leaves out
    let last = bytes.len() - STEP_READ;
    let mut at = 0;
    loop {
        let at_now = at.min(last);
        // SAFETY: AVX2 per the contract, and at_now <= bytes.len() - STEP_READ.
        let ([a, b, c, d], first) = unsafe { gathered(t, bytes, at_now) };
        let ats = _mm256_cmpeq_epi8(first, at_sign);
        let any = _mm256_or_si256(_mm256_and_si256(_mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d)), entry), ats);
        // most steps: no place has an entry, and there is no '@'
        if _mm256_testz_si256(any, any) == 0 {
            if !VISIT {
                return true;
            }
            // bit j of the load at +o stands for the place +o+4j: spread to bit o+4j
            let lanes = |e: __m256i| _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_and_si256(e, entry), zero))) as usize;
            let places = SPREAD[lanes(a)] | SPREAD[lanes(b)] << 1 | SPREAD[lanes(c)] << 2 | SPREAD[lanes(d)] << 3;
            let at_places = _mm256_movemask_epi8(ats) as u32;
            if visit_places(t, bytes, len, at_now, places, at_places, visit) {
                return true;
            }
        }
        if at_now == last {
            let n = bytes.len();
            let place = n - 3;
            return place + 3 <= len
                && t.group(key(bytes[n - 3], bytes[n - 2], bytes[n - 1])).is_some_and(|g| !VISIT || visit(place, g))
                || (n - 3..n).any(|p| p < len && bytes[p] == b'@' && (!VISIT || visit(p, AT)));
        }
        at += 32;
    }
}

/// The table's words at the keys of the places at+o+4j, j = 0..8, for o = 0..4
/// (an entry is each word's low half), and the 32 bytes at `at`.
///
/// # Safety
/// The CPU must have AVX2, and `at` be at most `bytes.len() - STEP_READ`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn gathered(t: &Trigrams, bytes: &[u8], at: usize) -> ([std::arch::x86_64::__m256i; 4], std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    // each lane's first three bytes, five bits each; then a + 32b (and c) in 16 bits, and
    // (a + 32b) + 1024c in 32: the key of `key()`
    let five = _mm256_set1_epi32(0x001f_1f1f);
    let ab_c = _mm256_set1_epi32(i32::from_le_bytes([1, 32, 1, 0]));
    let abc = _mm256_set1_epi32(1 | 1024 << 16);
    let base = t.table.as_ptr() as *const i32;
    // SAFETY: per the contract the loads (bytes at..at+35) are inside `bytes`; every key is
    // below KEYS, so the four bytes gathered at entry `key` (bytes 2*key..2*key+4) are
    // inside the table of KEYS + 1 entries.
    unsafe {
        let p = bytes.as_ptr().add(at);
        let load = |o: usize| _mm256_loadu_si256(p.add(o) as *const __m256i);
        let first = load(0);
        let gather = |v: __m256i| {
            let lanes = _mm256_and_si256(v, five);
            _mm256_i32gather_epi32::<2>(base, _mm256_madd_epi16(_mm256_maddubs_epi16(lanes, ab_c), abc))
        };
        ([gather(first), gather(load(1)), gather(load(2)), gather(load(3))], first)
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

/// Visits the places of the step at `at` (bit i of `places`: the place at+i
/// has an entry; of `at_places`: it holds an `@`), in order, those inside
/// the first `len` bytes.
#[cfg(target_arch = "x86_64")]
#[cold]
fn visit_places(t: &Trigrams, bytes: &[u8], len: usize, at: usize, places: u32, at_places: u32, visit: &mut impl FnMut(usize, u16) -> bool) -> bool {
    let mut all = places | at_places;
    while all != 0 {
        let i = all.trailing_zeros();
        let p = at + i as usize;
        if at_places & (1 << i) != 0 && p < len && visit(p, AT) {
            return true;
        }
        if places & (1 << i) != 0 && p + 3 <= len {
            if let Some(g) = t.group(key(bytes[p], bytes[p + 1], bytes[p + 2])) {
                if visit(p, g) {
                    return true;
                }
            }
        }
        all &= all - 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_pass_visits_what_the_scalar_pass_visits() {
        let needles: Vec<&[u8]> = vec![b"bot", b"crawl", b"python-", b"zgrab", b"go-http", b"l9scan", b"ia_arch", b"ia_x"];
        let keys: Vec<usize> = needles.iter().map(|n| key(n[0], n[1], n[2])).collect();
        let t = Trigrams::new(&keys).unwrap();
        if !t.avx2 {
            eprintln!("no AVX2 here: the scalar pass is what runs");
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // "bo4" and "BOT" share bot's key; "\xff\x00\x80" has bytes of every bit
        let words: [&[u8]; 11] = [b"Mozilla/5.0 ", b"(Windows NT 10.0; Win64; x64) ", b"BOT", b"bo4", b"Crawl", b"x", b"Python-", b"l9Scan", b"\xff\x00\x80", b"IA_", b"a@b"];
        let collect = |h: &[u8], vector: bool| {
            let mut seen = std::collections::BTreeSet::new();
            let mut f = |p: usize, g: u16| {
                seen.insert((p, g));
                false
            };
            if vector {
                t.visit(h, f);
            } else {
                t.visit_scalar(h, &mut f);
            }
            seen
        };
        for _ in 0..50_000 {
            let mut h = Vec::new();
            while h.len() < (next() % 90) as usize {
                if next() % 3 == 0 {
                    h.push((next() % 256) as u8);
                } else {
                    h.extend_from_slice(words[(next() % words.len() as u64) as usize]);
                }
            }
            let scalar = collect(&h, false);
            assert_eq!(collect(&h, true), scalar, "{:?}", String::from_utf8_lossy(&h));
            assert_eq!(t.any(&h), !scalar.is_empty(), "any: {:?}", String::from_utf8_lossy(&h));
        }
        // a needle's key and an '@' at each place of a long haystack, the last ones included
        for len in [1usize, 2, 3, 4, 17, 18, 19, 33, 34, 35, 36, 37, 50, 66, 67, 68, 69, 100, 115, 300] {
            for at in 0..len {
                let mut h = vec![b'.'; len];
                h[at] = b'@';
                assert_eq!(collect(&h, true).into_iter().collect::<Vec<_>>(), vec![(at, AT)], "@: len {len}, at {at}");
                if at + 3 <= len {
                    let mut h = vec![b'.'; len];
                    h[at..at + 3].copy_from_slice(b"BoT");
                    assert_eq!(collect(&h, true).into_iter().collect::<Vec<_>>(), vec![(at, 0)], "len {len}, at {at}");
                }
            }
        }
    }
}
