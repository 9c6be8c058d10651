//! The counters zone: requests by agent, verdict and action (access phase),
//! and responses by agent, verdict and status class (log phase), shared by
//! all workers and carried over on reload.
//!
//! Layout: one block from the zone's slab holding a header and a fixed array
//! of slots. A slot is an agent name and its counters (atomics, so workers
//! count without a lock). Slot 0 counts requests that name no agent, slot 1
//! the agents that found no free slot ("other"). Slots are assigned only by
//! the master, in the zone's init, before workers start: workers never change
//! the layout, so the table is bounded by the zone size and a full table
//! never fails a request.

use crate::conf::MainConf;
use crawlward_policy::layout::{Fingerprint, Kind};
use crawlward_policy::responses::{self, StatusClass};
use crawlward_policy::{Action, Rule, Verdict};
use ngx::ffi::{
    ngx_int_t, ngx_pagesize, ngx_shm_zone_t, ngx_shmtx_lock, ngx_shmtx_unlock, ngx_slab_alloc_locked, ngx_slab_pool_t, NGX_LOG_EMERG, NGX_LOG_NOTICE,
};
use ngx::ngx_log_error;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The zone's layout; the version is bumped when a field changes meaning without changing a size.
pub static LAYOUT: Fingerprint = Fingerprint::new(Kind::Counters, 1, std::mem::size_of::<Root>(), std::mem::size_of::<Root>(), std::mem::size_of::<Slot>());
pub const NAME_MAX: usize = 60;
pub const VERDICTS: usize = 5;
pub const ACTIONS: usize = 4;
pub const CLASSES: usize = StatusClass::COUNT;
pub const NO_AGENT: u32 = 0;
pub const OTHER: u32 = 1;

#[repr(C)]
pub struct Root {
    fingerprint: Fingerprint,
    capacity: u32,
    used: AtomicU32,
    /// Responses to verified search crawlers by status class, whatever their slot.
    verified_search: [AtomicU64; CLASSES],
    /// Requests the facet guard refused, by rule ([`FACET_RULES`]); in a dry run, those it
    /// would have refused.
    facet_refused: [AtomicU64; FACET_RULES.len()],
    facet_dry_run_refused: [AtomicU64; FACET_RULES.len()],
    // the slots follow
}

/// The facet guard's rules, in the status endpoint's order.
pub const FACET_RULES: [Rule; 2] = [Rule::FacetCrawlerParams, Rule::FacetNoReferer];

#[repr(C)]
pub struct Slot {
    name_len: u32,
    name: [u8; NAME_MAX],
    counts: [AtomicU64; VERDICTS * ACTIONS],
    responses: [AtomicU64; VERDICTS * CLASSES],
    /// When a verified search crawler of this slot was last warned about (seconds of
    /// nginx's monotonic clock; 0: never), for all workers.
    warned_at: AtomicU64,
}

/// One slot's name and counters, copied out.
pub struct SlotCounts {
    pub name: String,
    pub requests: [u64; VERDICTS * ACTIONS],
    pub responses: [u64; VERDICTS * CLASSES],
}

/// The verdict's place in [`Verdict::ALL`] (the status endpoint's order).
pub fn verdict_index(v: Verdict) -> usize {
    match v {
        Verdict::None => 0,
        Verdict::Empty => 1,
        Verdict::Unverified => 2,
        Verdict::Verified => 3,
        Verdict::Spoofed => 4,
    }
}

pub const ACTION_NAMES: [&str; ACTIONS] = ["allow", "throttle", "block-444", "block-403"];

/// The action's place in [`ACTION_NAMES`]: counting compares no strings.
pub fn action_index(a: Action) -> usize {
    match a {
        Action::Allow => 0,
        Action::Throttle => 1,
        Action::Block(403) => 3,
        Action::Block(_) => 2,
    }
}

/// This cycle's view of the zone: where the slots are and which slot each catalogue agent counts in.
pub struct Counters {
    root: *mut Root,
    /// Slot of the catalogue's agent i.
    slot_of_agent: Vec<u32>,
    pub zone_size: usize,
}

