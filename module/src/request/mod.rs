//! A request's facts, decided once and kept in its state: who is asking (the
//! agent, its verdict and action, the DNS check), the route it came by, what
//! the facet guard and the budgets found, and the layers nginx enforces with
//! the module's variables (the rate class, a place in the browse cap). The
//! preaccess handler, every variable and the log phase read them from here,
//! in whatever order nginx runs them; nothing is decided twice.
//!
//! The request path, in the order nginx meets it: [`preaccess`] (the
//! refusals, the facet guard, the budgets, the browse cap; it parks a request
//! on its [`dns`] check), [`variables`], [`headers`] (Retry-After on a
//! refusal), [`log`] (the responses counted), the [`status`] endpoint, and
//! [`robots`]: robots.txt from the kept copy when the application cannot answer.
//! Every entry point turns nginx's pointer into an `ngx::http::Request` once;
//! [`ext`] reads what that type does not say, so the path below is safe code.

pub mod browse;
pub mod dns;
pub mod ext;
pub mod headers;
pub mod ladder;
pub mod log;
pub mod preaccess;
pub mod quota;
pub mod robots;
pub mod signature;
pub mod status;
pub mod variables;

use crate::conf::MainConf;
use crate::request::dns::{Check, Source};
use crate::request::ext::{confs, RequestExt};
use crawlward_policy::budget::Refusal;
use crawlward_policy::fcrdns::{self, DnsVerdict};
use crawlward_policy::layers::ClassRef;
use crawlward_policy::query::FacetOutcome;
use crawlward_policy::ua_cache::{Classified, UaCache};
use crawlward_policy::verdict_cache::Lookup;
use crawlward_policy::{Action, Agent, Door, Verdict};
use ngx::ffi::{ngx_http_request_t, ngx_int_t, NGX_DECLINED};
use ngx::http::Request;
use std::borrow::Cow;
use std::ffi::c_void;
use std::net::IpAddr;

/// What the module decided about who is asking.
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
    /// For a bot the catalogue does not name (`unknown-bot`), where its
    /// product token is in the User-Agent (start, length): its name in
    /// `$crawlward_agent` and its crawl budget's name.
    pub token: Option<(usize, usize)>,
    /// Whether the verdict is provisional: a DNS check has yet to answer (in
    /// the preaccess handler), and the verdict and action may change then.
    pub pending: bool,
}

/// What the facet guard and the budgets found for a request, for the variables.
#[derive(Clone, Copy, Default)]
pub struct Limited {
    pub facet: Option<FacetOutcome>,
    pub budget: Option<Refusal>,
    /// Refused by the module's browse cap (`crawlward_browse_cap`).
    pub browse_cap: bool,
    /// Refused by the ladder (`crawlward_ladder`, enforce mode).
    pub ladder: bool,
    /// Refused for its signature (`crawlward_signatures`): a replay, or a path for signed agents.
    pub signature: Option<crawlward_policy::signature::Refusal>,
    /// Whether the facet guard's and the budgets' findings were made under
    /// `crawlward_dry_run` (each in its own location): they refused nothing,
    /// and name no refusal.
    pub facet_dry: bool,
    pub budget_dry: bool,
}

/// The layers nginx enforces with the module's variables.
#[derive(Clone, Copy)]
pub struct Layered {
    /// The rate class the request is counted in (`$crawlward_limit_class`).
    pub class: Option<ClassRef>,
    /// Whether it takes a place in the browse cap (`$crawlward_browse_key`).
    pub browse: bool,
}

// Pool memory is aligned to 8 bytes.
const _: () = assert!(std::mem::align_of::<RequestState>() <= 8);

