//! A table in a shared zone: one block from the zone's slab holding a
//! header, a power-of-two array of bucket heads (none for a table without an
//! index) and an array of entries, laid out by the master in the zone's init.
//! The DNS verdict cache and the crawl budgets view it under the slab's
//! mutex ([`Table::with`]); their logic (`crawlward_policy::verdict_cache`,
//! `budget_table`) works on the three parts as plain Rust slices. The
//! counters, all atomics, view it without the lock ([`Table::view`]).

use crawlward_policy::layout::{Fingerprint, Kind};
use ngx::ffi::{ngx_cycle_t, ngx_pagesize, ngx_shm_zone_t, ngx_shmtx_lock, ngx_shmtx_unlock, ngx_slab_alloc_locked, ngx_slab_pool_t};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::{addr_of, addr_of_mut};

/// Holds a slab pool's mutex; unlocks when dropped, whatever happens in between.
struct Locked(*mut ngx_slab_pool_t);

impl Locked {
    /// # Safety
    /// `sp` must be a zone's initialized slab pool.
    unsafe fn new(sp: *mut ngx_slab_pool_t) -> Locked {
        // SAFETY: per the contract.
        unsafe { ngx_shmtx_lock(addr_of_mut!((*sp).mutex)) };
        Locked(sp)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: made only by Locked::new, which locked this mutex.
        unsafe { ngx_shmtx_unlock(addr_of_mut!((*self.0).mutex)) };
    }
}

/// The start of the block: what it holds, then the header; the buckets and
/// the entries follow.
#[repr(C)]
struct Root<H> {
    fingerprint: Fingerprint,
    buckets: u64,
    entries: u64,
    header: H,
}

/// The zone named `name` in a cycle's list of shared memory, if any.
///
/// # Safety
/// `cycle` must be a cycle nginx made or is making (its list is empty in nginx's init cycle).
pub unsafe fn find_zone(cycle: *mut ngx_cycle_t, name: &[u8]) -> Option<*mut ngx_shm_zone_t> {
    // SAFETY: per the contract; the list's parts hold nelts zones each.
    unsafe {
        let mut part = addr_of_mut!((*cycle).shared_memory.part);
        while !part.is_null() {
            let zones = (*part).elts as *mut ngx_shm_zone_t;
            for i in 0..(*part).nelts {
                if (*zones.add(i)).shm.name.as_bytes() == name {
                    return Some(zones.add(i));
                }
            }
            part = (*part).next;
        }
        None
    }
}

/// The first bytes of what a zone's slab pool points at, read as a fingerprint when they
/// lie inside the zone (whichever module made it); None for a zone not mapped or empty.
///
/// # Safety
/// `zone` must be a zone of the running cycle, mapped in this process.
pub unsafe fn fingerprint_of(zone: *const ngx_shm_zone_t) -> Option<Fingerprint> {
    // SAFETY: per the contract, a mapped zone starts with its slab pool (nginx initializes
    // every zone's pool); the read stays inside the zone, 8-aligned, and a fingerprint is
    // plain integers, valid for any bytes.
    unsafe {
        let start = (*zone).shm.addr as usize;
        if start == 0 {
            return None;
        }
        let data = (*((*zone).shm.addr as *const ngx_slab_pool_t)).data as usize;
        let inside = data > start && data % 8 == 0 && data.saturating_add(std::mem::size_of::<Fingerprint>()) <= start + (*zone).shm.size;
        inside.then(|| std::ptr::read_volatile(data as *const Fingerprint))
    }
}

/// The layout of a table of `H` headers and `E` entries.
pub const fn fingerprint<H, E>(kind: Kind, version: u32) -> Fingerprint {
    Fingerprint::new(kind, version, std::mem::size_of::<Root<H>>(), std::mem::size_of::<H>(), std::mem::size_of::<E>())
}

/// This cycle's view of a table in a shared zone.
pub struct Table<H, E> {
    sp: *mut ngx_slab_pool_t,
    root: *mut Root<H>,
    pub zone_size: usize,
    _entries: PhantomData<E>,
}

/// What [`Table::open`] found.
pub enum Opened<H, E> {
    /// The table of the previous cycle (a reload with the same name and size).
    Kept(Table<H, E>),
    /// A new table with this many entries.
    Made(Table<H, E>, usize),
    /// The previous cycle's table, of the same layout, laid out again for
    /// other contents (its counts start over).
    Relaid(Table<H, E>, usize),
}

