//! What one logged request tells about its client, for `crawlward analyze`:
//! which robots.txt rule it breaks, whether its User-Agent declares itself
//! and gives a contact, the User-Agent family (the proportional classifier's ua-spread), and the
//! address and network it is counted under. The rules are the ones
//! `crawlward render` publishes, so a request "disallowed" here is one the
//! site's own robots.txt disallows.

use crate::catalogue::Agent;
use crate::net::canonical_ip;
use crate::robots::DeepPaths;
use crate::robots_txt::blocked_tokens;
use crate::Policy;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The robots.txt groups crawlward renders, compiled for matching.
#[derive(Debug, Clone)]
pub struct RobotsRules {
    /// The `User-agent: *` group's Disallow patterns, in file order.
    everyone: DeepPaths,
    /// Tokens whose own group is `Disallow: /` (their purpose is blocked), lower-cased.
    refused: Vec<String>,
}

/// The `User-agent: *` group's Disallow patterns of the robots.txt a policy publishes.
fn everyone_patterns(policy: &Policy) -> Vec<String> {
    let r = &policy.robots;
    let mut patterns: Vec<String> = r.disallow.clone();
    for p in &r.disallow_params {
        patterns.push(format!("/*?{p}="));
        patterns.push(format!("/*&{p}="));
    }
    patterns.extend(r.deep_paths.iter().cloned());
    patterns
}

impl RobotsRules {
    pub fn new(policy: &Policy) -> RobotsRules {
        RobotsRules::from_parts(everyone_patterns(policy), blocked_tokens(policy))
    }

    /// The rules from the `*` group's patterns and the tokens refused everything (as a catalogue file carries them).
    pub fn from_parts(patterns: Vec<String>, refused: Vec<String>) -> RobotsRules {
        RobotsRules { everyone: DeepPaths::new(patterns), refused: refused.into_iter().map(|t| t.to_ascii_lowercase()).collect() }
    }

    /// Whether the group that applies to `agent` (its own, or `*`) has a rule.
    fn own_group_refuses(&self, agent: Option<&Agent>) -> bool {
        agent.is_some_and(|a| self.refused.iter().any(|t| t.eq_ignore_ascii_case(&a.robots_token)))
    }

    /// The rule of the published robots.txt that `target` (path and query, as
    /// requested) breaks for a client that names `agent`: `/` for an agent
    /// whose group disallows everything, else the first `*` pattern it
    /// matches. robots.txt itself is never disallowed.
    pub fn broken_rule<'a>(&'a self, agent: Option<&Agent>, target: &[u8]) -> Option<&'a str> {
        if target == b"/robots.txt" || target.starts_with(b"/robots.txt?") {
            return None;
        }
        if self.own_group_refuses(agent) {
            return Some("/");
        }
        if self.everyone.is_match(target) {
            self.everyone.first_match(target)
        } else {
            None
        }
    }

    /// Whether [`Self::broken_rule`] finds one (without naming it).
    pub fn is_disallowed(&self, agent: Option<&Agent>, target: &[u8]) -> bool {
        if target == b"/robots.txt" || target.starts_with(b"/robots.txt?") {
            return false;
        }
        self.own_group_refuses(agent) || self.everyone.is_match(target)
    }
}

/// The sitemap's path in a policy's robots.txt (`/sitemap.xml` by default).
pub fn sitemap_path(policy: &Policy) -> String {
    policy.robots.sitemap.split_once("://").and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string())).unwrap_or_else(|| "/sitemap.xml".into())
}

/// The ladder for the module's catalogue file: the classifier as written, and
/// the robots.txt facts that say which rules a client keeps.
pub fn ladder_spec(policy: &Policy, classifier: crate::model::Classifier) -> crate::identity::LadderSpec {
    crate::identity::LadderSpec {
        classifier,
        https: policy.site.canonical_url.starts_with("https:"),
        robots_disallow: everyone_patterns(policy),
        robots_refused: blocked_tokens(policy),
        sitemap_path: sitemap_path(policy),
        crawl_delay: policy.robots.crawl_delay,
    }
}

/// What robots.txt's Crawl-delay allows a minute (None: it sets none).
pub fn crawl_delay_per_minute(crawl_delay: Option<u32>) -> Option<u32> {
    crawl_delay.map(|d| (60 / d.max(1)).max(1))
}

