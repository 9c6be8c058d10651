//! Published address ranges: the operators' files, their validation, the
//! snapshot shipped with crawlward, and a set that answers "is this address
//! inside?" in a binary search.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Limits that make a downloaded file believable.
pub const MAX_PREFIXES: usize = 100_000;
/// Shortest accepted prefixes: a /0 would verify every address on the Internet.
pub const MIN_V4_LEN: u8 = 8;
pub const MIN_V6_LEN: u8 = 16;

/// A range file as crawlward stores it (the snapshot and `update-ranges` write this form).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RangeFile {
    /// The operator's URL.
    pub url: String,
    /// The operator's own time stamp (`creationTime`), if the file has one.
    #[serde(default)]
    pub published: Option<String>,
    /// When crawlward downloaded it (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched: Option<String>,
    /// For the shipped snapshot: the date of the snapshot and where the copy came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieved_via: Option<String>,
    pub prefixes: Vec<String>,
}

impl RangeFile {
    /// The date the ranges are from, for their age: fetched, else published, else the snapshot date.
    pub fn as_of(&self) -> Option<&str> {
        self.fetched.as_deref().or(self.published.as_deref()).or(self.snapshot.as_deref())
    }

    pub fn networks(&self) -> Result<Vec<IpNet>, String> {
        let nets = self.prefixes.iter().map(|p| crate::net::parse_net(p)).collect::<Result<Vec<_>, _>>()?;
        validate(&nets)?;
        Ok(nets)
    }
}

/// The file name a URL's ranges are stored under.
pub fn file_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let mut name: String = rest.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    if !name.ends_with(".json") {
        name.push_str(".json");
    }
    name
}

/// Parse an operator's file: the JSON most operators publish
/// (`{"creationTime": ..., "prefixes": [{"ipv4Prefix": ...}, {"ipv6Prefix": ...}]}`), any JSON
/// whose strings under prefix-like keys are networks, or plain text with one network per line.
/// Returns the networks and the file's own time stamp.
pub fn parse_published(body: &[u8]) -> Result<(Vec<IpNet>, Option<String>), String> {
    let text = std::str::from_utf8(body).map_err(|_| "the file is not UTF-8 text".to_string())?;
    let trimmed = text.trim_start();
    let (nets, published) = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        let mut nets = Vec::new();
        collect(&v, false, &mut nets)?;
        let published = v.get("creationTime").and_then(|t| t.as_str()).map(str::to_string);
        (nets, published)
    } else {
        let mut nets = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if !line.is_empty() {
                nets.push(crate::net::parse_net(line).map_err(|e| format!("line {}: {e}", i + 1))?);
            }
        }
        (nets, None)
    };
    validate(&nets)?;
    Ok((nets, published))
}

