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
use std::ptr::addr_of_mut;

/// Holds a slab pool's mutex; unlocks when dropped, whatever happens in between.
struct Locked(*mut ngx_slab_pool_t);

impl Locked {
    /// # Safety
    /// `sp` must be a zone's initialized slab pool.
    unsafe fn new(sp: *mut ngx_slab_pool_t) -> Locked {
        // SAFETY: per the contract.
        let mutex = unsafe { addr_of_mut!((*sp).mutex) };
        // SAFETY: as above.
        unsafe { ngx_shmtx_lock(mutex) };
        Locked(sp)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: made only by Locked::new, which locked this mutex.
        let mutex = unsafe { addr_of_mut!((*self.0).mutex) };
        // SAFETY: as above.
        unsafe { ngx_shmtx_unlock(mutex) };
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

/// Where a table's parts are: its header, its buckets and its entries, with their counts.
///
/// # Safety
/// `root` must point at a `Root` whose counts describe the block after it.
unsafe fn parts_of<H, E>(root: *mut Root<H>) -> (*mut H, *mut u32, usize, *mut E, usize) {
    // SAFETY: per the contract.
    let counts = unsafe { &*root };
    let (b, e) = (counts.buckets as usize, counts.entries as usize);
    let header = root.wrapping_byte_add(std::mem::offset_of!(Root<H>, header)) as *mut H;
    let buckets = root.wrapping_byte_add(std::mem::size_of::<Root<H>>()) as *mut u32;
    let entries = buckets.wrapping_add(b) as *mut E;
    (header, buckets, b, entries, e)
}

/// The zone named `name` in a cycle's list of shared memory, if any.
///
/// # Safety
/// `cycle` must be a cycle nginx made or is making (its list is empty in nginx's init cycle).
pub unsafe fn find_zone(cycle: *mut ngx_cycle_t, name: &[u8]) -> Option<*mut ngx_shm_zone_t> {
    // SAFETY: per the contract.
    let mut part = unsafe { addr_of_mut!((*cycle).shared_memory.part) };
    // SAFETY: per the contract, the list's parts are null-terminated ...
    while let Some(p) = unsafe { part.as_ref() } {
        let zones = p.elts as *mut ngx_shm_zone_t;
        for i in 0..p.nelts {
            let zone = zones.wrapping_add(i);
            // SAFETY: ... and each holds nelts zones.
            if unsafe { &*zone }.shm.name.as_bytes() == name {
                return Some(zone);
            }
        }
        part = p.next;
    }
    None
}

/// The first bytes of what a zone's slab pool points at, read as a fingerprint when they
/// lie inside the zone (whichever module made it); None for a zone not mapped or empty.
///
/// # Safety
/// `zone` must be a zone of the running cycle, mapped in this process.
pub unsafe fn fingerprint_of(zone: *const ngx_shm_zone_t) -> Option<Fingerprint> {
    // SAFETY: per the contract.
    let shm = unsafe { &(*zone).shm };
    let start = shm.addr as usize;
    if start == 0 {
        return None;
    }
    // SAFETY: per the contract, a mapped zone starts with its slab pool (nginx initializes
    // every zone's pool).
    let data = unsafe { (*(shm.addr as *const ngx_slab_pool_t)).data } as usize;
    let inside = data > start && data % 8 == 0 && data.saturating_add(std::mem::size_of::<Fingerprint>()) <= start + shm.size;
    // SAFETY: the read stays inside the zone, 8-aligned, and a fingerprint is plain integers,
    // valid for any bytes.
    inside.then(|| unsafe { std::ptr::read_volatile(data as *const Fingerprint) })
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
    /// What this cycle laid out, or will ([`Table::relay`]).
    fingerprint: Fingerprint,
    _entries: PhantomData<E>,
}

/// What [`Table::open`] found.
pub enum Opened<H, E> {
    /// The table of the previous cycle (a reload with the same name and size).
    Kept(Table<H, E>),
    /// A new table with this many entries.
    Made(Table<H, E>, usize),
    /// The previous cycle's table, of the same layout, holding other
    /// contents (with this many entries): left as it is until this cycle's
    /// workers start, the first of which lays it out again ([`Table::relay`]).
    /// Until then [`Table::with_current`] finds nothing in it.
    Stale(Table<H, E>, usize),
}

impl<H, E> Opened<H, E> {
    /// For a table whose fingerprint holds no contents, so that one layout is one table
    /// and a stale one cannot be: the table, with its entries when it was made now.
    pub fn fixed(self) -> Result<(Table<H, E>, Option<usize>), String> {
        match self {
            Opened::Kept(t) => Ok((t, None)),
            Opened::Made(t, entries) => Ok((t, Some(entries))),
            Opened::Stale(..) => Err("holds a table laid out for other contents".into()),
        }
    }
}

impl<H, E> Table<H, E> {
    /// In the zone's init (in the master, before workers start): the table
    /// the zone holds, if it has this `fingerprint`, else a new one laid
    /// out by `layout` (bytes -> buckets, entries) with `header` and
    /// `entry()` written in every entry, then `init` run on it. Err says
    /// why not.
    ///
    /// A table of the same layout holding other contents is not written:
    /// the reload may still fail (a listen socket taken, another zone's
    /// init), and the previous cycle's workers then go on using it. It is
    /// [`Opened::Stale`], for this cycle's workers to lay out again.
    ///
    /// # Safety
    /// `zone` must be the zone nginx passes to its init, with an initialized slab pool.
    pub unsafe fn open(
        zone: *mut ngx_shm_zone_t,
        fingerprint: &Fingerprint,
        layout: impl Fn(usize) -> Option<(usize, usize)>,
        header: H,
        entry: impl Fn() -> E,
        init: impl FnOnce(&mut H, &mut [u32], &mut [E]) -> Result<(), String>,
    ) -> Result<Opened<H, E>, String> {
        // SAFETY: per the contract.
        let shm = unsafe { &(*zone).shm };
        let (sp, zone_size) = (shm.addr as *mut ngx_slab_pool_t, shm.size);
        let table = |root| Table { sp, root, zone_size, fingerprint: *fingerprint, _entries: PhantomData };
        // SAFETY: per the contract, an initialized slab pool.
        let existing = unsafe { (*sp).data } as *mut Root<H>;
        // nginx hands over a kept zone only with the same tag, which is the layout's; read
        // under the mutex, since a worker of the previous cycle may be laying it out again
        let kept = {
            // SAFETY: per the contract.
            let _locked = unsafe { Locked::new(sp) };
            // SAFETY: null, or the Root this module wrote in the zone.
            unsafe { existing.as_ref() }.map(|root| (root.fingerprint, root.entries as usize))
        };
        if let Some((was, entries)) = kept {
            if was == *fingerprint {
                return Ok(Opened::Kept(table(existing)));
            }
            if was.same_layout(fingerprint) {
                // the same layout holding something else (a budget zone's catalogue changed):
                // left as it is, for the previous cycle's workers, which go on using it if
                // this reload fails; this cycle's first worker lays it out again
                return Ok(Opened::Stale(table(existing), entries));
            }
        }
        // SAFETY: per the contract, an initialized slab pool.
        let pages = unsafe { (*sp).pfree };
        // SAFETY: nginx sets the page size when it starts, before any configuration.
        let page_size = unsafe { ngx_pagesize };
        let bytes = pages.saturating_sub(1) * page_size;
        let overhead = std::mem::size_of::<Root<H>>() - std::mem::size_of::<H>();
        let (buckets, entries) = layout(bytes.saturating_sub(overhead)).ok_or("is too small")?;
        if buckets % 2 != 0 || entries < 16 {
            return Err("is too small".into());
        }
        let total = std::mem::size_of::<Root<H>>() + buckets * 4 + entries * std::mem::size_of::<E>();
        let root = {
            // SAFETY: per the contract.
            let _locked = unsafe { Locked::new(sp) };
            // SAFETY: under the pool's mutex.
            unsafe { ngx_slab_alloc_locked(sp, total) }
        } as *mut Root<H>;
        if root.is_null() {
            return Err(format!("cannot allocate {total} bytes"));
        }
        // SAFETY: a fresh block of total bytes, 8-aligned (slab pages, and 4-byte buckets come
        // in an even count before the 8-aligned entries), fully written before any slice is
        // made over it.
        unsafe { root.write(Root { fingerprint: *fingerprint, buckets: buckets as u64, entries: entries as u64, header }) };
        // SAFETY: as above; the counts just written describe the block.
        let (_, b, _, e, _) = unsafe { parts_of::<H, E>(root) };
        for i in 0..buckets {
            // SAFETY: as above, inside the block.
            unsafe { b.wrapping_add(i).write(0) };
        }
        for i in 0..entries {
            // SAFETY: as above, inside the block.
            unsafe { e.wrapping_add(i).write(entry()) };
        }
        let t = table(root);
        t.with(init)?;
        // SAFETY: the slab pool's data, which nginx leaves to the zone's owner.
        unsafe { (*sp).data = root as *mut c_void };
        Ok(Opened::Made(t, entries))
    }

    /// Runs `f` on the header, buckets and entries under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut H, &mut [u32], &mut [E]) -> T) -> T {
        self.with_root(|_, h, b, e| f(h, b, e))
    }

    /// Like [`Table::with`], for a table that a newer cycle may lay out again
    /// in place ([`Table::relay`]): None once it holds what another cycle
    /// laid out, so that a worker of the previous cycle, still finishing its
    /// requests, never counts in slots laid out for another catalogue.
    pub fn with_current<T>(&self, f: impl FnOnce(&mut H, &mut [u32], &mut [E]) -> T) -> Option<T> {
        self.with_root(|root, h, b, e| (*root == self.fingerprint).then(|| f(h, b, e)))
    }

    /// In a process of this cycle, before its first request: lays a
    /// [`Opened::Stale`] table out again in place, under the mutex, if
    /// `decide` says so, given whether the table is laid out for this cycle
    /// already and the header it holds (which `decide` may update: who
    /// claimed the table). `header` replaces the header, then `init` lays the
    /// table out, given the header it replaced (for what must outlive the
    /// counts: budget sync's lineage). If `init` refuses, before writing
    /// anything, the table is left as it was. Ok(Some(entries)) when this
    /// call laid it out.
    pub fn relay(
        &self,
        decide: impl FnOnce(bool, &mut H) -> bool,
        header: H,
        init: impl FnOnce(&mut H, &mut [u32], &mut [E], &H) -> Result<(), String>,
    ) -> Result<Option<usize>, String>
    where
        H: Copy,
    {
        let fingerprint = self.fingerprint;
        self.with_root(|root, h, b, e| {
            if !decide(*root == fingerprint, h) || *root == fingerprint {
                return Ok(None);
            }
            if !root.same_layout(&fingerprint) {
                return Err(format!("holds {}", crawlward_policy::layout::fit(root, &fingerprint)));
            }
            let (was_root, was) = (*root, *h);
            // while it is laid out, a fingerprint no configuration has: should init panic (the
            // mutex is given back as the stack unwinds), no process counts in a half-laid table
            *root = Fingerprint { contents: 0, ..fingerprint };
            *h = header;
            if let Err(err) = init(h, b, e, &was) {
                (*h, *root) = (was, was_root);
                return Err(err);
            }
            // written last, under the same lock, once the table is whole for it: no process
            // sees this fingerprint with the previous contents, or the previous one with these
            *root = fingerprint;
            Ok(Some(e.len()))
        })
    }

    /// Runs `f` on the table's fingerprint and its parts under the zone's mutex.
    fn with_root<T>(&self, f: impl FnOnce(&mut Fingerprint, &mut H, &mut [u32], &mut [E]) -> T) -> T {
        // SAFETY: sp and root point into the shared zone, mapped at the same address in every
        // process for the cycle's life; root's counts describe the block after it (written by
        // open before workers start, never changed after). The mutex serializes every access
        // from all processes, so nothing else refers to these parts while f runs.
        let _locked = unsafe { Locked::new(self.sp) };
        // SAFETY: as above.
        let (header, buckets, b, entries, e) = unsafe { parts_of::<H, E>(self.root) };
        // SAFETY: as above.
        let fingerprint = unsafe { addr_of_mut!((*self.root).fingerprint) };
        // SAFETY: as above; the fingerprint is a field of the Root apart from its header, and
        // no reference to the Root is live (parts_of's is gone).
        let root = unsafe { &mut *fingerprint };
        // SAFETY: as above; the parts do not overlap.
        let header = unsafe { &mut *header };
        // SAFETY: as above.
        let buckets = unsafe { std::slice::from_raw_parts_mut(buckets, b) };
        // SAFETY: as above.
        let entries = unsafe { std::slice::from_raw_parts_mut(entries, e) };
        f(root, header, buckets, entries)
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
        let (header, _, _, entries, e) = unsafe { parts_of::<H, E>(self.root) };
        // SAFETY: as above.
        let header = unsafe { &*header };
        // SAFETY: as above.
        (header, unsafe { std::slice::from_raw_parts(entries, e) })
    }
}
