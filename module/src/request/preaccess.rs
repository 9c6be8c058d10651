//! The preaccess handler: the bot-blocker's refusal, the facet guard and
//! the crawl budgets, on the request's facts ([`crate::request`]).

use crate::conf::{confs, LocConf, MainConf};
use crate::request::dns::Phase;
use crate::request::{agent_label, facts, identify, settle, user_agent, Identified, RequestState};
use crawlward_policy::budget::{self, Claim};
use crawlward_policy::budget_table::{self, AgentRef, Counted, Scope, NAME_MAX};
use crawlward_policy::{Action, Door};
use ngx::ffi::{ngx_http_request_t, ngx_int_t, NGX_AGAIN, NGX_DECLINED, NGX_HTTP_CLOSE, NGX_HTTP_FORBIDDEN, NGX_HTTP_SERVICE_UNAVAILABLE, NGX_LOG_INFO};
use ngx::ngx_log_error;

/// One line per DNS check, at info: what was claimed, what DNS said, and how.
///
/// # Safety
/// `r` must be a live request.
unsafe fn log_dns(r: *mut ngx_http_request_t, mcf: &MainConf, id: &Identified) {
    // SAFETY: per the contract.
    let (name, log) = unsafe { (agent_label(r, mcf, id), (*(*r).connection).log) };
    let dns = id.dns.map_or("-", |d| d.as_str());
    ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dns {dns} ({}) for agent \"{name}\", verdict {}", id.dns_source.as_str(), id.verdict);
}

pub unsafe extern "C" fn preaccess_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(NGX_DECLINED as ngx_int_t, || {
        // SAFETY: nginx calls phase handlers with a live request of this http block.
        unsafe {
            let (mcf, lcf) = confs(r);
            // a subrequest is its main request's: decided and counted there
            if lcf.enabled != 1 || r != (*r).main {
                return NGX_DECLINED as ngx_int_t;
            }
            // the request's state, once; none only if its pool ran out of memory, and then
            // the request is neither counted nor limited (but still refused if it must be)
            let st = facts(r).map(|st| st as *mut RequestState);
            let Some(mut id) = st.map(|st| (*st).id).or_else(|| identify(r)) else { return NGX_DECLINED as ngx_int_t };
            if let Some(st) = st {
                if (*st).refused {
                    // refused already, now at its error_page: let the page answer
                    return NGX_DECLINED as ngx_int_t;
                }
                let check = (*st).check;
                if !check.is_null() && (id.dns.is_none() || (*check).phase != Phase::Done) {
                    let Some(v) = crate::request::dns::advance(r, check, mcf) else { return NGX_AGAIN as ngx_int_t };
                    id = settle(&mut *st, mcf, v, (*check).source);
                    log_dns(r, mcf, &id);
                }
            }
            // counted once, however often the phase runs
            if let (Some(counters), Some(st)) = (mcf.counters(), st) {
                if !(*st).counted {
                    (*st).counted = true;
                    counters.count(id.agent, id.verdict, id.action);
                }
            }
            if let Action::Block(status) = id.action {
                let name = agent_label(r, mcf, &id);
                let log = (*(*r).connection).log;
                if lcf.dry_run != 1 {
                    ngx_log_error!(NGX_LOG_INFO, log, "crawlward: refused with {status}: agent \"{name}\", verdict {}", id.verdict);
                    if let Some(st) = st {
                        (*st).refused = true;
                    }
                    return if status == 403 { NGX_HTTP_FORBIDDEN as ngx_int_t } else { NGX_HTTP_CLOSE as ngx_int_t };
                }
                ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dry run, would refuse with {status}: agent \"{name}\", verdict {}", id.verdict);
            }
            match st {
                Some(st) if limits_to_run(&*st, lcf) => {
                    let st = &mut *st;
                    let mut rc = limit(r, st, mcf, lcf, &id);
                    if rc == NGX_DECLINED as ngx_int_t && browse_cap_to_run(st, lcf) {
                        rc = browse_cap(r, st, lcf);
                    }
                    st.refused = rc != NGX_DECLINED as ngx_int_t;
                    rc
                }
                _ => NGX_DECLINED as ngx_int_t,
            }
        }
    })
}

/// Whether the facet guard or the budgets have yet to run for the request in
/// this location (robots.txt meets neither).
fn limits_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    st.door != Door::Robots && (facets_to_run(st, lcf) || budgets_to_run(st, lcf) || browse_cap_to_run(st, lcf))
}

fn browse_cap_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    !st.browse_done && lcf.browse_cap_set == 1 && !lcf.browse_cap.is_null()
}

