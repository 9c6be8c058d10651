//! Configuration: the directives, the main and location confs, their merge,
//! and the zones' set-up. Each zone has its own small data struct (its
//! directive's values, and the view of its table that its init opens), in
//! the file of its directive. Nothing here runs on a request.
//!
//! Location values start unset (-1) and get their defaults in merge, so an
//! inner `crawlward off;` overrides an outer `on`, as in nginx's own modules.

pub mod budget;
pub mod counters;
pub mod directive;
pub mod dns;
pub mod facets;
pub mod ladder;
pub mod quota;
pub mod signatures;

use crate::state::counters::Counters;
use budget::{BrowseCapLoc, BudgetLoc, BudgetZone};
use counters::CountersZone;
use crawlward_policy::query::FacetGuard;
use crawlward_policy::ua_cache::UaCache;
use crawlward_policy::Identity;
use directive::{args, conf_error, conf_ok, text, IS_DUPLICATE};
use dns::DnsConf;
use ngx::ffi::{
    ngx_array_push, ngx_conf_full_name, ngx_conf_t, ngx_flag_t, ngx_http_conf_ctx_t, ngx_http_core_loc_conf_t, ngx_http_core_main_conf_t, ngx_http_handler_pt,
    NGX_LOG_EMERG,
};
use ngx::ngx_conf_log_error;
use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::ptr::null_mut;

const NGX_CONF_UNSET: ngx_flag_t = -1;

/// The http-level configuration.
pub struct MainConf {
    /// From `crawlward_catalogue`: the agents, actions and machine doors. Boxed:
    /// the conf lives in nginx's pool, which aligns to 8 bytes, and Identity
    /// needs 16 (its matcher), so it lives on the Rust heap.
    pub identity: Option<Box<Identity>>,
    pub catalogue_path: String,
    /// From `crawlward_zone`: boxed, since the zone's data points at it.
    pub counters: Option<Box<CountersZone>>,
    /// Whether some location has `crawlward_status`.
    pub has_status: bool,
    /// Each worker's memo of User-Agent → agent, made when the worker starts, else on its
    /// first request (workers are single-threaded).
    pub ua_cache: RefCell<Option<UaCache>>,
    /// From `crawlward_dns_cache`: forward-confirmed reverse DNS and its verdict cache;
    /// boxed, since the zone's data points at it.
    pub dns: Option<Box<DnsConf>>,
    /// From `crawlward_budget_zone`: boxed, so that locations and the zones' data can point
    /// at them while more are added.
    #[allow(clippy::vec_box)]
    pub budget_zones: Vec<Box<BudgetZone>>,
    /// Each catalogue agent's key in the DNS verdict cache (fcrdns::suffixes_key), made
    /// once when the catalogue is read: a request only indexes it.
    pub suffix_keys: Vec<u32>,
    /// The budget zones' fixed slots of the catalogue's agents, made at postconfiguration.
    pub pinned: crawlward_policy::budget_table::Pinned,
    /// From `crawlward_ladder`: boxed, since the zone's data points at it.
    pub ladder: Option<Box<ladder::LadderConf>>,
    /// From `crawlward_signatures`: the signed agents' keys.
    pub signatures: Option<Box<signatures::Signatures>>,
    /// From `crawlward_api_tier`, in order (a `crawlward_quota` with none declared
    /// adds `default`, 1,000 an hour).
    pub tiers: Vec<crawlward_policy::quota::Tier>,
    /// Each tier's `RateLimit-Policy` field, written once tiers are all known.
    pub tier_policy_fields: Vec<Box<[u8]>>,
    /// From `crawlward_api_keys`.
    pub api_keys: Option<Box<quota::ApiKeys>>,
    /// Whether a `crawlward_quota` was read: the tiers are then fixed (its `default=`
    /// and tier indexes refer to them).
    pub tiers_closed: bool,
    /// Whether a `crawlward_budget_signed_in` was read: the ladder and the limits
    /// of its locations then run in the precontent phase, after the access phase.
    pub signed_in_given: bool,
    /// The index of the variable whose slot holds each request's state, taken in
    /// preconfiguration ([`crate::request::state`]).
    pub state_variable: usize,
}

