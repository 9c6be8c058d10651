//! Our handling of DNS answers: what the resolver handed back for the PTR
//! and the forward lookup, any bytes and addresses, through the
//! forward-confirmed reverse DNS rules; then any sequence of lookups
//! started, finished, abandoned and read against a small verdict cache,
//! checked against a model of what it must keep.
#![no_main]

use crawlward_policy::fcrdns::{after_forward, after_ptr, hostname_under, AfterPtr, Answer, DnsSettings, DnsVerdict};
use crawlward_policy::verdict_cache::{key_of, Begin, Caps, Entry, Header, Lookup, Table};
use libfuzzer_sys::fuzz_target;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const ANSWERS: [Answer; 3] = [Answer::Found, Answer::NotFound, Answer::Failed];

fn address(b: u8) -> IpAddr {
    match b % 4 {
        // a few IPv4 /24s, the same addresses IPv4-mapped, and an IPv6 /48
        0 | 1 => IpAddr::V4(Ipv4Addr::new(66, 249, 64 + (b >> 6), b >> 2)),
        2 => IpAddr::V6(Ipv4Addr::new(66, 249, 64 + (b >> 6), b >> 2).to_ipv6_mapped()),
        _ => IpAddr::V6(Ipv6Addr::new(0x2001, 0x4860, 0x4801, (b >> 5) as u16, 0, 0, 0, (b >> 2) as u16)),
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn answers(data: &[u8]) {
    let Some((&head, rest)) = data.split_first() else { return };
    let suffixes = vec!["googlebot.com".to_string(), "google.com".to_string(), "geo.googlebot.com".to_string()];
    // the PTR name up to a NUL, then the forward answer's addresses, a byte each
    let (name, addrs) = rest.split_at(rest.iter().position(|b| *b == 0).unwrap_or(rest.len()));
    let client = address(head);
    match after_ptr(ANSWERS[head as usize % 3], name, &suffixes) {
        AfterPtr::Forward(host) => {
            assert_eq!(ANSWERS[head as usize % 3], Answer::Found);
            assert!(hostname_under(name, &suffixes) && hostname_under(host.as_bytes(), &suffixes));
            assert!(!host.ends_with('.') && host.bytes().all(|b| !b.is_ascii_uppercase()));
            let addrs: Vec<IpAddr> = addrs.iter().map(|b| address(*b)).collect();
            let answer = ANSWERS[(head as usize / 3) % 3];
            let v = after_forward(answer, &addrs, client);
            let confirmed = addrs.iter().any(|a| canonical(*a) == canonical(client));
            let expected = match answer {
                Answer::Found if confirmed => DnsVerdict::Verified,
                Answer::Failed => DnsVerdict::Unresolved,
                _ => DnsVerdict::Spoofed,
            };
            assert_eq!(v, expected);
        }
        AfterPtr::Done(DnsVerdict::Verified) => panic!("verified without a forward lookup"),
        AfterPtr::Done(_) => {}
    }
}

/// A lookup begun and not yet finished or abandoned.
struct Outstanding {
    ip: IpAddr,
    checked_for: u32,
    deadline: u64,
}

fn cache(data: &[u8]) {
    const CAPACITY: usize = 8;
    let mut header = Header::EMPTY;
    let mut buckets = vec![0u32; CAPACITY.next_power_of_two()];
    let mut entries = vec![Entry::EMPTY; CAPACITY];
    let mut table = Table::init(&mut header, &mut buckets, &mut entries, data.first().map_or(0, |b| u64::from(*b).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    // a verified verdict holds on for 2 s past its expiry while DNS fails
    const STALE_MS: u64 = 2_000;
    let caps = Caps { total: 6, per_address: 2, per_network: 4, stale_verified: STALE_MS };
    // the addresses (as the table keys them: an IPv4-mapped one is the IPv4 address) and
    // suffix sets DNS verified at some point: no other is ever verified
    let mut verified: HashSet<([u8; 16], u32)> = HashSet::new();
    let mut now = 1_000u64;
    let mut outstanding: HashMap<u32, Outstanding> = HashMap::new();
    for op in data.chunks_exact(3) {
        let (kind, ip, checked_for) = (op[0] % 5, address(op[1]), u32::from(op[0] >> 7));
        now += u64::from(op[2] >> 4) * 100;
        match kind {
            0 => {
                let deadline = now + 500 + u64::from(op[2] & 15) * 100;
                let pending_before = table.header.in_flight;
                match table.begin(ip, checked_for, now, deadline, caps) {
                    Begin::Started(ticket) => {
                        assert!(table.header.in_flight <= caps.total, "{} in flight", table.header.in_flight);
                        assert!(pending_before < caps.total || table.header.in_flight <= pending_before);
                        assert!(outstanding.insert(ticket, Outstanding { ip, checked_for, deadline }).is_none(), "ticket {ticket} given twice");
                    }
                    Begin::Pending(until) => assert!(until > now),
                    Begin::Hit(DnsVerdict::Verified) | Begin::Stale => {
                        assert!(verified.contains(&(key_of(ip), checked_for)), "{ip} for {checked_for}: verified, never by DNS")
                    }
                    Begin::Hit(_) | Begin::Full | Begin::Capped => {}
                }
            }
            1 | 2 => {
                // finish (a verdict valid for a while) or abandon the oldest-numbered lookup
                let Some(&ticket) = outstanding.keys().min_by_key(|t| (**t as usize + op[1] as usize) % 7) else { continue };
                let o = outstanding.remove(&ticket).unwrap();
                let owned = now < o.deadline && matches!(table.lookup(o.ip, o.checked_for, now), Lookup::Pending(d) if d == o.deadline);
                let valid = 1 + u64::from(op[1]) * 10;
                let settings =
                    DnsSettings { valid_verified: valid, valid_spoofed: valid, valid_unresolved: valid, stale_verified: STALE_MS, ..DnsSettings::default() };
                if kind == 1 {
                    let verdict = DnsVerdict::ALL[op[2] as usize % 3];
                    if verdict == DnsVerdict::Verified {
                        verified.insert((key_of(o.ip), o.checked_for));
                    }
                    let (held, stale) = table.finish(o.ip, o.checked_for, ticket, verdict, now, &settings);
                    assert!(held == verdict || stale && held == DnsVerdict::Verified && verdict == DnsVerdict::Unresolved);
                    assert!(!stale || verified.contains(&(key_of(o.ip), o.checked_for)));
                    if owned {
                        // the verdict that holds is what the next request reads
                        assert_eq!(table.lookup(o.ip, o.checked_for, now), Lookup::Hit(held));
                    }
                } else {
                    let (held, stale) = table.abandon(o.ip, o.checked_for, ticket, now, &settings);
                    assert!(held == DnsVerdict::Unresolved || stale && verified.contains(&(key_of(o.ip), o.checked_for)));
                    if owned {
                        assert_eq!(table.lookup(o.ip, o.checked_for, now), Lookup::Miss);
                    }
                }
            }
            _ => {
                if table.lookup(ip, checked_for, now) == Lookup::Hit(DnsVerdict::Verified) {
                    assert!(verified.contains(&(key_of(ip), checked_for)), "{ip} for {checked_for}: verified, never by DNS");
                }
            }
        }
        assert!(table.header.len as usize <= table.capacity() && table.header.in_flight <= table.header.len);
        // a lookup in flight before its deadline is never evicted nor taken over
        for o in outstanding.values().filter(|o| now < o.deadline) {
            assert_eq!(table.lookup(o.ip, o.checked_for, now), Lookup::Pending(o.deadline), "{} for {}", o.ip, o.checked_for);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    if which & 1 == 0 {
        answers(rest)
    } else {
        cache(rest)
    }
});
