//! Crawl budgets in shared zones (seed 003): `crawlward_budget_zone` declares
//! a zone, `crawlward_budget` the three budgets of a location, and
//! `crawlward_budget_signed_in` the variables that mark a signed-in request
//! (never counted). The arithmetic is `crawlward_policy::budget` and the
//! table `crawlward_policy::budget_table`; this file holds the zone and the
//! per-worker clock of event-loop lag.

use crate::conf::{add_zone, args, conf_error, conf_ok, text, LocConf, MainConf};
use crawlward_policy::budget::{BudgetLimits, LagMeter, Limits};
use crawlward_policy::budget_table::{layout, Entry, Header, Key, Table};
use crawlward_policy::fcrdns::parse_time;
use crawlward_policy::sync::StoreUrl;
use ngx::core::Pool;
use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_cycle_t, ngx_event_t, ngx_http_conf_ctx_t, ngx_http_get_variable_index, ngx_int_t, ngx_msec_t, ngx_shm_zone_t, ngx_str_t,
    NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_OK,
};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU64, Ordering};

/// A zone declared by `crawlward_budget_zone`.
pub struct BudgetZone {
    pub name: String,
    pub max_names: u32,
    /// Event-loop lag (ms, averaged) above which every budget shrinks; 0: never.
    pub lag_ms: ngx_msec_t,
    pub shrink: u32,
    /// The window lengths the zone's locations use (address, agent, shared; general
    /// and deep): the first `crawlward_budget` on the zone sets them, the others must
    /// match, since a key's window is rolled by its length.
    pub windows: Option<[u64; 6]>,
    /// Likewise for `verified=`, among the locations that set it (a verified crawler's
    /// slot is counted only where it is set, and no other budget uses that slot).
    pub verified_windows: Option<[u64; 2]>,
    /// The keys of the fixed slots (the catalogue's agents), set at the end of the
    /// http block (handler::postconfiguration), laid out by the zone's init.
    pub pinned: Vec<Key>,
    /// The table in the zone, set by the zone's init before workers start.
    pub table: Option<BudgetShm>,
    /// `sync=`: the store the zone's counts are shared through.
    pub sync: Option<SyncConf>,
    /// This configuration's generation for the zone's sync (the zone's init
    /// counts reloads), so that a reload's new workers take the sync over.
    pub generation: u64,
    /// Whether a `crawlward_browse_cap` counts in the zone (its count is then synced too).
    pub browse_cap: bool,
}

/// A location's browse cap (`crawlward_browse_cap`).
pub struct BrowseCapLoc {
    pub zone: *const BudgetZone,
    pub max: u32,
}

/// A zone's `sync=`, `sync_interval=`, `sync_timeout=` and `nodes=`.
pub struct SyncConf {
    pub url: StoreUrl,
    /// The store's address, resolved when the configuration is read (as nginx
    /// does for an upstream's names), and its text for nginx's logs.
    pub addr: PeerAddr,
    pub name: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    /// Nodes sharing the budgets: each divides them by it while the store does not answer.
    pub nodes: u32,
}

/// A socket address in the form nginx's connect takes.
pub enum PeerAddr {
    V4(ngx::ffi::sockaddr_in),
    V6(ngx::ffi::sockaddr_in6),
}

impl PeerAddr {
    fn new(a: std::net::SocketAddr) -> PeerAddr {
        match a {
            std::net::SocketAddr::V4(v4) => {
                // SAFETY: all-zero is a valid sockaddr_in (plain integers); the fields that matter are set.
                let mut sin: ngx::ffi::sockaddr_in = unsafe { std::mem::zeroed() };
                sin.sin_family = ngx::ffi::AF_INET as _;
                sin.sin_port = v4.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
                PeerAddr::V4(sin)
            }
            std::net::SocketAddr::V6(v6) => {
                // SAFETY: as for sockaddr_in.
                let mut sin6: ngx::ffi::sockaddr_in6 = unsafe { std::mem::zeroed() };
                sin6.sin6_family = ngx::ffi::AF_INET6 as _;
                sin6.sin6_port = v6.port().to_be();
                sin6.sin6_addr.__in6_u.__u6_addr8 = v6.ip().octets();
                sin6.sin6_scope_id = v6.scope_id();
                PeerAddr::V6(sin6)
            }
        }
    }

