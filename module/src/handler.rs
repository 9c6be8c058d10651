//! The access-phase handler and the per-request identification it shares
//! with the variables.

use crate::conf::{LocConf, MainConf};
use crate::dns::{Check, Phase, Source};
use crawlward_policy::fcrdns::{self, DnsVerdict};
use crawlward_policy::verdict_cache::Lookup;
use crawlward_policy::budget::{self, Claim, Refusal};
use crawlward_policy::budget_table::{self, AgentRef, Counted, Scope, NAME_MAX};
use crawlward_policy::query::FacetOutcome;
use crawlward_policy::ua_cache::Classified;
use crawlward_policy::{Action, Door, Verdict};
use ngx::ffi::{
    ngx_array_push, ngx_conf_t, ngx_http_conf_ctx_t, ngx_http_core_main_conf_t, ngx_http_core_module, ngx_http_handler_pt,
    ngx_http_phases_NGX_HTTP_PREACCESS_PHASE, ngx_http_request_t, ngx_int_t, ngx_pool_cleanup_add, NGX_AGAIN, NGX_DECLINED, NGX_ERROR,
    NGX_HTTP_CLOSE, NGX_HTTP_FORBIDDEN, NGX_LOG_EMERG, NGX_LOG_INFO,
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
    /// The DNS check's verdict, once known (None: no check, or still in flight).
    pub dns: Option<DnsVerdict>,
    /// Where the DNS verdict came from.
    pub dns_source: Source,
    /// For the catch-all of self-declared bots, where the bot's product token
    /// is in the User-Agent (start, length): its crawl budget name.
    pub token: Option<(usize, usize)>,
}

pub unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    crate::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: postconfiguration runs with cf->ctx the http conf ctx.
        let mcf = unsafe { crate::conf::main_conf_of_cf(cf) };
        if mcf.has_status && mcf.zone.is_null() {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_status\" needs a \"crawlward_zone\" at the http level");
            return NGX_ERROR as ngx_int_t;
        }
        // the budget zones' fixed slots: one per catalogue agent and claim, laid out by the
        // zones' init, which runs after the configuration is read
        let pinned = mcf.identity.as_ref().map_or_else(Vec::new, |i| budget_table::pinned_keys(i.catalogue.agents().iter().map(|a| a.name.as_str())));
        for z in mcf.budget_zones.iter_mut() {
            z.pinned = pinned.clone();
        }
        // SAFETY: postconfiguration, with cf the http block's conf.
        unsafe { crate::variables::make_room(cf) };
        // In the preaccess phase, and registered after the modules built into nginx, so
        // nginx runs it before limit_req and limit_conn: a request the module refuses
        // takes no place in a browse cap (limit_conn) and spends no rate class, and their
        // keys read the final verdict, not one provisional on a DNS lookup.
        // SAFETY: the core module's main conf is at its ctx_index in the http ctx; the phase
        // arrays exist by postconfiguration, and pushing returns room for one handler or null.
        unsafe {
            let ctx = (*cf).ctx as *mut ngx_http_conf_ctx_t;
            let cmcf = *(*ctx).main_conf.add(ngx_http_core_module.ctx_index) as *mut ngx_http_core_main_conf_t;
            let h = ngx_array_push(&mut (*cmcf).phases[ngx_http_phases_NGX_HTTP_PREACCESS_PHASE as usize].handlers) as *mut ngx_http_handler_pt;
            if h.is_null() {
                return NGX_ERROR as ngx_int_t;
            }
            *h = Some(preaccess_handler);
        }
        // SAFETY: as above.
        unsafe { crate::responses::postconfiguration(cf) }
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
/// and counted once, however often the phases run; a subrequest shares
/// its main request's pool and so its decision.
#[repr(C)]
struct RequestState {
    id: Identified,
    /// Whether the facet guard and the budgets ran (each once per request, in the first
    /// location that has it), and what they found.
    facets_done: bool,
    budget_done: bool,
    limited: Limited,
    /// The route the client asked for, for the action once a DNS verdict arrives.
    door: Door,
    counted: bool,
    /// Whether the module refused the request: an `error_page` that takes it to
    /// another location shows its page, and nothing is decided or spent again.
    refused: bool,
    /// The DNS check, when the claim needs one and the cache had no verdict; else null.
    check: *mut Check,
}

