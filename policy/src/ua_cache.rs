//! A small, fixed-size memo of User-Agent → catalogue agent (and, for the
//! catch-all of self-declared bots, where the bot's product token is).
//!
//! Classification depends on the User-Agent alone, and a site sees the same
//! few thousand User-Agent strings over and over, so each nginx worker keeps
//! the answers for recent strings: a hit costs a hash and a compare instead
//! of a pass of the literal automaton. The table is direct-mapped with a fixed
//! number of slots and a fixed longest key, so its memory never grows, however
//! many distinct strings clients send; a client that rotates User-Agents only
//! misses, and pays the ordinary classification.

/// Slots in the table (a power of two).
pub const SLOTS: usize = 1024;
/// User-Agents longer than this are classified every time, never stored.
pub const MAX_KEY: usize = 256;

const EMPTY: u16 = u16::MAX;

/// What classifying a User-Agent found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Classified {
    /// The catalogue agent, by its place in the catalogue.
    pub agent: Option<usize>,
    /// For the catch-all of self-declared bots, the product token's start and
    /// length in the User-Agent (see [`crate::budget::crawler_token_span`]);
    /// kept up to 255 bytes long (budget names keep fewer).
    pub token: Option<(usize, usize)>,
}

pub struct UaCache {
    keys: Box<[u8]>,
    lens: Box<[u16]>,
    /// The cached answer: the agent index + 1, or 0 for "no agent".
    answers: Box<[u32]>,
    /// The token: start << 8 | length, or 0 for none.
    tokens: Box<[u16]>,
}

impl Default for UaCache {
    fn default() -> Self {
        UaCache {
            keys: vec![0u8; SLOTS * MAX_KEY].into_boxed_slice(),
            lens: vec![EMPTY; SLOTS].into_boxed_slice(),
            answers: vec![0u32; SLOTS].into_boxed_slice(),
            tokens: vec![0u16; SLOTS].into_boxed_slice(),
        }
    }
}

impl UaCache {
    /// The answer for `ua`: from the table, or from `classify`, which is then stored.
    pub fn get_or_classify(&mut self, ua: &[u8], classify: impl FnOnce(&[u8]) -> Classified) -> Classified {
        if ua.len() > MAX_KEY {
            return classify(ua);
        }
        let slot = (hash(ua) as usize) & (SLOTS - 1);
        let key = &mut self.keys[slot * MAX_KEY..slot * MAX_KEY + ua.len()];
        if usize::from(self.lens[slot]) == ua.len() && key == ua {
            let t = self.tokens[slot];
            return Classified {
                agent: self.answers[slot].checked_sub(1).map(|i| i as usize),
                token: (t != 0).then_some(((t >> 8) as usize, (t & 0xff) as usize)),
            };
        }
        let mut answer = classify(ua);
        // a key of at most MAX_KEY (256) bytes: the token starts before 256
        answer.token = answer.token.map(|(start, len)| (start, len.min(255)));
        key.copy_from_slice(ua);
        self.lens[slot] = ua.len() as u16;
        self.answers[slot] = answer.agent.map_or(0, |i| i as u32 + 1);
        self.tokens[slot] = answer.token.map_or(0, |(start, len)| (start as u16) << 8 | len as u16);
        answer
    }
}

/// A fast, non-cryptographic hash of the bytes (FxHash's mixing, eight bytes at a time).
/// Collisions only cost a miss: the key is always compared in full.
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_like_the_classifier_through_collisions_and_evictions() {
        // an agent where the key has a '#', and a "token" from there to the end
        let classify = |ua: &[u8]| -> Classified {
            let at = ua.iter().position(|b| *b == b'#');
            Classified { agent: at, token: at.map(|i| (i, ua.len() - i)) }
        };
        let mut cache = UaCache::default();
        let mut calls = 0;
        // many more distinct keys than slots: every answer must still be right
        for round in 0..3 {
            for i in 0..(SLOTS * 4) {
                let ua = format!("agent-{i}{}", if i % 7 == 0 { "#x" } else { "" });
                let got = cache.get_or_classify(ua.as_bytes(), |u| {
                    calls += 1;
                    classify(u)
                });
                assert_eq!(got, classify(ua.as_bytes()), "round {round}: {ua}");
            }
        }
        assert!(calls > SLOTS * 4, "evictions cause misses");
        // a repeated key is a hit
        let before = calls;
        for _ in 0..10 {
            cache.get_or_classify(b"Mozilla/5.0 Chrome/131", |u| {
                calls += 1;
                classify(u)
            });
        }
        assert_eq!(calls, before + 1);
        // over-long keys are never stored
        let long = vec![b'a'; MAX_KEY + 1];
        for _ in 0..3 {
            cache.get_or_classify(&long, |u| {
                calls += 1;
                classify(u)
            });
        }
        assert_eq!(calls, before + 4);
        // the empty key works too
        assert_eq!(cache.get_or_classify(b"", classify), Classified::default());
        // a token longer than 255 bytes is kept to 255 (names are kept shorter still)
        let mut wide = b"x#".to_vec();
        wide.extend(std::iter::repeat_n(b'a', 253));
        assert_eq!(cache.get_or_classify(&wide, classify).token, Some((1, 254)));
        assert_eq!(cache.get_or_classify(&wide, classify).token, Some((1, 254)), "from the memo");
    }
}
