//! API accounts in a log (`account=` and `tier=`, which the module writes
//! for metered requests): each account's use hour by hour, and the burner
//! pattern that the proportional classifier's notes call per-account volume,
//! "the one signal you cannot fabricate": a genuine client has a normal
//! curve, while a burner-account operation spikes at exactly the quota and
//! then a new account appears, from the same networks.
//!
//! An account is *at its quota* when, in some clock hour, the requests that
//! passed reach 95% or more of its tier's hourly limit (or its day reaches
//! 95% of a daily one), or the quota refused it. A *burner chain* is at
//! least two accounts at their quota where each next one first appears
//! within two hours of the previous one reaching it, from a network (IPv4
//! /24, IPv6 /48) the previous one used.

use crawlward_policy::quota::{source_word, Tier};
use serde::Serialize;
use std::collections::HashMap;
use std::net::IpAddr;

/// Accounts kept: past it, new accounts are counted, not reported.
const MAX_ACCOUNTS: usize = 100_000;
/// Networks kept per account.
const MAX_NETWORKS: usize = 16;
/// Hours of curve reported per account (the last ones).
const CURVE_HOURS: usize = 48;
/// "Within a few percent" of the quota.
const AT_QUOTA: f64 = 0.95;
/// How soon after an account reaches its quota the next one must appear.
const FOLLOW_SECONDS: i64 = 2 * 3600;

#[derive(Debug, Default, Clone)]
struct Use {
    tier: Option<String>,
    first: i64,
    /// Requests that passed, by clock hour (its start, seconds since the epoch).
    hours: HashMap<i64, u32>,
    requests: u64,
    refused: u64,
    /// When it first reached its quota (the end of that hour, or the refusal).
    at_quota: Option<i64>,
    networks: Vec<[u8; 16]>,
}

impl Use {
    /// Another part of the same account's use, taken in.
    fn merge(&mut self, other: &Use) {
        if self.tier.is_none() {
            self.tier.clone_from(&other.tier);
        }
        self.first = self.first.min(other.first);
        for (hour, n) in &other.hours {
            *self.hours.entry(*hour).or_insert(0) += n;
        }
        self.requests += other.requests;
        self.refused += other.refused;
        self.at_quota = [self.at_quota, other.at_quota].into_iter().flatten().min();
        for net in &other.networks {
            if !self.networks.contains(net) && self.networks.len() < MAX_NETWORKS {
                self.networks.push(*net);
            }
        }
    }
}

/// The accounts of a log, as it is read: each by where it came from (the
/// word `source=`, a byte before the name) and the name as logged, since a
/// keyed account and a sign-in of one name are two accounts with quotas of
/// their own.
#[derive(Debug, Default)]
pub struct Accounts {
    by_name: HashMap<Vec<u8>, Use>,
    pub not_kept: u64,
}

/// An account that followed another, and the network they shared.
type Follower<'a> = (&'a [u8], [u8; 16]);

/// Where an account came from, as the first byte of its key.
const FROM_KEY: u8 = b'k';
const FROM_VARIABLE: u8 = b'v';
/// A log from before the module said (`source=` absent).
const FROM_UNSAID: u8 = b'-';

/// An account's name as the report shows it: the logged word with its
/// `%XX` decoded (the log holds printable ASCII only: nginx wrote other
/// bytes as `\xHH`, and the decoded bytes are a space, `%`, `"`, `~` or `-`).
/// `key` is the account's key in [`Accounts`]; where one name comes from
/// two sources (`twice`), each is labelled, as `crawlward top` does.
fn shown(key: &[u8], twice: &std::collections::HashSet<Vec<u8>>) -> String {
    let name = String::from_utf8_lossy(&percent_decoded(&key[1..])).into_owned();
    if !twice.contains(&key[1..]) {
        return name;
    }
    match key[0] {
        FROM_KEY => format!("{name} [key]"),
        FROM_VARIABLE => format!("{name} [sign-in]"),
        _ => format!("{name} [?]"),
    }
}

