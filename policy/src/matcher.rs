//! One matcher over every User-Agent pattern of the catalogue.
//!
//! Trying hundreds of regexes one after another per request is what makes a
//! large `map` of regexes slow. Here a request's User-Agent meets two steps,
//! and the answer is the same as "the first pattern, in catalogue order, that
//! matches" (seed 004), which the tests check against exactly that:
//!
//! 1. A literal prefilter, built when the catalogue is read: every pattern
//!    contributes the literals a match must start with, and every match of
//!    any pattern contains one of a few dozen short "needles" taken from them
//!    (`bot`, `crawl`, `google`, `python-` ...). On a CPU with AVX2, a pass
//!    over the User-Agent, 32 places at a time, looks up each place's first
//!    three bytes in a table of the needles' (`trigrams.rs`) and compares
//!    only the places found with their needles. On other CPUs a small DFA
//!    over the needles (Aho-Corasick, ASCII case-insensitive, every state
//!    built up front) says it in one pass, at four or five instructions a
//!    byte. Either way the answer is exact: whether any needle is there. Most
//!    browsers' User-Agents have no needle: they are answered here, at the
//!    same cost for the first request as for the millionth, whatever the size
//!    of the catalogue.
//! 2. A User-Agent with a needle is searched for every pattern's literals at
//!    once (an Aho-Corasick automaton, ASCII case-insensitive, built when the
//!    catalogue is read), and the first pattern in catalogue order whose
//!    literal is there answers: by the hit itself for a pattern that is a
//!    set of plain literals (nearly all of them), by its own regex for the
//!    few others (an anchor, a class). Nothing is built as requests come, so
//!    the first crawler costs what the next one does; the module's
//!    User-Agent memo (`ua_cache`) keeps the answers for the crawlers it sees
//!    again.

use crate::trigrams::Trigrams;
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::ParserBuilder;

/// At most this many needles, of at most [`NEEDLE_LEN`] bytes: the needles'
/// DFA then has at most 962 states, which fit its table (see [`NeedleDfa`]).
const NEEDLES: usize = 64;
const NEEDLE_LEN: usize = 15;

#[derive(Debug, Clone)]
pub struct Matcher {
    /// None when some pattern has no literal every match contains: every
    /// User-Agent is then searched in full.
    prefilter: Option<Prefilter>,
    /// Every pattern's literals (the ones a match must start with).
    literals: AhoCorasick,
    /// The pattern of each literal.
    owner: Vec<u32>,
    /// Each pattern's confirmation: None when a hit on one of its literals is
    /// already a match, else its regex (case-insensitive, bytes, no Unicode).
    confirm: Vec<Option<Regex>>,
    /// Patterns with no literal every match starts with, and their regexes:
    /// always tried.
    always: Vec<(u32, Regex)>,
    patterns: usize,
}

/// The needles, lower-cased, and how to find them in a User-Agent.
#[derive(Debug, Clone)]
struct Prefilter {
    needles: Vec<Vec<u8>>,
    find: Find,
}

#[derive(Debug, Clone)]
enum Find {
    /// On a CPU with AVX2, the places where a needle may start, 32 at a
    /// time, each then compared with its needles: about 1.3 instructions a byte.
    Trigrams(Trigrams),
    /// Elsewhere the needles' own DFA (any catalogue whose needles use at most 63
    /// distinct bytes, letters counted once for both cases).
    Dfa(Box<NeedleDfa>),
    /// Otherwise the aho-corasick crate's DFA, also built in full up front.
    Automaton(AhoCorasick),
}

/// Bytes of the needles' DFA's transition table: a fixed size, so that a
/// state and a byte class index it without a bounds check.
const TABLE: usize = 1 << 16;
/// Byte classes per state (a power of two): a state's number is premultiplied by it.
const STRIDE: usize = 64;

/// A DFA that answers "does any needle occur", ASCII case-insensitively.
/// State 0 is the start, state 1 the match: every transition out of it
/// leads back to it, so one pass ends in it exactly when a needle occurred,
/// with no test per byte. A transition is the next state's number times
/// [`STRIDE`], so the next index is the state ORed with the byte's class.
#[derive(Clone)]
struct NeedleDfa {
    /// The byte class of every byte; 0 for bytes no needle has.
    classes: [u8; 256],
    table: Box<[u16; TABLE]>,
}

impl std::fmt::Debug for NeedleDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NeedleDfa").finish_non_exhaustive()
    }
}

