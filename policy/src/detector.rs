//! Bots the catalogue does not name: a User-Agent that reads as a bot is
//! counted and budgeted as one (purpose `unknown-bot`), never taken for a
//! person.
//!
//! A User-Agent reads as a bot when it has, outside the comments that
//! describe a device:
//!
//! - a word of the field ([`SUFFIX_WORDS`] ending a word: `Rivetbot`,
//!   `WebCrawler`, `site-checker`; [`PREFIX_WORDS`] starting one:
//!   `crawling`, `spider-`), and a device model is not a word of the field:
//!   the comments of Android and TV User-Agents (`(Linux; Android 13; CUBOT
//!   P60)`, `Instagram ... Android (...; CUBOT; ...)`) are left out;
//! - a headless browser's or an automation tool's marker ([`HEADLESS`]);
//! - a contact address introduced by `+` (`+http://...`, `+www.`), the
//!   crawlers' convention;
//!
//! or, with no browser engine in it ([`ENGINES`]), a web or e-mail address,
//! or a first product that an HTTP library's name ([`LIBRARY_WORDS`]).
//!
//! Every rule needs one of [`NEEDLES`] (or an `@`) somewhere in the
//! User-Agent: the matcher's prefilter looks for them, so a browser's
//! User-Agent, which has none, is answered without running these rules.
//! The stock render writes the same rules for nginx's PCRE ([`pcre`]); a
//! test runs both on the same strings.

/// Words that make a bot when they end a word (the next byte is not a letter).
pub const SUFFIX_WORDS: [&str; 17] = [
    "bot", "bots", "crawler", "crawlers", "spider", "spiders", "slurp", "scraper", "scrapers", "fetcher", "checker", "monitor", "preview",
    "archiver", "indexer", "harvester", "validator",
];

/// Words that make a bot when they start a word (the byte before is not a letter).
pub const PREFIX_WORDS: [&str; 5] = ["crawl", "spider", "scraper", "scraping", "scrapy"];

/// Markers of headless browsers and browser automation, anywhere.
pub const HEADLESS: [&str; 10] = ["headless", "phantomjs", "selenium", "webdriver", "playwright", "puppeteer", "htmlunit", "jsdom", "lightpanda", "slimerjs"];

/// A browser engine's tokens: a User-Agent with one of them is not judged by
/// its addresses or its first product.
pub const ENGINES: [&str; 8] = ["applewebkit", "gecko/", "khtml", "trident/", "presto/", "chrome/", "firefox/", "safari/"];

/// Words of HTTP libraries' names, in the first product of a User-Agent
/// without a browser engine (`Google-HTTP-Java-Client/1.17`, `GRequests/0.10`).
pub const LIBRARY_WORDS: [&str; 6] = ["http", "request", "fetch", "curl", "urllib", "wget"];

/// Markers of a device's own comment: an Android phone's, a TV's, a WebView's.
const DEVICE: [&str; 10] = ["android", "hbbtv", "smart-tv", "smarttv", "tizen", "webos", "web0s", "netcast", "cros ", "cros\t"];

/// What every rule needs somewhere in the User-Agent (lower case), besides
/// an `@`: each rule's words contain one of these.
pub const NEEDLES: [&str; 29] = [
    "bot", "crawl", "spider", "slurp", "scrap", "fetch", "checker", "monitor", "preview", "archiver", "indexer", "harvester", "validator",
    "headless", "phantomjs", "selenium", "webdriver", "playwright", "puppeteer", "htmlunit", "jsdom", "lightpanda", "slimerjs", "http",
    "www.", "request", "curl", "urllib", "wget",
];

/// Which rule found a bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A word of the field.
    Word,
    /// A headless browser's or an automation tool's marker.
    Headless,
    /// A `+http`, `+https` or `+www.` contact.
    Contact,
    /// A web or e-mail address in a User-Agent with no browser engine.
    Address,
    /// A first product named like an HTTP library, with no browser engine.
    Library,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Word => "a bot word",
            Signal::Headless => "a headless browser's marker",
            Signal::Contact => "a +http contact",
            Signal::Address => "an address and no browser engine",
            Signal::Library => "an HTTP library's name and no browser engine",
        }
    }
}

