//! Who is asking, for stock nginx: the catalogue's names and the bot
//! detector as `map`s that decide what the module decides
//! (`crawlward_policy::matcher`, `claim`, `detector`).
//!
//! - The names are written as tries (`googlebot(?:-news)?`), so PCRE fails
//!   at the first byte of most places instead of trying thousands of names
//!   one after another; around each, the claim rule's lookbehinds and
//!   lookahead. PCRE tries places left to right and, at a place, the longer
//!   names first: the leftmost claim, its longest name there, as the module.
//! - nginx reads no configuration token longer than 4 KB, so the names are
//!   split into groups of one trie each (two names claimed at one place, a
//!   name and a longer one that starts with it, are never apart, so the
//!   longest name at a place is always found within one group). Each group whose names claim
//!   something writes "name, a tab, the text before it, a newline"; of those
//!   lines one expression picks the one whose text before is a prefix of
//!   every other's: the leftmost claim of all.
//! - The claim rule's device comments (a phone's model is no product) need
//!   an expression anchored at the start that walks the comments, which PCRE
//!   runs several times slower than one it may start anywhere; so a group's
//!   is asked only when a quick one, its trie and the claim rule without the
//!   device comments, found something (a `map`'s value is read only when its
//!   entry is chosen). Most browsers stop at the quick ones.
//! - The names of libraries and tools, which yield to any other agent's, are
//!   groups of their own, asked when the others name nothing.
//! - `$cw_claim`: the name looked up among exact keys (nginx's hash,
//!   case-insensitive), as "name purpose list"; else `$cw_bot`, the bot
//!   detector's expressions (its words behind the same kind of quick look):
//!   `unknown-bot`.

use crate::nginx::{quote, Map};
use crawlward_policy::matcher::Name;
use crawlward_policy::{claim, detector, Policy};
use std::collections::BTreeMap;

/// The longest configuration token nginx reads (`NGX_CONF_BUFFER`, 4096 bytes), less a margin.
const TOKEN_MAX: usize = 4000;
/// The longest key of a `map`'s hash with the default `map_hash_bucket_size`
/// (64 on x86-64: an element is a pointer, a length and the key, in 8-byte
/// steps, and a bucket ends with a null pointer).
const HASH_KEY_MAX: usize = 46;
/// Of the groups' lines ("name, a tab, the text before it, a newline"), the
/// name of the one whose text before is a prefix of every other's: a line
/// such that no later line has a text before that does not start with its
/// own (an earlier line with a longer text before fails, as the one with the
/// shorter text is after it).
const PICK: &str = "^(?:[^\\n]*\\n)*?(?<cwpick>[^\\t\\n]+)\\t(?<cwbef>[^\\n]*)\\n(?!(?:[^\\n]*\\n)*[^\\t\\n]+\\t(?!\\k<cwbef>))";
/// Keys in one `map` of exact names: within what `map_hash_max_size` (2048 by default) builds well.
const HASH_KEYS: usize = 200;
/// What the maps read of the User-Agent: its first `UA_READ_MAX` bytes, as the module does.
const UA: &str = "$cw_ua";

/// A group's variables' suffix: its tier's digit, then its number in letters
/// (`0a`, `0b`, ... `0z`, `0ba`). The variables that grow with the catalogue
/// (two a group, `$cwl0a` and `$cwf0a`, and one for each 200 exact names,
/// `$cwc1`...) have names of at most six bytes, so that three share a
/// bucket of nginx's variables hash: with the longer names of before, 700
/// agents of a site's own on top of the built-in catalogue made Debian's
/// nginx 1.22 warn that it "could not build optimal variables_hash" at the
/// default `variables_hash_max_size` (1024) and bucket size (64).
fn group_id(tier: usize, group: usize) -> String {
    let mut letters = Vec::new();
    let mut n = group;
    loop {
        letters.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
        if n == 0 {
            break;
        }
    }
    format!("{tier}{}", letters.iter().rev().collect::<String>())
}