impl Default for MainConf {
    fn default() -> Self {
        MainConf {
            identity: None,
            catalogue_path: String::new(),
            counters: None,
            has_status: false,
            ua_cache: RefCell::new(None),
            dns: None,
            suffix_keys: Vec::new(),
            pinned: Default::default(),
            budget_zones: Vec::new(),
            ladder: None,
            signatures: None,
            tiers: Vec::new(),
            api_keys: None,
            tiers_closed: false,
            tier_policy_fields: Vec::new(),
            signed_in_given: false,
            state_variable: 0,
        }
    }
}

impl MainConf {
    /// The ladder and its table, if `crawlward_ladder` is declared (and its zone laid out).
    pub fn ladder(&self) -> Option<(&ladder::Ladder, &crate::state::ladder::LadderShm)> {
        let l = self.ladder.as_ref()?;
        Some((l.run.as_deref()?, l.table.as_ref()?))
    }

    /// Where this cycle counts, if a `crawlward_zone` is declared.
    pub fn counters(&self) -> Option<&Counters> {
        self.counters.as_ref()?.view.as_ref()
    }
}

// The pointers a LocConf holds are set by its directives to data in the cycle's
// pool, as the LocConf itself is: what they point at lives as long as it does.
impl LocConf {
    /// The facet guard, where `crawlward_facets` is on.
    pub fn facet_guard(&self) -> Option<&FacetGuard> {
        // SAFETY: null or set by the directive (see above).
        unsafe { self.facets.as_ref() }.filter(|_| self.facets_set == 1)
    }

    /// The crawl budgets, where `crawlward_budget` is on.
    pub fn budgets(&self) -> Option<&BudgetLoc> {
        // SAFETY: null or set by the directive (see above).
        unsafe { self.budget.as_ref() }.filter(|_| self.budget_set == 1)
    }

    /// The browse cap, where `crawlward_browse_cap` is on.
    pub fn browse_cap(&self) -> Option<&BrowseCapLoc> {
        // SAFETY: null or set by the directive (see above).
        unsafe { self.browse_cap.as_ref() }.filter(|_| self.browse_cap_set == 1)
    }

    /// The `crawlward_budget_signed_in` variables' indexes, if the directive is given.
    pub fn signed_in_variables(&self) -> &[usize] {
        // SAFETY: null or set by the directive (see above).
        unsafe { self.signed_in.as_ref() }.map_or(&[], |v| v.as_slice())
    }

    /// The API quota, where `crawlward_quota` is on.
    pub fn quota(&self) -> Option<&quota::QuotaLoc> {
        // SAFETY: null or set by the directive (see above).
        unsafe { self.quota.as_ref() }.filter(|_| self.quota_set == 1)
    }

    /// `crawlward_robots_kept`'s directory, if the directive is given.
    pub fn robots_kept_dir(&self) -> Option<&std::path::Path> {
        // SAFETY: null or set by the directive (see above).
        unsafe { self.robots_kept.as_ref() }.map(|p| p.as_path())
    }
}

// Pool memory is aligned to 8 bytes (NGX_ALIGNMENT): a conf that needed more
// would be written and dropped misaligned.
const _: () = assert!(std::mem::align_of::<MainConf>() <= 8);
const _: () = assert!(std::mem::align_of::<LocConf>() <= 8);

/// The location-level configuration (also created for http and server blocks).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LocConf {
    pub enabled: ngx_flag_t,
    pub dry_run: ngx_flag_t,
    /// `crawlward_facets`: -1 unset, 0 off, 1 on with `facets` (in the cycle's pool).
    pub facets_set: ngx_flag_t,
    pub facets: *const FacetGuard,
    /// `crawlward_budget`: -1 unset, 0 off, 1 on with `budget` (in the cycle's pool).
    pub budget_set: ngx_flag_t,
    pub budget: *const BudgetLoc,
    /// `crawlward_budget_signed_in`: variable indexes, or null for the default
    /// (the `Authorization` header).
    pub signed_in: *const Vec<usize>,
    /// `crawlward_browse_cap`: -1 unset, 0 off, 1 on with `browse_cap` (in the cycle's pool).
    pub browse_cap_set: ngx_flag_t,
    pub browse_cap: *const BrowseCapLoc,
    /// `crawlward_robots_kept`: the rendered directory (in the cycle's pool), or null.
    pub robots_kept: *const std::path::PathBuf,
    /// `crawlward_quota`: -1 unset, 0 off, 1 on with `quota` (in the cycle's pool).
    pub quota_set: ngx_flag_t,
    pub quota: *const quota::QuotaLoc,
}

