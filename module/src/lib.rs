//! ngx_http_crawlward_module: identifies crawlers by the catalogue that
//! `crawlward render` writes, verifies them by their published ranges, applies
//! the policy's action in the access phase, exposes its decisions as
//! variables, and counts them in a shared zone with a status endpoint.
//!
//! This crate is the FFI shell: every decision is made by `crawlward-policy`,
//! the same code `crawlward explain` runs. `unsafe` stays in small blocks,
//! each with the invariant that makes it sound, and no panic crosses into
//! nginx (see [`base::guard`]).
//!
//! Its files follow nginx's lifecycle, and each part imports only the ones
//! before it:
//!
//! | part | what it holds | runs |
//! |---|---|---|
//! | [`base`], [`net`], [`value`], `heap` | the panic guard and the clocks; a connection's address; a variable's value; the allocator | everywhere |
//! | [`state`] | views of the shared zones' tables | in every process |
//! | [`conf`] | the directives, the main and location confs, each zone's data and init | while nginx reads its configuration |
//! | [`worker`] | the lag tick, the store link | in each worker, beside requests |
//! | [`request`] | preaccess, the DNS check, variables, headers, the log phase, status | on a request |
//! | this file | the module's table, its commands, and postconfiguration | nginx's entry |

#![deny(clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

mod base;
mod conf;
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "system-allocator")))]
mod heap;
mod net;
mod request;
mod state;
mod value;
mod worker;

use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_http_module_t, ngx_http_phases_NGX_HTTP_PREACCESS_PHASE, ngx_http_phases_NGX_HTTP_PRECONTENT_PHASE, ngx_int_t, ngx_module_t,
    ngx_str_t, ngx_uint_t, NGX_CONF_1MORE, NGX_CONF_FLAG, NGX_CONF_NOARGS, NGX_CONF_TAKE1, NGX_ERROR, NGX_HTTP_LOC_CONF, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF, NGX_HTTP_MAIN_CONF_OFFSET, NGX_HTTP_MODULE, NGX_HTTP_SRV_CONF, NGX_LOG_EMERG, NGX_OK,
};
use ngx::ngx_conf_log_error;
use std::ptr::{addr_of, addr_of_mut, null_mut};

static MODULE_CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(request::variables::preconfiguration),
    postconfiguration: Some(postconfiguration),
    create_main_conf: Some(conf::create_main_conf),
    init_main_conf: None,
    create_srv_conf: None,
    merge_srv_conf: None,
    create_loc_conf: Some(conf::create_loc_conf),
    merge_loc_conf: Some(conf::merge_loc_conf),
};

/// A directive name: nginx compares names with strcmp, so the bytes end with a NUL
/// that the length leaves out.
const fn name(s: &'static [u8]) -> ngx_str_t {
    assert!(!s.is_empty() && s[s.len() - 1] == 0);
    ngx_str_t { len: s.len() - 1, data: s.as_ptr() as *mut u8 }
}

const ANY_LEVEL: u32 = NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF;

static mut COMMANDS: [ngx_command_t; 18] = [
    ngx_command_t {
        name: name(b"crawlward_catalogue\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1) as ngx_uint_t,
        set: Some(conf::set_catalogue),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_zone\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1) as ngx_uint_t,
        set: Some(conf::set_zone),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_dns_cache\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_dns_cache),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_budget_zone\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_budget_zone),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_ladder\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1) as ngx_uint_t,
        set: Some(conf::ladder::set_ladder),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_signatures\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::signatures::set_signatures),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_budget\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_budget),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_api_tier\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_api_tier),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_api_keys\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_api_keys),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_quota\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_quota),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_browse_cap\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_browse_cap),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_budget_signed_in\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::set_signed_in),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_facets\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(conf::facets::set_facets),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward\0"),
        type_: (ANY_LEVEL | NGX_CONF_FLAG) as ngx_uint_t,
        set: Some(ngx::ffi::ngx_conf_set_flag_slot),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: std::mem::offset_of!(conf::LocConf, enabled),
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_dry_run\0"),
        type_: (ANY_LEVEL | NGX_CONF_FLAG) as ngx_uint_t,
        set: Some(ngx::ffi::ngx_conf_set_flag_slot),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: std::mem::offset_of!(conf::LocConf, dry_run),
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_robots_kept\0"),
        type_: (NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1) as ngx_uint_t,
        set: Some(request::robots::set_robots_kept),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_status\0"),
        type_: (NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS) as ngx_uint_t,
        set: Some(request::status::set_status),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t::empty(),
];

