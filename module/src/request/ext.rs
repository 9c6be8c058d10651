//! What the module reads from nginx's request that `ngx::http::Request` does
//! not say itself. Entry points turn nginx's pointer into a `&Request` (or
//! `&mut Request` where the response is written) once; below them, the
//! request path is safe code over these accessors, and each raw read is
//! here, once, with what makes it sound.

use crate::base::HeaderName;
use crate::conf::{LocConf, MainConf};
use ngx::ffi::{
    ngx_connection_t, ngx_hash_key, ngx_http_core_loc_conf_t, ngx_http_get_indexed_variable, ngx_http_get_variable, ngx_http_request_t, ngx_pool_cleanup_pt,
    ngx_pool_cleanup_t, ngx_str_t, ngx_uint_t, ngx_variable_value_t,
};
use ngx::http::Request;
use std::borrow::Cow;
use std::ffi::c_void;
use std::ptr::NonNull;

pub trait RequestExt {
    /// The request as nginx's functions that only read it take it (one that
    /// writes it takes the pointer of a `&mut Request`).
    fn ptr(&self) -> *mut ngx_http_request_t;
    /// Whether this is its main request (not a subrequest).
    fn is_main_request(&self) -> bool;
    /// nginx's normalized `$uri`.
    fn uri(&self) -> &[u8];
    /// The query string (`$args`).
    fn args(&self) -> &[u8];
    /// The request target as the request line sent it (`$request_uri`).
    fn request_target(&self) -> &[u8];
    /// The method as the request line sent it (`$request_method`).
    fn request_method(&self) -> &[u8];
    /// Whether the method is GET or HEAD.
    fn is_get_or_head(&self) -> bool;
    /// As `$status`: an error page's status, else the response's (444 for a closed connection); 0 before either.
    fn response_status(&self) -> usize;
    /// Whether nginx is answering the request with a refusal, on its way to
    /// (or at) an `error_page`: the access phase's 401 or 403, a `limit_req`
    /// or `limit_conn` refusal (429, 503), as `err_status` holds it. Not an
    /// error page for another status, such as a `return 404` sent to the
    /// application with `error_page 404 = @app`, which serves the client's
    /// request and is decided as any (an `=` without a code sets the status
    /// back to 0: such a refusal's page is decided too).
    fn answering_refusal(&self) -> bool;
    /// The milliseconds its upstreams took, added up as `$upstream_response_time`
    /// lists them; None when no upstream answered it.
    fn upstream_ms(&self) -> Option<u64>;
    /// The client connection, which outlives the request.
    fn connection_ref(&self) -> &ngx_connection_t;
    /// The `Referer` header, if any.
    fn referer(&self) -> Option<&[u8]>;
    /// The values of the headers the client sent named `name`, in order, as
    /// an application may read the name: in any case, a `-` of it written as
    /// any byte but a letter or a digit (`X_API_Key` is `$http_x_api_key` too,
    /// where `underscores_in_headers` lets it in; PHP reads `X.API.Key` as
    /// `X_API_KEY`, where `ignore_invalid_headers off` lets it in), and a
    /// header another module hid (hash 0) left out. Compared by length first,
    /// then by the lower-case name nginx keeps with each header.
    fn headers_named<'r>(&'r self, name: &'r HeaderName) -> impl Iterator<Item = &'r [u8]> + 'r;
    /// The User-Agent as `$http_user_agent` holds it: repeated headers joined with ", " (nginx 1.23+).
    fn user_agent_joined(&self) -> Cow<'_, [u8]>;
    /// The core module's location conf (the resolver and its timeout).
    fn core_loc_conf(&self) -> &ngx_http_core_loc_conf_t;
    /// The main request's `limit_req` and `limit_conn` statuses (as their variables read them).
    fn limit_statuses(&self) -> (u32, u32);
    /// The value of a variable looked up by name; None when not found.
    fn variable_named(&self, name: &'static str) -> Option<&[u8]>;
    /// Whether the indexed variable has a value that is not empty.
    fn indexed_variable_set(&self, index: ngx_uint_t) -> bool;
    /// An indexed variable's value, None when not found.
    fn indexed_variable(&self, index: ngx_uint_t) -> Option<&[u8]>;
    /// A copy of `bytes` in the request's pool; None when the pool is out of memory.
    fn pool_copy(&self, bytes: &[u8]) -> Option<&[u8]> {
        self.pool_join(&[bytes])
    }
    /// The pieces, one after the other, in the request's pool; None when the pool is out of memory.
    fn pool_join(&self, pieces: &[&[u8]]) -> Option<&[u8]>;
    /// A cleanup entry in the request's pool, without a handler yet; None when out of memory.
    fn add_cleanup(&self) -> Option<Cleanup>;
    /// `size` bytes of the request's pool, aligned to 8; None when out of memory.
    fn pool_alloc(&self, size: usize) -> Option<NonNull<c_void>>;
    /// Where the value of the indexed variable `index` is, which the request shares with
    /// its subrequests and keeps across internal redirects: valid to dereference when
    /// `index` is a variable index of this request's http block.
    fn variable_slot(&self, index: usize) -> *mut ngx_variable_value_t;
    /// The module's ctx slot of the request.
    fn module_ctx_slot(&self) -> *mut *mut c_void;
}

impl RequestExt for Request {
    fn ptr(&self) -> *mut ngx_http_request_t {
        self as *const Request as *mut ngx_http_request_t
    }

