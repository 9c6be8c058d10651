//! Addresses and names as the policy and the range files write them.

use ipnet::IpNet;
use std::net::IpAddr;

/// An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the IPv4 address.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// An address or network: `192.0.2.0/24`, `2001:db8::/32`, or a bare address.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    if let Ok(net) = s.parse::<IpNet>() {
        if net.trunc() != net {
            return Err(format!("invalid CIDR \"{s}\": host bits are set (the network is {})", net.trunc()));
        }
        return Ok(net);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    Err(format!("invalid CIDR \"{s}\": expected an address or a network such as 192.0.2.0/24 or 2001:db8::/32"))
}

/// A DNS name of letters, digits and hyphens, in labels of at most 63.
pub(crate) fn valid_hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.')
            .all(|l| !l.is_empty() && l.len() <= 63 && !l.starts_with('-') && !l.ends_with('-') && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}