/// What the module decided for a request, and whether it was counted.
///
/// It lives in the request's pool, pointed at from the slot of an indexed
/// variable of the module's own ([`state`]): unlike the module ctx, which
/// nginx clears on an internal redirect (try_files to a front controller,
/// error_page), a request's variables last as long as it does. So the
/// request is decided once, on the URI the client asked for, and counted
/// once, however often the phases run; a subrequest shares its main
/// request's variables and so its decision.
#[repr(C)]
pub struct RequestState {
    pub id: Identified,
    /// Whether the facet guard and the budgets ran (each once per request, in the first
    /// location that has it), and what they found.
    pub facets_done: bool,
    pub budget_done: bool,
    pub browse_done: bool,
    /// The pool's cleanup entry that gives the request's browse-cap place back, while it
    /// holds one; null once given back ([`browse`]).
    pub browse_place: browse::Place,
    pub limited: Limited,
    /// The route the client asked for, for the action once a DNS verdict arrives.
    pub door: Door,
    pub counted: bool,
    /// Whether the preaccess phase left the request waiting for its DNS verdict: a
    /// client that goes before the verdict comes is counted in the log phase.
    pub waiting: bool,
    /// Whether the module refused the request: an `error_page` that takes it to
    /// another location shows its page, and nothing is decided or spent again.
    pub refused: bool,
    /// The layers, once decided on a final verdict (as nginx's `map` decides a
    /// value once, on the `$uri` of the first read).
    pub layered: Option<Layered>,
    /// The DNS check, when the claim needs one and the cache had no verdict; else null.
    pub check: *mut Check,
    /// Where the ladder placed the request, once it did (`crawlward_ladder`).
    pub ladder: Option<ladder::Placed>,
    /// The request's Web Bot Auth signature (`crawlward_signatures`), if it has one.
    pub signature: Option<signature::Signed>,
    /// Whether the API quota ran (once per request), and what it found for an account.
    pub quota_done: bool,
    pub quota: Option<quota::Metered>,
    /// The account of the API key the request sent, once looked up.
    pub keyed: Option<Option<crawlward_policy::quota::KeyedAccount>>,
    /// Whether the preaccess phase left the ladder and the limits to the
    /// precontent phase (`crawlward_budget_signed_in`): a request refused in
    /// between is placed on the ladder in the log phase.
    pub deferred: bool,
}

/// The precontent phase's handler, after the access phase: the ladder and the
/// limits where a request may be signed in ([`preaccess::after_access`]),
/// then the API quota ([`quota::meter`]).
pub unsafe extern "C" fn precontent_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(NGX_DECLINED as ngx_int_t, || {
        // SAFETY: nginx calls phase handlers with a live request of this http block.
        let r = unsafe { Request::from_ngx_http_request(r) };
        match preaccess::after_access(r) {
            rc if rc == NGX_DECLINED as ngx_int_t => quota::meter(r).unwrap_or(NGX_DECLINED as ngx_int_t),
            rc => rc,
        }
    })
}

/// The cleanup of a request whose DNS check is in flight: cancels it.
unsafe extern "C" fn release_check(data: *mut c_void) {
    crate::base::guard((), || {
        // SAFETY: nginx runs the cleanup with the check we gave it, while the pool is being
        // destroyed; the check is in the same pool and still valid.
        unsafe { crate::request::dns::release(data as *mut Check) }
    })
}

/// The request's state, if it was identified: in the module's ctx slot, else
/// in the state variable's slot. nginx clears the module contexts on an
/// internal redirect or a named location, and also when a filter answers
/// with an error of its own (`ngx_http_filter_finalize_request`: the 412 of
/// an `If-Match` that a static file does not match), which does not make the
/// request internal; a subrequest has a ctx of its own and its main
/// request's variables.
pub fn state(r: &Request) -> Option<*mut RequestState> {
    let slot = r.module_ctx_slot();
    // SAFETY: the slot is the request's own, valid for its life.
    let ctx = unsafe { *slot };
    if !ctx.is_null() {
        return Some(ctx as *mut RequestState);
    }
    // SAFETY: a live request of this http block; the conf is not kept.
    let (mcf, _) = unsafe { confs(r) };
    // SAFETY: the index was taken for this http block; the slot's data is null, or the
    // state identify wrote in the request's pool.
    let st = unsafe { (*r.variable_slot(mcf.state_variable)).data } as *mut RequestState;
    if st.is_null() {
        return None;
    }
    // SAFETY: as above, the slot is the request's.
    unsafe { *slot = st as *mut c_void };
    Some(st)
}

/// Whether the request is signed in: one of the `crawlward_budget_signed_in`
/// variables (set by the server from a checked identity) is not empty.
pub fn signed_in(r: &Request, lcf: &crate::conf::LocConf) -> bool {
    lcf.signed_in_variables().iter().any(|&i| r.indexed_variable_set(i))
}