const MATCH: u16 = STRIDE as u16;

impl NeedleDfa {
    /// None when the needles have too many distinct bytes or states for the table.
    fn new(needles: &[Vec<u8>]) -> Option<NeedleDfa> {
        let mut classes = [0u8; 256];
        let mut next_class = 1usize;
        for b in needles.iter().flatten().map(|b| b.to_ascii_lowercase()) {
            if classes[b as usize] == 0 {
                if next_class == STRIDE {
                    return None;
                }
                classes[b as usize] = next_class as u8;
                next_class += 1;
            }
        }
        for b in b'A'..=b'Z' {
            classes[b as usize] = classes[b.to_ascii_lowercase() as usize];
        }
        // the trie: goto[state][class], None where it has no edge yet; state 1 is MATCH
        let mut goto: Vec<[Option<usize>; STRIDE]> = vec![[None; STRIDE], [Some(1); STRIDE]];
        for n in needles {
            let mut s = 0;
            for (i, b) in n.iter().enumerate() {
                let c = classes[*b as usize] as usize;
                let last = i + 1 == n.len();
                s = match goto[s][c] {
                    // a shorter needle ends here: this one contains it
                    Some(1) => break,
                    Some(t) if !last => t,
                    _ if last => {
                        goto[s][c] = Some(1);
                        break;
                    }
                    _ => {
                        goto.push([None; STRIDE]);
                        goto[s][c] = Some(goto.len() - 1);
                        goto.len() - 1
                    }
                };
            }
        }
        if goto.len() * STRIDE > TABLE {
            return None;
        }
        // failure links, breadth first: a missing edge goes where the longest suffix's goes
        let mut fail = vec![0usize; goto.len()];
        let mut queue = std::collections::VecDeque::new();
        for edge in goto[0].iter_mut() {
            match *edge {
                None => *edge = Some(0),
                Some(t) if t != 1 => queue.push_back(t),
                Some(_) => {}
            }
        }
        while let Some(s) = queue.pop_front() {
            let of_fail = goto[fail[s]];
            for (edge, by_fail) in goto[s].iter_mut().zip(of_fail) {
                match *edge {
                    None => *edge = by_fail,
                    // ending in a needle (one needle inside another): a match already
                    Some(t) if t != 1 && by_fail == Some(1) => *edge = Some(1),
                    Some(t) if t != 1 => {
                        fail[t] = by_fail.unwrap_or(0);
                        queue.push_back(t);
                    }
                    Some(_) => {}
                }
            }
        }
        let mut table: Box<[u16; TABLE]> = vec![0u16; TABLE].into_boxed_slice().try_into().ok()?;
        for (s, row) in goto.iter().enumerate() {
            for (c, t) in row.iter().enumerate() {
                table[s * STRIDE + c] = (t.unwrap_or(0) * STRIDE) as u16;
            }
        }
        Some(NeedleDfa { classes, table })
    }

    fn any(&self, haystack: &[u8]) -> bool {
        let (t, c) = (&*self.table, &self.classes);
        let step = |s: u16, b: u8| t[(s | c[b as usize] as u16) as usize];
        let mut s = 0u16;
        let mut quads = haystack.chunks_exact(4);
        for q in &mut quads {
            s = step(step(step(step(s, q[0]), q[1]), q[2]), q[3]);
        }
        for b in quads.remainder() {
            s = step(s, *b);
        }
        s == MATCH
    }
}

