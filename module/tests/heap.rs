//! (ci/build-module runs these one at a time: a block made while another
//! test's thread holds the heap's lock goes to glibc, which the counts of
//! released pages below would not see.)
//!
//! The module's heap (`src/heap.rs`): which pages an allocation reaches, and
//! that the pages of freed allocations are given back while live ones keep
//! what was written. The module itself is a cdylib that needs nginx's
//! symbols, so this test includes the file by path; its global allocator is
//! then this test's own.

#[path = "../src/heap.rs"]
mod heap;

use heap::{counted_page, in_region, panic_holding_the_lock, release_free_pages, span};

const PAGE: usize = 4096;

#[test]
fn an_allocation_reaches_the_pages_of_its_bookkeeping() {
    // inside one page
    assert_eq!(span(100, 10, PAGE), (0, 0));
    // the head 16 bytes before, on the page before
    assert_eq!(span(PAGE + 8, 10, PAGE), (0, 1));
    // a free chunk's links after the end, on the next page
    assert_eq!(span(PAGE - 200, 150, PAGE), (0, 1));
    assert_eq!(span(PAGE - 300, 150, PAGE), (0, 0));
    // past the part of the region dlmalloc has taken so far (its next piece may start
    // there), but never past the region
    assert_eq!(span(3 * PAGE - 50, 10, PAGE), (2, 3));
    assert_eq!(span((1 << 30) - 50, 10, PAGE), ((1 << 30) / PAGE - 1, (1 << 30) / PAGE - 1));
    // at 64 KiB pages, the same bytes are one page
    assert_eq!(span(PAGE + 8, 10, 16 * PAGE), (0, 0));
    assert_eq!(span(16 * PAGE + 8, 10, 16 * PAGE), (0, 1));
}

#[test]
fn freed_pages_are_given_back_and_live_ones_kept() {
    // the test binary's own allocations go through the heap too: allocate a lot, keep
    // every 64th block of 64 KiB, free the rest, release, and check that what is kept
    // still holds what was written
    let blocks: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 64 << 10]).collect();
    let kept: Vec<Vec<u8>> = blocks.into_iter().enumerate().filter(|(i, _)| i % 64 == 0).map(|(_, b)| b).collect();
    let released = release_free_pages();
    // (at 64 KiB pages, each block's page with its neighbours' bookkeeping stays)
    assert!(released >= 150 * (64 << 10), "released {released}");
    for (i, b) in kept.iter().enumerate() {
        assert!(b.iter().all(|x| *x == (i * 64) as u8));
    }
    // and the freed space is used again, reading as written
    let again: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 << 10]).collect();
    for (i, b) in again.iter().enumerate() {
        assert!(b.iter().all(|x| *x == i as u8));
    }
}

#[test]
fn dlmalloc_keeps_working_after_pages_are_given_back() {
    // allocations of every size class, freed at random, pages given back between rounds:
    // if a released page had held dlmalloc's bookkeeping, a later allocation would
    // corrupt a live block or crash
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut live: Vec<(Vec<u8>, u8)> = Vec::new();
    for round in 0..20 {
        for _ in 0..5_000 {
            let size = match next() % 10 {
                0 => 1 + (next() % (64 << 10)) as usize,
                1..=3 => 1 + (next() % 4096) as usize,
                _ => 1 + (next() % 256) as usize,
            };
            let fill = next() as u8;
            live.push((vec![fill; size], fill));
        }
        // free about two thirds, in no order
        let mut i = 0;
        while i < live.len() {
            if next() % 3 != 0 {
                live.swap_remove(i);
            } else {
                i += 1;
            }
        }
        release_free_pages();
        for (b, fill) in &live {
            assert!(b.iter().all(|x| x == fill), "round {round}: a live block changed");
        }
    }
}