/// The request's path as the application sees it, its front controller's name
/// dropped (`site.front_controller`): what every path prefix is matched on.
pub fn app_path<'r>(r: &'r Request, mcf: &MainConf) -> &'r [u8] {
    let uri = r.uri();
    mcf.identity.as_deref().map_or(uri, |identity| identity.app_path(uri))
}

/// The name the module gives the client, in `$crawlward_agent` and its log
/// lines (`Catalogue::label`, as `explain` names it); "-" for none. `id` is
/// what the module decided for the request.
pub fn agent_label<'a>(r: &Request, mcf: &'a MainConf, id: &Identified) -> Cow<'a, str> {
    let Some(identity) = mcf.identity.as_ref() else { return Cow::Borrowed("-") };
    // the header is read (joined, when repeated) only for a token to cut from it
    let ua = if id.token.is_some() { r.user_agent_joined() } else { Cow::Borrowed(&[][..]) };
    let found = Classified { agent: id.agent, token: id.token };
    identity.catalogue.label(&ua, &found).unwrap_or(Cow::Borrowed("-"))
}

/// The request's facts: its state, made now if nothing asked before. None
/// without a catalogue, or when its pool is out of memory.
///
/// # Safety
/// The state is the request's, read and written by one worker thread: no
/// other reference to it may be held across this call or while the one
/// returned is used, and it must not be kept past the request.
pub unsafe fn facts<'a>(r: &Request) -> Option<&'a mut RequestState> {
    let st = match state(r) {
        Some(st) => st,
        None => match decide(r)? {
            Decided::Kept(st) => st,
            Decided::Unkept(_) => return None,
        },
    };
    // SAFETY: per the contract; the state lives in the request's pool.
    Some(unsafe { &mut *st })
}

/// Identify the request once; the variables, the preaccess and the log
/// handlers all call this, in whatever order nginx runs them. None without
/// a catalogue.
pub fn identify(r: &Request) -> Option<Identified> {
    let st = match state(r) {
        Some(st) => st,
        None => match decide(r)? {
            Decided::Kept(st) => st,
            Decided::Unkept(id) => return Some(id),
        },
    };
    // SAFETY: the state lives in the request's pool; only its id is copied.
    Some(unsafe { (*st).id })
}

/// What [`decide`] made of a request.
enum Decided {
    /// Its state, in its pool, which the state variable's and the ctx slots point at.
    Kept(*mut RequestState),
    /// Its decision, with no state to keep it in: the pool is out of memory.
    Unkept(Identified),
}

