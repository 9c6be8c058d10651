//! The preaccess handler: the bot-blocker's refusal, the facet guard and
//! the crawl budgets, on the request's facts ([`crate::request`]).

use crate::conf::{LocConf, MainConf};
use crate::request::dns::Phase;
use crate::request::ext::{confs, RequestExt};
use crate::request::{agent_label, facts, identify, settle, signed_in, Identified, RequestState};
use crawlward_policy::budget::{self, Claim};
use crawlward_policy::budget_table::{self, AgentRef, Counted, Scope, NAME_MAX};
use crawlward_policy::escape::escaped;
use crawlward_policy::{Action, Door};
use ngx::ffi::{ngx_http_request_t, ngx_int_t, NGX_AGAIN, NGX_DECLINED, NGX_HTTP_CLOSE, NGX_HTTP_FORBIDDEN, NGX_HTTP_SERVICE_UNAVAILABLE, NGX_LOG_INFO};
use ngx::http::Request;
use ngx::ngx_log_error;

const DECLINED: ngx_int_t = NGX_DECLINED as ngx_int_t;

/// One line per DNS check, at info: what was claimed, what DNS said, and how.
fn log_dns(r: &Request, mcf: &MainConf, id: &Identified) {
    let label = agent_label(r, mcf, id);
    let name = escaped(label.as_bytes());
    let dns = id.dns.map_or("-", |d| d.as_str());
    ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: dns {dns} ({}) for agent \"{name}\", verdict {}", id.dns_source.as_str(), id.verdict);
}

pub unsafe extern "C" fn preaccess_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(DECLINED, || {
        // SAFETY: nginx calls phase handlers with a live request of this http block.
        preaccess(unsafe { Request::from_ngx_http_request(r) })
    })
}

fn preaccess(r: &mut Request) -> ngx_int_t {
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, lcf) = unsafe { confs(r) };
    // no copy of the ladder's request header that the client wrote reaches the application,
    // wherever the ladder does not set it: crawlward off, a refusal first, observe mode, a
    // subrequest made before the main request got here (it shares the headers)
    let has_rung_header = crate::request::ladder::clear_client_rung(r, mcf).unwrap_or(false);
    // a subrequest is its main request's: decided and counted there
    if lcf.enabled != 1 || !r.is_main_request() {
        return DECLINED;
    }
    // here, after realip: a request nginx answered before it (a bad request line, a header
    // timeout) has its socket's address whatever the trusted proxies
    crate::net::tell_if_unix_socket(r.connection_ref());
    // the request's state, once; none only if its pool ran out of memory, and then
    // the request is neither counted nor limited (but still refused if it must be)
    // SAFETY: the handler holds no other reference to the state, and keeps none past it.
    let mut st = unsafe { facts(r) };
    let Some(mut id) = st.as_deref().map(|st| st.id).or_else(|| identify(r)) else { return DECLINED };
    if let Some(st) = st.as_deref_mut() {
        if st.refused {
            // refused already, now at its error_page: let the page answer
            return DECLINED;
        }
        let check = st.check;
        // SAFETY: a check the state points at lives in the request's pool.
        let checking = unsafe { check.as_ref() }.is_some_and(|ck| id.dns.is_none() || ck.phase != Phase::Done);
        if checking {
            // SAFETY: the request is in the preaccess phase, and the check is its own.
            let Some(v) = (unsafe { crate::request::dns::advance(r, check, mcf) }) else {
                st.waiting = true;
                return NGX_AGAIN as ngx_int_t;
            };
            // SAFETY: as above; advance holds no reference to it when it returns.
            let source = unsafe { (*check).source };
            id = settle(st, mcf, v, source);
            log_dns(r, mcf, &id);
        }
    }
    // counted once, however often the phase runs
    if let (Some(counters), Some(st)) = (mcf.counters(), st.as_deref_mut()) {
        crate::request::count_once(st, counters);
    }
    if let Action::Block(status) = id.action {
        let label = agent_label(r, mcf, &id);
        let name = escaped(label.as_bytes());
        if lcf.dry_run != 1 {
            ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: refused with {status}: agent \"{name}\", verdict {}", id.verdict);
            if let Some(st) = st {
                st.refused = true;
            }
            return if status == 403 { NGX_HTTP_FORBIDDEN as ngx_int_t } else { NGX_HTTP_CLOSE as ngx_int_t };
        }
        ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: dry run, would refuse with {status}: agent \"{name}\", verdict {}", id.verdict);
    }
    if let Some(rc) = st.as_deref_mut().and_then(|st| signature_answer(r, mcf, lcf, st)) {
        return rc;
    }
    // where a request may be signed in, the ladder and the limits wait for the access
    // phase, whose auth_basic, auth_jwt or auth_request sets the variables that say so
    // (after_access)
    if !lcf.signed_in_variables().is_empty() {
        if let Some(st) = st {
            st.deferred = true;
        }
        return DECLINED;
    }
    // the error page of a refusal (the access phase's 401 or 403, a limit_req or limit_conn
    // refusal) is no request of the client's own: nothing is decided or spent for it, and
    // the log phase counts the request in its client's window, refusing nothing
    if r.answering_refusal() {
        if let Some(st) = st {
            st.deferred = true;
        }
        return DECLINED;
    }
    // most locations: neither the ladder nor a limit of the module's to run
    if mcf.ladder.is_none() && lcf.facet_guard().is_none() && lcf.budgets().is_none() && lcf.browse_cap().is_none() {
        return DECLINED;
    }
    ladder_and_limits(r, mcf, lcf, st, id, has_rung_header)
}

