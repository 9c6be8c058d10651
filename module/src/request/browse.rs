//! The browse cap's body filter: a place is given back as soon as the
//! response's last buffer is handed to nginx's output, not when the client
//! has read it all. The cap protects the application: once the upstream is
//! done (with `proxy_buffering` or `fastcgi_buffering`, nginx reads the
//! whole response and then lets the upstream go), a client that reads
//! slowly holds nothing of it, and a few slow readers from one address
//! could otherwise keep every place taken and give everyone else 503.
//! Without buffering, the last buffer comes only when the upstream has sent
//! it, so the place is held while the upstream works. A request that ends
//! without its last buffer (the client left, an error), or that still has
//! something in flight when it passes (SSI includes, `mirror`, a cache's
//! background update; or an answer sent from inside the content handler,
//! which holds the request then: a cache hit, `X-Accel-Redirect` to a file,
//! an error page), gives its place back when its pool goes, as before
//! ([`crate::request::preaccess`]).
//!
//! Installed only when a `crawlward_browse_cap` is configured.

use crate::request::ext::RequestExt;
use ngx::ffi::{
    ngx_chain_t, ngx_conf_t, ngx_http_output_body_filter_pt, ngx_http_request_t, ngx_http_top_body_filter, ngx_int_t, ngx_pool_cleanup_t, NGX_ERROR,
};
use ngx::http::Request;
use std::ptr::addr_of_mut;

/// The next body filter: set once, at configuration, before any request.
static mut NEXT: ngx_http_output_body_filter_pt = None;

/// Puts the filter at the top of nginx's body filters.
///
/// # Safety
/// `cf` must be the configuration in postconfiguration.
pub unsafe fn postconfiguration(_cf: *mut ngx_conf_t) {
    // SAFETY: configuration runs in one thread before any request; the chain is nginx's
    // global list of body filters, which every filter module extends the same way.
    let top = unsafe { ngx_http_top_body_filter };
    let next = addr_of_mut!(NEXT);
    // SAFETY: as above.
    unsafe { *next = top };
    // SAFETY: as above.
    unsafe { ngx_http_top_body_filter = Some(body_filter) };
}

unsafe extern "C" fn body_filter(r: *mut ngx_http_request_t, chain: *mut ngx_chain_t) -> ngx_int_t {
    // SAFETY: nginx runs body filters for live requests of this http block.
    let req = unsafe { Request::from_ngx_http_request(r) };
    // SAFETY: the chain nginx passes holds live links and buffers for the filter's call.
    let last = req.is_main_request() && unsafe { holds_last_buffer(chain) };
    // SAFETY: NEXT was set at configuration and is only read since.
    let next = addr_of_mut!(NEXT);
    // SAFETY: as above.
    let rc = match unsafe { *next } {
        // SAFETY: the next filter, with the request and chain nginx gave this one.
        Some(f) => unsafe { f(r, chain) },
        None => NGX_ERROR as ngx_int_t,
    };
    // after the filters below, which may start subrequests on the last buffer (SSI, addition,
    // slice): the place is given back early only when nothing else of the request is left to
    // run (mirror and background cache updates also hold the main request)
    if last && alone(req) {
        crate::base::guard((), || give_back_early(req));
    }
    rc
}

/// Whether a main request has nothing else in flight: no subrequest, nothing postponed.
fn alone(r: &Request) -> bool {
    let r = r.as_ref();
    r.count() == 1 && r.postponed.is_null()
}

/// Whether one of the chain's buffers is the response's last.
///
/// # Safety
/// `chain` must be null or a chain of live links, each with a live buffer.
unsafe fn holds_last_buffer(mut chain: *mut ngx_chain_t) -> bool {
    // SAFETY: per the contract.
    while let Some(link) = unsafe { chain.as_ref() } {
        // SAFETY: per the contract.
        if unsafe { link.buf.as_ref() }.is_some_and(|b| b.last_buf() == 1) {
            return true;
        }
        chain = link.next;
    }
    false
}

/// The request's browse-cap place, if it holds one, given back now; its pool's cleanup
/// entry is emptied, so that the place is not given back twice.
fn give_back_early(r: &Request) {
    let Some(st) = crate::request::state(r) else { return };
    // SAFETY: the state lives in the request's pool; no other reference to it is held while
    // a body filter runs.
    let st = unsafe { &mut *st };
    let held = std::mem::replace(&mut st.browse_place, std::ptr::null_mut());
    // SAFETY: a cleanup entry of this request's pool, set by the browse cap and not yet run
    // (the pool is live while the request is).
    let Some(entry) = (unsafe { held.as_mut() }) else { return };
    let (handler, data) = (entry.handler.take(), entry.data);
    if let Some(release) = handler {
        // SAFETY: the handler and data the browse cap set, run once: the entry no longer has it.
        unsafe { release(data) };
    }
}

/// The cleanup entry's type, as the request's state keeps it.
pub type Place = *mut ngx_pool_cleanup_t;