    fn is_main_request(&self) -> bool {
        std::ptr::eq(self.as_ref().main, self.as_ref())
    }

    fn uri(&self) -> &[u8] {
        self.as_ref().uri.as_bytes()
    }

    fn args(&self) -> &[u8] {
        self.as_ref().args.as_bytes()
    }

    fn request_target(&self) -> &[u8] {
        self.as_ref().unparsed_uri.as_bytes()
    }

    fn request_method(&self) -> &[u8] {
        self.as_ref().method_name.as_bytes()
    }

    fn is_get_or_head(&self) -> bool {
        self.as_ref().method & (ngx::ffi::NGX_HTTP_GET | ngx::ffi::NGX_HTTP_HEAD) as usize != 0
    }

    fn response_status(&self) -> usize {
        let r = self.as_ref();
        if r.err_status != 0 {
            r.err_status
        } else {
            r.headers_out.status
        }
    }

    fn answering_refusal(&self) -> bool {
        matches!(self.as_ref().err_status, 401 | 403 | 429 | 503)
    }

    fn upstream_ms(&self) -> Option<u64> {
        let states = self.as_ref().upstream_states;
        // SAFETY: null, or the request's array of upstream states, in its pool.
        let states = unsafe { states.as_ref() }.filter(|a| a.nelts > 0 && !a.elts.is_null())?;
        // SAFETY: the array holds nelts states, laid out as nginx's ngx_http_upstream_state_t.
        let states = unsafe { std::slice::from_raw_parts(states.elts as *const ngx::ffi::ngx_http_upstream_state_t, states.nelts) };
        // as the variable writes them: after the first, a state without a peer only
        // separates the upstreams of an internal redirect (" : ") and is not listed;
        // ngx_msec_t's all ones is the -1 of "no time" ("-")
        let listed = states.iter().enumerate().filter(|(i, s)| *i == 0 || !s.peer.is_null());
        Some(listed.map(|(_, s)| s.response_time).filter(|ms| *ms != ngx::ffi::ngx_msec_t::MAX).map(|ms| (ms as i64).max(0) as u64).sum())
    }

    fn connection_ref(&self) -> &ngx_connection_t {
        // SAFETY: a live request's connection is valid, and outlives the request.
        unsafe { &*self.as_ref().connection }
    }

    fn referer(&self) -> Option<&[u8]> {
        // SAFETY: headers_in.referer is null or points at a header kept for the request's life.
        unsafe { self.as_ref().headers_in.referer.as_ref() }.map(|h| h.value.as_bytes())
    }