/// The precontent phase's part, where `crawlward_budget_signed_in` is given:
/// the ladder and the limits, once the access phase has checked who is
/// signed in. nginx runs the access phase's modules (auth_basic,
/// auth_request) after every preaccess handler, and before this one; before
/// them, an `auth_request_set` variable is still empty, and `$remote_user`
/// is whatever the client's `Authorization` header says.
pub fn after_access(r: &mut Request) -> ngx_int_t {
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, lcf) = unsafe { confs(r) };
    if lcf.enabled != 1 || !r.is_main_request() || lcf.signed_in_variables().is_empty() {
        return DECLINED;
    }
    // SAFETY: the handler holds no other reference to the state, and keeps none past it.
    let st = unsafe { facts(r) };
    // the verdict is final: the preaccess phase waited for DNS
    let Some(id) = st.as_deref().map(|st| st.id) else { return DECLINED };
    // refused, or refused before this phase (the access phase's 401 or 403, at its error
    // page): nothing is decided or spent, and the log phase counts the request
    if st.as_deref().is_some_and(|st| st.refused) || r.answering_refusal() {
        return DECLINED;
    }
    let has_rung_header = crate::request::ladder::clear_client_rung(r, mcf).unwrap_or(false);
    // a refusal is answered as in the preaccess phase: nginx finalizes the request with it
    ladder_and_limits(r, mcf, lcf, st, id, has_rung_header)
}

/// The ladder's place and answer, then the facet guard, the budgets and the
/// browse cap: each once per request, in the first location that has it.
fn ladder_and_limits(r: &mut Request, mcf: &MainConf, lcf: &LocConf, mut st: Option<&mut RequestState>, id: Identified, has_rung_header: bool) -> ngx_int_t {
    if let Some(st) = st.as_deref_mut() {
        if st.ladder.is_none() && mcf.ladder.is_some() {
            st.ladder = crate::request::ladder::place(r, mcf, lcf, &id, st.door);
            if let Some(placed) = st.ladder {
                crate::request::ladder::tell_application(r, mcf, lcf, &placed, has_rung_header);
            }
            if let Some(rc) = st.ladder.and_then(|p| ladder_answer(r, lcf, &p)) {
                st.limited.ladder = true;
                st.refused = true;
                return rc;
            }
        } else if let Some(placed) = st.ladder {
            // placed in an earlier location (under crawlward_dry_run there, say): this
            // location's application hears the rung if this one enforces
            crate::request::ladder::tell_application(r, mcf, lcf, &placed, has_rung_header);
        }
    }
    match st {
        Some(st) if limits_to_run(st, lcf) => {
            let mut rc = limit(r, st, mcf, lcf, &id);
            if rc == DECLINED && browse_cap_to_run(st, lcf) {
                rc = browse_cap(r, st, lcf);
            }
            st.refused = rc != DECLINED;
            rc
        }
        _ => DECLINED,
    }
}