/// Our cleanup entry's handler, also how the entry is found again: the state
/// is plain data in the request's pool, except a DNS check in flight, which it
/// cancels. Compared by the value stored here, which is the one we set.
static STATE_MARK: unsafe extern "C" fn(*mut c_void) = release_state;

unsafe extern "C" fn release_state(data: *mut c_void) {
    crate::guard((), || {
        // SAFETY: nginx runs the cleanup with the RequestState we wrote, while the pool is
        // being destroyed; the check, if any, is in the same pool and still valid.
        unsafe { crate::dns::release((*(data as *mut RequestState)).check) }
    })
}

/// The request's DNS check, if it has one.
///
/// # Safety
/// `r` must be a live request.
pub unsafe fn check_of(r: *mut ngx_http_request_t) -> Option<*mut Check> {
    // SAFETY: per the contract.
    unsafe { state(r).map(|st| (*st).check).filter(|c| !c.is_null()) }
}

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
        let classify = |u: &[u8]| {
            let agent = identity.catalogue.classify_index(u);
            let generic = agent.is_some_and(|i| identity.catalogue.agents()[i].counts_by_token());
            Classified { agent, token: if generic { budget::crawler_token_span(u) } else { None } }
        };
        let Classified { agent: agent_index, token } = match mcf.ua_cache.try_borrow_mut() {
            Ok(mut cache) => cache.get_or_insert_with(Default::default).get_or_classify(&ua, classify),
            Err(_) => classify(&ua),
        };
        let agent = agent_index.map(|i| &identity.catalogue.agents()[i]);
        let ip = crate::net::client_ip(&*(*r).connection).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let mut verdict = identity.verdict(&ua, agent, ip);
        let door = identity.door((*r).uri.as_bytes());
        let (mut dns, mut dns_source, mut check) = (None, Source::None, std::ptr::null_mut());
        if let (Some(i), Some(a), Some(d)) = (agent_index, agent, mcf.dns.as_ref()) {
            if let Some(cache) = d.cache.as_ref().filter(|_| fcrdns::needs_dns(a, ip)) {
                let key = mcf.suffix_keys.get(i).copied().unwrap_or_default();
                let now = crate::now_ms() as u64;
                match cache.with(|t| t.lookup(ip, key, now)) {
                    Lookup::Hit(v) => {
                        (dns, dns_source) = (Some(v), Source::Hit);
                        verdict = fcrdns::verdict_of(v, d.unresolved);
                    }
                    // provisional until the preaccess handler has the verdict: as if unresolved;
                    // no lookup where the verdict cannot change what happens to the request
                    _ => {
                        verdict = fcrdns::verdict_of(DnsVerdict::Unresolved, d.unresolved);
                        if identity.verdict_matters(door, a.purpose) {
                            check = crate::dns::new_check(r, i, key, ip);
                            if check.is_null() {
                                (dns, dns_source) = (Some(DnsVerdict::Unresolved), Source::Full);
                            }
                        }
                    }
                }
            }
        }
        let action = identity.ua_action(door, agent.map(|a| a.purpose), verdict);
        let id = Identified { agent: agent_index, verdict, action, dns, dns_source, token };
        let c = ngx_pool_cleanup_add((*r).pool, std::mem::size_of::<RequestState>());
        if c.is_null() {
            // no state, so no check either: it could not be cancelled
            crate::dns::release(check);
        } else {
            let st = (*c).data as *mut RequestState;
            st.write(RequestState { id, facets_done: false, budget_done: false, limited: Limited::default(), door, counted: false, refused: false, check });
            (*c).handler = Some(STATE_MARK);
            *(*r).ctx.add(crate::module().ctx_index) = st as *mut c_void;
        }
        Some(id)
    }
}

