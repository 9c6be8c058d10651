//! The header filter: `Retry-After` on the refusals that nginx's limits and
//! the maintenance block answer (a rate class's 429, the browse cap's 503,
//! maintenance's 503), from the policy's values in the catalogue file's
//! `layers`. A policy rendered for stock nginx does the same with
//! `add_header Retry-After $crawlward_retry_after always`; with the module,
//! the decision is the module's and costs nothing on other responses. The
//! module's own 429s (the facet guard's, the budgets') carry theirs already.

use crate::base::HeaderName;
use crate::request::ext::{confs, RequestExt};
use crate::request::facts;
use ngx::ffi::{ngx_conf_t, ngx_http_output_header_filter_pt, ngx_http_request_t, ngx_http_top_header_filter, ngx_int_t, NGX_ERROR, NGX_OK};
use ngx::http::Request;
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
    let top = unsafe { ngx_http_top_header_filter };
    let next = addr_of_mut!(NEXT);
    // SAFETY: as above.
    unsafe { *next = top };
    // SAFETY: as above.
    unsafe { ngx_http_top_header_filter = Some(header_filter) };
    NGX_OK as ngx_int_t
}

unsafe extern "C" fn header_filter(r: *mut ngx_http_request_t) -> ngx_int_t {
    // SAFETY: nginx runs header filters for live requests of this http block.
    let req = unsafe { Request::from_ngx_http_request(r) };
    // only a 429 or a 503 of a main request can be such a refusal: every other response
    // goes on at once, without the guard's set-up
    let status = req.response_status();
    if matches!(status, 429 | 503) && req.is_main_request() {
        add_retry_after(req);
    }
    if matches!(status, 403 | 429) && req.is_main_request() {
        add_accept_signature(req);
    }
    // SAFETY: a live request of this http block; the confs are not kept.
    if !unsafe { confs(req) }.0.tiers.is_empty() && req.is_main_request() {
        add_rate_limit(req);
    }
    // a page answered to a client the ladder tracks without a valid cookie, or the ladder's
    // own refusal of one: the cookie
    if ((200..400).contains(&status) || matches!(status, 403 | 429)) && req.is_main_request() {
        // SAFETY: a live request of this http block; the confs are not kept.
        if unsafe { confs(req) }.0.ladder.is_some() {
            add_session_cookie(req, (200..400).contains(&status));
        }
    }
    // SAFETY: NEXT was set at configuration and is only read since.
    let next = addr_of_mut!(NEXT);
    // SAFETY: as above.
    match unsafe { *next } {
        // SAFETY: the next filter of nginx's chain, for this request.
        Some(next) => unsafe { next(r) },
        None => NGX_ERROR as ngx_int_t,
    }
}

/// Out of the filter's line, so that every other response pays nothing for it.
#[cold]
#[inline(never)]
fn add_retry_after(r: &mut Request) {
    crate::base::guard((), || retry_after_of_refusal(r))
}

fn retry_after_of_refusal(r: &mut Request) {
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, lcf) = unsafe { confs(r) };
    let Some(layers) = mcf.identity.as_ref().and_then(|i| i.layers.as_ref()).filter(|_| lcf.enabled == 1) else { return };
    // identified now if nothing asked before (maintenance answers in the rewrite phase)
    // SAFETY: the filter holds no other reference to the state, and keeps none.
    let Some(st) = (unsafe { facts(r) }) else { return };
    if let (Some(why), _) = crate::request::variables::refusal(r, st) {
        if let Some(secs) = layers.retry_after(why) {
            retry_after(r, secs as u64);
        }
    }
}

/// A request refused for its signature: what the signer is asked for
/// (RFC 9421 section 5.1), also on an `error_page` that answers the refusal.
#[cold]
#[inline(never)]
fn add_accept_signature(r: &mut Request) {
    crate::base::guard((), || {
        let Some(st) = crate::request::state(r) else { return };
        // SAFETY: the state lives in the request's pool; only a flag is copied.
        if unsafe { (*st).limited.signature }.is_some() {
            add_header(r, "Accept-Signature", "accept-signature", &[crawlward_policy::signature::ACCEPT_SIGNATURE.as_bytes()]);
        }
    })
}

