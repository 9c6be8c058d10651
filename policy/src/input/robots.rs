//! robots.txt patterns: their check, and the matching the deep-path list
//! shares with the crawl budget. The text crawlward publishes is
//! `robots_txt.rs`.
//!
//! Patterns follow RFC 9309 as Google and Bing read it: a path prefix where
//! `*` matches any run of characters and a final `$` anchors the end.

/// A robots.txt path pattern is a '/' (or '*') followed by URL characters.
/// Whether `pattern` matches `path` (the path and query of a request).
pub fn robots_match(pattern: &str, target: &[u8]) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let mut parts = pattern.as_bytes().split(|b| *b == b'*');
    let first = parts.next().unwrap_or(&[]);
    let Some(mut rest) = target.strip_prefix(first) else { return false };
    let mut parts = parts.peekable();
    while let Some(part) = parts.next() {
        if anchored && parts.peek().is_none() {
            return rest.ends_with(part);
        }
        match find(rest, part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    !anchored || rest.is_empty()
}

/// The deep paths, for the crawl budget: robots.txt patterns compiled into
/// one regular expression (a single pass over the request target, whatever
/// the number of patterns), matching exactly as [`robots_match`] does.
#[derive(Debug, Clone, Default)]
pub struct DeepPaths {
    patterns: Vec<String>,
    /// A dense DFA of all patterns, anchored at the target's start: built once
    /// when the configuration is read, a few instructions per byte after.
    any: Option<regex_automata::dfa::dense::DFA<Vec<u32>>>,
}

impl DeepPaths {
    pub fn new(patterns: Vec<String>) -> DeepPaths {
        let alternatives: Vec<String> = patterns
            .iter()
            .map(|p| {
                let (body, anchored) = match p.strip_suffix('$') {
                    Some(b) => (b, true),
                    None => (p.as_str(), false),
                };
                let parts: Vec<String> = body.split('*').map(regex::escape).collect();
                format!("{}{}", parts.join(".*"), if anchored { "$" } else { "" })
            })
            .collect();
        // without a compiled automaton (too large), is_match falls back to the
        // patterns one by one
        let syntax = regex_automata::util::syntax::Config::new().unicode(false).utf8(false).dot_matches_new_line(true);
        let any = (!patterns.is_empty())
            .then(|| {
                // bounded: a pattern list whose DFA would not fit in 2 MiB is matched one by one
                regex_automata::dfa::dense::Builder::new()
                    .configure(regex_automata::dfa::dense::Config::new().dfa_size_limit(Some(2 << 20)).determinize_size_limit(Some(2 << 20)))
                    .syntax(syntax)
                    .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
                    .build(&format!("(?:{})", alternatives.join("|")))
                    .ok()
            })
            .flatten();
        DeepPaths { patterns, any }
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether the target (path, and `?` and the query) is on a deep path.
    pub fn is_match(&self, target: &[u8]) -> bool {
        use regex_automata::dfa::Automaton;
        match &self.any {
            Some(dfa) => {
                let input = regex_automata::Input::new(target).anchored(regex_automata::Anchored::Yes).earliest(true);
                match dfa.try_search_fwd(&input) {
                    Ok(found) => found.is_some(),
                    Err(_) => self.first_match(target).is_some(),
                }
            }
            None => self.first_match(target).is_some(),
        }
    }

    /// The first pattern the target matches, for `explain`.
    pub fn first_match(&self, target: &[u8]) -> Option<&str> {
        self.patterns.iter().find(|p| robots_match(p, target)).map(String::as_str)
    }
}

/// The first position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, rest)) = needle.split_first() else { return Some(0) };
    let last = haystack.len().checked_sub(needle.len())?;
    // the first byte alone rules out most positions, without a call
    (0..=last).find(|&i| haystack[i] == first && &haystack[i + 1..i + needle.len()] == rest)
}

pub fn check_robots_pattern(p: &str) -> Result<(), String> {
    let ok = (p.starts_with('/') || p.starts_with('*'))
        && p.chars().all(|c| c.is_ascii_graphic() && !"#\"'\\{};".contains(c))
        && !p[..p.len().saturating_sub(1)].contains('$');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid robots.txt pattern \"{p}\": expected a path starting with '/', with '*' wildcards and an optional final '$'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_check() {
        assert!(check_robots_pattern("/*/*/blob/").is_ok());
        assert!(check_robots_pattern("/x$").is_ok());
        assert!(check_robots_pattern("blob").is_err());
        assert!(check_robots_pattern("/a$b").is_err());
        assert!(check_robots_pattern("/a b").is_err());
    }

    #[test]
    fn deep_paths_match_as_robots_match_does() {
        let patterns = ["/*/*/blob/", "/*/*/commits", "/*.pdf$", "/print$", "/a.b+c(d)/", "/*?sort="];
        let d = DeepPaths::new(patterns.iter().map(|p| p.to_string()).collect());
        for t in [
            "/alice/repo/blob/main/x.rs",
            "/alice/blob",
            "/x/y/commits",
            "/x/y/commits?page=2",
            "/a/b.pdf",
            "/a/b.pdf?x=1",
            "/print",
            "/printer",
            "/a.b+c(d)/x",
            "/aXb+c(d)/x",
            "/glam/browse?sort=title",
            "/glam/browse?page=2",
            "",
            "/",
            "/x/y/commit",
            "/%2F/y/commits",
            "/a\nb/c/commits",
        ] {
            let one_by_one = patterns.iter().any(|p| robots_match(p, t.as_bytes()));
            assert_eq!(d.is_match(t.as_bytes()), one_by_one, "{t:?}");
        }
        assert!(!DeepPaths::default().is_match(b"/anything"));
        assert_eq!(d.first_match(b"/x/y/commits"), Some("/*/*/commits"));
    }

    /// The automaton against the patterns one by one, on random pattern lists
    /// and targets over a small alphabet (where `*`, `$` and repeats meet often),
    /// including every byte value and the empty target.
    #[test]
    fn deep_paths_match_as_the_patterns_do_on_random_lists() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let alphabet = b"/ab?.$=";
        for _ in 0..300 {
            let patterns: Vec<String> = (0..1 + next(4))
                .map(|_| {
                    let mut p = String::from("/");
                    for _ in 0..next(6) {
                        p.push(*b"ab/*.?".get(next(6)).unwrap() as char);
                    }
                    if next(3) == 0 {
                        p.push('$');
                    }
                    p
                })
                .collect();
            let d = DeepPaths::new(patterns.clone());
            assert!(d.any.is_some(), "{patterns:?}");
            for _ in 0..60 {
                let mut t: Vec<u8> = (0..next(10)).map(|_| alphabet[next(alphabet.len())]).collect();
                if next(10) == 0 {
                    t.push(next(256) as u8);
                }
                let one_by_one = patterns.iter().any(|p| robots_match(p, &t));
                assert_eq!(d.is_match(&t), one_by_one, "{patterns:?} {:?}", String::from_utf8_lossy(&t));
            }
        }
    }

    #[test]
    fn wildcards_and_anchors() {
        assert!(robots_match("/admin", "/admin/users".as_bytes()));
        assert!(!robots_match("/admin", "/adm".as_bytes()));
        assert!(robots_match("/*/*/blob/", "/alice/repo/blob/main/x.rs".as_bytes()));
        assert!(!robots_match("/*/*/blob/", "/alice/blob".as_bytes()));
        assert!(robots_match("/*?sort=", "/glam/browse?sort=title".as_bytes()));
        assert!(!robots_match("/*?sort=", "/glam/browse?page=2".as_bytes()));
        assert!(robots_match("/*.pdf$", "/a/b.pdf".as_bytes()));
        assert!(!robots_match("/*.pdf$", "/a/b.pdf?x=1".as_bytes()));
        assert!(robots_match("/print$", "/print".as_bytes()));
        assert!(!robots_match("/print$", "/printer".as_bytes()));
        assert!(robots_match("*", "/anything".as_bytes()));
    }
}
