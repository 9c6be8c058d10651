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
    unsafe { std::ptr::read_volatile(std::ptr::addr_of!(ngx::ffi::ngx_current_msec)) }
}

/// The wall clock (ms since the epoch), as the event loop last set it.
pub fn wall_ms() -> u64 {
    // SAFETY: ngx_cached_time always points at a valid slot of nginx's time cache, which
    // only this process's thread updates.
    let t = unsafe { std::ptr::read_volatile(ngx::ffi::ngx_cached_time) };
    (t.sec as u64) * 1000 + t.msec as u64
}
