//! The access-phase handler and the per-request identification it shares
//! with the variables.

use crate::conf::{LocConf, MainConf};
use crawlward_policy::{Action, Verdict};
use ngx::ffi::{
    ngx_array_push, ngx_conf_t, ngx_http_conf_ctx_t, ngx_http_core_main_conf_t, ngx_http_core_module, ngx_http_handler_pt,
    ngx_http_phases_NGX_HTTP_ACCESS_PHASE, ngx_http_request_t, ngx_int_t, ngx_pool_cleanup_add, NGX_DECLINED, NGX_ERROR,
    NGX_HTTP_CLOSE, NGX_HTTP_FORBIDDEN, NGX_LOG_EMERG, NGX_LOG_INFO, NGX_OK,
};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::borrow::Cow;
use std::ffi::c_void;

/// What the module decided about one request.
#[derive(Clone, Copy)]
pub struct Identified {
    /// Index of the agent in the catalogue.
    pub agent: Option<usize>,
    pub verdict: Verdict,
    pub action: Action,
}

pub unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    crate::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: postconfiguration runs with cf->ctx the http conf ctx.
        let mcf = unsafe { crate::conf::main_conf_of_cf(cf) };
        if mcf.has_status && mcf.zone.is_null() {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_status\" needs a \"crawlward_zone\" at the http level");
            return NGX_ERROR as ngx_int_t;
        }
        // SAFETY: the core module's main conf is at its ctx_index in the http ctx; the phase
        // arrays exist by postconfiguration, and pushing returns room for one handler or null.
        unsafe {
            let ctx = (*cf).ctx as *mut ngx_http_conf_ctx_t;
            let cmcf = *(*ctx).main_conf.add(ngx_http_core_module.ctx_index) as *mut ngx_http_core_main_conf_t;
            let h = ngx_array_push(&mut (*cmcf).phases[ngx_http_phases_NGX_HTTP_ACCESS_PHASE as usize].handlers) as *mut ngx_http_handler_pt;
            if h.is_null() {
                return NGX_ERROR as ngx_int_t;
            }
            *h = Some(access_handler);
        }
        NGX_OK as ngx_int_t
    })
}

/// Our confs for a request.
///
/// # Safety
/// `r` must be a live request of an http block where this module is loaded.
pub unsafe fn confs<'a>(r: *mut ngx_http_request_t) -> (&'a MainConf, &'a LocConf) {
    // SAFETY: per the contract, main_conf and loc_conf hold our confs at our ctx_index.
    unsafe {
        let i = crate::module().ctx_index;
        (&*(*(*r).main_conf.add(i) as *const MainConf), &*(*(*r).loc_conf.add(i) as *const LocConf))
    }
}

/// The User-Agent as `$http_user_agent` holds it: repeated headers joined with ", " (nginx 1.23+).
///
/// # Safety
/// `r` must be a live request.
unsafe fn user_agent<'a>(r: *mut ngx_http_request_t) -> Cow<'a, [u8]> {
    // SAFETY: headers_in.user_agent is null or points at a header kept for the request's life.
    unsafe {
        let h = (*r).headers_in.user_agent;
        if h.is_null() {
            return Cow::Borrowed(&[]);
        }
        let first = (*h).value.as_bytes();
        #[cfg(nginx1_23_0)]
        if !(*h).next.is_null() {
            let mut joined = Vec::with_capacity(first.len() * 2);
            let mut h = h;
            while !h.is_null() {
                if !joined.is_empty() {
                    joined.extend_from_slice(b", ");
                }
                joined.extend_from_slice((*h).value.as_bytes());
                h = (*h).next;
            }
            return Cow::Owned(joined);
        }
        Cow::Borrowed(first)
    }
}

// Pool memory is aligned to 8 bytes.
const _: () = assert!(std::mem::align_of::<RequestState>() <= 8);

/// What the module decided for a request, and whether it was counted.
///
/// It lives in a pool cleanup entry, found again by the entry's handler: unlike
/// the module ctx, which nginx clears on an internal redirect (try_files to a
/// front controller, error_page), the pool's cleanups last as long as the
/// request. So the request is decided once, on the URI the client asked for,
/// and counted once, however often the access phase runs; a subrequest shares
/// its main request's pool and so its decision.
#[repr(C)]
struct RequestState {
    id: Identified,
    counted: bool,
}

