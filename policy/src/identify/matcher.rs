//! One matcher over every User-Agent pattern of the catalogue.
//!
//! A pattern is a set of product names: a literal, or a short regular
//! expression that stands for a few (`Yandex(Bot|Images)`,
//! `Apache-Http(Async)?Client`), each at least [`MIN_NAME`] bytes. A name
//! claims its agent where it stands as a product (`claim.rs`): at a claim
//! position, ASCII case-insensitively, ending where the token ends. The
//! client is named by the first product that names an agent: the leftmost
//! claim in the User-Agent, and of the names claimed there, the longest
//! (`Googlebot-News` before `Googlebot`). The same name in two patterns
//! belongs to the first ([`owned_names`]).
//!
//! Trying hundreds of regexes one after another per request is what makes a
//! large `map` of regexes slow. Here a request's User-Agent meets one pass:
//!
//! - Every name, and every needle of the bot detector (`detector.rs`), has
//!   four of its bytes chosen (its gram), at some offset in it: four whose
//!   first three no common browser's User-Agent has, and, among those, four
//!   that many names share. A three-byte name has one gram for each byte a claim may follow
//!   (`(`, `;`, `,`, space, tab: that byte and the name), and is compared at
//!   the start of the User-Agent on its own. A table holds the grams
//!   (`trigrams.rs`); a pass over the User-Agent, 32 places at a time on a
//!   CPU with AVX2, finds the places whose four bytes are a gram, and the
//!   `@`s. Most browsers' User-Agents, and most random strings, have none:
//!   they are answered by the pass alone, at the same cost for the first
//!   request as for the millionth, whatever the size of the catalogue.
//! - At a place with a gram, each name whose gram starts with the same three
//!   bytes is compared where it would start (the place less its offset), if
//!   a claim may start there.
//!   Nothing is built as requests come, so the first crawler costs what the
//!   next one does; the module's User-Agent memo (`ua_cache`) keeps the
//!   answers for the User-Agents it sees again.

use crate::claim::{claim_at, ends_token};
use crate::detector::claim_in_device_comment;
use crate::trigrams::{key, Beside, Gram, Trigrams, AT};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::ParserBuilder;

/// A name's shortest length: the pass looks for three bytes of it at least.
pub const MIN_NAME: usize = 3;
/// A name's longest length.
pub const MAX_NAME: usize = 64;
/// The most names one pattern may stand for.
pub const MAX_NAMES: usize = 64;

/// Who owns an item: a pattern, or the bot detector.
const DETECTOR: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub struct Matcher {
    places: Trigrams,
    /// The items of each group of the table: those whose gram is the byte
    /// before them first, then by offset.
    groups: Vec<Vec<Item>>,
    /// The three-byte names, which the pass finds after the bytes a claim
    /// follows: looked for at the start of the User-Agent on their own, where
    /// the three bytes' key is in `starts` (bit `k % 32` of word `k / 32`).
    short: Vec<Item>,
    starts: Box<[u32]>,
    names: usize,
    patterns: usize,
}

/// The bytes a claim follows (`claim.rs`): a three-byte name's gram is one
/// of them and the name's three bytes.
const CLAIM_FOLLOWS: [u8; 5] = [b'(', b';', b',', b' ', b'\t'];

/// A name or a needle, found where its gram is.
#[derive(Debug, Clone)]
struct Item {
    /// Lower case.
    text: Box<[u8]>,
    /// Its first four bytes (three for a three-byte name) with bit 5 set
    /// ([`folded`]), and which of them count: a quick first look where it
    /// would start.
    head: u32,
    head_mask: u32,
    /// Where its gram is in it.
    offset: usize,
    /// A three-byte name's gram: this byte, which a claim follows, and the
    /// name's three bytes (the name starts one byte after the gram).
    after: Option<u8>,
    /// It claims only at the start of the User-Agent.
    anchored: bool,
    /// Its pattern yields to any other that names the client.
    yields: bool,
    /// The pattern, or [`DETECTOR`].
    owner: u32,
}