/// What the row says of the source: `key`, `variable`, or none for a log
/// from before the module said.
fn source_of(key: &[u8]) -> Option<&'static str> {
    match key[0] {
        FROM_KEY => Some(source_word(true)),
        FROM_VARIABLE => Some(source_word(false)),
        _ => None,
    }
}

/// `%XX` decoded; anything else as it is.
fn percent_decoded(v: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !v.contains(&b'%') {
        return std::borrow::Cow::Borrowed(v);
    }
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        match (v[i], v.get(i + 1).copied().and_then(hex), v.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push(h * 16 + l);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A network the account used: an IPv4 /24 or an IPv6 /48.
fn network(ip: IpAddr) -> [u8; 16] {
    match crawlward_policy::net::canonical_ip(ip) {
        IpAddr::V4(v4) => {
            let mut o = v4.to_ipv6_mapped().octets();
            o[15] = 0;
            o
        }
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[6..].fill(0);
            o
        }
    }
}

fn network_name(n: &[u8; 16]) -> String {
    let ip = std::net::Ipv6Addr::from(*n);
    match ip.to_ipv4_mapped() {
        Some(v4) => format!("{v4}/24"),
        None => format!("{ip}/48"),
    }
}

impl Accounts {
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty() && self.not_kept == 0
    }

    /// One metered request: its account (as logged), where it came from
    /// (`source=`: `key` or `variable`; none in an older log), tier, time,
    /// address, and whether the quota refused it.
    pub fn observe(&mut self, logged: &[u8], source: Option<&[u8]>, tier: Option<&[u8]>, time: i64, addr: IpAddr, refused_by_quota: bool) {
        // kept by the word as logged, which names one account (the module percent-encodes a
        // space, `%`, `"` and `~`, leaving a long name's hashed form its `~`), after its
        // source; decoded to be shown
        let from = match source {
            Some(s) if s == source_word(true).as_bytes() => FROM_KEY,
            Some(s) if s == source_word(false).as_bytes() => FROM_VARIABLE,
            _ => FROM_UNSAID,
        };
        let mut account = Vec::with_capacity(1 + logged.len());
        account.push(from);
        account.extend_from_slice(logged);
        if !self.by_name.contains_key(&account) && self.by_name.len() >= MAX_ACCOUNTS {
            self.not_kept += 1;
            return;
        }
        let u = self.by_name.entry(account).or_insert_with(|| Use { first: time, ..Use::default() });
        u.first = u.first.min(time);
        if u.tier.is_none() {
            u.tier = tier.map(|t| String::from_utf8_lossy(t).into_owned());
        }
        u.requests += 1;
        let net = network(addr);
        if !u.networks.contains(&net) && u.networks.len() < MAX_NETWORKS {
            u.networks.push(net);
        }
        if refused_by_quota {
            u.refused += 1;
            u.at_quota = Some(u.at_quota.map_or(time, |t| t.min(time)));
        } else {
            *u.hours.entry(time - time.rem_euclid(3600)).or_insert(0) += 1;
        }
    }

    /// The accounts, with the lines of a log written before the module said
    /// the source (no `source=`) given to the name's one stated source where
    /// it has exactly one: a log that spans the upgrade keeps each account
    /// one account.
    fn merged(&self) -> HashMap<Vec<u8>, Use> {
        let mut stated: HashMap<&[u8], Vec<u8>> = HashMap::new();
        for key in self.by_name.keys().filter(|k| k[0] != FROM_UNSAID) {
            stated.entry(&key[1..]).or_default().push(key[0]);
        }
        let mut out: HashMap<Vec<u8>, Use> = HashMap::with_capacity(self.by_name.len());
        for (key, u) in &self.by_name {
            let mut target = key.clone();
            if let Some([only]) = stated.get(&key[1..]).map(Vec::as_slice).filter(|_| key[0] == FROM_UNSAID) {
                target[0] = *only;
            }
            match out.entry(target) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(u.clone());
                }
                std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().merge(u),
            }
        }
        out
    }

    /// The report: every account (most requests first, at most `top`, plus
    /// every one in a burner chain) and the chains.
    pub fn report(&self, tiers: &[Tier], default_tier: Option<&str>, top: usize) -> AccountsReport {
        let by_name = self.merged();
        // names logged from more than one source: labelled where shown
        let mut sources: HashMap<&[u8], u8> = HashMap::new();
        let mut twice = std::collections::HashSet::new();
        for key in by_name.keys() {
            if *sources.entry(&key[1..]).or_insert(key[0]) != key[0] {
                twice.insert(key[1..].to_vec());
            }
        }
        let tier_of = |u: &Use| {
            let name = u.tier.as_deref().filter(|t| *t != "-").or(default_tier);
            name.and_then(|n| tiers.iter().find(|t| t.name == n))
        };
        // when each account reached its quota: refused, or an hour (or day) at 95% of a limit
        let mut reached: HashMap<&[u8], i64> = HashMap::new();
        for (name, u) in &by_name {
            let mut when = u.at_quota;
            if let Some(t) = tier_of(u) {
                let full_hour = u.hours.iter().filter(|(_, n)| f64::from(**n) >= AT_QUOTA * f64::from(t.hourly)).map(|(h, _)| h + 3600).min();
                // a day at 95% reached it at the end of the hour its running count crossed 95%,
                // not at the day's end: a burner's successor shows up within hours of that
                let full_day = t.daily.and_then(|d| {
                    let mut hours: Vec<(i64, u32)> = u.hours.iter().map(|(h, n)| (*h, *n)).collect();
                    hours.sort_unstable();
                    let (mut day, mut running) = (i64::MIN, 0u64);
                    hours.into_iter().find_map(|(h, n)| {
                        if h - h.rem_euclid(86_400) != day {
                            (day, running) = (h - h.rem_euclid(86_400), 0);
                        }
                        running += u64::from(n);
                        (running as f64 >= AT_QUOTA * f64::from(d)).then_some(h + 3600)
                    })
                });
                when = [when, full_hour, full_day].into_iter().flatten().min();
            }
            if let Some(w) = when {
                reached.insert(name.as_slice(), w);
            }
        }
        // who follows whom: a new account from a network of one that reached its quota
        // shortly before; the accounts at their quota indexed by network, so that each
        // is compared only with those that share one of its networks
        let mut by_network: HashMap<[u8; 16], Vec<&[u8]>> = HashMap::new();
        for name in reached.keys() {
            for n in &by_name[*name].networks {
                by_network.entry(*n).or_default().push(name);
            }
        }
        let mut follows: HashMap<&[u8], (&[u8], [u8; 16])> = HashMap::new();
        for name in reached.keys() {
            let u = &by_name[*name];
            let mut before: Option<(i64, &[u8], [u8; 16])> = None;
            for net in &u.networks {
                for other in by_network.get(net).into_iter().flatten() {
                    let at = reached[other];
                    // another account: not the same name from another source
                    let fits = other[1..] != name[1..] && by_name[*other].first < u.first && u.first >= at - 3600 && u.first <= at + FOLLOW_SECONDS;
                    if fits && before.is_none_or(|(b, o, _)| (at, *other) > (b, o)) {
                        before = Some((at, other, *net));
                    }
                }
            }
            if let Some((_, other, net)) = before {
                follows.insert(name, (other, net));
            }
        }
        // chains: from each account that follows nobody, every account that follows it, in turn
        let mut followers: HashMap<&[u8], Vec<Follower>> = HashMap::new();
        for (next, (prev, net)) in &follows {
            followers.entry(prev).or_default().push((next, *net));
        }
        let mut starts: Vec<&[u8]> = followers.keys().copied().filter(|p| !follows.contains_key(p)).collect();
        starts.sort();
        let mut chains = Vec::new();
        let mut in_chain: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
        for start in starts {
            let mut chain = vec![start];
            let mut networks = Vec::new();
            let mut at = 0;
            while at < chain.len() {
                let mut next: Vec<Follower> = followers.get(chain[at]).cloned().unwrap_or_default();
                next.sort_by_key(|(n, _)| (by_name[*n].first, *n));
                for (n, net) in next {
                    if !chain.contains(&n) {
                        chain.push(n);
                        if !networks.contains(&net) {
                            networks.push(net);
                        }
                    }
                }
                at += 1;
            }
            in_chain.extend(chain.iter().copied());
            chains.push(BurnerChain { accounts: chain.iter().map(|a| shown(a, &twice)).collect(), networks: networks.iter().map(network_name).collect() });
        }
        let mut rows: Vec<AccountRow> = by_name
            .iter()
            .map(|(name, u)| {
                let t = tier_of(u);
                let last_hour = u.hours.keys().max().copied().unwrap_or(u.first);
                let first_hour = (last_hour - 3600 * (CURVE_HOURS as i64 - 1)).max(u.first - u.first.rem_euclid(3600));
                let curve = (0..).map(|i| first_hour + 3600 * i).take_while(|h| *h <= last_hour).map(|h| u.hours.get(&h).copied().unwrap_or(0)).collect();
                let peak = u.hours.values().copied().max().unwrap_or(0);
                AccountRow {
                    burner: in_chain.contains(name.as_slice()),
                    at_quota: reached.contains_key(name.as_slice()),
                    account: shown(name, &twice),
                    source: source_of(name),
                    tier: t.map(|t| t.name.clone()),
                    requests: u.requests,
                    refused: u.refused,
                    peak_hour: peak,
                    peak_share_of_hourly: t.map(|t| f64::from(peak) / f64::from(t.hourly)),
                    first_hour: first_hour.max(0),
                    curve,
                    networks: u.networks.iter().map(network_name).collect(),
                }
            })
            .collect();
        rows.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.account.cmp(&b.account)));
        let mut kept: Vec<AccountRow> = Vec::new();
        for (i, r) in rows.into_iter().enumerate() {
            if i < top || r.burner {
                kept.push(r);
            }
        }
        AccountsReport { accounts: by_name.len() as u64, not_kept: self.not_kept, rows: kept, burner_chains: chains }
    }
}

