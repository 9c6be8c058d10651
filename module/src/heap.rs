//! The module's Rust heap: its own mapping, apart from nginx's.
//!
//! Reading the catalogue in nginx's master makes and frees about 140,000
//! allocations (700 agents). On glibc's heap they leave hundreds of free
//! chunks between nginx's own blocks, which every worker inherits, and
//! nginx's request pools are then cut from them and merged back on every
//! request: 100 to 200 instructions a request that plain nginx does not pay
//! (docs/benchmarks.md). So every Rust allocation of the module goes to a
//! dlmalloc of its own, whose memory is one region mapped for it alone, and
//! glibc's heap holds only what nginx allocates, as without the module.
//!
//! dlmalloc keeps the pages of its free chunks, which glibc's `malloc_trim`
//! would give back. [`release_free_pages`] does that after each
//! configuration load: the heap counts, for every page of the region, the
//! live allocations that reach into it (with dlmalloc's bookkeeping around
//! them, see [`span`]), and a page that none reaches holds only the inside
//! of free chunks, which is given back to the system.
//!
//! If the region cannot be mapped (an address-space limit), or is full,
//! allocations go to glibc's `malloc` as before: freeing looks at the
//! address, so both kinds can be live at once.

use dlmalloc::{Allocator, Dlmalloc};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The region's size: address space reserved with no access (`PROT_NONE`,
/// no swap reserved, charged to no process's commit), of which dlmalloc's
/// pieces are made writable as it takes them.
const REGION: usize = 1 << 30;
/// dlmalloc takes memory from the region this much at a time.
const GRANULARITY: usize = 1 << 20;

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut c_void;
    fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
    fn madvise(addr: *mut c_void, len: usize, advice: i32) -> i32;
    fn sysconf(name: i32) -> i64;
}
const PROT_NONE: i32 = 0;
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;
const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
const MADV_DONTNEED: i32 = 4;
const SC_PAGESIZE: i32 = 30;

/// The pages the heap counts and gives back: the kernel's page size, read at
/// run time (4 KiB on x86-64; 16 KiB on Apple silicon's Linux, 64 KiB on
/// ppc64el and arm64 `-64k` kernels: `madvise` rounds a length up to whole
/// pages, so counting smaller ones would drop live memory). Under this
/// module's own tests, `HEAP_TEST_PAGE` may ask for a larger multiple of it,
/// to run the heap at another geometry.
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let kernel = usize::try_from(unsafe { sysconf(SC_PAGESIZE) }).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096);
    #[cfg(test)]
    {
        extern "C" {
            fn getenv(name: *const std::ffi::c_char) -> *const std::ffi::c_char;
        }
        // SAFETY: getenv of a NUL-terminated name, read before any thread starts (the
        // first allocation); the value is parsed without allocating.
        let asked = unsafe { getenv(c"HEAP_TEST_PAGE".as_ptr()) };
        if !asked.is_null() {
            // SAFETY: a C string from the environment.
            let text = unsafe { std::ffi::CStr::from_ptr(asked) }.to_bytes();
            let n = text.iter().try_fold(0usize, |n, b| b.is_ascii_digit().then(|| n * 10 + usize::from(b - b'0')));
            if let Some(n) = n.filter(|n| n.is_power_of_two() && *n >= kernel && *n <= GRANULARITY) {
                return n;
            }
        }
    }
    kernel
}

/// A private anonymous mapping of `len` bytes with access `prot`, or null.
fn map(len: usize, prot: i32) -> *mut u8 {
    // SAFETY: a new anonymous mapping at an address the kernel chooses touches no
    // existing memory.
    let p = unsafe { mmap(null_mut(), len, prot, MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0) };
    if p == MAP_FAILED {
        null_mut()
    } else {
        p as *mut u8
    }
}