/// The maps, given the published list of each agent (by its index in the
/// catalogue; "-": none).
pub fn claim_maps(policy: &Policy, list_of: &dyn Fn(usize) -> String) -> Vec<Map> {
    let catalogue = &policy.identity.catalogue;
    let names = catalogue.names();
    let mut read = Map::new(
        &format!(
            "What identification reads of the User-Agent: its first {max} bytes (crawlward_policy::catalogue::read_part).",
            max = crawlward_policy::catalogue::UA_READ_MAX
        ),
        "$http_user_agent",
        UA,
        "$http_user_agent",
    );
    read.regex(&format!("(?s)^(?<cw_ua_read>.{{{}}})", crawlward_policy::catalogue::UA_READ_MAX), "$cw_ua_read");
    let mut maps = vec![read];
    for (tier, yields, what) in [(0, false, "an agent"), (1, true, "a library or a tool")] {
        let tier_names: Vec<Name> = names.iter().filter(|(_, a)| catalogue.agents()[*a].purpose.yields() == yields).map(|(n, _)| n.clone()).collect();
        let mut lines = Vec::new();
        for (g, group) in groups(&tier_names).iter().enumerate() {
            let id = group_id(tier, g);
            let (full, line) = (format!("$cwf{id}"), format!("$cwl{id}"));
            let trie = trie(group);
            let first = group.first().map_or(String::new(), |n| String::from_utf8_lossy(&n.text[..3]).into_owned());
            let last = group.last().map_or(String::new(), |n| String::from_utf8_lossy(&n.text[..3]).into_owned());
            // the quick look: the value, the full expression's map, is read only when it matches
            let mut quick = Map::new(
                &format!("Names of {what} from \"{first}\" to \"{last}\": where one stands as a product anywhere, the first outside\na device's comment (or as Name/version in one), as \"name, a tab, the text before it, a newline\"."),
                UA,
                &line,
                "",
            );
            quick.regex_ci(&format!("{}(?:{trie}){}", claim::PCRE_BEFORE, claim::PCRE_AFTER), full.clone());
            // the captures' variables are shared: each map's value is made as its expression matches
            let mut claimed = Map::new("", UA, &full, "");
            claimed.comment.clear();
            claimed.regex_ci(&claim_regex_of(&trie, "cwn", Some("cwp")), "$cwn\t$cwp\n");
            maps.extend([quick, claimed]);
            lines.push(line);
        }
        // of the groups' lines, the one whose text before is a prefix of every other's
        let mut pick =
            Map::new(&format!("The first product that names {what}: the leftmost of the groups' claims."), &lines.concat(), &format!("$cw_name{tier}"), "");
        if !lines.is_empty() {
            pick.regex(PICK, "$cwpick");
        }
        maps.push(pick);
    }
    let mut either = Map::new("The first product that names an agent: of the others, else of the libraries and tools.", "$cw_name0", "$cw_name", "$cw_name0");
    either.entry("", "$cw_name1");
    maps.push(either);
    // the names' agents in maps of exact keys, each a hash nginx builds well, chained by their defaults
    let mut keyed: Vec<(String, String)> = Vec::new();
    let mut longer = Map::new("", "$cw_name", "", "$cw_bot");
    longer.comment.clear();
    for (name, agent) in &names {
        let a = &catalogue.agents()[*agent];
        let value = format!("{} {} {}", a.name, a.purpose.as_str(), list_of(*agent));
        let text = String::from_utf8_lossy(&name.text).into_owned();
        if text.len() <= HASH_KEY_MAX {
            keyed.push((text, value));
        } else {
            // too long for a bucket of nginx's hash (map_hash_bucket_size 64): an expression
            longer.regex_ci(&format!("^{}$", text.bytes().map(escape).collect::<String>()), value);
        }
    }
    let chunks: Vec<&[(String, String)]> = keyed.chunks(HASH_KEYS).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let variable = if i == 0 { "$cw_claim".to_string() } else { format!("$cwc{i}") };
        let next = if i + 1 < chunks.len() { format!("$cwc{}", i + 1) } else { "$cw_claim_long".to_string() };
        let comment = if i == 0 { "The name's agent, as \"name purpose list\"; else a bot no agent names." } else { "" };
        let mut m = Map::new(comment, "$cw_name", &variable, &next);
        if i == 0 {
            m.entry("", "$cw_bot");
        }
        for (k, v) in *chunk {
            m.entry(k.clone(), v.clone());
        }
        maps.push(m);
    }
    longer.variable = "$cw_claim_long".to_string();
    maps.push(longer);
    let unknown = catalogue.agents().iter().find(|a| a.counts_by_token()).map(|u| format!("{} {} -", u.name, u.purpose.as_str()));
    let rules = detector::pcre();
    let mut word_seen =
        Map::new("A User-Agent that reads as a bot but names no agent: first, a bot word anywhere, then outside a device's comment.", UA, "$cw_word_seen", "");
    let mut word = Map::new("", UA, "$cw_word_full", "");
    word.comment.clear();
    let mut word_gate = Map::new("", "$cw_word_seen", "$cw_word", "$cw_word_full");
    word_gate.comment.clear();
    word_gate.entry("", "");
    let mut bot = Map::new("", "$cw_word", "$cw_bot", unknown.as_deref().unwrap_or(""));
    bot.comment.clear();
    bot.entry("", "$cw_bot_other");
    let mut other = Map::new(
        "Or a headless browser's marker, a scanner's probe, a +http contact, an e-mail or web address, a script's shape; with no browser engine, an HTTP library's name or a runtime's product.",
        UA,
        "$cw_bot_other",
        "",
    );
    if let Some(unknown) = &unknown {
        word_seen.regex_ci(&detector::pcre_words(), "1");
        word.regex_ci(&rules[0], "1");
        for rule in &rules[1..] {
            other.regex_ci(rule, unknown.clone());
        }
    }
    maps.extend([word_seen, word, word_gate, bot, other]);
    maps
}

