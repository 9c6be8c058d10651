//! Forward-confirmed reverse DNS (Google's crawler documentation): the decisions, without the
//! lookups. The module asks nginx's resolver and feeds the answers here, so
//! the rules (label-boundary suffixes, forward confirmation, what a failure
//! means) are one implementation, covered by `cargo test`.
//!
//! A claim is verified when the client address has a PTR name under one of
//! the agent's documented suffixes and that name resolves (A or AAAA) back to
//! the same address. Published ranges, where an agent has them, are checked
//! first and need no DNS.

use crate::catalogue::Agent;
use crate::net::{canonical_ip, valid_hostname};
use crate::Verdict;
use std::net::IpAddr;

/// What DNS says about a claim.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsVerdict {
    Verified = 1,
    /// The PTR name is outside the suffixes, there is none, or the forward
    /// lookup does not confirm the address.
    Spoofed = 2,
    /// Timeout, SERVFAIL, REFUSED, no resolver, or the cap on lookups: the
    /// fail policy applies.
    Unresolved = 3,
}

impl DnsVerdict {
    pub const ALL: [DnsVerdict; 3] = [DnsVerdict::Verified, DnsVerdict::Spoofed, DnsVerdict::Unresolved];

    pub fn as_str(self) -> &'static str {
        match self {
            DnsVerdict::Verified => "verified",
            DnsVerdict::Spoofed => "spoofed",
            DnsVerdict::Unresolved => "unresolved",
        }
    }

    pub fn from_u8(v: u8) -> DnsVerdict {
        match v {
            1 => DnsVerdict::Verified,
            2 => DnsVerdict::Spoofed,
            _ => DnsVerdict::Unresolved,
        }
    }
}

/// How a lookup ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Records came back.
    Found,
    /// The name does not exist (NXDOMAIN), or has no record of the type asked.
    NotFound,
    /// No answer to trust: timeout, SERVFAIL, REFUSED, FORMERR, no resolver.
    Failed,
}

/// What to do after the PTR lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterPtr {
    /// Look this name up (A/AAAA) and compare with the client address.
    Forward(String),
    Done(DnsVerdict),
}

/// Whether `host` (a PTR name) is one of `suffixes` or under one of them on a
/// label boundary: `crawl-1.googlebot.com` is under `googlebot.com`;
/// `evilgooglebot.com` and `googlebot.com.evil.net` are not. Case does not
/// matter and one trailing dot is allowed; a name that is not a valid host
/// name (bytes a DNS label may carry but a host name may not) never matches.
pub fn hostname_under(host: &[u8], suffixes: &[String]) -> bool {
    let host = host.strip_suffix(b".").unwrap_or(host);
    let Ok(host) = std::str::from_utf8(host) else { return false };
    if !valid_hostname(host) {
        return false;
    }
    suffixes.iter().any(|s| {
        let (h, s) = (host.as_bytes(), s.as_bytes());
        h.len() >= s.len() && h[h.len() - s.len()..].eq_ignore_ascii_case(s) && (h.len() == s.len() || h[h.len() - s.len() - 1] == b'.')
    })
}

/// The step after the PTR lookup of a client claiming an agent with `suffixes`.
pub fn after_ptr(answer: Answer, name: &[u8], suffixes: &[String]) -> AfterPtr {
    match answer {
        Answer::Found if hostname_under(name, suffixes) => {
            let name = name.strip_suffix(b".").unwrap_or(name);
            AfterPtr::Forward(String::from_utf8_lossy(name).to_ascii_lowercase())
        }
        Answer::Found | Answer::NotFound => AfterPtr::Done(DnsVerdict::Spoofed),
        Answer::Failed => AfterPtr::Done(DnsVerdict::Unresolved),
    }
}

/// The verdict after the forward lookup of the PTR name: it must contain the
/// client address (an IPv4-mapped IPv6 client is its IPv4 address).
pub fn after_forward(answer: Answer, addrs: &[IpAddr], client: IpAddr) -> DnsVerdict {
    let client = canonical_ip(client);
    match answer {
        Answer::Found if addrs.iter().any(|a| canonical_ip(*a) == client) => DnsVerdict::Verified,
        Answer::Found | Answer::NotFound => DnsVerdict::Spoofed,
        Answer::Failed => DnsVerdict::Unresolved,
    }
}

/// Whether a request claiming `agent` from `ip` needs the DNS check: the agent
/// documents hostname suffixes, and its published ranges (if any) do not
/// already verify the address.
pub fn needs_dns(agent: &Agent, ip: IpAddr) -> bool {
    !agent.rdns_suffixes.is_empty() && !agent.in_ranges(canonical_ip(ip))
}

