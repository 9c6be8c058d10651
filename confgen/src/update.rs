//! `crawlward update-ranges`: download each agent's published range file
//! and each catalogue feed (following the operator's redirects, and saying
//! so), keep the last good copy when a download or a parse fails (a copy found unchanged gets the time
//! of the check, which the module reports as the ranges' age), render again, test the
//! configuration and reload nginx only when something changed. With
//! `module.signatures`, it also fetches the Web Bot Auth key directories
//! the module trusts, by their own stricter rules (`directories.rs`). When the test
//! refuses the new configuration, every file this run wrote (range files and
//! rendered files) is put back as it was, so the last good set stays whole.

use crate::exit;
use crate::output::{write_all, Written};
use crate::render::{render, RenderOptions};
use crawlward_policy::ranges::{file_name, parse_published, RangeFile};
use crawlward_policy::{load_with, LoadOptions};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct UpdateOptions {
    pub out: PathBuf,
    pub root: Option<String>,
    pub ranges_dir: Option<PathBuf>,
    pub timeout: Duration,
    /// PEM root certificates to trust instead of the built-in ones.
    pub ca_file: Option<PathBuf>,
    pub test_command: String,
    pub reload_command: String,
    pub no_reload: bool,
}

/// What happened to one URL.
enum Fetched {
    /// A new list, to be written as `text` into the range file `name`.
    Changed {
        added: usize,
        removed: usize,
        total: usize,
        name: String,
        text: String,
    },
    Unchanged(usize),
    Failed(String),
}

/// Redirects followed for one URL, at most this many.
const MAX_REDIRECTS: usize = 5;

/// A redirect on the way to an operator's file.
#[derive(Debug, PartialEq, Eq)]
struct Redirect {
    status: u16,
    to: String,
}

/// What to say about the redirects a download followed: nothing when there were
/// none. Only 301 and 308 all the way say the file moved for good, so the
/// catalogue's URL is out of date.
fn redirect_note(redirects: &[Redirect]) -> String {
    let Some(last) = redirects.last() else { return String::new() };
    if redirects.iter().all(|r| matches!(r.status, 301 | 308)) {
        format!(" (moved: HTTP {} to {}; point its ranges_url there)", redirects[0].status, last.to)
    } else {
        let statuses: Vec<String> = redirects.iter().map(|r| r.status.to_string()).collect();
        format!(" (redirected: HTTP {} to {})", statuses.join(", "), last.to)
    }
}

/// Each file this run wrote into a directory, and what it held before (None: it did
/// not exist), so that the run can be taken back whole.
#[derive(Default)]
struct Undo {
    files: Vec<(PathBuf, Option<String>)>,
}

impl Undo {
    fn remember(&mut self, path: PathBuf) {
        let old = std::fs::read_to_string(&path).ok();
        self.files.push((path, old));
    }

    /// Put every remembered file back, atomically each; returns the ones that could not be.
    fn restore(&self) -> Vec<String> {
        let mut failed = Vec::new();
        for (path, old) in self.files.iter().rev() {
            let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { continue };
            let done = match old {
                Some(text) => write_all(dir, &[(name, text.clone())]).map(|_| ()),
                None => std::fs::remove_file(path).or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) }),
            };
            if let Err(e) = done {
                failed.push(format!("{}: {e}", path.display()));
            }
        }
        failed
    }
}