/// A metered request: where its account stands (draft-ietf-httpapi-ratelimit-headers),
/// and on the quota's 429, when to come back.
#[cold]
#[inline(never)]
fn add_rate_limit(r: &mut Request) {
    crate::base::guard((), || {
        let Some(st) = crate::request::state(r) else { return };
        // SAFETY: the state lives in the request's pool, as long as the request; nothing
        // else refers to it while the headers are added.
        let Some(m) = (unsafe { (*st).quota.as_ref() }) else { return };
        let s = &m.standing;
        let mut field = [0u8; crawlward_policy::quota::FIELD_MAX];
        // SAFETY: a live request of this http block; the confs are not kept.
        let (mcf, _) = unsafe { confs(r) };
        let tier = m.tier as usize;
        match (mcf.tiers.get(tier), mcf.tier_policy_fields.get(tier)) {
            // SAFETY: the configuration's field outlives every request of its cycle.
            (Some(t), Some(policy)) if t.policy_holds(s) => unsafe { push_header(r, "RateLimit-Policy", "ratelimit-policy", as_ngx_str(policy)) },
            _ => {
                let n = crawlward_policy::quota::policy_field_into(s, &mut field);
                add_header(r, "RateLimit-Policy", "ratelimit-policy", &[&field[..n]]);
            }
        }
        let n = crawlward_policy::quota::remaining_field_into(s, &mut field);
        add_header(r, "RateLimit", "ratelimit", &[&field[..n]]);
        if let Some(refused) = s.refused.filter(|_| m.refused && r.response_status() == 429) {
            retry_after(r, refused.retry_after_s);
        }
    })
}

#[cold]
#[inline(never)]
fn add_session_cookie(r: &mut Request, page: bool) {
    crate::base::guard((), || {
        let Some(st) = crate::request::state(r) else { return };
        // SAFETY: the state lives in the request's pool; only its ladder placement is copied.
        let Some(p) = (unsafe { (*st).ladder }).filter(|p| p.issue != 0 && (page || p.refused)) else { return };
        // SAFETY: a live request of this http block; the confs are not kept.
        let (mcf, _) = unsafe { confs(r) };
        let Some((run, _)) = mcf.ladder() else { return };
        let (Some(c), Some(keys)) = (run.live.cookie.as_ref(), run.keys.as_ref()) else { return };
        let value = keys.issue_into(p.issue, crate::base::wall_ms() / 1000);
        let mut max_age = [0u8; 20];
        add_header(r, "Set-Cookie", "set-cookie", &crawlward_policy::ladder::set_cookie_parts(c, &value, &mut max_age));
        // one client's cookie is for no one else: no shared cache (a CDN) may keep this
        // answer and give it out. A field of its own, which nginx's expires and add_header
        // leave alone, and which wins over a `public` they or the application write (a
        // cache that finds `private` in any Cache-Control line does not store the answer)
        add_header(r, "Cache-Control", "cache-control", &[b"private"]);
        keep_out_of_shared_caches(r);
    })
}

/// A CDN reads a field of its own before Cache-Control: RFC 9213's
/// `CDN-Cache-Control`, a CDN's `<Name>-CDN-Cache-Control` or `<Name>-Cache-Control`,
/// and the Edge Architecture's `Surrogate-Control`, whose `max-age` from the
/// application would let it keep one client's cookie. The answer that sets the
/// cookie says `private` (`no-store` to a surrogate) in a line of each such field
/// the application sent, and in `CDN-Cache-Control` and `Surrogate-Control`
/// always, so that one `add_header` writes after this filter combines with ours.
fn keep_out_of_shared_caches(r: &mut Request) {
    let mut targeted: Vec<Vec<u8>> = Vec::new();
    // SAFETY: the response's header list, in the request's pool; nothing is pushed to it
    // while this reads it, and what it reads is copied.
    for h in unsafe { response_headers(r) } {
        let name = h.key.as_bytes();
        let lower = name.to_ascii_lowercase();
        let standard = lower == b"cdn-cache-control" || lower == b"surrogate-control";
        if h.hash != 0 && lower.ends_with(b"-cache-control") && !standard && !targeted.iter().any(|t| t.eq_ignore_ascii_case(name)) {
            targeted.push(name.to_vec());
        }
    }
    add_header(r, "CDN-Cache-Control", "cdn-cache-control", &[b"private"]);
    add_header(r, "Surrogate-Control", "surrogate-control", &[b"no-store"]);
    for name in targeted {
        let (Some(key), Some(lowcase)) = (r.pool_copy(&name).map(as_ngx_str), r.pool_copy(&name.to_ascii_lowercase()).map(|l| l.as_ptr())) else { return };
        // SAFETY: the key, its lower case and the static value outlive the request.
        unsafe { push_named_header(r, key, lowcase as *mut u8, as_ngx_str(b"private")) }
    }
}