/// Decides who is asking, for a request that has no state yet, and keeps
/// the decision in a state made in its pool. None without a catalogue.
fn decide(r: &Request) -> Option<Decided> {
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, _) = unsafe { confs(r) };
    let identity = mcf.identity.as_ref()?;
    let ua = r.user_agent_joined();
    let Classified { agent: ua_agent, token } = classify(mcf, &ua);
    // a signature decides before the address: a verified signer named by the catalogue is
    // that agent, a broken signature a spoofed claim
    let signature = mcf.signatures.as_ref().and_then(|s| signature::check(r, s));
    // a directory the key file does not hold: counted for the status endpoint
    if let (Some(s), Some(counters), Some(keys)) = (signature, mcf.counters(), mcf.signatures.as_ref().map(|s| &s.keys)) {
        let agent = s.agent(r);
        if s.outcome == crawlward_policy::signature::Outcome::Unverified && !agent.is_empty() && keys.directory(agent).is_none() {
            counters.unknown_directory(agent);
        }
    }
    let decided = signature.and_then(|s| identity.signed(s.outcome, std::str::from_utf8(s.agent(r)).ok().filter(|a| !a.is_empty()), ua_agent));
    let (agent_index, token) = match decided {
        Some((named, _)) if named != ua_agent => (named, None),
        _ => (ua_agent, token),
    };
    let agent = agent_index.map(|i| &identity.catalogue.agents()[i]);
    // the address only where the verdict needs it: a claimed agent's the signature did not decide
    let ip = agent.filter(|_| decided.is_none()).map(|_| crate::net::client_ip(r.connection_ref()).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into()));
    let mut verdict = match decided {
        Some((_, v)) => v,
        None => identity.verdict(&ua, agent, ip.unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into())),
    };
    let door = identity.route(identity.app_path(r.uri()), verdict);
    let mut checked = DnsOfClaim { dns: None, source: Source::None, check: std::ptr::null_mut() };
    if let (Some(i), Some(a), Some(ip)) = (agent_index, agent, ip) {
        checked = dns_of_claim(r, mcf, i, a, ip, door, &mut verdict);
    }
    let DnsOfClaim { dns, source: dns_source, check } = checked;
    let action = identity.ua_action(door, agent.map(|a| a.purpose), verdict);
    let id = Identified { agent: agent_index, verdict, action, dns, dns_source, token, pending: !check.is_null() };
    let Some(st) = r.pool_alloc(std::mem::size_of::<RequestState>()) else {
        // no state, so no check either: it could not be cancelled
        // SAFETY: the check was just made, and nothing else knows it.
        unsafe { crate::request::dns::release(check) };
        return Some(Decided::Unkept(Identified { pending: false, ..id }));
    };
    // a check in flight is cancelled when the request goes, whatever state it is in then
    if !check.is_null() {
        let Some(c) = r.add_cleanup() else {
            // SAFETY: as above.
            unsafe { crate::request::dns::release(check) };
            return Some(Decided::Unkept(Identified { pending: false, ..id }));
        };
        c.set_with(Some(release_check), check as *mut c_void);
    }
    let st = st.as_ptr() as *mut RequestState;
    // SAFETY: a fresh pool allocation of size_of::<RequestState>() bytes, aligned for it
    // (asserted above).
    unsafe {
        st.write(RequestState {
            id,
            facets_done: false,
            budget_done: false,
            browse_done: false,
            browse_place: std::ptr::null_mut(),
            limited: Limited::default(),
            door,
            counted: false,
            waiting: false,
            refused: false,
            layered: None,
            check,
            ladder: None,
            signature,
            quota_done: false,
            quota: None,
            keyed: None,
            deferred: false,
        })
    };
    // SAFETY: the index was taken for this http block; the slot is the request's (and its
    // subrequests'), and only the module writes it: the variable is not changeable, so no
    // directive can set it, and NOHASH keeps its name from the setters that look names up
    // at run time.
    let home = unsafe { &mut *r.variable_slot(mcf.state_variable) };
    home.data = st as *mut u8;
    home.set_valid(1);
    home.set_not_found(0);
    // SAFETY: the request's own ctx slot.
    unsafe { *r.module_ctx_slot() = st as *mut c_void };
    Some(Decided::Kept(st))
}

/// What DNS says of a claim, so far.
struct DnsOfClaim {
    dns: Option<DnsVerdict>,
    source: Source,
    /// The check started, or null.
    check: *mut Check,
}

/// DNS for the claim of agent `i` from `ip`, where its verdict needs it: the
/// cached verdict, else the verdict is provisional (as if unresolved) and a
/// check starts, when the verdict can change what happens on `door`.
fn dns_of_claim(r: &Request, mcf: &MainConf, i: usize, a: &Agent, ip: IpAddr, door: Door, verdict: &mut Verdict) -> DnsOfClaim {
    let mut out = DnsOfClaim { dns: None, source: Source::None, check: std::ptr::null_mut() };
    let (Some(identity), Some(d)) = (mcf.identity.as_ref(), mcf.dns.as_ref()) else { return out };
    let Some(cache) = d.cache.as_ref().filter(|_| fcrdns::needs_dns(a, ip)) else { return out };
    let key = mcf.suffix_keys.get(i).copied().unwrap_or_default();
    let now = crate::base::now_ms() as u64;
    match cache.with(|t| t.lookup(ip, key, now)) {
        Lookup::Hit(v) => {
            (out.dns, out.source) = (Some(v), Source::Hit);
            *verdict = fcrdns::verdict_of(v, d.unresolved);
        }
        // provisional until the preaccess handler has the verdict: as if unresolved;
        // no lookup where the verdict cannot change what happens to the request
        _ => {
            *verdict = fcrdns::verdict_of(DnsVerdict::Unresolved, d.unresolved);
            if identity.verdict_matters(door, a.purpose) {
                out.check = crate::request::dns::new_check(r, i, key, ip);
                if out.check.is_null() {
                    (out.dns, out.source) = (Some(DnsVerdict::Unresolved), Source::Full);
                }
            }
        }
    }
    out
}

