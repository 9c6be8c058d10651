//! The command line: parse, run one command, return the exit code.

use crate::exit::{self, io_error};
use crate::output::{write_all, Written};
use crate::render::{render, RenderOptions, HTTP_FILE, ROBOTS_FILE, SERVER_FILE};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use crawlward_policy::fcrdns::DnsVerdict;
use crawlward_policy::{LoadOptions, Policy, Request, RobotsSource};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Keep a public site findable by search engines while scrapers try to download all of it.
///
/// crawlward renders, from one YAML policy, the nginx configuration (map, geo,
/// limit_req and limit_conn blocks) and the robots.txt that put it into effect.
#[derive(Parser)]
#[command(name = "crawlward", version, about, long_about = None)]
#[command(after_help = exit::HELP)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the http-level conf.d file, the server snippets and robots.txt.
    Render {
        /// The YAML policy.
        policy: PathBuf,
        /// Directory to write into (created if missing).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        paths: Paths,
    },
    /// Render into a temporary directory and run `nginx -t` on it.
    Check {
        policy: PathBuf,
        /// Read downloaded range files from here instead of the policy's catalogue.ranges_dir.
        #[arg(long, value_name = "DIR")]
        ranges_dir: Option<PathBuf>,
        /// The nginx binary to test with.
        #[arg(long, default_value = "nginx")]
        nginx: String,
        /// A dynamic module to load first (repeatable), as `load_module` would.
        #[arg(long = "load-module", value_name = "SO")]
        load_modules: Vec<PathBuf>,
        /// The user nginx's workers run as, to check that it can read the installed robots.txt
        /// (default: the user directive of the nginx.conf that nginx -V names, else nobody).
        #[arg(long, value_name = "USER")]
        worker_user: Option<String>,
        /// The prefix the files were rendered with (render --root), where the installed robots.txt is.
        #[arg(long, value_name = "DIR")]
        root: Option<String>,
        /// The application's own robots.txt (http://127.0.0.1:8000/robots.txt): warn where its rules
        /// and the policy's disagree. Default: robots.app_url, when robots.source is app.
        #[arg(long, value_name = "URL")]
        app: Option<String>,
    },
    /// Say which rule decides a request, with which status, and why.
    Explain {
        policy: PathBuf,
        /// The User-Agent header ("" for none).
        #[arg(long, required_unless_present_any = ["requests", "cookie"])]
        ua: Option<String>,
        /// The client address (after realip).
        #[arg(long, required_unless_present_any = ["requests", "cookie"])]
        ip: Option<IpAddr>,
        /// The path and query, as sent: /glam/browse?subjects=1&places=2
        #[arg(long, required_unless_present_any = ["requests", "client"])]
        url: Option<String>,
        /// A live client of the ladder instead of a request: the module's status endpoint
        /// (http://127.0.0.1/crawlward-status), asked for the client of --ip, --ua and --lang, or of
        /// --cookie; prints its window, sub-scores and score, scored by this policy's classifier.
        #[arg(long, value_name = "STATUS_URL", conflicts_with_all = ["url", "requests"])]
        client: Option<String>,
        /// With --client: the client's Accept-Language header.
        #[arg(long, requires = "client")]
        lang: Option<String>,
        /// With --client: the value of its session cookie (VALUE, or NAME=VALUE as the browser holds it).
        #[arg(long, requires = "client", conflicts_with_all = ["ip", "ua", "lang"])]
        cookie: Option<String>,
        /// Explain many requests: a file of JSON lines ("-" for standard input), one request each,
        /// {"url": ..., "ip": ..., "ua": ..., "referer": ..., "host": ..., "method": ..., "maintenance": ..., "dns": ...,
        /// "signature": ..., "signature_agent": ...}
        /// (only url and ip required); prints one JSON line per request, in order.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["ua", "ip", "url", "referer", "host", "format", "signature", "signature_agent"])]
        requests: Option<PathBuf>,
        #[arg(long)]
        referer: Option<String>,
        /// The Host header (default: the site's own name).
        #[arg(long)]
        host: Option<String>,
        #[arg(long, default_value = "GET")]
        method: String,
        /// Explain as if the maintenance flag file existed.
        #[arg(long)]
        maintenance: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Read downloaded range files from here instead of the policy's catalogue.ranges_dir.
        #[arg(long, value_name = "DIR")]
        ranges_dir: Option<PathBuf>,
        /// What the module's DNS check says about --ip (policies with module.dns): verified, spoofed or unresolved.
        #[arg(long, value_parser = ["verified", "spoofed", "unresolved"])]
        dns: Option<String>,
        /// What the module's Web Bot Auth check says of the request's signature (crawlward_signatures):
        /// verified, unverified or invalid.
        #[arg(long, value_parser = ["verified", "unverified", "invalid"], requires = "signature_agent")]
        signature: Option<String>,
        /// The key directory the signature's Signature-Agent names (https://chatgpt.com).
        #[arg(long, value_name = "URL", requires = "signature")]
        signature_agent: Option<String>,
    },
    /// Download the agents' published range files (and, with module.signatures, their key directories), render again, test and reload nginx if anything changed.
    UpdateRanges {
        policy: PathBuf,
        /// Directory the rendered files are in (as for render).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        paths: Paths,
        /// Seconds allowed for each download.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Trust the root certificates in this PEM file instead of the built-in (Mozilla's) ones:
        /// for a TLS-inspecting proxy, or a test's own certificate authority.
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        /// Command that tests the configuration after a change.
        #[arg(long, default_value = "nginx -t -q")]
        test_command: String,
        /// Command that reloads nginx after a change that passed the test.
        #[arg(long, default_value = "nginx -s reload")]
        reload_command: String,
        /// Render, but neither test nor reload.
        #[arg(long)]
        no_reload: bool,
    },
    /// A live screen for the person on call: the nodes' status endpoints, polled every second.
    ///
    /// Shows, all nodes together: the crawlers' share of upstream time over the last 15
    /// minutes, refusals by layer, verified search crawlers given 429 or 5xx (first, and
    /// marked !), the crawl budgets and the browse cap, the ladder's rungs, and requests
    /// and statuses per agent and verdict with their rate. Keys: s sort, / filter, p pause,
    /// ? help, q quit.
    Top {
        /// Status endpoints (the module's `crawlward_status` location), e.g.
        /// http://127.0.0.1/crawlward-status; several for several nodes.
        #[arg(required = true, value_name = "URL")]
        urls: Vec<String>,
        /// Seconds between polls.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Print one screen as text and exit (for scripts; no terminal needed).
        #[arg(long)]
        once: bool,
    },
    /// Read access logs: what each crawler got, who ignores robots.txt, and the proportional classifier.
    Analyze {
        /// The YAML policy: its catalogue, ranges, robots.txt rules and classifier settings.
        /// Without one (none given, or an access log in its place), the built-in
        /// catalogue with its default actions and robots.txt rules.
        policy: Option<PathBuf>,
        /// Access logs, plain or gzip, in nginx's combined format or crawlward_combined;
        /// `-` or none for standard input. Give rotated files oldest first.
        logs: Vec<String>,
        /// Read clients already aggregated over the window (the classifier article's rows) instead of logs.
        #[arg(long, value_name = "FILE")]
        aggregates: Option<String>,
        /// Clients the sysadmin has judged: `client abusive|legitimate` per line.
        #[arg(long, value_name = "FILE")]
        labels: Option<String>,
        #[arg(long, value_enum, default_value_t = crate::analyze::Output::Text)]
        format: crate::analyze::Output,
        /// Write the report here (atomically) instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<String>,
        /// Write the suggested policy fragment here, for review (never applied).
        #[arg(long, value_name = "FILE")]
        suggest: Option<String>,
        /// The interval of the crawlers' share over time (s, m, h).
        #[arg(long, default_value = "15m", value_parser = parse_duration)]
        interval: u64,
        /// The classifier's window per client, overriding the policy's classifier.window.
        #[arg(long, value_parser = parse_duration)]
        window: Option<u64>,
        /// Rows shown per table (clients, addresses, networks).
        #[arg(long, default_value_t = 20)]
        top: usize,
        /// Read downloaded range files from here instead of the policy's catalogue.ranges_dir.
        #[arg(long, value_name = "DIR")]
        ranges_dir: Option<PathBuf>,
    },
    /// Say who each User-Agent names, one a line (from files, or standard input):
    /// the agent (a bot the catalogue does not name, by its own product token),
    /// its purpose, operator and means of verification, and how it was found,
    /// tab-separated.
    Identify {
        /// User-Agents, one a line; `-` or none for standard input.
        inputs: Vec<String>,
        /// Identify with this policy's catalogue (its additions and feeds); default the built-in one.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Read downloaded range files and feeds from here instead of the policy's catalogue.ranges_dir.
        #[arg(long, value_name = "DIR")]
        ranges_dir: Option<PathBuf>,
    },
    /// Make an API key for an account: print the key, once, and the keys
    /// file's line for it, which holds only the key's SHA-256. Add the line
    /// under `keys:` in the file api_tiers.keys names and run render: the
    /// module reads the new keys within a second, without a reload.
    ApiKey {
        /// The account the key belongs to: its keys share one quota.
        #[arg(long)]
        account: String,
        /// Its tier (one of api_tiers.tiers); default the policy's default tier.
        #[arg(long)]
        tier: Option<String>,
    },
    /// Write a first policy for a site: crawlward's defaults written out with
    /// what each part does, and the proportional ladder in observe mode (every
    /// client scored and its rung logged, nothing refused), with a new key
    /// file for its session cookie. Never writes over an existing policy.
    Init {
        /// The site's URL (https://example.org).
        #[arg(long)]
        site: String,
        /// The policy file to write.
        #[arg(long, default_value = "policy.yaml")]
        out: PathBuf,
        /// The ladder's cookie key file, made unless it exists (mode 0600).
        #[arg(long, default_value = "/etc/crawlward/cookie.key")]
        key_file: PathBuf,
        /// The application's workers (PHP-FPM pm.max_children).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100000))]
        upstream_workers: u32,
        /// For stock nginx, without ngx_http_crawlward_module: no module section, no ladder.
        #[arg(long)]
        stock: bool,
    },
    /// Print the JSON Schema of the policy file (for editors).
    Schema,
    /// Write the manual pages, made from these help texts, into a directory:
    /// crawlward.1 and one page per command (crawlward-render.1 ...). For packagers.
    #[command(hide = true)]
    Man {
        /// Directory to write into (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
}