    pub fn as_ptr(&self) -> *const ngx::ffi::sockaddr {
        match self {
            PeerAddr::V4(a) => a as *const _ as *const ngx::ffi::sockaddr,
            PeerAddr::V6(a) => a as *const _ as *const ngx::ffi::sockaddr,
        }
    }

    pub fn len(&self) -> ngx::ffi::socklen_t {
        (match self {
            PeerAddr::V4(_) => std::mem::size_of::<ngx::ffi::sockaddr_in>(),
            PeerAddr::V6(_) => std::mem::size_of::<ngx::ffi::sockaddr_in6>(),
        }) as ngx::ffi::socklen_t
    }
}

/// The clock a zone's windows are kept by: nginx's monotonic clock, or with
/// sync the wall clock, so that every node's windows start together and name
/// the same keys in the store (NTP-synced clocks; the error a skew adds is in
/// docs/module.md).
pub fn clock_ms(zone: &BudgetZone) -> u64 {
    if zone.sync.is_some() {
        crate::sync::wall_ms()
    } else {
        crate::now_ms() as u64
    }
}

/// The zone's layout; the version is bumped when a field changes meaning without changing a
/// size (5: keys hashed over their used bytes only, so a zone laid out by 4 is laid out again).
pub static LAYOUT: crawlward_policy::layout::Fingerprint = crate::shm::fingerprint::<Header, Entry>(crawlward_policy::layout::Kind::Budgets, 5);

/// The zone's fingerprint for a set of fixed slots: [`LAYOUT`] with the
/// catalogue's agents (names and order) in its contents field, so that a
/// reload with another catalogue lays the table out again rather than
/// counting an agent in a slot laid out for another; and whether it is
/// synced, since that changes the clock its windows are kept by.
fn fingerprint(pinned: &[Key], synced: bool) -> crawlward_policy::layout::Fingerprint {
    let start = if synced { 0x5eed_5eedu32 } else { 0x811c_9dc5 };
    let hash = pinned.iter().flatten().fold(start, |h, b| (h ^ *b as u32).wrapping_mul(0x0100_0193));
    crawlward_policy::layout::Fingerprint { contents: hash, ..LAYOUT }
}

/// This cycle's view of a budget zone's table.
pub struct BudgetShm(crate::shm::Table<Header, Entry>);

impl BudgetShm {
    /// Runs `f` on the table under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.0.with(|h, b, e| f(&mut Table::attach(h, b, e)))
    }

    pub fn zone_size(&self) -> usize {
        self.0.zone_size
    }
}

/// A location's budgets (`crawlward_budget`).
pub struct BudgetLoc {
    pub zone: *const BudgetZone,
    pub limits: BudgetLimits,
}

