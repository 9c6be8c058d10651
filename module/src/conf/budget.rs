//! Crawl budgets in shared zones (the forge's crawl-budget review):
//! `crawlward_budget_zone` declares a zone, `crawlward_budget` the budgets of
//! a location, `crawlward_browse_cap` its browse cap, and
//! `crawlward_budget_signed_in` the variables that mark a signed-in request
//! (never counted). The arithmetic is `crawlward_policy::budget` and the
//! table `crawlward_policy::budget_table`; this file holds the directives and
//! the zone's init, which opens the table ([`BudgetShm`]).

use crate::conf::directive::{add_zone, args, text};
use crate::state::budgets::{fingerprint, BudgetShm};
use crate::state::shm::{Opened, Table as ShmTable};
use crawlward_policy::budget::{BudgetLimits, Limits};
use crawlward_policy::budget_table::{layout, Entry, Header, Key, Table};
use crawlward_policy::fcrdns::parse_time;
use crawlward_policy::sync::StoreUrl;
use ngx::ffi::{
    ngx_conf_t, ngx_http_get_variable_index, ngx_int_t, ngx_msec_t, ngx_shm_zone_t, ngx_str_t, NGX_LOG_ALERT, NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_OK,
};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::ffi::c_void;

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
    /// A deliberate slowdown of verified crawlers on the zone (`verified=` in a
    /// location): Some(None) without an end, Some(Some(s)) ending at s (the
    /// latest end among the locations), for the status endpoint.
    pub verified_slowdown: Option<Option<i64>>,
    /// The keys of the fixed slots (the catalogue's agents), set at the end of the
    /// http block (handler::postconfiguration), laid out by the zone's init.
    pub pinned: Vec<Key>,
    /// A quota zone's API tiers, in order (set with the fixed slots): a reload
    /// that changes them lays the table out again.
    pub tiers: Vec<String>,
    /// The table in the zone, set by the zone's init before workers start.
    pub table: Option<BudgetShm>,
    /// `sync=`: the store the zone's counts are shared through.
    pub sync: Option<SyncConf>,
    /// This configuration's generation for the zone's sync (the zone's init
    /// counts reloads), so that a reload's new workers take the sync over.
    pub generation: u64,
    /// Whether a `crawlward_browse_cap` counts in the zone (its count is then synced too).
    pub browse_cap: bool,
    /// Whether a `crawlward_budget` counts in the zone.
    pub budgets: bool,
    /// Whether a `crawlward_quota` counts in the zone: it then holds accounts only, and
    /// no fixed slots for the catalogue's agents.
    pub quotas: bool,
}

/// A location's browse cap (`crawlward_browse_cap`).
pub struct BrowseCapLoc {
    pub zone: *const BudgetZone,
    pub max: u32,
}

impl BrowseCapLoc {
    /// The zone the cap counts in.
    pub fn zone(&self) -> &BudgetZone {
        // SAFETY: set by the directive to a zone of the main conf, which lives in the
        // cycle's pool as long as this location's conf.
        unsafe { &*self.zone }
    }
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
        crate::base::wall_ms()
    } else {
        crate::base::now_ms() as u64
    }
}

/// A location's budgets (`crawlward_budget`).
pub struct BudgetLoc {
    pub zone: *const BudgetZone,
    pub limits: BudgetLimits,
}

impl BudgetLoc {
    /// The zone the budgets count in.
    pub fn zone(&self) -> &BudgetZone {
        // SAFETY: as for BrowseCapLoc::zone.
        unsafe { &*self.zone }
    }
}