impl Matcher {
    pub fn new(patterns: &[String]) -> Result<Matcher, String> {
        let regex = |p: &str| RegexBuilder::new(p).case_insensitive(true).unicode(false).build().map_err(|e| format!("pattern \"{p}\": {e}"));
        let (mut literals, mut owner, mut confirm, mut always) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut needles: Option<Vec<Vec<u8>>> = Some(Vec::new());
        for (i, p) in patterns.iter().enumerate() {
            let hir = ParserBuilder::new()
                .unicode(false)
                .utf8(false)
                .build()
                .parse(p)
                .map_err(|e| format!("pattern \"{p}\": {e}"))?;
            let seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
            match seq.literals() {
                Some(lits) if !lits.is_empty() && lits.iter().all(|l| !l.as_bytes().is_empty()) => {
                    let exact = hir.properties().look_set().is_empty() && lits.iter().all(|l| l.is_exact());
                    confirm.push(if exact { None } else { Some(regex(p)?) });
                    for l in lits {
                        literals.push(l.as_bytes().to_vec());
                        owner.push(i as u32);
                    }
                    if let Some(n) = needles.as_mut() {
                        n.extend(lits.iter().map(|l| l.as_bytes().to_ascii_lowercase()));
                    }
                }
                _ => {
                    confirm.push(None);
                    always.push((i as u32, regex(p)?));
                    needles = None;
                }
            }
        }
        let prefilter = needles.filter(|n| !n.is_empty()).map(|n| Prefilter::new(self::needles(n))).transpose()?;
        // the contiguous NFA: small, and with every state built now
        let literals = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&literals)
            .map_err(|e| format!("the catalogue's literals do not compile: {e}"))?;
        Ok(Matcher { prefilter, literals, owner, confirm, always, patterns: patterns.len() })
    }

    /// The index of the first pattern (in catalogue order) that matches `haystack`.
    pub fn first_match(&self, haystack: &[u8]) -> Option<usize> {
        if !self.may_match(haystack) {
            return None;
        }
        let mut best = usize::MAX;
        if let Some((p, _)) = self.always.iter().find(|(_, r)| r.is_match(haystack)) {
            best = *p as usize;
        }
        // the few patterns already refuted, so that a repeated literal is not checked again
        let mut refuted = [usize::MAX; 8];
        let mut refuted_len = 0;
        for hit in self.literals.find_overlapping_iter(haystack) {
            let p = self.owner[hit.pattern().as_usize()] as usize;
            if p >= best || refuted[..refuted_len].contains(&p) {
                continue;
            }
            if self.confirm[p].as_ref().is_none_or(|r| r.is_match(haystack)) {
                best = p;
            } else if refuted_len < refuted.len() {
                refuted[refuted_len] = p;
                refuted_len += 1;
            }
        }
        (best != usize::MAX).then_some(best)
    }

    /// Whether some pattern may match `haystack`: false means none does.
    pub fn may_match(&self, haystack: &[u8]) -> bool {
        let Some(p) = &self.prefilter else { return self.patterns > 0 };
        match &p.find {
            Find::Trigrams(t) => t.any(haystack),
            Find::Dfa(d) => d.any(haystack),
            Find::Automaton(a) => a.is_match(haystack),
        }
    }

    /// Whether some pattern may match `haystack`, on less evidence than
    /// [`Matcher::may_match`]: true wherever that is (with AVX2, a place with a
    /// needle's first three bytes; elsewhere the same answer), and false means
    /// none matches.
    pub fn may_match_roughly(&self, haystack: &[u8]) -> bool {
        match &self.prefilter {
            Some(Prefilter { find: Find::Trigrams(t), .. }) => t.any_start(haystack),
            _ => self.may_match(haystack),
        }
    }

    /// The prefilter's needles (empty when there is no prefilter).
    pub fn needles(&self) -> impl Iterator<Item = &[u8]> {
        self.prefilter.iter().flat_map(|p| p.needles.iter().map(|n| n.as_slice()))
    }

    /// The bytes the prefilter and the literal automaton take.
    pub fn memory_usage(&self) -> usize {
        let prefilter = self.prefilter.as_ref().map_or(0, |p| {
            p.needles.iter().map(|n| n.len()).sum::<usize>()
                + match &p.find {
                    Find::Trigrams(t) => t.memory_usage(),
                    Find::Dfa(_) => std::mem::size_of::<NeedleDfa>() + TABLE * 2,
                    Find::Automaton(a) => a.memory_usage(),
                }
        });
        prefilter + self.literals.memory_usage() + self.owner.len() * 4
    }
}

impl Prefilter {
    fn new(needles: Vec<Vec<u8>>) -> Result<Prefilter, String> {
        let find = if let Some(t) = Trigrams::new(&needles) {
            Find::Trigrams(t)
        } else if let Some(d) = NeedleDfa::new(&needles) {
            Find::Dfa(Box::new(d))
        } else {
            Find::Automaton(
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .kind(Some(AhoCorasickKind::DFA))
                    .build(&needles)
                    .or_else(|_| AhoCorasick::builder().ascii_case_insensitive(true).match_kind(MatchKind::Standard).build(&needles))
                    .map_err(|e| format!("the catalogue's literals do not compile: {e}"))?,
            )
        };
        Ok(Prefilter { needles, find })
    }
}

