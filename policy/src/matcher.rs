//! One matcher over every User-Agent pattern of the catalogue.
//!
//! Trying hundreds of regexes one after another per request is what makes a
//! large `map` of regexes slow. Instead, every pattern contributes the
//! literals a match must start with; one Aho-Corasick automaton (ASCII
//! case-insensitive) finds them in a single pass over the User-Agent, and
//! only the few patterns whose literal was seen are confirmed: a pattern that
//! is a plain literal by the hit itself, any other by its own regex. The
//! answer is the same as "the first pattern, in catalogue order, that
//! matches" (seed 004), which the tests check against exactly that.
//!
//! A lazy DFA over all the patterns answers first: one tight pass over the
//! User-Agent that stops at the first match of any pattern, which for a
//! browser means "no agent" at a few instructions a byte; only a User-Agent
//! that matches something is then searched for every pattern it matches.
//! The DFA's states are built as searches need them, in a cache of bounded
//! size, so a catalogue of any size loads at once; if the cache keeps
//! filling up, the search gives up and the literal automaton answers.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex_automata::hybrid::dfa::{Cache, OverlappingState, DFA};
use regex_automata::{nfa::thompson, util::syntax, Input};
use std::cell::RefCell;
use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::ParserBuilder;

#[derive(Debug, Clone)]
pub struct Matcher {
    /// All the patterns in one lazy DFA, and its cache of states (one per
    /// process: nginx workers are single-threaded).
    dfa: Option<(DFA, RefCell<Cache>)>,
    automaton: AhoCorasick,
    /// Pattern index of each literal in the automaton.
    owner: Vec<u32>,
    /// Whether a hit on the pattern's literal is already a match.
    exact: Vec<bool>,
    /// Each pattern, for confirming a hit (case-insensitive, bytes, no Unicode).
    regexes: Vec<Regex>,
    /// Patterns with no literal every match starts with: always confirmed by regex.
    always: Vec<u32>,
}

impl Matcher {
    pub fn new(patterns: &[String]) -> Result<Matcher, String> {
        let mut literals: Vec<Vec<u8>> = Vec::new();
        let mut owner = Vec::new();
        let mut exact = Vec::with_capacity(patterns.len());
        let mut regexes = Vec::with_capacity(patterns.len());
        let mut always = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            let regex = RegexBuilder::new(p)
                .case_insensitive(true)
                .unicode(false)
                .build()
                .map_err(|e| format!("pattern \"{p}\": {e}"))?;
            regexes.push(regex);
            let hir = ParserBuilder::new()
                .unicode(false)
                .utf8(false)
                .build()
                .parse(p)
                .map_err(|e| format!("pattern \"{p}\": {e}"))?;
            let no_look = hir.properties().look_set().is_empty();
            let seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
            match seq.literals() {
                Some(lits) if !lits.is_empty() && lits.iter().all(|l| !l.as_bytes().is_empty()) => {
                    exact.push(no_look && lits.iter().all(|l| l.is_exact()));
                    for l in lits {
                        literals.push(l.as_bytes().to_vec());
                        owner.push(i as u32);
                    }
                }
                _ => {
                    exact.push(false);
                    always.push(i as u32);
                }
            }
        }
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&literals)
            .or_else(|_| {
                // a DFA too large for the limits: the contiguous NFA is a little slower, never wrong
                AhoCorasick::builder().ascii_case_insensitive(true).match_kind(MatchKind::Standard).build(&literals)
            })
            .map_err(|e| format!("the catalogue's literals do not compile: {e}"))?;
        let dfa = DFA::builder()
            .configure(DFA::config().match_kind(regex_automata::MatchKind::All).cache_capacity(4 << 20))
            .syntax(syntax::Config::new().case_insensitive(true).unicode(false).utf8(false))
            .thompson(thompson::Config::new().utf8(false))
            .build_many(patterns)
            .ok()
            .map(|dfa| {
                let cache = RefCell::new(dfa.create_cache());
                (dfa, cache)
            });
        Ok(Matcher { dfa, automaton, owner, exact, regexes, always })
    }

    /// The index of the first pattern (in catalogue order) that matches `haystack`.
    pub fn first_match(&self, haystack: &[u8]) -> Option<usize> {
        let by_dfa = self.dfa.as_ref().and_then(|(dfa, cache)| first_by_dfa(dfa, &mut *cache.try_borrow_mut().ok()?, haystack));
        match by_dfa {
            Some(answer) => answer,
            None => self.first_by_literals(haystack),
        }
    }

    /// Whether the DFA was built (false: the literal automaton does all the work).
    #[cfg(test)]
    fn has_dfa(&self) -> bool {
        self.dfa.is_some()
    }

    fn first_by_literals(&self, haystack: &[u8]) -> Option<usize> {
        let mut best = usize::MAX;
        for &p in &self.always {
            let p = p as usize;
            if p < best && self.regexes[p].is_match(haystack) {
                best = p;
                break;
            }
        }
        // The few patterns already confirmed false, so a repeated literal is not re-checked.
        let mut refuted: [usize; 8] = [usize::MAX; 8];
        let mut refuted_len = 0;
        for hit in self.automaton.find_overlapping_iter(haystack) {
            let p = self.owner[hit.pattern().as_usize()] as usize;
            if p >= best || refuted[..refuted_len].contains(&p) {
                continue;
            }
            if self.exact[p] || self.regexes[p].is_match(haystack) {
                best = p;
            } else if refuted_len < refuted.len() {
                refuted[refuted_len] = p;
                refuted_len += 1;
            }
        }
        (best != usize::MAX).then_some(best)
    }

}