/// `crawlward_budget_zone zone=name:size [agents=256] [lag=50ms] [shrink=4]
/// [sync=valkey://host:port[/db] nodes=N [sync_interval=100ms] [sync_timeout=1s]];`
pub unsafe extern "C" fn set_budget_zone(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::guard(conf_error(), || {
        // SAFETY: conf is our MainConf.
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        // SAFETY: inside a directive handler.
        let words: Vec<String> = unsafe { args(cf) }.iter().skip(1).map(text).collect();
        let mut z = BudgetZone {
            name: String::new(),
            max_names: 256,
            lag_ms: 50,
            shrink: 4,
            windows: None,
            verified_windows: None,
            pinned: Vec::new(),
            table: None,
            sync: None,
            generation: 0,
            browse_cap: false,
        };
        let mut spec = None;
        let (mut store, mut interval, mut timeout, mut nodes) = (None, None, None, None);
        for w in &words {
            let bad = |why: &str| {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_budget_zone\" directive: {why}");
                conf_error()
            };
            let Some((key, value)) = w.split_once('=') else { return bad("expected name=value") };
            match key {
                "zone" => spec = Some(value.to_string()),
                "agents" => match value.parse::<u32>() {
                    Ok(n) if (1..=65_536).contains(&n) => z.max_names = n,
                    _ => return bad("expected a number of agent names from 1 to 65536"),
                },
                "lag" => match value {
                    "off" => z.lag_ms = 0,
                    _ => match parse_time(value).filter(|ms| *ms >= 1 && *ms <= 60_000) {
                        Some(ms) => z.lag_ms = ms as ngx_msec_t,
                        None => return bad("expected a time from 1ms to 60s, or off"),
                    },
                },
                "shrink" => match value.parse::<u32>() {
                    Ok(n) if (1..=1000).contains(&n) => z.shrink = n,
                    _ => return bad("expected a factor from 1 to 1000"),
                },
                "sync" => match StoreUrl::parse(value) {
                    Ok(u) => store = Some(u),
                    Err(why) => return bad(why),
                },
                "sync_interval" => match parse_time(value).filter(|ms| (10..=10_000).contains(ms)) {
                    Some(ms) => interval = Some(ms),
                    None => return bad("expected a time from 10ms to 10s"),
                },
                "sync_timeout" => match parse_time(value).filter(|ms| (10..=60_000).contains(ms)) {
                    Some(ms) => timeout = Some(ms),
                    None => return bad("expected a time from 10ms to 60s"),
                },
                "nodes" => match value.parse::<u32>() {
                    Ok(n) if (1..=1000).contains(&n) => nodes = Some(n),
                    _ => return bad("expected a number of nodes from 1 to 1000"),
                },
                _ => return bad("unknown parameter"),
            }
        }
        let Some(spec) = spec else {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget_zone\" directive needs zone=name:size");
            return conf_error();
        };
        match (store, nodes) {
            (Some(url), Some(nodes)) => {
                let resolved = std::net::ToSocketAddrs::to_socket_addrs(&(url.host.as_str(), url.port)).ok().and_then(|mut a| a.next());
                let Some(addr) = resolved else {
                    ngx_conf_log_error!(NGX_LOG_EMERG, cf, "host not found in \"sync={url}\" of the \"crawlward_budget_zone\" directive");
                    return conf_error();
                };
                z.sync = Some(SyncConf {
                    name: addr.to_string(),
                    addr: PeerAddr::new(addr),
                    url,
                    interval_ms: interval.unwrap_or(100),
                    timeout_ms: timeout.unwrap_or(1000),
                    nodes,
                });
            }
            (Some(_), None) => {
                ngx_conf_log_error!(
                    NGX_LOG_EMERG,
                    cf,
                    "\"crawlward_budget_zone\" directive with sync= needs nodes=N: the nodes sharing the budgets, which each divides them by while the store does not answer"
                );
                return conf_error();
            }
            (None, _) if interval.is_some() || timeout.is_some() || nodes.is_some() => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget_zone\" directive: sync_interval=, sync_timeout= and nodes= need sync=");
                return conf_error();
            }
            (None, _) => {}
        }
        if mcf.budget_zones.iter().any(|b| spec.split(':').next() == Some(b.name.as_str())) {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "duplicate zone \"{spec}\" in \"crawlward_budget_zone\" directive");
            return conf_error();
        }
        let mut boxed = Box::new(z);
        // the zone's data is the BudgetZone: boxed, so its address stays put as zones are added
        let data = &mut *boxed as *mut BudgetZone as *mut c_void;
        // SAFETY: inside a directive handler.
        let Some((shm, name)) = (unsafe { add_zone(cf, &LAYOUT, &spec, data) }) else { return conf_error() };
        // SAFETY: shm is a valid entry of the cycle's shared memory list.
        unsafe { (*shm).init = Some(init_zone) };
        boxed.name = name;
        mcf.budget_zones.push(boxed);
        conf_ok()
    })
}