/// The ladder's reading of requests: which rules a request keeps or breaks, as
/// `crawlward analyze` reads a logged one.
pub struct LadderSignals {
    pub rules: RobotsRules,
    pub sitemap_path: Vec<u8>,
    pub per_minute: Option<u32>,
}

/// One request's facts, as the module (or a log line) has them.
pub struct RequestFacts<'a> {
    pub now_ms: i64,
    /// The path the application sees (nginx's normalized `$uri`, its front
    /// controller's name dropped), the query (`$args`), and `$uri` with the
    /// query (what robots.txt's rules are matched on).
    pub path: &'a [u8],
    pub query: &'a [u8],
    pub target: &'a [u8],
    /// What the User-Agent shows ([`ua_traits`]).
    pub user_agent: UaTraits,
    /// The catalogue's agent, and the name it is counted by (its label).
    pub agent: Option<&'a Agent>,
    pub label: Option<&'a str>,
    /// The application's session cookie, if the policy names one and the request has it.
    pub session: Option<&'a [u8]>,
    pub address: &'a [u8; 16],
}

impl LadderSignals {
    pub fn new(spec: &crate::identity::LadderSpec) -> LadderSignals {
        LadderSignals {
            rules: RobotsRules::from_parts(spec.robots_disallow.clone(), spec.robots_refused.clone()),
            sitemap_path: spec.sitemap_path.as_bytes().to_vec(),
            per_minute: crawl_delay_per_minute(spec.crawl_delay),
        }
    }

    /// What the request shows of its client, with `seed` the zone's hash seed.
    pub fn seen(&self, seed: u64, f: &RequestFacts<'_>, settings: &crate::classifier::Settings) -> crate::client_window::Seen {
        use crate::client_window::hash_bytes;
        let robots = f.path == b"/robots.txt";
        let family = match f.label {
            Some(label) => hash_bytes(seed, label.as_bytes()),
            None => f.user_agent.family,
        };
        crate::client_window::Seen {
            now_ms: f.now_ms,
            path: crate::client_window::url_hash(seed, f.path, f.query),
            family,
            session: f.session.map(|s| hash_bytes(seed ^ 0x5e55, s)),
            address: hash_bytes(seed, f.address),
            auth: settings.is_auth_path(f.path),
            robots,
            sitemap: f.path == self.sitemap_path.as_slice(),
            disallowed: !robots && self.rules.is_disallowed(f.agent, f.target),
            declared: declares(f.agent),
            contact: f.user_agent.contact,
        }
    }
}

/// What a User-Agent alone shows the ladder: the hash of its family
/// ([`ua_family`], keyed by the zone's seed) and whether it gives a contact.
/// It depends on the User-Agent and the seed alone, so a worker may keep it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UaTraits {
    pub family: u64,
    pub contact: bool,
}

/// What a User-Agent shows the ladder: its family and whether it gives a
/// contact, of the part identification reads ([`crate::catalogue::read_part`]):
/// a contact past it, which names no unknown bot, honours no rule either.
pub fn ua_traits(seed: u64, ua: &[u8]) -> UaTraits {
    let ua = crate::catalogue::read_part(ua);
    let mut h = crate::client_window::PieceHash::new(seed);
    ua_family_into(ua, &mut |piece| h.feed(piece));
    UaTraits { family: h.finish(), contact: has_contact(ua) }
}

/// Whether a client's User-Agent declares it: it names a crawler the
/// catalogue knows, or one of its own (`unknown-bot`). A scripting library's
/// default User-Agent names the library, not whoever runs it, so it declares
/// nothing.
pub fn declares(agent: Option<&Agent>) -> bool {
    agent.is_some_and(|a| a.purpose != crate::Purpose::Scripting)
}

/// Whether a User-Agent gives a way to reach its operator: a URL or an e-mail address.
pub fn has_contact(ua: &[u8]) -> bool {
    // a URL: "://" after "http" or "https", in any case
    let url = memchr::memchr_iter(b':', ua).any(|at| {
        let before = &ua[..at];
        let ends = |w: &[u8]| before.len() >= w.len() && before[before.len() - w.len()..].eq_ignore_ascii_case(w);
        ua[at..].starts_with(b"://") && (ends(b"http") || ends(b"https"))
    });
    url || memchr::memchr(b'@', ua).is_some_and(|at| at > 0 && memchr::memchr(b'.', &ua[at + 1..]).is_some())
}

