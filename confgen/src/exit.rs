//! crawlward's exit codes, in one place, with the two ways every command
//! reaches them: loading the policy (its warnings printed, its errors
//! reported) and reporting an I/O error. `--help` and the manual pages list
//! the codes from [`HELP`].

use crawlward_policy::{load_str, load_str_with, load_with, LoadOptions, Policy};
use std::path::Path;

/// Success.
pub const OK: i32 = 0;
/// The policy has errors: nothing was written (for analyze, also a bad
/// labels or aggregates file, or logs with no line it reads).
pub const POLICY: i32 = 1;
/// The command line was wrong.
pub const USAGE: i32 = 2;
/// A file could not be read or written.
pub const IO: i32 = 3;
/// `nginx -t` rejected the configuration.
pub const NGINX: i32 = 4;
/// `update-ranges`: some downloads failed; their last good copies are kept.
pub const SOME_DOWNLOADS_FAILED: i32 = 5;
/// `analyze`: the report was written, and the search-crawler check found a
/// verified search crawler answered 429 or 5xx, or robots.txt answered
/// other than 200.
pub const CHECK_FAILED: i32 = 6;
/// `check`: nginx's worker user cannot read the installed robots.txt, which
/// nginx would answer with 403; or the ladder's cookie key file, which nginx
/// reads at start, is missing or holds no key that signs.
pub const UNREADABLE: i32 = 7;

/// The codes as `--help` lists them.
pub const HELP: &str = "Exit codes: 0 success, 1 policy errors (nothing written; for analyze, also a bad labels or aggregates file, or logs with no line it reads), 2 usage, 3 I/O error, 4 nginx -t rejected the configuration, 5 update-ranges: some downloads failed (their last good copies are kept), 6 analyze: a verified search crawler got 429 or 5xx, or robots.txt answered other than 200 (the search-crawler check), 7 check: nginx's worker user cannot read the installed robots.txt, or the ladder's cookie key file is missing or holds no key that signs.";

/// Say what failed and why; [`IO`].
pub fn io_error(what: &str, e: impl std::fmt::Display) -> i32 {
    tell!("error: {what}\n  caused by: {e}");
    IO
}

/// The policy at `path`, its warnings printed: the one way every command
/// loads it, so that the daily `update-ranges` warns as `render` does. On
/// errors they are printed and the code is [`POLICY`].
pub fn load_policy(path: &Path, opts: &LoadOptions) -> Result<Policy, i32> {
    match load_with(path, opts) {
        Ok(p) => {
            for w in p.warnings() {
                tell!("warning: {}: {}: {}", path.display(), w.path, w.message);
            }
            Ok(p)
        }
        Err(e) => {
            tell!("{e}");
            Err(POLICY)
        }
    }
}

/// What `identify` and `analyze` use with no policy: the built-in catalogue,
/// its default actions and robots.txt rules.
pub const BUILT_IN: &str = "the built-in catalogue";
const NO_POLICY: &str = "site: {canonical_url: https://example.org, upstream_workers: 1}\nrobots: {}\n";

/// The policy of a command run without one ([`BUILT_IN`]): published ranges
/// from the copies in `ranges_dir` when one is given, else from the shipped
/// snapshot (never from a directory the command was not told of).
pub fn load_built_in(ranges_dir: Option<std::path::PathBuf>) -> Result<Policy, i32> {
    let loaded = match ranges_dir {
        Some(dir) => load_str_with(BUILT_IN, NO_POLICY, &LoadOptions { ranges_dir: Some(dir), root: None }),
        None => load_str(BUILT_IN, NO_POLICY),
    };
    loaded.map_err(|e| {
        tell!("{e}");
        POLICY
    })
}