/// What a cached verdict was checked against: a hash of the agent's suffixes
/// (in any order, any case), so that agents of one operator that document
/// the same suffixes (Googlebot, Storebot-Google, GoogleOther ... crawl from
/// the same addresses) share a verdict, and the key stays the same across
/// reloads (an index into the catalogue would not).
pub fn suffixes_key(suffixes: &[String]) -> u32 {
    let mut sorted: Vec<String> = suffixes.iter().map(|s| s.to_ascii_lowercase()).collect();
    sorted.sort();
    sorted.dedup();
    // FNV-1a over the names, each followed by a separator no host name has
    sorted.iter().flat_map(|s| s.bytes().chain(std::iter::once(b','))).fold(0x811c_9dc5u32, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// The verification settings (`crawlward_dns_cache`, `crawlward_dns_unresolved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsSettings {
    /// How long each verdict stays cached, in milliseconds.
    pub valid_verified: u64,
    pub valid_spoofed: u64,
    pub valid_unresolved: u64,
    /// Lookups in flight at once, all workers together.
    pub max_lookups: u32,
    /// Of those, at most this many for one address (an IPv6 /64) ...
    pub lookups_per_address: u32,
    /// ... and this many for one network (an IPv4 /24, an IPv6 /48).
    pub lookups_per_network: u32,
    /// How long past its expiry a verified verdict still holds when the
    /// lookup that would renew it is unresolved, given up or cannot start (the
    /// caps): a DNS outage does not make the crawlers it confirmed unverified.
    /// 0: not at all.
    pub stale_verified: u64,
}

impl Default for DnsSettings {
    /// The spirit of Google's crawler documentation: a confirmed crawler for a day, an impostor for an
    /// hour, a DNS failure for a minute; 64 lookups in flight, 2 per address
    /// and 8 per network, so that silent reverse zones must come from at
    /// least 8 networks to hold them all; a confirmed crawler 6 hours more
    /// while DNS fails.
    fn default() -> Self {
        DnsSettings {
            valid_verified: 86_400_000,
            valid_spoofed: 3_600_000,
            valid_unresolved: 60_000,
            max_lookups: 64,
            lookups_per_address: 2,
            lookups_per_network: 8,
            stale_verified: 21_600_000,
        }
    }
}

impl DnsSettings {
    pub fn valid(&self, v: DnsVerdict) -> u64 {
        match v {
            DnsVerdict::Verified => self.valid_verified,
            DnsVerdict::Spoofed => self.valid_spoofed,
            DnsVerdict::Unresolved => self.valid_unresolved,
        }
    }
}

/// What an unresolved claim counts as (`crawlward_dns_unresolved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unresolved {
    /// The default: an unverified crawler (budgeted, not blocked), so a DNS
    /// outage neither blocks Googlebot nor lets impostors through as verified.
    Unverified,
    /// Fail closed: as an impostor.
    Spoofed,
}

