//! Forward-confirmed reverse DNS through nginx's own asynchronous resolver,
//! with the verdicts cached in a shared zone (`crawlward_dns_cache`).
//!
//! The decisions (suffixes on a label boundary, forward confirmation, what a
//! failure means, the cache's LRU, single flight and cap) are
//! `crawlward_policy::fcrdns` and `crawlward_policy::verdict_cache`; this file
//! only asks the resolver, keeps the request waiting in the preaccess phase, and
//! wakes it.
//!
//! A request that needs a lookup parks in the preaccess phase (the handler
//! answers NGX_AGAIN) with a [`Check`] in its pool. The request that starts
//! the lookup for an address starts a [`Flight`] on the heap, which owns the
//! lookup's ticket in the table; requests for the same address, in this
//! worker or another, poll the shared table until its verdict is there.
//! Every wait is bounded by `resolver_timeout`, counted from the request's
//! first look. The request is woken by posting the check's event, never by
//! re-entering the phase engine from inside a resolver callback. A client
//! that goes away while waiting finalizes the request; the pool's cleanup
//! then stops the timer and the posted event and detaches the lookup, which
//! completes and caches its verdict for the next request.

use crate::conf::MainConf;
use crate::request::ext::RequestExt;
use crate::state::dns_cache::Cache;
use crawlward_policy::fcrdns::{self, AfterPtr, Answer, DnsSettings, DnsVerdict};
use crawlward_policy::verdict_cache::{self, Begin, Lookup};
use ngx::ffi::{
    ngx_event_t, ngx_http_core_run_phases, ngx_http_event_handler_pt, ngx_http_request_t, ngx_http_run_posted_requests, ngx_http_test_reading, ngx_int_t,
    ngx_msec_t, ngx_posted_events, ngx_resolve_addr, ngx_resolve_addr_done, ngx_resolve_name, ngx_resolve_name_done, ngx_resolve_start, ngx_resolver_ctx_t,
    ngx_resolver_t, ngx_str_t, sockaddr, sockaddr_in, sockaddr_in6, socklen_t, NGX_LOG_WARN, NGX_OK, NGX_RESOLVE_NXDOMAIN,
};
use ngx::http::Request;
use ngx::ngx_log_error;
use std::ffi::c_void;
use std::net::IpAddr;
use std::ptr::{addr_of_mut, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};

/// How often a request waiting for another request's lookup looks again
/// (ms): first after POLL_FIRST, then twice as long each time up to POLL_MAX.
const POLL_FIRST: ngx_msec_t = 5;
const POLL_MAX: ngx_msec_t = 100;

/// Where the request's DNS check stands.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// The cache had nothing: the access handler starts or joins a lookup.
    Needed,
    /// The lookup this request started is in flight.
    InFlight,
    /// Another request's lookup for this address is in flight: poll the table.
    Waiting,
    Done,
}

/// Where the verdict came from, for `$crawlward_dns_cache` and the log.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// No DNS check for this request.
    None,
    /// A verdict in the cache.
    Hit,
    /// This request looked it up.
    Miss,
    /// Another request's lookup answered it.
    Wait,
    /// The cap on lookups in flight was reached: the unresolved policy.
    Capped,
    /// Every slot of the table holds a lookup in flight: the unresolved policy.
    Full,
    /// An IPv6 client and a resolver with `ipv6=off`: no lookup, the unresolved policy.
    NoIpv6,
    /// DNS failed (this request's lookup), or no lookup could start (the caps),
    /// and the address's verified verdict held on (`stale_verified`).
    Stale,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::None => "",
            Source::Hit => "hit",
            Source::Miss => "miss",
            Source::Wait => "wait",
            Source::Capped => "capped",
            Source::Full => "full",
            Source::NoIpv6 => "ipv6-off",
            Source::Stale => "stale",
        }
    }
}