/// The request's decision once its DNS verdict is known.
fn settle(st: &mut RequestState, mcf: &MainConf, v: DnsVerdict, source: Source) -> Identified {
    if let (Some(identity), Some(dns)) = (mcf.identity.as_ref(), mcf.dns.as_ref()) {
        let purpose = st.id.agent.map(|i| identity.catalogue.agents()[i].purpose);
        st.id.verdict = fcrdns::verdict_of(v, dns.unresolved);
        st.id.action = identity.ua_action(st.door, purpose, st.id.verdict);
    }
    st.id.dns = Some(v);
    st.id.dns_source = source;
    st.id
}

/// One line per DNS check, at info: what was claimed, what DNS said, and how.
///
/// # Safety
/// `r` must be a live request.
unsafe fn log_dns(r: *mut ngx_http_request_t, mcf: &MainConf, id: &Identified) {
    let name = id.agent.and_then(|i| mcf.identity.as_ref().map(|x| x.catalogue.agents()[i].name.as_str())).unwrap_or("-");
    let dns = id.dns.map_or("-", |d| d.as_str());
    // SAFETY: per the contract.
    let log = unsafe { (*(*r).connection).log };
    ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dns {dns} ({}) for agent \"{name}\", verdict {}", id.dns_source.as_str(), id.verdict);
}

unsafe extern "C" fn preaccess_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::guard(NGX_DECLINED as ngx_int_t, || {
        // SAFETY: nginx calls phase handlers with a live request of this http block.
        unsafe {
            let (mcf, lcf) = confs(r);
            // a subrequest is its main request's: decided and counted there
            if lcf.enabled != 1 || r != (*r).main {
                return NGX_DECLINED as ngx_int_t;
            }
            let Some(mut id) = identify(r) else { return NGX_DECLINED as ngx_int_t };
            // the request's state, once; none only if its pool ran out of memory, and then
            // the request is neither counted nor limited
            let st = state(r);
            if let Some(st) = st {
                if (*st).refused {
                    // refused already, now at its error_page: let the page answer
                    return NGX_DECLINED as ngx_int_t;
                }
                let check = (*st).check;
                if !check.is_null() && (id.dns.is_none() || (*check).phase != Phase::Done) {
                    let Some(v) = crate::dns::advance(r, check, mcf) else { return NGX_AGAIN as ngx_int_t };
                    id = settle(&mut *st, mcf, v, (*check).source);
                    log_dns(r, mcf, &id);
                }
            }
            // counted once, however often the phase runs
            if let (Some(counters), Some(st)) = (&mcf.counters, st) {
                if !(*st).counted {
                    (*st).counted = true;
                    counters.count(id.agent, id.verdict, id.action);
                }
            }
            if let Action::Block(status) = id.action {
                let name = id.agent.and_then(|i| mcf.identity.as_ref().map(|x| x.catalogue.agents()[i].name.as_str())).unwrap_or("-");
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
                Some(st) => {
                    let st = &mut *st;
                    let rc = limit(r, st, mcf, lcf, &id);
                    st.refused = rc != NGX_DECLINED as ngx_int_t;
                    rc
                }
                None => NGX_DECLINED as ngx_int_t,
            }
        }
    })
}

/// What the facet guard and the budgets found for a request, for the variables.
#[derive(Clone, Copy, Default)]
pub struct Limited {
    pub facet: Option<FacetOutcome>,
    pub budget: Option<Refusal>,
}

/// The request's facet and budget findings, once the access phase ran them.
///
/// # Safety
/// `r` must be a live request.
pub unsafe fn limited(r: *mut ngx_http_request_t) -> Option<Limited> {
    // SAFETY: per the contract.
    unsafe { state(r).map(|st| (*st).limited) }
}

