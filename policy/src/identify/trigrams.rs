//! The places of a User-Agent where a needle may be: the needles' chosen
//! grams (see `matcher.rs`), and a pass over the User-Agent that finds the
//! places whose four bytes are one of them, and the places of an `@`. On a
//! CPU with AVX2 the pass looks at 32 places at a time; most User-Agents,
//! browsers' and random strings alike, have no such place, and are answered
//! by the pass alone. This and the memo's tag compare are the policy crate's
//! only `unsafe` code: the AVX2 intrinsics, used only on a CPU that has AVX2,
//! reading only inside the User-Agent and the tables.
//!
//! A needle's gram is four of its bytes (a three-byte needle's, its three
//! followed by any byte). A place's keys take the low five bits of each
//! byte: the same for both cases of a letter, so a needle found
//! case-insensitively always has its key's entry set (other bytes may share
//! a key: a few more places to compare, never one missed). Two tables:
//!
//! - for each key of three bytes (15 bits), a word whose bit `31 - d` says
//!   whether those three and a fourth byte of key `d` (five bits) are a
//!   gram, which the vector pass looks up 32 places at a time: a browser's
//!   User-Agent has no place with a gram, and of random strings of 60 to 160
//!   letters, digits and punctuation about one in nine has one (with three
//!   bytes alone, four in five would);
//! - the group of each gram's first three bytes, looked up for the places
//!   that have a gram.
//!
//! A place's four bytes are read with zeros past the end of the User-Agent,
//! so that a three-byte needle is found at its very end.

/// Keys of 15 bits: a place's first three bytes.
const KEYS: usize = 1 << 15;
/// A step of the vector pass reads 35 bytes (32 places).
#[cfg(target_arch = "x86_64")]
const STEP_READ: usize = 35;

/// The group of the places that hold an `@`.
pub const AT: u16 = u16::MAX;

/// A needle's gram: the key of three of its bytes, and the byte beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gram {
    pub key: usize,
    pub beside: Beside,
}

/// The fourth byte of a gram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Beside {
    /// The byte after the three.
    After(u8),
    /// Any byte.
    Any,
}

#[derive(Clone)]
pub struct Trigrams {
    /// For each three-byte key, 0, or 1 + its group.
    table: Box<[u16]>,
    /// For each three-byte key, bit `31 - d`: that key and a fourth byte of
    /// key `d` are a gram.
    grams: Box<[u32]>,
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
    /// The tables of `grams`: group `g` is the `g`th distinct three-byte key,
    /// in order of first appearance (the caller's groups are numbered the
    /// same way). None with more than 65,534 distinct keys.
    pub fn new(grams: &[Gram]) -> Option<Trigrams> {
        let mut table = vec![0u16; KEYS].into_boxed_slice();
        let mut fourths = vec![0u32; KEYS].into_boxed_slice();
        let mut groups = 0usize;
        for g in grams {
            if table[g.key] == 0 {
                groups += 1;
                table[g.key] = u16::try_from(groups).ok().filter(|n| *n < AT)?;
            }
            fourths[g.key] |= match g.beside {
                Beside::After(d) => 1u32 << (31 - (d & 31)),
                Beside::Any => u32::MAX,
            };
        }
        Some(Trigrams { table, grams: fourths, groups, avx2: avx2() })
    }

    /// The group of the place at `at` (with three bytes at least), if its
    /// four bytes are a gram (a zero for the fourth past the end of `haystack`).
    fn gram_at(&self, haystack: &[u8], at: usize) -> Option<u16> {
        let Some(&[a, b, c]) = haystack.get(at..at + 3) else { return None };
        let three = key(a, b, c);
        let d = haystack.get(at + 3).map_or(0, |d| d & 31);
        if self.grams[three] << d & 1 << 31 == 0 {
            return None;
        }
        self.group(three)
    }