/// A duration such as `15m`, `24h` or `900` (seconds), in seconds.
fn parse_duration(s: &str) -> Result<u64, String> {
    crawlward_policy::fcrdns::parse_time(s)
        .filter(|ms| *ms >= 1000 && ms % 1000 == 0)
        .map(|ms| ms / 1000)
        .ok_or_else(|| format!("invalid duration \"{s}\": expected e.g. 15m, 1h or 900 (seconds)"))
}

/// Where the rendered configuration and the range files live.
#[derive(clap::Args)]
struct Paths {
    /// Prefix every absolute runtime path of the policy with this directory (tests, staging).
    #[arg(long, value_name = "DIR")]
    root: Option<String>,
    /// Read (and for update-ranges, keep) downloaded range files here instead of the policy's catalogue.ranges_dir.
    #[arg(long, value_name = "DIR")]
    ranges_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

pub fn execute() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Render { policy, out, paths } => {
            let opts = LoadOptions { ranges_dir: paths.ranges_dir, root: paths.root.clone() };
            with_policy(&policy, &opts, |p| cmd_render(p, &out, paths.root))
        }
        Cmd::Check { policy, ranges_dir, nginx, load_modules, worker_user, root, app } => with_policy(&policy, &LoadOptions { ranges_dir, root: None }, |p| {
            match check_cookie_keys(p).map_or_else(|e| e, |()| cmd_check(p, &nginx, &load_modules)) {
                exit::OK => match check_served(p, &nginx, worker_user.as_deref(), root.clone()) {
                    exit::OK => {
                        check_kept(p, root.clone());
                        match (&app, &p.robots.source) {
                            (Some(url), _) => check_app(p, url, true),
                            (None, RobotsSource::App { url, .. }) => check_app(p, url, false),
                            (None, RobotsSource::Rendered) => exit::OK,
                        }
                    }
                    failed => failed,
                },
                failed => failed,
            }
        }),
        Cmd::Explain {
            policy,
            ua,
            ip,
            url,
            referer,
            host,
            method,
            maintenance,
            format,
            ranges_dir,
            dns,
            requests,
            client,
            lang,
            cookie,
            signature,
            signature_agent,
        } => {
            let directory = signature_agent.as_deref().map(|a| crawlward_policy::signature::directory_origin(a).ok_or(a));
            if let Some(Err(a)) = directory {
                tell!("crawlward: --signature-agent \"{a}\" is not an https:// origin (https://host, no path), as Signature-Agent names a key directory");
                return exit::USAGE;
            }
            let directory = directory.and_then(Result::ok);
            with_policy(&policy, &LoadOptions { ranges_dir, root: None }, |p| match (&requests, ip, url) {
                _ if client.is_some() => {
                    let who = match (&cookie, ip) {
                        (Some(c), _) => LiveClient::Cookie(c.clone()),
                        (None, Some(ip)) => LiveClient::Triple(ip, ua.clone().unwrap_or_default(), lang.clone().unwrap_or_default()),
                        // clap requires --ip and --ua without --cookie
                        (None, None) => return exit::USAGE,
                    };
                    cmd_explain_client(p, client.as_deref().unwrap_or_default(), &who, format)
                }
                (Some(file), _, _) => cmd_explain_many(p, file),
                (None, Some(ip), Some(url)) => {
                    // an absolute URL is nginx's absolute-form request target: its host is the request's
                    let (url, host) = match crawlward_policy::decide::absolute_form(url.as_bytes()) {
                        Some((h, target)) => (String::from_utf8_lossy(&target).into_owned(), Some(String::from_utf8_lossy(h).into_owned())),
                        None => (url, host),
                    };
                    let req = Request {
                        method,
                        url,
                        user_agent: ua.unwrap_or_default().into_bytes(),
                        ip,
                        referer,
                        host,
                        maintenance,
                        // clap allows only the three names
                        dns: dns.as_deref().and_then(dns_verdict),
                        // clap allows only the three names
                        signature: signature.as_deref().and_then(signature_outcome).map(|o| (o, directory.clone())),
                    };
                    cmd_explain(p, &req, format)
                }
                // clap requires --ip and --url without --requests
                _ => exit::USAGE,
            })
        }
        Cmd::UpdateRanges { policy, out, paths, timeout, ca_file, test_command, reload_command, no_reload } => {
            let opts = crate::update::UpdateOptions {
                out,
                root: paths.root,
                ranges_dir: paths.ranges_dir,
                timeout: std::time::Duration::from_secs(timeout.max(1)),
                ca_file,
                test_command,
                reload_command,
                no_reload,
            };
            crate::update::update_ranges(&policy, &opts)
        }
        Cmd::Analyze { policy, logs, aggregates, labels, format, out, suggest, interval, window, top, ranges_dir } => {
            // the first file is the policy, unless it is a log (or there is none)
            // a file that is not there, or is empty, is the log the user meant, unless it is named as a policy
            let named_as_policy = |p: &Path| p.extension().is_some_and(|e| e == "yaml" || e == "yml") || std::fs::metadata(p).is_ok_and(|m| m.len() > 0);
            let (policy, logs) = match policy {
                Some(p) if named_as_policy(&p) && !crate::analyze::looks_like_log(&p) => (Some(p), logs),
                first => (None, first.map(|p| p.display().to_string()).into_iter().chain(logs).collect::<Vec<_>>()),
            };
            if policy.is_none() && logs.is_empty() && aggregates.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                tell!("error: no access log: give one (or `-` for standard input), after the policy or alone\n\nUsage: crawlward analyze [POLICY] [LOGS]...");
                return exit::USAGE;
            }
            let loaded = match &policy {
                Some(path) => exit::load_policy(path, &LoadOptions { ranges_dir, root: None }),
                None => {
                    tell!(
                        "note: no policy given: analysing with {} (its default actions and robots.txt rules, and the published ranges of {}); give yours first to use its own: crawlward analyze POLICY LOG...",
                        exit::BUILT_IN,
                        ranges_dir.as_ref().map_or("the shipped snapshot".to_string(), |d| d.display().to_string())
                    );
                    exit::load_built_in(ranges_dir)
                }
            };
            loaded.map_or_else(
                |code| code,
                |p| {
                    let opts = crate::analyze::Options {
                        logs,
                        aggregates,
                        labels,
                        format,
                        out,
                        suggest,
                        interval_seconds: interval as i64,
                        window_minutes: window.map(|w| w as f64 / 60.0),
                        top,
                    };
                    crate::analyze::run(&p, &opts)
                },
            )
        }
        Cmd::Identify { inputs, policy, ranges_dir } => match policy {
            Some(path) => with_policy(&path, &LoadOptions { ranges_dir, root: None }, |p| crate::identify::run(p, &inputs)),
            None => exit::load_built_in(ranges_dir).map_or_else(|code| code, |p| crate::identify::run(&p, &inputs)),
        },
        Cmd::Top { urls, interval, once } => {
            if !(interval.is_finite() && (0.2..=3600.0).contains(&interval)) {
                tell!("error: --interval must be from 0.2 to 3600 seconds, not {interval}");
                return exit::USAGE;
            }
            crate::top::top(&crate::top::TopOptions { urls, interval: std::time::Duration::from_secs_f64(interval), once })
        }
        Cmd::ApiKey { account, tier } => {
            if account.is_empty()
                || account.len() > crawlward_policy::quota::ACCOUNT_MAX
                || !account.bytes().all(|b| b.is_ascii_graphic() && b != b',' && b != b'}')
            {
                tell!("error: --account must be 1 to {} printable characters, no spaces, commas or braces", crawlward_policy::quota::ACCOUNT_MAX);
                return exit::USAGE;
            }
            if let Some(t) = tier.as_ref().filter(|t| !crawlward_policy::quota::valid_tier_name(t)) {
                tell!("error: invalid tier \"{t}\": use a-z, 0-9, _ and -, up to 32");
                return exit::USAGE;
            }
            let Some(key) = crawlward_policy::quota::new_key() else {
                tell!("error: the system's random generator failed");
                return exit::IO;
            };
            let hash = crawlward_policy::quota::hex(&crawlward_policy::quota::key_hash(key.as_bytes()));
            let tier = tier.map(|t| format!(" tier: {t},")).unwrap_or_default();
            say!("# the key, for {account} only: it is kept nowhere, so give it now");
            say!("{key}");
            say!("# its line for the keys file (under keys:)");
            say!("  - {{account: {account},{tier} sha256: {hash}}}");
            exit::OK
        }
        Cmd::Init { site, out, key_file, upstream_workers, stock } => {
            // nginx reads the key file from its own working directory: the policy names it whole
            let key_file = std::path::absolute(&key_file).unwrap_or(key_file);
            match crate::init::init(&crate::init::InitOptions { site, out: out.clone(), key_file, upstream_workers, stock }) {
                Ok(said) => {
                    for line in said {
                        say!("{line}");
                    }
                    say!("next: crawlward check {0}, then crawlward render {0} --out /etc/nginx/crawlward (docs/quickstart.md)", out.display());
                    exit::OK
                }
                Err(e) => {
                    tell!("error: {e}");
                    exit::USAGE
                }
            }
        }
        Cmd::Schema => {
            say!("{}", schema_json());
            exit::OK
        }
        Cmd::Man { out } => cmd_man(&out),
    }
}