/// The response's headers so far.
///
/// # Safety
/// Nothing may push to the response's header list while the iterator is used.
unsafe fn response_headers(r: &Request) -> impl Iterator<Item = &ngx::ffi::ngx_table_elt_t> {
    let mut part: *const ngx::ffi::ngx_list_part_t = &r.as_ref().headers_out.headers.part;
    std::iter::from_fn(move || {
        // SAFETY: a part of the response's header list, from its first, and not null; it
        // lives in the request's pool, as does its `next`.
        let p = unsafe { part.as_ref() }?;
        part = p.next;
        if p.nelts == 0 || p.elts.is_null() {
            return Some(&[][..]);
        }
        // SAFETY: a part holds `nelts` initialized headers at `elts`.
        Some(unsafe { std::slice::from_raw_parts(p.elts as *const ngx::ffi::ngx_table_elt_t, p.nelts) })
    })
    .flatten()
}

/// Add `Retry-After: secs` to the response headers (kept on nginx's own error pages).
pub fn retry_after(r: &mut Request, secs: u64) {
    add_header(r, "Retry-After", "retry-after", &[secs.to_string().as_bytes()]);
}

/// Add a header to the response (`key` and its lower case are static); its value is the
/// pieces joined in the request's pool. Nothing is added if the pool is out of memory.
fn add_header(r: &mut Request, key: &'static str, lowcase_key: &'static str, value: &[&[u8]]) {
    let Some(value) = r.pool_join(value).map(as_ngx_str) else { return };
    // SAFETY: the value was just copied into the request's pool.
    unsafe { push_header(r, key, lowcase_key, value) }
}

fn as_ngx_str(v: &[u8]) -> ngx::ffi::ngx_str_t {
    ngx::ffi::ngx_str_t { len: v.len(), data: v.as_ptr() as *mut u8 }
}

/// Add a header whose value is not copied.
///
/// # Safety
/// `value` outlives the request: the configuration's memory, or the request's pool.
unsafe fn push_header(r: &mut Request, key: &'static str, lowcase_key: &'static str, value: ngx::ffi::ngx_str_t) {
    let key = ngx::ffi::ngx_str_t { len: key.len(), data: key.as_ptr() as *mut u8 };
    // SAFETY: the static key and its lower case outlive the request; the value per the contract.
    unsafe { push_named_header(r, key, lowcase_key.as_ptr() as *mut u8, value) }
}

/// Add a header of any name whose key, lower-case key (as long as the key) and
/// value are not copied.
///
/// # Safety
/// All three outlive the request: static, the configuration's memory, or the request's pool.
unsafe fn push_named_header(r: &mut Request, key: ngx::ffi::ngx_str_t, lowcase_key: *mut u8, value: ngx::ffi::ngx_str_t) {
    // SAFETY: the response's header list is the request's; pushing returns room for one
    // header in the request's pool, or null.
    let h = unsafe { ngx::ffi::ngx_list_push(&mut r.as_mut().headers_out.headers) } as *mut ngx::ffi::ngx_table_elt_t;
    if h.is_null() {
        return;
    }
    // SAFETY: the header is integers, strings and pointers, for which all zero is valid
    // (next, from nginx 1.23, is then null: no header of the same name follows).
    let mut header: ngx::ffi::ngx_table_elt_t = unsafe { std::mem::zeroed() };
    header.hash = 1;
    header.key = key;
    // nginx reads the lower-case key by its length, the key's
    header.lowcase_key = lowcase_key;
    header.value = value;
    // SAFETY: h is the room nginx just gave for one header (uninitialized, so written whole).
    unsafe { h.write(header) };
}

/// Whether a header the client sent has `lowcase_key`'s name as an
/// application may read it: case aside, and any byte but a letter or a digit
/// for a `-` of the name (FastCGI, uwsgi and SCGI pass `_` on as the `-` of
/// another name, and PHP reads `.` and `[` in a name as `_`; the name itself
/// is letters, digits and `-`).
fn same_name(key: &[u8], lowcase_key: &[u8]) -> bool {
    key.len() == lowcase_key.len()
        && key.iter().zip(lowcase_key).all(|(k, l)| if *l == b'-' { !k.is_ascii_alphanumeric() } else { k.to_ascii_lowercase() == *l })
}

