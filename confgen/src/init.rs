//! `crawlward init`: a first policy for a site, with the proportional ladder
//! in observe mode (scored and logged, nothing refused) and the key file its
//! session cookie needs. Every key it writes is a default written out, with
//! a comment saying what it does, so that the file is a place to start
//! rather than a form to fill.

use crawlward_policy::{Action, Purpose};
use std::io::Write as _;
use std::path::{Path, PathBuf};

pub struct InitOptions {
    pub site: String,
    pub out: PathBuf,
    pub key_file: PathBuf,
    pub upstream_workers: u32,
    /// No module: the policy renders for stock nginx, without the ladder.
    pub stock: bool,
}

/// Write the policy (never over an existing file) and, with the module, the
/// cookie key file unless it exists. What was written, for the user.
pub fn init(o: &InitOptions) -> Result<Vec<String>, String> {
    let origin = site_origin(&o.site)?;
    let host = origin.split_once("://").map_or(origin.as_str(), |(_, h)| h).split(':').next().unwrap_or_default().to_string();
    if o.out.exists() {
        return Err(format!("{} exists: init writes a new policy only (give --out another file)", o.out.display()));
    }
    let mut said = Vec::new();
    if !o.stock {
        // the policy names it as nginx's configuration takes it: checked before anything is written
        if let Some(why) = crawlward_policy::ladder::key_file_problem(&o.key_file.to_string_lossy()) {
            return Err(format!("--key-file: {why}"));
        }
        if o.key_file.exists() {
            let text = std::fs::read_to_string(&o.key_file).map_err(|e| format!("cannot read {}: {e}", o.key_file.display()))?;
            crawlward_policy::ladder::CookieKeys::parse(&text).map_err(|e| format!("{} exists and is not a cookie key file: {e}", o.key_file.display()))?;
            said.push(format!("kept      {} (the ladder's cookie keys: it exists)", o.key_file.display()));
        } else {
            let text = crawlward_policy::ladder::CookieKeys::new_key_file().ok_or("the system's random generator failed")?;
            write_new(&o.key_file, &text, 0o600)?;
            said.push(format!("wrote     {} (the ladder's cookie key, readable by its owner only)", o.key_file.display()));
        }
    }
    write_new(&o.out, &policy_text(o, &origin, &host), 0o644)?;
    said.push(format!("wrote     {}", o.out.display()));
    Ok(said)
}

/// `https://host[:port]` of `--site`, which may be given with a path.
fn site_origin(site: &str) -> Result<String, String> {
    let (scheme, rest) = site.split_once("://").ok_or_else(|| format!("--site \"{site}\": give the site's URL, e.g. https://example.org"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // a host name and an optional port: nothing that would need quoting in YAML or nginx
    let (host, port) = authority.split_once(':').unwrap_or((authority, "80"));
    let host_ok = !host.is_empty() && host.split('.').all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !matches!(scheme, "http" | "https") || !host_ok || port.parse::<u16>().is_err() {
        return Err(format!("--site \"{site}\": give the site's URL, e.g. https://example.org"));
    }
    Ok(format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// Create `path` (and its directory) with `mode`; an existing file is never replaced.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The policy's text: the defaults written out, with what each part does.
fn policy_text(o: &InitOptions, origin: &str, host: &str) -> String {
    let actions: String = Purpose::ALL
        .into_iter()
        .map(|p| {
            let a = match crawlward_policy::default_action(p, Action::Block(444)) {
                Action::Allow => "allow",
                Action::Throttle => "throttle",
                Action::Block(_) => "block",
            };
            format!("  {}: {a}\n", p.as_str())
        })
        .collect();
    let module = if o.stock {
        String::new()
    } else {
        format!(
            "
# With ngx_http_crawlward_module loaded (docs/module.md): its status
# endpoint, for `crawlward top` and Prometheus, answers 127.0.0.1 only.
module:
  status: /crawlward-status

# The proportional classifier, live: every client that is not a verified
# crawler or signed in is scored on passive signals and placed on a rung.
# In observe mode nothing is refused: the access log says what each rung
# would have answered ($crawlward_rung, `crawlward analyze`), so you see
# first what it would do. Set mode: enforce when that reads right
# (docs/policy.md#classifier). The session cookie that keeps a client's
# window is signed with the key in key_file; `enabled: false` in cookie turns it off.
classifier:
  mode: observe
  cookie: {{key_file: {}}}
",
            o.key_file.display()
        )
    };
    format!(
        "# A first crawlward policy for {origin}, written by `crawlward init`.
# Every key is in docs/policy.md; heratio.org's complete setup is
# nginx-conf/catalogue.yaml. Check it against your nginx, then render it:
#
#   crawlward check {out}
#   crawlward render {out} --out /etc/nginx/crawlward
site:
  canonical_url: {origin}
  # the names that count as this site in a Referer (the facet guard)
  same_site_hosts: [{host}]
  # your application's workers (PHP-FPM pm.max_children): the browse cap defaults to half
  upstream_workers: {workers}
  # behind a reverse proxy or a load balancer, list it: limits then key on the address it forwards
  # trusted_proxies: [127.0.0.1]

install:
  dir: /etc/nginx/crawlward
  throttle_log: /var/log/nginx/crawlward-throttled.log
  # every request, in the format `crawlward analyze` reads
  access_log: /var/log/nginx/crawlward-access.log

# The bot-blocker: what each kind of client gets (crawlward's defaults, written out).
# allow, block (444: the connection closed), block-403 or throttle (the strict rate class).
actions:
{actions}  empty: block      # no User-Agent
  spoofed: block    # a known crawler's name from outside its published ranges

# Paths meant for scripts (an API, OAI-PMH, sitemaps): the User-Agent rule does not
# apply there, and AI-training crawlers may read only robots.txt.
machine_doors: []

# robots.txt, rendered from the actions above; it always answers 200.
robots: {{}}
{module}",
        out = o.out.display(),
        workers = o.upstream_workers,
    )
}