/// A bot the catalogue does not name: why, and its name (the product token
/// holding the bot word, else its first product: start and length in the
/// User-Agent; None when it has no printable token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bot {
    pub signal: Signal,
    pub token: Option<(usize, usize)>,
}

/// Whether `ua` reads as a bot, and its name.
pub fn bot(ua: &[u8]) -> Option<Bot> {
    if let Some(at) = word_at(ua) {
        return Some(Bot { signal: Signal::Word, token: token_around(ua, at) });
    }
    if let Some(at) = HEADLESS.iter().find_map(|m| find(ua, m.as_bytes())) {
        return Some(Bot { signal: Signal::Headless, token: token_around(ua, at) });
    }
    let signal = if plus_contact(ua) {
        Signal::Contact
    } else if ENGINES.iter().any(|e| contains(ua, e.as_bytes())) {
        return None;
    } else if web_address(ua) || email(ua) {
        Signal::Address
    } else if library(ua) {
        Signal::Library
    } else {
        return None;
    };
    Some(Bot { signal, token: first_product(ua) })
}

/// Where the first word of the field starts, outside the device comments.
fn word_at(ua: &[u8]) -> Option<usize> {
    let letter = |i: usize| ua.get(i).is_some_and(|b| b.is_ascii_alphabetic());
    let mut excluded = device_comments(ua).peekable();
    let mut i = 0;
    while i < ua.len() {
        // skip a device comment's text (the '(' itself is no word)
        if let Some(&(start, end)) = excluded.peek() {
            if i > start {
                if i < end {
                    i = end;
                    continue;
                }
                excluded.next();
                continue;
            }
        }
        let at = |w: &str| ua[i..].len() >= w.len() && ua[i..i + w.len()].eq_ignore_ascii_case(w.as_bytes());
        if SUFFIX_WORDS.iter().any(|w| at(w) && !letter(i + w.len())) || (i == 0 || !letter(i - 1)) && PREFIX_WORDS.iter().any(|w| at(w)) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Whether a claim may start at `at` as far as device comments go: outside
/// them, anywhere; inside one (see [`device_comments`]), only where an item
/// starts with a `Name/version` product (`(Linux; Android 8.0; Pixel 2
/// Build/OPD3; Storebot-Google/1.0)`), since a phone's or a TV's model is no
/// product (`(Linux; Android 5.1; DART KZ07)`).
pub fn claim_in_device_comment(ua: &[u8], at: usize) -> bool {
    let Some((open, _)) = device_comments(ua).take_while(|(open, _)| *open < at).find(|(open, end)| *open < at && at < *end) else { return true };
    // an item starts here: after the '(' or a ';', and spaces
    let before = ua[open + 1..at].iter().rposition(|b| !matches!(b, b' ' | b'\t')).map(|p| ua[open + 1 + p]);
    let item_start = before.is_none_or(|b| b == b';');
    let token = ua[at..].iter().take_while(|b| !matches!(b, b' ' | b'\t' | b';' | b'(' | b')' | b'/')).count();
    item_start && token > 0 && ua.get(at + token) == Some(&b'/')
}

/// The device comments, in order, as (the '(', the end of its text): a
/// comment's text runs to the next '(' or ')', and it describes a device when
/// it holds one of [`DEVICE`] or `; wv`, or when it follows an `Android`
/// product (`Android (22/5.1; ...)`).
fn device_comments(ua: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    ua.iter().enumerate().filter(|(_, b)| **b == b'(').filter_map(move |(open, _)| {
        let end = ua[open + 1..].iter().position(|b| matches!(b, b'(' | b')')).map_or(ua.len(), |p| open + 1 + p);
        let text = &ua[open + 1..end];
        let device = DEVICE.iter().any(|m| contains(text, m.as_bytes())) || webview(text) || after_android(ua, open);
        device.then_some((open, end))
    })
}

/// `;` then spaces or tabs then `wv`: an Android WebView's comment.
fn webview(text: &[u8]) -> bool {
    text.iter().enumerate().any(|(i, b)| {
        *b == b';' && {
            let rest = &text[i + 1..];
            let gap = rest.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
            rest[gap..].len() >= 2 && rest[gap..gap + 2].eq_ignore_ascii_case(b"wv")
        }
    })
}

/// Whether the `(` at `open` follows the word `android` (at a token's start)
/// and at most one space or tab.
fn after_android(ua: &[u8], open: usize) -> bool {
    let word_end = if open > 0 && matches!(ua[open - 1], b' ' | b'\t') { open - 1 } else { open };
    word_end >= 7
        && ua[word_end - 7..word_end].eq_ignore_ascii_case(b"android")
        && (word_end == 7 || matches!(ua[word_end - 8], b' ' | b'\t' | b'(' | b';' | b','))
}

/// A token's bytes: printable ASCII but the separators of products and comments.
fn token_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'(' | b')' | b';' | b',' | b'/' | b'+')
}