/// The manual pages, by file name: the command's, then one per visible subcommand.
pub fn man_pages() -> std::io::Result<Vec<(String, String)>> {
    let mut top = Cli::command();
    // built, so that clap's own help subcommand is listed too (the main page names it)
    top.build();
    let mut commands = vec![("crawlward".to_string(), top.clone())];
    for sub in top.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("crawlward-{}", sub.get_name());
        let bin = format!("crawlward {}", sub.get_name());
        commands.push((name.clone(), sub.clone().display_name(name).bin_name(bin).version(env!("CARGO_PKG_VERSION"))));
    }
    let mut pages = Vec::new();
    for (name, command) in commands {
        let mut roff = Vec::new();
        clap_mangen::Man::new(command).render(&mut roff)?;
        pages.push((format!("{name}.1"), String::from_utf8_lossy(&roff).into_owned()));
    }
    Ok(pages)
}

fn cmd_man(out: &Path) -> i32 {
    let pages = match man_pages() {
        Ok(p) => p,
        Err(e) => return io_error("cannot make the manual pages", e),
    };
    let files: Vec<(&str, String)> = pages.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    match write_all(out, &files) {
        Ok(report) => {
            for (name, _) in report {
                say!("wrote     {}", out.join(name).display());
            }
            exit::OK
        }
        Err(e) => io_error(&format!("cannot write to {}", out.display()), e),
    }
}