/// What the request's signature answers, before any other limit: 429 for a
/// replayed signature, 403 on a path for signed agents without a verified
/// one (both with `Accept-Signature`, added by the header filter); robots.txt
/// and the site's own key directory always pass. Under `crawlward_dry_run`,
/// a line saying what it would have done, and None.
fn signature_answer(r: &mut Request, mcf: &MainConf, lcf: &LocConf, st: &mut RequestState) -> Option<ngx_int_t> {
    let identity = mcf.identity.as_ref()?;
    // most requests: unsigned, and no path reserved for signed agents
    if st.signature.is_none() && identity.signatures_required.is_empty() {
        return None;
    }
    let path = identity.app_path(r.uri());
    let (outcome, replay, named) = st.signature.map_or((crawlward_policy::signature::Outcome::None, None, true), |s| (s.outcome, s.replay, s.named));
    let refusal = crawlward_policy::signature::refusal(identity.signature_exempt(path), identity.signature_required(path), outcome, replay, named)?;
    let agent = st.signature.map_or(&b""[..], |s| s.agent(r));
    let signer = escaped(if agent.is_empty() { b"-" } else { agent });
    if lcf.dry_run == 1 {
        ngx_log_error!(
            NGX_LOG_INFO,
            r.log(),
            "crawlward: dry run, would refuse with {}: {}, signature {}, signer \"{signer}\"",
            refusal.status(),
            refusal.reason(),
            outcome.as_str()
        );
        return None;
    }
    ngx_log_error!(
        NGX_LOG_INFO,
        r.log(),
        "crawlward: refused with {}: {}, signature {}, signer \"{signer}\"",
        refusal.status(),
        refusal.reason(),
        outcome.as_str()
    );
    st.limited.signature = Some(refusal);
    st.refused = true;
    Some(refusal.status() as ngx_int_t)
}

/// What the ladder's rung answers, logged: the status to refuse with, if it
/// refuses (enforce mode); in observe mode or under `crawlward_dry_run`, a
/// line saying what it would have done, and None.
fn ladder_answer(r: &mut Request, lcf: &LocConf, p: &crate::request::ladder::Placed) -> Option<ngx_int_t> {
    let status = p.answer.status().filter(|_| p.would_refuse)?;
    let rung = crawlward_policy::ladder::rung_name(p.placement);
    let what =
        format!("{status} (ladder {rung}): score {:.2}, {}", p.score.unwrap_or(0.0), crawlward_policy::ladder::contributions(&p.contributions.map(f64::from)));
    if !p.refused {
        ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: {}, would refuse with {what}", if lcf.dry_run == 1 { "dry run" } else { "observe mode" });
        return None;
    }
    ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: refused with {what}");
    if let Some(secs) = p.answer.retry_after() {
        crate::request::headers::retry_after(r, u64::from(secs));
    }
    Some(status as ngx_int_t)
}

/// Whether the facet guard or the budgets have yet to run for the request in
/// this location (robots.txt meets neither).
fn limits_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    st.door != Door::Robots && (facets_to_run(st, lcf) || budgets_to_run(st, lcf) || browse_cap_to_run(st, lcf))
}

fn browse_cap_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    !st.browse_done && lcf.browse_cap().is_some()
}

/// The module's browse cap (`crawlward_browse_cap`), once per request, after
/// the facet guard and the budgets (a request they refuse takes no place):
/// a request that takes a place in it (`$crawlward_browse_key`: a browse page,
/// not exempt) holds it until its upstream is done ([`crate::request::browse`]),
/// or else until the request ends; past the cap, 503, no queue.
/// It answers as `limit_conn` would (`$limit_conn_status` reads REJECTED for
/// the module's variables and the throttle log, with the policy's Retry-After).
fn browse_cap(r: &Request, st: &mut RequestState, lcf: &LocConf) -> ngx_int_t {
    st.browse_done = true;
    let Some(cap) = lcf.browse_cap() else { return DECLINED };
    if !crate::request::layered(r, st).is_some_and(|l| l.browse) {
        return DECLINED;
    }
    let Some(table) = cap.zone().table.as_ref() else { return DECLINED };
    // the place is given back when the request's pool goes: made first, so that a
    // place is never taken without it
    let Some(cln) = r.add_cleanup() else { return DECLINED };
    if table.with_browse(|t| t.take_browse(cap.max, crate::worker::process_slot())) {
        // given back when the response's last buffer passes, or else when the pool goes
        st.browse_place = cln.set_with(Some(release_browse_place), cap.zone as *mut std::ffi::c_void);
        return DECLINED;
    }
    st.limited.browse_cap = true;
    let state = table.with_browse(|t| t.sync_state());
    ngx_log_error!(
        NGX_LOG_INFO,
        r.log(),
        "crawlward: refused with 503 (browse cap): {} requests in flight{}",
        cap.max,
        match state {
            budget_table::SyncState::Synced => " across the nodes",
            budget_table::SyncState::Fallback => ", this node's share (the store does not answer)",
            budget_table::SyncState::Off => "",
        }
    );
    NGX_HTTP_SERVICE_UNAVAILABLE as ngx_int_t
}