/// The names in groups whose claim expression fits in one configuration
/// token. Two names claimed at one place are a name and a longer one that
/// starts with it, and are never apart: each name goes with the shortest
/// name it starts with (its root), and a root's names stay together.
fn groups(names: &[Name]) -> Vec<Vec<Name>> {
    let mut sorted: Vec<&Name> = names.iter().collect();
    sorted.sort_by(|a, b| a.text.cmp(&b.text));
    // in sorted order a name's root is the last root before it that it starts with
    let mut roots: Vec<Vec<Name>> = Vec::new();
    for n in sorted {
        match roots.last_mut() {
            Some(r) if n.text.starts_with(&r[0].text) => r.push(n.clone()),
            _ => roots.push(vec![n.clone()]),
        }
    }
    let fits = |g: &[Name]| quote(&format!("~*{}", claim_regex_of(&trie(g), "cwn", Some("cwp")))).len() <= TOKEN_MAX;
    let mut out: Vec<Vec<Name>> = Vec::new();
    for root in roots {
        match out.last_mut() {
            Some(g) if fits(&[g.as_slice(), root.as_slice()].concat()) => g.extend(root),
            _ => out.push(root),
        }
    }
    out
}

/// The names' claim expression over their trie: the claim rule around it, at
/// the first place outside the device comments or at an item of one that
/// starts with a `Name/` product; the name captured, and with `before` the
/// text before it too.
fn claim_regex_of(trie: &str, capture: &str, before: Option<&str>) -> String {
    let (open, close) = match before {
        Some(b) => (format!("(?<{b}>"), ")"),
        None => (String::new(), ""),
    };
    format!("{open}{}{}{close}{}(?<{capture}>{trie}){}", detector::pcre_outside_devices(), detector::pcre_device_item(), claim::PCRE_BEFORE, claim::PCRE_AFTER)
}