pub fn update_ranges(policy_path: &Path, opts: &UpdateOptions) -> i32 {
    let load_opts = LoadOptions { ranges_dir: opts.ranges_dir.clone(), root: opts.root.clone() };
    let policy = match exit::load_policy(policy_path, &load_opts) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let dir = load_opts.ranges_dir_for(&policy);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tell!("error: cannot create {}\n  caused by: {e}", dir.display());
        return exit::IO;
    }
    // Agents whose ranges the policy gives inline are not downloaded.
    let urls: BTreeSet<String> =
        policy.identity.catalogue.agents().iter().filter(|a| a.ranges_as_of.as_deref() != Some("policy")).filter_map(|a| a.ranges_url.clone()).collect();
    let tls = match tls_config(opts.ca_file.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            tell!("error: {e}");
            return exit::IO;
        }
    };
    // Redirects are followed here, not by ureq, to see each one's status and refuse a
    // downgrade from https to http.
    let agent = ureq::Agent::config_builder().timeout_global(Some(opts.timeout)).max_redirects(0).tls_config(tls.clone()).build().new_agent();
    // a redirect is followed within the operator's own domain, or to a host the catalogue's
    // lists and feeds are on: never to a host that whoever answers the URL chooses
    let list_hosts: BTreeSet<String> = urls.iter().map(String::as_str).chain(policy.feeds.iter().map(|f| f.url.as_str())).filter_map(host_of).collect();
    let download = |url: &str| download(&agent, url, &list_hosts);
    let mut failed = 0;
    let mut undo = Undo::default();
    for url in &urls {
        let (body, redirects) = download(url);
        let note = redirect_note(&redirects);
        let mut outcome = check(&dir, url, body);
        if let Fetched::Changed { name, text, .. } = &mut outcome {
            undo.remember(dir.join(&*name));
            if let Err(e) = write_all(&dir, &[(name.as_str(), std::mem::take(text))]) {
                outcome = Fetched::Failed(format!("cannot write {}: {e}", dir.join(&*name).display()));
            }
        }
        match &outcome {
            Fetched::Changed { added, removed, total, .. } => say!("changed   {url}: +{added} -{removed}, {total} networks{note}"),
            Fetched::Unchanged(total) => {
                // the kept copy's time says when the list was last confirmed (the module's
                // crawlward_ranges_age_seconds): it changes, its content and nginx do not
                let checked = match mark_checked(&dir.join(file_name(url))) {
                    Ok(()) => String::new(),
                    Err(e) => format!("; cannot mark the kept copy as checked: {e}"),
                };
                say!("unchanged {url}: {total} networks{note}{checked}");
            }
            Fetched::Failed(why) => {
                failed += 1;
                let kept = match crawlward_policy::downloaded(&dir, url) {
                    Some((nets, as_of)) => format!("keeping the copy from {} ({} networks)", as_of.unwrap_or_default(), nets.len()),
                    None => match crawlward_policy::shipped(url) {
                        Some((nets, as_of)) => format!("keeping the shipped snapshot of {} ({} networks)", as_of.unwrap_or_default(), nets.len()),
                        None => "no copy: its agents stay unverified".to_string(),
                    },
                };
                say!("failed    {url}: {why}{note}; {kept}");
            }
        }
    }

    // The catalogue feeds, kept beside the range files by the same rules.
    for feed in &policy.feeds {
        let (body, redirects) = download(&feed.url);
        let note = redirect_note(&redirects);
        match check_feed(&dir, feed, body) {
            Ok(FeedFetched::Changed { text, agents, refused, added, removed }) => {
                let name = crawlward_policy::feeds::file_name(&feed.url);
                undo.remember(dir.join(&name));
                match write_all(&dir, &[(name.as_str(), text)]) {
                    Ok(_) => say!("changed   feed {}: {agents} agents (+{added} -{removed}){}{note}", feed.url, refused_note(&refused)),
                    Err(e) => {
                        failed += 1;
                        say!("failed    feed {}: cannot write {}: {e}; keeping the last copy", feed.url, dir.join(&name).display());
                    }
                }
            }
            Ok(FeedFetched::Unchanged { agents, refused }) => {
                let checked = match mark_checked(&dir.join(crawlward_policy::feeds::file_name(&feed.url))) {
                    Ok(()) => String::new(),
                    Err(e) => format!("; cannot mark the kept copy as checked: {e}"),
                };
                say!("unchanged feed {}: {agents} agents{}{note}{checked}", feed.url, refused_note(&refused));
            }
            Err(why) => {
                failed += 1;
                let kept = match crawlward_policy::kept_feed(&dir, &feed.url) {
                    Some(f) => format!("keeping the copy from {} ({} agents)", f.fetched.unwrap_or_default(), f.agents.len()),
                    None => "no copy: its agents are not in the catalogue".to_string(),
                };
                say!("failed    feed {}: {why}{note}; {kept}", feed.url);
            }
        }
    }

    // The key directories of the agents that sign, when the module checks signatures,
    // and with module.signatures.fetch_seen those the module counted in traffic.
    let mut origins = policy.signature_directories();
    if let Some(f) = policy.module.as_ref().and_then(|m| m.signatures.as_ref()).and_then(|s| s.fetch_seen.as_ref()) {
        match crate::directories::unknown_directories(&agent, &f.status) {
            Ok(busiest) => {
                let mut list = crawlward_policy::directories::seen(&dir);
                let named = policy.named_signature_directories();
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
                let taken = crawlward_policy::directories::take_seen(&mut list, &busiest, &named, f.max, f.min_requests, now);
                for origin in &taken.dropped {
                    say!("dropped   directory {origin}: taken from traffic 30 days ago, or named by the policy now");
                    origins.retain(|o| o != origin || named.contains(o));
                }
                for d in &taken.added {
                    say!(
                        "seen      directory {}: {} requests signed here, taken from traffic ({} of at most {})",
                        d.origin,
                        d.requests,
                        list.directories.len(),
                        f.max
                    );
                    origins.push(d.origin.clone());
                }
                for (origin, requests) in &taken.full {
                    say!("left out  directory {origin}: {requests} requests signed here; the {} taken from traffic are all fetch_seen.max allows", f.max);
                }
                if !taken.added.is_empty() || !taken.dropped.is_empty() {
                    let name = crawlward_policy::directories::SEEN_FILE;
                    undo.remember(dir.join(name));
                    list.generated =
                        format!("written by crawlward update-ranges from {}; directories taken from traffic (module.signatures.fetch_seen)", f.status);
                    let mut text = serde_json::to_string_pretty(&list).unwrap_or_default();
                    text.push('\n');
                    if let Err(e) = write_all(&dir, &[(name, text)]) {
                        failed += 1;
                        say!("failed    {}: cannot write: {e}", dir.join(name).display());
                    }
                }
            }
            Err(why) => {
                failed += 1;
                say!("failed    status {}: {why}; the directories taken from traffic before are kept", f.status);
            }
        }
    }
    let fetcher = crate::directories::Fetcher::new(opts.timeout, tls);
    for origin in origins {
        let name = crawlward_policy::directories::file_name(&origin);
        let old = crawlward_policy::directories::kept(&dir, &origin);
        let checked = fetcher.fetch(&origin).and_then(|body| crawlward_policy::directories::check(&origin, &body, &now_rfc3339()));
        match checked {
            Ok(new) if old.as_ref().is_some_and(|o| o.directory == new.directory) => {
                let checked = match mark_checked(&dir.join(&name)) {
                    Ok(()) => String::new(),
                    Err(e) => format!("; cannot mark the kept copy as checked: {e}"),
                };
                say!("unchanged directory {origin}: {}{checked}", keys(new.keys));
            }
            Ok(new) => {
                undo.remember(dir.join(&name));
                let mut text = serde_json::to_string_pretty(&new).unwrap_or_default();
                text.push('\n');
                match write_all(&dir, &[(name.as_str(), text)]) {
                    Ok(_) => say!("changed   directory {origin}: {} (was {})", keys(new.keys), old.map_or("none".to_string(), |o| keys(o.keys))),
                    Err(e) => {
                        failed += 1;
                        say!("failed    directory {origin}: cannot write {}: {e}; keeping the last copy", dir.join(&name).display());
                    }
                }
            }
            Err(why) => {
                failed += 1;
                let kept = match old {
                    Some(o) => format!("keeping the copy from {} ({})", o.fetched, keys(o.keys)),
                    None => "no copy: its signatures stay unverified".to_string(),
                };
                say!("failed    directory {origin}: {why}; {kept}");
            }
        }
    }

    // Render again with what is on disk now.
    let policy = match load_with(policy_path, &LoadOptions { ranges_dir: Some(dir.clone()), root: None }) {
        Ok(p) => p,
        Err(e) => {
            tell!("{e}");
            take_back(&undo);
            return exit::POLICY;
        }
    };
    let rendered = match render(&policy, &RenderOptions { root: opts.root.clone() }) {
        Ok(r) => r,
        Err(e) => {
            take_back(&undo);
            return exit::io_error("cannot render the templates", e);
        }
    };
    for (name, _) in &rendered.files {
        undo.remember(opts.out.join(name));
    }
    let report = match write_all(&opts.out, &rendered.files) {
        Ok(r) => r,
        Err(e) => {
            take_back(&undo);
            return exit::io_error(&format!("cannot write to {}", opts.out.display()), e);
        }
    };
    let changed: Vec<&String> = report.iter().filter(|(_, w)| *w != Written::Unchanged).map(|(n, _)| n).collect();
    let code = if failed > 0 { exit::SOME_DOWNLOADS_FAILED } else { exit::OK };
    if changed.is_empty() {
        say!("the rendered configuration is unchanged: nginx is not reloaded");
        return code;
    }
    for name in &changed {
        say!("rendered  {}", opts.out.join(name).display());
    }
    if opts.no_reload {
        say!("--no-reload: nginx is not tested or reloaded");
        return code;
    }
    match run(&opts.test_command) {
        Ok(()) => {}
        Err(why) => {
            // Put the previous files back, range files included, so that a later restart
            // (or the next run) does not pick up a configuration nginx refused.
            take_back(&undo);
            tell!("error: `{}` failed, so the previous files are back and nginx is not reloaded\n  caused by: {why}", opts.test_command);
            return exit::NGINX;
        }
    }
    match run(&opts.reload_command) {
        Ok(()) => {
            say!("reloaded  (`{}`)", opts.reload_command);
            code
        }
        Err(why) => {
            tell!("error: `{}` failed\n  caused by: {why}", opts.reload_command);
            if why.contains(".pid") {
                tell!("hint: nginx does not seem to be running (no master process to signal): the rendered files passed the test and take effect when nginx starts; pass --no-reload where nginx is not running");
            }
            exit::IO
        }
    }
}

