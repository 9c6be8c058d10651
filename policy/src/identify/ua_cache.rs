//! A worker's memo of User-Agent → catalogue agent (and, for a bot the
//! catalogue does not name, where its product token is), for the
//! User-Agents the matcher's pass cannot answer: crawlers, libraries,
//! scanners. (A browser's User-Agent is answered by the pass and never
//! stored: a client rotating browser User-Agents cannot push the crawlers'
//! answers out.)
//!
//! Classification depends on the User-Agent alone, and a site sees the same
//! crawler User-Agents over and over, so each nginx worker keeps the answers:
//! a hit costs a hash and a compare instead of a DFA search. The table is
//! set-associative: [`SETS`] sets of [`WAYS`] entries, the least recently
//! used entry of a set replaced, so thousands of User-Agents in rotation keep
//! their entries; its size is bounded (keys up to [`MAX_KEY`] bytes, about
//! 2.2 MiB in all, an entry's key allocated when it stores its first),
//! whatever clients send. The set of a key comes from a
//! hash seeded at random in each worker, so no client can aim its
//! User-Agents at the set of another's.

/// Sets in the table (a power of two).
pub const SETS: usize = 512;
/// Entries per set.
pub const WAYS: usize = 16;
/// User-Agents longer than this are classified every time, never stored.
pub const MAX_KEY: usize = 256;

const ENTRIES: usize = SETS * WAYS;
const EMPTY: u16 = u16::MAX;

/// What classifying a User-Agent found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Classified {
    /// The catalogue agent, by its place in the catalogue.
    pub agent: Option<usize>,
    /// For a bot the catalogue does not name, its product token's start and
    /// length in the User-Agent (see [`crate::detector::Bot`]);
    /// kept up to 255 bytes long (budget names keep fewer).
    pub token: Option<(usize, usize)>,
}

pub struct UaCache {
    /// Each entry's key, allocated when the entry stores its first one (and
    /// reused after): the table's memory grows with the crawlers a worker
    /// sees, to about 2.2 MiB at most.
    keys: Box<[Option<Box<[u8; MAX_KEY]>>]>,
    lens: Box<[u16]>,
    /// The hash's high bits, compared before the key.
    tags: Box<[u32]>,
    /// When each entry was last used (a counter), for the least recently used.
    used: Box<[u32]>,
    /// The cached answer: the agent index + 1, or 0 for "no agent".
    answers: Box<[u32]>,
    /// The token: start << 8 | length, or 0 for none.
    tokens: Box<[u16]>,
    clock: u32,
    seed: u64,
    /// [`hash_key`] of the seed.
    key: u64,
}

impl Default for UaCache {
    fn default() -> Self {
        UaCache::with_seed(crate::random_u64())
    }
}

impl UaCache {
    fn with_seed(seed: u64) -> Self {
        UaCache {
            keys: (0..ENTRIES).map(|_| None).collect(),
            lens: vec![EMPTY; ENTRIES].into_boxed_slice(),
            tags: vec![0u32; ENTRIES].into_boxed_slice(),
            used: vec![0u32; ENTRIES].into_boxed_slice(),
            answers: vec![0u32; ENTRIES].into_boxed_slice(),
            tokens: vec![0u16; ENTRIES].into_boxed_slice(),
            clock: 0,
            seed,
            key: hash_key(seed),
        }
    }