#[test]
fn without_the_address_space_for_its_region_the_heap_is_glibcs() {
    // run this test binary again under an address-space limit too small for the region
    // (ulimit -v, in kB), asking for the check below
    if std::env::var_os("HEAP_TEST_LIMITED").is_some() {
        let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 << 10]).collect();
        assert!(blocks.iter().enumerate().all(|(i, b)| b.iter().all(|x| *x == i as u8)));
        drop(blocks);
        assert_eq!(release_free_pages(), 0, "no region, nothing of its own to give back");
        return;
    }
    let me = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 400000 && exec \"$0\" --exact without_the_address_space_for_its_region_the_heap_is_glibcs --test-threads 1")
        .arg(&me)
        .env("HEAP_TEST_LIMITED", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}{}", String::from_utf8_lossy(&out.stderr));
}

/// The heap's page size is the kernel's: 4 KiB here (this machine's), or what
/// `HEAP_TEST_PAGE` asks for in the runs below.
#[test]
fn the_heap_counts_the_kernels_pages() {
    let asked = std::env::var("HEAP_TEST_PAGE").ok().and_then(|p| p.parse().ok());
    // SAFETY: sysconf reads a constant.
    let kernel = unsafe { sysconf(30) } as usize;
    assert_eq!(counted_page(), asked.unwrap_or(kernel));
}

extern "C" {
    fn sysconf(name: i32) -> i64;
}

/// The stress test and the release test again, at 16 and 64 KiB page
/// geometries (Asahi's and ppc64el's or arm64 `-64k` kernels): this binary
/// run again with `HEAP_TEST_PAGE`, so that the heap counts and gives back
/// pages of that size, as it does on such a kernel.
#[test]
fn at_16_and_64_kib_pages_live_blocks_keep_what_was_written() {
    if std::env::var_os("HEAP_TEST_PAGE").is_some() {
        return;
    }
    let me = std::env::current_exe().unwrap();
    for page in ["16384", "65536"] {
        let out = std::process::Command::new(&me)
            .args([
                "--test-threads",
                "1",
                "dlmalloc_keeps_working_after_pages_are_given_back",
                "freed_pages_are_given_back_and_live_ones_kept",
                "the_heap_counts_the_kernels_pages",
            ])
            .env("HEAP_TEST_PAGE", page)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("3 passed"), "{page}: {text}{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// heap.rs counts an allocation's pages from 16 bytes before it: dlmalloc's
/// chunk head is the word before the allocation (its size, in-use bits) and
/// the previous chunk's footer the word before that. If dlmalloc's layout
/// changes, this fails before the heap can give back live bookkeeping.
#[test]
fn dlmalloc_keeps_its_bookkeeping_where_the_heap_counts_it() {
    const PINUSE: usize = 1;
    const CINUSE: usize = 2;
    let mut kept = Vec::new();
    let mut checked = 0;
    for size in (1..3000).step_by(7) {
        let b: Vec<u8> = vec![0xa5; size];
        let p = b.as_ptr() as usize;
        // (a block made while another test thread held the heap's lock is glibc's)
        if !in_region(b.as_ptr() as *mut u8) {
            kept.push(b);
            continue;
        }
        checked += 1;
        assert_eq!(p % 16, 0, "allocations are 16-byte aligned");
        // SAFETY: reads the word before a live allocation of the test's, inside the heap's
        // region (dlmalloc's chunk head), and the next chunk's head, inside the region too.
        let head = unsafe { *((p - 8) as *const usize) };
        let chunk = head & !7;
        // SAFETY: as above.
        let next_head = unsafe { *((p - 16 + chunk + 8) as *const usize) };
        assert!(head & CINUSE != 0, "{size}: the chunk head says in use: {head:#x}");
        assert!(chunk >= size + 8 && chunk <= size + 48 && chunk % 16 == 0, "{size}: chunk size {chunk}");
        assert!(next_head & PINUSE != 0, "{size}: the next chunk says its previous one is in use");
        kept.push(b);
    }
    assert!(checked > 100, "only {checked} blocks were the heap's");
}

/// A panic inside the heap's lock releases it: the next allocation does not spin.
#[test]
fn a_panic_inside_the_heap_leaves_it_unlocked() {
    assert!(std::panic::catch_unwind(panic_holding_the_lock).is_err());
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let b = [7u8; 100];
        done.send(b.len()).unwrap();
    });
    assert_eq!(wait.recv_timeout(std::time::Duration::from_secs(10)), Ok(100), "the next allocation spun on the lock");
}