/// A bot's name is at most this long.
pub const MAX_TOKEN: usize = 64;

/// The token around `at` (its first [`MAX_TOKEN`] bytes).
fn token_around(ua: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = ua[..at].iter().rposition(|b| !token_byte(*b)).map_or(0, |p| p + 1);
    let end = ua[at..].iter().position(|b| !token_byte(*b)).map_or(ua.len(), |p| at + p);
    (end > start).then_some((start, (end - start).min(MAX_TOKEN)))
}

/// The first product's name; for a `Mozilla/...` User-Agent, the first item
/// of its first comment that is not `compatible`, `U` or a platform
/// (`Windows NT 10.0`, `X11`), or none.
fn first_product(ua: &[u8]) -> Option<(usize, usize)> {
    let start = ua.iter().position(|b| !matches!(b, b' ' | b'\t'))?;
    let first = token_around(ua, start);
    let Some((s, n)) = first else { return None };
    if !ua[s..s + n].eq_ignore_ascii_case(b"mozilla") {
        return first;
    }
    let open = ua.iter().position(|b| *b == b'(')?;
    let mut i = open + 1;
    while i < ua.len() && ua[i] != b')' {
        while i < ua.len() && matches!(ua[i], b' ' | b'\t' | b';') {
            i += 1;
        }
        let Some((s, n)) = token_around(ua, i).filter(|(s, _)| *s == i) else { break };
        let item = &ua[s..s + n];
        if !PLATFORMS.iter().any(|p| starts_ci(item, p.as_bytes())) && !item.eq_ignore_ascii_case(b"u") {
            return Some((s, n));
        }
        i = s + n;
        while i < ua.len() && !matches!(ua[i], b';' | b')') {
            i += 1;
        }
    }
    None
}

/// Comment items of browsers' User-Agents that name no bot.
const PLATFORMS: [&str; 12] = ["compatible", "windows", "macintosh", "x11", "linux", "iphone", "ipad", "android", "cros", "ubuntu", "msie", "en-"];

/// `+http:`, `+https:` or `+www.`, with at most one space or tab after the `+`.
fn plus_contact(ua: &[u8]) -> bool {
    ua.iter().enumerate().any(|(i, b)| {
        *b == b'+' && {
            let rest = &ua[i + 1..];
            let rest = if rest.first().is_some_and(|b| matches!(b, b' ' | b'\t')) { &rest[1..] } else { rest };
            starts_ci(rest, b"http:") || starts_ci(rest, b"https:") || starts_ci(rest, b"www.")
        }
    })
}

/// `http://`, `https://` or `www.` anywhere.
fn web_address(ua: &[u8]) -> bool {
    contains(ua, b"http://") || contains(ua, b"https://") || contains(ua, b"www.")
}

/// An e-mail address: a byte of a name, `@`, a domain label, `.`, a letter.
fn email(ua: &[u8]) -> bool {
    let name = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    let label = |b: u8| b.is_ascii_alphanumeric() || b == b'-';
    ua.iter().enumerate().any(|(i, b)| {
        *b == b'@' && i > 0 && name(ua[i - 1]) && {
            let rest = &ua[i + 1..];
            let n = rest.iter().take_while(|b| label(**b)).count();
            n > 0 && rest.get(n) == Some(&b'.') && rest.get(n + 1).is_some_and(|b| b.is_ascii_alphabetic())
        }
    })
}