/// A lookup in flight, on the heap rather than in a request's pool: it
/// belongs to no request, so it completes and caches its verdict however
/// early the request that started it ends (a client that claims Googlebot
/// and resets cannot make one query per request). It holds its own copy of
/// what it needs (address, suffixes, times, ticket); the resolver context's
/// `data` points at it, and its handlers free it once the verdict is in the
/// table. The request's check points at it while it waits, and it back at
/// the check; the request's cleanup detaches the two. A worker that exits
/// with lookups in flight lets nginx's resolver free their contexts
/// (`cancelable`, so the exit does not wait for them) and leaks nothing the
/// process outlives.
struct Flight {
    /// The waiting request's check; null once that request went, or stopped waiting.
    check: *mut Check,
    cache: *const Cache,
    settings: DnsSettings,
    /// The claimed agent's hostname suffixes.
    suffixes: Vec<String>,
    ip: IpAddr,
    checked_for: u32,
    ticket: u32,
    /// Whether it had the whole resolver_timeout: a lookup taken over late that runs out of
    /// time gives its address back instead of caching "unresolved".
    full_time: bool,
    deadline: ngx_msec_t,
    /// The client address as a sockaddr for the PTR lookup (the context points here).
    sa: sockaddr_in6,
    socklen: socklen_t,
    /// The PTR name being confirmed (the forward lookup's name points here).
    host: String,
}

impl Flight {
    /// The verdict is known: record it in the table (unless the lookup ran
    /// out of a shortened time), wake the waiting request if there is one,
    /// and free the flight.
    ///
    /// # Safety
    /// `flight` must come from `Box::into_raw`, with no resolver context of it in flight.
    unsafe fn complete(flight: *mut Flight, v: DnsVerdict) {
        // SAFETY: per the contract.
        let f = unsafe { Box::from_raw(flight) };
        // the verdict that holds: DNS's, or a verified one that holds on while DNS fails
        let mut held = (v, false);
        // SAFETY: the cache is the cycle's, and outlives every lookup.
        if let Some(cache) = unsafe { f.cache.as_ref() } {
            let now = crate::base::now_ms() as u64;
            held = if v == DnsVerdict::Unresolved && !f.full_time {
                // out of a time shortened by the wait before it: not DNS's verdict
                cache.with(|tb| tb.abandon(f.ip, f.checked_for, f.ticket, now, &f.settings))
            } else {
                cache.with(|tb| tb.finish(f.ip, f.checked_for, f.ticket, v, now, &f.settings))
            };
        }
        // SAFETY: the check, when not null, is live (its request's cleanup nulls this pointer).
        if let Some(ck) = unsafe { f.check.as_mut() } {
            ck.flight = null_mut();
            finish_async(ck, held.0, if held.1 { Source::Stale } else { Source::Miss });
        }
    }
}

// Pool memory is aligned to 8 bytes.
const _: () = assert!(std::mem::align_of::<Check>() <= 8);

/// One request's DNS check, in its pool. Plain data: the pool's cleanup
/// ([`release`]) stops its timer and detaches its lookup.
#[repr(C)]
pub struct Check {
    pub phase: Phase,
    pub source: Source,
    /// Set when phase is Done.
    pub verdict: DnsVerdict,
    /// Whether a lookup it starts has the whole resolver_timeout (not after a wait).
    full_time: bool,
    /// Whether the request is parked in the preaccess phase, waiting for this check's event:
    /// the event runs the phases only then.
    parked: bool,
    /// The next poll interval while waiting for another request's lookup.
    poll: ngx_msec_t,
    /// The table's key for the agent's suffixes (fcrdns::suffixes_key).
    checked_for: u32,
    /// The catalogue index of the claimed agent (its suffixes).
    agent: usize,
    ip: IpAddr,
    deadline: ngx_msec_t,
    /// The lookup this request started, while it waits for it.
    flight: *mut Flight,
    /// Whether the request's read handler watches for the client leaving, and the one it had before.
    watching: bool,
    saved_read: ngx_http_event_handler_pt,
    /// Timer (deadline or poll) and wake-up, in one event.
    ev: ngx_event_t,
}