/// `crawlward_budget_zone zone=name:size [agents=256] [lag=50ms] [shrink=4]
/// [sync=valkey://host:port[/db] nodes=N [sync_interval=100ms] [sync_timeout=1s]];`:
/// the zone its words declare, its shared memory added; `others` are the zones
/// declared before it. None (logged) on a bad word or a duplicate.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn declare_zone(cf: *mut ngx_conf_t, words: &[String], others: &[Box<BudgetZone>]) -> Option<Box<BudgetZone>> {
    let mut z = BudgetZone {
        name: String::new(),
        max_names: 256,
        lag_ms: 50,
        shrink: 4,
        windows: None,
        verified_windows: None,
        verified_slowdown: None,
        pinned: Vec::new(),
        tiers: Vec::new(),
        table: None,
        sync: None,
        generation: 0,
        browse_cap: false,
        budgets: false,
        quotas: false,
    };
    let mut spec = None;
    let (mut store, mut interval, mut timeout, mut nodes) = (None, None, None, None);
    for w in words {
        let bad = |why: &str| {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_budget_zone\" directive: {why}");
            None
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
        return None;
    };
    match (store, nodes) {
        (Some(url), Some(nodes)) => {
            let resolved = std::net::ToSocketAddrs::to_socket_addrs(&(url.host.as_str(), url.port)).ok().and_then(|mut a| a.next());
            let Some(addr) = resolved else {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "host not found in \"sync={url}\" of the \"crawlward_budget_zone\" directive");
                return None;
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
            return None;
        }
        (None, _) if interval.is_some() || timeout.is_some() || nodes.is_some() => {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget_zone\" directive: sync_interval=, sync_timeout= and nodes= need sync=");
            return None;
        }
        (None, _) => {}
    }
    if others.iter().any(|b| spec.split(':').next() == Some(b.name.as_str())) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "duplicate zone \"{spec}\" in \"crawlward_budget_zone\" directive");
        return None;
    }
    let mut boxed = Box::new(z);
    // the zone's data is the BudgetZone: boxed, so its address stays put as zones are added
    let data = &mut *boxed as *mut BudgetZone as *mut c_void;
    // SAFETY: inside a directive handler.
    let (shm, name) = unsafe { add_zone(cf, &crate::state::budgets::LAYOUT, &spec, data) }?;
    // SAFETY: shm is a valid entry of the cycle's shared memory list.
    unsafe { (*shm).init = Some(init_zone) };
    boxed.name = name;
    Some(boxed)
}

/// The zone's init: in the master, at start and on every reload, before workers fork.
/// A zone kept over a reload (same name and size) keeps its counts. One laid out for
/// another catalogue, other tiers or another sync= is left as it is, for the previous
/// workers if the reload fails, and laid out again by the first new worker
/// ([`lay_out_again`]).
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::base::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data is our boxed BudgetZone.
        let log = unsafe { (*zone).shm.log };
        // SAFETY: as above.
        let data = unsafe { (*zone).data } as *mut BudgetZone;
        // SAFETY: as above.
        let z = unsafe { &mut *data };
        let pinned = &z.pinned;
        // SAFETY: the zone nginx passes to its init.
        let opened = unsafe {
            ShmTable::open(
                zone,
                &fingerprint(pinned, &z.tiers, z.sync.is_some()),
                |bytes| layout(bytes, pinned.len()),
                Header::empty(z.max_names),
                || Entry::EMPTY,
                |h, b, e| {
                    lay_out(z, h, b, e);
                    Ok(())
                },
            )
        };
        // a kept or new table is this configuration's now: its name bound, and its sync
        let (t, ours) = match opened {
            Ok(Opened::Kept(t)) => (t, true),
            Ok(Opened::Made(t, entries)) => {
                ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_budget_zone \"{}\": room for {entries} keys", z.name);
                (t, true)
            }
            // the new workers lay it out, if this one fits it: refused now, before anything
            // is written, when a bigger catalogue would not fit (a reload without nginx -t)
            Ok(Opened::Stale(t, entries)) if crawlward_policy::budget_table::fits(entries, pinned.len()) => (t, false),
            Ok(Opened::Stale(..)) => return too_small(z, log, "is too small"),
            Err(e) => return too_small(z, log, &e),
        };
        // this configuration's generation: counted in the zone's header, which a table laid
        // out again carries over (its first process claims the table, [`lay_out_again`])
        z.generation = t.with(|h, b, e| {
            let mut t = Table::attach(h, b, e);
            if ours {
                t.header.max_names = z.max_names;
                start_sync(z, &mut t);
            }
            t.next_generation()
        });
        z.table = Some(BudgetShm::new(t, &z.name));
        NGX_OK as ngx_int_t
    })
}

