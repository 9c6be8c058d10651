//! What each worker runs beside requests: at its start, the browse-cap places
//! a worker that died in its slot held are given back and the store links are
//! started ([`sync`]); the tick that measures its event loop's lag, which
//! shrinks the budgets.

pub mod sync;

use crate::conf::budget::BudgetZone;
use crate::conf::MainConf;
use crawlward_policy::budget::LagMeter;
use ngx::ffi::{ngx_cycle_t, ngx_event_t, ngx_http_conf_ctx_t, ngx_int_t, ngx_msec_t, NGX_LOG_NOTICE, NGX_OK};
use ngx::ngx_log_error;
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// This worker's event-loop lag (workers are single-threaded): how late its tick fires.
    static LAG: Cell<LagMeter> = Cell::new(LagMeter::default());
    /// When the next tick is due (nginx's clock, ms).
    static LAG_DUE: Cell<u64> = const { Cell::new(0) };
}

/// The tick's event. Only the worker's own (single) thread touches it, in
/// init_process and in its own handler.
// SAFETY: all-zero is nginx's own initial state for an event (plain integers, null pointers
// and no handler).
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
    let t = crate::base::now_ms() as u64;
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

/// In each process of the configuration: lay out again a budget zone the
/// previous configuration laid out for other contents, and give back the
/// browse-cap places a process that died in this slot held; in a worker also
/// make the memo of User-Agents, start the store links, and start the lag
/// tick if a budget zone shrinks on lag.
pub unsafe extern "C" fn init_process(cycle: *mut ngx_cycle_t) -> ngx_int_t {
    crate::base::guard(NGX_OK as ngx_int_t, || {
        // SAFETY: nginx calls init_process with the cycle; its conf_ctx has a slot for every
        // core-level module's index ...
        let (conf_ctx, http_index) = (unsafe { (*cycle).conf_ctx }, crate::base::http_module_index());
        // SAFETY: as above.
        let slot = unsafe { conf_ctx.add(http_index) };
        // SAFETY: ... and the http module's, when there is an http block, holds its conf ctx ...
        let ctx = unsafe { *slot } as *const ngx_http_conf_ctx_t;
        // SAFETY: ... whose main conf array ...
        let Some(ctx) = (unsafe { ctx.as_ref() }) else { return NGX_OK as ngx_int_t };
        // SAFETY: ... holds our main conf at our ctx_index.
        let slot = unsafe { ctx.main_conf.add(crate::module().ctx_index) };
        // SAFETY: as above.
        let conf = unsafe { *slot } as *const MainConf;
        // SAFETY: as above; made by create_main_conf, in the cycle's pool.
        let mcf = unsafe { &*conf };
        // the memo of User-Agents, with this worker's own random seed, made before the
        // first request (which would otherwise pay for its tables); not in the cache
        // manager and loader, which call init_process too and serve no request
        // SAFETY: a plain read of a global nginx sets before init_process.
        let process = unsafe { ngx::ffi::ngx_process } as u32;
        let serves_requests = matches!(process, ngx::ffi::NGX_PROCESS_WORKER | ngx::ffi::NGX_PROCESS_SINGLE);
        if mcf.identity.is_some() && serves_requests {
            if let Ok(mut memo) = mcf.ua_cache.try_borrow_mut() {
                memo.get_or_insert_with(Default::default);
            }
        }
        // SAFETY: the cycle's log, in init_process.
        let log = unsafe { (*cycle).log };
        for zone in &mcf.budget_zones {
            // a zone laid out for the previous configuration's catalogue: the first of this
            // configuration's processes lays it out again (the reload succeeded)
            crate::conf::budget::lay_out_again(zone, log);
            if let Some(table) = zone.table.as_ref() {
                let held = table.with_browse(|t| t.forget_browse_slot(process_slot()));
                if held > 0 {
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
        // a replay zone laid out for the previous key file's directories: the first of this
        // configuration's processes moves its nonces to their directories' new parts
        if let Some(signatures) = mcf.signatures.as_deref() {
            crate::conf::signatures::lay_out_again(signatures, log);
        }
        // the store links and the lag tick serve requests: not in the cache manager and loader,
        // which would otherwise claim a zone's sync like a worker, and the loader exits
        // without giving its claim back (the sync would stall until the lease ran out)
        if !serves_requests {
            return NGX_OK as ngx_int_t;
        }
        sync::start(&mcf.budget_zones);
        if !mcf.budget_zones.iter().any(|z| z.lag_ms > 0) {
            return NGX_OK as ngx_int_t;
        }
        // SAFETY: the worker's only thread, before its event loop: TICK is ours. Cancelable:
        // a worker shutting down does not wait for it.
        let ev = addr_of_mut!(TICK);
        // SAFETY: as above.
        let tick_event = unsafe { &mut *ev };
        tick_event.handler = Some(tick);
        // SAFETY: the cycle's log, in init_process.
        tick_event.log = unsafe { (*cycle).log };
        tick_event.data = ev as *mut c_void;
        tick_event.set_cancelable(1);
        LAG_DUE.with(|d| d.set(crate::base::now_ms() as u64 + LagMeter::TICK_MS));
        // SAFETY: as above.
        unsafe { ngx::ffi::ngx_add_timer(ev, LagMeter::TICK_MS as ngx_msec_t) };
        NGX_OK as ngx_int_t
    })
}