/// "1 key", "2 keys".
fn keys(n: usize) -> String {
    if n == 1 {
        "1 key".to_string()
    } else {
        format!("{n} keys")
    }
}

/// TLS with the built-in roots, or with the roots of `ca_file` instead.
fn tls_config(ca_file: Option<&Path>) -> Result<ureq::tls::TlsConfig, String> {
    let Some(path) = ca_file else { return Ok(ureq::tls::TlsConfig::default()) };
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut roots = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => roots.push(c),
            Ok(_) => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    if roots.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::new_with_certs(&roots)).build())
}

/// Sets a kept copy's modification time to now, leaving its content alone.
fn mark_checked(path: &Path) -> std::io::Result<()> {
    std::fs::File::options().write(true).open(path)?.set_modified(std::time::SystemTime::now())
}

/// Puts back what this run wrote, saying what could not be.
fn take_back(undo: &Undo) {
    for problem in undo.restore() {
        tell!("error: cannot put back {problem}");
    }
}

/// The file at `url`, following at most [`MAX_REDIRECTS`] redirects (never from
/// https to http, and only to a host of `url`'s domain ([`same_domain`]) or one
/// of `list_hosts`), and the redirects followed.
fn download(agent: &ureq::Agent, url: &str, list_hosts: &BTreeSet<String>) -> (Result<Vec<u8>, String>, Vec<Redirect>) {
    let mut redirects = Vec::new();
    let mut at = url.to_string();
    loop {
        let mut resp = match agent.get(&at).call() {
            Ok(r) => r,
            Err(e) => return (Err(e.to_string()), redirects),
        };
        let status = resp.status().as_u16();
        if !(300..400).contains(&status) {
            let body = resp.body_mut().with_config().limit(16 << 20).read_to_vec().map_err(|e| format!("cannot read the answer: {e}"));
            return (body, redirects);
        }
        let location = resp.headers().get("location").and_then(|l| l.to_str().ok()).unwrap_or_default();
        let Some(next) = resolve(&at, location) else {
            return (Err(format!("HTTP {status} from {at} with no usable Location")), redirects);
        };
        if at.starts_with("https:") && !next.starts_with("https:") {
            return (Err(format!("HTTP {status} from {at} to {next}: not following a redirect from https to http")), redirects);
        }
        match (host_of(url), host_of(&next)) {
            (Some(from), Some(to)) if same_domain(&from, &to) || list_hosts.contains(&to) => {}
            (from, to) => {
                let (from, to) = (from.unwrap_or_default(), to.unwrap_or_default());
                return (
                    Err(format!(
                        "HTTP {status} from {at} to {next}: not following a redirect to {to}, outside {}'s domain and the hosts of the catalogue's lists",
                        registered_domain(&from)
                    )),
                    redirects,
                );
            }
        }
        if redirects.len() == MAX_REDIRECTS {
            return (Err(format!("more than {MAX_REDIRECTS} redirects")), redirects);
        }
        redirects.push(Redirect { status, to: next.clone() });
        at = next;
    }
}