    /// The group of a key, if it has one.
    pub fn group(&self, key: usize) -> Option<u16> {
        self.table[key].checked_sub(1)
    }

    /// Calls `visit` with each place of `haystack` whose four bytes' key is a
    /// gram's (with the group of its first three), and each place of an `@`
    /// (group [`AT`]), in order of place (a place may be
    /// visited twice), until `visit` answers true; whether it did.
    pub fn visit(&self, haystack: &[u8], mut visit: impl FnMut(usize, u16) -> bool) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is true only where avx2() found AVX2 on this CPU.
            return unsafe { avx2_pass::<true>(self, haystack, &mut visit) };
        }
        self.visit_scalar(haystack, &mut visit)
    }

    /// Whether `haystack` has a place with a gram, or an `@`: whether
    /// [`Trigrams::visit`] visits a place, without looking at the places.
    #[inline(always)]
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
            if at + 3 <= haystack.len() {
                if let Some(g) = self.gram_at(haystack, at) {
                    if visit(at, g) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// The tables' bytes.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Trigrams>() + self.table.len() * 2 + self.grams.len() * 4
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
/// the load at at+o, the 32-bit lane j holds the four bytes of place at+o+4j.
/// Each lane is cut to five bits a byte; its first three made their key with
/// two multiply-adds (`a + 32b` and `c` in 16 bits, then `+ 1024c` in 32),
/// four gathers read the 32 places' words, and each word is shifted left by
/// its lane's fourth byte, so that the top bit says whether the place has a
/// gram; the `@`s are found in the first load. Most steps have neither. A
/// step that has one visits its places (with `VISIT`: else it answers true).
/// The last step overlaps the one before so that it ends at the haystack's
/// end (its last place looked at on its own); a haystack shorter than one
/// step is looked at from a copy padded with zeros (a padded place may have
/// a gram, and is then not visited).
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
    let (top, at_sign) = (_mm256_set1_epi32(i32::MIN), _mm256_set1_epi8(b'@' as i8));
    let haystack = &bytes[..len];
    // whole steps of 32, then one that ends at the end of `bytes` (overlapping the one
    // before), and the last place, which that step's last lane reads but leaves out
    let last = bytes.len() - STEP_READ;
    let mut at = 0;
    loop {
        let at_now = at.min(last);
        // SAFETY: AVX2 per the contract, and at_now <= bytes.len() - STEP_READ.
        let ([a, b, c, d], first) = unsafe { grams_of_step(t, bytes, at_now) };
        let ats = _mm256_cmpeq_epi8(first, at_sign);
        let any = _mm256_or_si256(_mm256_and_si256(_mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d)), top), ats);
        // most steps: no place has a gram, and there is no '@'
        if _mm256_testz_si256(any, any) == 0 {
            if !VISIT {
                return true;
            }
            // bit j of the load at +o stands for the place +o+4j: spread to bit o+4j
            let lanes = |e: __m256i| _mm256_movemask_ps(_mm256_castsi256_ps(e)) as usize;
            let places = SPREAD[lanes(a)] | SPREAD[lanes(b)] << 1 | SPREAD[lanes(c)] << 2 | SPREAD[lanes(d)] << 3;
            let at_places = _mm256_movemask_epi8(ats) as u32;
            if visit_places(t, haystack, at_now, places, at_places, visit) {
                return true;
            }
        }
        if at_now == last {
            let n = bytes.len();
            let place = n - 3;
            return place + 3 <= len && t.gram_at(haystack, place).is_some_and(|g| !VISIT || visit(place, g))
                || (n - 3..n).any(|p| p < len && bytes[p] == b'@' && (!VISIT || visit(p, AT)));
        }
        at += 32;
    }
}

