//! The client address of a request, as an `IpAddr`.

use ngx::ffi::{ngx_connection_t, sockaddr, sockaddr_in, sockaddr_in6, socklen_t, AF_INET, AF_INET6, AF_UNIX};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this worker has said that its clients on a unix socket share one key.
static UNIX_SOCKET_TOLD: AtomicBool = AtomicBool::new(false);

/// Says once per worker, at `warn`, that a request came on a unix socket with
/// no client address: realip found no trusted proxy's (`site.trusted_proxies`
/// has no `unix:`, or the proxy sent none). Called from the preaccess phase,
/// after realip has run. Every such client is then one key
/// for the limits, the budgets and the ladder, and none can be verified by its
/// address, so one of them can spend everyone's budgets.
pub fn tell_if_unix_socket(c: &ngx_connection_t) {
    if c.sockaddr.is_null() {
        return;
    }
    // SAFETY: as in client_ip (every socket address starts with its family).
    let family = unsafe { (*c.sockaddr).sa_family } as u32;
    if family == AF_UNIX && !UNIX_SOCKET_TOLD.swap(true, Ordering::Relaxed) {
        ngx::ngx_log_error!(
            ngx::ffi::NGX_LOG_WARN,
            c.log,
            "crawlward: a request came on a unix socket with no client address: every such client is one key for the limits, \
             the budgets and the ladder, and none is verified by its address; if a proxy in front forwards the address, \
             add \"unix:\" to site.trusted_proxies (set_real_ip_from unix:)"
        );
    }
}

/// The connection's peer: the socket address, or the address realip took from
/// a trusted proxy (realip runs before the access phase and rewrites
/// `c->sockaddr`). None for a peer that is neither IPv4 nor IPv6 (a unix socket).
pub fn client_ip(c: &ngx_connection_t) -> Option<IpAddr> {
    if c.sockaddr.is_null() {
        return None;
    }
    // SAFETY: nginx keeps c->sockaddr pointing at socklen valid bytes for the life of the connection.
    unsafe { ip_of_sockaddr(c.sockaddr, c.socklen) }
}

/// The address of a socket address: None for one that is neither IPv4 nor IPv6.
///
/// # Safety
/// `sa` must point at `len` valid bytes of a socket address.
pub unsafe fn ip_of_sockaddr(sa: *const sockaddr, len: socklen_t) -> Option<IpAddr> {
    let len = len as usize;
    // SAFETY: per the contract (every socket address starts with its family).
    let family = unsafe { (*sa).sa_family } as u32;
    match family {
        AF_INET if len >= std::mem::size_of::<sockaddr_in>() => {
            // SAFETY: per the contract; the family decides the layout, and the length is checked.
            let sin = unsafe { &*(sa as *const sockaddr_in) };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
        }
        AF_INET6 if len >= std::mem::size_of::<sockaddr_in6>() => {
            // SAFETY: as above.
            let sin6 = unsafe { &*(sa as *const sockaddr_in6) };
            // SAFETY: reading the union's bytes, which any address is.
            Some(IpAddr::V6(Ipv6Addr::from(unsafe { sin6.sin6_addr.__in6_u.__u6_addr8 })))
        }
        _ => None,
    }
}

/// The client's key in a rate class ([`crawlward_policy::net::client_key`]:
/// an IPv6 address by its /64).
pub fn client_key(c: &ngx_connection_t) -> &[u8] {
    crawlward_policy::net::client_key(binary_addr(c))
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
    // the bytes are inside c->sockaddr (or c->addr_text), which live as long as the
    // connection, and so as long as `c`'s borrow
    // SAFETY: as in client_ip (every socket address starts with its family).
    let family = unsafe { (*sa).sa_family } as u32;
    match family {
        AF_INET if len >= std::mem::size_of::<sockaddr_in>() => {
            // SAFETY: as in ip_of_sockaddr.
            let sin = unsafe { &*(sa as *const sockaddr_in) };
            // SAFETY: the address is 4 bytes in network order, inside the sockaddr.
            unsafe { std::slice::from_raw_parts(&sin.sin_addr as *const _ as *const u8, 4) }
        }
        AF_INET6 if len >= std::mem::size_of::<sockaddr_in6>() => {
            // SAFETY: as in ip_of_sockaddr.
            let sin6 = unsafe { &*(sa as *const sockaddr_in6) };
            // SAFETY: reading the union's bytes, which any address is.
            unsafe { &sin6.sin6_addr.__in6_u.__u6_addr8 }
        }
        AF_UNIX => c.addr_text.as_bytes(),
        _ => &[],
    }
}