/// The policy's warnings, on standard error: every command that loads a
/// policy prints them (the daily update-ranges run too, into the journal).
fn with_policy(path: &Path, opts: &LoadOptions, f: impl FnOnce(&Policy) -> i32) -> i32 {
    match exit::load_policy(path, opts) {
        Ok(p) => f(&p),
        Err(code) => code,
    }
}

fn cmd_render(policy: &Policy, out: &Path, root: Option<String>) -> i32 {
    let opts = RenderOptions { root };
    let rendered = match render(policy, &opts) {
        Ok(r) => r,
        Err(e) => return io_error("cannot render the templates", e),
    };
    match write_all(out, &rendered.files) {
        Ok(report) => {
            for (name, state) in report {
                let word = match state {
                    Written::Created => "created",
                    Written::Changed => "changed",
                    Written::Unchanged => "unchanged",
                };
                say!("{word:9} {}", out.join(name).display());
            }
            // the files name each other, and robots.txt, by install.dir's paths
            let dir = opts.path(&policy.install.dir);
            let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if !same(out, Path::new(&dir)) {
                say!(
                    "note: {} is not install.dir ({dir}): the server snippet includes the limits snippet and serves robots.txt from {dir}, so install the files there (or render with --out {dir}, or set install.dir)",
                    out.display()
                );
            }
            exit::OK
        }
        Err(e) => io_error(&format!("cannot write to {}", out.display()), e),
    }
}

