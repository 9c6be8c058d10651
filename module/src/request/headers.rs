//! The header filter: `Retry-After` on the refusals that nginx's limits and
//! the maintenance block answer (a rate class's 429, the browse cap's 503,
//! maintenance's 503), from the policy's values in the catalogue file's
//! `layers`. A policy rendered for stock nginx does the same with
//! `add_header Retry-After $crawlward_retry_after always`; with the module,
//! the decision is the module's and costs nothing on other responses. The
//! module's own 429s (the facet guard's, the budgets') carry theirs already.

use crate::conf::confs;
use crate::request::facts;
use ngx::ffi::{ngx_conf_t, ngx_http_output_header_filter_pt, ngx_http_request_t, ngx_http_top_header_filter, ngx_int_t, NGX_ERROR, NGX_OK};
use std::ptr::addr_of_mut;

/// The next header filter: set once, at configuration, before any request.
static mut NEXT: ngx_http_output_header_filter_pt = None;

/// Puts the filter at the top of nginx's header filters.
///
/// # Safety
/// `cf` must be the configuration in postconfiguration.
pub unsafe fn postconfiguration(_cf: *mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: configuration runs in one thread before any request; the chain is nginx's
    // global list of header filters, which every filter module extends the same way.
    unsafe {
        *addr_of_mut!(NEXT) = ngx_http_top_header_filter;
        ngx_http_top_header_filter = Some(header_filter);
    }
    NGX_OK as ngx_int_t
}

unsafe extern "C" fn header_filter(r: *mut ngx_http_request_t) -> ngx_int_t {
    // SAFETY: nginx runs header filters for live requests of this http block.
    if unsafe { refusal_status(r) } {
        crate::base::guard((), || {
            // SAFETY: as above.
            unsafe { add_retry_after(r) }
        });
    }
    // SAFETY: NEXT was set at configuration and is only read since.
    match unsafe { *addr_of_mut!(NEXT) } {
        // SAFETY: the next filter of nginx's chain, for this request.
        Some(next) => unsafe { next(r) },
        None => NGX_ERROR as ngx_int_t,
    }
}

/// Whether the response is a 429 or a 503 of a main request: only those can
/// be such a refusal, and every other response goes on at once.
///
/// # Safety
/// `r` must be a live request.
unsafe fn refusal_status(r: *mut ngx_http_request_t) -> bool {
    // SAFETY: per the contract.
    unsafe {
        let status = if (*r).err_status != 0 { (*r).err_status } else { (*r).headers_out.status };
        matches!(status, 429 | 503) && r == (*r).main
    }
}

/// # Safety
/// `r` must be a live request.
unsafe fn add_retry_after(r: *mut ngx_http_request_t) {
    // SAFETY: per the contract.
    unsafe {
        let (mcf, lcf) = confs(r);
        let Some(layers) = mcf.identity.as_ref().and_then(|i| i.layers.as_ref()).filter(|_| lcf.enabled == 1) else { return };
        // identified now if nothing asked before (maintenance answers in the rewrite phase)
        let Some(st) = facts(r) else { return };
        if let (Some(why), _) = crate::request::variables::refusal(r, st) {
            if let Some(secs) = layers.retry_after(why) {
                retry_after(r, secs as u64);
            }
        }
    }
}

/// Add `Retry-After: secs` to the response headers (kept on nginx's own error pages).
///
/// # Safety
/// `r` must be a live request.
pub unsafe fn retry_after(r: *mut ngx_http_request_t, secs: u64) {
    // SAFETY: per the contract; the header and its value live in the request's pool.
    unsafe {
        let h = ngx::ffi::ngx_list_push(&mut (*r).headers_out.headers) as *mut ngx::ffi::ngx_table_elt_t;
        if h.is_null() {
            return;
        }
        let value = secs.to_string();
        let data = ngx::ffi::ngx_pnalloc((*r).pool, value.len()) as *mut u8;
        if data.is_null() {
            (*h).hash = 0;
            return;
        }
        std::ptr::copy_nonoverlapping(value.as_ptr(), data, value.len());
        (*h).hash = 1;
        (*h).key = ngx::ffi::ngx_str_t { len: 11, data: c"Retry-After".as_ptr() as *mut u8 };
        (*h).lowcase_key = c"retry-after".as_ptr() as *mut u8;
        (*h).value = ngx::ffi::ngx_str_t { len: value.len(), data };
        #[cfg(nginx1_23_0)]
        {
            (*h).next = std::ptr::null_mut();
        }
    }
}