pub unsafe extern "C" fn create_main_conf(cf: *mut ngx_conf_t) -> *mut c_void {
    // SAFETY: cf is the configuration being parsed; its pool lives as long as the cycle,
    // and Pool::allocate registers a cleanup that drops the conf with the cycle.
    let pool = unsafe { crate::conf::directive::conf_pool(cf) };
    pool.allocate(MainConf::default()).cast()
}

pub unsafe extern "C" fn create_loc_conf(cf: *mut ngx_conf_t) -> *mut c_void {
    // SAFETY: as above; LocConf is Copy, so a plain pool allocation needs no cleanup.
    let pool = unsafe { crate::conf::directive::conf_pool(cf) };
    let conf: *mut LocConf = pool.alloc_type();
    if conf.is_null() {
        return null_mut();
    }
    // SAFETY: conf is a fresh, aligned allocation of one LocConf.
    unsafe {
        conf.write(LocConf {
            enabled: NGX_CONF_UNSET,
            dry_run: NGX_CONF_UNSET,
            facets_set: NGX_CONF_UNSET,
            facets: null_mut(),
            budget_set: NGX_CONF_UNSET,
            budget: null_mut(),
            signed_in: null_mut(),
            browse_cap_set: NGX_CONF_UNSET,
            browse_cap: null_mut(),
            robots_kept: null_mut(),
            quota_set: NGX_CONF_UNSET,
            quota: null_mut(),
        })
    };
    conf.cast()
}

fn merge_flag(conf: &mut ngx_flag_t, prev: ngx_flag_t, default: ngx_flag_t) {
    if *conf == NGX_CONF_UNSET {
        *conf = if prev == NGX_CONF_UNSET { default } else { prev };
    }
}

pub unsafe extern "C" fn merge_loc_conf(cf: *mut ngx_conf_t, prev: *mut c_void, conf: *mut c_void) -> *mut c_char {
    // SAFETY: nginx passes this module's own LocConf for the parent and the child.
    let prev = unsafe { &*(prev as *const LocConf) };
    // SAFETY: as above.
    let conf = unsafe { &mut *(conf as *mut LocConf) };
    merge_flag(&mut conf.enabled, prev.enabled, 0);
    merge_flag(&mut conf.dry_run, prev.dry_run, 0);
    if conf.facets_set == NGX_CONF_UNSET {
        (conf.facets_set, conf.facets) = (prev.facets_set, prev.facets);
    }
    if conf.budget_set == NGX_CONF_UNSET {
        (conf.budget_set, conf.budget) = (prev.budget_set, prev.budget);
    }
    if conf.signed_in.is_null() {
        conf.signed_in = prev.signed_in;
    }
    if conf.browse_cap_set == NGX_CONF_UNSET {
        (conf.browse_cap_set, conf.browse_cap) = (prev.browse_cap_set, prev.browse_cap);
    }
    if conf.quota_set == NGX_CONF_UNSET {
        (conf.quota_set, conf.quota) = (prev.quota_set, prev.quota);
    }
    if conf.enabled == 1 {
        // SAFETY: during the http block, cf->ctx is the http conf ctx holding our main conf.
        let mcf = unsafe { main_conf_of_cf(cf) };
        if mcf.identity.is_none() {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward on\" needs a \"crawlward_catalogue\" at the http level");
            return conf_error();
        }
        // SAFETY: as above; the core module's location confs are merged before ours, so
        // clcf->resolver is set (nginx gives every location one, without servers if none
        // is configured).
        let resolver = unsafe { core_loc_conf_of_cf(cf) }.resolver;
        // SAFETY: as above, null or the location's resolver.
        let no_resolver = unsafe { resolver.as_ref() }.is_none_or(|r| r.connections.nelts == 0);
        if mcf.dns.is_some() && no_resolver {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_dns_cache\" needs a \"resolver\" where \"crawlward\" is on");
            return conf_error();
        }
    }
    conf_ok()
}