/// Add `Retry-After: secs` to the response headers (kept on nginx's own 429 page).
///
/// # Safety
/// `r` must be a live request.
unsafe fn retry_after(r: *mut ngx_http_request_t, secs: u64) {
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
    if st.door == Door::Robots {
        return NGX_DECLINED as ngx_int_t;
    }
    // SAFETY: per the contract; the facet and budget confs live in the cycle's pool.
    unsafe {
        let log = (*(*r).connection).log;
        let dry = lcf.dry_run == 1;
        let identity = mcf.identity.as_deref();
        let agent = id.agent.and_then(|i| identity.map(|x| &x.catalogue.agents()[i]));
        let name = agent.map_or("-", |a| a.name.as_str());
        let path = (*r).uri.as_bytes();
        let query = (*r).args.as_bytes();
        if !st.facets_done && lcf.facets_set == 1 && !lcf.facets.is_null() {
            st.facets_done = true;
            let g = &*lcf.facets;
            if g.applies_to(path) {
                let referer = (*r).headers_in.referer;
                let referer = (!referer.is_null()).then(|| (*referer).value.as_bytes());
                let out = g.decide(id.verdict, query, referer);
                st.limited.facet = Some(out);
                if let Some(rule) = out.rule {
                    if let Some(counters) = &mcf.counters {
                        counters.facet_refused(rule, dry);
                    }
                    let what = format!("429 ({}): agent \"{name}\", verdict {}, {} parameters, {} facets", rule.as_str(), id.verdict, out.scan.params, out.scan.facets);
                    if !dry {
                        ngx_log_error!(NGX_LOG_INFO, log, "crawlward: refused with {what}");
                        retry_after(r, g.retry_after as u64);
                        return 429;
                    }
                    ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dry run, would refuse with {what}");
                }
            }
        }
        if !st.budget_done && lcf.budget_set == 1 && !lcf.budget.is_null() {
            st.budget_done = true;
            let b = &*lcf.budget;
            let get_or_head = (*r).method & (ngx::ffi::NGX_HTTP_GET | ngx::ffi::NGX_HTTP_HEAD) as usize != 0;
            if !budget::counted(get_or_head, st.door, id.verdict, b.limits.verified.is_some()) || signed_in(r, lcf) {
                return NGX_DECLINED as ngx_int_t;
            }
            let zone = &*b.zone;
            let Some(table) = zone.table.as_ref() else { return NGX_DECLINED as ngx_int_t };
            let mut name_buf = [0u8; NAME_MAX];
            let agents = identity.map_or(0, |x| x.catalogue.agents().len());
            let (agent_ref, scope, claim) = budget_key(r, id, agent, agents, &mut name_buf);
            let deep = identity.is_some_and(|x| is_deep(x, path, query));
            let ip = crate::net::client_ip(&*(*r).connection).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
            let counted = Counted { address: budget::address_key(ip), agent: agent_ref, deep, scope };
            let now = crate::now_ms() as u64;
            let shrink = crate::budget::shrink(zone);
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
                    retry_after(r, secs);
                    return 429;
                }
                ngx_log_error!(NGX_LOG_INFO, log, "crawlward: dry run, would refuse with {what}");
            }
        }
        NGX_DECLINED as ngx_int_t
    }
}

/// Which agent key and budgets a counted request goes to (see
/// `budget_table::claim_of`): a self-declared bot the catalogue does not name
/// (the generic catch-all) by its product token, written into `buf`; any
/// other by its agent's fixed slot for its claim; no User-Agent, by its slot.
///
/// # Safety
/// `r` must be a live request.
unsafe fn budget_key<'b>(
    r: *mut ngx_http_request_t,
    id: &Identified,
    agent: Option<&crawlward_policy::Agent>,
    agents: usize,
    buf: &'b mut [u8; NAME_MAX],
) -> (AgentRef<'b>, Scope, Claim) {
    let (Some(i), Some(a)) = (id.agent, agent) else {
        return (AgentRef::Pinned(budget_table::no_user_agent_slot(agents)), Scope::Crawler, Claim::Agent);
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
    (AgentRef::Pinned(budget_table::pinned_slot(i, claim)), scope, claim)
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
    let mut stack = [0u8; 512];
    if n <= stack.len() {
        join(&mut stack[..n]);
        identity.is_deep(&stack[..n])
    } else {
        let mut heap = vec![0u8; n];
        join(&mut heap);
        identity.is_deep(&heap)
    }
}