/// The first product (up to a space, tab, `/` or a comment's separator) has
/// a library word.
fn library(ua: &[u8]) -> bool {
    let start = ua.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
    let len = ua[start..].iter().take_while(|b| !matches!(b, b' ' | b'\t' | b'/' | b';' | b'(' | b')' | b',')).count();
    let first = &ua[start..start + len];
    LIBRARY_WORDS.iter().any(|w| contains(first, w.as_bytes()))
}

fn starts_ci(hay: &[u8], prefix: &[u8]) -> bool {
    hay.len() >= prefix.len() && hay[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// The same rules for nginx's PCRE (case-insensitive, `~*`), one regular
/// expression each, in the order [`bot`] tries them: the first that matches
/// makes the User-Agent an unknown bot.
pub fn pcre() -> Vec<String> {
    let words = pcre_words();
    let no_engine = format!("^(?!.*(?:{}))", ENGINES.iter().map(|e| pcre_literal(e)).collect::<Vec<_>>().join("|"));
    vec![
        format!("{}(?:{words})", pcre_outside_devices()),
        HEADLESS.iter().map(|m| pcre_literal(m)).collect::<Vec<_>>().join("|"),
        "\\+[ \\t]?(?:https?:|www\\.)".to_string(),
        format!("{no_engine}.*(?:https?://|www\\.|[a-z0-9._-]@[a-z0-9-]+\\.[a-z])"),
        format!("{no_engine}[ \\t]*[^ \\t/;(),]*(?:{})", LIBRARY_WORDS.iter().map(|w| pcre_literal(w)).collect::<Vec<_>>().join("|")),
    ]
}

/// The words of the field, for PCRE, anywhere (device comments included): a
/// quick first look, true wherever the first of [`pcre`] is.
pub fn pcre_words() -> String {
    format!(
        "(?:{})(?![a-z])|(?<![a-z])(?:{})",
        SUFFIX_WORDS.iter().map(|w| pcre_literal(w)).collect::<Vec<_>>().join("|"),
        PREFIX_WORDS.iter().map(|w| pcre_literal(w)).collect::<Vec<_>>().join("|")
    )
}

/// The device markers, as a PCRE alternation.
fn pcre_device() -> String {
    format!("(?:{}|;[ \\t]*wv)", DEVICE.iter().map(|d| pcre_literal(d)).collect::<Vec<_>>().join("|"))
}

/// A comment after "android" (at a token's start, then at most one space or tab), as a lookbehind's alternatives.
const PCRE_AFTER_ANDROID: &str = "^android|[ \\t(;,]android|^android[ \\t]|[ \\t(;,]android[ \\t]";

/// For PCRE, from the start of the User-Agent (anchored) to any place outside
/// the device comments, lazily: a device comment is skipped whole
/// (possessively: never given back to find something in it), any other `(`
/// opens a comment that is read. What follows it is tried at each such place.
pub fn pcre_outside_devices() -> String {
    let device = pcre_device();
    let skip = format!("\\((?=[^()]*{device})[^()]*+\\)?+|(?<={PCRE_AFTER_ANDROID})\\([^()]*+\\)?+");
    let open = format!("(?<!{PCRE_AFTER_ANDROID})\\((?![^()]*{device})");
    format!("^(?:{skip}|[^(]|{open})*?")
}

/// For PCRE, after [`pcre_outside_devices`]: optionally, from a device
/// comment's `(` to one of its items that starts with a `Name/` product, the
/// only places in it where a claim may start ([`claim_in_device_comment`]).
pub fn pcre_device_item() -> String {
    let device = pcre_device();
    format!("(?:(?:\\((?=[^()]*{device})|(?<={PCRE_AFTER_ANDROID})\\()(?:[^;()]*;)*?[ \\t]*(?=[^ \\t;()/]+/))?")
}

/// A literal for PCRE: `.` and `-` escaped, a space or tab as `[ \t]` where
/// the Rust rule takes either (the device markers `cros `).
fn pcre_literal(s: &str) -> String {
    s.replace('.', "\\.").replace('-', "\\-").replace(' ', " ").replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ua: &str) -> Option<String> {
        bot(ua.as_bytes()).map(|b| b.token.map_or("-".to_string(), |(s, n)| ua[s..s + n].to_string()))
    }

    #[test]
    fn bot_words_contacts_libraries_and_headless_browsers() {
        for (ua, token) in [
            ("Mozilla/5.0 (compatible; Rivetbot/1.0; +https://example.net/bot)", "Rivetbot"),
            ("Clickagy Intelligence Bot v2", "Bot"),
            ("Mozilla/5.0 (compatible; ICC-Crawler/3.0)", "ICC-Crawler"),
            ("site-checker/1.0 (+https://example.com)", "site-checker"),
            ("crawling-test/2", "crawling-test"),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36", "HeadlessChrome"),
            ("ADmantX Platform Semantic Analyzer - ADmantX Inc. - www.admantx.com - support@admantx.com", "ADmantX"),
            ("Mozilla/5.0 (compatible; Ezooms/1.0; help@moz.com)", "Ezooms"),
            ("Google-HTTP-Java-Client/1.17.0-rc (gzip)", "Google-HTTP-Java-Client"),
            ("Foo/1.0 (+http://foo.example/info)", "Foo"),
            ("Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Safari/537.36 (+https://example.com/about)", "-"),
        ] {
            assert_eq!(name(ua).as_deref(), Some(token), "{ua}");
        }
        assert_eq!(bot(b"Clickagy Intelligence Bot v2").unwrap().signal, Signal::Word);
        for (ua, token) in [
            ("Mozilla/5.0 (compatible; RIVETBOT/1.0)", "RIVETBOT"),
            ("SpiderMan/2 (x)", "SpiderMan"),
            ("abot", "abot"),
            ("MegaCRAWLer-X/2.0 (+http://x)", "MegaCRAWLer-X"),
            ("Mozilla/5.0 (compatible; slurp)", "slurp"),
            ("x\u{e9}bot", "bot"),
        ] {
            assert_eq!(name(ua).as_deref(), Some(token), "{ua}");
        }
        assert_eq!(name(&format!("{}bot/1", "a".repeat(100))).map(|t| t.len()), Some(MAX_TOKEN), "a name is cut");
        for ua in ["Mozilla/5.0 (Linux; Android 14; BO; bo) Chrome/131 Mobile", "x/1.0 bo", "robotics/1 (Windows) AppleWebKit", "Boto3/1.0 AppleWebKit"] {
            assert_eq!(name(ua), None, "{ua}");
        }
        assert_eq!(bot(b"Google-HTTP-Java-Client/1.17.0-rc (gzip)").unwrap().signal, Signal::Library);
    }

    #[test]
    fn device_models_and_browsers_are_people() {
        for ua in [
            "Mozilla/5.0 (Linux; Android 13; CUBOT P60) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
            "Mozilla/5.0 (Linux; Android 8.0.0; CUBOT_P20) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.110 Mobile Safari/537.36",
            "Mozilla/5.0 (Linux; Android 5.1; S550 Pro Build/LMY47D; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/74.0.3729.157 Mobile Safari/537.36 Instagram 94.0.0.22.116 Android (22/5.1; 320dpi; 720x1280; CUBOT; S550 Pro; hct6735_35gu_l1; mt6735; ru_RU; 155374103)",
            "Mozilla/5.0 (Linux; Andr0id 9; ATV R1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/77.0.3865.120 Safari/537.36 OPR/46.0.2207.0 OMI/4.20.5.31.Oak.45 HbbTV/1.5.1 (+DRM;BOTECH;ATV R1;Demo 1.0;Demonstration only;TVs;) FVC/5.0 (BOTECH;TVs;)",
            "Mozilla/5.0 (Linux; Android 12; IDbot553) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/110.0 Mobile Safari/537.36",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (Windows NT 6.1; Trident/7.0; rv:11.0) like Gecko",
            "Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1; Trident/5.0; checkout-app)",
            "",
        ] {
            assert_eq!(name(ua), None, "{ua}");
        }
    }

    #[test]
    fn every_rule_needs_a_needle() {
        // the prefilter looks for NEEDLES and '@': each rule's words hold one
        let needle = |w: &str| w.contains('@') || NEEDLES.iter().any(|n| w.to_ascii_lowercase().contains(n));
        for w in SUFFIX_WORDS.iter().chain(&PREFIX_WORDS).chain(&HEADLESS).chain(&LIBRARY_WORDS).chain(["http:", "https:", "www."].iter()) {
            assert!(needle(w), "{w}");
        }
    }
}