    fn headers_named<'r>(&'r self, name: &'r HeaderName) -> impl Iterator<Item = &'r [u8]> + 'r {
        let mut part: *const ngx::ffi::ngx_list_part_t = &self.as_ref().headers_in.headers.part;
        let mut headers: &[ngx::ffi::ngx_table_elt_t] = &[];
        std::iter::from_fn(move || loop {
            let Some((h, rest)) = headers.split_first() else {
                // SAFETY: a part of the request's header list, from its first, and not null; it
                // lives in the request's pool, as long as the request, as does its `next`.
                let p = unsafe { part.as_ref() }?;
                part = p.next;
                if p.nelts != 0 && !p.elts.is_null() {
                    // SAFETY: a part holds `nelts` initialized headers at `elts`, which only
                    // nginx's own header parsing (done before any handler runs) and this
                    // module's handlers change, and no handler runs while this reads them.
                    headers = unsafe { std::slice::from_raw_parts(p.elts as *const ngx::ffi::ngx_table_elt_t, p.nelts) };
                }
                continue;
            };
            headers = rest;
            if h.hash != 0 && h.key.len == name.lowcase_key.len() && !h.lowcase_key.is_null() {
                // SAFETY: a parsed header's lower-case name has the name's length, in the request's pool.
                let sent = unsafe { std::slice::from_raw_parts(h.lowcase_key, h.key.len) };
                // any byte but a letter or a digit for a `-` of the name, as applications read
                // names (FastCGI passes `_` on as `-`, PHP reads `.` as `_`: see `same_name`)
                if sent.iter().zip(name.lowcase_key.iter()).all(|(s, n)| s == n || (*n == b'-' && !s.is_ascii_alphanumeric())) {
                    return Some(h.value.as_bytes());
                }
            }
        })
    }

    fn user_agent_joined(&self) -> Cow<'_, [u8]> {
        // SAFETY: headers_in.user_agent is null or points at a header kept for the request's
        // life, as does each header its `next` chain links.
        let Some(first) = (unsafe { self.as_ref().headers_in.user_agent.as_ref() }) else { return Cow::Borrowed(&[]) };
        #[cfg(nginx1_23_0)]
        if !first.next.is_null() {
            let mut joined = Vec::with_capacity(first.value.len * 2);
            let mut h = Some(first);
            while let Some(header) = h {
                if !joined.is_empty() {
                    joined.extend_from_slice(b", ");
                }
                joined.extend_from_slice(header.value.as_bytes());
                // SAFETY: as above.
                h = unsafe { header.next.as_ref() };
            }
            return Cow::Owned(joined);
        }
        Cow::Borrowed(first.value.as_bytes())
    }

    fn core_loc_conf(&self) -> &ngx_http_core_loc_conf_t {
        // SAFETY: a live request's loc_conf has a slot for every http module's ctx_index ...
        let slot = unsafe { self.as_ref().loc_conf.add(crate::base::core_ctx_index()) };
        // SAFETY: ... and the core module's holds its location conf ...
        let clcf = unsafe { *slot } as *const ngx_http_core_loc_conf_t;
        // SAFETY: ... which lives in the cycle's pool, longer than the request.
        unsafe { &*clcf }
    }

    fn limit_statuses(&self) -> (u32, u32) {
        // SAFETY: a live request's main request is live (it outlives its subrequests).
        let main = unsafe { &*self.as_ref().main };
        (main.limit_req_status(), main.limit_conn_status())
    }

    fn variable_named(&self, name: &'static str) -> Option<&[u8]> {
        let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
        // SAFETY: nginx only reads the name's len bytes.
        let key = unsafe { ngx_hash_key(n.data, n.len) };
        // SAFETY: as above; the value it returns is null or lives in the request's pool or
        // its variables.
        let v = unsafe { ngx_http_get_variable(self.ptr(), &mut n, key) };
        // SAFETY: as above.
        value_bytes(unsafe { v.as_ref() })
    }

    fn indexed_variable_set(&self, index: ngx_uint_t) -> bool {
        // SAFETY: the index was taken at configuration time for this http block; the value is
        // null or lives in the request's variables.
        let v = unsafe { ngx_http_get_indexed_variable(self.ptr(), index) };
        // SAFETY: as above.
        value_bytes(unsafe { v.as_ref() }).is_some_and(|b| !b.is_empty())
    }

    fn indexed_variable(&self, index: ngx_uint_t) -> Option<&[u8]> {
        // SAFETY: the index was taken at configuration time for this http block; the value is
        // null or lives in the request's pool or variables.
        let v = unsafe { ngx_http_get_indexed_variable(self.ptr(), index) };
        // SAFETY: as above.
        value_bytes(unsafe { v.as_ref() })
    }

    fn pool_join(&self, pieces: &[&[u8]]) -> Option<&[u8]> {
        let len = pieces.iter().map(|p| p.len()).sum();
        // SAFETY: the request's pool is live as long as the request.
        let data = unsafe { ngx::ffi::ngx_pnalloc(self.as_ref().pool, len) } as *mut u8;
        if data.is_null() {
            return None;
        }
        let mut at = 0;
        for piece in pieces {
            // SAFETY: the allocation has room for len bytes, the sum of the pieces' lengths,
            // and does not overlap them.
            unsafe { std::ptr::copy_nonoverlapping(piece.as_ptr(), data.wrapping_add(at), piece.len()) };
            at += piece.len();
        }
        // SAFETY: as above; the len bytes were just written, and live as long as the request.
        Some(unsafe { std::slice::from_raw_parts(data, len) })
    }

    fn add_cleanup(&self) -> Option<Cleanup> {
        // SAFETY: the request's pool is live as long as the request.
        NonNull::new(unsafe { ngx::ffi::ngx_pool_cleanup_add(self.as_ref().pool, 0) }).map(Cleanup)
    }

    fn pool_alloc(&self, size: usize) -> Option<NonNull<c_void>> {
        // SAFETY: the request's pool is live as long as the request; ngx_palloc aligns to
        // NGX_ALIGNMENT (the word).
        NonNull::new(unsafe { ngx::ffi::ngx_palloc(self.as_ref().pool, size) })
    }

    fn variable_slot(&self, index: usize) -> *mut ngx_variable_value_t {
        // nginx allocates a request's variables (a subrequest takes its parent's) with a slot
        // for each indexed variable of the http block
        self.as_ref().variables.wrapping_add(index)
    }

    fn module_ctx_slot(&self) -> *mut *mut c_void {
        // SAFETY: a live request's ctx array has a slot for every http module's ctx_index.
        unsafe { self.as_ref().ctx.add(crate::module().ctx_index) }
    }
}