#[derive(Debug, Serialize, Default)]
pub struct AccountsReport {
    /// Accounts seen.
    pub accounts: u64,
    /// Requests of accounts past the first 100,000, not reported one by one.
    pub not_kept: u64,
    /// The busiest accounts, and every one in a burner chain.
    pub rows: Vec<AccountRow>,
    pub burner_chains: Vec<BurnerChain>,
}

#[derive(Debug, Serialize)]
pub struct AccountRow {
    pub account: String,
    /// Where the account came from: `key` (the keys file) or `variable` (an
    /// `account=` variable); none in a log from before the module said.
    pub source: Option<&'static str>,
    pub tier: Option<String>,
    pub requests: u64,
    /// Refused by the quota.
    pub refused: u64,
    /// The most requests that passed in one clock hour, and its share of the tier's hourly limit.
    pub peak_hour: u32,
    pub peak_share_of_hourly: Option<f64>,
    /// Whether it reached its quota (within 5%, or refused by it).
    pub at_quota: bool,
    /// In a burner chain.
    pub burner: bool,
    /// Requests that passed, hour by hour from `first_hour` (seconds since the epoch), at most 48.
    pub first_hour: i64,
    pub curve: Vec<u32>,
    pub networks: Vec<String>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct BurnerChain {
    /// The accounts in the order they appeared.
    pub accounts: Vec<String>,
    /// The networks each shared with the one before.
    pub networks: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers() -> Vec<Tier> {
        vec![Tier { name: "standard".into(), hourly: 100, daily: None }]
    }

    /// A genuine client's curve, a burner chain of three from one /24, and
    /// an unrelated account at its quota from elsewhere.
    #[test]
    fn a_burner_chain_is_found_and_a_genuine_curve_is_not() {
        let mut a = Accounts::default();
        let h = 1_700_000_000 - 1_700_000_000 % 3600;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // genuine: 20 to 60 an hour for a day
        for hour in 0..24 {
            for i in 0..(20 + (hour * 7) % 40) {
                a.observe(b"library", None, Some(b"standard"), h + hour * 3600 + i, ip("198.51.100.7"), false);
            }
        }
        // burners: each spends its 100 in its first hour, then is refused; the next appears
        for (k, name) in [b"burn1", b"burn2", b"burn3"].iter().enumerate() {
            let start = h + 3600 * (2 * k as i64);
            for i in 0..100 {
                a.observe(*name, None, Some(b"standard"), start + i * 30, ip(&format!("203.0.113.{}", 10 + k)), false);
            }
            a.observe(*name, None, Some(b"standard"), start + 3100, ip(&format!("203.0.113.{}", 10 + k)), true);
        }
        // at its quota, but from another network: no chain
        for i in 0..99 {
            a.observe(b"busy", None, Some(b"standard"), h + 7200 + i, ip("192.0.2.1"), false);
        }
        let r = a.report(&tiers(), Some("standard"), 10);
        assert_eq!(
            r.burner_chains,
            vec![BurnerChain { accounts: vec!["burn1".into(), "burn2".into(), "burn3".into()], networks: vec!["203.0.113.0/24".into()] }]
        );
        let row = |n: &str| r.rows.iter().find(|x| x.account == n).unwrap();
        assert!(row("burn2").burner && row("burn2").at_quota);
        assert_eq!(row("burn2").peak_hour, 100);
        assert!(!row("library").at_quota && !row("library").burner);
        assert_eq!(row("library").curve.len(), 24);
        assert!(row("busy").at_quota && !row("busy").burner, "at its quota alone is no burner");
    }

    /// A daily quota reached in the afternoon: the account that appears from
    /// the same network half an hour later and spends its own follows it (the
    /// day's end, 10 hours on, was the moment taken before).
    #[test]
    fn a_daily_quota_reached_mid_day_is_followed() {
        let mut a = Accounts::default();
        let day = 1_700_000_000 - 1_700_000_000 % 86_400;
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        let daily = vec![Tier { name: "daily".into(), hourly: 1000, daily: Some(100) }];
        // 96 of its 100 by 14:00, spread over the morning, never refused
        for i in 0..96 {
            a.observe(b"first", None, Some(b"daily"), day + 8 * 3600 + i * 200, ip, false);
        }
        // then a new account from the same network, which spends its own day at once
        for i in 0..96 {
            a.observe(b"second", None, Some(b"daily"), day + 14 * 3600 + 1800 + i * 10, ip, false);
        }
        let r = a.report(&daily, Some("daily"), 10);
        assert_eq!(r.burner_chains.len(), 1, "{:?}", r.burner_chains);
        assert_eq!(r.burner_chains[0].accounts, ["first", "second"]);
    }

    /// Two new accounts follow one at its quota: both are in its chain.
    #[test]
    fn every_follower_is_in_the_chain() {
        let mut a = Accounts::default();
        let h = 1_700_000_000 - 1_700_000_000 % 3600;
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        for (name, start) in [(&b"first"[..], h), (&b"b%20one"[..], h + 3700), (&b"c"[..], h + 3800)] {
            for i in 0..100 {
                a.observe(name, None, None, start + i, ip, false);
            }
        }
        let r = a.report(&tiers(), Some("standard"), 10);
        assert_eq!(r.burner_chains.len(), 1, "{:?}", r.burner_chains);
        assert_eq!(r.burner_chains[0].accounts, ["first", "b one", "c"]);
    }

    /// A keyed account and a sign-in of one name are two accounts, as the
    /// quota zone keeps them: each its own count, labelled where shown; a
    /// name from one source only is shown bare.
    #[test]
    fn a_keyed_account_and_a_sign_in_of_one_name_are_two() {
        let mut a = Accounts::default();
        let h = 1_700_000_000 - 1_700_000_000 % 3600;
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        for i in 0..7 {
            a.observe(b"partner", Some(b"key"), Some(b"standard"), h + i, ip, false);
        }
        for i in 0..2 {
            a.observe(b"partner", Some(b"variable"), Some(b"standard"), h + i, ip, false);
        }
        a.observe(b"alone", Some(b"variable"), Some(b"standard"), h, ip, false);
        let r = a.report(&tiers(), Some("standard"), 10);
        assert_eq!(r.accounts, 3);
        let rows: Vec<(&str, Option<&str>, u64)> = r.rows.iter().map(|r| (r.account.as_str(), r.source, r.requests)).collect();
        assert_eq!(rows, [("partner [key]", Some("key"), 7), ("partner [sign-in]", Some("variable"), 2), ("alone", Some("variable"), 1)]);
    }

    /// A log that spans the upgrade: an account's older lines (no source)
    /// and its newer ones are one account, not two chained to each other.
    #[test]
    fn a_log_across_the_upgrade_keeps_an_account_one() {
        let mut a = Accounts::default();
        let h = 1_700_000_000 - 1_700_000_000 % 3600;
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        // at its quota before the upgrade and after
        for i in 0..100 {
            a.observe(b"acme", None, Some(b"standard"), h + i, ip, false);
        }
        for i in 0..100 {
            a.observe(b"acme", Some(b"variable"), Some(b"standard"), h + 2 * 3600 + i, ip, false);
        }
        let r = a.report(&tiers(), Some("standard"), 10);
        assert_eq!(r.accounts, 1);
        assert_eq!((r.rows[0].account.as_str(), r.rows[0].requests, r.rows[0].source), ("acme", 200, Some("variable")));
        assert!(r.burner_chains.is_empty(), "{:?}", r.burner_chains);
        // a name from both sources: the older lines stay apart, shown [?], and chain to neither
        for i in 0..100 {
            a.observe(b"acme", Some(b"key"), Some(b"standard"), h + 3 * 3600 + i, ip, false);
        }
        let r = a.report(&tiers(), Some("standard"), 10);
        assert_eq!(r.accounts, 3);
        assert!(r.burner_chains.is_empty(), "{:?}", r.burner_chains);
        assert!(r.rows.iter().any(|x| x.account == "acme [?]"));
    }

    /// A name that spells a long name's hashed form is logged with its `~`
    /// encoded: two accounts, as the quota zone keeps them, though they are
    /// shown alike.
    #[test]
    fn a_name_that_spells_a_hashed_form_is_another_account() {
        let mut a = Accounts::default();
        let h = 1_700_000_000 - 1_700_000_000 % 3600;
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        let hashed = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa~0123456789abcdef";
        let spelled = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa%7E0123456789abcdef";
        for i in 0..10 {
            a.observe(hashed, None, None, h + i, ip, false);
        }
        for i in 0..3 {
            a.observe(spelled, None, None, h + i, ip, false);
        }
        let r = a.report(&tiers(), Some("standard"), 10);
        assert_eq!(r.accounts, 2);
        let rows: Vec<(&str, u64)> = r.rows.iter().map(|r| (r.account.as_str(), r.requests)).collect();
        let shown = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa~0123456789abcdef";
        assert_eq!(rows, [(shown, 10), (shown, 3)]);
    }
}
