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

/// A client's key in a rate class, from its address as nginx's
/// `$binary_remote_addr` holds it: an IPv4 address's 4 bytes (also one an
/// IPv6 socket maps, `::ffff:a.b.c.d`), an IPv6 address's first 8 (its
/// /64: one subscriber's network, in which a client can take a new address
/// for every request), anything else (a unix socket's text) as it is. The
/// budgets and the DNS check's caps count an IPv6 client by its /64 too.
pub fn client_key(binary_addr: &[u8]) -> &[u8] {
    match binary_addr.len() {
        16 if binary_addr[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] => &binary_addr[12..],
        16 => &binary_addr[..8],
        _ => binary_addr,
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
    // a whole HTML page served for a range file is one "line" to a text format: quote its start
    let shown: String = s.chars().take(60).collect();
    let more = if shown.len() < s.len() { "..." } else { "" };
    Err(format!("invalid CIDR \"{}{more}\": expected an address or a network such as 192.0.2.0/24 or 2001:db8::/32", shown.escape_debug()))
}

/// A DNS name of letters, digits and hyphens, in labels of at most 63.
pub(crate) fn valid_hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.')
            .all(|l| !l.is_empty() && l.len() <= 63 && !l.starts_with('-') && !l.ends_with('-') && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_key_is_an_ipv4_address_or_an_ipv6_64() {
        let v6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert_eq!(client_key(&[192, 0, 2, 1]), &[192, 0, 2, 1]);
        assert_eq!(client_key(&v6("2001:db8:1:2::1")), client_key(&v6("2001:db8:1:2:ffff:ffff:ffff:fffe")));
        assert_ne!(client_key(&v6("2001:db8:1:2::1")), client_key(&v6("2001:db8:1:3::1")));
        assert_eq!(client_key(&v6("::ffff:192.0.2.1")), &[192, 0, 2, 1], "a mapped IPv4 address is the address");
        assert_eq!(client_key(b"unix:"), b"unix:");
    }

    /// An HTML page served for a range file is one bad value: quoted by its start.
    #[test]
    fn a_long_bad_value_is_quoted_by_its_start() {
        let page = format!("<!DOCTYPE html>\n<html>{}</html>", "x".repeat(5000));
        let e = parse_net(&page).unwrap_err();
        assert!(e.starts_with("invalid CIDR \"<!DOCTYPE html>\\n<html>xxx") && e.len() < 200, "{e}");
        assert!(e.contains("...\": expected an address"), "{e}");
        assert_eq!(
            parse_net("10.0.0.0/33").unwrap_err(),
            "invalid CIDR \"10.0.0.0/33\": expected an address or a network such as 192.0.2.0/24 or 2001:db8::/32"
        );
    }
}
