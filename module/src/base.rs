//! What every part of the module uses and nothing of the module's own: the
//! panic guard at each entry from nginx, and nginx's two clocks.

/// Runs `f`, turning a panic into `fallback` so that it never unwinds into nginx.
/// The policy code does not panic on any input (its tests cover hostile input);
/// this is the last line, so a bug costs one request, not a worker.
pub fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// nginx's clock (milliseconds, monotonic), as the worker's event loop last set it.
pub fn now_ms() -> ngx::ffi::ngx_msec_t {
    // SAFETY: a plain read of nginx's global clock; workers are single-threaded and only
    // their own event loop writes it.
    let clock = std::ptr::addr_of!(ngx::ffi::ngx_current_msec);
    // SAFETY: as above.
    unsafe { std::ptr::read_volatile(clock) }
}

/// The wall clock (ms since the epoch), as the event loop last set it.
pub fn wall_ms() -> u64 {
    // SAFETY: ngx_cached_time always points at a valid slot of nginx's time cache, which
    // only this process's thread updates.
    let cache = std::ptr::addr_of!(ngx::ffi::ngx_cached_time);
    // SAFETY: as above.
    let slot = unsafe { std::ptr::read_volatile(cache) };
    // SAFETY: as above.
    let t = unsafe { std::ptr::read_volatile(slot) };
    (t.sec as u64) * 1000 + t.msec as u64
}

/// The http core module's ctx_index: where its confs are in every http conf array.
pub fn core_ctx_index() -> usize {
    // SAFETY: nginx sets ngx_http_core_module's ctx_index before any configuration
    // callback of an http module, and only reads it afterwards.
    unsafe { ngx::ffi::ngx_http_core_module.ctx_index }
}

/// The http module's index: where the http block's conf ctx is in the cycle's conf_ctx.
pub fn http_module_index() -> usize {
    // SAFETY: nginx sets ngx_http_module's index when it loads its modules, before any
    // module's callback, and only reads it afterwards.
    unsafe { ngx::ffi::ngx_http_module.index }
}

/// nginx's `ngx_hash_key` of a lower-case name: key * 31 + byte, as nginx
/// hashes a header's name to look it up (`proxy_set_header`, `$http_`).
pub const fn hash_key(lowcase_key: &[u8]) -> usize {
    let mut h = 0usize;
    let mut i = 0;
    while i < lowcase_key.len() {
        h = h.wrapping_mul(31).wrapping_add(lowcase_key[i] as usize);
        i += 1;
    }
    h
}

/// A request header's name as nginx keeps one: as written, in lower case,
/// and the hash of the lower case that upstream modules look it up by.
pub struct HeaderName {
    pub key: String,
    pub lowcase_key: Vec<u8>,
    pub hash: usize,
}

impl HeaderName {
    pub fn new(key: &str) -> HeaderName {
        let lowcase_key = key.to_ascii_lowercase().into_bytes();
        let hash = hash_key(&lowcase_key);
        HeaderName { key: key.to_string(), lowcase_key, hash }
    }
}