/// The User-Agent family and version that the proportional classifier's ua-spread counts
/// (`chrome/131`, `headless-chrome/131`, `firefox/133`, `safari/18`,
/// `python-requests/2.32`): browsers by their engine's product and major
/// version, anything else by its first product token and two version parts.
pub fn ua_family(ua: &[u8]) -> String {
    let mut out = Vec::new();
    ua_family_into(ua, &mut |b| out.extend_from_slice(b));
    String::from_utf8_lossy(&out).into_owned()
}

/// [`ua_family`] without allocating: written in pieces to `out` (the product
/// name lower-cased, printable as the access log escapes it, and its version).
pub fn ua_family_into(ua: &[u8], out: &mut dyn FnMut(&[u8])) {
    // the markers' first places after their slash, in one pass over the slashes
    const MARKERS: [&[u8]; 7] = [b"HeadlessChrome", b"Edg", b"OPR", b"Firefox", b"Chrome", b"Safari", b"Version"];
    let mut at: [Option<usize>; 7] = [None; 7];
    for slash in memchr::memchr_iter(b'/', ua) {
        let before = &ua[..slash];
        let last = before.last();
        for (m, place) in MARKERS.iter().zip(at.iter_mut()) {
            // the last byte first: most slashes end no marker
            if place.is_none() && m.last() == last && before.ends_with(m) {
                *place = Some(slash + 1);
            }
        }
    }
    let find = |needle: &[u8]| MARKERS.iter().position(|m| needle.strip_suffix(b"/") == Some(*m)).and_then(|i| at[i]);
    // the version's parts: alphanumeric runs joined by dots, at most `parts` of them
    let version = |at: usize, parts: usize, out: &mut dyn FnMut(&[u8])| {
        let rest = &ua[at.min(ua.len())..];
        let mut dots = 0;
        let end = rest
            .iter()
            .position(|&b| {
                dots += usize::from(b == b'.');
                if b == b'.' {
                    dots >= parts
                } else {
                    !b.is_ascii_alphanumeric()
                }
            })
            .unwrap_or(rest.len());
        out(&rest[..end]);
    };
    for (marker, name) in
        [(&b"HeadlessChrome/"[..], "headless-chrome"), (b"Edg/", "edge"), (b"OPR/", "opera"), (b"Firefox/", "firefox"), (b"Chrome/", "chrome")]
    {
        if let Some(at) = find(marker) {
            out(name.as_bytes());
            out(b"/");
            version(at, 1, out);
            return;
        }
    }
    if find(b"Safari/").is_some() {
        if let Some(at) = find(b"Version/") {
            out(b"safari/");
            version(at, 1, out);
            return;
        }
    }
    // the first product token: name/version
    let start = ua.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(ua.len());
    let rest = &ua[start..];
    let end = rest.iter().position(|b| b.is_ascii_whitespace() || *b == b';' || *b == b'(' || *b == b')').unwrap_or(rest.len());
    let token = &rest[..end];
    // the client's bytes, printable (as nginx's access log escapes them): a family is
    // shown on terminals and in YAML comments
    let name = |bytes: &[u8], out: &mut dyn FnMut(&[u8])| {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 128];
        let mut n = 0;
        for &b in bytes {
            if n + 4 > buf.len() {
                out(&buf[..n]);
                n = 0;
            }
            if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
                buf[n] = b.to_ascii_lowercase();
                n += 1;
            } else {
                buf[n..n + 4].copy_from_slice(&[b'\\', b'x', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
                n += 4;
            }
        }
        out(&buf[..n]);
    };
    match token.iter().position(|b| *b == b'/') {
        Some(slash) => {
            name(&token[..slash], out);
            out(b"/");
            version(start + slash + 1, 2, out);
        }
        None => name(token, out),
    }
}