/// The lowest pattern that matches, by the DFA; None if the DFA gave up.
fn first_by_dfa(dfa: &DFA, cache: &mut Cache, haystack: &[u8]) -> Option<Option<usize>> {
    // one pass that stops at the first match of any pattern: most User-Agents match none
    match dfa.try_search_fwd(cache, &Input::new(haystack).earliest(true)) {
        Ok(None) => return Some(None),
        Ok(Some(_)) => {}
        Err(_) => return None,
    }
    let input = Input::new(haystack);
    let mut state = OverlappingState::start();
    let mut best: Option<usize> = None;
    loop {
        if dfa.try_search_overlapping_fwd(cache, &input, &mut state).is_err() {
            return None;
        }
        match state.get_match() {
            None => return Some(best),
            Some(m) => {
                let p = m.pattern().as_usize();
                if best.is_none_or(|b| p < b) {
                    best = Some(p);
                }
            }
        }
    }
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
            assert_eq!(m.first_by_literals(hay), naive(&p, hay), "literal path: {:?}", String::from_utf8_lossy(hay));
        }
    }

    #[test]
    fn agrees_with_first_regex_on_the_builtin_catalogue_and_random_input() {
        let file: crate::model::CatalogueFile = serde_yaml::from_str(crate::catalogue::BUILTIN_YAML).unwrap();
        let p: Vec<String> = file.agents.iter().filter_map(|a| a.ua.clone()).collect();
        let m = Matcher::new(&p).unwrap();
        assert!(m.has_dfa(), "the shipped catalogue fits the DFA limits");
        let each = compiled(&p);
        // every pattern's own literal text, embedded in browser-like noise
        let mut seed: u64 = 0x9e3779b97f4a7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let words: Vec<String> = file.agents.iter().map(|a| a.name.clone()).chain(["Mozilla/5.0".into(), "(compatible;".into(), "bot".into(), "Java/".into(), "python-".into(), "Go-http-client/1.1".into()]).collect();
        for _ in 0..5000 {
            let n = (next() % 5) as usize;
            let mut hay = Vec::new();
            for _ in 0..n {
                let w = &words[(next() % words.len() as u64) as usize];
                if next() % 3 == 0 {
                    hay.extend(w.to_ascii_lowercase().bytes());
                } else {
                    hay.extend(w.bytes());
                }
                hay.push(if next() % 2 == 0 { b' ' } else { b'/' });
            }
            let expected = each.iter().position(|r| r.is_match(&hay));
            assert_eq!(m.first_match(&hay), expected, "{:?}", String::from_utf8_lossy(&hay));
            assert_eq!(m.first_by_literals(&hay), expected, "literal path: {:?}", String::from_utf8_lossy(&hay));
        }
    }
}