/// The region and what dlmalloc has taken of it: dlmalloc's system allocator.
struct Region {
    base: Cell<*mut u8>,
    /// Bytes handed to dlmalloc, from `base`; each piece right after the one
    /// before, so that dlmalloc grows its one segment instead of starting others.
    used: Cell<usize>,
    /// Per page of the region, the live allocations that reach into it.
    counts: Cell<*mut u32>,
    /// The page size (see [`page_size`]), set with the region.
    page: Cell<usize>,
    /// The region could not be mapped: glibc's malloc for everything.
    failed: Cell<bool>,
}

// SAFETY: the Region is only reached under the heap's lock.
unsafe impl Send for Region {}

// SAFETY: `alloc` hands out disjoint, zeroed pieces of a mapping that lives as
// long as the process, and nothing else in the process uses that mapping; the
// pieces are never given back (`free` and `free_part` say so), so dlmalloc
// owns each one for good.
unsafe impl Allocator for Region {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        if self.base.get().is_null() && !self.failed.get() {
            let page = page_size();
            let (base, counts) = (map(REGION, PROT_NONE), map(REGION / page * 4, PROT_READ_WRITE) as *mut u32);
            self.page.set(page);
            self.base.set(base);
            self.counts.set(counts);
            self.failed.set(base.is_null() || counts.is_null());
        }
        if self.failed.get() || size > REGION - self.used.get() {
            return (null_mut(), 0, 0);
        }
        // SAFETY: used + size <= REGION: inside the mapping.
        let p = unsafe { self.base.get().add(self.used.get()) };
        // the piece becomes writable (and is charged) only now; dlmalloc asks in whole
        // granules, which are whole pages. SAFETY: p..p+size is inside the region, which
        // nothing else uses.
        if unsafe { mprotect(p as *mut c_void, size, PROT_READ_WRITE) } != 0 {
            return (null_mut(), 0, 0);
        }
        self.used.set(self.used.get() + size);
        REGION_BASE.store(self.base.get() as usize, Ordering::Release);
        REGION_END.store(self.base.get() as usize + self.used.get(), Ordering::Release);
        (p, size, 0)
    }
    fn remap(&self, _ptr: *mut u8, _oldsize: usize, _newsize: usize, _can_move: bool) -> *mut u8 {
        null_mut()
    }
    fn free_part(&self, _ptr: *mut u8, _oldsize: usize, _newsize: usize) -> bool {
        false
    }
    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }
    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }
    fn allocates_zeros(&self) -> bool {
        true
    }
    fn page_size(&self) -> usize {
        if self.page.get() == 0 {
            page_size()
        } else {
            self.page.get()
        }
    }
}

impl Region {
    /// Adds `delta` to the count of every page that the allocation at `p` of
    /// `size` bytes reaches, its bookkeeping included.
    ///
    /// # Safety
    /// `p` must be an allocation of dlmalloc's, in the region.
    unsafe fn count(&self, p: *mut u8, size: usize, delta: u32) {
        let (first, last) = span(p as usize - self.base.get() as usize, size, self.page.get());
        for page in first..=last {
            // SAFETY: page < REGION / page size (span stays inside the region), and `counts`
            // has that many entries.
            let count = unsafe { &mut *self.counts.get().wrapping_add(page) };
            *count = count.wrapping_add(delta);
        }
    }
}

/// The first and last page that an allocation at `offset` of `size` bytes
/// reaches in the region. dlmalloc keeps
/// its bookkeeping at the edges of chunks: the 16 bytes before an
/// allocation (the chunk's head and the previous chunk's size), and, for a
/// free chunk, its first 64 bytes (its links) and its size in the next
/// chunk's first word. A free chunk always lies between two live chunks (it
/// is merged with any free neighbour), or between one and the region's
/// ends, so it starts at most 16 bytes after an allocation's end (the
/// chunk's rounding) and ends 16 bytes before the next allocation: counting
/// from 16 bytes before each allocation to 96 after it covers every byte of
/// bookkeeping, and a page no allocation reaches holds nothing dlmalloc
/// reads before handing it out again. The span depends on the allocation
/// alone (not on how much of the region dlmalloc has taken so far), so that
/// freeing takes off exactly the pages that allocating counted.
pub(crate) fn span(offset: usize, size: usize, page: usize) -> (usize, usize) {
    let first = offset.saturating_sub(16) / page;
    let last = (offset + size + 96).min(REGION - 1) / page;
    (first, last)
}