/// A request that held a place in the browse cap ended.
unsafe extern "C" fn release_browse_place(data: *mut std::ffi::c_void) {
    crate::base::guard((), || {
        // SAFETY: data is the cap's zone (a BudgetZone of the cycle the request runs in,
        // which outlives its requests).
        let zone = unsafe { &*(data as *const crate::conf::budget::BudgetZone) };
        if let Some(t) = zone.table.as_ref() {
            t.with_browse(|t| t.release_browse(crate::worker::process_slot()));
        }
    })
}

fn facets_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    !st.facets_done && lcf.facet_guard().is_some()
}

fn budgets_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    !st.budget_done && lcf.budgets().is_some()
}

/// The facet guard, then the crawl budgets, once per request, on what the
/// application will see: nginx's normalized `$uri` (percent-decoded, dot
/// segments resolved, slashes merged) and the query string's names as PHP
/// reads them. robots.txt meets neither; machine doors have their rate
/// classes, not the budgets.
fn limit(r: &mut Request, st: &mut RequestState, mcf: &MainConf, lcf: &LocConf, id: &Identified) -> ngx_int_t {
    let dry = lcf.dry_run == 1;
    let identity = mcf.identity.as_deref();
    let agent = id.agent.and_then(|i| identity.map(|x| &x.catalogue.agents()[i]));
    if let Some(g) = lcf.facet_guard().filter(|_| !st.facets_done) {
        st.facets_done = true;
        if g.applies_to(crate::request::app_path(r, mcf)) {
            let out = g.decide(id.verdict, r.args(), r.referer());
            st.limited.facet = Some(out);
            st.limited.facet_dry = dry;
            if let Some(rule) = out.rule {
                if let Some(counters) = mcf.counters() {
                    counters.facet_refused(rule, dry);
                }
                // the label only for the log line: it may cut the token from the header
                let label = agent_label(r, mcf, id);
                let name = escaped(label.as_bytes());
                let what =
                    format!("429 ({}): agent \"{name}\", verdict {}, {} parameters, {} facets", rule.as_str(), id.verdict, out.scan.params, out.scan.facets);
                if !dry {
                    ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: refused with {what}");
                    crate::request::headers::retry_after(r, g.retry_after as u64);
                    return 429;
                }
                ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: dry run, would refuse with {what}");
            }
        }
    }
    if let Some(b) = lcf.budgets().filter(|_| !st.budget_done) {
        st.budget_done = true;
        let verified_counts = b.limits.verified.is_some() && b.limits.verified_counts((crate::base::wall_ms() / 1000) as i64);
        if !budget::counted(r.is_get_or_head(), st.door, id.verdict, verified_counts) || signed_in(r, lcf) {
            return DECLINED;
        }
        let zone = b.zone();
        let Some(table) = zone.table.as_ref() else { return DECLINED };
        let mut name_buf = [0u8; NAME_MAX];
        let (agent_ref, scope, claim) = budget_key(r, id, agent, &mcf.pinned, &mut name_buf);
        let deep = identity.is_some_and(|x| is_deep(x, x.app_path(r.uri()), r.args()));
        let ip = crate::net::client_ip(r.connection_ref()).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let counted = Counted { address: budget::counted_address(ip), agent: agent_ref, deep, scope };
        let now = crate::conf::budget::clock_ms(zone);
        let shrink = crate::worker::shrink(zone);
        if let Some(Err(refusal)) = table.with(|t| t.take(&counted, now, &b.limits, shrink, dry)) {
            st.limited.budget = Some(refusal);
            st.limited.budget_dry = dry;
            let secs = refusal.retry_after_secs();
            let mut buf = [0u8; NAME_MAX];
            let who = match agent_ref {
                AgentRef::Name(n) => n,
                AgentRef::Pinned(_) => {
                    let n = budget::agent_budget_name(agent.map_or(budget_table::NO_USER_AGENT, |a| a.name.as_str()), claim, &mut buf);
                    &buf[..n]
                }
            };
            let what = format!(
                "429 (budget {}{}): agent \"{}\", verdict {}, retry after {secs}s{}",
                refusal.budget.as_str(),
                if refusal.deep { ", deep" } else { "" },
                escaped(who),
                id.verdict,
                if shrink > 1 { format!(", budgets divided by {shrink} (event loop late)") } else { String::new() }
            );
            if !dry {
                ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: refused with {what}");
                crate::request::headers::retry_after(r, secs);
                return 429;
            }
            ngx_log_error!(NGX_LOG_INFO, r.log(), "crawlward: dry run, would refuse with {what}");
        }
    }
    DECLINED
}