/// A URL's host, lower case, without its port or user.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if host.starts_with('[') { host.split(']').next().map(|h| format!("{h}]"))? } else { host.split(':').next()?.to_string() };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The domain a host is registered under, as far as crawlward tells without a
/// public-suffix list: its last two labels, or three when the second-to-last
/// is a short second-level label under a country code (`example.co.uk`); an
/// address is its own.
fn registered_domain(host: &str) -> String {
    let labels: Vec<&str> = host.split('.').collect();
    if host.starts_with('[') || host.parse::<std::net::IpAddr>().is_ok() || labels.len() <= 2 {
        return host.to_string();
    }
    let n = labels.len();
    let keep = if labels[n - 1].len() == 2 && labels[n - 2].len() <= 3 { 3 } else { 2 };
    labels[n.saturating_sub(keep)..].join(".")
}

/// Whether `to` is `from`'s host or another host of its registered domain
/// (`developers.google.com` to `www.google.com`).
fn same_domain(from: &str, to: &str) -> bool {
    from == to || registered_domain(from) == registered_domain(to)
}

/// A Location header's target, made absolute against the URL that sent it.
fn resolve(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    if location.is_empty() {
        return None;
    }
    if location.starts_with("https://") || location.starts_with("http://") {
        return Some(location.to_string());
    }
    let (scheme, rest) = base.split_once("://")?;
    if let Some(net_path) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{net_path}"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    if location.starts_with('/') {
        return Some(format!("{scheme}://{authority}{location}"));
    }
    // relative to the base's directory
    let path = rest[authority.len()..].split(['?', '#']).next().unwrap_or("");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    Some(format!("{scheme}://{authority}{dir}{location}"))
}