    /// The answer for `ua`: from the table, or from `classify`, which is then
    /// stored. `may_match` is the catalogue's cheap pass: false for a
    /// User-Agent that no agent and no needle of the detector can name (a
    /// browser's), whose answer is the default one, never stored; `classify`
    /// answers None for another User-Agent not to keep.
    ///
    /// The pass runs before the table for most User-Agents, since most are
    /// browsers', which it answers alone. A User-Agent that ends with a
    /// comment, as crawlers' do (`(compatible; Googlebot/2.1;
    /// +http://www.google.com/bot.html)`) and few browsers' do, is looked up
    /// first: a crawler the table holds is answered without the pass. Both
    /// orders give the same answer; only the cost differs.
    ///
    /// A caller may run the pass itself before it borrows the table (where
    /// [`UaCache::table_first`] is false), and give a `may_match` that answers
    /// true.
    pub fn get_or_classify(&mut self, ua: &[u8], may_match: impl FnOnce(&[u8]) -> bool, classify: impl FnOnce(&[u8]) -> Option<Classified>) -> Classified {
        let table_first = UaCache::table_first(ua);
        let mut may_match = Some(may_match);
        let mut passed = |ua: &[u8]| may_match.take().is_none_or(|m| m(ua));
        if !table_first && !passed(ua) {
            return Classified::default();
        }
        if ua.len() > MAX_KEY {
            return if passed(ua) { classify(ua).unwrap_or_default() } else { Classified::default() };
        }
        let h = hash(self.seed, self.key, ua);
        let set = (h as usize & (SETS - 1)) * WAYS;
        let tag = (h >> 32) as u32;
        self.clock = self.clock.wrapping_add(1);
        // a hit first, by the tags alone (the key compared only where a tag matches): the
        // set's sixteen tags compared at once into a mask, its places then in order ...
        let tags: &[u32; WAYS] = self.tags[set..set + WAYS].try_into().expect("a set is WAYS entries");
        let mut matching = matching_tags(tags, tag);
        while matching != 0 {
            let e = set + matching.trailing_zeros() as usize;
            matching &= matching - 1;
            if usize::from(self.lens[e]) == ua.len() && self.keys[e].as_ref().is_some_and(|k| k[..ua.len()] == *ua) {
                self.used[e] = self.clock;
                let t = self.tokens[e];
                return Classified {
                    agent: self.answers[e].checked_sub(1).map(|i| i as usize),
                    token: (t != 0).then_some(((t >> 8) as usize, (t & 0xff) as usize)),
                };
            }
        }
        // ... and only on a miss the pass (if it has not run) and the victim: an empty entry
        // first, else the one unused the longest (by wrapping age)
        if !passed(ua) {
            return Classified::default();
        }
        let Some(mut answer) = classify(ua) else { return Classified::default() };
        let age = |i: usize| if self.lens[i] == EMPTY { u32::MAX } else { self.clock.wrapping_sub(self.used[i]) };
        let mut victim = set;
        for e in set + 1..set + WAYS {
            if age(e) > age(victim) {
                victim = e;
            }
        }
        // a key of at most MAX_KEY (256) bytes: the token starts before 256
        answer.token = answer.token.map(|(start, len)| (start, len.min(255)));
        let e = victim;
        self.keys[e].get_or_insert_with(|| Box::new([0u8; MAX_KEY]))[..ua.len()].copy_from_slice(ua);
        self.lens[e] = ua.len() as u16;
        self.tags[e] = tag;
        self.used[e] = self.clock;
        self.answers[e] = answer.agent.map_or(0, |i| i as u32 + 1);
        self.tokens[e] = answer.token.map_or(0, |(start, len)| (start as u16) << 8 | len as u16);
        answer
    }

    /// Whether `ua` is looked up in the table before the pass: it ends with a
    /// comment.
    pub fn table_first(ua: &[u8]) -> bool {
        ua.last() == Some(&b')')
    }

    /// The table's memory when every set holds keys.
    pub fn memory_usage() -> usize {
        ENTRIES * (MAX_KEY + 8 + 2 + 4 + 4 + 4 + 2)
    }
}

/// Bit i set where `tags[i] == tag`: with SSE2, four compares of four tags each.
#[cfg(target_arch = "x86_64")]
#[allow(
    clippy::multiple_unsafe_ops_per_block,
    reason = "each intrinsic is unsafe only for SSE2, which every x86_64 CPU has; the SAFETY comment below covers the loads"
)]
fn matching_tags(tags: &[u32; WAYS], tag: u32) -> u32 {
    use std::arch::x86_64::*;
    let mut mask = 0u32;
    // SAFETY: SSE2 is part of x86_64 itself (every such CPU has it, and the target
    // enables it); each load reads four of `tags`' u32s, 16 bytes inside the array.
    unsafe {
        let want = _mm_set1_epi32(tag as i32);
        for (i, four) in tags.chunks_exact(4).enumerate() {
            let v = _mm_loadu_si128(four.as_ptr() as *const __m128i);
            mask |= (_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, want))) as u32) << (4 * i);
        }
    }
    mask
}

#[cfg(not(target_arch = "x86_64"))]
fn matching_tags(tags: &[u32; WAYS], tag: u32) -> u32 {
    tags.iter().enumerate().fold(0, |m, (i, t)| m | u32::from(*t == tag) << i)
}

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;

/// 64 × 64 → 128-bit multiply, folded to 64 bits.
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    p as u64 ^ (p >> 64) as u64
}

/// The key [`hash`] mixes each block's first word with, made from the seed:
/// both sides of each multiply carry the seed, since a word equal to a
/// side's key zeroes the product and drops what came before, and so no key
/// may be a constant a client can send.
fn hash_key(seed: u64) -> u64 {
    fold(seed ^ P0, seed.rotate_left(32) ^ P1)
}