/// Lays an empty table out for zone `z`'s fixed slots, its keys hashed with a new random seed.
fn lay_out(z: &BudgetZone, h: &mut Header, b: &mut [u32], e: &mut [Entry]) {
    Table::init(h, b, e, z.max_names, &z.pinned, crawlward_policy::random_u64());
}

/// Names the node in the store's browse hash (a random name, made with the zone) and
/// starts the zone's sync, if it has one.
fn start_sync(z: &BudgetZone, t: &mut Table<'_>) {
    if t.header.browse.node == 0 {
        t.header.browse.node = crawlward_policy::random_u64() | 1;
    }
    if let Some(sync) = &z.sync {
        t.start_sync(sync.nodes, crate::base::wall_ms());
    }
}

/// The zone's init refuses it: logged with what would fit (the fixed slots and the shared
/// keys, in pages, and the zone's own).
fn too_small(z: &BudgetZone, log: *mut ngx::ffi::ngx_log_t, why: &str) -> ngx_int_t {
    let need = crawlward_policy::budget_table::min_bytes(z.pinned.len()) + 8 * ngx_pagesize_bytes();
    ngx_log_error!(
        NGX_LOG_EMERG,
        log,
        "crawlward_budget_zone \"{}\" {why}: the catalogue's {} fixed slots need at least {}k",
        z.name,
        z.pinned.len(),
        need.div_ceil(1024)
    );
    ngx::ffi::NGX_ERROR as ngx_int_t
}

/// In a worker of a new configuration, before its first request: lays the zone's table out
/// again when the zone's init found it laid out for another catalogue, other tiers or
/// another sync= (the first worker does; the others find it done). The counts start over;
/// the node's name in the store and budget sync's lineage carry over. From then on the
/// previous configuration's workers, still finishing their requests, count nothing in it.
pub fn lay_out_again(z: &BudgetZone, log: *mut ngx::ffi::ngx_log_t) {
    let Some(shm) = z.table.as_ref() else { return };
    // the first process of each configuration claims the table; one laid out for another
    // is laid out for this one unless a newer configuration claimed it (this process
    // started late, and its configuration is already being replaced). Claimed only by a
    // running process, never by the master: a reload that fails claims nothing.
    let laid = shm.table().relay(
        |ours, h| {
            if ours {
                h.claimed_by = h.claimed_by.max(z.generation);
                return false;
            }
            h.claimed_by <= z.generation
        },
        Header::empty(z.max_names),
        |h, b, e, was| {
            lay_out(z, h, b, e);
            h.carry_lineage(was);
            h.claimed_by = z.generation;
            start_sync(z, &mut Table::attach(h, b, e));
            Ok(())
        },
    );
    match laid {
        Ok(None) => {}
        Ok(Some(entries)) => {
            let why = if z.quotas {
                "the API tiers or the zone's sync= changed, so the quotas start over"
            } else {
                "the catalogue's agents or the zone's sync= changed, so the fixed slots are laid out again and the budgets start over"
            };
            ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_budget_zone \"{}\": {why}; room for {entries} keys", z.name);
        }
        Err(e) => {
            shm.counts_nothing();
            ngx_log_error!(NGX_LOG_ALERT, log, "crawlward_budget_zone \"{}\" {e}: its budgets count nothing in this configuration", z.name);
        }
    }
}

/// nginx's page size.
fn ngx_pagesize_bytes() -> usize {
    // SAFETY: ngx_pagesize is set once at startup, before any zone is laid out.
    unsafe { ngx::ffi::ngx_pagesize }
}