/// What an operator's file that holds no networks says instead (Google's old URLs
/// answer `{"Action needed": "update the location ..."}`), cut short and printable.
fn operator_note(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let text: Vec<String> = v.as_object()?.iter().filter_map(|(k, v)| v.as_str().map(|v| format!("{k}: {v}"))).collect();
    let mut note: String = text.join("; ").chars().filter(|c| !c.is_control()).take(200).collect();
    if note.is_empty() {
        return None;
    }
    if text.join("; ").chars().filter(|c| !c.is_control()).count() > 200 {
        note.push_str("...");
    }
    Some(note)
}

/// What the downloaded body means for the kept copy of `url` in `dir`.
fn check(dir: &Path, url: &str, body: Result<Vec<u8>, String>) -> Fetched {
    let body = match body {
        Ok(b) => b,
        Err(e) => return Fetched::Failed(e),
    };
    let (nets, published) = match parse_published(&body) {
        Ok(x) => x,
        Err(e) => {
            return Fetched::Failed(match operator_note(&body) {
                Some(note) => format!("{e}; the file says \"{note}\""),
                None => e,
            })
        }
    };
    let mut seen = std::collections::HashSet::new();
    let prefixes: Vec<String> = nets.iter().map(|n| n.to_string()).filter(|s| seen.insert(s.clone())).collect();
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
    Fetched::Changed {
        added: new_set.difference(&old_set).count(),
        removed: old_set.difference(&new_set).count(),
        total: new_set.len(),
        name: file_name(url),
        text,
    }
}

/// What a feed's download means for its kept copy.
enum FeedFetched {
    Changed { text: String, agents: usize, refused: Vec<String>, added: usize, removed: usize },
    Unchanged { agents: usize, refused: Vec<String> },
}

/// What the downloaded feed means for its kept copy in `dir`: written only
/// when its agents (or what it refused) changed.
fn check_feed(dir: &Path, feed: &crawlward_policy::FeedV, body: Result<Vec<u8>, String>) -> Result<FeedFetched, String> {
    let mut file = crawlward_policy::feeds::parse(&feed.url, &body?, feed.purpose)?;
    let old = crawlward_policy::kept_feed(dir, &feed.url);
    let names = |f: &crawlward_policy::feeds::FeedFile| f.agents.iter().map(|a| a.name.clone()).collect::<BTreeSet<String>>();
    let (agents, refused) = (file.agents.len(), file.refused.clone());
    if agents == 0 {
        // as a range file with no networks: a broken or emptied list keeps the last good copy
        return Err(format!("the feed gives no agent crawlward can use{}: the kept copy stays", refused_note(&refused)));
    }
    if let Some(old) = &old {
        if old.agents == file.agents && old.refused == file.refused && old.version == file.version {
            return Ok(FeedFetched::Unchanged { agents, refused });
        }
    }
    let (new_names, old_names) = (names(&file), old.as_ref().map(names).unwrap_or_default());
    file.fetched = Some(now_rfc3339());
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    Ok(FeedFetched::Changed { text, agents, refused, added: new_names.difference(&old_names).count(), removed: old_names.difference(&new_names).count() })
}