/// The http conf ctx of the block being read.
///
/// # Safety
/// `cf->ctx` must be an `ngx_http_conf_ctx_t` (http, server or location context).
unsafe fn http_ctx_of_cf<'a>(cf: *mut ngx_conf_t) -> &'a ngx_http_conf_ctx_t {
    // SAFETY: per the contract.
    let ctx = unsafe { (*cf).ctx } as *const ngx_http_conf_ctx_t;
    // SAFETY: per the contract; the ctx lives in the configuration's pool.
    unsafe { &*ctx }
}

/// Our main conf while the http block is being parsed or merged.
///
/// # Safety
/// `cf->ctx` must be an `ngx_http_conf_ctx_t` (http, server or location context).
pub unsafe fn main_conf_of_cf<'a>(cf: *mut ngx_conf_t) -> &'a mut MainConf {
    // SAFETY: per the contract.
    let ctx = unsafe { http_ctx_of_cf(cf) };
    // SAFETY: main_conf has a slot for every http module's ctx_index ...
    let slot = unsafe { ctx.main_conf.add(crate::module().ctx_index) };
    // SAFETY: ... and ours holds the conf create_main_conf made, in the cycle's pool.
    let conf = unsafe { *slot } as *mut MainConf;
    // SAFETY: as above.
    unsafe { &mut *conf }
}

/// The core module's main conf (its phases, the variables hash) while the http block is read.
///
/// # Safety
/// `cf->ctx` must be the http block's conf ctx.
pub unsafe fn core_main_conf_of_cf<'a>(cf: *mut ngx_conf_t) -> &'a mut ngx_http_core_main_conf_t {
    // SAFETY: per the contract.
    let ctx = unsafe { http_ctx_of_cf(cf) };
    // SAFETY: main_conf has a slot for every http module's ctx_index ...
    let slot = unsafe { ctx.main_conf.add(crate::base::core_ctx_index()) };
    // SAFETY: ... and the core module's holds its main conf, in the cycle's pool.
    let conf = unsafe { *slot } as *mut ngx_http_core_main_conf_t;
    // SAFETY: as above.
    unsafe { &mut *conf }
}

/// The core module's location conf of the block being read (its content handler, its resolver).
///
/// # Safety
/// `cf->ctx` must be an `ngx_http_conf_ctx_t` (http, server or location context).
pub unsafe fn core_loc_conf_of_cf<'a>(cf: *mut ngx_conf_t) -> &'a mut ngx_http_core_loc_conf_t {
    // SAFETY: per the contract.
    let ctx = unsafe { http_ctx_of_cf(cf) };
    // SAFETY: loc_conf has a slot for every http module's ctx_index ...
    let slot = unsafe { ctx.loc_conf.add(crate::base::core_ctx_index()) };
    // SAFETY: ... and the core module's holds its location conf, in the cycle's pool.
    let conf = unsafe { *slot } as *mut ngx_http_core_loc_conf_t;
    // SAFETY: as above.
    unsafe { &mut *conf }
}

/// Add `handler` to one of nginx's request phases.
///
/// # Safety
/// `cf` must be the http block's conf in postconfiguration (the phase arrays exist then).
pub unsafe fn add_phase_handler(cf: *mut ngx_conf_t, phase: u32, handler: ngx_http_handler_pt) -> Result<(), ()> {
    // SAFETY: per the contract.
    let cmcf = unsafe { core_main_conf_of_cf(cf) };
    // SAFETY: per the contract, the phase's handlers array is live; pushing returns room for
    // one handler, or null.
    let h = unsafe { ngx_array_push(&mut cmcf.phases[phase as usize].handlers) } as *mut ngx_http_handler_pt;
    if h.is_null() {
        return Err(());
    }
    // SAFETY: h is the room nginx just gave for one handler.
    unsafe { h.write(handler) };
    Ok(())
}

