//! Configuration: the directives, the main and location confs, and their merge.
//!
//! Location values start unset (-1) and get their defaults in merge, so an
//! inner `crawlward off;` overrides an outer `on`, as in nginx's own modules.

use crate::budget::{BrowseCapLoc, BudgetLoc, BudgetZone};
use crate::dns::DnsConf;
use crate::zone::Counters;
use crawlward_policy::layout::{self, kind_of_tag, Fingerprint, Fit};
use crawlward_policy::query::FacetGuard;
use crawlward_policy::ua_cache::UaCache;
use crawlward_policy::Identity;
use ngx::core::Pool;
use ngx::ffi::{
    ngx_conf_full_name, ngx_conf_t, ngx_flag_t, ngx_http_conf_ctx_t, ngx_int_t, ngx_pagesize, ngx_parse_size, ngx_shared_memory_add, ngx_shm_zone_t, ngx_str_t,
    NGX_LOG_EMERG, NGX_LOG_NOTICE,
};
use ngx::ngx_conf_log_error;
use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::ptr::null_mut;

const NGX_CONF_UNSET: ngx_flag_t = -1;

/// `nginx -t` prints a returned C string as `"<directive>" directive <string>`.
const IS_DUPLICATE: *mut c_char = c"is duplicate".as_ptr() as *mut c_char;

pub fn conf_ok() -> *mut c_char {
    null_mut()
}

pub fn conf_error() -> *mut c_char {
    -1isize as *mut c_char
}

/// The http-level configuration.
pub struct MainConf {
    /// From `crawlward_catalogue`: the agents, actions and machine doors. Boxed:
    /// the conf lives in nginx's pool, which aligns to 8 bytes, and Identity
    /// needs 16 (its matcher), so it lives on the Rust heap.
    pub identity: Option<Box<Identity>>,
    pub catalogue_path: String,
    /// From `crawlward_zone`; null when no zone is declared.
    pub zone: *mut ngx_shm_zone_t,
    pub zone_name: String,
    /// Where this cycle counts, set by the zone's init in the master before workers start.
    pub counters: Option<Counters>,
    /// Whether some location has `crawlward_status`.
    pub has_status: bool,
    /// Each worker's memo of User-Agent → agent, made on first use (workers are single-threaded).
    pub ua_cache: RefCell<Option<UaCache>>,
    /// From `crawlward_dns_cache`: forward-confirmed reverse DNS and its verdict cache.
    pub dns: Option<DnsConf>,
    /// From `crawlward_budget_zone`: boxed, so that locations and the zones' data can point
    /// at them while more are added.
    #[allow(clippy::vec_box)]
    pub budget_zones: Vec<Box<BudgetZone>>,
    /// Each catalogue agent's key in the DNS verdict cache (fcrdns::suffixes_key), made
    /// once when the catalogue is read: a request only indexes it.
    pub suffix_keys: Vec<u32>,
    /// The budget zones' fixed slots of the catalogue's agents, made at postconfiguration.
    pub pinned: crawlward_policy::budget_table::Pinned,
}

impl Default for MainConf {
    fn default() -> Self {
        MainConf {
            identity: None,
            catalogue_path: String::new(),
            zone: null_mut(),
            zone_name: String::new(),
            counters: None,
            has_status: false,
            ua_cache: RefCell::new(None),
            dns: None,
            suffix_keys: Vec::new(),
            pinned: Default::default(),
            budget_zones: Vec::new(),
        }
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
}

pub unsafe extern "C" fn create_main_conf(cf: *mut ngx_conf_t) -> *mut c_void {
    // SAFETY: cf is the configuration being parsed; its pool lives as long as the cycle,
    // and Pool::allocate registers a cleanup that drops the conf with the cycle.
    let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
    pool.allocate(MainConf::default()).cast()
}

pub unsafe extern "C" fn create_loc_conf(cf: *mut ngx_conf_t) -> *mut c_void {
    // SAFETY: as above; LocConf is Copy, so a plain pool allocation needs no cleanup.
    let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
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
    let (prev, conf) = unsafe { (&*(prev as *const LocConf), &mut *(conf as *mut LocConf)) };
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
        let no_resolver = unsafe {
            let ctx = (*cf).ctx as *mut ngx_http_conf_ctx_t;
            let clcf = *(*ctx).loc_conf.add(ngx::ffi::ngx_http_core_module.ctx_index) as *const ngx::ffi::ngx_http_core_loc_conf_t;
            (*clcf).resolver.is_null() || (*(*clcf).resolver).connections.nelts == 0
        };
        if mcf.dns.is_some() && no_resolver {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_dns_cache\" needs a \"resolver\" where \"crawlward\" is on");
            return conf_error();
        }
    }
    conf_ok()
}

/// Our confs for a request.
///
/// # Safety
/// `r` must be a live request of an http block where this module is loaded.
pub unsafe fn confs<'a>(r: *mut ngx::ffi::ngx_http_request_t) -> (&'a MainConf, &'a LocConf) {
    // SAFETY: per the contract, main_conf and loc_conf hold our confs at our ctx_index.
    unsafe {
        let i = crate::module().ctx_index;
        (&*(*(*r).main_conf.add(i) as *const MainConf), &*(*(*r).loc_conf.add(i) as *const LocConf))
    }
}

/// Our main conf while the http block is being parsed or merged.
///
/// # Safety
/// `cf->ctx` must be an `ngx_http_conf_ctx_t` (http, server or location context).
pub unsafe fn main_conf_of_cf<'a>(cf: *mut ngx_conf_t) -> &'a mut MainConf {
    // SAFETY: per the contract; main_conf[ctx_index] was created by create_main_conf.
    unsafe {
        let ctx = (*cf).ctx as *mut ngx_http_conf_ctx_t;
        &mut *(*(*ctx).main_conf.add(crate::module().ctx_index) as *mut MainConf)
    }
}