/// The zone's init: in the master, at start and on every reload, before workers fork.
/// A zone kept over a reload (same name and size) keeps its counts.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data is our boxed BudgetZone.
        let (z, log) = unsafe { (&mut *((*zone).data as *mut BudgetZone), (*zone).shm.log) };
        let max_names = z.max_names;
        let pinned = &z.pinned;
        // the keys' hash seed: random, for a zone laid out now (a kept zone keeps its own)
        let hash_seed = crawlward_policy::random_u64();
        // SAFETY: the zone nginx passes to its init.
        let opened = unsafe {
            crate::shm::Table::open(
                zone,
                &fingerprint(pinned, z.sync.is_some()),
                |bytes| layout(bytes, pinned.len()),
                Header::empty(max_names),
                Entry::EMPTY,
                |h, b, e| {
                    Table::init(h, b, e, max_names, pinned, hash_seed);
                },
            )
        };
        let nodes = z.sync.as_ref().map(|s| s.nodes);
        // the node's name in the store's browse hash: random, made with the zone
        let node = crawlward_policy::random_u64() | 1;
        let start_sync = |t: &crate::shm::Table<Header, Entry>| {
            t.with(|h, b, e| {
                if h.browse.node == 0 {
                    h.browse.node = node;
                }
                let mut t = Table::attach(h, b, e);
                if let Some(nodes) = nodes {
                    t.start_sync(nodes, crate::sync::wall_ms());
                }
                t.next_generation()
            })
        };
        match opened {
            Ok(crate::shm::Opened::Kept(t)) => {
                // the name bound is this configuration's
                t.with(|h, _, _| h.max_names = max_names);
                z.generation = start_sync(&t);
                z.table = Some(BudgetShm(t));
            }
            Ok(crate::shm::Opened::Made(t, entries)) => {
                ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_budget_zone \"{}\": room for {entries} keys", z.name);
                z.generation = start_sync(&t);
                z.table = Some(BudgetShm(t));
            }
            Ok(crate::shm::Opened::Relaid(t, entries)) => {
                ngx_log_error!(
                    NGX_LOG_NOTICE,
                    log,
                    "crawlward_budget_zone \"{}\": the catalogue's agents changed, so their fixed slots are laid out again and the budgets start over; room for {entries} keys",
                    z.name
                );
                z.generation = start_sync(&t);
                z.table = Some(BudgetShm(t));
            }
            Err(e) => {
                // say what would fit: the fixed slots and the shared keys, in pages, and the zone's own
                let need = crawlward_policy::budget_table::min_bytes(pinned.len()) + 8 * ngx_pagesize_bytes();
                ngx_log_error!(
                    NGX_LOG_EMERG,
                    log,
                    "crawlward_budget_zone \"{}\" {e}: the catalogue's {} fixed slots need at least {}k",
                    z.name,
                    pinned.len(),
                    need.div_ceil(1024)
                );
                return ngx::ffi::NGX_ERROR as ngx_int_t;
            }
        }
        NGX_OK as ngx_int_t
    })
}

/// nginx's page size.
fn ngx_pagesize_bytes() -> usize {
    // SAFETY: ngx_pagesize is set once at startup, before any zone is laid out.
    unsafe { ngx::ffi::ngx_pagesize }
}

/// `crawlward_budget zone=name [address=G,D] [agent=G,D] [shared=G,D] [verified=G,D] | off;`
pub unsafe extern "C" fn set_budget(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::guard(conf_error(), || {
        // SAFETY: conf is our LocConf.
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if lcf.budget_set != -1 {
            return c"is duplicate".as_ptr() as *mut c_char;
        }
        // SAFETY: inside a directive handler.
        let words: Vec<String> = unsafe { args(cf) }.iter().skip(1).map(text).collect();
        if words == ["off"] {
            lcf.budget_set = 0;
            return conf_ok();
        }
        // SAFETY: in a location, cf->ctx is an http conf ctx holding our main conf.
        let mcf = unsafe { crate::conf::main_conf_of_cf(cf) };
        let mut limits = BudgetLimits::SEED_003;
        let mut zone: Option<usize> = None;
        for w in &words {
            let bad = |why: &str| {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_budget\" directive: {why}");
                conf_error()
            };
            let Some((key, value)) = w.split_once('=') else { return bad("expected name=value, or off") };
            match key {
                "zone" => match mcf.budget_zones.iter().position(|z| z.name == value) {
                    Some(i) => zone = Some(i),
                    None => return bad("no such zone: declare it with \"crawlward_budget_zone\" at the http level first"),
                },
                "address" | "agent" | "shared" | "verified" => {
                    let Some(l) = Limits::parse(value) else { return bad("expected general,deep rates, e.g. 60r/m,6r/m (r/s, r/m, r/h or r/d)") };
                    match key {
                        "address" => limits.address = l,
                        "agent" => limits.agent = l,
                        "shared" => limits.shared = l,
                        _ => limits.verified = Some(l),
                    }
                }
                _ => return bad("unknown parameter"),
            }
        }
        let Some(zone) = zone else {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget\" directive needs zone=name");
            return conf_error();
        };
        let z = &mut mcf.budget_zones[zone];
        let windows = [limits.address, limits.agent, limits.shared].map(|l| [l.general.window_ms, l.deep.window_ms]).concat();
        let windows: [u64; 6] = windows.try_into().unwrap_or([0; 6]);
        let verified = limits.verified.map(|l| [l.general.window_ms, l.deep.window_ms]);
        if !same_windows(&mut z.windows, Some(windows)) || !same_windows(&mut z.verified_windows, verified) {
            ngx_conf_log_error!(
                NGX_LOG_EMERG,
                cf,
                "\"crawlward_budget\" directive on zone \"{}\" uses other time units (r/s, r/m, r/h, r/d) than an earlier one on the same zone: use the same units, or another zone",
                z.name
            );
            return conf_error();
        }
        let zone = &**z as *const BudgetZone;
        // SAFETY: the cycle's pool outlives its requests; allocate drops the value with it.
        let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
        let p = pool.allocate(BudgetLoc { zone, limits });
        if p.is_null() {
            return conf_error();
        }
        lcf.budget = p;
        lcf.budget_set = 1;
        conf_ok()
    })
}