/// A fast, non-cryptographic hash of the bytes, from a per-worker random
/// seed and its key: sixteen bytes at a time, each block's two words mixed
/// into the state by one folded multiply (wyhash's mixing), the last block
/// overlapping the one before. Collisions only cost a miss: the key is
/// always compared in full.
fn hash(seed: u64, key: u64, bytes: &[u8]) -> u64 {
    // eight bytes from `at` of a slice that has them (else zeros, which never happens)
    fn word(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b.get(at..at + 8).and_then(|w| w.try_into().ok()).unwrap_or_default())
    }
    let n = bytes.len();
    let mut h = seed ^ n as u64;
    let mut rest = bytes;
    while let Some((block, after)) = rest.split_first_chunk::<16>().filter(|(_, after)| !after.is_empty()) {
        h = fold(word(block, 0) ^ key, word(block, 8) ^ h);
        rest = after;
    }
    // the last sixteen bytes (fewer: eight and eight overlapping, or one word padded with zeros)
    let (a, b) = match n {
        16.. => (word(bytes, n - 16), word(bytes, n - 8)),
        8.. => (word(bytes, 0), word(bytes, n - 8)),
        _ => {
            let mut tail = [0u8; 8];
            tail[..n].copy_from_slice(bytes);
            (u64::from_le_bytes(tail), 0)
        }
    };
    h = fold(a ^ key, b ^ h);
    fold(h ^ P1, n as u64 ^ key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent where the key has a '#', and a "token" from there to the end.
    fn classify(ua: &[u8]) -> Option<Classified> {
        let at = ua.iter().position(|b| *b == b'#');
        Some(Classified { agent: at, token: at.map(|i| (i, ua.len() - i)) })
    }

    #[test]
    fn the_tag_mask_is_each_way_compared() {
        let mut tags = [0u32; WAYS];
        for (i, t) in tags.iter_mut().enumerate() {
            *t = if i % 3 == 0 { 7 } else { i as u32 * 0x0101_0101 };
        }
        for tag in [7u32, 0, 0x0101_0101, 0x0f0f_0f0f, u32::MAX] {
            let scalar = tags.iter().enumerate().fold(0u32, |m, (i, t)| m | u32::from(*t == tag) << i);
            assert_eq!(matching_tags(&tags, tag), scalar, "{tag:#x}");
        }
    }

    /// A User-Agent that ends with a comment is looked up before the pass: a
    /// hit asks neither the pass nor the classifier. Any other asks the pass
    /// first. Either way, what the pass refuses is never classified nor stored.
    #[test]
    fn a_comment_at_the_end_is_looked_up_before_the_pass() {
        let mut cache = UaCache::with_seed(0x5eed);
        let crawler = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        let (mut passes, mut classified) = (0, 0);
        for _ in 0..3 {
            let got = cache.get_or_classify(
                crawler,
                |_| {
                    passes += 1;
                    true
                },
                |_| {
                    classified += 1;
                    Some(Classified { agent: Some(4), token: None })
                },
            );
            assert_eq!(got.agent, Some(4));
        }
        assert_eq!((passes, classified), (1, 1), "the first request misses: the pass, then the classifier; the others hit");
        // a browser's, ending with a comment or not: the pass refuses it, the classifier is not asked
        for ua in [&b"Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; Trident/4.0)"[..], b"Mozilla/5.0 Chrome/131"] {
            for _ in 0..2 {
                let got = cache.get_or_classify(ua, |_| false, |_| panic!("classified a User-Agent the pass refused"));
                assert_eq!(got, Classified::default());
            }
        }
        assert_eq!(cache.lens.iter().filter(|l| **l != EMPTY).count(), 1, "only the crawler is kept");
        // without a comment at the end, the pass runs on every request, hit or not
        let mut passes = 0;
        for _ in 0..3 {
            cache.get_or_classify(
                b"curl/8.5.0",
                |_| {
                    passes += 1;
                    true
                },
                |_| Some(Classified { agent: Some(7), token: None }),
            );
        }
        assert_eq!(passes, 3);
    }

    /// Every length up to two blocks and more hashes all of its bytes: a change
    /// anywhere changes the hash.
    #[test]
    fn every_byte_is_in_the_hash() {
        for n in 0..80usize {
            let key: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let h = hash(0x5eed, hash_key(0x5eed), &key);
            for i in 0..n {
                let mut other = key.clone();
                other[i] ^= 0x20;
                assert_ne!(hash(0x5eed, hash_key(0x5eed), &other), h, "length {n}, byte {i}");
            }
            let mut longer = key.clone();
            longer.push(0);
            assert_ne!(hash(0x5eed, hash_key(0x5eed), &longer), h, "length {n} and a zero byte more");
        }
    }

    /// A block that starts with the hash's public constant does not zero the
    /// state: what came before it still counts, whatever the seed.
    #[test]
    fn no_block_a_client_can_write_drops_what_came_before() {
        for seed in [0u64, 1, 0x5eed, u64::MAX] {
            let with_prefix = |first: u8| {
                let mut ua = vec![first; 16];
                ua.extend_from_slice(&P0.to_le_bytes());
                ua.extend_from_slice(b"12345678crawler)");
                hash(seed, hash_key(seed), &ua)
            };
            assert_ne!(with_prefix(b'A'), with_prefix(b'B'), "seed {seed:#x}");
        }
    }

    #[test]
    fn a_user_agent_not_to_keep_is_asked_every_time_and_answered_none() {
        let mut cache = UaCache::with_seed(0x5eed);
        let mut calls = 0;
        for _ in 0..3 {
            let got = cache.get_or_classify(
                b"Mozilla/5.0 Chrome/131",
                |_| true,
                |_| {
                    calls += 1;
                    None
                },
            );
            assert_eq!(got, Classified::default());
        }
        assert_eq!(calls, 3, "never stored");
        assert_eq!(cache.lens.iter().filter(|l| **l != EMPTY).count(), 0, "no entry taken");
    }

    #[test]
    fn answers_like_the_classifier_through_collisions_and_evictions() {
        let mut cache = UaCache::default();
        let mut calls = 0;
        // many more distinct keys than entries: every answer must still be right
        for round in 0..3 {
            for i in 0..(ENTRIES * 3) {
                let ua = format!("agent-{i}{}", if i % 7 == 0 { "#x" } else { "" });
                let got = cache.get_or_classify(
                    ua.as_bytes(),
                    |_| true,
                    |u| {
                        calls += 1;
                        classify(u)
                    },
                );
                assert_eq!(got, classify(ua.as_bytes()).unwrap(), "round {round}: {ua}");
            }
        }
        assert!(calls > ENTRIES * 3, "evictions cause misses");
        // a repeated key is a hit
        let before = calls;
        for _ in 0..10 {
            cache.get_or_classify(
                b"Mozilla/5.0 Chrome/131",
                |_| true,
                |u| {
                    calls += 1;
                    classify(u)
                },
            );
        }
        assert_eq!(calls, before + 1);
        // over-long keys are never stored
        let long = vec![b'a'; MAX_KEY + 1];
        for _ in 0..3 {
            cache.get_or_classify(
                &long,
                |_| true,
                |u| {
                    calls += 1;
                    classify(u)
                },
            );
        }
        assert_eq!(calls, before + 4);
        // the empty key works too
        assert_eq!(cache.get_or_classify(b"", |_| true, classify), Classified::default());
        // a token longer than 255 bytes is kept to 255 (names are kept shorter still)
        let mut wide = b"x#".to_vec();
        wide.extend(std::iter::repeat_n(b'a', 253));
        assert_eq!(cache.get_or_classify(&wide, |_| true, classify).token, Some((1, 254)));
        assert_eq!(cache.get_or_classify(&wide, |_| true, classify).token, Some((1, 254)), "from the memo");
    }

    /// Half the table's size in User-Agents, sent in turn, over and over:
    /// after the first round nearly every one is a hit; and a flood of new
    /// ones afterwards evicts only what was used least recently.
    #[test]
    fn keeps_its_hit_rate_with_thousands_in_rotation() {
        let mut cache = UaCache::with_seed(0x5eed);
        let pool: Vec<String> = (0..ENTRIES / 2).map(|i| format!("Mozilla/5.0 (compatible; Pool{i}bot/1.0; +https://example.net/bot)")).collect();
        let mut misses = 0;
        for round in 0..4 {
            for ua in &pool {
                cache.get_or_classify(
                    ua.as_bytes(),
                    |_| true,
                    |u| {
                        if round > 0 {
                            misses += 1;
                        }
                        classify(u)
                    },
                );
            }
        }
        assert!(misses * 100 < pool.len() * 3 * 2, "{misses} misses of {} in three rounds", pool.len() * 3);
        // one User-Agent used all along stays while new ones flood the table
        let mut kept = true;
        for i in 0..(ENTRIES * 4) {
            cache.get_or_classify(format!("flood-{i}").as_bytes(), |_| true, classify);
            cache.get_or_classify(
                b"Googlebot/2.1",
                |_| true,
                |u| {
                    kept = i == 0;
                    classify(u)
                },
            );
        }
        assert!(kept, "the recently used entry was evicted");
    }
}