fn cmd_check(policy: &Policy, nginx: &str, modules: &[PathBuf]) -> i32 {
    let tmp = match tempfile::Builder::new().prefix("crawlward-check.").tempdir() {
        Ok(t) => t,
        Err(e) => return io_error("cannot make a temporary directory", e),
    };
    let root = tmp.path().display().to_string();
    let opts = RenderOptions { root: Some(root.clone()) };
    let rendered = match render(policy, &opts) {
        Ok(r) => r,
        Err(e) => return io_error("cannot render the templates", e),
    };
    let dir = PathBuf::from(format!("{root}{}", policy.install.dir));
    if let Err(e) = write_all(&dir, &rendered.files) {
        return io_error("cannot write the rendered files", e);
    }
    let build = crate::served::build_of(nginx);
    let found;
    let modules = match (modules, &policy.module) {
        ([], Some(_)) => match installed_module(&build) {
            Some(so) => {
                say!("crawlward: the policy has a module section: loading {} for nginx -t (--load-module to give another)", so.display());
                found = [so];
                &found[..]
            }
            None => modules,
        },
        _ => modules,
    };
    let mut conf = String::new();
    for m in modules {
        let abs = std::fs::canonicalize(m).unwrap_or_else(|_| m.clone());
        conf.push_str(&format!("load_module {};\n", abs.display()));
    }
    conf.push_str(&format!(
        "pid {root}/nginx.pid;\nerror_log {root}/error.log;\nevents {{}}\nhttp {{\n{temp}    include {d}/{HTTP_FILE};\n    server {{\n        listen 127.0.0.1:8080;\n        include {d}/{SERVER_FILE};\n        location / {{ return 204; }}\n    }}\n}}\n",
        temp = temp_paths(&build, &root),
        d = dir.display()
    ));
    let conf_path = tmp.path().join("nginx.conf");
    if let Err(e) = std::fs::write(&conf_path, conf) {
        return io_error("cannot write the test nginx.conf", e);
    }
    // nginx -t opens the throttle and access logs: their directories must exist under the temporary root
    for log in std::iter::once(&policy.install.throttle_log).chain(policy.install.access_log.iter()) {
        if let Some(parent) = Path::new(&opts.path(log)).parent() {
            let _ = std::fs::create_dir_all(parent);
        }
    }
    let out = Command::new(nginx).arg("-t").arg("-p").arg(tmp.path()).arg("-e").arg(tmp.path().join("error.log")).arg("-c").arg(&conf_path).output();
    match out {
        Err(e) => io_error(&format!("cannot run {nginx}"), e),
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stderr);
            {
                use std::io::Write as _;
                let _ = write!(std::io::stdout(), "{text}");
            }
            if o.status.success() {
                say!("crawlward: {} renders a configuration that {nginx} accepts", policy.source_name);
                exit::OK
            } else {
                tell!("error: {nginx} -t rejected the configuration rendered from {}", policy.source_name);
                if !modules.is_empty()
                    && (text.contains("load_module") || text.contains("dlopen()") || text.contains("binary compatible") || text.contains(" instead of "))
                {
                    tell!("hint: {nginx} does not load the module given with --load-module: build it for this nginx (ci/build-module system --nginx {nginx}, docs/install.md)");
                }
                if modules.is_empty() && text.contains("unknown directive \"crawlward") {
                    tell!("hint: the policy's module section needs ngx_http_crawlward_module, which is not in {nginx}'s modules directory: give its .so with --load-module");
                }
                exit::NGINX
            }
        }
    }
}

/// The test configuration's temporary directories, under `root`. nginx -t,
/// run as root, makes each one it knows and gives it to its worker user:
/// nginx's own (Debian's `/var/lib/nginx/body`, www-data's) would go to the
/// test configuration's user (`nobody`), and the running nginx could no
/// longer write a request body or a proxied response to disk. A module the
/// build left out (`--without-http_uwsgi_module`, in `build`, `nginx -V`'s
/// text) has no directive to set.
fn temp_paths(build: &str, root: &str) -> String {
    let mut lines = format!("    client_body_temp_path {root}/client_body_temp;\n");
    for module in ["proxy", "fastcgi", "uwsgi", "scgi"] {
        let left_out = format!("--without-http_{module}_module");
        if !build.split_whitespace().any(|w| w == left_out) {
            lines.push_str(&format!("    {module}_temp_path {root}/{module}_temp;\n"));
        }
    }
    lines
}

/// The module's `.so` in the modules directory of the nginx whose `nginx -V`
/// text is `build` (`--modules-path`, else `<prefix>/modules`), if it is there.
fn installed_module(build: &str) -> Option<PathBuf> {
    use crate::served::configured;
    let dir = configured(build, "--modules-path=").map(PathBuf::from).or_else(|| configured(build, "--prefix=").map(|p| Path::new(p).join("modules")))?;
    let so = dir.join("ngx_http_crawlward_module.so");
    so.is_file().then_some(so)
}

/// Before `nginx -t`: the ladder's cookie key file, which nginx reads at
/// start, as the policy names it (not under `--root`: the module reads that
/// path): there, made of keys that sign, and written by its owner only and
/// read by no one else. Err is the exit code.
fn check_cookie_keys(policy: &Policy) -> Result<(), i32> {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(cookie) = policy.ladder.as_ref().and_then(|(live, _)| live.cookie.as_ref()) else { return Ok(()) };
    let file = &cookie.key_file;
    let make = format!("make one with `crawlward init`, or: (umask 077; head -c 32 /dev/urandom | base64 > {file}); or set classifier.cookie.enabled: false");
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            // it is there: a new key would sign every client out
            tell!("error: the ladder's cookie key file {file} cannot be read by this user ({e}): run check as the user nginx's master process runs as (root)");
            return Err(exit::UNREADABLE);
        }
        Err(e) => {
            tell!("error: the ladder's cookie key file {file} cannot be read ({e}), and nginx refuses to start without it: {make}");
            return Err(exit::UNREADABLE);
        }
    };
    if let Err(e) = crawlward_policy::ladder::CookieKeys::parse(&text) {
        tell!("error: the ladder's cookie key file {file}: {e}, and nginx refuses to start with it: {make}");
        return Err(exit::UNREADABLE);
    }
    let mode = std::fs::metadata(file).map_or(0o600, |m| m.permissions().mode() & 0o777);
    if mode & 0o022 != 0 {
        tell!("warning: the ladder's cookie key file {file} can be written by users other than its owner (mode {mode:04o}): whoever writes a key into it can sign session cookies as any client; chmod 600 {file}");
    }
    if mode & 0o044 != 0 {
        tell!("warning: the ladder's cookie key file {file} can be read by users other than its owner (mode {mode:04o}): whoever reads it can sign session cookies as any client; chmod 600 {file}");
    }
    let replaceable = key_file_replaceable_by_others(Path::new(file));
    if let Some(why) = &replaceable {
        tell!("warning: the ladder's cookie key file {file}: {why}: whoever puts a key there can sign session cookies as any client");
    }
    if mode & 0o066 == 0 && replaceable.is_none() {
        say!("crawlward: the ladder's cookie key file {file} holds a key that signs");
    }
    Ok(())
}

