//! The client address of a request, as an `IpAddr`.

use ngx::ffi::{ngx_connection_t, sockaddr, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6, AF_UNIX};
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

/// The connection's peer as `$binary_remote_addr` holds it: the 4 bytes of an
/// IPv4 address, the 16 of an IPv6 one, or the text of a unix socket's.
/// After realip, the address it took from a trusted proxy.
pub fn binary_addr(c: &ngx_connection_t) -> &[u8] {
    let sa: *const sockaddr = c.sockaddr;
    if sa.is_null() {
        return &[];
    }
    let len = c.socklen as usize;
    // SAFETY: as in client_ip; the bytes are inside c->sockaddr (or c->addr_text), which live
    // as long as the connection, and so as long as `c`'s borrow.
    unsafe {
        match (*sa).sa_family as u32 {
            AF_INET if len >= std::mem::size_of::<sockaddr_in>() => {
                let sin = &*(sa as *const sockaddr_in);
                std::slice::from_raw_parts(&sin.sin_addr as *const _ as *const u8, 4)
            }
            AF_INET6 if len >= std::mem::size_of::<sockaddr_in6>() => &(*(sa as *const sockaddr_in6)).sin6_addr.__in6_u.__u6_addr8,
            AF_UNIX => c.addr_text.as_bytes(),
            _ => &[],
        }
    }
}
