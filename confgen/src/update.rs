//! `crawlward update-ranges`: download each agent's published range file,
//! keep the last good copy when a download or a parse fails, render again,
//! test the configuration and reload nginx only when something changed.

use crate::output::{write_all, Written};
use crate::render::{render, RenderOptions};
use crawlward_policy::ranges::{file_name, parse_published, RangeFile};
use crawlward_policy::{load_with, LoadOptions};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const EXIT_SOME_FAILED: i32 = 5;

pub struct UpdateOptions {
    pub out: PathBuf,
    pub root: Option<String>,
    pub ranges_dir: Option<PathBuf>,
    pub timeout: Duration,
    pub test_command: String,
    pub reload_command: String,
    pub no_reload: bool,
}

/// What happened to one URL.
enum Fetched {
    Changed { added: usize, removed: usize, total: usize },
    Unchanged(usize),
    Failed(String),
}

pub fn update_ranges(policy_path: &Path, opts: &UpdateOptions) -> i32 {
    let load_opts = LoadOptions { ranges_dir: opts.ranges_dir.clone(), root: opts.root.clone() };
    let policy = match load_with(policy_path, &load_opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return crate::cli::EXIT_POLICY;
        }
    };
    let dir = load_opts.ranges_dir_for(&policy);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: cannot create {}\n  caused by: {e}", dir.display());
        return crate::cli::EXIT_IO;
    }
    // Agents whose ranges the policy gives inline are not downloaded.
    let urls: BTreeSet<String> = policy
        .identity
        .catalogue
        .agents()
        .iter()
        .filter(|a| a.ranges_as_of.as_deref() != Some("policy"))
        .filter_map(|a| a.ranges_url.clone())
        .collect();
    let agent = ureq::Agent::config_builder().timeout_global(Some(opts.timeout)).build().new_agent();
    let mut failed = 0;
    for url in &urls {
        let outcome = fetch_one(&agent, &dir, url);
        match &outcome {
            Fetched::Changed { added, removed, total } => println!("changed   {url}: +{added} -{removed}, {total} networks"),
            Fetched::Unchanged(total) => println!("unchanged {url}: {total} networks"),
            Fetched::Failed(why) => {
                failed += 1;
                let kept = match crawlward_policy::downloaded(&dir, url) {
                    Some((nets, as_of)) => format!("keeping the copy from {} ({} networks)", as_of.unwrap_or_default(), nets.len()),
                    None => match crawlward_policy::shipped(url) {
                        Some((nets, as_of)) => format!("keeping the shipped snapshot of {} ({} networks)", as_of.unwrap_or_default(), nets.len()),
                        None => "no copy: its agents stay unverified".to_string(),
                    },
                };
                println!("failed    {url}: {why}; {kept}");
            }
        }
    }

    // Render again with what is on disk now.
    let policy = match load_with(policy_path, &LoadOptions { ranges_dir: Some(dir.clone()), root: None }) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return crate::cli::EXIT_POLICY;
        }
    };
    let rendered = match render(&policy, &RenderOptions { root: opts.root.clone() }) {
        Ok(r) => r,
        Err(e) => return crate::cli::io_error("cannot render the templates", e),
    };
    let previous: Vec<(&str, Option<String>)> =
        rendered.files.iter().map(|(name, _)| (*name, std::fs::read_to_string(opts.out.join(name)).ok())).collect();
    let report = match write_all(&opts.out, &rendered.files) {
        Ok(r) => r,
        Err(e) => return crate::cli::io_error(&format!("cannot write to {}", opts.out.display()), e),
    };
    let changed: Vec<&String> = report.iter().filter(|(_, w)| *w != Written::Unchanged).map(|(n, _)| n).collect();
    let code = if failed > 0 { EXIT_SOME_FAILED } else { crate::cli::EXIT_OK };
    if changed.is_empty() {
        println!("the rendered configuration is unchanged: nginx is not reloaded");
        return code;
    }
    for name in &changed {
        println!("rendered  {}", opts.out.join(name).display());
    }
    if opts.no_reload {
        println!("--no-reload: nginx is not tested or reloaded");
        return code;
    }
    match run(&opts.test_command) {
        Ok(()) => {}
        Err(why) => {
            // Put the previous files back, so that a later restart does not pick up a configuration nginx refused.
            for (name, old) in &previous {
                let path = opts.out.join(name);
                let _ = match old {
                    Some(text) => write_all(&opts.out, &[(name, text.clone())]).map(|_| ()),
                    None => std::fs::remove_file(&path),
                };
            }
            eprintln!("error: `{}` failed, so the previous files are back and nginx is not reloaded\n  caused by: {why}", opts.test_command);
            return crate::cli::EXIT_NGINX;
        }
    }
    match run(&opts.reload_command) {
        Ok(()) => {
            println!("reloaded  (`{}`)", opts.reload_command);
            code
        }
        Err(why) => {
            eprintln!("error: `{}` failed\n  caused by: {why}", opts.reload_command);
            crate::cli::EXIT_IO
        }
    }
}

fn fetch_one(agent: &ureq::Agent, dir: &Path, url: &str) -> Fetched {
    let body = match agent.get(url).call() {
        Ok(mut resp) => match resp.body_mut().with_config().limit(16 << 20).read_to_vec() {
            Ok(b) => b,
            Err(e) => return Fetched::Failed(format!("cannot read the answer: {e}")),
        },
        Err(e) => return Fetched::Failed(e.to_string()),
    };
    let (nets, published) = match parse_published(&body) {
        Ok(x) => x,
        Err(e) => return Fetched::Failed(e),
    };
    let mut prefixes: Vec<String> = Vec::new();
    for n in &nets {
        let s = n.to_string();
        if !prefixes.contains(&s) {
            prefixes.push(s);
        }
    }
    let path = dir.join(file_name(url));
    let old: Option<RangeFile> = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok());
    let old_set: BTreeSet<String> = old
        .as_ref()
        .map(|f| f.prefixes.iter().cloned().collect())
        .or_else(|| crawlward_policy::shipped(url).map(|(n, _)| n.iter().map(|x| x.to_string()).collect()))
        .unwrap_or_default();
    let new_set: BTreeSet<String> = prefixes.iter().cloned().collect();
    if old.is_some() && old_set == new_set {
        return Fetched::Unchanged(new_set.len());
    }
    let file = RangeFile { url: url.to_string(), published, fetched: Some(now_rfc3339()), snapshot: None, retrieved_via: None, prefixes };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    let name = file_name(url);
    if let Err(e) = write_all(dir, &[(name.as_str(), text)]) {
        return Fetched::Failed(format!("cannot write {}: {e}", path.display()));
    }
    Fetched::Changed { added: new_set.difference(&old_set).count(), removed: old_set.difference(&new_set).count(), total: new_set.len() }
}

fn run(command: &str) -> Result<(), String> {
    let out = Command::new("sh").arg("-c").arg(command).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        let mut why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if why.is_empty() {
            why = format!("exit status {}", out.status.code().unwrap_or(-1));
        }
        Err(why)
    }
}

/// The current time as RFC 3339 UTC, to the second.
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil from days (proleptic Gregorian)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_rfc3339_and_round_trips() {
        let now = super::now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        let secs = crawlward_policy::ranges::epoch_seconds(&now).unwrap();
        let sys = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!((sys - secs).abs() < 5, "{now} {secs} {sys}");
    }
}
