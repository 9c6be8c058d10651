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

impl RobotsRules {
    pub fn new(policy: &Policy) -> RobotsRules {
        let r = &policy.robots;
        let mut patterns: Vec<String> = r.disallow.clone();
        for p in &r.disallow_params {
            patterns.push(format!("/*?{p}="));
            patterns.push(format!("/*&{p}="));
        }
        patterns.extend(r.deep_paths.iter().cloned());
        RobotsRules { everyone: DeepPaths::new(patterns), refused: blocked_tokens(policy).into_iter().map(|t| t.to_ascii_lowercase()).collect() }
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

/// Whether a User-Agent gives a way to reach its operator: a URL or an e-mail address.
pub fn has_contact(ua: &[u8]) -> bool {
    let lower = |i: usize, w: &[u8]| ua.len() >= i + w.len() && ua[i..i + w.len()].eq_ignore_ascii_case(w);
    (0..ua.len()).any(|i| lower(i, b"http://") || lower(i, b"https://"))
        || ua.iter().position(|b| *b == b'@').is_some_and(|at| at > 0 && ua[at + 1..].contains(&b'.'))
}

/// The User-Agent family and version that the proportional classifier's ua-spread counts
/// (`chrome/131`, `headless-chrome/131`, `firefox/133`, `safari/18`,
/// `python-requests/2.32`): browsers by their engine's product and major
/// version, anything else by its first product token and two version parts.
pub fn ua_family(ua: &[u8]) -> String {
    let find = |needle: &[u8]| ua.windows(needle.len()).position(|w| w == needle).map(|i| i + needle.len());
    let version = |at: usize, parts: usize| -> String {
        let mut out = String::new();
        let mut seen = 0;
        for &b in &ua[at..] {
            if b == b'.' {
                seen += 1;
                if seen >= parts {
                    break;
                }
                out.push('.');
            } else if b.is_ascii_alphanumeric() {
                out.push(b as char);
            } else {
                break;
            }
        }
        out
    };
    for (marker, name) in
        [(&b"HeadlessChrome/"[..], "headless-chrome"), (b"Edg/", "edge"), (b"OPR/", "opera"), (b"Firefox/", "firefox"), (b"Chrome/", "chrome")]
    {
        if let Some(at) = find(marker) {
            return format!("{name}/{}", version(at, 1));
        }
    }
    if find(b"Safari/").is_some() {
        if let Some(at) = find(b"Version/") {
            return format!("safari/{}", version(at, 1));
        }
    }
    // the first product token: name/version
    let start = ua.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(ua.len());
    let rest = &ua[start..];
    let end = rest.iter().position(|b| b.is_ascii_whitespace() || *b == b';' || *b == b'(' || *b == b')').unwrap_or(rest.len());
    let token = &rest[..end];
    match token.iter().position(|b| *b == b'/') {
        // the client's bytes, printable (as nginx's access log escapes them): a family is
        // shown on terminals and in YAML comments
        Some(slash) => {
            let name = crate::escape::escaped(&token[..slash]).to_string().to_ascii_lowercase();
            let v = version(start + slash + 1, 2);
            format!("{name}/{v}")
        }
        None => crate::escape::escaped(token).to_string().to_ascii_lowercase(),
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
    }

    #[test]
    fn contacts_and_networks() {
        assert!(has_contact(b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"));
        assert!(has_contact(b"ClaudeBot/1.0; +claudebot@anthropic.com"));
        assert!(!has_contact(b"Mozilla/5.0 Chrome/131"));
        assert!(!has_contact(b"@"));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(network(ip("198.51.100.77")), (ip("198.51.100.0"), 24));
        assert_eq!(network(ip("2001:db8:1:2:3::4")), (ip("2001:db8:1::"), 48));
        assert_eq!(network(ip("::ffff:198.51.100.77")), (ip("198.51.100.0"), 24));
        assert_eq!(client_address(ip("2001:db8:1:2:3::4")), ip("2001:db8:1:2::"));
        assert_eq!(client_address(ip("198.51.100.77")), ip("198.51.100.77"));
    }
}