/// `crawlward_browse_cap zone=name max=number | off;`
pub unsafe extern "C" fn set_browse_cap(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::guard(conf_error(), || {
        // SAFETY: conf is our LocConf.
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if lcf.browse_cap_set != -1 {
            return c"is duplicate".as_ptr() as *mut c_char;
        }
        // SAFETY: inside a directive handler.
        let words: Vec<String> = unsafe { args(cf) }.iter().skip(1).map(text).collect();
        if words == ["off"] {
            lcf.browse_cap_set = 0;
            return conf_ok();
        }
        // SAFETY: in a location, cf->ctx is an http conf ctx holding our main conf.
        let mcf = unsafe { crate::conf::main_conf_of_cf(cf) };
        let (mut zone, mut max) = (None, None);
        for w in &words {
            let bad = |why: &str| {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_browse_cap\" directive: {why}");
                conf_error()
            };
            match w.split_once('=') {
                Some(("zone", value)) => match mcf.budget_zones.iter().position(|z| z.name == value) {
                    Some(i) => zone = Some(i),
                    None => return bad("no such zone: declare it with \"crawlward_budget_zone\" at the http level first"),
                },
                Some(("max", value)) => match value.parse::<u32>() {
                    Ok(n) if (1..=1_000_000).contains(&n) => max = Some(n),
                    _ => return bad("expected a number of requests in flight from 1 to 1000000"),
                },
                _ => return bad("expected zone=name and max=number, or off"),
            }
        }
        let (Some(zone), Some(max)) = (zone, max) else {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_browse_cap\" directive needs zone=name and max=number");
            return conf_error();
        };
        let z = &mut mcf.budget_zones[zone];
        z.browse_cap = true;
        let zone = &**z as *const BudgetZone;
        // SAFETY: as in set_budget.
        let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
        let p = pool.allocate(BrowseCapLoc { zone, max });
        if p.is_null() {
            return conf_error();
        }
        lcf.browse_cap = p;
        lcf.browse_cap_set = 1;
        conf_ok()
    })
}

/// Whether a location's window lengths (`new`, None when it sets no such budget)
/// agree with those kept for the zone, which the first to set them decides.
fn same_windows<const N: usize>(kept: &mut Option<[u64; N]>, new: Option<[u64; N]>) -> bool {
    match (*kept, new) {
        (_, None) => true,
        (None, Some(n)) => {
            *kept = Some(n);
            true
        }
        (Some(k), Some(n)) => k == n,
    }
}

/// `crawlward_budget_signed_in $variable ...;`: a request where any of them is
/// non-empty is signed in and never counted.
pub unsafe extern "C" fn set_signed_in(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::guard(conf_error(), || {
        // SAFETY: conf is our LocConf.
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if !lcf.signed_in.is_null() {
            return c"is duplicate".as_ptr() as *mut c_char;
        }
        let mut indexes = Vec::new();
        // SAFETY: inside a directive handler.
        for a in unsafe { args(cf) }.iter().skip(1) {
            let w = text(a);
            let Some(name) = w.strip_prefix('$').filter(|n| !n.is_empty()) else {
                ngx_conf_log_error!(
                    NGX_LOG_EMERG,
                    cf,
                    "invalid parameter \"{w}\" in \"crawlward_budget_signed_in\" directive: expected a variable, e.g. $cookie_session"
                );
                return conf_error();
            };
            let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
            // SAFETY: nginx copies the name; unknown variables are reported at the end of
            // configuration ("unknown variable").
            let i = unsafe { ngx_http_get_variable_index(cf, &mut n) };
            if i == ngx::ffi::NGX_ERROR as ngx_int_t {
                return conf_error();
            }
            indexes.push(i as usize);
        }
        // SAFETY: as in set_budget.
        let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
        let p = pool.allocate(indexes);
        if p.is_null() {
            return conf_error();
        }
        lcf.signed_in = p;
        conf_ok()
    })
}

