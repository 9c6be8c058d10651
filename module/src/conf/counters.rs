//! `crawlward_zone zone=name:size;`: the shared zone of the counters, and its
//! init, which opens the table ([`Counters::open`]) in the master.

use crate::conf::directive::add_zone;
use crate::state::counters::{Counters, LAYOUT};
use ngx::ffi::{ngx_conf_t, ngx_int_t, ngx_shm_zone_t, NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_OK};
use ngx::ngx_log_error;
use std::ffi::c_void;

/// The zone declared by `crawlward_zone`: its data in nginx's list of zones.
pub struct CountersZone {
    pub name: String,
    /// The catalogue's agent names in its order, each given a slot by the zone's init;
    /// set at the end of the http block (the catalogue may come after the zone).
    pub agents: Vec<String>,
    /// Where this cycle counts, set by the zone's init in the master before workers start.
    pub view: Option<Counters>,
}

/// `crawlward_zone zone=name:size;`: the zone `spec` (`name:size`) declares, its shared
/// memory added. None (logged) on a bad name or size.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn declare(cf: *mut ngx_conf_t, spec: &str) -> Option<Box<CountersZone>> {
    // boxed: the zone's data points at it while the conf is being read
    let mut zone = Box::new(CountersZone { name: String::new(), agents: Vec::new(), view: None });
    let data: *mut CountersZone = &mut *zone;
    // SAFETY: inside a directive handler; the box lives in the main conf as long as the cycle.
    let (shm, name) = unsafe { add_zone(cf, &LAYOUT, spec, data.cast()) }?;
    // SAFETY: shm is a valid entry of the cycle's shared memory list.
    unsafe { (*shm).init = Some(init_zone) };
    zone.name = name;
    Some(zone)
}

/// The zone's init: in the master, at start and at every reload, before workers fork.
/// A zone carried over from the previous cycle keeps its counters; new agent names get free slots.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::base::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data is our boxed CountersZone.
        let log = unsafe { (*zone).shm.log };
        // SAFETY: as above.
        let data = unsafe { (*zone).data } as *mut CountersZone;
        // SAFETY: as above.
        let z = unsafe { &mut *data };
        // SAFETY: the zone nginx passes to its init.
        match unsafe { Counters::open(zone, &z.agents) } {
            Ok((counters, full)) => {
                if full > 0 {
                    ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward zone \"{}\" is full: {full} agents count as \"other\"", z.name);
                }
                z.view = Some(counters);
                NGX_OK as ngx_int_t
            }
            Err(e) => {
                ngx_log_error!(NGX_LOG_EMERG, log, "crawlward zone \"{}\" {e}", z.name);
                ngx::ffi::NGX_ERROR as ngx_int_t
            }
        }
    })
}
