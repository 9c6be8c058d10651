//! The policy parser and validator: any text as a policy file. A policy is
//! accepted or refused with located problems; nothing panics, and every
//! problem's position points inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match crawlward_policy::load_str("fuzz.yaml", text) {
        Ok(policy) => {
            let _ = policy.warnings();
            // what the module and explain read from an accepted policy
            let _ = policy.facet_guard();
            let _ = policy.identity.to_file("fuzz.yaml");
        }
        Err(e) => {
            assert!(!e.problems.is_empty(), "a refused policy names its problems");
            // YAML breaks lines at LF, CR and CR LF: counting each CR and LF is an upper bound
            let lines = text.matches(['\n', '\r']).count() + 1;
            for p in &e.problems {
                if let Some(pos) = p.position {
                    assert!(pos.line >= 1 && pos.line <= lines, "line {} of {lines}: {p:?}", pos.line);
                }
            }
        }
    }
});
