//! The log phase: what each crawler got. Counts the response to every request
//! where `crawlward` is on, by agent, verdict and status class, in the
//! counters zone; warns when a verified search crawler gets a 429 or a 5xx
//! (Google's crawler documentation: Google slows down the whole host when it sees them), once a
//! minute per agent for all workers, naming the layer that refused it.

use crate::conf::{confs, main_conf_of_cf};
use crate::request::{facts, identify, Identified, Limited};
use crawlward_policy::responses::{Layer, Met, StatusClass};
use crawlward_policy::{Action, Purpose, Verdict};
use ngx::ffi::{
    ngx_array_push, ngx_conf_t, ngx_hash_key, ngx_http_conf_ctx_t, ngx_http_core_main_conf_t, ngx_http_core_module, ngx_http_get_variable, ngx_http_handler_pt,
    ngx_http_phases_NGX_HTTP_LOG_PHASE, ngx_http_request_t, ngx_int_t, ngx_str_t, NGX_ERROR, NGX_LOG_WARN, NGX_OK,
};
use ngx::ngx_log_error;

/// Registers the log-phase handler, when there is a counters zone to count in.
///
/// # Safety
/// `cf` must be the configuration in postconfiguration, with `cf->ctx` the http conf ctx.
pub unsafe fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: per the contract.
    if unsafe { main_conf_of_cf(cf) }.counters.is_none() {
        return NGX_OK as ngx_int_t;
    }
    // SAFETY: per the contract: the core module's main conf is at its ctx_index in the http
    // ctx; the phase arrays exist by postconfiguration, and pushing returns room for one
    // handler or null.
    unsafe {
        let ctx = (*cf).ctx as *mut ngx_http_conf_ctx_t;
        let cmcf = *(*ctx).main_conf.add(ngx_http_core_module.ctx_index) as *mut ngx_http_core_main_conf_t;
        let h = ngx_array_push(&mut (*cmcf).phases[ngx_http_phases_NGX_HTTP_LOG_PHASE as usize].handlers) as *mut ngx_http_handler_pt;
        if h.is_null() {
            return NGX_ERROR as ngx_int_t;
        }
        *h = Some(log_handler);
    }
    NGX_OK as ngx_int_t
}

unsafe extern "C" fn log_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(NGX_OK as ngx_int_t, || {
        // SAFETY: nginx runs log-phase handlers with a live request of this http block.
        unsafe {
            // a subrequest (log_subrequest on) shares its main request's decision: count it once
            if r != (*r).main {
                return NGX_OK as ngx_int_t;
            }
            let (mcf, lcf) = confs(r);
            let Some(counters) = mcf.counters() else { return NGX_OK as ngx_int_t };
            if lcf.enabled != 1 {
                return NGX_OK as ngx_int_t;
            }
            // the state, read in place; identified here if nothing asked before: a request
            // answered before the access phase (a `return`, a rewrite's redirect, a limit_req
            // or limit_conn refusal)
            let (fresh, none);
            let (id, found): (&Identified, &Limited) = match facts(r) {
                Some(st) => (&st.id, &st.limited),
                None => {
                    let Some(id) = identify(r) else { return NGX_OK as ngx_int_t };
                    (fresh, none) = (id, Limited::default());
                    (&fresh, &none)
                }
            };
            // as $status: an error page's status, else the response's (444 for a closed connection)
            let status = if (*r).err_status != 0 { (*r).err_status } else { (*r).headers_out.status };
            let class = StatusClass::of(status);
            let agent = id.agent.and_then(|i| mcf.identity.as_ref()?.catalogue.agents().get(i));
            let verified_search = id.verdict == Verdict::Verified && agent.is_some_and(|a| a.purpose == Purpose::Search);
            let now = crate::base::now_ms() as u64 / 1000;
            if counters.respond(id.agent, id.verdict, class, verified_search, now) {
                let name = agent.map_or("-", |a| a.name.as_str());
                let layer = Layer::of(&met(r, id, found, lcf.dry_run == 1));
                let log = (*(*r).connection).log;
                ngx_log_error!(NGX_LOG_WARN, log, "crawlward: verified search crawler \"{name}\" got {status} from {layer}");
            }
            NGX_OK as ngx_int_t
        }
    })
}

/// What the request met: the module's findings, and nginx's limits by their variables.
///
/// # Safety
/// `r` must be a live request.
unsafe fn met(r: *mut ngx_http_request_t, id: &Identified, found: &Limited, dry_run: bool) -> Met {
    Met {
        // SAFETY: per the contract.
        limit_req_rejected: unsafe { variable_is(r, "limit_req_status", b"REJECTED") },
        // SAFETY: per the contract.
        limit_conn_rejected: found.browse_cap || unsafe { variable_is(r, "limit_conn_status", b"REJECTED") },
        blocked: matches!(id.action, Action::Block(_)),
        facet: found.facet.and_then(|f| f.rule),
        budget: found.budget,
        dry_run,
    }
}

/// Whether the variable `name` holds `value`. Looked up by name, on the rare path of a
/// warning: a variable that nginx was built without is not found, and no index is
/// taken at configuration time for it.
///
/// # Safety
/// `r` must be a live request.
unsafe fn variable_is(r: *mut ngx_http_request_t, name: &'static str, value: &[u8]) -> bool {
    let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
    // SAFETY: per the contract; nginx only reads the name, and the value it returns lives in
    // the request's pool.
    unsafe {
        let v = ngx_http_get_variable(r, &mut n, ngx_hash_key(n.data, n.len));
        !v.is_null() && (*v).not_found() == 0 && (*v).valid() != 0 && std::slice::from_raw_parts((*v).data, (*v).len() as usize) == value
    }
}