impl Unresolved {
    pub fn parse(s: &str) -> Option<Unresolved> {
        match s {
            "unverified" => Some(Unresolved::Unverified),
            "spoofed" => Some(Unresolved::Spoofed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Unresolved::Unverified => "unverified",
            Unresolved::Spoofed => "spoofed",
        }
    }
}

/// The request's verdict from the DNS verdict.
pub fn verdict_of(v: DnsVerdict, unresolved: Unresolved) -> Verdict {
    match (v, unresolved) {
        (DnsVerdict::Verified, _) => Verdict::Verified,
        (DnsVerdict::Spoofed, _) | (DnsVerdict::Unresolved, Unresolved::Spoofed) => Verdict::Spoofed,
        (DnsVerdict::Unresolved, Unresolved::Unverified) => Verdict::Unverified,
    }
}

/// An nginx time (`30s`, `1h`, `1d`, `1h30m`, `500ms`; a bare number is
/// seconds) in milliseconds, as nginx's `ngx_parse_time` reads it.
pub fn parse_time(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = match rest.as_bytes() {
            [b'm', b's', ..] => (1, 2),
            [b'y', ..] => (365 * 86_400_000, 1),
            [b'M', ..] => (30 * 86_400_000, 1),
            [b'w', ..] => (7 * 86_400_000, 1),
            [b'd', ..] => (86_400_000, 1),
            [b'h', ..] => (3_600_000, 1),
            [b'm', ..] => (60_000, 1),
            [b's', ..] => (1000, 1),
            [] => (1000, 0),
            _ => return None,
        };
        rest = &rest[len..];
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    // a cached verdict for more than a year would outlive any published range
    (total <= 365 * 86_400_000).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn google() -> Vec<String> {
        vec!["googlebot.com".into(), "google.com".into(), "googleusercontent.com".into()]
    }

    #[test]
    fn suffixes_match_on_a_label_boundary_only() {
        let s = google();
        for ok in [
            "crawl-66-249-66-1.googlebot.com",
            "crawl-66-249-66-1.googlebot.com.",
            "GOOGLEBOT.COM",
            "a.b.google.com",
            "rate-limited-proxy-66-249-90-77.google.com",
        ] {
            assert!(hostname_under(ok.as_bytes(), &s), "{ok}");
        }
        for bad in [
            "evilgooglebot.com",
            "googlebot.com.evil.net",
            "crawl.googlebot.co",
            "xgoogle.com",
            "",
            ".",
            "googlebot.com..",
            "a..googlebot.com",
            "crawl googlebot.com",
            "crawl\0.googlebot.com",
            "-x.googlebot.com",
            "\u{e9}.googlebot.com",
        ] {
            assert!(!hostname_under(bad.as_bytes(), &s), "{bad:?}");
        }
        assert!(!hostname_under(b"crawl.googlebot.com", &[]));
    }

    #[test]
    fn ptr_then_forward() {
        let s = google();
        assert_eq!(after_ptr(Answer::Found, b"Crawl-1.GoogleBot.com.", &s), AfterPtr::Forward("crawl-1.googlebot.com".into()));
        assert_eq!(after_ptr(Answer::Found, b"evilgooglebot.com", &s), AfterPtr::Done(DnsVerdict::Spoofed));
        assert_eq!(after_ptr(Answer::NotFound, b"", &s), AfterPtr::Done(DnsVerdict::Spoofed), "no PTR: an impostor");
        assert_eq!(after_ptr(Answer::Failed, b"", &s), AfterPtr::Done(DnsVerdict::Unresolved));
        let ip: IpAddr = "66.249.66.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:66.249.66.1".parse().unwrap();
        let other: IpAddr = "66.249.66.2".parse().unwrap();
        assert_eq!(after_forward(Answer::Found, &[other, ip], ip), DnsVerdict::Verified);
        assert_eq!(after_forward(Answer::Found, &[ip], mapped), DnsVerdict::Verified);
        assert_eq!(after_forward(Answer::Found, &[other], ip), DnsVerdict::Spoofed, "forward mismatch");
        assert_eq!(after_forward(Answer::NotFound, &[], ip), DnsVerdict::Spoofed);
        assert_eq!(after_forward(Answer::Failed, &[], ip), DnsVerdict::Unresolved);
        let v6: IpAddr = "2001:4860:4801:10::1".parse().unwrap();
        assert_eq!(after_forward(Answer::Found, &[ip, v6], v6), DnsVerdict::Verified);
    }

    #[test]
    fn stale_verified_is_a_time_or_off() {
        let load = |dns: &str| {
            let yaml = format!("site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\nmodule: {{dns: {{{dns}}}}}\n");
            crate::load_str("p.yaml", &yaml)
                .map(|p| p.module.and_then(|m| m.dns).map(|d| (d.stale_verified, d.settings.stale_verified)))
                .map_err(|e| e.to_string())
        };
        assert_eq!(load("").unwrap(), Some(("6h".into(), 21_600_000)), "6 hours by default");
        assert_eq!(load("stale_verified: 30m").unwrap(), Some(("30m".into(), 1_800_000)));
        assert_eq!(load("stale_verified: off").unwrap(), Some(("off".into(), 0)));
        let e = load("stale_verified: soon").unwrap_err();
        assert!(e.contains("module.dns.stale_verified") && e.contains("invalid time \"soon\""), "{e}");
    }

    #[test]
    fn fail_policy() {
        assert_eq!(verdict_of(DnsVerdict::Unresolved, Unresolved::Unverified), Verdict::Unverified);
        assert_eq!(verdict_of(DnsVerdict::Unresolved, Unresolved::Spoofed), Verdict::Spoofed);
        assert_eq!(verdict_of(DnsVerdict::Verified, Unresolved::Spoofed), Verdict::Verified);
        assert_eq!(verdict_of(DnsVerdict::Spoofed, Unresolved::Unverified), Verdict::Spoofed);
    }

    #[test]
    fn nginx_times() {
        assert_eq!(parse_time("1d"), Some(86_400_000));
        assert_eq!(parse_time("1h30m"), Some(5_400_000));
        assert_eq!(parse_time("500ms"), Some(500));
        assert_eq!(parse_time("60"), Some(60_000));
        assert_eq!(parse_time("1w"), Some(604_800_000));
        assert_eq!(parse_time("30d"), Some(2_592_000_000));
        for bad in ["", "d", "1x", "-1s", "1 s", "99999999999999999999s", "400d"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn agents_with_the_same_suffixes_share_a_key() {
        let k = |s: &[&str]| suffixes_key(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(k(&["googlebot.com", "google.com"]), k(&["Google.com", "googlebot.com"]));
        assert_ne!(k(&["googlebot.com", "google.com"]), k(&["google.com"]));
        assert_ne!(k(&["a.com", "b.com"]), k(&["a.comb.com"]));
    }
}