fn sockaddr_of(ip: IpAddr) -> (sockaddr_in6, socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_in6 (and sockaddr_in inside it).
    let mut sa: sockaddr_in6 = unsafe { std::mem::zeroed() };
    match ip {
        IpAddr::V4(v4) => {
            // SAFETY: sockaddr_in (16 bytes) fits in sockaddr_in6 (28) and needs no more alignment.
            let sin = unsafe { &mut *(addr_of_mut!(sa) as *mut sockaddr_in) };
            sin.sin_family = ngx::ffi::AF_INET as _;
            sin.sin_addr.s_addr = u32::from(v4).to_be();
            (sa, std::mem::size_of::<sockaddr_in>() as socklen_t)
        }
        IpAddr::V6(v6) => {
            sa.sin6_family = ngx::ffi::AF_INET6 as _;
            sa.sin6_addr.__in6_u.__u6_addr8 = v6.octets();
            (sa, std::mem::size_of::<sockaddr_in6>() as socklen_t)
        }
    }
}

fn answer_of(state: ngx_int_t) -> Answer {
    match state {
        0 => Answer::Found,
        s if s == NGX_RESOLVE_NXDOMAIN as ngx_int_t => Answer::NotFound,
        _ => Answer::Failed,
    }
}

/// Whether the resolver asks for AAAA records (not `ipv6=off`).
///
/// # Safety
/// `resolver` must be a live resolver.
unsafe fn asks_aaaa(resolver: *const ngx_resolver_t) -> bool {
    // SAFETY: per the contract.
    let resolver = unsafe { &*resolver };
    // a bit field from nginx 1.23.1, a plain field before
    #[cfg(nginx1_23_1)]
    return resolver.ipv6() != 0;
    #[cfg(not(nginx1_23_1))]
    return resolver.ipv6 != 0;
}

/// Whether this worker has said why IPv6 claims are unresolved.
static IPV6_OFF_LOGGED: AtomicBool = AtomicBool::new(false);

/// Start a check for a request whose cache lookup missed: allocate it in the
/// request's pool. Null if the pool is out of memory.
pub fn new_check(r: &Request, agent: usize, checked_for: u32, ip: IpAddr) -> *mut Check {
    // SAFETY: a live request's pool is live.
    let check = unsafe { ngx::ffi::ngx_pcalloc(r.as_ref().pool, std::mem::size_of::<Check>()) } as *mut Check;
    if check.is_null() {
        return null_mut();
    }
    // an IPv4-mapped client is asked for by its IPv4 PTR name (in-addr.arpa)
    let ip = crawlward_policy::catalogue::canonical_ip(ip);
    // SAFETY: all-zero is a valid ngx_event_t (nginx's own events start as ngx_pcalloc's).
    let mut ev: ngx_event_t = unsafe { std::mem::zeroed() };
    // the main request: a check a subrequest's variable started is the main request's
    ev.data = r.as_ref().main as *mut c_void;
    ev.log = r.log();
    ev.handler = Some(wake_handler);
    let state = Check {
        phase: Phase::Needed,
        source: Source::Miss,
        verdict: DnsVerdict::Unresolved,
        full_time: true,
        parked: false,
        poll: POLL_FIRST,
        checked_for,
        agent,
        ip,
        deadline: 0,
        flight: null_mut(),
        watching: false,
        saved_read: None,
        ev,
    };
    // SAFETY: the allocation is sized and aligned for one Check (pool alignment 8 >= its
    // alignment, asserted above).
    unsafe { check.write(state) };
    check
}

/// The verdict for the request, or None while it must wait (the access handler
/// then answers NGX_AGAIN and is run again when the check's event fires).
///
/// # Safety
/// `r` must be in the preaccess phase and `check` its own check, to which no
/// reference is held across this call.
pub unsafe fn advance(r: &mut Request, check: *mut Check, mcf: &MainConf) -> Option<DnsVerdict> {
    // the request only as nginx's pointer from here: the resolver's callbacks and the
    // check's event reach it through theirs
    let r: *mut ngx_http_request_t = r.into();
    // SAFETY: per the contract; step holds no reference to the check when it returns.
    let v = unsafe { step(r, check, mcf) };
    // SAFETY: as above.
    let ck = unsafe { &mut *check };
    ck.parked = v.is_none();
    if v.is_some() {
        // nothing may run the phases again for this check: an answer that arrived while
        // something else resumed the request leaves its wake-up queued
        if ck.ev.posted() != 0 {
            // SAFETY: the event is the check's own, and posted.
            unsafe { ngx::ffi::ngx_delete_posted_event(&mut ck.ev) };
        }
        stop_timer(ck);
    }
    v
}