fn collect(v: &serde_json::Value, under_prefix_key: bool, out: &mut Vec<IpNet>) -> Result<(), String> {
    match v {
        serde_json::Value::String(s) if under_prefix_key => out.push(crate::net::parse_net(s)?),
        serde_json::Value::Array(items) => {
            for item in items {
                collect(item, under_prefix_key, out)?;
            }
        }
        serde_json::Value::Object(map) => {
            for (k, item) in map {
                let key = k.to_ascii_lowercase();
                let prefixy = key.contains("prefix") || key == "cidr" || key == "ip" || key == "ips" || key == "ranges";
                collect(item, prefixy, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The most addresses one operator's file may verify, all its networks
/// together (overlaps counted once): 2^20 IPv4 addresses (a /12's worth) and
/// 2^80 IPv6 addresses (a /48's worth). The widest lists published (the
/// snapshot of 2026-11) cover 36,064 IPv4 addresses (OpenAI's ChatGPT-User,
/// one /17 among them) and 2^72 IPv6 ones (Common Crawl's /56): the bounds
/// leave room for 29 and 256 times that, and refuse a file that would
/// verify a whole provider's network, or many wide prefixes that each pass
/// the shortest-prefix check (256 × /8 is every IPv4 address).
pub const MAX_V4_ADDRESSES: u64 = 1 << 20;
pub const MAX_V6_ADDRESSES: u128 = 1 << 80;

/// The environment variable that lets range files hold special-purpose
/// networks (loopback, private, documentation...): set to `1` by crawlward's
/// own test suites, whose crawlers come from 127.0.0.2. Never on a server.
pub const TEST_RANGES_ENV: &str = "CRAWLWARD_TEST_RANGES";

/// Networks no operator's crawler comes from (the IANA special-purpose
/// registries, RFC 6890 and its updates): a file that lists one is refused.
const SPECIAL_V4: [&str; 14] = [
    "0.0.0.0/8",       // "this network"
    "10.0.0.0/8",      // private
    "100.64.0.0/10",   // shared (carrier-grade NAT)
    "127.0.0.0/8",     // loopback
    "169.254.0.0/16",  // link-local
    "172.16.0.0/12",   // private
    "192.0.0.0/24",    // IETF protocol assignments
    "192.0.2.0/24",    // documentation
    "192.168.0.0/16",  // private
    "198.18.0.0/15",   // benchmarking
    "198.51.100.0/24", // documentation
    "203.0.113.0/24",  // documentation
    "224.0.0.0/4",     // multicast
    "240.0.0.0/4",     // reserved, and the broadcast address
];
const SPECIAL_V6: [&str; 9] = [
    "::/127",         // unspecified and loopback
    "::ffff:0:0/96",  // IPv4-mapped: the IPv4 address is what is checked
    "64:ff9b:1::/48", // local-use NAT64
    "100::/64",       // discard
    "2001::/23",      // IETF protocol assignments
    "2001:db8::/32",  // documentation
    "fc00::/7",       // unique local
    "fe80::/10",      // link-local
    "ff00::/8",       // multicast
];

/// The special-purpose network `n` overlaps, if any.
pub fn special_purpose(n: &IpNet) -> Option<IpNet> {
    SPECIAL_V4
        .iter()
        .chain(&SPECIAL_V6)
        .map(|s| s.parse::<IpNet>().expect("a special-purpose network"))
        .find(|s| s.contains(&n.network()) || n.contains(&s.network()))
}

/// A believable set: non-empty, not huge, no network so wide it verifies
/// half the Internet, at most [`MAX_V4_ADDRESSES`] and [`MAX_V6_ADDRESSES`]
/// in all, and no special-purpose network (unless [`TEST_RANGES_ENV`] is `1`).
pub fn validate(nets: &[IpNet]) -> Result<(), String> {
    validate_with(nets, std::env::var_os(TEST_RANGES_ENV).is_some_and(|v| v == "1"))
}

fn validate_with(nets: &[IpNet], special_allowed: bool) -> Result<(), String> {
    if nets.is_empty() {
        return Err("no networks in the file".into());
    }
    if nets.len() > MAX_PREFIXES {
        return Err(format!("{} networks, more than the {MAX_PREFIXES} crawlward accepts", nets.len()));
    }
    if let Some(n) = nets.iter().find(|n| match n {
        IpNet::V4(v4) => v4.prefix_len() < MIN_V4_LEN,
        IpNet::V6(v6) => v6.prefix_len() < MIN_V6_LEN,
    }) {
        return Err(format!("network {n} is wider than /{MIN_V4_LEN} (IPv4) or /{MIN_V6_LEN} (IPv6)"));
    }
    let set = RangeSet::new(nets);
    let v4: u64 = set.v4.iter().map(|(a, b)| u64::from(b - a) + 1).sum();
    let v6: u128 = set.v6.iter().map(|(a, b)| (b - a).saturating_add(1)).fold(0u128, u128::saturating_add);
    if v4 > MAX_V4_ADDRESSES {
        return Err(format!("the networks cover {v4} IPv4 addresses, more than the {MAX_V4_ADDRESSES} (a /12's worth) one operator's list may verify"));
    }
    if v6 > MAX_V6_ADDRESSES {
        return Err(format!(
            "the networks cover 2^{} IPv6 addresses or more, more than the 2^80 (a /48's worth) one operator's list may verify",
            127 - v6.leading_zeros()
        ));
    }
    if !special_allowed {
        if let Some((n, s)) = nets.iter().find_map(|n| special_purpose(n).map(|s| (n, s))) {
            return Err(format!("network {n} is special-purpose ({s}: loopback, private, link-local, documentation or reserved): no crawler comes from there"));
        }
    }
    Ok(())
}

/// The range files shipped with crawlward (`policy/ranges/`), by URL.
pub fn snapshot() -> Vec<RangeFile> {
    SNAPSHOT.iter().filter_map(|text| serde_json::from_str(text).ok()).collect()
}

include!(concat!(env!("OUT_DIR"), "/ranges_snapshot.rs"));

/// Networks as sorted, merged intervals: membership is a binary search,
/// whatever the number of networks.
#[derive(Debug, Clone, Default)]
pub struct RangeSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl RangeSet {
    pub fn new(nets: &[IpNet]) -> RangeSet {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for n in nets {
            match n {
                IpNet::V4(n) => v4.push((u32::from(n.network()), u32::from(n.broadcast()))),
                IpNet::V6(n) => v6.push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        RangeSet { v4: merge(v4), v6: merge(v6) }
    }

    /// Whether `ip` is inside; an IPv4-mapped IPv6 address is looked up as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match crate::net::canonical_ip(ip) {
            IpAddr::V4(a) => inside(&self.v4, u32::from(a)),
            IpAddr::V6(a) => inside(&self.v6, u128::from(a)),
        }
    }
}

fn merge<T: Ord + Copy + num_like::Succ>(mut v: Vec<(T, T)>) -> Vec<(T, T)> {
    v.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(v.len());
    for (start, end) in v {
        match out.last_mut() {
            Some(last) if start <= last.1.succ_saturating() => {
                if end > last.1 {
                    last.1 = end;
                }
            }
            _ => out.push((start, end)),
        }
    }
    out
}

fn inside<T: Ord + Copy>(intervals: &[(T, T)], x: T) -> bool {
    // the last interval starting at or before x
    let i = intervals.partition_point(|(start, _)| *start <= x);
    i > 0 && x <= intervals[i - 1].1
}

mod num_like {
    pub trait Succ {
        fn succ_saturating(self) -> Self;
    }
    impl Succ for u32 {
        fn succ_saturating(self) -> Self {
            self.saturating_add(1)
        }
    }
    impl Succ for u128 {
        fn succ_saturating(self) -> Self {
            self.saturating_add(1)
        }
    }
}

/// Seconds since the epoch of an RFC 3339 time stamp in UTC (`2026-11-30T12:00:00Z`,
/// fractions and `+00:00` accepted), or of a bare date (`2026-11-30`).
pub fn epoch_seconds(stamp: &str) -> Option<i64> {
    let (date, time) = match stamp.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (stamp, None),
    };
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || d.next().is_some() {
        return None;
    }
    let mut secs = 0;
    if let Some(t) = time {
        let t = t.trim_end_matches('Z').trim_end_matches("+00:00").trim_end_matches(".000000");
        let t = t.split('.').next()?;
        let mut hms = t.split(':');
        let (h, mi, s): (i64, i64, i64) = (hms.next()?.parse().ok()?, hms.next()?.parse().ok()?, hms.next().unwrap_or("0").parse().ok()?);
        secs = h * 3600 + mi * 60 + s;
    }
    // days from civil (proleptic Gregorian)
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146_097 + doe - 719_468) * 86_400 + secs)
}

/// Seconds since the epoch as RFC 3339, UTC, to the second (the inverse of [`epoch_seconds`]).
pub fn rfc3339(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // civil from days (proleptic Gregorian)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(v: &[&str]) -> Vec<IpNet> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn a_file_cannot_verify_everyone_nor_special_purpose_networks() {
        let nets = |v: &[String]| v.iter().map(|n| n.parse::<IpNet>().unwrap()).collect::<Vec<_>>();
        // each passes the shortest-prefix check; together they are every IPv4 address
        let wide: Vec<String> = (0..256).map(|a| format!("{a}.0.0.0/8")).chain((0..65_536u32).map(|i| format!("{}.{}.0.0/16", i >> 8, i & 255))).collect();
        let e = validate_with(&nets(&wide), true).unwrap_err();
        assert!(e.contains("more than the 1048576"), "{e}");
        let v6: Vec<String> = (0..300).map(|i| format!("2a00:{i:x}::/32")).collect();
        assert!(validate_with(&nets(&v6), true).unwrap_err().contains("IPv6"));
        // one wide network, and the same network listed twice (counted once)
        assert!(validate_with(&nets(&["20.0.0.0/11".into()]), false).is_err());
        assert!(validate_with(&nets(&["20.0.0.0/12".into(), "20.0.0.0/12".into()]), false).is_ok());
        for special in [
            "127.0.0.2/32",
            "10.1.0.0/16",
            "192.168.1.0/24",
            "169.254.0.0/16",
            "192.0.2.0/24",
            "198.51.100.7/32",
            "203.0.113.0/24",
            "100.64.0.0/16",
            "::1/128",
            "fe80::/64",
            "fd00::/48",
            "2001:db8::/48",
            "::ffff:127.0.0.1/128",
            "224.0.0.1/32",
        ] {
            let e = validate_with(&nets(&[special.into(), "66.249.64.0/27".into()]), false).unwrap_err();
            assert!(e.contains("special-purpose"), "{special}: {e}");
            assert!(validate_with(&nets(&[special.into()]), true).is_ok(), "{special}: the test suites' mode");
        }
        // a private network wider than the special one overlaps it too
        assert!(validate_with(&nets(&["192.168.0.0/15".into()]), false).unwrap_err().contains("special-purpose"));
        assert!(validate_with(&nets(&["172.16.0.0/16".into()]), false).unwrap_err().contains("special-purpose"));
        // every list of the snapshot passes
        for f in snapshot() {
            let n = f.prefixes.iter().map(|p| crate::net::parse_net(p).unwrap()).collect::<Vec<_>>();
            validate_with(&n, false).unwrap_or_else(|e| panic!("{}: {e}", f.url));
        }
    }

    #[test]
    fn range_set_membership() {
        let set = RangeSet::new(&nets(&["66.249.64.0/27", "66.249.64.32/27", "192.0.2.0/24", "2001:4860:4801:10::/64", "10.0.0.1/32"]));
        for (ip, inside) in [
            ("66.249.64.0", true),
            ("66.249.64.63", true),
            ("66.249.64.64", false),
            ("192.0.2.255", true),
            ("192.0.3.0", false),
            ("10.0.0.1", true),
            ("10.0.0.2", false),
            ("::ffff:192.0.2.9", true),
            ("2001:4860:4801:10::1", true),
            ("2001:4860:4801:11::1", false),
            ("0.0.0.0", false),
        ] {
            assert_eq!(set.contains(ip.parse().unwrap()), inside, "{ip}");
        }
        assert_eq!(set.v4.len(), 3, "adjacent /27s merge: {:?}", set.v4);
    }

    #[test]
    fn parses_the_operators_format_and_plain_text() {
        let body =
            br#"{"creationTime": "2026-11-28T14:46:00.000000", "prefixes": [{"ipv6Prefix": "2001:4860:4801:10::/64"}, {"ipv4Prefix": "66.249.64.0/27"}]}"#;
        let (n, published) = parse_published(body).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(published.as_deref(), Some("2026-11-28T14:46:00.000000"));
        let (n, _) = parse_published(b"# a list\n157.55.39.0/24\n40.77.167.7\n").unwrap();
        assert_eq!(n.len(), 2);
    }

    #[test]
    fn refuses_unbelievable_files() {
        assert!(parse_published(b"{\"prefixes\": []}").unwrap_err().contains("no networks"));
        assert!(parse_published(b"{\"prefixes\": [{\"ipv4Prefix\": \"0.0.0.0/0\"}]}").unwrap_err().contains("wider"));
        assert!(parse_published(b"{\"prefixes\": [{\"ipv4Prefix\": \"300.1.1.1/24\"}]}").unwrap_err().contains("invalid CIDR"));
        assert!(parse_published(b"<html>Not found</html>").is_err());
        assert!(parse_published(b"{not json").unwrap_err().starts_with("invalid JSON"));
    }

    #[test]
    fn file_names_and_time_stamps() {
        assert_eq!(file_name("https://openai.com/gptbot.json"), "openai.com_gptbot.json");
        assert_eq!(epoch_seconds("1970-01-02"), Some(86_400));
        assert_eq!(epoch_seconds("2026-11-30T00:00:00Z"), Some(1_795_996_800));
        assert_eq!(epoch_seconds("2000-03-01T01:02:03.5"), Some(951_872_523));
        assert_eq!(epoch_seconds("nope"), None);
    }

    #[test]
    fn the_shipped_snapshot_is_valid() {
        for f in snapshot() {
            assert!(f.networks().is_ok(), "{}: {:?}", f.url, f.networks().err());
            assert!(f.snapshot.is_some(), "{} has no snapshot date", f.url);
        }
    }
}