/// The module's browse cap (`crawlward_browse_cap`), once per request, after
/// the facet guard and the budgets (a request they refuse takes no place):
/// a request that takes a place in it (`$crawlward_browse_key`: a browse page,
/// not exempt) holds it until the request ends; past the cap, 503, no queue.
/// It answers as `limit_conn` would (`$limit_conn_status` reads REJECTED for
/// the module's variables and the throttle log, with the policy's Retry-After).
///
/// # Safety
/// `r` must be a live main request in the preaccess phase.
unsafe fn browse_cap(r: *mut ngx_http_request_t, st: &mut RequestState, lcf: &LocConf) -> ngx_int_t {
    st.browse_done = true;
    // SAFETY: per the contract; the cap's conf and its zone live in the cycle's pool.
    unsafe {
        if !crate::request::layered(r, st).is_some_and(|l| l.browse) {
            return NGX_DECLINED as ngx_int_t;
        }
        let cap = &*lcf.browse_cap;
        let zone = &*cap.zone;
        let Some(table) = zone.table.as_ref() else { return NGX_DECLINED as ngx_int_t };
        // the place is given back when the request's pool goes: made first, so that a
        // place is never taken without it
        let cln = ngx::ffi::ngx_pool_cleanup_add((*r).pool, 0);
        if cln.is_null() {
            return NGX_DECLINED as ngx_int_t;
        }
        if table.with(|t| t.take_browse(cap.max, crate::worker::process_slot())) {
            (*cln).handler = Some(release_browse_place);
            (*cln).data = cap.zone as *mut std::ffi::c_void;
            return NGX_DECLINED as ngx_int_t;
        }
        st.limited.browse_cap = true;
        let log = (*(*r).connection).log;
        let state = table.with(|t| t.sync_state());
        ngx_log_error!(
            NGX_LOG_INFO,
            log,
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
}

/// A request that held a place in the browse cap ended.
unsafe extern "C" fn release_browse_place(data: *mut std::ffi::c_void) {
    crate::base::guard((), || {
        // SAFETY: data is the cap's zone (a BudgetZone of the cycle the request runs in,
        // which outlives its requests).
        let zone = unsafe { &*(data as *const crate::conf::budget::BudgetZone) };
        if let Some(t) = zone.table.as_ref() {
            t.with(|t| t.release_browse(crate::worker::process_slot()));
        }
    })
}

fn facets_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    !st.facets_done && lcf.facets_set == 1 && !lcf.facets.is_null()
}

fn budgets_to_run(st: &RequestState, lcf: &LocConf) -> bool {
    !st.budget_done && lcf.budget_set == 1 && !lcf.budget.is_null()
}

/// Whether the request is signed in: one of the `crawlward_budget_signed_in`
/// variables (set by the server from a checked identity) is not empty.
///
/// # Safety
/// `r` must be a live request.
unsafe fn signed_in(r: *mut ngx_http_request_t, lcf: &LocConf) -> bool {
    if lcf.signed_in.is_null() {
        return false;
    }
    // SAFETY: per the contract; the variable indexes were taken at configuration time.
    unsafe {
        (*lcf.signed_in).iter().any(|i| {
            let v = ngx::ffi::ngx_http_get_indexed_variable(r, *i);
            !v.is_null() && (*v).valid() != 0 && (*v).not_found() == 0 && (*v).len() > 0
        })
    }
}

/// The facet guard, then the crawl budgets, once per request, on what the
/// application will see: nginx's normalized `$uri` (percent-decoded, dot
/// segments resolved, slashes merged) and the query string's names as PHP
/// reads them. robots.txt meets neither; machine doors have their rate
/// classes, not the budgets.
///
/// # Safety
/// `r` must be a live main request in the preaccess phase.
unsafe fn limit(r: *mut ngx_http_request_t, st: &mut RequestState, mcf: &MainConf, lcf: &LocConf, id: &Identified) -> ngx_int_t {
    let (facets, budgets) = (facets_to_run(st, lcf), budgets_to_run(st, lcf));
    // SAFETY: per the contract; the facet and budget confs live in the cycle's pool.
    unsafe {
        let log = (*(*r).connection).log;
        let dry = lcf.dry_run == 1;
        let identity = mcf.identity.as_deref();
        let agent = id.agent.and_then(|i| identity.map(|x| &x.catalogue.agents()[i]));
        let path = (*r).uri.as_bytes();
        let query = (*r).args.as_bytes();
        if facets {
            st.facets_done = true;
            let g = &*lcf.facets;
            if g.applies_to(path) {
                let referer = (*r).headers_in.referer;
                let referer = (!referer.is_null()).then(|| (*referer).value.as_bytes());
                let out = g.decide(id.verdict, query, referer);
                st.limited.facet = Some(out);
                if let Some(rule) = out.rule {
                    if let Some(counters) = mcf.counters() {
                        counters.facet_refused(rule, dry);
                    }
                    // the label only for the log line: it may cut the token from the header
                    let name = agent_label(r, mcf, id);
                    let what = format!(
                        "429 ({}): agent \"{name}\", verdict {}, {} parameters, {} facets",
                        rule.as_str(),
                        id.verdict,
                        out.scan.params,
                        out.scan.facets
                    );
                    if !dry {
                        ngx_log_error!(NGX_LOG_INFO, log, "crawlward: refused with {what}");
                        crate::request::headers::retry_after(r, g.retry_after as u64);
                        return 429;
                    }
                    ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dry run, would refuse with {what}");
                }
            }
        }
        if budgets {
            st.budget_done = true;
            let b = &*lcf.budget;
            let get_or_head = (*r).method & (ngx::ffi::NGX_HTTP_GET | ngx::ffi::NGX_HTTP_HEAD) as usize != 0;
            if !budget::counted(get_or_head, st.door, id.verdict, b.limits.verified.is_some()) || signed_in(r, lcf) {
                return NGX_DECLINED as ngx_int_t;
            }
            let zone = &*b.zone;
            let Some(table) = zone.table.as_ref() else { return NGX_DECLINED as ngx_int_t };
            let mut name_buf = [0u8; NAME_MAX];
            let (agent_ref, scope, claim) = budget_key(r, id, agent, &mcf.pinned, &mut name_buf);
            let deep = identity.is_some_and(|x| is_deep(x, path, query));
            let ip = crate::net::client_ip(&*(*r).connection).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
            let counted = Counted { address: budget::counted_address(ip), agent: agent_ref, deep, scope };
            let now = crate::conf::budget::clock_ms(zone);
            let shrink = crate::worker::shrink(zone);
            if let Err(refusal) = table.with(|t| t.take(&counted, now, &b.limits, shrink, dry)) {
                st.limited.budget = Some(refusal);
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
                    crawlward_policy::escape::escaped(who),
                    id.verdict,
                    if shrink > 1 { format!(", budgets divided by {shrink} (event loop late)") } else { String::new() }
                );
                if !dry {
                    ngx_log_error!(NGX_LOG_INFO, log, "crawlward: refused with {what}");
                    crate::request::headers::retry_after(r, secs);
                    return 429;
                }
                ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dry run, would refuse with {what}");
            }
        }
        NGX_DECLINED as ngx_int_t
    }
}