/// The check's timer, stopped if it runs.
fn stop_timer(ck: &mut Check) {
    if ck.ev.timer_set() != 0 {
        // SAFETY: the event is the check's own, in the request's pool; deleting an armed
        // timer is always allowed.
        unsafe { ngx::ffi::ngx_del_timer(&mut ck.ev) };
    }
}

/// One step of [`advance`].
///
/// # Safety
/// As for [`advance`], with `r` the request's pointer.
unsafe fn step(r: *mut ngx_http_request_t, check: *mut Check, mcf: &MainConf) -> Option<DnsVerdict> {
    // SAFETY: per the contract; read here, before anything in this call writes the request.
    let req = unsafe { &*(r as *const Request) };
    let (resolver, timeout, log) = (req.core_loc_conf().resolver, req.core_loc_conf().resolver_timeout.max(1), req.log());
    // SAFETY: per the contract.
    let ck = unsafe { &mut *check };
    let Some(dns) = mcf.dns.as_ref() else { return Some(DnsVerdict::Unresolved) };
    let Some(cache) = dns.cache.as_ref() else { return Some(DnsVerdict::Unresolved) };
    let t = crate::base::now_ms();
    let timed_out = ck.ev.timedout() != 0;
    ck.ev.set_timedout(0);
    loop {
        match ck.phase {
            Phase::Done => return Some(ck.verdict),
            Phase::Needed => {
                // NGX_NO_RESOLVER is (void *) -1: start_ptr answers unresolved for it
                let usable = !resolver.is_null() && resolver as isize != -1;
                // SAFETY: a usable resolver is the location's, live for the cycle.
                if ck.ip.is_ipv6() && usable && !unsafe { asks_aaaa(resolver) } {
                    // the forward lookup could never confirm the address: not spoofed, unresolved
                    if !IPV6_OFF_LOGGED.swap(true, Ordering::Relaxed) {
                        ngx_log_error!(
                            NGX_LOG_WARN,
                            log,
                            "crawlward: the resolver has ipv6=off, so claims from IPv6 addresses cannot be confirmed (no AAAA lookup) and are unresolved"
                        );
                    }
                    return Some(done(ck, DnsVerdict::Unresolved, Source::NoIpv6));
                }
                if ck.deadline == 0 {
                    ck.deadline = t + timeout;
                }
                let begin = cache.with(|tb| tb.begin(ck.ip, ck.checked_for, t as u64, ck.deadline as u64, verdict_cache::Caps::of(&dns.settings)));
                let ticket = match begin {
                    Begin::Hit(v) => {
                        let source = if ck.source == Source::Wait { Source::Wait } else { Source::Hit };
                        return Some(done(ck, v, source));
                    }
                    Begin::Started(ticket) => {
                        ck.source = Source::Miss;
                        Some(ticket)
                    }
                    Begin::Pending(_) => {
                        ck.phase = Phase::Waiting;
                        ck.source = Source::Wait;
                        None
                    }
                    Begin::Capped => return Some(done(ck, DnsVerdict::Unresolved, Source::Capped)),
                    Begin::Stale => return Some(done(ck, DnsVerdict::Verified, Source::Stale)),
                    Begin::Full => return Some(done(ck, DnsVerdict::Unresolved, Source::Full)),
                };
                if let Some(ticket) = ticket {
                    let suffixes =
                        mcf.identity.as_ref().and_then(|id| id.catalogue.agents().get(ck.agent)).map(|a| a.rdns_suffixes.clone()).unwrap_or_default();
                    let (sa, socklen) = sockaddr_of(ck.ip);
                    let flight = Box::into_raw(Box::new(Flight {
                        check,
                        cache,
                        settings: dns.settings,
                        suffixes,
                        ip: ck.ip,
                        checked_for: ck.checked_for,
                        ticket,
                        full_time: ck.full_time,
                        deadline: ck.deadline,
                        sa,
                        socklen,
                        host: String::new(),
                    }));
                    ck.flight = flight;
                    ck.phase = Phase::InFlight;
                    // `ck` is not used across this call: the resolver may answer from its own
                    // cache and run our handler, which completes the check through its pointer
                    // SAFETY: the flight was just boxed, and nothing of it is in flight.
                    unsafe { start_ptr(flight, resolver) };
                }
                // SAFETY: per the contract; the handler holds no reference to it now.
                let ck = unsafe { &mut *check };
                if ck.phase == Phase::Done {
                    // the resolver answered before returning
                    if ck.ev.posted() != 0 {
                        // SAFETY: the event is the check's own, and posted.
                        unsafe { ngx::ffi::ngx_delete_posted_event(&mut ck.ev) };
                    }
                    return Some(ck.verdict);
                }
                // SAFETY: per the contract, r is the check's live request.
                unsafe { start_waiting(r, ck) };
                arm(ck, t);
                return None;
            }
            Phase::InFlight => {
                if timed_out || t >= ck.deadline {
                    // the request goes on; the lookup ends at the same deadline and caches its verdict
                    detach(ck);
                    return Some(done(ck, DnsVerdict::Unresolved, Source::Miss));
                }
                arm(ck, t);
                return None;
            }
            Phase::Waiting => {
                match cache.with(|tb| tb.lookup(ck.ip, ck.checked_for, t as u64)) {
                    Lookup::Hit(v) => return Some(done(ck, v, Source::Wait)),
                    Lookup::Pending(_) if t < ck.deadline => {
                        arm(ck, t);
                        return None;
                    }
                    Lookup::Pending(_) => return Some(done(ck, DnsVerdict::Unresolved, Source::Wait)),
                    // the lookup was given up: look it up ourselves if at least half of
                    // resolver_timeout is left (the request's wait stays bounded by it)
                    Lookup::Miss if ck.deadline.saturating_sub(t) >= timeout / 2 => {
                        ck.phase = Phase::Needed;
                        ck.full_time = false;
                    }
                    Lookup::Miss => return Some(done(ck, DnsVerdict::Unresolved, Source::Wait)),
                }
            }
        }
    }
}