/// The module table nginx reads from the shared object.
#[used]
#[allow(non_upper_case_globals)]
pub static mut ngx_http_crawlward_module: ngx_module_t = ngx_module_t {
    ctx: addr_of!(MODULE_CTX) as *mut _,
    // SAFETY: COMMANDS is a static; nginx only reads it, from the one thread that loads configuration.
    commands: unsafe { addr_of_mut!(COMMANDS[0]) },
    type_: NGX_HTTP_MODULE as ngx_uint_t,
    init_process: Some(worker::init_process),
    ..ngx_module_t::default()
};

ngx::ngx_modules!(ngx_http_crawlward_module);

/// The module, for lookups of its configuration and context.
pub(crate) fn module() -> &'static ngx_module_t {
    // SAFETY: nginx writes ctx_index and index while loading the module, before any
    // request or configuration callback can call this; afterwards it is only read.
    let module = addr_of!(ngx_http_crawlward_module);
    // SAFETY: as above.
    unsafe { &*module }
}

/// At the end of the http block, once every directive is read: what needs the whole
/// configuration (the zones' slots for the catalogue's agents), and the module's
/// handlers and filters put in place.
unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    crate::base::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: postconfiguration runs with cf->ctx the http conf ctx.
        let mcf = unsafe { crate::conf::main_conf_of_cf(cf) };
        if mcf.has_status && mcf.counters.is_none() {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_status\" needs a \"crawlward_zone\" at the http level");
            return NGX_ERROR as ngx_int_t;
        }
        // the budget zones' fixed slots (budget_table::Pinned), laid out by the zones' init,
        // which runs after the configuration is read
        mcf.pinned = mcf.identity.as_ref().map_or_else(Default::default, |i| crawlward_policy::budget_table::Pinned::of(&i.catalogue));
        for z in mcf.budget_zones.iter_mut() {
            if z.quotas {
                z.tiers = mcf.tiers.iter().map(|t| t.name.clone()).collect();
            } else {
                z.pinned = mcf.pinned.keys().to_vec();
            }
        }
        if let Err(e) = conf::ladder::finish(mcf) {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "{e}");
            return NGX_ERROR as ngx_int_t;
        }
        // the counters zone's slots, given out by its init in the catalogue's order
        if let Some(z) = mcf.counters.as_mut() {
            z.agents = mcf.identity.iter().flat_map(|id| id.catalogue.agents().iter().map(|a| a.name.clone())).collect();
        }
        // SAFETY: postconfiguration, with cf the http block's conf.
        unsafe { request::variables::make_room(cf) };
        // In the preaccess phase, and registered after the modules built into nginx, so
        // nginx runs it before limit_req and limit_conn: a request the module refuses
        // takes no place in a browse cap (limit_conn) and spends no rate class, and their
        // keys read the final verdict, not one provisional on a DNS lookup.
        // SAFETY: as above.
        if unsafe { conf::add_phase_handler(cf, ngx_http_phases_NGX_HTTP_PREACCESS_PHASE, Some(request::preaccess::preaccess_handler)) }.is_err() {
            return NGX_ERROR as ngx_int_t;
        }
        // In the precontent phase, after the access phase: the account variables, and
        // those that say a request is signed in, hold what auth_basic, auth_jwt or
        // auth_request checked.
        if !mcf.tiers.is_empty() {
            mcf.tier_policy_fields = mcf.tiers.iter().map(|t| t.policy_field().into_boxed_slice()).collect();
        }
        if !mcf.tiers.is_empty() || mcf.signed_in_given {
            // SAFETY: as above.
            let added = unsafe { conf::add_phase_handler(cf, ngx_http_phases_NGX_HTTP_PRECONTENT_PHASE, Some(request::precontent_handler)) };
            if added.is_err() {
                return NGX_ERROR as ngx_int_t;
            }
        }
        release_freed_memory();
        if mcf.budget_zones.iter().any(|z| z.browse_cap) {
            // SAFETY: as above.
            unsafe { request::browse::postconfiguration(cf) };
        }
        // SAFETY: as above.
        if unsafe { request::headers::postconfiguration(cf) } != NGX_OK as ngx_int_t {
            return NGX_ERROR as ngx_int_t;
        }
        // SAFETY: as above.
        unsafe { request::log::postconfiguration(cf) }
    })
}

/// Give back to the system the pages that reading the catalogue used and freed
/// (parsing it, compiling its patterns): the module's own heap keeps them
/// otherwise, and every worker would inherit them as resident memory from
/// nginx's master; about 1 MB with a catalogue of 700 agents. glibc's heap
/// too, for what nginx itself freed while reading its configuration.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[cfg(not(feature = "system-allocator"))]
        crate::heap::release_free_pages();
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's malloc_trim only returns free memory to the system; nothing
        // allocated is touched, and configuration runs in one thread.
        unsafe {
            malloc_trim(0);
        }
    }
}
