//! The range-file parser: any bytes as an operator's published file. An
//! accepted file holds a believable set of networks, and the merged lookup
//! table answers what the networks answer, for addresses inside, beside
//! and outside them.
#![no_main]

use crawlward_policy::ranges::{parse_published, validate, RangeSet};
use ipnet::IpNet;
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn probes(n: &IpNet) -> Vec<IpAddr> {
    match n {
        IpNet::V4(v4) => {
            let (lo, hi) = (u32::from(v4.network()), u32::from(v4.broadcast()));
            [lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1), lo / 2 + hi / 2]
                .into_iter()
                .flat_map(|a| [IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V6(Ipv4Addr::from(a).to_ipv6_mapped())])
                .collect()
        }
        IpNet::V6(v6) => {
            let (lo, hi) = (u128::from(v6.network()), u128::from(v6.broadcast()));
            [lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1), lo / 2 + hi / 2].into_iter().map(|a| IpAddr::V6(Ipv6Addr::from(a))).collect()
        }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok((nets, _published)) = parse_published(data) else { return };
    assert!(validate(&nets).is_ok());
    let set = RangeSet::new(&nets);
    for n in nets.iter().take(64) {
        for ip in probes(n) {
            let expected = nets.iter().any(|m| m.contains(&canonical(ip)));
            assert_eq!(set.contains(ip), expected, "{ip} in {nets:?}");
        }
    }
});