impl Counters {
    fn slot(&self, i: u32) -> &Slot {
        // SAFETY: root points into the shared zone, mapped at the same address in every
        // process for the life of the cycle; i < capacity by construction (slot numbers come
        // from slot_of_agent, NO_AGENT or OTHER, all below capacity).
        unsafe { &*((self.root as *mut u8).add(std::mem::size_of::<Root>()) as *const Slot).add(i as usize) }
    }

    fn root(&self) -> &Root {
        // SAFETY: as above.
        unsafe { &*self.root }
    }

    fn slot_of(&self, agent: Option<usize>) -> &Slot {
        self.slot(match agent {
            None => NO_AGENT,
            Some(i) => self.slot_of_agent.get(i).copied().unwrap_or(OTHER),
        })
    }

    pub fn count(&self, agent: Option<usize>, verdict: Verdict, action: Action) {
        self.slot_of(agent).counts[verdict_index(verdict) * ACTIONS + action_index(action)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a response. For a verified search crawler's 429 or 5xx, answers whether a
    /// warning is due now (`now` in seconds), claiming it for this process: of all the
    /// workers, one warns about an agent in a minute.
    pub fn respond(&self, agent: Option<usize>, verdict: Verdict, class: StatusClass, verified_search: bool, now: u64) -> bool {
        let slot = self.slot_of(agent);
        slot.responses[verdict_index(verdict) * CLASSES + class.index()].fetch_add(1, Ordering::Relaxed);
        if !verified_search {
            return false;
        }
        self.root().verified_search[class.index()].fetch_add(1, Ordering::Relaxed);
        if !class.slows_crawlers() {
            return false;
        }
        let last = slot.warned_at.load(Ordering::Relaxed);
        responses::warn_due(last, now) && slot.warned_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Responses to verified search crawlers, by status class.
    pub fn verified_search(&self) -> [u64; CLASSES] {
        load(&self.root().verified_search)
    }

    /// Counts a facet guard refusal (`dry_run`: one it would have made).
    pub fn facet_refused(&self, rule: Rule, dry_run: bool) {
        let Some(i) = FACET_RULES.iter().position(|r| *r == rule) else { return };
        let root = self.root();
        let counts = if dry_run { &root.facet_dry_run_refused } else { &root.facet_refused };
        counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Facet guard refusals by rule, and dry-run ones, in [`FACET_RULES`] order.
    pub fn facet_refusals(&self) -> ([u64; FACET_RULES.len()], [u64; FACET_RULES.len()]) {
        (load(&self.root().facet_refused), load(&self.root().facet_dry_run_refused))
    }

    pub fn capacity(&self) -> u32 {
        self.root().capacity
    }

    pub fn used(&self) -> u32 {
        self.root().used.load(Ordering::Acquire)
    }

    /// Every slot in use: its name and counters, copied out.
    pub fn snapshot(&self) -> Vec<SlotCounts> {
        (0..self.used().min(self.capacity()))
            .map(|i| {
                let s = self.slot(i);
                let len = (s.name_len as usize).min(NAME_MAX);
                SlotCounts { name: String::from_utf8_lossy(&s.name[..len]).into_owned(), requests: load(&s.counts), responses: load(&s.responses) }
            })
            .collect()
    }
}

fn load<const N: usize>(from: &[AtomicU64; N]) -> [u64; N] {
    let mut out = [0u64; N];
    for (o, a) in out.iter_mut().zip(from.iter()) {
        *o = a.load(Ordering::Relaxed);
    }
    out
}

/// The zone's init: in the master, at start and at every reload, before workers fork.
/// A zone carried over from the previous cycle keeps its counters; new agent names get free slots.
pub unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data we set to our MainConf in
        // set_zone and whose shm.addr holds an initialized slab pool.
        let (mcf, sp, size, log) = unsafe {
            let z = &mut *zone;
            (&mut *(z.data as *mut MainConf), z.shm.addr as *mut ngx_slab_pool_t, z.shm.size, z.shm.log)
        };
        let slot_size = std::mem::size_of::<Slot>();
        // SAFETY: the slab pool is ours; data is null in a fresh zone and our root in a reused one.
        let existing = unsafe { (*sp).data as *mut Root };
        // nginx hands over a kept zone only with the same tag, which is LAYOUT's
        let root = if !existing.is_null() && unsafe { (*existing).fingerprint } == LAYOUT {
            existing
        } else {
            // SAFETY: pfree is the slab's count of free pages; ngx_pagesize is set at startup.
            let pages = unsafe { (*sp).pfree };
            let bytes = pages.saturating_sub(1) * unsafe { ngx_pagesize };
            let capacity = (bytes.saturating_sub(std::mem::size_of::<Root>()) / slot_size).min(u32::MAX as usize) as u32;
            if capacity < 3 {
                ngx_log_error!(NGX_LOG_EMERG, log, "crawlward zone \"{}\" is too small", mcf.zone_name);
                return ngx::ffi::NGX_ERROR as ngx_int_t;
            }
            let total = std::mem::size_of::<Root>() + capacity as usize * slot_size;
            // SAFETY: the master is the only process touching a fresh zone; the mutex is the
            // slab's own, taken as nginx's modules do around *_locked calls.
            let p = unsafe {
                ngx_shmtx_lock(&mut (*sp).mutex);
                let p = ngx_slab_alloc_locked(sp, total);
                ngx_shmtx_unlock(&mut (*sp).mutex);
                p
            } as *mut Root;
            if p.is_null() {
                ngx_log_error!(NGX_LOG_EMERG, log, "crawlward zone \"{}\": cannot allocate {total} bytes", mcf.zone_name);
                return ngx::ffi::NGX_ERROR as ngx_int_t;
            }
            // SAFETY: p is a fresh block of `total` bytes: zero it, then write the header.
            unsafe {
                std::ptr::write_bytes(p as *mut u8, 0, total);
                (*p).fingerprint = LAYOUT;
                (*p).capacity = capacity;
                (*sp).data = p as *mut c_void;
            }
            p
        };
        let mut counters = Counters { root, slot_of_agent: Vec::new(), zone_size: size };
        // Slots 0 and 1 always exist.
        ensure_slot(&counters, 0, "-");
        ensure_slot(&counters, 1, "other");
        let names: Vec<String> = mcf.identity.iter().flat_map(|id| id.catalogue.agents().iter().map(|a| a.name.clone())).collect();
        let mut full = 0;
        for name in &names {
            let slot = find_or_add(&counters, name).unwrap_or_else(|| {
                full += 1;
                OTHER
            });
            counters.slot_of_agent.push(slot);
        }
        if full > 0 {
            ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward zone \"{}\" is full: {full} agents count as \"other\"", mcf.zone_name);
        }
        mcf.counters = Some(counters);
        ngx::ffi::NGX_OK as ngx_int_t
    })
}