/// Set a request header that the application will hear (`proxy_pass`,
/// `fastcgi_pass` and the other upstream modules pass the request's headers
/// on) in place of what the client sent under its name.
///
/// - With `value`: the first header of the name (the client's, or one set
///   before) takes the name as configured and `value`; with none, it is added.
/// - Without (None): a header set before, under the name's own memory, is
///   kept; the client's first copy takes the name and an empty value.
///
/// Any other copy is renamed `Crawlward-Ignored` and emptied: the application
/// hears one value, never the client's nor a joined "L1, L0". Nothing is
/// added if the request's pool is out of memory. Whether the request had a
/// header of the name.
///
/// # Safety
/// `name` and `value` outlive the request: the configuration's memory, or static.
pub unsafe fn set_request_header(r: &mut Request, name: &HeaderName, value: Option<&'static str>) -> bool {
    const IGNORED: &str = "Crawlward-Ignored";
    const IGNORED_LOWCASE: &[u8] = b"crawlward-ignored";
    // as nginx hashes a name: a proxy_set_header Crawlward-Ignored replaces it
    const IGNORED_HASH: usize = crate::base::hash_key(IGNORED_LOWCASE);
    let ours = as_ngx_str(value.unwrap_or_default().as_bytes());
    let mut found = false;
    let mut part: *mut ngx::ffi::ngx_list_part_t = &mut r.as_mut().headers_in.headers.part;
    while !part.is_null() {
        // SAFETY: a part of the request's header list, from its first, and not null.
        let ngx::ffi::ngx_list_part_t { elts, nelts, next } = unsafe { *part };
        part = next;
        if nelts == 0 || elts.is_null() {
            continue;
        }
        // SAFETY: a part holds `nelts` initialized headers at `elts`; nothing else holds
        // a reference to them while the handler runs.
        let headers = unsafe { std::slice::from_raw_parts_mut(elts as *mut ngx::ffi::ngx_table_elt_t, nelts) };
        for h in headers {
            if h.key.len == 0 || h.key.data.is_null() {
                continue;
            }
            let set_before = std::ptr::eq(h.key.data, name.key.as_ptr());
            if value.is_none() && set_before {
                // the ladder's own value, set on an earlier pass of the phase
                found = true;
                continue;
            }
            // SAFETY: a header's key is `len` bytes in the request's memory.
            let key = unsafe { std::slice::from_raw_parts(h.key.data, h.key.len) };
            if !set_before && !same_name(key, &name.lowcase_key) {
                continue;
            }
            if found {
                h.key = as_ngx_str(IGNORED.as_bytes());
                h.lowcase_key = IGNORED_LOWCASE.as_ptr() as *mut u8;
                h.hash = IGNORED_HASH;
                h.value = as_ngx_str(b"");
            } else {
                // under the name as configured: `crawlward_rung` would reach a proxied
                // application as another header than the one it reads
                h.key = as_ngx_str(name.key.as_bytes());
                h.lowcase_key = name.lowcase_key.as_ptr() as *mut u8;
                h.hash = name.hash;
                h.value = ours;
                found = true;
            }
        }
    }
    if let (false, Some(value)) = (found, value) {
        // SAFETY: per the contract.
        unsafe { add_request_header(r, name, value) };
    }
    found
}

/// Add a request header that the application will hear, for a request that
/// has none of the name ([`set_request_header`] said so).
///
/// # Safety
/// `name` and `value` outlive the request: the configuration's memory, or static.
pub unsafe fn add_request_header(r: &mut Request, name: &HeaderName, value: &'static str) {
    // nginx sets the list up only after a request line of HTTP/1.0 or later: an
    // HTTP/0.9 request, or a bad request line's error page, has none to push to
    if r.as_ref().headers_in.headers.last.is_null() {
        return;
    }
    // SAFETY: the request's header list; pushing returns room for one header in the
    // request's pool, or null.
    let h = unsafe { ngx::ffi::ngx_list_push(&mut r.as_mut().headers_in.headers) } as *mut ngx::ffi::ngx_table_elt_t;
    if h.is_null() {
        return;
    }
    // SAFETY: the header is integers, strings and pointers, for which all zero is valid
    // (next, from nginx 1.23, is then null: no header of the same name follows).
    let mut header: ngx::ffi::ngx_table_elt_t = unsafe { std::mem::zeroed() };
    // the lower case's hash: an upstream's proxy_set_header of the same name replaces it
    header.hash = name.hash;
    header.key = as_ngx_str(name.key.as_bytes());
    header.lowcase_key = name.lowcase_key.as_ptr() as *mut u8;
    header.value = as_ngx_str(value.as_bytes());
    // SAFETY: h is the room nginx just gave for one header (uninitialized, so written whole).
    unsafe { h.write(header) };
}