/// "; N entries refused: ...", the first few, printable.
fn refused_note(refused: &[String]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = refused.iter().take(5).map(|r| r.chars().filter(|c| !c.is_control()).collect()).collect();
    let more = if refused.len() > 5 { format!("; and {} more", refused.len() - 5) } else { String::new() };
    format!("; {} refused: {}{more}", refused.len(), shown.join("; "))
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
    crawlward_policy::ranges::rfc3339(secs)
}

#[cfg(test)]
mod tests {
    use super::{host_of, operator_note, redirect_note, resolve, same_domain, Redirect};

    #[test]
    fn a_redirect_stays_within_the_operators_domain() {
        assert_eq!(host_of("https://User@Developers.Google.com:443/x").as_deref(), Some("developers.google.com"));
        assert_eq!(host_of("http://[2001:db8::1]:8080/x").as_deref(), Some("[2001:db8::1]"));
        assert!(same_domain("developers.google.com", "www.google.com"));
        assert!(same_domain("openai.com", "cdn.openai.com"));
        assert!(same_domain("www.example.co.uk", "lists.example.co.uk"));
        assert!(!same_domain("www.example.co.uk", "evil.co.uk"), "a country's second-level label is not a domain");
        assert!(!same_domain("developers.google.com", "google.com.evil.example"));
        assert!(!same_domain("developers.google.com", "googlebot.example"));
        assert!(!same_domain("127.0.0.1", "localhost"));
        assert!(!same_domain("127.0.0.1", "127.0.0.2"));
    }

    #[test]
    fn locations_resolve_against_the_url_that_sent_them() {
        let base = "https://developers.google.com/static/search/apis/ipranges/googlebot.json";
        assert_eq!(resolve(base, "https://x.example/a.json").as_deref(), Some("https://x.example/a.json"));
        assert_eq!(resolve(base, "//x.example/a.json").as_deref(), Some("https://x.example/a.json"));
        assert_eq!(
            resolve(base, "/static/crawling/ipranges/common-crawlers.json").as_deref(),
            Some("https://developers.google.com/static/crawling/ipranges/common-crawlers.json")
        );
        assert_eq!(resolve(base, "other.json").as_deref(), Some("https://developers.google.com/static/search/apis/ipranges/other.json"));
        assert_eq!(resolve("http://127.0.0.1:8080/a?b=/c", "d.json").as_deref(), Some("http://127.0.0.1:8080/d.json"));
        assert_eq!(resolve(base, " "), None);
    }

    #[test]
    fn a_permanent_move_asks_for_the_new_url_and_a_temporary_one_does_not() {
        let to = |status: u16, to: &str| Redirect { status, to: to.into() };
        assert_eq!(redirect_note(&[]), "");
        assert_eq!(redirect_note(&[to(301, "https://b/x.json")]), " (moved: HTTP 301 to https://b/x.json; point its ranges_url there)");
        assert_eq!(redirect_note(&[to(308, "https://b/x"), to(301, "https://c/x")]), " (moved: HTTP 308 to https://c/x; point its ranges_url there)");
        assert_eq!(redirect_note(&[to(302, "https://b/x.json")]), " (redirected: HTTP 302 to https://b/x.json)");
        assert_eq!(redirect_note(&[to(301, "https://b/x"), to(302, "https://c/x")]), " (redirected: HTTP 301, 302 to https://c/x)");
    }

    #[test]
    fn a_file_without_networks_says_what_the_operator_wrote_instead() {
        let google = br#"{"Action needed": "update the location you're fetching from to <https://developers.google.com/static/crawling/ipranges/user-triggered-fetchers.json>"}"#;
        assert_eq!(
            operator_note(google).as_deref(),
            Some("Action needed: update the location you're fetching from to <https://developers.google.com/static/crawling/ipranges/user-triggered-fetchers.json>")
        );
        assert_eq!(operator_note(b"{\"prefixes\": []}"), None);
        assert_eq!(operator_note(b"<html>"), None);
        let long = format!("{{\"a\": \"{}\\u0007\"}}", "x".repeat(300));
        let note = operator_note(long.as_bytes()).unwrap();
        assert!(note.ends_with("...") && note.len() == 203 && !note.contains('\u{7}'), "{note}");
    }

    #[test]
    fn now_is_rfc3339_and_round_trips() {
        let now = super::now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        let secs = crawlward_policy::ranges::epoch_seconds(&now).unwrap();
        let sys = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!((sys - secs).abs() < 5, "{now} {secs} {sys}");
    }
}