/// Which agent key and budgets a counted request goes to (see
/// `budget_table::claim_of`): a bot the catalogue does not name
/// (`unknown-bot`) by its product token, written into `buf`; any other by its
/// agent's fixed slot for its claim; no User-Agent, by its slot.
fn budget_key<'b>(
    r: &Request,
    id: &Identified,
    agent: Option<&crawlward_policy::Agent>,
    pinned: &budget_table::Pinned,
    buf: &'b mut [u8; NAME_MAX],
) -> (AgentRef<'b>, Scope, Claim) {
    let (Some(i), Some(a)) = (id.agent, agent) else {
        return (AgentRef::Pinned(pinned.no_user_agent()), Scope::Crawler, Claim::Agent);
    };
    let (claim, scope) = budget_table::claim_of(id.verdict, a.can_be_verified());
    if let (Some((start, len)), Scope::Crawler) = (id.token, scope) {
        let ua = r.user_agent_joined();
        if let Some(token) = ua.get(start..start + len) {
            // a token that spells an agent only a signature names: an unverified claim of it, in
            // its slot for those (its own slot's key is the name's, and budget sync would sum them)
            if let Some(slot) = pinned.signed_only_named(token).and_then(|a| pinned.slot(a, Claim::Unverified)) {
                return (AgentRef::Pinned(slot), scope, Claim::Unverified);
            }
            let n = len.min(NAME_MAX);
            buf[..n].copy_from_slice(&token[..n]);
            return (AgentRef::Name(&buf[..n]), scope, claim);
        }
    }
    match pinned.slot(i, claim) {
        Some(slot) => (AgentRef::Pinned(slot), scope, claim),
        // an agent with no slot (unknown-bot without a printable token): by its name
        None => {
            let n = a.name.len().min(NAME_MAX);
            buf[..n].copy_from_slice(&a.name.as_bytes()[..n]);
            (AgentRef::Name(&buf[..n]), scope, claim)
        }
    }
}

/// Whether the path and query string are on a deep path (robots.txt patterns
/// match the path, `?`, and the query); joined on the stack when short.
fn is_deep(identity: &crawlward_policy::Identity, path: &[u8], query: &[u8]) -> bool {
    if query.is_empty() {
        return identity.is_deep(path);
    }
    let n = path.len() + 1 + query.len();
    let join = |t: &mut [u8]| {
        t[..path.len()].copy_from_slice(path);
        t[path.len()] = b'?';
        t[path.len() + 1..].copy_from_slice(query);
    };
    // not zeroed first: only the n bytes joined are read
    let mut stack = [std::mem::MaybeUninit::<u8>::uninit(); 512];
    if n <= stack.len() {
        let (dst, p, q) = (stack.as_mut_ptr() as *mut u8, path.len(), query.len());
        // SAFETY: p + 1 + q = n <= 512: bytes 0..p of the buffer, from a slice that does not
        // overlap it ...
        unsafe { std::ptr::copy_nonoverlapping(path.as_ptr(), dst, p) };
        // SAFETY: ... byte p ...
        unsafe { dst.wrapping_add(p).write(b'?') };
        // SAFETY: ... and bytes p + 1..n, likewise ...
        unsafe { std::ptr::copy_nonoverlapping(query.as_ptr(), dst.wrapping_add(p + 1), q) };
        // SAFETY: ... are written before the n bytes are read as a slice.
        let joined = unsafe { std::slice::from_raw_parts(dst, n) };
        identity.is_deep(joined)
    } else {
        let mut heap = vec![0u8; n];
        join(&mut heap);
        identity.is_deep(&heap)
    }
}