/// `crawlward_budget zone=name [address=G,D] [agent=G,D] [shared=G,D] [verified=G,D [verified_until=TIME]] | off;`
/// The budgets its words (other than `off`) give a location, on one of `zones`.
/// None (logged) on a bad word.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn parse_budget(cf: *mut ngx_conf_t, words: &[String], zones: &mut [Box<BudgetZone>]) -> Option<BudgetLoc> {
    let mut limits = BudgetLimits::SEED_003;
    let mut zone: Option<usize> = None;
    for w in words {
        let bad = |why: &str| {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_budget\" directive: {why}");
            None
        };
        let Some((key, value)) = w.split_once('=') else { return bad("expected name=value, or off") };
        match key {
            "zone" => match zones.iter().position(|z| z.name == value) {
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
            "verified_until" => match crawlward_policy::ranges::epoch_seconds(value) {
                Some(s) => limits.verified_until_s = Some(s),
                None => return bad("expected an RFC 3339 time, e.g. 2026-12-07T06:00:00Z"),
            },
            _ => return bad("unknown parameter"),
        }
    }
    if limits.verified_until_s.is_some() && limits.verified.is_none() {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget\" directive: verified_until= ends nothing without verified=");
        return None;
    }
    let Some(zone) = zone else {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget\" directive needs zone=name");
        return None;
    };
    let z = &mut zones[zone];
    if z.quotas {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_budget\" directive: zone \"{}\" holds API quotas: give the budgets a zone of their own", z.name);
        return None;
    }
    z.budgets = true;
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
        return None;
    }
    if limits.verified.is_some() {
        z.verified_slowdown = match (z.verified_slowdown, limits.verified_until_s) {
            (Some(None), _) | (_, None) => Some(None),
            (Some(Some(a)), Some(b)) => Some(Some(a.max(b))),
            (None, Some(b)) => Some(Some(b)),
        };
    }
    let zone = &**z as *const BudgetZone;
    Some(BudgetLoc { zone, limits })
}

/// `crawlward_browse_cap zone=name max=number | off;`
/// The browse cap its words (other than `off`) give a location, on one of
/// `zones`. None (logged) on a bad word.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn parse_browse_cap(cf: *mut ngx_conf_t, words: &[String], zones: &mut [Box<BudgetZone>]) -> Option<BrowseCapLoc> {
    let (mut zone, mut max) = (None, None);
    for w in words {
        let bad = |why: &str| {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_browse_cap\" directive: {why}");
            None
        };
        match w.split_once('=') {
            Some(("zone", value)) => match zones.iter().position(|z| z.name == value) {
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
        return None;
    };
    let z = &mut zones[zone];
    if z.quotas {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_browse_cap\" directive: zone \"{}\" holds API quotas: give the browse cap another zone", z.name);
        return None;
    }
    z.browse_cap = true;
    let zone = &**z as *const BudgetZone;
    Some(BrowseCapLoc { zone, max })
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
/// non-empty is signed in and never counted: their indexes. None (logged) on a
/// bad word.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn parse_signed_in(cf: *mut ngx_conf_t) -> Option<Vec<usize>> {
    let mut indexes = Vec::new();
    // SAFETY: inside a directive handler.
    for a in unsafe { args(cf) }.iter().skip(1) {
        let w = text(a);
        let Some(name) = w.strip_prefix('$').filter(|n| !n.is_empty()) else {
            ngx_conf_log_error!(
                NGX_LOG_EMERG,
                cf,
                "invalid parameter \"{w}\" in \"crawlward_budget_signed_in\" directive: expected a variable the server sets from a checked identity, e.g. $remote_user where auth_basic or auth_jwt checks it"
            );
            return None;
        };
        let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
        // SAFETY: nginx copies the name; unknown variables are reported at the end of
        // configuration ("unknown variable").
        let i = unsafe { ngx_http_get_variable_index(cf, &mut n) };
        if i == ngx::ffi::NGX_ERROR as ngx_int_t {
            return None;
        }
        indexes.push(i as usize);
    }
    Some(indexes)
}