/// Panics while the heap's lock is held (for its tests: the lock must be
/// free again after the unwind).
#[cfg(test)]
#[allow(dead_code)] // used by tests/heap.rs, which includes this file
pub(crate) fn panic_holding_the_lock() {
    HEAP.with(|_| panic!("inside the heap's lock"))
}

/// The page size the heap counts in (for its tests).
#[cfg(test)]
#[allow(dead_code)] // used by tests/heap.rs, which includes this file
pub(crate) fn counted_page() -> usize {
    HEAP.with(|dl| dl.allocator().page_size())
}

/// The region's start and the end of what dlmalloc has taken of it, for
/// telling its blocks from glibc's without the lock: a block is freed after
/// it was allocated, so whoever frees it sees at least the end it was cut
/// below.
static REGION_BASE: AtomicUsize = AtomicUsize::new(0);
static REGION_END: AtomicUsize = AtomicUsize::new(0);

/// Whether `p` is a block of the region (else it is glibc's).
pub(crate) fn in_region(p: *mut u8) -> bool {
    let (base, end) = (REGION_BASE.load(Ordering::Acquire), REGION_END.load(Ordering::Acquire));
    base != 0 && (p as usize) >= base && (p as usize) < end
}

struct Heap {
    locked: AtomicBool,
    dl: UnsafeCell<Dlmalloc<Region>>,
}

// SAFETY: `dl` is only reached under `locked`.
unsafe impl Sync for Heap {}

/// The heap's lock, released when dropped: also when `f` in [`Heap::with`]
/// panics, so that the next allocation does not spin for ever (the panic
/// then reaches `crate::guard`, or ends the worker, which nginx starts again).
struct Locked<'a>(&'a AtomicBool);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Heap {
    /// `f` under the lock, waiting for it (freeing and resizing: a block of
    /// the region can go nowhere else).
    fn with<T>(&self, f: impl FnOnce(&mut Dlmalloc<Region>) -> T) -> T {
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        let _held = Locked(&self.locked);
        // SAFETY: the lock is held: this is the only reference to `dl` (nginx's
        // processes run the module on one thread; the lock only keeps it sound).
        f(unsafe { &mut *self.dl.get() })
    }

    /// `f` under the lock if it is free, else None (allocating: glibc's malloc
    /// then serves it). The lock is taken only here and in [`Heap::with`], so it
    /// is held on this thread only inside them: an allocation made while it
    /// is (a panic's message, printed before the unwind releases the lock)
    /// goes to glibc instead of waiting for ever.
    fn try_with<T>(&self, f: impl FnOnce(&mut Dlmalloc<Region>) -> T) -> Option<T> {
        self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).ok()?;
        let _held = Locked(&self.locked);
        // SAFETY: as in `with`.
        Some(f(unsafe { &mut *self.dl.get() }))
    }
}

static HEAP: Heap = Heap {
    locked: AtomicBool::new(false),
    dl: UnsafeCell::new({
        let mut dl = Dlmalloc::new_with_allocator(Region {
            base: Cell::new(null_mut()),
            used: Cell::new(0),
            counts: Cell::new(null_mut()),
            page: Cell::new(0),
            failed: Cell::new(false),
        });
        assert!(dl.set_granularity(GRANULARITY));
        // its segment is never given back: no need to look for free ones
        dl.set_max_release_check_rate(0);
        dl
    }),
};

pub struct ModuleHeap;

#[global_allocator]
static GLOBAL: ModuleHeap = ModuleHeap;