/// Marks our cleanup entry. It does nothing: the state is plain data in the
/// request's pool. Compared by the value stored here, which is the one we set.
static STATE_MARK: unsafe extern "C" fn(*mut c_void) = keep_state;

unsafe extern "C" fn keep_state(_data: *mut c_void) {}

/// # Safety
/// `r` must be a live request.
unsafe fn state(r: *mut ngx_http_request_t) -> Option<*mut RequestState> {
    // SAFETY: per the contract; the ctx slot and the pool's cleanup list are valid for the
    // request's life, and an entry with our handler always carries a RequestState.
    unsafe {
        let slot = (*r).ctx.add(crate::module().ctx_index);
        if !(*slot).is_null() {
            return Some(*slot as *mut RequestState);
        }
        let mut c = (*(*r).pool).cleanup;
        while !c.is_null() {
            if (*c).handler.map(|h| h as usize) == Some(STATE_MARK as usize) {
                *slot = (*c).data;
                return Some((*c).data as *mut RequestState);
            }
            c = (*c).next;
        }
        None
    }
}

/// Identify the request once; variables and the access handler both call this,
/// in whatever order nginx evaluates them. None without a catalogue.
///
/// # Safety
/// `r` must be a live request.
pub unsafe fn identify(r: *mut ngx_http_request_t) -> Option<Identified> {
    // SAFETY: per the contract.
    unsafe {
        if let Some(st) = state(r) {
            return Some((*st).id);
        }
        let (mcf, _) = confs(r);
        let identity = mcf.identity.as_ref()?;
        let ua = user_agent(r);
        let classify = |u: &[u8]| identity.catalogue.classify_index(u);
        let agent_index = match mcf.ua_cache.try_borrow_mut() {
            Ok(mut cache) => cache.get_or_insert_with(Default::default).get_or_classify(&ua, classify),
            Err(_) => classify(&ua),
        };
        let agent = agent_index.map(|i| &identity.catalogue.agents()[i]);
        let ip = crate::net::client_ip(&*(*r).connection).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let verdict = identity.verdict(&ua, agent, ip);
        let door = identity.door((*r).uri.as_bytes());
        let action = identity.ua_action(door, agent.map(|a| a.purpose), verdict);
        let id = Identified { agent: agent_index, verdict, action };
        let c = ngx_pool_cleanup_add((*r).pool, std::mem::size_of::<RequestState>());
        if !c.is_null() {
            let st = (*c).data as *mut RequestState;
            st.write(RequestState { id, counted: false });
            (*c).handler = Some(STATE_MARK);
            *(*r).ctx.add(crate::module().ctx_index) = st as *mut c_void;
        }
        Some(id)
    }
}

/// Whether this is the first time the request is counted (and mark it counted).
///
/// # Safety
/// `r` must be a live request that `identify` has seen.
unsafe fn first_count(r: *mut ngx_http_request_t) -> bool {
    // SAFETY: per the contract.
    unsafe {
        match state(r) {
            Some(st) if !(*st).counted => {
                (*st).counted = true;
                true
            }
            _ => false,
        }
    }
}

unsafe extern "C" fn access_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::guard(NGX_DECLINED as ngx_int_t, || {
        // SAFETY: nginx calls phase handlers with a live request of this http block.
        unsafe {
            let (mcf, lcf) = confs(r);
            if lcf.enabled != 1 {
                return NGX_DECLINED as ngx_int_t;
            }
            let Some(id) = identify(r) else { return NGX_DECLINED as ngx_int_t };
            if let Some(counters) = &mcf.counters {
                if first_count(r) {
                    counters.count(id.agent, id.verdict, id.action);
                }
            }
            let Action::Block(status) = id.action else { return NGX_DECLINED as ngx_int_t };
            let name = id.agent.and_then(|i| mcf.identity.as_ref().map(|x| x.catalogue.agents()[i].name.as_str())).unwrap_or("-");
            let log = (*(*r).connection).log;
            if lcf.dry_run == 1 {
                ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dry run, would refuse with {status}: agent \"{name}\", verdict {}", id.verdict);
                return NGX_DECLINED as ngx_int_t;
            }
            ngx_log_error!(NGX_LOG_INFO, log, "crawlward: refused with {status}: agent \"{name}\", verdict {}", id.verdict);
            if status == 403 {
                NGX_HTTP_FORBIDDEN as ngx_int_t
            } else {
                NGX_HTTP_CLOSE as ngx_int_t
            }
        }
    })
}
