//! The client address of a request, as an `IpAddr`.

use ngx::ffi::{ngx_connection_t, sockaddr, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The connection's peer: the socket address, or the address realip took from
/// a trusted proxy (realip runs before the access phase and rewrites
/// `c->sockaddr`). None for a peer that is neither IPv4 nor IPv6 (a unix socket).
pub fn client_ip(c: &ngx_connection_t) -> Option<IpAddr> {
    let sa: *const sockaddr = c.sockaddr;
    if sa.is_null() {
        return None;
    }
    let len = c.socklen as usize;
    // SAFETY: nginx keeps c->sockaddr pointing at socklen valid bytes for the life of the
    // connection; the family decides the layout and the length is checked before the cast.
    unsafe {
        match (*sa).sa_family as u32 {
            AF_INET if len >= std::mem::size_of::<sockaddr_in>() => {
                let sin = &*(sa as *const sockaddr_in);
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
            }
            AF_INET6 if len >= std::mem::size_of::<sockaddr_in6>() => {
                let sin6 = &*(sa as *const sockaddr_in6);
                Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.__in6_u.__u6_addr8)))
            }
            _ => None,
        }
    }
}