/// Arm the check's timer: the deadline while a lookup of ours is in flight, a short poll while waiting for another's.
fn arm(ck: &mut Check, t: ngx_msec_t) {
    let left = ck.deadline.saturating_sub(t).max(1);
    let after = if ck.phase == Phase::Waiting {
        let poll = ck.poll;
        ck.poll = (ck.poll * 2).min(POLL_MAX);
        left.min(poll)
    } else {
        left
    };
    // an armed timer is deleted first: ngx_add_timer keeps one within 300 ms of the new time
    stop_timer(ck);
    // SAFETY: the event lives in the request's pool until the pool's cleanup deletes its timer.
    unsafe { ngx::ffi::ngx_add_timer(&mut ck.ev, after) };
}

/// While the request waits, notice a client that closes the connection.
///
/// # Safety
/// `r` must be the check's live request, with no reference to it live.
unsafe fn start_waiting(r: *mut ngx_http_request_t, ck: &mut Check) {
    if !ck.watching {
        ck.watching = true;
        // SAFETY: per the contract.
        let r = unsafe { &mut *r };
        ck.saved_read = r.read_event_handler;
        r.read_event_handler = Some(ngx_http_test_reading);
    }
}

/// The verdict is known for the request: stop the timer, and leave the request to resume.
fn done(ck: &mut Check, v: DnsVerdict, source: Source) -> DnsVerdict {
    ck.phase = Phase::Done;
    ck.verdict = v;
    ck.source = source;
    stop_timer(ck);
    if ck.watching {
        ck.watching = false;
        // SAFETY: ev.data is the check's request, live while its pool is.
        unsafe { (*(ck.ev.data as *mut ngx_http_request_t)).read_event_handler = ck.saved_read };
    }
    v
}

/// Finish from a resolver callback: record the verdict and post the event, so
/// the request resumes from the event loop, not from inside the resolver.
fn finish_async(ck: &mut Check, v: DnsVerdict, source: Source) {
    done(ck, v, source);
    // SAFETY: the event lives in the request's pool; the cleanup unposts it.
    let posted = addr_of_mut!(ngx_posted_events);
    // SAFETY: as above.
    unsafe { ngx::ffi::ngx_post_event(&mut ck.ev, posted) };
}

