//! `crawlward`: render nginx configuration and robots.txt from one YAML policy.
//!
//! Exit codes:
//! - 0: success;
//! - 1: the policy has errors (each printed with file:line:column); nothing was written;
//!   for `crawlward analyze`, also a labels or aggregates file that cannot be read as one;
//! - 2: the command line is wrong (clap's usage error);
//! - 3: an I/O error: an output could not be written, or nginx could not be run;
//! - 4: `crawlward check` or `update-ranges`: nginx rejected the rendered configuration;
//! - 5: `crawlward update-ranges`: some downloads failed; their last good copies are kept;
//! - 6: `crawlward analyze`: the report was written, and the search-crawler check found a verified
//!   search crawler answered 429 or 5xx, or robots.txt answered other than 200.

/// A line on standard output, as `println!`, but a closed output (`| head`)
/// is not a panic: a command keeps doing its work when no one reads what it says.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// A line on standard error, as `eprintln!`, with the same care.
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod analyze;
mod claims;
mod cli;
mod directories;
mod exit;
mod identify;
mod init;
mod nginx;
mod output;
mod render;
mod served;
mod top;
mod update;

fn main() {
    std::process::exit(cli::execute());
}