thread_local! {
    /// This worker's event-loop lag (workers are single-threaded): how late its tick fires.
    static LAG: Cell<LagMeter> = Cell::new(LagMeter::default());
    /// When the next tick is due (nginx's clock, ms).
    static LAG_DUE: Cell<u64> = const { Cell::new(0) };
}

/// The tick's event. Only the worker's own (single) thread touches it, in
/// init_process and in its own handler.
static mut TICK: ngx_event_t = unsafe { std::mem::zeroed() };

/// [`lag_ms`], as of the last tick: read by every counted request, written by the tick
/// alone (a worker is one thread; an atomic only to be a plain static).
static LAG_AVERAGE_MS: AtomicU64 = AtomicU64::new(0);

/// This worker's event-loop lag, averaged over the last second (ms; 0 in its first seconds).
pub fn lag_ms() -> u64 {
    LAG_AVERAGE_MS.load(Ordering::Relaxed)
}

/// The factor every budget of `zone` is divided by now.
pub fn shrink(zone: &BudgetZone) -> u32 {
    if zone.lag_ms > 0 && lag_ms() > zone.lag_ms as u64 {
        zone.shrink
    } else {
        1
    }
}

unsafe extern "C" fn tick(ev: *mut ngx_event_t) {
    let t = crate::now_ms() as u64;
    let late = t.saturating_sub(LAG_DUE.with(Cell::get));
    LAG.with(|m| {
        let mut meter = m.get();
        meter.record(late);
        m.set(meter);
        LAG_AVERAGE_MS.store(meter.average_ms(), Ordering::Relaxed);
    });
    LAG_DUE.with(|d| d.set(t + LagMeter::TICK_MS));
    // SAFETY: ev is TICK, armed again for the next tick.
    unsafe { ngx::ffi::ngx_add_timer(ev, LagMeter::TICK_MS as ngx_msec_t) };
}

/// This process's slot among nginx's processes (`ngx_process_slot`): a worker
/// that dies is started again in its slot.
pub fn process_slot() -> usize {
    // SAFETY: a plain read of a global nginx sets before the worker's init_process.
    usize::try_from(unsafe { ngx::ffi::ngx_process_slot }).unwrap_or(0)
}

/// In each worker: give back the browse-cap places a worker that died in this
/// slot held, and start the lag tick if a budget zone shrinks on lag.
pub unsafe extern "C" fn init_process(cycle: *mut ngx_cycle_t) -> ngx_int_t {
    crate::guard(NGX_OK as ngx_int_t, || {
        // SAFETY: the http module's conf ctx, when there is an http block, holds our main conf.
        let mcf = unsafe {
            let ctx = *(*cycle).conf_ctx.add(ngx::ffi::ngx_http_module.index) as *mut ngx_http_conf_ctx_t;
            if ctx.is_null() {
                return NGX_OK as ngx_int_t;
            }
            &*(*(*ctx).main_conf.add(crate::module().ctx_index) as *const MainConf)
        };
        for zone in &mcf.budget_zones {
            if let Some(table) = zone.table.as_ref() {
                let held = table.with(|t| t.forget_browse_slot(process_slot()));
                if held > 0 {
                    // SAFETY: the cycle's log, in init_process.
                    let log = unsafe { (*cycle).log };
                    ngx_log_error!(
                        NGX_LOG_NOTICE,
                        log,
                        "crawlward: budget zone \"{}\": gave back {} browse-cap places a worker that exited in this slot held",
                        zone.name,
                        held
                    );
                }
            }
        }
        crate::sync::start(&mcf.budget_zones);
        if !mcf.budget_zones.iter().any(|z| z.lag_ms > 0) {
            return NGX_OK as ngx_int_t;
        }
        // SAFETY: the worker's only thread, before its event loop: TICK is ours. Cancelable:
        // a worker shutting down does not wait for it.
        unsafe {
            let ev = addr_of_mut!(TICK);
            (*ev).handler = Some(tick);
            (*ev).log = (*cycle).log;
            (*ev).data = ev as *mut c_void;
            (*ev).set_cancelable(1);
            LAG_DUE.with(|d| d.set(crate::now_ms() as u64 + LagMeter::TICK_MS));
            ngx::ffi::ngx_add_timer(ev, LagMeter::TICK_MS as ngx_msec_t);
        }
        NGX_OK as ngx_int_t
    })
}