/// The request stops waiting for its lookup, which goes on without it.
fn detach(ck: &mut Check) {
    // SAFETY: a flight the check points at is live (it nulls this pointer when it completes).
    if let Some(f) = unsafe { ck.flight.as_mut() } {
        f.check = null_mut();
    }
    ck.flight = null_mut();
}

/// A resolver context for the flight, with its handler, its data and the
/// time left; None (the lookup completed, unresolved) when none can start.
///
/// # Safety
/// As for [`start_ptr`].
unsafe fn context_for(
    flight: *mut Flight,
    resolver: *mut ngx_resolver_t,
    handler: ngx::ffi::ngx_resolver_handler_pt,
) -> Option<&'static mut ngx_resolver_ctx_t> {
    // NGX_NO_RESOLVER is (void *) -1 (no `resolver` servers): never dereferenced
    if resolver.is_null() || resolver as isize == -1 {
        // SAFETY: per the contract.
        unsafe { Flight::complete(flight, DnsVerdict::Unresolved) };
        return None;
    }
    // SAFETY: a live resolver of the location.
    let ctx = unsafe { ngx_resolve_start(resolver, null_mut()) };
    if ctx.is_null() || ctx as isize == -1 {
        // SAFETY: per the contract.
        unsafe { Flight::complete(flight, DnsVerdict::Unresolved) };
        return None;
    }
    // SAFETY: a context nginx just made, ours until it is handed back (or nginx frees it on
    // an error of the lookup's start).
    let ctx = unsafe { &mut *ctx };
    ctx.handler = handler;
    ctx.data = flight as *mut c_void;
    // SAFETY: per the contract, the flight is live.
    ctx.timeout = unsafe { (*flight).deadline }.saturating_sub(crate::base::now_ms()).max(1);
    ctx.set_cancelable(1);
    Some(ctx)
}

/// Ask for the client address's PTR name. On any failure to start, the lookup completes (unresolved).
///
/// # Safety
/// `flight` must come from `Box::into_raw` and have nothing in flight; no reference to it
/// or its check may be live across this call (the handler may run before it returns).
unsafe fn start_ptr(flight: *mut Flight, resolver: *mut ngx_resolver_t) {
    // SAFETY: per the contract.
    let Some(ctx) = (unsafe { context_for(flight, resolver, Some(ptr_handler)) }) else { return };
    // the ctx's addr points into the flight, which lives until its handler is done with the ctx
    ctx.addr.sockaddr = addr_of_mut!((*flight).sa) as *mut sockaddr;
    // SAFETY: per the contract, the flight is live.
    ctx.addr.socklen = unsafe { (*flight).socklen };
    // SAFETY: a context ready for the lookup; on an error nginx has freed it.
    if unsafe { ngx_resolve_addr(ctx) } != NGX_OK as ngx_int_t {
        // SAFETY: per the contract.
        unsafe { Flight::complete(flight, DnsVerdict::Unresolved) };
    }
}

/// Look the PTR name, now under a suffix, up (A/AAAA).
///
/// # Safety
/// As for [`start_ptr`].
unsafe fn start_forward(flight: *mut Flight, resolver: *mut ngx_resolver_t) {
    // SAFETY: per the contract.
    let Some(ctx) = (unsafe { context_for(flight, resolver, Some(forward_handler)) }) else { return };
    // ctx->name points at the flight's host, unchanged until the handler is done with the ctx
    // SAFETY: per the contract, the flight is live.
    let host = unsafe { &(*flight).host };
    ctx.name = ngx_str_t { len: host.len(), data: host.as_ptr() as *mut u8 };
    // SAFETY: a context ready for the lookup; on an error nginx has freed it.
    if unsafe { ngx_resolve_name(ctx) } != NGX_OK as ngx_int_t {
        // SAFETY: per the contract.
        unsafe { Flight::complete(flight, DnsVerdict::Unresolved) };
    }
}