/// Who else than the user running check (nginx's master: root) can put
/// another key in `file`: its owner, whatever its mode; the owner of a link
/// on the way to it; and whoever may replace it or a directory above it
/// (a directory another user owns, or that others may write to without the
/// sticky bit), on the path as given and on the file's real path. None when
/// nobody else can.
fn key_file_replaceable_by_others(file: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    // the effective user of this process owns /proc/self
    let me = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    let owned_by_another = |uid: u32| uid != 0 && uid != me;
    let entry = std::fs::symlink_metadata(file).ok()?;
    if entry.file_type().is_symlink() && owned_by_another(entry.uid()) {
        return Some(format!("it is a link owned by uid {}, who can point it at another file", entry.uid()));
    }
    let real = std::fs::canonicalize(file).ok()?;
    let m = std::fs::metadata(&real).ok()?;
    if owned_by_another(m.uid()) {
        return Some(format!("{} is owned by uid {}, who can rewrite it whatever its mode (chown root:root {})", real.display(), m.uid(), real.display()));
    }
    let mut dirs: Vec<&Path> = file.ancestors().skip(1).collect();
    dirs.extend(real.ancestors().skip(1));
    let keep = "keep it in a directory only root writes, such as /etc/nginx";
    for dir in dirs.into_iter().filter(|d| !d.as_os_str().is_empty()) {
        let Ok(d) = std::fs::metadata(dir) else { continue };
        if owned_by_another(d.uid()) {
            return Some(format!("the directory {} is owned by uid {}, who can replace what is in it ({keep})", dir.display(), d.uid()));
        }
        if d.mode() & 0o022 != 0 && d.mode() & 0o1000 == 0 {
            return Some(format!(
                "the directory {} can be written by users other than its owner (mode {:04o}), who can replace what is in it ({keep})",
                dir.display(),
                d.mode() & 0o7777
            ));
        }
    }
    None
}

/// After `nginx -t`: whether nginx's worker user can read the installed
/// robots.txt (the server snippet serves it with `alias`, which `nginx -t`
/// does not open). Not installed yet: nothing to check.
fn check_served(policy: &Policy, nginx: &str, worker_user: Option<&str>, root: Option<String>) -> i32 {
    let robots = Path::new(&RenderOptions { root }.path(&policy.install.dir)).join(ROBOTS_FILE);
    if !robots.exists() {
        say!("crawlward: {} is not installed yet (crawlward render --out): who can read it is not checked", robots.display());
        return exit::OK;
    }
    let user = crate::served::worker_user(worker_user, nginx);
    let Some(ids) = crate::served::ids(&user.name) else {
        tell!("error: nginx's worker user {} ({}) is not a user of this machine; give the right one with --worker-user", user.name, user.source);
        return exit::UNREADABLE;
    };
    match crate::served::cannot_read(&robots, &ids) {
        None => {
            say!("crawlward: nginx's worker user {} ({}) can read {}", user.name, user.source, robots.display());
            exit::OK
        }
        Some(why) => {
            tell!(
                "error: nginx's worker user {} ({}) cannot read {}: {why}. nginx would answer robots.txt with 403, and crawlers take that for no robots.txt at all",
                user.name,
                user.source,
                robots.display()
            );
            exit::UNREADABLE
        }
    }
}

/// `robots.source: app`: whether the copy of the application's robots.txt
/// that nginx keeps says anything to crawlers. nginx keeps a complete plain
/// text 200 without reading it, so a plain-text error page answered with 200
/// would be kept: that is a warning.
fn check_kept(policy: &Policy, root: Option<String>) {
    use crawlward_policy::robots_txt;
    if policy.robots.source == RobotsSource::Rendered {
        return;
    }
    let kept = Path::new(&RenderOptions { root }.path(&policy.install.dir)).join(robots_txt::KEPT_DIR).join(robots_txt::KEPT_FILE);
    match std::fs::read(&kept) {
        Err(_) => say!("crawlward: no copy of the application's robots.txt is kept yet ({}): until one is, nginx answers with the rendered robots.txt when the application cannot", kept.display()),
        Ok(bytes) => {
            if !robots_txt::reads_as_robots(&bytes) {
                tell!(
                    "warning: {} (the application's robots.txt that nginx kept) does not read as robots.txt (no User-agent line, markup, or more than 500 KiB), so it tells crawlers nothing: make the application answer robots.txt, or fail with an error status (nginx then answers from the kept copy), and remove the file",
                    kept.display()
                );
            }
        }
    }
}