/// The address a client is counted under: itself, IPv6 by its /64 (as the
/// budgets count it), an IPv4-mapped address as IPv4.
pub fn client_address(ip: IpAddr) -> IpAddr {
    match canonical_ip(ip) {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// The network clients may share: an IPv4 /24, an IPv6 /48.
pub fn network(ip: IpAddr) -> (IpAddr, u8) {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => (IpAddr::V4(Ipv4Addr::from(u32::from(v4) & 0xffff_ff00)), 24),
        IpAddr::V6(v6) => (IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 80) - 1))), 48),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {disallow: [/admin, /api], disallow_params: [sort], deep_paths: ['/*/*/blob/']}\n",
        )
        .unwrap()
    }

    #[test]
    fn the_published_rules_apply() {
        let p = policy();
        let rules = RobotsRules::new(&p);
        let robots = crate::robots_txt::robots_txt(&p, "x");
        assert!(robots.contains("Disallow: /*?sort=\n"), "{robots}");
        let google = p.identity.catalogue.get("Googlebot");
        let gpt = p.identity.catalogue.get("GPTBot");
        assert_eq!(rules.broken_rule(google, b"/admin/users"), Some("/admin"));
        assert_eq!(rules.broken_rule(google, b"/glam/browse?page=2&sort=title"), Some("/*&sort="));
        assert_eq!(rules.broken_rule(google, b"/a/b/blob/main"), Some("/*/*/blob/"));
        assert_eq!(rules.broken_rule(google, b"/record/1"), None);
        assert_eq!(rules.broken_rule(None, b"/record/1?sort=x"), Some("/*?sort="));
        // GPTBot's purpose is blocked: the refused crawlers' group (its User-agent lines,
        // then one rule) disallows everything but robots.txt
        let group = robots.split("\n\n").find(|g| g.lines().any(|l| l == "User-agent: GPTBot")).expect("a group names GPTBot");
        assert!(group.lines().all(|l| l.starts_with("User-agent: ") || l.starts_with('#') || l == "Disallow: /"), "{group}");
        assert!(group.ends_with("\nDisallow: /"), "{group}");
        assert_eq!(rules.broken_rule(gpt, b"/record/1"), Some("/"));
        assert_eq!(rules.broken_rule(gpt, b"/robots.txt"), None);
        assert!(!rules.is_disallowed(gpt, b"/robots.txt"));
        assert!(rules.is_disallowed(gpt, b"/"));
        assert!(!rules.is_disallowed(google, b"/"));
    }

    #[test]
    fn families_as_the_seed_names_them() {
        let chrome = b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        assert_eq!(ua_family(chrome), "chrome/131");
        assert_eq!(
            ua_family(b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.6778.33 Safari/537.36"),
            "headless-chrome/131"
        );
        assert_eq!(ua_family(b"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"), "firefox/133");
        assert_eq!(
            ua_family(b"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15"),
            "safari/18"
        );
        assert_eq!(ua_family(b"python-requests/2.32.3"), "python-requests/2.32");
        assert_eq!(ua_family(b"partner-sdk/2.1"), "partner-sdk/2.1");
        assert_eq!(ua_family(b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"), "mozilla/5.0");
        assert_eq!(ua_family(b""), "");
        assert_eq!(ua_family(b"curl"), "curl");
        assert_eq!(ua_family(b"Caf\xc3\xa9-\"Bot\"/1.2.3 (x)"), "caf\\xc3\\xa9-\\x22bot\\x22/1.2", "escaped as the access log, lower-cased");
        let long = [b'A'; 300];
        assert_eq!(ua_family(&long), "a".repeat(300), "a long token whole");
    }

    #[test]
    fn contacts_and_networks() {
        assert!(has_contact(b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"));
        assert!(has_contact(b"ClaudeBot/1.0; +claudebot@anthropic.com"));
        assert!(!has_contact(b"Mozilla/5.0 Chrome/131"));
        assert!(!has_contact(b"@"));
        // of the part identification reads: a contact past its 512 bytes is not seen
        let padded = format!("Mozilla/5.0 (X11; Linux x86_64){} +https://bots.example/", " AppleWebKit/537.36".repeat(30));
        assert!(has_contact(padded.as_bytes()) && !ua_traits(1, padded.as_bytes()).contact);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(network(ip("198.51.100.77")), (ip("198.51.100.0"), 24));
        assert_eq!(network(ip("2001:db8:1:2:3::4")), (ip("2001:db8:1::"), 48));
        assert_eq!(network(ip("::ffff:198.51.100.77")), (ip("198.51.100.0"), 24));
        assert_eq!(client_address(ip("2001:db8:1:2:3::4")), ip("2001:db8:1:2::"));
        assert_eq!(client_address(ip("198.51.100.77")), ip("198.51.100.77"));
    }
}
