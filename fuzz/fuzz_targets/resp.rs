//! The store's replies (budget sync): any bytes, fed in pieces of any sizes.
//! The parser never panics, keeps no more than it must, and gives the same
//! replies however the bytes are cut; a batch takes any replies without
//! panicking, and an encoded command parses back to its arguments.
#![no_main]

use crawlward_policy::resp::{encode, Parser, Reply};
use crawlward_policy::sync::{Batch, BrowseReport};
use libfuzzer_sys::fuzz_target;

/// Every reply of `data` fed in pieces of `step` bytes, and the error that ended it.
fn replies(data: &[u8], step: usize) -> (Vec<Reply>, bool) {
    let mut p = Parser::default();
    let mut out = Vec::new();
    for piece in data.chunks(step.max(1)) {
        p.feed(piece);
        loop {
            match p.next_reply() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
        assert!(p.buffered() <= data.len());
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    let step = data.first().map_or(1, |b| *b as usize % 17 + 1);
    let whole = replies(data, data.len());
    let cut = replies(data, step);
    assert_eq!(whole, cut, "the same replies however the bytes arrive");
    let browse = BrowseReport { node: 1, in_flight: 2, wall_ms: 1000, stale_after_ms: 500, stale: Vec::new() };
    let mut batch = Batch::new("z", Vec::new(), Some(1), Some(browse));
    for r in &whole.0 {
        if batch.absorb(r).is_err() {
            break;
        }
    }
    // a command of the data's pieces parses back to them
    let args: Vec<&[u8]> = data.split(|b| *b == b' ').take(8).collect();
    let mut out = Vec::new();
    encode(&mut out, &args);
    let (back, failed) = replies(&out, out.len());
    if args.iter().all(|a| a.len() <= crawlward_policy::resp::MAX_BULK) {
        assert!(!failed);
        let want = Reply::Array(Some(args.iter().map(|a| Reply::Bulk(Some(a.to_vec()))).collect()));
        assert_eq!(back, vec![want]);
    }
});