impl<H, E> Table<H, E> {
    /// In the zone's init (in the master, before workers start): the table
    /// the zone holds, if it has this `fingerprint`, else a new one laid
    /// out by `layout` (bytes -> buckets, entries) with `header` and
    /// `entry()` written in every entry, then `init` run on it. Err says
    /// why not.
    ///
    /// # Safety
    /// `zone` must be the zone nginx passes to its init, with an initialized slab pool.
    pub unsafe fn open(
        zone: *mut ngx_shm_zone_t,
        fingerprint: &Fingerprint,
        layout: impl Fn(usize) -> Option<(usize, usize)>,
        header: H,
        entry: impl Fn() -> E,
        init: impl FnOnce(&mut H, &mut [u32], &mut [E]),
    ) -> Result<Opened<H, E>, String> {
        // SAFETY: per the contract; the block is 8-aligned (slab pages, and 4-byte buckets
        // come in an even count before the 8-aligned entries), and is fully written before
        // any slice is made over it.
        unsafe {
            let sp = (*zone).shm.addr as *mut ngx_slab_pool_t;
            let zone_size = (*zone).shm.size;
            let table = |root| Table { sp, root, zone_size, _entries: PhantomData };
            let existing = (*sp).data as *mut Root<H>;
            // nginx hands over a kept zone only with the same tag, which is the layout's
            if !existing.is_null() && (*existing).fingerprint == *fingerprint {
                return Ok(Opened::Kept(table(existing)));
            }
            if !existing.is_null() && (*existing).fingerprint.same_layout(fingerprint) {
                // the same layout holding something else (a budget zone's catalogue
                // changed): laid out again where it is, under the mutex, so that the
                // previous cycle's workers, still finishing their requests, see a
                // whole table of the same shape at the same address
                let t = table(existing);
                let entries = (*existing).entries as usize;
                let _locked = Locked::new(sp);
                (*existing).fingerprint = *fingerprint;
                let (b, n) = ((*existing).buckets as usize, entries);
                let buckets = (existing as *mut u8).add(std::mem::size_of::<Root<H>>()) as *mut u32;
                let slots = buckets.add(b) as *mut E;
                let h = &mut *addr_of_mut!((*existing).header);
                *h = header;
                init(h, std::slice::from_raw_parts_mut(buckets, b), std::slice::from_raw_parts_mut(slots, n));
                return Ok(Opened::Relaid(t, entries));
            }
            let bytes = (*sp).pfree.saturating_sub(1) * ngx_pagesize;
            let overhead = std::mem::size_of::<Root<H>>() - std::mem::size_of::<H>();
            let (buckets, entries) = layout(bytes.saturating_sub(overhead)).ok_or("is too small")?;
            if buckets % 2 != 0 || entries < 16 {
                return Err("is too small".into());
            }
            let total = std::mem::size_of::<Root<H>>() + buckets * 4 + entries * std::mem::size_of::<E>();
            let root = {
                let _locked = Locked::new(sp);
                ngx_slab_alloc_locked(sp, total)
            } as *mut Root<H>;
            if root.is_null() {
                return Err(format!("cannot allocate {total} bytes"));
            }
            root.write(Root { fingerprint: *fingerprint, buckets: buckets as u64, entries: entries as u64, header });
            let b = (root as *mut u8).add(std::mem::size_of::<Root<H>>()) as *mut u32;
            let e = b.add(buckets) as *mut E;
            for i in 0..buckets {
                b.add(i).write(0);
            }
            for i in 0..entries {
                e.add(i).write(entry());
            }
            let t = table(root);
            t.with(init);
            (*sp).data = root as *mut c_void;
            Ok(Opened::Made(t, entries))
        }
    }

    /// Runs `f` on the header, buckets and entries under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut H, &mut [u32], &mut [E]) -> T) -> T {
        // SAFETY: sp and root point into the shared zone, mapped at the same address in every
        // process for the cycle's life; root's counts describe the block after it (written by
        // open before workers start, never changed after). The mutex serializes every access
        // from all processes, so the slices are not aliased while f runs.
        unsafe {
            let _locked = Locked::new(self.sp);
            let (b, e) = ((*self.root).buckets as usize, (*self.root).entries as usize);
            let buckets = (self.root as *mut u8).add(std::mem::size_of::<Root<H>>()) as *mut u32;
            let entries = buckets.add(b) as *mut E;
            f(&mut *addr_of_mut!((*self.root).header), std::slice::from_raw_parts_mut(buckets, b), std::slice::from_raw_parts_mut(entries, e))
        }
    }

    /// The header and the entries without the lock, for a table whose header and entries
    /// change only through atomics once [`Table::open`] returns (the counters): any number
    /// of processes then read and count at once. Such a table is never passed to
    /// [`Table::with`], whose `&mut` would alias these references.
    pub fn view(&self) -> (&H, &[E])
    where
        H: Sync,
        E: Sync,
    {
        // SAFETY: as in `with`, the pointers and counts are the cycle's and fixed; the
        // references are shared, and H and E being Sync (atomics) make shared access from
        // every process sound without the mutex.
        unsafe {
            let (b, e) = ((*self.root).buckets as usize, (*self.root).entries as usize);
            let entries = (self.root as *const u8).add(std::mem::size_of::<Root<H>>() + b * 4) as *const E;
            (&*addr_of!((*self.root).header), std::slice::from_raw_parts(entries, e))
        }
    }
}