/// The directive's arguments, the name first.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn args<'a>(cf: *mut ngx_conf_t) -> &'a [ngx_str_t] {
    // SAFETY: cf->args is an array of ngx_str_t while a directive is handled.
    unsafe { (*(*cf).args).as_slice() }
}

pub fn text(s: &ngx_str_t) -> String {
    String::from_utf8_lossy(s.as_bytes()).into_owned()
}

/// `crawlward_catalogue file;`: the JSON `crawlward render` writes.
pub unsafe extern "C" fn set_catalogue(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::guard(conf_error(), || {
        // SAFETY: conf is our MainConf (the directive's conf offset is the main conf).
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.identity.is_some() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let mut path = unsafe { args(cf) }[1];
        // SAFETY: resolves a relative name against the configuration prefix, allocating from the cycle pool.
        if unsafe { ngx_conf_full_name((*cf).cycle, &mut path, 1) } != 0 {
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

/// `crawlward_zone zone=name:size;`: the shared zone of the counters.
pub unsafe extern "C" fn set_zone(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::guard(conf_error(), || {
        // SAFETY: conf is our MainConf.
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if !mcf.zone.is_null() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let arg = text(&unsafe { args(cf) }[1]);
        let Some(spec) = arg.strip_prefix("zone=") else {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{arg}\" in \"crawlward_zone\" directive, expected zone=name:size");
            return conf_error();
        };
        // SAFETY: inside a directive handler, with conf our MainConf.
        let Some((zone, name)) = (unsafe { add_zone(cf, &crate::zone::LAYOUT, spec, conf) }) else { return conf_error() };
        // SAFETY: zone is a valid entry of the cycle's shared memory list.
        unsafe { (*zone).init = Some(crate::zone::init_zone) };
        mcf.zone = zone;
        mcf.zone_name = name;
        conf_ok()
    })
}

/// Declare the shared zone `name:size` for a table of `layout`, with `conf`
/// as its data. Logs and answers None on a bad name or size, a zone too
/// small, or a name another directive uses already. Says in a notice when
/// the previous configuration's zone of that name held another layout:
/// nginx starts a fresh zone then, since the tag is the layout's.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn add_zone(cf: *mut ngx_conf_t, layout: &Fingerprint, spec: &str, conf: *mut c_void) -> Option<(*mut ngx_shm_zone_t, String)> {
    let directive = layout.directive();
    let Some((name, size)) = spec.split_once(':').filter(|(n, s)| !n.is_empty() && !s.is_empty()) else {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"zone={spec}\" in \"{directive}\" directive, expected zone=name:size");
        return None;
    };
    // the name appears in the status endpoint's JSON and Prometheus labels
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid zone name \"{name}\" in \"{directive}\" directive: use letters, digits, '_' and '-'");
        return None;
    }
    let mut size_str = ngx_str_t { len: size.len(), data: size.as_ptr() as *mut u8 };
    // SAFETY: ngx_parse_size only reads len bytes of the string.
    let bytes: ngx_int_t = unsafe { ngx_parse_size(&mut size_str) };
    // SAFETY: ngx_pagesize is set at startup, before configuration is read.
    let min = 8 * unsafe { ngx_pagesize };
    if bytes == -1 {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid zone size \"{size}\" in \"{directive}\" directive");
        return None;
    }
    if (bytes as usize) < min {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "zone \"{name}\" is too small in \"{directive}\" directive: at least {}k", min / 1024);
        return None;
    }
    // The name must outlive this call: nginx keeps the pointer, so copy it into the cycle pool.
    // SAFETY: the pool outlives the zone list of this cycle.
    let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
    let data = pool.alloc_unaligned(name.len()) as *mut u8;
    if data.is_null() {
        return None;
    }
    // SAFETY: data has name.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), data, name.len()) };
    let mut zone_name = ngx_str_t { len: name.len(), data };
    // SAFETY: cf->cycle is the cycle being configured, and its old cycle the running one (or
    // nginx's init cycle, whose list is empty); the running cycle's zones are mapped in this
    // process.
    let (ours, old) = unsafe {
        let cycle = (*cf).cycle;
        (crate::shm::find_zone(cycle, name.as_bytes()), crate::shm::find_zone((*cycle).old_cycle, name.as_bytes()))
    };
    // SAFETY: a zone of this cycle's list.
    if let Some(other) = ours.and_then(|z| kind_of_tag(unsafe { (*z).tag } as u64)).filter(|k| k.directive() != directive) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "zone \"{name}\" in \"{directive}\" directive is already used by \"{}\"", other.directive());
        return None;
    }
    // SAFETY: a zone of the running cycle.
    if let Some(found) = old.and_then(|z| unsafe { crate::shm::fingerprint_of(z) }).filter(|f| f.magic == layout::MAGIC) {
        let fit = layout::fit(&found, layout);
        if fit != Fit::Same {
            ngx_conf_log_error!(NGX_LOG_NOTICE, cf, "{directive} \"{name}\": the zone of the previous configuration held {fit}; starting a fresh one");
        }
    }
    // SAFETY: adds (or finds) the zone in this cycle's list; nginx logs its own errors
    // (a name declared for another module, or with another size).
    let zone = unsafe { ngx_shared_memory_add(cf, &mut zone_name, bytes as usize, layout.tag() as usize as *mut c_void) };
    if zone.is_null() {
        return None;
    }
    // SAFETY: zone is a valid entry of the cycle's shared memory list.
    unsafe {
        if !(*zone).data.is_null() {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "zone \"{name}\" in \"{directive}\" directive is already used");
            return None;
        }
        (*zone).data = conf;
    }
    Some((zone, name.to_string()))
}
