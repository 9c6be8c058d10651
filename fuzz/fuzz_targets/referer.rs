//! The Referer host parser: any bytes. A host, when there is one, is lower
//! case, made of host-name bytes (or a bracketed IPv6 literal), without a
//! trailing dot, and is what the same-site check compares.
#![no_main]

use crawlward_policy::query::{referer_host, same_site};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let host = referer_host(data);
    if let Some(h) = &host {
        assert!(!h.is_empty() && !h.ends_with('.'), "{data:?} gave {h:?}");
        assert!(
            h.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_' | b'[' | b']' | b':')),
            "{data:?} gave {h:?}"
        );
        let lower = data.to_ascii_lowercase();
        assert!(lower.starts_with(b"http://") || lower.starts_with(b"https://"));
        // the host is the one the Referer's own text names
        assert!(String::from_utf8_lossy(&lower).contains(h.as_str()));
        assert!(same_site(data, &[h.to_ascii_uppercase()]));
    }
    assert!(!same_site(data, &[]));
    if host.is_none() {
        assert!(!same_site(data, &["heratio.org".into(), String::new()]));
    }
});