/// Which agent key and budgets a counted request goes to (see
/// `budget_table::claim_of`): a bot the catalogue does not name
/// (`unknown-bot`) by its product token, written into `buf`; any other by its
/// agent's fixed slot for its claim; no User-Agent, by its slot.
///
/// # Safety
/// `r` must be a live request.
unsafe fn budget_key<'b>(
    r: *mut ngx_http_request_t,
    id: &Identified,
    agent: Option<&crawlward_policy::Agent>,
    pinned: &budget_table::Pinned,
    buf: &'b mut [u8; NAME_MAX],
) -> (AgentRef<'b>, Scope, Claim) {
    let (Some(i), Some(a)) = (id.agent, agent) else {
        return (AgentRef::Pinned(pinned.no_user_agent()), Scope::Crawler, Claim::Agent);
    };
    let (claim, scope) = budget_table::claim_of(id.verdict, !a.ranges.is_empty() || !a.rdns_suffixes.is_empty());
    if let (Some((start, len)), Scope::Crawler) = (id.token, scope) {
        // SAFETY: per the contract.
        let ua = unsafe { user_agent(r) };
        if let Some(token) = ua.get(start..start + len) {
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
        // SAFETY: p + 1 + q = n <= 512 bytes are written, from slices that do not overlap
        // the stack buffer, before the n bytes are read as a slice.
        let joined = unsafe {
            std::ptr::copy_nonoverlapping(path.as_ptr(), dst, p);
            *dst.add(p) = b'?';
            std::ptr::copy_nonoverlapping(query.as_ptr(), dst.add(p + 1), q);
            std::slice::from_raw_parts(dst, n)
        };
        identity.is_deep(joined)
    } else {
        let mut heap = vec![0u8; n];
        join(&mut heap);
        identity.is_deep(&heap)
    }
}