/// For o = 0..4, whether the places at+o+4j, j = 0..8, have a gram (each
/// lane's top bit), and the 32 bytes at `at`.
///
/// # Safety
/// The CPU must have AVX2, and `at` be at most `bytes.len() - STEP_READ`.
#[cfg(target_arch = "x86_64")]
#[allow(
    clippy::multiple_unsafe_ops_per_block,
    reason = "each intrinsic is unsafe only for the CPU feature, which the caller checked; the SAFETY comment in it covers the loads"
)]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn grams_of_step(t: &Trigrams, bytes: &[u8], at: usize) -> ([std::arch::x86_64::__m256i; 4], std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    let five = _mm256_set1_epi32(0x1f1f_1f1f);
    // the first three bytes: a + 32b and c in 16 bits, then (a + 32b) + 1024c in 32
    let ab_c = _mm256_set1_epi32(i32::from_le_bytes([1, 32, 1, 0]));
    let abc = _mm256_set1_epi32(1 | 1024 << 16);
    let base = t.grams.as_ptr() as *const i32;
    // SAFETY: per the contract the loads (bytes at..at+35) are inside `bytes`; every key is
    // below KEYS, so the word gathered at `key` is inside the table of KEYS words.
    unsafe {
        let p = bytes.as_ptr().add(at);
        let load = |o: usize| _mm256_loadu_si256(p.add(o) as *const __m256i);
        let first = load(0);
        let gram = |v: __m256i| {
            let lanes = _mm256_and_si256(v, five);
            let words = _mm256_i32gather_epi32::<4>(base, _mm256_madd_epi16(_mm256_maddubs_epi16(lanes, ab_c), abc));
            // the fourth byte's bit (31 - d) to the top
            _mm256_sllv_epi32(words, _mm256_srli_epi32::<24>(lanes))
        };
        ([gram(first), gram(load(1)), gram(load(2)), gram(load(3))], first)
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

/// Visits the places of the step at `at` of `haystack` (bit i of `places`:
/// the place at+i has a gram; of `at_places`: it holds an `@`), in order,
/// those inside the haystack.
#[cfg(target_arch = "x86_64")]
#[cold]
fn visit_places(t: &Trigrams, haystack: &[u8], at: usize, places: u32, at_places: u32, visit: &mut impl FnMut(usize, u16) -> bool) -> bool {
    let mut all = places | at_places;
    while all != 0 {
        let i = all.trailing_zeros();
        let p = at + i as usize;
        if at_places & (1 << i) != 0 && p < haystack.len() && visit(p, AT) {
            return true;
        }
        if places & (1 << i) != 0 && p + 3 <= haystack.len() {
            if let Some(g) = t.group(key(haystack[p], haystack[p + 1], haystack[p + 2])) {
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
        let grams: Vec<Gram> =
            needles.iter().map(|n| Gram { key: key(n[0], n[1], n[2]), beside: n.get(3).map_or(Beside::Any, |d| Beside::After(*d)) }).collect();
        let t = Trigrams::new(&grams).unwrap();
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
        // "bo4" and "BOT" share bot's key, "CRA" crawl's first three bytes (without its
        // fourth); "\xff\x00\x80" has bytes of every bit
        let words: [&[u8]; 13] = [
            b"Mozilla/5.0 ",
            b"(Windows NT 10.0; Win64; x64) ",
            b"BOT",
            b"bo4",
            b"Crawl",
            b"CRA",
            b"x",
            b"Python-",
            b"l9Scan",
            b"\xff\x00\x80",
            b"IA_",
            b"a@b",
            b"zgRA",
        ];
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
                    // crawl's first three bytes are not its gram: its fourth byte is one
                    h[at..at + 3].copy_from_slice(b"cRa");
                    assert!(collect(&h, true).is_empty(), "cra: len {len}, at {at}");
                }
                if at + 4 <= len {
                    let mut h = vec![b'.'; len];
                    h[at..at + 4].copy_from_slice(b"cRaW");
                    assert_eq!(collect(&h, true).into_iter().collect::<Vec<_>>(), vec![(at, 1)], "craw: len {len}, at {at}");
                }
            }
        }
    }
}