/// The agent a User-Agent names: none for one the matcher's pass turns
/// away (most browsers), else through the worker's memo.
fn classify(mcf: &MainConf, ua: &[u8]) -> Classified {
    let Some(identity) = mcf.identity.as_ref() else { return Classified::default() };
    // what identification reads (as the stock maps do, and explain)
    let ua = crawlward_policy::catalogue::read_part(ua);
    // the pass without its comparisons (most browsers stop there) and the memo: a
    // User-Agent the memo holds had a name or a needle when it was stored, and is
    // answered without looking for them again; on a miss, only such a User-Agent is kept
    // (the memo looks up a User-Agent that ends with a comment before the pass, a crawler's;
    // the pass for the others runs here, before the memo is borrowed)
    let may_match = |u: &[u8]| identity.catalogue.may_match_roughly(u);
    let passed = !UaCache::table_first(ua);
    if passed && !may_match(ua) {
        return Classified::default();
    }
    let classify = |u: &[u8]| identity.catalogue.identify(u);
    match mcf.ua_cache.try_borrow_mut() {
        Ok(mut cache) => cache.get_or_insert_with(Default::default).get_or_classify(ua, |u| passed || may_match(u), classify),
        Err(_) if passed || may_match(ua) => classify(ua).unwrap_or_default(),
        Err(_) => Classified::default(),
    }
}

/// Counts the request in the counters zone by its decision, once: in the
/// preaccess phase, or in the log phase for a client that left while the
/// request waited for its DNS verdict (on the provisional verdict).
pub fn count_once(st: &mut RequestState, counters: &crate::state::counters::Counters) {
    if !st.counted {
        st.counted = true;
        counters.count(st.id.agent, st.id.verdict, st.id.action);
        if let Some(signed) = st.signature {
            counters.signature(signed.outcome, signed.not_checked);
        }
    }
}

/// The request's decision once its DNS verdict is known.
pub fn settle(st: &mut RequestState, mcf: &MainConf, v: DnsVerdict, source: Source) -> Identified {
    if let (Some(identity), Some(dns)) = (mcf.identity.as_ref(), mcf.dns.as_ref()) {
        let purpose = st.id.agent.map(|i| identity.catalogue.agents()[i].purpose);
        st.id.verdict = fcrdns::verdict_of(v, dns.unresolved);
        st.id.action = identity.ua_action(st.door, purpose, st.id.verdict);
    }
    st.id.dns = Some(v);
    st.id.dns_source = source;
    st.id.pending = false;
    // decided on a provisional verdict: decide again on the final one
    st.layered = None;
    st.id
}

/// The request's rate class and place in the browse cap, decided once on
/// the final verdict and the `$uri` of that moment (what nginx's `limit_req`
/// and `limit_conn` see: they decide once per request, in the first location
/// that has them). None without the catalogue file's `layers`.
///
/// `st` is the request's state.
pub fn layered(r: &Request, st: &mut RequestState) -> Option<Layered> {
    if let Some(decided) = st.layered {
        return Some(decided);
    }
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, lcf) = unsafe { confs(r) };
    let path = app_path(r, mcf);
    let layers = mcf.identity.as_ref()?.layers.as_ref()?;
    let (id, dry_run) = (st.id, lcf.dry_run == 1);
    let mut decided =
        Layered { class: layers.rate_class(path, id.action, id.verdict, dry_run), browse: layers.in_browse_cap(path, id.action, id.verdict, dry_run) };
    // an API key from the keys file: the account's quota meters the request instead
    if decided.class.is_some() && lcf.quota().is_some_and(|q| quota::exempt_from_rate_class(r, mcf, q, st)) {
        decided.class = None;
    }
    if !id.pending {
        st.layered = Some(decided);
    }
    Some(decided)
}