/// At most [`NEEDLES`] lower-case needles such that each literal contains
/// one: the literals themselves (their first [`NEEDLE_LEN`] bytes) without
/// those that contain another, then,
/// while there are too many, literals that share their first `k` bytes
/// replaced by those bytes (for `k` from 16 down to 3: `yandeximages` and
/// `yandexnews` by `yandex`), then every literal cut to `k` bytes. A longer
/// needle is rarer in a browser's User-Agent; a cut one is still in every
/// match, so the prefilter never turns away a User-Agent a pattern matches.
fn needles(literals: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    fn minimal(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        v.sort();
        v.dedup();
        let keep: Vec<bool> = v.iter().map(|a| !v.iter().any(|b| b != a && contains(a, b))).collect();
        v.into_iter().zip(keep).filter(|(_, k)| *k).map(|(n, _)| n).collect()
    }
    let mut n = minimal(literals.into_iter().map(|l| l[..l.len().min(NEEDLE_LEN)].to_vec()).collect());
    for k in (3..=16).rev() {
        if n.len() <= NEEDLES {
            return n;
        }
        let shared = |x: &Vec<u8>| x.len() > k && n.iter().filter(|y| y.len() > k && y[..k] == x[..k]).count() >= 2;
        let cut: Vec<Vec<u8>> = n.iter().map(|x| if shared(x) { x[..k].to_vec() } else { x.clone() }).collect();
        n = minimal(cut);
    }
    for k in (3..=16).rev() {
        if n.len() <= NEEDLES {
            break;
        }
        n = minimal(n.into_iter().map(|x| x[..x.len().min(k)].to_vec()).collect());
    }
    n
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as published: try each pattern in order.
    fn naive(patterns: &[String], hay: &[u8]) -> Option<usize> {
        compiled(patterns).iter().position(|r| r.is_match(hay))
    }

    fn compiled(patterns: &[String]) -> Vec<Regex> {
        patterns.iter().map(|p| RegexBuilder::new(p).case_insensitive(true).unicode(false).build().unwrap()).collect()
    }

    fn pats(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn literal_alternation_anchor_and_class_patterns() {
        let p = pats(&["Googlebot", "bingbot|msnbot", "^Java/", "Yandex(Bot|Images)", "[Cc]url-ish", "(bot|crawl|spider)"]);
        let m = Matcher::new(&p).unwrap();
        for hay in [
            &b"Mozilla/5.0 (compatible; googlebot/2.1)"[..],
            b"msnbot/1.0",
            b"Java/17.0.2",
            b"x Java/17",
            b"YandexImages/3.0",
            b"YandexMetrika/1.0",
            b"CURL-ish",
            b"Reflectionbot",
            b"Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0",
            b"",
            b"\xff\xfe bot \xc3",
        ] {
            assert_eq!(m.first_match(hay), naive(&p, hay), "{:?}", String::from_utf8_lossy(hay));
        }
        assert!(!m.may_match(b"Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0"), "a browser never reaches the DFA");
    }

    #[test]
    fn the_needles_dfa_finds_any_needle_in_any_case() {
        let needles: Vec<Vec<u8>> = ["abcd", "bc", "bot", "ottx", "a-b/c"].iter().map(|n| n.as_bytes().to_vec()).collect();
        let d = NeedleDfa::new(&needles).unwrap();
        let naive = |h: &[u8]| {
            let h = h.to_ascii_lowercase();
            needles.iter().any(|n| contains(&h, n))
        };
        let mut seed: u64 = 7;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet = b"abcdotxBCDOTX-/ ";
        for _ in 0..20000 {
            let len = (next() % 12) as usize;
            let h: Vec<u8> = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            assert_eq!(d.any(&h), naive(&h), "{:?}", String::from_utf8_lossy(&h));
        }
        for h in [&b"xxABC"[..], b"ABCD", b"roBOT", b"bo", b"A-B/C", b"a-b/"] {
            assert_eq!(d.any(h), naive(h), "{:?}", String::from_utf8_lossy(h));
        }
        // too many distinct bytes for the table's classes: the crate's automaton takes over
        let wide: Vec<Vec<u8>> = (0u8..70).map(|i| vec![b'!' + i, b'!' + i]).collect();
        assert!(NeedleDfa::new(&wide).is_none());
        let m = Prefilter::new(wide).unwrap();
        assert!(matches!(m.find, Find::Automaton(_) | Find::Trigrams(_)));
    }

    #[test]
    fn a_pattern_without_a_literal_turns_the_prefilter_off() {
        let p = pats(&["Googlebot", "[a-z]+bot"]);
        let m = Matcher::new(&p).unwrap();
        assert_eq!(m.needles().count(), 0);
        assert!(m.may_match(b"Chrome"));
        assert_eq!(m.first_match(b"xyzbot"), Some(1));
        assert_eq!(m.first_match(b"Chrome"), None);
    }

    #[test]
    fn needles_are_few_and_each_literal_contains_one() {
        let file: crate::model::CatalogueFile = serde_yaml::from_str(crate::catalogue::BUILTIN_YAML).unwrap();
        let p: Vec<String> = file.agents.iter().filter_map(|a| a.ua.clone()).collect();
        let m = Matcher::new(&p).unwrap();
        let needles: Vec<&[u8]> = m.needles().collect();
        assert!(!needles.is_empty() && needles.len() <= NEEDLES, "{} needles", needles.len());
        assert!(needles.iter().all(|n| n.len() >= 3), "{needles:?}");
        // a long literal group is folded into its common start, a lone one is kept whole
        assert!(needles.contains(&&b"yandex"[..]) && needles.contains(&&b"python-"[..]) && needles.contains(&&b"headlesschrome"[..]), "{needles:?}");
        // both forms of the prefilter answer alike
        if let Some(p) = &m.prefilter {
            let dfa = NeedleDfa::new(&p.needles).expect("the shipped needles fit the table");
            for ua in ["Mozilla/5.0 (compatible; Googlebot/2.1)", "python-requests/2.31", "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "x zgrab", "nothing to see here at all, not one needle"] {
                assert_eq!(dfa.any(ua.as_bytes()), m.may_match(ua.as_bytes()), "{ua}");
            }
        }
        // the shipped browsers' User-Agents have no needle
        for browser in [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
        ] {
            assert!(!m.may_match(browser.as_bytes()), "{browser}");
        }
        // a huge catalogue: the needles stay within the limit
        let many: Vec<String> = (0..700).map(|i| format!("Agent{i:03}x{}", ["Fetch", "Grab", "Scan", "Pull"][i % 4])).collect();
        let m = Matcher::new(&many).unwrap();
        assert!(m.needles().count() <= NEEDLES, "{}", m.needles().count());
        for i in [0usize, 1, 350, 699] {
            let ua = format!("Mozilla/5.0 (compatible; {}/1.0)", many[i].to_ascii_uppercase());
            assert_eq!(m.first_match(ua.as_bytes()), Some(i), "{ua}");
        }
    }

    #[test]
    fn agrees_with_first_regex_on_the_builtin_catalogue_and_random_input() {
        let file: crate::model::CatalogueFile = serde_yaml::from_str(crate::catalogue::BUILTIN_YAML).unwrap();
        let p: Vec<String> = file.agents.iter().filter_map(|a| a.ua.clone()).collect();
        let m = Matcher::new(&p).unwrap();
        let each = compiled(&p);
        // every pattern's own literal text, embedded in browser-like noise, and random bytes
        let mut seed: u64 = 0x9e3779b97f4a7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let words: Vec<String> = file.agents.iter().map(|a| a.name.clone()).chain(["Mozilla/5.0".into(), "(compatible;".into(), "bot".into(), "Java/".into(), "python-".into(), "Go-http-client/1.1".into()]).collect();
        for round in 0..8000 {
            let mut hay = Vec::new();
            if round % 4 == 3 {
                let len = (next() % 200) as usize;
                hay.extend((0..len).map(|_| (next() % 256) as u8));
            } else {
                for _ in 0..(next() % 5) {
                    let w = &words[(next() % words.len() as u64) as usize];
                    match next() % 3 {
                        0 => hay.extend(w.to_ascii_lowercase().bytes()),
                        1 => hay.extend(w.to_ascii_uppercase().bytes()),
                        _ => hay.extend(w.bytes()),
                    }
                    hay.push(if next() % 2 == 0 { b' ' } else { b'/' });
                }
            }
            let expected = each.iter().position(|r| r.is_match(&hay));
            assert_eq!(m.first_match(&hay), expected, "{:?}", String::from_utf8_lossy(&hay));
            if expected.is_some() {
                assert!(m.may_match(&hay), "the prefilter turned away a match: {:?}", String::from_utf8_lossy(&hay));
            }
        }
        // a User-Agent longer than the stack copy
        let mut long = vec![b'a'; 3000];
        long.extend(b"GPTBot/1.2");
        assert_eq!(m.first_match(&long), each.iter().position(|r| r.is_match(&long)));
    }
}