/// `crawlward_catalogue file;`: the JSON `crawlward render` writes.
pub unsafe extern "C" fn set_catalogue(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf (the directive's conf offset is the main conf).
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.identity.is_some() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let mut path = unsafe { args(cf) }[1];
        // SAFETY: resolves a relative name against the configuration prefix, allocating from the cycle pool.
        let cycle = unsafe { (*cf).cycle };
        // SAFETY: as above.
        if unsafe { ngx_conf_full_name(cycle, &mut path, 1) } != 0 {
            return conf_error();
        }
        let file = text(&path);
        let identity = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read \"{file}\": {e}"))
            .and_then(|json| Identity::from_json(&json).map_err(|e| format!("\"{file}\": {e}")));
        match identity {
            Ok(identity) => {
                mcf.suffix_keys = identity.catalogue.agents().iter().map(|a| crawlward_policy::fcrdns::suffixes_key(&a.rdns_suffixes)).collect();
                mcf.identity = Some(Box::new(identity));
                mcf.catalogue_path = file;
                conf_ok()
            }
            Err(e) => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_catalogue\" directive: {e}");
                conf_error()
            }
        }
    })
}

/// The directive's words after its name.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub(crate) unsafe fn words(cf: *mut ngx_conf_t) -> Vec<String> {
    // SAFETY: per the contract.
    unsafe { args(cf) }.iter().skip(1).map(text).collect()
}

/// Puts `value` in the cycle's pool (dropped with it), for a location conf to point at.
///
/// # Safety
/// `cf` must be the configuration being parsed.
unsafe fn in_cycle_pool<T>(cf: *mut ngx_conf_t, value: T) -> Option<*const T> {
    // SAFETY: per the contract; the cycle's pool outlives its requests, and allocate
    // registers a cleanup that drops the value with it.
    let pool = unsafe { crate::conf::directive::conf_pool(cf) };
    let p = pool.allocate(value);
    (!p.is_null()).then_some(p as *const T)
}

/// `crawlward_zone zone=name:size;`: the shared zone of the counters.
pub unsafe extern "C" fn set_zone(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf (the directive's conf offset is the main conf).
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.counters.is_some() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let arg = text(&unsafe { args(cf) }[1]);
        let Some(spec) = arg.strip_prefix("zone=") else {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{arg}\" in \"crawlward_zone\" directive, expected zone=name:size");
            return conf_error();
        };
        // SAFETY: inside a directive handler.
        mcf.counters = unsafe { counters::declare(cf, spec) };
        if mcf.counters.is_some() {
            conf_ok()
        } else {
            conf_error()
        }
    })
}

/// `crawlward_dns_cache zone=name:size ...;`: forward-confirmed reverse DNS ([`dns`]).
pub unsafe extern "C" fn set_dns_cache(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf.
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.dns.is_some() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let words = unsafe { words(cf) };
        // SAFETY: as above.
        mcf.dns = unsafe { dns::declare(cf, &words) };
        if mcf.dns.is_some() {
            conf_ok()
        } else {
            conf_error()
        }
    })
}

/// `crawlward_budget_zone zone=name:size ...;`: a crawl budget zone ([`budget`]).
pub unsafe extern "C" fn set_budget_zone(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf.
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        // SAFETY: inside a directive handler.
        let words = unsafe { words(cf) };
        // SAFETY: as above.
        let Some(zone) = (unsafe { budget::declare_zone(cf, &words, &mcf.budget_zones) }) else { return conf_error() };
        mcf.budget_zones.push(zone);
        conf_ok()
    })
}

/// `crawlward_budget zone=name ... | off;`: a location's crawl budgets.
pub unsafe extern "C" fn set_budget(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our LocConf (the directive's conf offset is the location conf).
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        // SAFETY: inside a directive handler.
        unsafe { set_zone_use(cf, &mut lcf.budget_set, &mut lcf.budget, budget::parse_budget) }
    })
}

/// `crawlward_browse_cap zone=name max=number | off;`: a location's browse cap.
pub unsafe extern "C" fn set_browse_cap(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our LocConf.
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        // SAFETY: inside a directive handler.
        unsafe { set_zone_use(cf, &mut lcf.browse_cap_set, &mut lcf.browse_cap, budget::parse_browse_cap) }
    })
}