/// What a User-Agent holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    /// The pattern that names the client, if one does.
    pub pattern: Option<usize>,
    /// Whether it holds one of the detector's needles (or an `@`): without
    /// one, the detector finds no bot in it.
    pub needle: bool,
}

/// A product name a pattern stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name {
    /// Lower case.
    pub text: Vec<u8>,
    /// Written `^Name`: it claims only at the start of the User-Agent.
    pub anchored: bool,
}

/// The names a pattern stands for, or why it is not one. Each alternative
/// at the top (`a|b`) may start with `^`: its names claim only at the start
/// of the User-Agent (`^Java` for Java's own `Java/17`, where J2ME phones
/// write `(Java; U; MIDP-2.0)`).
pub fn names(pattern: &str) -> Result<Vec<Name>, String> {
    let mut all = Vec::new();
    for alternative in top_alternatives(pattern) {
        let (anchored, rest) = match alternative.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, alternative),
        };
        all.extend(expand(pattern, rest)?.into_iter().map(|text| Name { text, anchored }));
    }
    all.sort();
    all.dedup();
    if all.len() > MAX_NAMES {
        return Err(stands_for(pattern));
    }
    Ok(all)
}

/// The alternatives at the top of a pattern: split at the `|` outside groups and classes.
fn top_alternatives(pattern: &str) -> Vec<&str> {
    let (mut depth, mut class, mut escaped, mut start) = (0i32, false, false, 0);
    let mut parts = Vec::new();
    for (i, c) in pattern.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !class => class = true,
            ']' if class => class = false,
            '(' if !class => depth += 1,
            ')' if !class => depth -= 1,
            '|' if !class && depth == 0 => {
                parts.push(&pattern[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&pattern[start..]);
    parts
}

fn stands_for(pattern: &str) -> String {
    format!("invalid ua pattern \"{pattern}\": it must stand for at most {MAX_NAMES} product names (literals, with |, (), [] and ?), each {MIN_NAME} to {MAX_NAME} characters")
}

/// The names one alternative of `pattern` stands for, lower case.
fn expand(pattern: &str, alternative: &str) -> Result<Vec<Vec<u8>>, String> {
    let hir = ParserBuilder::new().unicode(false).utf8(false).build().parse(alternative).map_err(|e| {
        let first = e.to_string().lines().last().unwrap_or("").trim().to_string();
        format!("invalid ua pattern \"{pattern}\": {first}")
    })?;
    if !hir.properties().look_set().is_empty() {
        return Err(format!("invalid ua pattern \"{pattern}\": only a name may start with ^ (at the start of the pattern or after a | outside a group), and no $ is needed: a name claims an agent only where it stands as a product"));
    }
    let seq = Extractor::new().kind(ExtractKind::Prefix).limit_total(MAX_NAMES * 4).extract(&hir);
    let literals = seq.literals().filter(|l| seq.is_exact() && !l.is_empty()).ok_or_else(|| stands_for(pattern))?;
    let mut names: Vec<Vec<u8>> = literals.iter().map(|l| l.as_bytes().to_ascii_lowercase()).collect();
    names.sort();
    names.dedup();
    if names.iter().any(|n| n.len() < MIN_NAME || n.len() > MAX_NAME) {
        return Err(stands_for(pattern));
    }
    if let Some(n) = names.iter().find(|n| matches!(n.first(), Some(b' ' | b'\t')) || matches!(n.last(), Some(b'/' | b'-' | b'_' | b' ' | b'\t'))) {
        return Err(format!(
            "invalid ua pattern \"{pattern}\": the name \"{}\" must start with the product's first character and end with its last one (no \"/\" of a version)",
            String::from_utf8_lossy(n)
        ));
    }
    Ok(names)
}

/// User-Agents of common browsers: no name's gram is one of theirs
/// where the name has another, so these, and the many like them, are
/// answered by the pass alone.
const BROWSERS: [&str; 16] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPad; CPU OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 13; Pixel 7 Build/TQ3A.230901.001; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/118.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
    "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 YaBrowser/24.12.0.0 Safari/537.36",
    "Mozilla/5.0 (SMART-TV; Linux; Tizen 8.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/7.0 Chrome/120.0.0.0 TV Safari/537.36",
];

/// A pattern and whether it yields to the others (a library's, a tool's).
#[derive(Debug, Clone)]
pub struct Pattern {
    pub text: String,
    pub yields: bool,
}

/// Every name of `patterns` with the pattern it belongs to: a name listed
/// again (the same text, anchored or not) belongs to the first pattern that lists it.
pub fn owned_names(patterns: &[Pattern]) -> Result<Vec<(Name, usize)>, String> {
    let mut owned = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, Pattern { text: p, .. }) in patterns.iter().enumerate() {
        for name in names(p)? {
            if seen.insert(name.text.clone()) {
                owned.push((name, i));
            }
        }
    }
    Ok(owned)
}