/// `check --app URL`: the application's own robots.txt against the policy's
/// rules; each disagreement a warning. A file that cannot be fetched is an
/// I/O error when the URL was asked for (`asked`), and a warning when it is
/// the policy's `robots.app_url`: nginx then answers from its kept copy.
fn check_app(policy: &Policy, url: &str, asked: bool) -> i32 {
    use crawlward_policy::robots_txt::{disagreements, RobotsFile};
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        tell!("error: --app {url}: expected the URL of the application's robots.txt, such as http://127.0.0.1:8000/robots.txt");
        return exit::USAGE;
    }
    let agent = ureq::Agent::config_builder().timeout_global(Some(std::time::Duration::from_secs(10))).build().new_agent();
    let text = match agent
        .get(url)
        .call()
        .map_err(|e| e.to_string())
        .and_then(|mut r| r.body_mut().with_config().limit(1 << 20).read_to_string().map_err(|e| e.to_string()))
    {
        Ok(t) => t,
        Err(e) if asked => {
            tell!("error: cannot fetch the application's robots.txt from {url}: {e}");
            return exit::IO;
        }
        Err(e) => {
            tell!("warning: cannot fetch the application's robots.txt from {url} (robots.app_url): {e}; nginx answers robots.txt from its kept copy while the application cannot");
            return exit::OK;
        }
    };
    let found = disagreements(policy, &RobotsFile::parse(&text));
    for d in &found {
        tell!("warning: robots.txt: {d}");
    }
    match found.len() {
        0 => say!("crawlward: the application's robots.txt ({url}) and the policy's agree"),
        n => say!("crawlward: the application's robots.txt ({url}) and the policy's disagree on {n} {}", if n == 1 { "request" } else { "requests" }),
    }
    exit::OK
}

/// `verified`, `spoofed` or `unresolved`.
fn dns_verdict(d: &str) -> Option<DnsVerdict> {
    DnsVerdict::ALL.into_iter().find(|v| v.as_str() == d)
}

fn signature_outcome(s: &str) -> Option<crawlward_policy::signature::Outcome> {
    use crawlward_policy::signature::Outcome;
    [Outcome::Verified, Outcome::Unverified, Outcome::Invalid].into_iter().find(|o| o.as_str() == s)
}

fn explanation_json(e: &crawlward_policy::Explanation) -> serde_json::Value {
    serde_json::json!({
        "agent": e.agent,
        "operator": e.operator,
        "purpose": e.purpose.map(|p| p.as_str()),
        "verdict": e.verdict.as_str(),
        "door": e.door.as_str(),
        "action": e.action.as_str(),
        "rule": e.decision.rule.as_str(),
        "status": e.decision.status,
        "limit_class": e.limit_class,
        "budget": e.budget,
        "browse_cap": e.browse_cap,
        "steps": e.steps,
    })
}

/// One request of `explain --requests`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestLine {
    url: String,
    ip: IpAddr,
    #[serde(default)]
    ua: Option<String>,
    #[serde(default)]
    referer: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    maintenance: bool,
    #[serde(default)]
    dns: Option<String>,
    /// What the module's Web Bot Auth check said: verified, unverified or invalid.
    #[serde(default)]
    signature: Option<String>,
    /// The key directory the request's Signature-Agent names.
    #[serde(default)]
    signature_agent: Option<String>,
}

fn cmd_explain_many(policy: &Policy, file: &Path) -> i32 {
    use std::io::BufRead as _;
    let input: Box<dyn std::io::BufRead> = if file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        match std::fs::File::open(file) {
            Ok(f) => Box::new(std::io::BufReader::new(f)),
            Err(e) => return io_error(&format!("cannot read {}", file.display()), e),
        }
    };
    for (n, line) in input.lines().enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => return io_error(&format!("cannot read {}", file.display()), e),
        };
        if line.trim().is_empty() {
            continue;
        }
        let r: RequestLine = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(_) if !line.trim_start().starts_with('{') => {
                tell!(
                    "crawlward: {}:{}: not a request: each line is a JSON object such as {{\"url\": \"/record/1\", \"ip\": \"192.0.2.1\", \"ua\": \"...\"}}{}",
                    file.display(),
                    n + 1,
                    if crate::analyze::looks_like_log(file) { "; this is an access log: crawlward analyze reads those" } else { "" }
                );
                return exit::USAGE;
            }
            Err(e) => {
                tell!(
                    "crawlward: {}:{}: not a request ({}); each line is a JSON object with url and ip, and optionally ua, referer, host, method, maintenance, dns, signature, signature_agent",
                    file.display(),
                    n + 1,
                    crawlward_policy::in_plain_words(&e.to_string())
                );
                return exit::USAGE;
            }
        };
        let dns = match r.dns.as_deref().map(|d| dns_verdict(d).ok_or(d)).transpose() {
            Ok(dns) => dns,
            Err(d) => {
                tell!("crawlward: {}:{}: dns is verified, spoofed or unresolved, not \"{d}\"", file.display(), n + 1);
                return exit::USAGE;
            }
        };
        let signature = match (r.signature.as_deref(), r.signature_agent.as_deref()) {
            (None, None) => None,
            (Some(s), Some(a)) => match (signature_outcome(s), crawlward_policy::signature::directory_origin(a)) {
                (Some(outcome), Some(directory)) => Some((outcome, Some(directory))),
                (None, _) => {
                    tell!("crawlward: {}:{}: signature is verified, unverified or invalid, not \"{s}\"", file.display(), n + 1);
                    return exit::USAGE;
                }
                (_, None) => {
                    tell!("crawlward: {}:{}: signature_agent \"{a}\" is not an https:// origin (https://host, no path)", file.display(), n + 1);
                    return exit::USAGE;
                }
            },
            _ => {
                tell!("crawlward: {}:{}: signature and signature_agent go together", file.display(), n + 1);
                return exit::USAGE;
            }
        };
        let req = Request {
            method: r.method.unwrap_or_else(|| "GET".into()),
            url: r.url,
            user_agent: r.ua.unwrap_or_default().into_bytes(),
            ip: r.ip,
            referer: r.referer,
            host: r.host,
            maintenance: r.maintenance,
            dns,
            signature,
        };
        say!("{}", explanation_json(&policy.explain(&req)));
    }
    exit::OK
}