// SAFETY: every allocation comes from dlmalloc (in the region) or from glibc, and
// is freed or resized by the one it came from, told apart by its address;
// dlmalloc honours the layout's size and alignment as GlobalAlloc requires.
unsafe impl GlobalAlloc for ModuleHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = HEAP.try_with(|dl| {
            // SAFETY: per GlobalAlloc's contract (a non-zero size).
            let p = unsafe { dl.malloc(layout.size(), layout.align()) };
            if !p.is_null() {
                // SAFETY: p is dlmalloc's, in the region.
                unsafe { dl.allocator().count(p, layout.size(), 1) };
            }
            p
        });
        let p = p.unwrap_or(null_mut());
        if p.is_null() {
            // SAFETY: per GlobalAlloc's contract.
            unsafe { System.alloc(layout) }
        } else {
            p
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // glibc's blocks without the lock (what a panic frees while it is held among them)
        if !in_region(p) {
            // SAFETY: p came from System.alloc with this layout.
            return unsafe { System.dealloc(p, layout) };
        }
        HEAP.with(|dl| {
            // SAFETY: p is a live allocation of dlmalloc's with this layout ...
            unsafe { dl.allocator().count(p, layout.size(), 1u32.wrapping_neg()) };
            // SAFETY: ... which is given back.
            unsafe { dl.free(p, layout.size(), layout.align()) };
        });
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !in_region(p) {
            // SAFETY: p came from System with this layout.
            return unsafe { System.realloc(p, layout, new_size) };
        }
        let q = HEAP.with(|dl| {
            // SAFETY: p is a live allocation of dlmalloc's with this layout; on success the
            // old one is gone and the new one is counted instead.
            let q = unsafe { dl.realloc(p, layout.size(), layout.align(), new_size) };
            if !q.is_null() {
                // SAFETY: as above.
                unsafe { dl.allocator().count(p, layout.size(), 1u32.wrapping_neg()) };
                // SAFETY: as above.
                unsafe { dl.allocator().count(q, new_size, 1) };
            }
            q
        });
        if !q.is_null() {
            return q;
        }
        // the region is full: to glibc, by copy
        // SAFETY: per GlobalAlloc's contract for realloc; the new layout is valid.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as above.
        let q = unsafe { System.alloc(new_layout) };
        if !q.is_null() {
            // SAFETY: p holds layout.size() bytes and q new_size, in different allocations.
            unsafe { std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size)) };
            // SAFETY: p is the live allocation of this layout, now copied.
            unsafe { self.dealloc(p, layout) };
        }
        q
    }
}

/// Gives back to the system every page of the region that no live
/// allocation reaches (see [`span`]), but the region's first and last used
/// pages (where dlmalloc's segment starts and its closing record lies), and
/// returns how many bytes that was. Run after each configuration load, whose
/// temporaries are then freed.
pub fn release_free_pages() -> usize {
    HEAP.with(|dl| {
        let r = dl.allocator();
        let (base, counts, used, page_bytes) = (r.base.get(), r.counts.get(), r.used.get(), r.page.get());
        if base.is_null() || used < 3 * page_bytes {
            return 0;
        }
        let (mut released, end) = (0, used / page_bytes - 1);
        let mut page = 1;
        while page < end {
            // SAFETY: page < used / page size <= the entries of counts.
            if unsafe { *counts.wrapping_add(page) } != 0 {
                page += 1;
                continue;
            }
            let start = page;
            // SAFETY: as above.
            while page < end && unsafe { *counts.wrapping_add(page) } == 0 {
                page += 1;
            }
            // SAFETY: the pages start..page are inside the region and hold only the inside
            // of free chunks (see span): dlmalloc reads none of it before handing it out
            // again, and then the pages read as zeros, as new ones do.
            let pages = base.wrapping_add(start * page_bytes) as *mut c_void;
            // SAFETY: as above.
            if unsafe { madvise(pages, (page - start) * page_bytes, MADV_DONTNEED) } == 0 {
                released += (page - start) * page_bytes;
            }
        }
        released
    })
}
