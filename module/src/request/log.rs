//! The log phase: what each crawler got. Counts the response to every request
//! where `crawlward` is on, by agent, verdict and status class, in the
//! counters zone, and the request itself where its client left while it
//! waited for its DNS verdict (the preaccess phase counts the others it
//! decides); warns when a verified search crawler gets a 429 or a 5xx
//! (Google's crawler documentation: Google slows down the whole host when it sees them), once a
//! minute per agent for all workers, naming the layer that refused it. Adds
//! each response's upstream time to its agent and its time group (the
//! crawlers' share of server time over the last 15 minutes), and counts
//! refusals by what refused them (`$crawlward_refusal`).

use crate::conf::{add_phase_handler, main_conf_of_cf, LocConf, MainConf};
use crate::request::ext::{confs, RequestExt};
use crate::request::{facts, identify, Identified, Limited};
use crawlward_policy::layers::Refused;
use crawlward_policy::responses::{Layer, Met, StatusClass};
use crawlward_policy::{Action, Purpose, Verdict};
use ngx::ffi::{ngx_conf_t, ngx_http_phases_NGX_HTTP_LOG_PHASE, ngx_http_request_t, ngx_int_t, NGX_ERROR, NGX_LOG_WARN, NGX_OK};
use ngx::http::Request;
use ngx::ngx_log_error;

/// Registers the log-phase handler, when there is a counters zone to count in.
///
/// # Safety
/// `cf` must be the configuration in postconfiguration, with `cf->ctx` the http conf ctx.
pub unsafe fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: per the contract.
    let mcf = unsafe { main_conf_of_cf(cf) };
    if mcf.counters.is_none() && !(mcf.ladder.is_some() && mcf.signed_in_given) {
        return NGX_OK as ngx_int_t;
    }
    // SAFETY: per the contract.
    match unsafe { add_phase_handler(cf, ngx_http_phases_NGX_HTTP_LOG_PHASE, Some(log_handler)) } {
        Ok(()) => NGX_OK as ngx_int_t,
        Err(()) => NGX_ERROR as ngx_int_t,
    }
}

unsafe extern "C" fn log_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(NGX_OK as ngx_int_t, || {
        // SAFETY: nginx runs log-phase handlers with a live request of this http block.
        let r = unsafe { Request::from_ngx_http_request(r) };
        // a subrequest (log_subrequest on) shares its main request's decision: placed and
        // counted once, in the main request's log phase
        if r.is_main_request() {
            // SAFETY: a live request of this http block; the confs are not kept.
            let (mcf, lcf) = unsafe { confs(r) };
            if mcf.ladder.is_some() {
                place_deferred(r, mcf, lcf);
            }
            log_response(r, mcf, lcf);
        }
        NGX_OK as ngx_int_t
    })
}

/// A request whose location leaves the ladder to the precontent phase
/// (`crawlward_budget_signed_in`) and that was answered before it (a 401 or
/// 403 of the access phase, a `limit_req` refusal): counted in its client's
/// window now, so that failed sign-ins and refused traffic still shape the
/// client's rung, as they did when the ladder ran before them. Not the final
/// location's `crawlward`: an error_page may have taken the request to a
/// location where it is off, and `deferred` says it was on where the
/// request was decided.
fn place_deferred(r: &Request, mcf: &MainConf, lcf: &LocConf) {
    let Some(st) = crate::request::state(r) else { return };
    // SAFETY: the state lives in the request's pool; the handler holds no other reference
    // to it, and keeps none.
    let st = unsafe { &mut *st };
    if !st.deferred || st.ladder.is_some() {
        return;
    }
    st.ladder = crate::request::ladder::place_as(r, mcf, lcf, &st.id, st.door, crate::request::ladder::Acting::CountOnly);
}

fn log_response(r: &Request, mcf: &MainConf, lcf: &LocConf) {
    let Some(counters) = mcf.counters() else { return };
    if lcf.enabled != 1 {
        return;
    }
    // the state, read in place; identified here if nothing asked before: a request
    // answered before the access phase (a `return`, a rewrite's redirect, a limit_req
    // or limit_conn refusal)
    let (fresh, none);
    // SAFETY: the handler holds no other reference to the state, and keeps none.
    let mut st = unsafe { facts(r) };
    if let Some(st) = st.as_deref_mut().filter(|st| st.waiting) {
        // a client that left while the request waited for its DNS verdict (here, after
        // the check of `crawlward on`: a request waiting in the preaccess phase has not
        // moved to another location, and a 499 is answered by no error_page)
        crate::request::count_once(st, counters);
    }
    let (id, found): (&Identified, &Limited) = match st.as_deref() {
        Some(st) => (&st.id, &st.limited),
        None => {
            let Some(id) = identify(r) else { return };
            (fresh, none) = (id, Limited::default());
            (&fresh, &none)
        }
    };
    let status = r.response_status();
    let class = StatusClass::of(status);
    let agent = id.agent.and_then(|i| mcf.identity.as_ref()?.catalogue.agents().get(i));
    let verified_search = id.verdict == Verdict::Verified && agent.is_some_and(|a| a.purpose == Purpose::Search);
    let now = crate::base::now_ms() as u64 / 1000;
    if let Some(ms) = r.upstream_ms() {
        let group = crawlward_policy::responses::time_group(agent.map(|a| a.purpose), id.verdict);
        counters.upstream(id.agent, group, id.verdict.is_crawler(), ms, crate::base::wall_ms() / 1000);
    }
    // refusals by what refused them, as `$crawlward_refusal` says it (none: the site's own)
    if Refused::may_answer(status) {
        counters.refused_by(st.as_deref().and_then(|st| crate::request::variables::refusal(r, st).0));
    }
    if counters.respond(id.agent, id.verdict, class, verified_search, now) {
        let name = agent.map_or("-", |a| a.name.as_str());
        let layer = Layer::of(&met(r, id, found, lcf.dry_run == 1));
        ngx_log_error!(NGX_LOG_WARN, r.log(), "crawlward: verified search crawler \"{name}\" got {status} from {layer}");
    }
}

/// What the request met: the module's findings, and nginx's limits by their
/// variables, looked up by name on the rare path of a warning (a variable that
/// nginx was built without is not found, and no index is taken at
/// configuration time for it).
fn met(r: &Request, id: &Identified, found: &Limited, dry_run: bool) -> Met {
    let rejected = |name| r.variable_named(name) == Some(&b"REJECTED"[..]);
    Met {
        limit_req_rejected: rejected("limit_req_status"),
        limit_conn_rejected: found.browse_cap || rejected("limit_conn_status"),
        blocked: matches!(id.action, Action::Block(_)),
        facet: found.facet.and_then(|f| f.rule),
        budget: found.budget,
        signature: found.signature.is_some(),
        ladder: found.ladder,
        dry_run,
    }
}