impl Matcher {
    pub fn new(patterns: &[Pattern]) -> Result<Matcher, String> {
        let mut items: Vec<Item> =
            owned_names(patterns)?.into_iter().map(|(name, i)| Item::new(name.text, name.anchored, patterns[i].yields, i as u32)).collect();
        let names = items.len();
        items.extend(crate::detector::needles().map(|n| Item::new(n.as_bytes().to_vec(), false, false, DETECTOR)));
        choose_grams(&mut items);
        // a three-byte name claims after a byte of CLAIM_FOLLOWS, or at the start: a gram
        // of four bytes for each such byte, and the start looked at on its own
        let (short, mut items): (Vec<Item>, Vec<Item>) = items.into_iter().partition(|it| it.owner != DETECTOR && it.text.len() == 3);
        let mut starts = vec![0u32; 1 << 10].into_boxed_slice();
        for it in &short {
            let k = trigram_key(&it.text, 0);
            starts[k / 32] |= 1 << (k % 32);
            if !it.anchored {
                items.extend(CLAIM_FOLLOWS.iter().map(|b| Item { after: Some(*b), ..it.clone() }));
            }
        }
        let grams: Vec<Gram> = items.iter().map(Item::gram).collect();
        let places = Trigrams::new(&grams).ok_or("the catalogue has too many names")?;
        let mut groups: Vec<Vec<Item>> = Vec::new();
        for (item, gram) in items.into_iter().zip(grams) {
            let g = places.group(gram.key).ok_or("a gram without its group")? as usize;
            if groups.len() <= g {
                groups.resize(g + 1, Vec::new());
            }
            groups[g].push(item);
        }
        for g in &mut groups {
            g.sort_by_key(|it| (it.after.is_none(), it.offset));
        }
        Ok(Matcher { places, groups, short, starts, names, patterns: patterns.len() })
    }

    /// Whether a three-byte name may start the User-Agent.
    fn may_start_short(&self, ua: &[u8]) -> bool {
        let Some(&[a, b, c]) = ua.get(..3) else { return false };
        let k = key(a, b, c);
        self.starts[k / 32] & (1 << (k % 32)) != 0
    }

    /// The pattern that names the client (see the module's doc), and whether
    /// the detector has a needle to look at.
    pub fn find(&self, ua: &[u8]) -> Found {
        let mut found = Found::default();
        // the best claim so far: where it starts, its length, its pattern; apart for the
        // patterns that yield
        let mut best: [Option<(usize, usize, u32)>; 2] = [None; 2];
        let mut consider = |it: &Item, start: usize| {
            if !it.may_start(ua, start) || !starts_with_ci(&ua[start..], &it.text) {
                return;
            }
            if it.owner == DETECTOR {
                found.needle = true;
            } else if (if it.anchored { start == 0 } else { claim_at(ua, start) }) && ends_token(ua, start + it.text.len()) {
                let best = &mut best[usize::from(it.yields)];
                if best.is_none_or(|(s, n, _)| start < s || start == s && it.text.len() > n) && claim_in_device_comment(ua, start) {
                    *best = Some((start, it.text.len(), it.owner));
                }
            }
        };
        if self.may_start_short(ua) {
            self.short.iter().for_each(|it| consider(it, 0));
        }
        let mut at = false;
        self.places.visit(ua, |place, group| {
            if group == AT {
                at = true;
                return false;
            }
            for it in &self.groups[group as usize] {
                let Some(start) = it.start(place) else { break };
                consider(it, start);
            }
            false
        });
        found.needle |= at;
        found.pattern = best[0].or(best[1]).map(|(_, _, p)| p as usize);
        found
    }