/// The names as one PCRE alternation in the shape of a trie: at a node, its
/// children first (longer names are tried first, and PCRE comes back to the
/// shorter ones when what follows fails), then the name ending there; a name
/// that claims only at the start asserts it there with a lookbehind.
pub fn trie(names: &[Name]) -> String {
    #[derive(Default)]
    struct Node {
        children: BTreeMap<u8, Node>,
        /// A name ends here: Some(anchored).
        end: Option<bool>,
        /// The name that ends here.
        text: Vec<u8>,
    }
    let mut root = Node::default();
    for n in names {
        let mut node = &mut root;
        for b in &n.text {
            node = node.children.entry(*b).or_default();
        }
        node.end.get_or_insert(n.anchored);
        node.text = n.text.clone();
    }
    fn emit(node: &Node, out: &mut String) {
        let mut branches: Vec<String> = node
            .children
            .iter()
            .map(|(b, child)| {
                let mut s = escape(*b);
                emit(child, &mut s);
                s
            })
            .collect();
        match node.end {
            Some(true) => branches.push(format!("(?<=\\A{})", node.text.iter().map(|b| escape(*b)).collect::<String>())),
            Some(false) => branches.push(String::new()),
            None => {}
        }
        match branches.as_slice() {
            [] => {}
            [one] => out.push_str(one),
            [one, empty] if empty.is_empty() && one.len() == 1 => {
                out.push_str(one);
                out.push('?');
            }
            [..] if branches.last().is_some_and(|b| b.is_empty()) => {
                out.push_str("(?:");
                out.push_str(&branches[..branches.len() - 1].join("|"));
                out.push_str(")?");
            }
            _ => {
                out.push_str("(?:");
                out.push_str(&branches.join("|"));
                out.push(')');
            }
        }
    }
    let mut out = String::new();
    emit(&root, &mut out);
    out
}

