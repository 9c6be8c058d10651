//! ngx_http_crawlward_module: identifies crawlers by the catalogue that
//! `crawlward render` writes, verifies them by their published ranges, applies
//! the policy's action in the access phase, exposes its decisions as
//! variables, and counts them in a shared zone with a status endpoint.
//!
//! This crate is the FFI shell: every decision is made by `crawlward-policy`,
//! the same code `crawlward explain` runs. `unsafe` stays in small blocks,
//! each with the invariant that makes it sound, and no panic crosses into
//! nginx (see [`guard`]).

mod budget;
mod conf;
mod dns;
mod facets;
mod handler;
mod headers;
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "system-allocator")))]
mod heap;
mod net;
mod request;
mod responses;
mod shm;
mod status;
mod sync;
mod value;
mod variables;
mod zone;

use ngx::ffi::{
    ngx_command_t, ngx_http_module_t, ngx_module_t, ngx_str_t, ngx_uint_t, NGX_CONF_1MORE, NGX_CONF_FLAG, NGX_CONF_NOARGS, NGX_CONF_TAKE1, NGX_HTTP_LOC_CONF,
    NGX_HTTP_LOC_CONF_OFFSET, NGX_HTTP_MAIN_CONF, NGX_HTTP_MAIN_CONF_OFFSET, NGX_HTTP_MODULE, NGX_HTTP_SRV_CONF,
};
use std::ptr::{addr_of, addr_of_mut, null_mut};

static MODULE_CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(variables::preconfiguration),
    postconfiguration: Some(handler::postconfiguration),
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

static mut COMMANDS: [ngx_command_t; 12] = [
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
        set: Some(dns::set_dns_cache),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_budget_zone\0"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(budget::set_budget_zone),
        conf: NGX_HTTP_MAIN_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_budget\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(budget::set_budget),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_browse_cap\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(budget::set_browse_cap),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_budget_signed_in\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(budget::set_signed_in),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: null_mut(),
    },
    ngx_command_t {
        name: name(b"crawlward_facets\0"),
        type_: (ANY_LEVEL | NGX_CONF_1MORE) as ngx_uint_t,
        set: Some(facets::set_facets),
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
        name: name(b"crawlward_status\0"),
        type_: (NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS) as ngx_uint_t,
        set: Some(status::set_status),
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
    init_process: Some(budget::init_process),
    ..ngx_module_t::default()
};

ngx::ngx_modules!(ngx_http_crawlward_module);

/// The module, for lookups of its configuration and context.
pub(crate) fn module() -> &'static ngx_module_t {
    // SAFETY: nginx writes ctx_index and index while loading the module, before any
    // request or configuration callback can call this; afterwards it is only read.
    unsafe { &*addr_of!(ngx_http_crawlward_module) }
}

/// nginx's clock (milliseconds, monotonic), as the worker's event loop last set it.
pub(crate) fn now_ms() -> ngx::ffi::ngx_msec_t {
    // SAFETY: a plain read of nginx's global clock; workers are single-threaded and only
    // their own event loop writes it.
    unsafe { std::ptr::read_volatile(addr_of!(ngx::ffi::ngx_current_msec)) }
}

/// Runs `f`, turning a panic into `fallback` so that it never unwinds into nginx.
/// The policy code does not panic on any input (its tests cover hostile input);
/// this is the last line, so a bug costs one request, not a worker.
pub(crate) fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}