    /// The pattern that names the client.
    pub fn first_match(&self, ua: &[u8]) -> Option<usize> {
        self.find(ua).pattern
    }

    /// Whether a name may claim an agent in `ua`, or the detector has a
    /// needle there: false means neither (the pass, and the places it finds
    /// compared until one holds a name at a claim position or a needle).
    pub fn may_match(&self, ua: &[u8]) -> bool {
        let holds = |it: &Item, start: usize| {
            it.may_start(ua, start)
                && starts_with_ci(&ua[start..], &it.text)
                && (it.owner == DETECTOR || if it.anchored { start == 0 } else { claim_at(ua, start) })
        };
        self.may_start_short(ua) && self.short.iter().any(|it| holds(it, 0))
            || self
                .places
                .visit(ua, |place, group| group == AT || self.groups[group as usize].iter().any(|it| it.start(place).is_some_and(|start| holds(it, start))))
    }

    /// Whether `ua` has a place with a gram, or an `@`, or starts with the
    /// three bytes of a three-byte name: true wherever [`Matcher::may_match`]
    /// is, on less evidence (the pass alone).
    #[inline(always)]
    pub fn may_match_roughly(&self, ua: &[u8]) -> bool {
        self.may_start_short(ua) || self.places.any(ua)
    }

    /// How many distinct names the patterns stand for.
    pub fn name_count(&self) -> usize {
        self.names
    }

    /// The bytes the table and the names take.
    pub fn memory_usage(&self) -> usize {
        self.places.memory_usage() + self.groups.iter().flatten().map(|it| it.text.len() + std::mem::size_of::<Item>()).sum::<usize>()
    }

    /// How many patterns the matcher was built from.
    pub fn patterns(&self) -> usize {
        self.patterns
    }
}

impl Item {
    fn new(text: Vec<u8>, anchored: bool, yields: bool, owner: u32) -> Item {
        let n = text.len().min(4);
        let mut head = [0u8; 4];
        head[..n].copy_from_slice(&text[..n]);
        let head_mask = if n == 4 { u32::MAX } else { u32::MAX >> (8 * (4 - n)) };
        Item { head: folded(head) & head_mask, head_mask, text: text.into(), offset: 0, after: None, anchored, yields, owner }
    }

    /// Where it would start, found at `place` (none: before the User-Agent).
    #[inline]
    fn start(&self, place: usize) -> Option<usize> {
        match self.after {
            Some(_) => Some(place + 1),
            None => place.checked_sub(self.offset),
        }
    }

    /// Its gram: the three bytes at its offset, and the one after them (any
    /// byte, where the three end it); or a byte and a three-byte name.
    fn gram(&self) -> Gram {
        if let Some(b) = self.after {
            return Gram { key: key(b, self.text[0], self.text[1]), beside: Beside::After(self.text[2]) };
        }
        Gram { key: trigram_key(&self.text, self.offset), beside: self.text.get(self.offset + 3).map_or(Beside::Any, |d| Beside::After(*d)) }
    }

    /// False only where the item cannot start at `start` of `ua`: its head
    /// differs there. A byte's case-insensitive match keeps bit 5 equal
    /// once set on both sides; so do a few other pairs (`_` and DEL), which
    /// the comparison after this one tells apart.
    #[inline]
    fn may_start(&self, ua: &[u8], start: usize) -> bool {
        match ua.get(start..start + 4) {
            Some(four) => folded(four.try_into().expect("four bytes")) & self.head_mask == self.head,
            None => true,
        }
    }
}

/// Four bytes as a little-endian word, bit 5 of each set (ASCII letters to lower case).
#[inline]
fn folded(four: [u8; 4]) -> u32 {
    u32::from_le_bytes(four) | 0x2020_2020
}