/// Who `explain --client` asks about.
enum LiveClient {
    Triple(IpAddr, String, String),
    Cookie(String),
}

/// A query argument's value, percent-encoded.
fn query_escaped(v: &str) -> String {
    v.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// `explain --client`: a live client of the ladder, from the module's status
/// endpoint, scored again by this policy's classifier (the module's own
/// score beside it: they agree unless the policy differs from the one nginx runs).
fn cmd_explain_client(policy: &Policy, status_url: &str, who: &LiveClient, format: Format) -> i32 {
    use crawlward_policy::classifier::{self, Observed, SUBSCORES};
    let query = match who {
        LiveClient::Triple(ip, ua, lang) => {
            format!("client=1&address={}&ua={}&lang={}", query_escaped(&ip.to_string()), query_escaped(ua), query_escaped(lang))
        }
        // a signed value holds no `=` (base64url without padding): what stands before one is the
        // cookie's name, whatever the policy calls it (`__Host-crawlward` on an https site)
        LiveClient::Cookie(c) => format!("client=1&cookie={}", query_escaped(c.split_once('=').map_or(c.as_str(), |(_, v)| v))),
    };
    let url = format!("{status_url}{}{query}", if status_url.contains('?') { "&" } else { "?" });
    let agent = ureq::Agent::config_builder().timeout_global(Some(std::time::Duration::from_secs(10))).build().new_agent();
    let body = agent
        .get(&url)
        .call()
        .map_err(|e| e.to_string())
        .and_then(|mut r| r.body_mut().with_config().limit(1 << 20).read_to_string().map_err(|e| e.to_string()));
    let v: serde_json::Value = match body.and_then(|b| serde_json::from_str(&b).map_err(|e| format!("not the status endpoint's JSON ({e})"))) {
        Ok(v) => v,
        Err(e) => {
            tell!("error: cannot ask {status_url} about the client: {e}");
            return exit::IO;
        }
    };
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        tell!("error: {status_url}: {e}");
        return exit::IO;
    }
    if v.get("found") != Some(&serde_json::Value::Bool(true)) {
        let why = v.get("why").and_then(|w| w.as_str()).unwrap_or("not in the ladder's table: never seen, seen longer than two windows ago, given up for newer clients, or never tracked (a verified crawler, a signed-in request)");
        say!("crawlward: no such live client: {why}");
        return exit::POLICY;
    }
    let observed: Observed = match serde_json::from_value(v["observed"].clone()) {
        Ok(o) => o,
        Err(e) => {
            tell!("error: {status_url}: the client's window does not read ({e})");
            return exit::IO;
        }
    };
    let s = &policy.classifier;
    let scored = classifier::score(&observed, s);
    let rung = crawlward_policy::ladder::rung_name(scored.placement);
    let module_score = v["score"].as_f64().unwrap_or(f64::NAN);
    let module_rung = v["rung"].as_str().unwrap_or("");
    if matches!(format, Format::Json) {
        let mut out = v.clone();
        out["crawlward"] =
            serde_json::json!({ "score": scored.score, "rung": rung, "agrees": (scored.score - module_score).abs() < 1e-9 && rung == module_rung });
        say!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit::OK;
    }
    let f = &scored.features;
    let o = &observed;
    say!("live client, from {status_url}:");
    say!(
        "  {:.0} requests in the {}-minute window, {:.0} distinct URLs, {:.0}% on the authentication routes",
        o.requests,
        s.window_minutes,
        o.unique_paths,
        100.0 * o.auth_frac
    );
    match o.sessions {
        Some(x) => say!("  sessions: {:.0} seen, the busiest {:.0} requests, {:.0} from more than one address", x.count, x.max_requests, x.cross_ip),
        None => say!("  sessions: none (the policy names no session_cookie, or the client sent none)"),
    }
    say!("  rules kept: {:.0} of {:.0} expected", o.rules_honoured, s.rules_expected);
    let values = [f.rpm, f.novelty, f.conc, f.agent_spread, f.reuse.unwrap_or(f64::NAN), f.rules_ok];
    say!("  {:<14} {:>8} {:>10} {:>7} {:>13}", "sub-score", "feature", "sub-score", "weight", "contribution");
    for i in 0..6 {
        let sub = scored.subscores[i].map_or("-".to_string(), |x| format!("{x:.2}"));
        say!("  {:<14} {:>8.3} {:>10} {:>7.2} {:>13.2}", SUBSCORES[i], values[i], sub, s.weights[i], scored.contributions[i]);
    }
    say!("  score {:.2}: {}", scored.score, rung);
    if (scored.score - module_score).abs() < 1e-9 && rung == module_rung {
        say!("  (the module says the same)");
    } else {
        say!("  (the module, with the policy it runs, says {module_score:.2}: {module_rung}; render and reload to run this one)");
    }
    exit::OK
}

fn cmd_explain(policy: &Policy, req: &Request, format: Format) -> i32 {
    let e = policy.explain(req);
    match format {
        Format::Json => {
            say!("{}", serde_json::to_string_pretty(&explanation_json(&e)).unwrap_or_default());
        }
        Format::Text => {
            for s in &e.steps {
                say!("{s}");
            }
            match e.decision.status {
                Some(status) => say!("=> {status} by {}", e.decision.rule.as_str()),
                None => say!("=> passes to the site"),
            }
        }
    }
    exit::OK
}

pub fn schema_json() -> String {
    let schema = schemars::schema_for!(crawlward_policy::model::PolicyFile);
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}