unsafe extern "C" fn ptr_handler(ctx: *mut ngx_resolver_ctx_t) {
    crate::base::guard((), || {
        // SAFETY: nginx calls the handler with the ctx we started, whose data is its flight.
        let c = unsafe { &*ctx };
        let answer = answer_of(c.state);
        // the name is valid until the ctx is handed back, so it is copied first
        let name = if answer == Answer::Found { c.name.as_bytes().to_vec() } else { Vec::new() };
        let (resolver, flight) = (c.resolver, c.data as *mut Flight);
        // SAFETY: handed back while the flight (which its addr points into) is still there.
        unsafe { ngx_resolve_addr_done(ctx) };
        // No reference to the flight is held across start_forward, whose handler may run
        // before it returns.
        // SAFETY: the flight is live until completed, and nothing else refers to it now.
        let suffixes = unsafe { &(*flight).suffixes };
        match fcrdns::after_ptr(answer, &name, suffixes) {
            AfterPtr::Forward(host) => {
                // SAFETY: as above.
                unsafe { (*flight).host = host };
                // SAFETY: the flight has nothing in flight now.
                unsafe { start_forward(flight, resolver) };
            }
            // SAFETY: as above.
            AfterPtr::Done(v) => unsafe { Flight::complete(flight, v) },
        }
    })
}

unsafe extern "C" fn forward_handler(ctx: *mut ngx_resolver_ctx_t) {
    crate::base::guard((), || {
        // SAFETY: nginx calls the handler with the ctx we started, whose data is its flight.
        let c = unsafe { &*ctx };
        let answer = answer_of(c.state);
        let mut addrs = Vec::new();
        if answer == Answer::Found && !c.addrs.is_null() {
            // SAFETY: addrs holds naddrs answers until ngx_resolve_name_done.
            for a in unsafe { std::slice::from_raw_parts(c.addrs, c.naddrs) } {
                // SAFETY: each answer's sockaddr holds socklen bytes.
                addrs.extend(unsafe { crate::net::ip_of_sockaddr(a.sockaddr, a.socklen) });
            }
        }
        let flight = c.data as *mut Flight;
        // SAFETY: the ctx is handed back once its answers are copied.
        unsafe { ngx_resolve_name_done(ctx) };
        // SAFETY: the flight is live until completed.
        let v = fcrdns::after_forward(answer, &addrs, unsafe { (*flight).ip });
        // SAFETY: as above; nothing of it is in flight now.
        unsafe { Flight::complete(flight, v) };
    })
}

/// The check's event: a timer (deadline or poll) or a wake-up after a verdict.
/// Runs the request's phases again; the access handler finds the check's new state.
unsafe extern "C" fn wake_handler(ev: *mut ngx_event_t) {
    // the event is the check's own `ev` field (only new_check sets this handler, on a check's
    // `ev`): the check is found from it
    let check = ev.wrapping_byte_sub(std::mem::offset_of!(Check, ev)) as *mut Check;
    // SAFETY: as above, a live check in its request's pool (the pool's cleanup removes the
    // event before the request goes).
    let ck = unsafe { &mut *check };
    // only a request parked in the preaccess phase by this check is resumed (advance clears
    // the flag, and the event, once the check is done)
    if !ck.parked {
        return;
    }
    ck.parked = false;
    let r = ck.ev.data as *mut ngx_http_request_t;
    // the request may be finalized and freed inside run_phases: only the connection, read
    // first, is used after it
    // SAFETY: ev.data is the check's live request.
    let c = unsafe { (*r).connection };
    // SAFETY: as above; no reference to the check is used from here.
    unsafe { ngx_http_core_run_phases(r) };
    // SAFETY: the connection outlives its requests' phases (nginx's own resume does this).
    unsafe { ngx_http_run_posted_requests(c) };
}

/// The pool's cleanup: the request is going (finished, or its client went
/// away). Stop the timer and the posted wake-up; a lookup it started goes on
/// without it and caches its verdict.
///
/// # Safety
/// `check` must be null or a check whose request pool is being destroyed (or one
/// that nothing else knows yet).
pub unsafe fn release(check: *mut Check) {
    // SAFETY: per the contract.
    let Some(ck) = (unsafe { check.as_mut() }) else { return };
    detach(ck);
    stop_timer(ck);
    if ck.ev.posted() != 0 {
        // SAFETY: the event is the check's own, and posted.
        unsafe { ngx::ffi::ngx_delete_posted_event(&mut ck.ev) };
    }
}