/// A byte of a name in PCRE: letters and digits as they are (the map's
/// `~*` matches both cases), everything else escaped.
fn escape(b: u8) -> String {
    if b.is_ascii_alphanumeric() {
        (b as char).to_string()
    } else if b == b' ' {
        " ".to_string()
    } else {
        format!("\\{}", b as char)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(t: &str, anchored: bool) -> Name {
        Name { text: t.as_bytes().to_vec(), anchored }
    }

    #[test]
    fn names_become_a_trie_longer_first() {
        assert_eq!(trie(&[name("googlebot", false), name("googlebot-news", false), name("gptbot", false)]), "g(?:ooglebot(?:\\-news)?|ptbot)");
        assert_eq!(trie(&[name("java", true), name("java-http-client", false)]), "java(?:\\-http\\-client|(?<=\\Ajava))");
        assert_eq!(trie(&[name("yahoo! slurp", false)]), "yahoo\\! slurp");
        assert_eq!(trie(&[name("abc", false), name("abcd", false)]), "abcd?");
    }
}

/// The stock render's expressions, run by PCRE, against the module's Rust
/// rules on the same strings.
#[cfg(test)]
mod name_tests {
    #[test]
    fn group_variables_are_short_and_distinct() {
        let ids: Vec<String> = (0..2).flat_map(|t| (0..676).map(move |g| super::group_id(t, g))).collect();
        assert_eq!((ids[0].as_str(), ids[25].as_str(), ids[26].as_str(), ids[675].as_str(), ids[676].as_str()), ("0a", "0z", "0ba", "0zz", "1a"));
        // up to 676 groups a tier (the catalogue makes 14): three to a bucket of nginx's variables hash
        assert!(ids.iter().all(|id| format!("cwl{id}").len() <= 6), "{ids:?}");
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
    }
}

#[cfg(test)]
mod pcre_tests {
    use pcre2::bytes::{Regex, RegexBuilder};

    fn pcre(pattern: &str) -> Regex {
        RegexBuilder::new().caseless(true).build(pattern).unwrap_or_else(|e| panic!("{e}: {pattern}"))
    }

    /// Strings in the shapes that matter: products, comments, device models,
    /// mentions, addresses, engines, bytes of every kind.
    fn strings(words: &[&str], rounds: usize) -> Vec<Vec<u8>> {
        let mut seed: u64 = 0x5851_f42d_4c95_7f2d;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let glue: [&[u8]; 12] = [b" ", b"/1.0", b"; ", b"(", b")", b",", b"-", b"\t", b"x", b" like ", b" with ", b"_"];
        (0..rounds)
            .map(|round| {
                let mut s = Vec::new();
                if round % 7 == 6 {
                    s.extend((0..next() % 80).map(|_| (next() % 256) as u8));
                    return s;
                }
                for _ in 0..next() % 8 {
                    let w = words[(next() % words.len() as u64) as usize].as_bytes();
                    match next() % 4 {
                        0 => s.extend(w.to_ascii_uppercase()),
                        1 => s.extend(w.to_ascii_lowercase()),
                        _ => s.extend(w),
                    }
                    s.extend(glue[(next() % glue.len() as u64) as usize]);
                }
                s
            })
            .collect()
    }

    #[test]
    fn the_detector_in_pcre_finds_the_bots_rust_finds() {
        let rules: Vec<Regex> = crawlward_policy::detector::pcre().iter().map(|r| pcre(r)).collect();
        let words = pcre(&crawlward_policy::detector::pcre_words());
        let vocabulary = [
            "Mozilla/5.0",
            "(compatible;",
            "Linux; Android 13; CUBOT P60)",
            "Android (22/5.1; CUBOT;",
            "android",
            "Android",
            "(Linux; U;",
            "; wv)",
            "HbbTV/1.5 (+DRM;BOTECH;",
            "SMART-TV",
            "Tizen",
            "webOS",
            "CrOS x86_64",
            "bot",
            "Bots",
            "robot",
            "crawler",
            "crawling",
            "WebCrawler",
            "spider",
            "Spider-",
            "scraper",
            "scrapy",
            "fetcher",
            "checker",
            "checkout",
            "monitor",
            "preview",
            "archiver",
            "indexer",
            "harvester",
            "validator",
            "HeadlessChrome",
            "PhantomJS",
            "+http://x.example",
            "+ https:",
            "+www.",
            "http://",
            "https://",
            "www.",
            "a@b.example",
            "x@y",
            "AppleWebKit/537.36",
            "Gecko/2010",
            "Chrome/120",
            "Safari/537",
            "KHTML",
            "Trident/7.0",
            "python-requests",
            "Google-HTTP-Java-Client",
            "Extractor",
            "analyzer",
            "Analyser_",
            "downloader",
            "wkhtmltopdf",
            "webkit2png",
            "Java/1.8.0_121",
            "java/",
            "CPython/3.6",
            "Node.js/v6",
            "node/v10",
            "APT-HTTP/1.3",
            "libwww-perl/5",
            "x-java/2",
            "Dalvik/2.1.0",
            " at ",
            "[at]",
            "(at)",
            " dot ",
            "[dot]",
            "gmail",
            "example.com",
            ".org",
            "ops",
            "curl",
            "wget",
            "urllib",
            "fetch",
            "(",
            ")",
            ";",
            "Cubot",
            "IDbot553",
            "slurp",
            "Nutch-1.7",
            "${jndi:ldap:",
            "<?=",
            "<?PHP",
            "{{.",
            "'+(SELECT ",
            "UNION select",
            "sleep(",
            "() {",
            "<Script",
            "<!DOCTYPE",
            "<!--",
            "JavaScript:",
            "&LT;",
            "onerror=",
            "x.BurpCollaborator.net",
            ".oast.",
            "interactsh",
            "+ops@x.example",
            "Hakai/2.0",
            "Zeus",
            "v2",
            "/1",
            "iPhone15",
            "AppleTV",
            "WAP",
            "mozilla/5.0",
            "Mozilla/5.0 (compatible)",
            "Mozilla/5.0 (compatible; Kaupr/1.0)",
            "(Compatible; ",
            "nook",
            "x:y%z",
            "MozacFetch/49.0",
            " mozacfetch",
        ];
        let mut tried = 0;
        for s in strings(&vocabulary, 60_000).into_iter().chain(
            [
                &b"Mozilla/5.0 (Linux; Android 13; CUBOT P60) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"[..],
                b"Mozilla/5.0 (Linux; Android 5.1; S550 Pro Build/LMY47D; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/74.0 Mobile Safari/537.36 Instagram 94.0.0.22.116 Android (22/5.1; 320dpi; 720x1280; CUBOT; S550 Pro)",
                b"Mozilla/5.0 (compatible; Rivetbot/1.0; +https://example.net/bot)",
                b"SentiBot www.sentibot.eu (compatible with Googlebot)",
                b"Hakai/2.0",
                b"MozacFetch/49.0.20200702190156",
                b"MozacFetchHttp/1 x",
                b"Hakai/2.0\n",
                b"Hakai/v2.0",
                b"My User Agent 1.0",
                b"iPhone15ProMax",
                b"Apple-iPad2C7/1002.329",
                b"Mozilla/5.0",
                b"Mozilla/5.0 Jorgee",
                b"Mozilla/5.0 (compatible)",
                b"Mozilla/5.0 (compatible;)",
                b"Mozilla/5.0 (compatible; Crusader/1.0)",
                b"Mozilla/5.0 (compatible; Crusader/1.0)\n",
                b"Mozilla/5.0 (compatible; Crusader/x)",
                b"${jndi:ldap://x.example/a}",
                b"Mozilliqa\"<?=print(1);?>\"",
                b"{{.custom_user_agent}}",
                b"Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/75.0 Safari/537.36'+(select load_file('x'))+'",
                b"Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/55.0 Safari/537.36 root@x8f6g.burpcollaborator.net",
                b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/59.0 Safari/537.36; +collection@infegy.com",
                b"CB/Nutch-1.7",
                b"Mozilla/5.0 (Windows NT 6.1; WOW64; rv:26.0) Gecko/20100101 Firefox/26.0 Evidon (lab@evidon.example)",
                b"ExperianCrawlUK (andrew dot swanton at phgroup dot com)",
                b"Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0 Safari/537.36 (http://www.shrinktheweb.com)",
                b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.21 (KHTML, like Gecko) Chrome/59.0 Safari/537.21 https:/x",
                b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.21 (KHTML, like Gecko) Chrome/59.0 Safari/537.21 wwwX",
                b"Surveyor/2.0 (ops [at] example.org)",
                b"Surveyor/2.0 (ops(at)example(dot)org)",
                b"Surveyor/2.0 (ops (at) example [dot] org)",
                b"Surveyor/2.0 (ops at  example.org)",
                b"Surveyor/2.0 (ops at example.)",
                b"Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 Built at home",
                b"Mozilla/4.0 (Windows 10 10.0) Java/1.8.0_121",
                b"Mozilla/4.0+(Windows+7+6.1)+Java/1.8.0_45",
                b"npm/6.14.12 node/v10.24.1 linux x64 ci/drone",
                b"Debian APT-HTTP/1.3 (2.6.1)",
                b"RNA/libwww-perl/5.69",
                b"libwww-perl/6.05",
                b"Mozilla/4.0 (Mac OS X 10.9.5) Java/1.8.0_60",
                b"Mozilla/4.0 (Mac OS X (10.9)) Java/1.8.0_60",
                b"Mozilla/4.0(x)Java/1.8",
                b"Mozilla/.(x)+Java/1.8",
                b"  Java/1.8",
                b"JOSM/1.5 (18907 en) Windows 10 64-Bit Java/17.0.9",
                b"Mopidy/3.4.1 CPython/3.9.2",
                b"Ubuntu APT-HTTP/1.3 Lightning/5.4",
                b"xAPT-HTTP/1.3",
                b"x grpc-java/1.0",
                b"Mozilla/5.0 (Java; Java 1.17;) Chrome/420.69 (KHTML, like Gecko) Electron/0.1.0 Java/1.17",
                b"Dalvik/2.1.0 (Linux; U; Android 11; SM-A515F Build/RP1A.200720.012)",
                b"Email%20Extractor/29 CFNetwork/897.15 Darwin/17.5.0 (x86_64)",
                b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/534.34 (KHTML, like Gecko) wkhtmltoimage Safari/534.34",
            ]
            .map(|s| s.to_vec()),
        ) {
            let rust = crawlward_policy::detector::bot(&s).is_some();
            let stock = rules.iter().any(|r| r.is_match(&s).unwrap_or(false));
            assert!(words.is_match(&s).unwrap() || !rules[0].is_match(&s).unwrap(), "the quick look at the words: {:?}", String::from_utf8_lossy(&s));
            assert_eq!(stock, rust, "{:?}", String::from_utf8_lossy(&s));
            tried += 1;
        }
        assert!(tried > 60_000);
    }

    /// What the maps of one tier answer: each group's quick look, then its
    /// claim, as lines, then the pick among them.
    fn stock_name(tiers: &[(Vec<(Regex, Regex)>, Regex)], ua: &[u8]) -> Option<Vec<u8>> {
        for (groups, pick) in tiers {
            let mut lines = Vec::new();
            for (quick, full) in groups {
                if quick.is_match(ua).unwrap() {
                    if let Some(c) = full.captures(ua).unwrap() {
                        lines.extend(c.name("cwn").unwrap().as_bytes());
                        lines.push(b'\t');
                        lines.extend(c.name("cwp").unwrap().as_bytes());
                        lines.push(b'\n');
                    }
                } else {
                    assert!(full.captures(ua).unwrap().is_none(), "the quick look missed a claim: {:?}", String::from_utf8_lossy(ua));
                }
            }
            if let Some(c) = pick.captures(&lines).unwrap() {
                return Some(c.name("cwpick").unwrap().as_bytes().to_vec());
            }
        }
        None
    }

    #[test]
    fn the_names_in_pcre_claim_what_the_matcher_claims() {
        let policy = crawlward_policy::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../nginx-conf/catalogue.yaml")).unwrap();
        let catalogue = &policy.identity.catalogue;
        let names = catalogue.names();
        let tier = |yields: bool| names.iter().filter(|(_, a)| catalogue.agents()[*a].purpose.yields() == yields).map(|(n, _)| n.clone()).collect::<Vec<_>>();
        let pick = RegexBuilder::new().build(super::PICK).unwrap();
        let tiers: Vec<(Vec<(Regex, Regex)>, Regex)> = [false, true]
            .iter()
            .map(|yields| {
                let groups = super::groups(&tier(*yields));
                assert!(!*yields || groups.len() < 4);
                let compiled = groups
                    .iter()
                    .map(|group| {
                        let trie = super::trie(group);
                        let quick = pcre(&format!("{}(?:{trie}){}", crawlward_policy::claim::PCRE_BEFORE, crawlward_policy::claim::PCRE_AFTER));
                        (quick, pcre(&super::claim_regex_of(&trie, "cwn", Some("cwp"))))
                    })
                    .collect();
                (compiled, pick.clone())
            })
            .collect();
        assert!(tiers[0].0.len() > 3, "the catalogue's names are in several groups: {}", tiers[0].0.len());
        let owner = |text: &[u8]| names.iter().find(|(n, _)| n.text == text.to_ascii_lowercase()).map(|(_, a)| *a);
        let texts: Vec<String> = names.iter().map(|(n, _)| String::from_utf8_lossy(&n.text).into_owned()).collect();
        let mut words: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
        words.extend([
            "Mozilla/5.0",
            "(compatible;",
            "like",
            "with",
            "Fake",
            "x",
            "Java",
            "UCWEB/2.0 (Java; U;",
            "(Linux; Android 9; ",
            "Android (22/5.1;",
            "; wv)",
            "Build/X;",
            "/1.0",
            ";",
            ")",
            "(",
        ]);
        for s in strings(&words, 20_000).into_iter().chain(
            [
                &b"Mozilla/5.0 (Linux; Android 8.0; Pixel 2 Build/OPD3.170816.012; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0 Mobile Safari/537.36"[..],
                b"Mozilla/5.0 (Linux; Android 5.1; DART KZ07 Build/LMY47I) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/50.0 Safari/537.36",
                b"Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/) AppEngine-Google; (+http://code.google.com/appengine)",
                b"Gwene/1.0 (The gwene.org rss-to-news gateway) Googlebot",
            ]
            .map(|s| s.to_vec()),
        ) {
            let stock = stock_name(&tiers, &s);
            let rust = catalogue.identify(&s).and_then(|c| c.agent).filter(|a| !catalogue.agents()[*a].counts_by_token());
            assert_eq!(stock.as_deref().and_then(owner), rust, "{:?}", String::from_utf8_lossy(&s));
        }
        let named = |ua: &[u8]| stock_name(&tiers, ua).and_then(|n| owner(&n)).map(|a| catalogue.agents()[a].name.clone());
        assert_eq!(
            named(b"Mozilla/5.0 (Linux; Android 8.0; Pixel 2 Build/OPD3.170816.012; Storebot-Google/1.0) AppleWebKit/537.36").as_deref(),
            Some("Storebot-Google")
        );
        assert_eq!(named(b"Mozilla/5.0 (Linux; Android 5.1; DART KZ07 Build/LMY47I) AppleWebKit/537.36"), None, "a phone's model names no agent");
    }
}