fn write_name(slot: *mut Slot, name: &str) {
    let bytes = &name.as_bytes()[..name.len().min(NAME_MAX)];
    // SAFETY: the master writes a slot before publishing it through `used` (Release);
    // readers only look at slots below `used` (Acquire).
    unsafe {
        (&mut (*slot).name)[..bytes.len()].copy_from_slice(bytes);
        (*slot).name_len = bytes.len() as u32;
    }
}

fn slot_ptr(c: &Counters, i: u32) -> *mut Slot {
    c.slot(i) as *const Slot as *mut Slot
}

fn ensure_slot(c: &Counters, i: u32, name: &str) {
    if c.used() <= i {
        write_name(slot_ptr(c, i), name);
        c.root().used.store(i + 1, Ordering::Release);
    }
}

fn find_or_add(c: &Counters, name: &str) -> Option<u32> {
    let key = &name.as_bytes()[..name.len().min(NAME_MAX)];
    let used = c.used();
    for i in 2..used {
        let s = c.slot(i);
        if &s.name[..(s.name_len as usize).min(NAME_MAX)] == key {
            return Some(i);
        }
    }
    if used >= c.capacity() {
        return None;
    }
    write_name(slot_ptr(c, used), name);
    c.root().used.store(used + 1, Ordering::Release);
    Some(used)
}
