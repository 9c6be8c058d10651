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
use std::sync::atomic::{AtomicBool, Ordering};

/// The region's size: address space only (mapped without reserving swap,
/// and only the pages written are resident).
const REGION: usize = 1 << 30;
pub(crate) const PAGE: usize = 4096;
const PAGES: usize = REGION / PAGE;
/// dlmalloc takes memory from the region this much at a time.
const GRANULARITY: usize = 1 << 20;

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut c_void;
    fn madvise(addr: *mut c_void, len: usize, advice: i32) -> i32;
}
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;
const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
const MADV_DONTNEED: i32 = 4;

/// A private anonymous mapping of `len` bytes, or null.
fn map(len: usize) -> *mut u8 {
    // SAFETY: a new anonymous mapping at an address the kernel chooses touches no
    // existing memory.
    let p = unsafe { mmap(null_mut(), len, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0) };
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
            let (base, counts) = (map(REGION), map(PAGES * 4) as *mut u32);
            self.base.set(base);
            self.counts.set(counts);
            self.failed.set(base.is_null() || counts.is_null());
        }
        if self.failed.get() || size > REGION - self.used.get() {
            return (null_mut(), 0, 0);
        }
        // SAFETY: used + size <= REGION: inside the mapping.
        let p = unsafe { self.base.get().add(self.used.get()) };
        self.used.set(self.used.get() + size);
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
        PAGE
    }
}

impl Region {
    fn holds(&self, p: *mut u8) -> bool {
        !self.base.get().is_null() && (p as usize).wrapping_sub(self.base.get() as usize) < self.used.get()
    }

    /// Adds `delta` to the count of every page that the allocation at `p` of
    /// `size` bytes reaches, its bookkeeping included.
    ///
    /// # Safety
    /// `p` must be an allocation of dlmalloc's, in the region.
    unsafe fn count(&self, p: *mut u8, size: usize, delta: u32) {
        let (first, last) = span(p as usize - self.base.get() as usize, size);
        for page in first..=last {
            // SAFETY: page < PAGES (span stays inside the region), and `counts` has PAGES
            // entries.
            unsafe {
                let c = self.counts.get().add(page);
                *c = (*c).wrapping_add(delta);
            }
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
pub(crate) fn span(offset: usize, size: usize) -> (usize, usize) {
    let first = offset.saturating_sub(16) / PAGE;
    let last = (offset + size + 96).min(REGION - 1) / PAGE;
    (first, last)
}

struct Heap {
    locked: AtomicBool,
    dl: UnsafeCell<Dlmalloc<Region>>,
}

// SAFETY: `dl` is only reached under `locked`.
unsafe impl Sync for Heap {}

impl Heap {
    fn with<T>(&self, f: impl FnOnce(&mut Dlmalloc<Region>) -> T) -> T {
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held: this is the only reference to `dl` (nginx's
        // processes run the module on one thread; the lock only keeps it sound).
        let t = f(unsafe { &mut *self.dl.get() });
        self.locked.store(false, Ordering::Release);
        t
    }
}

static HEAP: Heap = Heap {
    locked: AtomicBool::new(false),
    dl: UnsafeCell::new({
        let mut dl = Dlmalloc::new_with_allocator(Region {
            base: Cell::new(null_mut()),
            used: Cell::new(0),
            counts: Cell::new(null_mut()),
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
        let p = HEAP.with(|dl| {
            // SAFETY: per GlobalAlloc's contract (a non-zero size).
            let p = unsafe { dl.malloc(layout.size(), layout.align()) };
            if !p.is_null() {
                // SAFETY: p is dlmalloc's, in the region.
                unsafe { dl.allocator().count(p, layout.size(), 1) };
            }
            p
        });
        if p.is_null() {
            // SAFETY: per GlobalAlloc's contract.
            unsafe { System.alloc(layout) }
        } else {
            p
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let ours = HEAP.with(|dl| {
            if !dl.allocator().holds(p) {
                return false;
            }
            // SAFETY: p is a live allocation of dlmalloc's with this layout.
            unsafe {
                dl.allocator().count(p, layout.size(), 1u32.wrapping_neg());
                dl.free(p, layout.size(), layout.align());
            }
            true
        });
        if !ours {
            // SAFETY: p came from System.alloc with this layout.
            unsafe { System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = HEAP.with(|dl| {
            if !dl.allocator().holds(p) {
                return None;
            }
            // SAFETY: p is a live allocation of dlmalloc's with this layout; on success the
            // old one is gone and the new one is counted instead.
            unsafe {
                let q = dl.realloc(p, layout.size(), layout.align(), new_size);
                if !q.is_null() {
                    dl.allocator().count(p, layout.size(), 1u32.wrapping_neg());
                    dl.allocator().count(q, new_size, 1);
                }
                Some(q)
            }
        });
        match moved {
            Some(q) if !q.is_null() => q,
            // the region is full: to glibc, by copy
            Some(_) => {
                // SAFETY: per GlobalAlloc's contract for realloc; the new layout is valid.
                unsafe {
                    let q = System.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                    q
                }
            }
            // SAFETY: p came from System with this layout.
            None => unsafe { System.realloc(p, layout, new_size) },
        }
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
        let (base, counts, used) = (r.base.get(), r.counts.get(), r.used.get());
        if base.is_null() || used < 3 * PAGE {
            return 0;
        }
        let (mut released, end) = (0, used / PAGE - 1);
        let mut page = 1;
        while page < end {
            // SAFETY: page < PAGES, counts has PAGES entries.
            if unsafe { *counts.add(page) } != 0 {
                page += 1;
                continue;
            }
            let start = page;
            // SAFETY: as above.
            while page < end && unsafe { *counts.add(page) } == 0 {
                page += 1;
            }
            // SAFETY: the pages start..page are inside the region and hold only the inside
            // of free chunks (see span): dlmalloc reads none of it before handing it out
            // again, and then the pages read as zeros, as new ones do.
            if unsafe { madvise(base.add(start * PAGE) as *mut c_void, (page - start) * PAGE, MADV_DONTNEED) } == 0 {
                released += (page - start) * PAGE;
            }
        }
        released
    })
}