/// A cleanup entry of a request's pool, as nginx made it: no handler yet.
pub struct Cleanup(NonNull<ngx_pool_cleanup_t>);

impl Cleanup {
    /// Run `handler` with `data` when the pool goes. The entry, for a caller that may run
    /// it earlier (emptying its handler first).
    pub fn set_with(mut self, handler: ngx_pool_cleanup_pt, data: *mut c_void) -> *mut ngx_pool_cleanup_t {
        // SAFETY: an entry of a live request's pool, which nginx runs only when the pool
        // goes; the entry is this one's alone until it is set.
        let entry = unsafe { self.0.as_mut() };
        entry.handler = handler;
        entry.data = data;
        self.0.as_ptr()
    }
}

/// A variable's bytes, when it has a value.
fn value_bytes(v: Option<&ngx_variable_value_t>) -> Option<&[u8]> {
    let v = v.filter(|v| v.valid() != 0 && v.not_found() == 0)?;
    if v.len() == 0 || v.data.is_null() {
        return Some(&[]);
    }
    // SAFETY: a valid value's data holds len bytes, in the request's pool or its variables.
    Some(unsafe { std::slice::from_raw_parts(v.data, v.len() as usize) })
}

/// Our confs for a request: they live in the cycle's pool, and so longer than
/// the request, which is why their lifetime is not tied to it.
///
/// # Safety
/// `r` must be a live request of an http block where this module is loaded,
/// and the confs must not be kept past the cycle.
pub unsafe fn confs<'a>(r: &Request) -> (&'a MainConf, &'a LocConf) {
    let i = crate::module().ctx_index;
    let r = r.as_ref();
    // SAFETY: per the contract, main_conf has a slot at our ctx_index ...
    let main = unsafe { r.main_conf.add(i) };
    // SAFETY: ... as has loc_conf ...
    let loc = unsafe { r.loc_conf.add(i) };
    // SAFETY: ... which hold the conf that create_main_conf made ...
    let main = unsafe { *main } as *const MainConf;
    // SAFETY: ... and the one that create_loc_conf made (and merge_loc_conf merged) ...
    let loc = unsafe { *loc } as *const LocConf;
    // SAFETY: ... both in the cycle's pool, which outlives the cycle's requests.
    let main = unsafe { &*main };
    // SAFETY: as above.
    (main, unsafe { &*loc })
}