/// `crawlward_quota zone=name ... | off;`: a location's API quota.
pub unsafe extern "C" fn set_quota(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our LocConf.
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if lcf.quota_set != NGX_CONF_UNSET {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let words = unsafe { words(cf) };
        if words == ["off"] {
            lcf.quota_set = 0;
            return conf_ok();
        }
        // SAFETY: as above, cf->ctx holds our main conf.
        let mcf = unsafe { main_conf_of_cf(cf) };
        // SAFETY: inside a directive handler.
        let Some(found) = (unsafe { quota::parse_quota(cf, &words, mcf) }) else { return conf_error() };
        // SAFETY: cf is the configuration being parsed.
        let Some(p) = (unsafe { in_cycle_pool(cf, found) }) else { return conf_error() };
        (lcf.quota, lcf.quota_set) = (p, 1);
        conf_ok()
    })
}

/// `crawlward_api_tier name hourly=N [daily=N];`
pub unsafe extern "C" fn set_api_tier(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf.
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.api_keys.is_some() || mcf.tiers_closed {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_api_tier\" directive must come before \"crawlward_api_keys\" and \"crawlward_quota\"");
            return conf_error();
        }
        // SAFETY: inside a directive handler.
        match unsafe { quota::parse_tier(cf, &mut mcf.tiers) } {
            Ok(()) => conf_ok(),
            Err(()) => conf_error(),
        }
    })
}

/// `crawlward_api_keys file [header=Name];`
pub unsafe extern "C" fn set_api_keys(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf.
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.api_keys.is_some() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let Some(keys) = (unsafe { quota::parse_keys(cf, &mcf.tiers) }) else { return conf_error() };
        mcf.api_keys = Some(Box::new(keys));
        conf_ok()
    })
}

/// Reads a location's use of a budget zone from the directive's words, against the declared zones.
type ParseZoneUse<T> = unsafe fn(*mut ngx_conf_t, &[String], &mut [Box<BudgetZone>]) -> Option<T>;

/// A location's use of a budget zone, as `crawlward_budget` and
/// `crawlward_browse_cap` write it: `off`, or the words `parse` reads
/// against the declared zones, kept in the cycle's pool for the location to
/// point at. Once per location.
///
/// # Safety
/// Inside a directive handler of a location (`cf->ctx` holds our main conf).
unsafe fn set_zone_use<T>(cf: *mut ngx_conf_t, set: &mut ngx_flag_t, value: &mut *const T, parse: ParseZoneUse<T>) -> *mut c_char {
    if *set != NGX_CONF_UNSET {
        return IS_DUPLICATE;
    }
    // SAFETY: per the contract.
    let words = unsafe { words(cf) };
    if words == ["off"] {
        *set = 0;
        return conf_ok();
    }
    // SAFETY: per the contract.
    let mcf = unsafe { main_conf_of_cf(cf) };
    // SAFETY: per the contract; parse reads the directive's words and logs against cf.
    let Some(found) = (unsafe { parse(cf, &words, &mut mcf.budget_zones) }) else { return conf_error() };
    // SAFETY: cf is the configuration being parsed.
    let Some(p) = (unsafe { in_cycle_pool(cf, found) }) else { return conf_error() };
    (*value, *set) = (p, 1);
    conf_ok()
}

/// `crawlward_budget_signed_in $variable ...;`: the variables that mark a signed-in request.
pub unsafe extern "C" fn set_signed_in(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our LocConf.
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if !lcf.signed_in.is_null() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let Some(indexes) = (unsafe { budget::parse_signed_in(cf) }) else { return conf_error() };
        // SAFETY: cf is the configuration being parsed.
        let Some(p) = (unsafe { in_cycle_pool(cf, indexes) }) else { return conf_error() };
        lcf.signed_in = p;
        // SAFETY: inside a directive of the http block, its server or location contexts.
        unsafe { main_conf_of_cf(cf) }.signed_in_given = true;
        conf_ok()
    })
}
