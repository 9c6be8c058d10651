//! What every directive handler uses: nginx's answers, the arguments, and a
//! shared zone declared for a table.

use crawlward_policy::layout::{self, kind_of_tag, Fingerprint, Fit};
use ngx::core::Pool;
use ngx::ffi::{ngx_conf_t, ngx_int_t, ngx_pagesize, ngx_parse_size, ngx_shared_memory_add, ngx_shm_zone_t, ngx_str_t, NGX_LOG_EMERG, NGX_LOG_NOTICE};
use ngx::ngx_conf_log_error;
use std::ffi::{c_char, c_void};
use std::ptr::null_mut;

/// `nginx -t` prints a returned C string as `"<directive>" directive <string>`.
pub const IS_DUPLICATE: *mut c_char = c"is duplicate".as_ptr() as *mut c_char;

pub fn conf_ok() -> *mut c_char {
    null_mut()
}

pub fn conf_error() -> *mut c_char {
    -1isize as *mut c_char
}

/// The directive's arguments, the name first.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn args<'a>(cf: *mut ngx_conf_t) -> &'a [ngx_str_t] {
    // SAFETY: cf->args is an array of ngx_str_t while a directive is handled.
    let args = unsafe { (*cf).args };
    // SAFETY: as above.
    let args = unsafe { &*args };
    // SAFETY: as above.
    unsafe { args.as_slice() }
}

/// The pool of the configuration being read, which lives as long as its cycle.
///
/// # Safety
/// `cf` must be the configuration being parsed.
pub unsafe fn conf_pool(cf: *mut ngx_conf_t) -> Pool {
    // SAFETY: per the contract.
    let pool = unsafe { (*cf).pool };
    // SAFETY: per the contract, a live pool.
    unsafe { Pool::from_ngx_pool(pool) }
}

pub fn text(s: &ngx_str_t) -> String {
    String::from_utf8_lossy(s.as_bytes()).into_owned()
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
    let pool = unsafe { crate::conf::directive::conf_pool(cf) };
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
    let cycle = unsafe { (*cf).cycle };
    // SAFETY: as above.
    let ours = unsafe { crate::state::shm::find_zone(cycle, name.as_bytes()) };
    // SAFETY: as above.
    let old_cycle = unsafe { (*cycle).old_cycle };
    // SAFETY: as above.
    let old = unsafe { crate::state::shm::find_zone(old_cycle, name.as_bytes()) };
    // SAFETY: a zone of this cycle's list.
    if let Some(other) = ours.and_then(|z| kind_of_tag(unsafe { (*z).tag } as u64)).filter(|k| k.directive() != directive) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "zone \"{name}\" in \"{directive}\" directive is already used by \"{}\"", other.directive());
        return None;
    }
    // SAFETY: a zone of the running cycle.
    if let Some(found) = old.and_then(|z| unsafe { crate::state::shm::fingerprint_of(z) }).filter(|f| f.magic == layout::MAGIC) {
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
    let entry = unsafe { &mut *zone };
    if !entry.data.is_null() {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "zone \"{name}\" in \"{directive}\" directive is already used");
        return None;
    }
    entry.data = conf;
    Some((zone, name.to_string()))
}