fn trigram_key(text: &[u8], offset: usize) -> usize {
    key(text[offset], text[offset + 1], text[offset + 2])
}

/// The three bytes at `offset` of a name, and the one after them (five bits, as the pass sees it).
fn fourth_key(text: &[u8], offset: usize) -> (usize, Option<u8>) {
    (trigram_key(text, offset), Some(text.get(offset + 3).map_or(0xff, |d| d & 31)))
}

fn starts_with_ci(hay: &[u8], lower: &[u8]) -> bool {
    hay.len() >= lower.len() && hay.iter().zip(lower).all(|(h, l)| h.to_ascii_lowercase() == *l)
}

/// Each item's gram: of the offsets whose three bytes no browser of
/// [`BROWSERS`] has (all of them, if every one is), one with a fourth byte
/// after them if there is one, and of those the one whose three bytes the
/// most items hold somewhere, so that the table has few keys, and so few
/// places of a random string have one; the first such offset on a tie.
fn choose_grams(items: &mut [Item]) {
    let mut browser = vec![false; 1 << 15];
    for b in BROWSERS {
        for w in b.as_bytes().windows(3) {
            browser[key(w[0], w[1], w[2])] = true;
        }
    }
    // how many items hold each three bytes, and each four, somewhere
    let mut holders = std::collections::HashMap::<(usize, Option<u8>), usize>::new();
    for it in items.iter() {
        let mut keys: Vec<(usize, Option<u8>)> = (0..=it.text.len() - 3).flat_map(|o| [(trigram_key(&it.text, o), None), fourth_key(&it.text, o)]).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            *holders.entry(k).or_default() += 1;
        }
    }
    for it in items.iter_mut() {
        let offsets = 0..=it.text.len() - 3;
        let clean: Vec<usize> = offsets.clone().filter(|o| !browser[trigram_key(&it.text, *o)]).collect();
        let candidates = if clean.is_empty() { offsets.collect() } else { clean };
        let rank = |o: usize| (o + 4 <= it.text.len(), holders[&fourth_key(&it.text, o)], holders[&(trigram_key(&it.text, o), None)], std::cmp::Reverse(o));
        it.offset = candidates.iter().copied().max_by_key(|o| rank(*o)).unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as written: the leftmost claim position where some pattern's
    /// name is, then its longest name there, then the first pattern that has
    /// it; among the patterns that do not yield first.
    fn naive(patterns: &[Pattern], ua: &[u8]) -> Option<usize> {
        Naive::new(patterns).first(ua)
    }

    /// [`naive`] with the names by their first byte, for many strings.
    struct Naive<'p> {
        patterns: &'p [Pattern],
        by_first: std::collections::HashMap<u8, Vec<(Name, usize)>>,
    }

    impl<'p> Naive<'p> {
        fn new(patterns: &'p [Pattern]) -> Self {
            let mut by_first: std::collections::HashMap<u8, Vec<(Name, usize)>> = Default::default();
            for (i, p) in patterns.iter().enumerate() {
                for n in names(&p.text).unwrap() {
                    by_first.entry(n.text[0]).or_default().push((n, i));
                }
            }
            Naive { patterns, by_first }
        }

        fn first(&self, ua: &[u8]) -> Option<usize> {
            let tier = |yields: bool| {
                (0..ua.len()).filter(|s| claim_at(ua, *s)).find_map(|s| {
                    self.by_first
                        .get(&ua[s].to_ascii_lowercase())?
                        .iter()
                        .filter(|(n, i)| {
                            self.patterns[*i].yields == yields
                                && (!n.anchored || s == 0)
                                && starts_with_ci(&ua[s..], &n.text)
                                && ends_token(ua, s + n.text.len())
                                && claim_in_device_comment(ua, s)
                        })
                        .max_by_key(|(n, i)| (n.text.len(), std::cmp::Reverse(*i)))
                        .map(|(_, i)| *i)
                })
            };
            tier(false).or_else(|| tier(true))
        }
    }

    fn pats(v: &[&str]) -> Vec<Pattern> {
        v.iter().map(|s| Pattern { text: s.trim_start_matches('~').to_string(), yields: s.starts_with('~') }).collect()
    }

    #[test]
    fn a_pattern_stands_for_names() {
        let texts = |p: &str| names(p).unwrap().into_iter().map(|n| (String::from_utf8(n.text).unwrap(), n.anchored)).collect::<Vec<_>>();
        let free = |v: &[&str]| v.iter().map(|s| (s.to_string(), false)).collect::<Vec<_>>();
        assert_eq!(texts("Yandex(Bot|Images)"), free(&["yandexbot", "yandeximages"]));
        assert_eq!(texts("Apache-Http(Async)?Client"), free(&["apache-httpasyncclient", "apache-httpclient"]));
        assert_eq!(texts("[Cc]url"), free(&["curl"]));
        assert_eq!(texts("Yahoo! Slurp"), free(&["yahoo! slurp"]));
        assert_eq!(texts("^Java|Java-http-client"), vec![("java".to_string(), true), ("java-http-client".to_string(), false)]);
        for (bad, says) in [
            ("Go", "at least"),
            ("x(^Java)", "only a name may start with ^"),
            ("Java$", "only a name may start with ^"),
            ("Synth\\d+Crawler", "at most"),
            ("Yeti/", "no \"/\""),
            ("(bot|crawl", "unclosed group"),
            ("[a-z]+bot", "at most"),
        ] {
            let e = names(bad).unwrap_err();
            assert!(e.contains(says) || (says == "at least" && e.contains("each 3 to 64")), "{bad}: {e}");
        }
    }

    #[test]
    fn the_leftmost_longest_claim_names_the_client() {
        // "~": a library's pattern, which yields
        let p = pats(&[
            "Googlebot",
            "Googlebot-News",
            "FeedFetcher-Google",
            "Feedly",
            "AhrefsBot",
            "~AppEngine-Google",
            "TwitterBot",
            "TelegramBot",
            "~http\\.rb",
            "Mastodon",
        ]);
        let m = Matcher::new(&p).unwrap();
        for (ua, want) in [
            ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", Some("Googlebot")),
            ("Googlebot-News", Some("Googlebot-News")),
            ("Googlebot-Image/1.0", Some("Googlebot")),
            ("Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)", Some("Feedly")),
            ("Mozilla/5.0 (compatible; AhrefsBot/5.0; +http://ahrefs.com/robot/) AppEngine-Google; (+http://code.google.com/appengine)", Some("AhrefsBot")),
            ("TelegramBot (like TwitterBot)", Some("TelegramBot")),
            ("Mozilla/5.0 (Linux; Android 13; Feedly X1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36", None),
            ("Mozilla/5.0 (Linux; Android 8.0; Pixel 2 Build/OPD3.170816.012; Feedly/1.0) AppleWebKit/537.36 (KHTML, like Gecko)", Some("Feedly")),
            ("http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)", Some("Mastodon")),
            ("http.rb/5.1.1", Some("~http\\.rb")),
            ("AppEngine-Google; (+http://code.google.com/appengine) AhrefsBot/5.0", Some("AhrefsBot")),
            ("Mozilla/5.0 (compatible; Fake-Googlebot/2.1)", None),
            ("FreshRSS/1.24.0 (Linux; https://freshrss.org) like Googlebot", None),
            ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", None),
        ] {
            let got = m.first_match(ua.as_bytes()).map(|i| if p[i].yields { format!("~{}", p[i].text) } else { p[i].text.clone() });
            let got = got.as_deref();
            assert_eq!(got, want, "{ua}");
            assert_eq!(m.first_match(ua.as_bytes()), naive(&p, ua.as_bytes()), "{ua}");
        }
        assert!(m.find(b"Feedly/1.0 (+http://www.feedly.com)").needle, "http is a needle of the detector");
        assert!(m.find(b"x a@b.example").needle, "so is an @");
        assert!(!m.find(b"Feedly/1.0").needle);
    }

    #[test]
    fn a_claim_follows_only_the_bytes_a_three_byte_name_is_looked_for_after() {
        for b in 0..=255u8 {
            let ua = [b'x', b, b'b', b'o', b't'];
            assert_eq!(claim_at(&ua, 2), CLAIM_FOLLOWS.contains(&b), "after {b:#x}");
        }
        let m = Matcher::new(&pats(&["Bot", "Zzz", "^Abc"])).unwrap();
        for (ua, want) in [
            ("bot/1", Some(0)),
            ("x (Bot)", Some(0)),
            ("x;Bot", Some(0)),
            ("x,bot", Some(0)),
            ("x\tBOT", Some(0)),
            ("xbot", None),
            ("x/bot", None),
            ("abc/1", Some(2)),
            ("x abc", None),
        ] {
            assert_eq!(m.first_match(ua.as_bytes()), want, "{ua}");
        }
    }

    #[test]
    fn few_random_strings_have_a_place_to_compare() {
        // what a farm rotating made-up User-Agents sends (bench/client.py's random: strings):
        // each place the pass visits costs the comparisons of its names
        let file: crate::model::CatalogueFile = serde_yaml::from_str(crate::catalogue::BUILTIN_YAML).unwrap();
        let p: Vec<Pattern> = file.agents.iter().filter_map(|a| a.ua.clone().map(|text| Pattern { text, yields: false })).collect();
        let m = Matcher::new(&p).unwrap();
        let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ;:()/.,_-+";
        let mut seed: u64 = 0x853c_49e6_748f_ea9b;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let n = 20_000;
        let visited = (0..n)
            .filter(|_| {
                let len = 60 + (next() % 101) as usize;
                let ua: Vec<u8> = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
                m.places.visit(&ua, |_, _| true)
            })
            .count();
        // with three bytes for a gram, four in five did; with four (and the byte a claim
        // follows before a three-byte name), about one in nine
        assert!(visited * 100 < n * 15, "{visited} of {n} random strings had a place to compare");
    }

    #[test]
    fn browsers_have_no_chosen_trigram_and_agree_with_the_rule_on_random_input() {
        let file: crate::model::CatalogueFile = serde_yaml::from_str(crate::catalogue::BUILTIN_YAML).unwrap();
        let p: Vec<Pattern> = file
            .agents
            .iter()
            .filter_map(|a| a.ua.clone().map(|text| Pattern { text, yields: matches!(a.purpose.as_deref(), Some("scripting" | "automation")) }))
            .collect();
        let m = Matcher::new(&p).unwrap();
        for b in BROWSERS {
            assert!(!m.may_match_roughly(b.as_bytes()), "{b}");
        }
        let oracle = Naive::new(&p);
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let words: Vec<String> = file
            .agents
            .iter()
            .map(|a| a.name.clone())
            .chain([
                "Mozilla/5.0".into(),
                "(compatible;".into(),
                "like".into(),
                "with".into(),
                "bot".into(),
                "-".into(),
                ";".into(),
                "(".into(),
                "(Linux; Android 9;".into(),
                ")".into(),
            ])
            .collect();
        for round in 0..8000 {
            let mut hay = Vec::new();
            if round % 4 == 3 {
                let len = (next() % 200) as usize;
                hay.extend((0..len).map(|_| (next() % 256) as u8));
            } else {
                for _ in 0..(next() % 6) {
                    let w = &words[(next() % words.len() as u64) as usize];
                    match next() % 3 {
                        0 => hay.extend(w.to_ascii_lowercase().bytes()),
                        1 => hay.extend(w.to_ascii_uppercase().bytes()),
                        _ => hay.extend(w.bytes()),
                    }
                    hay.push([b' ', b'/', b';', b'x'][(next() % 4) as usize]);
                }
            }
            let expected = oracle.first(&hay);
            assert_eq!(m.first_match(&hay), expected, "{:?}", String::from_utf8_lossy(&hay));
            if expected.is_some() {
                assert!(m.may_match(&hay) && m.may_match_roughly(&hay), "the prefilter turned away a match: {:?}", String::from_utf8_lossy(&hay));
            }
            assert!(!m.may_match(&hay) || m.may_match_roughly(&hay));
        }
    }
}
