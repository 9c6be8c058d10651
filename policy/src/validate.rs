//! From the YAML as written to a checked [`Policy`]: every problem is
//! collected with its path before anything is reported.

use crate::checks::{check_path, check_zone_size, problem, valid_class_name, zone_kib};
use crate::identity::Identity;
use crate::model::{self, PolicyFile};
use crate::net::{parse_net, valid_hostname};
use crate::query::FacetGuard;
use crate::robots::check_robots_pattern;
use crate::{Action, PolicyError, Problem};
use ipnet::IpNet;
use std::path::{Path, PathBuf};

/// A checked policy. Every field holds a real value: defaults are applied here.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The policy file's name as given on the command line, for generated headers.
    pub source_name: String,
    /// Where `crawlward update-ranges` keeps the operators' range files.
    pub ranges_dir: String,
    /// The catalogue feeds `crawlward update-ranges` downloads (their kept
    /// copies are read by [`load_with`]).
    pub feeds: Vec<FeedV>,
    pub site: SiteV,
    pub install: Install,
    /// Who is asking, and what the User-Agent rule does: what the module loads.
    pub identity: Identity,
    pub browse: Option<Browse>,
    pub rate_limits: Option<RateLimitsV>,
    pub robots: RobotsV,
    pub maintenance: Option<Maintenance>,
    /// What robots.txt and the responses say about the use of the content.
    pub preferences: crate::preferences::Preferences,
    /// Set when the module renders identification, verification and counters.
    pub module: Option<ModuleV>,
    pub crawl_budget: Option<CrawlBudgetV>,
    /// API quotas per account (`api_tiers`), with the keys file's keys once read.
    pub api_tiers: Option<crate::api_tiers::ApiTiersV>,
    /// What the browse cap, the rate classes, Retry-After and the throttle log
    /// decide from (for the module, the catalogue file's `layers`).
    pub layers: crate::layers::Layers,
    /// `crawlward analyze`'s proportional classifier: always set, the classifier article's values by default.
    pub classifier: crate::classifier::Settings,
    /// The ladder in nginx (a `module:` section and a classifier `mode`), and
    /// the classifier section as written, which the module's catalogue file carries.
    pub ladder: Option<(crate::ladder::Live, model::Classifier)>,
    /// The kept copies of the key directories the module trusts
    /// ([`Policy::signature_directories`]), read by [`load_with`].
    pub signature_keys: Vec<crate::directories::KeptDirectory>,
    /// The directories update-ranges took from traffic
    /// (`module.signatures.fetch_seen`, [`crate::directories::SEEN_FILE`]),
    /// read by [`load_with`]; none without the setting.
    pub seen_directories: Vec<String>,
}

impl Policy {
    /// The Web Bot Auth key directories the module trusts when
    /// `module.signatures` is set: those the catalogue's agents name, then
    /// the policy's own. Empty when signatures are off.
    pub fn signature_directories(&self) -> Vec<String> {
        let Some(s) = self.module.as_ref().and_then(|m| m.signatures.as_ref()) else { return Vec::new() };
        let mut origins: Vec<String> = self.identity.catalogue.agents().iter().filter_map(|a| a.signature_agent.clone()).collect();
        origins.extend(s.directories.iter().filter(|d| !origins.contains(d)).cloned().collect::<Vec<_>>());
        origins.extend(self.seen_directories.iter().filter(|d| !origins.contains(d)).cloned().collect::<Vec<_>>());
        origins
    }

    /// The directories the catalogue's agents and the policy name, without
    /// the ones taken from traffic.
    pub fn named_signature_directories(&self) -> Vec<String> {
        let seen = &self.seen_directories;
        self.signature_directories().into_iter().filter(|d| !seen.contains(d)).collect()
    }
}

/// A catalogue feed, checked.
#[derive(Debug, Clone)]
pub struct FeedV {
    pub url: String,
    pub purpose: crate::Purpose,
}

/// `crawl_budget`, checked, with its defaults.
#[derive(Debug, Clone)]
pub struct CrawlBudgetV {
    pub zone_size: String,
    pub limits: crate::budget::BudgetLimits,
    pub agents: u32,
    pub signed_in: Vec<String>,
    /// `50ms`, or `off`.
    pub lag: String,
    pub shrink: u32,
    pub sync: Option<BudgetSyncV>,
    /// When the verified budget ends, as written.
    pub verified_end: Option<VerifiedEnd>,
}

/// The end of a deliberate slowdown of verified crawlers, as the policy writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifiedEnd {
    /// `verified_until`: seconds since the epoch.
    Until(i64),
    /// `verified_for`: seconds from the policy file's last change.
    For(i64),
}

/// `crawl_budget.sync`, checked, with its defaults.
#[derive(Debug, Clone)]
pub struct BudgetSyncV {
    pub store: crate::sync::StoreUrl,
    pub nodes: u32,
    /// As written (nginx syntax).
    pub interval: String,
    pub timeout: String,
    /// The browse cap shared too (the module's `crawlward_browse_cap`).
    pub browse_cap: bool,
}

#[derive(Debug, Clone)]
pub struct ModuleV {
    pub zone_size: String,
    pub dry_run: bool,
    pub status: Option<String>,
    pub status_allow: Vec<ipnet::IpNet>,
    pub dns: Option<ModuleDnsV>,
    pub signatures: Option<SignaturesV>,
}

/// `module.signatures`, checked, with its defaults.
#[derive(Debug, Clone)]
pub struct SignaturesV {
    /// As written (nginx syntax), and in seconds.
    pub skew: String,
    pub skew_s: i64,
    /// The policy's own directories, as origins (`https://host[:port]`).
    pub directories: Vec<String>,
    /// Path prefixes only signed agents may use (the identity carries them to the module).
    pub required: Vec<String>,
    /// The replay zone's size, when replays are refused.
    pub replay_zone: Option<String>,
    /// The hosts this site's signatures are made for, lower case.
    pub hosts: Vec<String>,
    /// Failed verifications an address may cost each worker a minute.
    pub failures_per_minute: u16,
    /// Directories to take from the module's count of unknown ones.
    pub fetch_seen: Option<FetchSeenV>,
}

/// `module.signatures.fetch_seen`, checked, with its defaults.
#[derive(Debug, Clone)]
pub struct FetchSeenV {
    pub status: String,
    pub max: usize,
    pub min_requests: u64,
}

/// `module.dns`, checked, with its defaults.
#[derive(Debug, Clone)]
pub struct ModuleDnsV {
    /// nginx `resolver` arguments (`127.0.0.1:5353`, `[::1]`); empty: the site sets its own.
    pub resolver: Vec<String>,
    pub resolver_timeout: String,
    pub zone_size: String,
    /// The times as written (nginx syntax), and their milliseconds.
    pub valid_verified: String,
    pub valid_spoofed: String,
    pub valid_unresolved: String,
    /// `stale_verified` as written (a time, or `off`).
    pub stale_verified: String,
    pub settings: crate::fcrdns::DnsSettings,
    pub unresolved: crate::fcrdns::Unresolved,
}

#[derive(Debug, Clone)]
pub struct SiteV {
    pub canonical_url: String,
    /// `scheme://host[:port]` of the canonical URL: where a redirect host sends its requests.
    pub canonical_origin: String,
    pub same_site_hosts: Vec<String>,
    /// Lower-cased, each once.
    pub redirect_hosts: Vec<String>,
    pub trusted_proxies: Vec<IpNet>,
    /// `unix:` in `trusted_proxies`: a proxy in front on a unix socket, whose
    /// forwarded address is trusted too (`set_real_ip_from unix:`).
    pub trust_unix_socket: bool,
    pub real_ip_header: String,
    pub upstream_workers: u32,
    /// The application's front controller (`/index.php`), dropped from a path
    /// before any prefix is matched: [`crate::app_path`].
    pub front_controller: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Install {
    pub dir: String,
    pub throttle_log: String,
    /// The site's access log in the `crawlward_combined` format, if the policy sets one.
    pub access_log: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Browse {
    pub locations: Vec<String>,
    pub facet_names: Vec<String>,
    pub facet_prefixes: Vec<String>,
    pub crawler_max_params: u32,
    pub max_facets_without_referer: u32,
    pub exempt_verified: bool,
    pub max_in_flight: u32,
    /// Verified crawlers take no place in the browse cap.
    pub cap_exempt_verified: bool,
    pub retry_after: u32,
}

#[derive(Debug, Clone)]
pub struct RateLimitsV {
    pub exempt_verified: bool,
    pub retry_after: u32,
    pub zone_size: String,
    pub classes: Vec<RateClassV>,
    /// The strict class for `throttle`, named `throttle`.
    pub throttle: Option<RateClassV>,
}

#[derive(Debug, Clone)]
pub struct RateClassV {
    pub name: String,
    pub paths: Vec<String>,
    /// Requests per `per_minute` unit, kept as written: `60r/m` or `5r/s`.
    pub rate: String,
    pub burst: u32,
}

#[derive(Debug, Clone)]
pub struct RobotsV {
    pub disallow: Vec<String>,
    pub disallow_params: Vec<String>,
    pub open_params: Vec<String>,
    pub deep_paths: Vec<String>,
    pub crawl_delay: Option<u32>,
    pub contact: Option<String>,
    pub sitemap: String,
    pub source: RobotsSource,
}

/// Who writes robots.txt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotsSource {
    /// crawlward renders it from the policy.
    Rendered,
    /// The application: nginx proxies it, keeps the last good answer and
    /// falls back to that copy, else to the rendered one.
    App {
        /// Where nginx asks, with a path (`/robots.txt` when the URL had none).
        url: String,
        /// Seconds to connect and to answer.
        timeout: u32,
    },
}

#[derive(Debug, Clone)]
pub struct Maintenance {
    pub flag_file: String,
    pub retry_after: u32,
}

/// Where published ranges come from when a policy is loaded.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Read downloaded range files from here instead of the policy's `catalogue.ranges_dir`.
    pub ranges_dir: Option<PathBuf>,
    /// Otherwise, prefix the policy's `catalogue.ranges_dir` with this directory (as `render --root`).
    pub root: Option<String>,
}

impl LoadOptions {
    /// The directory of downloaded range files for `policy`.
    pub fn ranges_dir_for(&self, policy: &Policy) -> PathBuf {
        match (&self.ranges_dir, &self.root) {
            (Some(d), _) => d.clone(),
            (None, Some(root)) => PathBuf::from(format!("{}{}", root.trim_end_matches('/'), policy.ranges_dir)),
            (None, None) => PathBuf::from(&policy.ranges_dir),
        }
    }
}

/// Read and check a policy file. Agents' published ranges come from the
/// downloaded copies in `catalogue.ranges_dir`, else from the shipped snapshot.
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    load_with(path, &LoadOptions::default())
}

pub fn load_with(path: &Path, opts: &LoadOptions) -> Result<Policy, PolicyError> {
    let name = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| PolicyError {
        file: name.clone(),
        problems: vec![crate::Located { path: String::new(), message: format!("cannot read the policy: {e}"), position: None, line_text: None }],
    })?;
    let mut policy = load_str_with(&name, &source, opts)?;
    // a verified_for runs from the policy's last change: rendering again does not extend it
    let changed = std::fs::metadata(path).and_then(|m| m.modified()).ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    if let (Some(b), Some(changed)) = (policy.crawl_budget.as_mut(), changed) {
        b.start_verified_end(changed.as_secs() as i64);
    }
    // the keys file, beside the policy
    if let Some(a) = policy.api_tiers.as_mut() {
        let base = path.parent().unwrap_or(Path::new("."));
        a.read_keys(base).map_err(|message| PolicyError {
            file: name.clone(),
            problems: vec![crate::Located { path: "api_tiers.keys".into(), message, position: None, line_text: None }],
        })?;
    }
    Ok(policy)
}

/// Check a policy given as text, with its ranges and feeds as [`load_with`]
/// finds them; `name` is used in messages and headers.
pub fn load_str_with(name: &str, source: &str, opts: &LoadOptions) -> Result<Policy, PolicyError> {
    let mut policy = parse(name, source)?;
    let dir = opts.ranges_dir_for(&policy);
    // the feeds' agents, from the copies update-ranges keeps, before their ranges are resolved
    let feed_agents: Vec<crate::model::AgentSpec> = policy.feeds.iter().filter_map(|f| kept_feed(&dir, &f.url)).flat_map(|f| f.agents).collect();
    if !feed_agents.is_empty() {
        policy.identity.catalogue.add_feed_agents(&feed_agents);
    }
    let from_dir = std::cell::Cell::new(false);
    policy.identity.catalogue.resolve_ranges(|url| downloaded(&dir, url).inspect(|_| from_dir.set(true)).or_else(|| shipped(url)));
    // named only when some ranges come from there: the module reads when each was last confirmed
    if from_dir.get() {
        policy.identity.ranges_dir = Some(dir.display().to_string());
    }
    if let Some(f) = policy.module.as_ref().and_then(|m| m.signatures.as_ref()).and_then(|s| s.fetch_seen.as_ref()) {
        // a directory named since it was taken is the named one only
        let named = policy.signature_directories();
        policy.seen_directories = crate::directories::seen(&dir).directories.into_iter().map(|d| d.origin).filter(|o| !named.contains(o)).take(f.max).collect();
    }
    policy.signature_keys = policy.signature_directories().iter().filter_map(|origin| crate::directories::kept(&dir, origin)).collect();
    Ok(policy)
}

/// Check a policy given as text; `name` is used in messages and headers.
/// Published ranges come from the shipped snapshot only.
pub fn load_str(name: &str, source: &str) -> Result<Policy, PolicyError> {
    let mut policy = parse(name, source)?;
    policy.identity.catalogue.resolve_ranges(shipped);
    Ok(policy)
}

fn parse(name: &str, source: &str) -> Result<Policy, PolicyError> {
    let file: PolicyFile = serde_yaml::from_str(source).map_err(|e| PolicyError::syntax(name, source, &e))?;
    let mut problems = Vec::new();
    let policy = check(name, file, &mut problems);
    if problems.is_empty() {
        Ok(policy)
    } else {
        Err(PolicyError::locate(name, source, problems))
    }
}

type Ranges = (Vec<ipnet::IpNet>, Option<String>);

/// The copy `crawlward update-ranges` keeps for `url`, if it is there and valid.
pub fn downloaded(dir: &Path, url: &str) -> Option<Ranges> {
    let text = std::fs::read_to_string(dir.join(crate::ranges::file_name(url))).ok()?;
    let file: crate::ranges::RangeFile = serde_json::from_str(&text).ok()?;
    let nets = file.networks().ok()?;
    Some((nets, file.as_of().map(str::to_string)))
}

/// The copy `crawlward update-ranges` keeps of the catalogue feed at `url`, if it is there and valid.
pub fn kept_feed(dir: &Path, url: &str) -> Option<crate::feeds::FeedFile> {
    let text = std::fs::read_to_string(dir.join(crate::feeds::file_name(url))).ok()?;
    serde_json::from_str(&text).ok().filter(|f: &crate::feeds::FeedFile| f.url == url)
}

/// The shipped snapshot's copy for `url`.
pub fn shipped(url: &str) -> Option<Ranges> {
    let file = crate::ranges::snapshot().into_iter().find(|f| f.url == url)?;
    let nets = file.networks().ok()?;
    Some((nets, file.as_of().map(str::to_string)))
}

fn check(name: &str, f: PolicyFile, problems: &mut Vec<Problem>) -> Policy {
    let site = check_site(&f.site, problems);
    if let Some(fc) = &site.front_controller {
        behind_front_controller(&f, fc, problems);
    }
    let install = Install {
        dir: absolute(f.install.dir.as_deref(), "/etc/nginx/crawlward", "install.dir", problems),
        throttle_log: absolute(f.install.throttle_log.as_deref(), "/var/log/nginx/crawlward-throttled.log", "install.throttle_log", problems),
        access_log: f.install.access_log.as_deref().map(|p| absolute(Some(p), "", "install.access_log", problems)),
    };
    if install.access_log.as_ref() == Some(&install.throttle_log) {
        problem(problems, "install.access_log", "access_log and throttle_log are the same file: the throttle log has its own format");
    }
    let mut identity = Identity::build(f.catalogue.builtin, &f.catalogue.agents, &f.actions, f.block_status, &f.machine_doors, problems);
    let machine_doors = &identity.machine_doors;

    let browse = f.browse_shed.as_ref().map(|b| check_browse(b, &site, machine_doors, problems));
    let rate_limits = f.rate_limits.as_ref().map(|r| check_rates(r, problems));
    let throttles = identity.spoofed_action == Action::Throttle || identity.purpose_actions.iter().any(|(_, a)| *a == Action::Throttle);
    if throttles && rate_limits.as_ref().is_none_or(|r| r.throttle.is_none()) {
        problem(problems, "actions", "an action is throttle, but rate_limits.throttle is not set: the strict class must be defined");
    }
    let robots = check_robots(&f.robots, &site, problems);
    identity.front_controller = site.front_controller.clone();
    identity.deep_paths = crate::robots::DeepPaths::new(robots.deep_paths.clone());
    let maintenance = f.maintenance.as_ref().map(|m| Maintenance {
        flag_file: absolute(Some(&m.flag_file), "", "maintenance.flag_file", problems),
        retry_after: positive(m.retry_after, 300, "maintenance.retry_after", problems),
    });

    let mut module = f.module.as_ref().filter(|m| m.enabled != Some(false)).map(|m| check_module(m, problems));
    if let Some(s) = module.as_mut().and_then(|m| m.signatures.as_mut()) {
        identity.signatures_required = s.required.clone();
        // by default, signatures are for the site's own names
        if s.hosts.is_empty() {
            for h in url_host(&site.canonical_url).into_iter().chain(site.same_site_hosts.iter().map(|h| h.to_ascii_lowercase())) {
                if !s.hosts.contains(&h) {
                    s.hosts.push(h);
                }
            }
        }
    }
    // the replay zone is split between the key file's directories: the named ones and
    // those taken from traffic
    if let Some(s) = module.as_ref().and_then(|m| m.signatures.as_ref()).filter(|s| s.replay_zone.is_some()) {
        let mut named: Vec<&String> = identity.catalogue.agents().iter().filter_map(|a| a.signature_agent.as_ref()).collect();
        named.extend(s.directories.iter());
        named.sort();
        named.dedup();
        let most = named.len() + s.fetch_seen.as_ref().map_or(0, |f| f.max);
        if most > crate::replay_table::MAX_DIRECTORIES {
            problem(
                problems,
                "module.signatures.replay_zone",
                format!(
                    "the key file would hold up to {most} directories ({} named, and fetch_seen.max): a replay zone is split between at most {}",
                    named.len(),
                    crate::replay_table::MAX_DIRECTORIES
                ),
            );
        }
    }
    let crawl_budget = f.crawl_budget.as_ref().map(|b| check_budget(b, problems));
    if let Some(b) = &crawl_budget {
        check_budget_room(&b.zone_size, &identity.catalogue, problems);
    }
    if let (Some(_), Some(b)) = (&module, &browse) {
        for (i, l) in b.locations.iter().enumerate() {
            if l.contains(',') {
                problem(
                    problems,
                    format!("browse_shed.locations[{i}]"),
                    format!("\"{l}\" has a ',': the module's crawlward_facets lists the browse pages separated by commas"),
                );
            }
        }
    }
    if crawl_budget.as_ref().and_then(|b| b.sync.as_ref()).is_some_and(|s| s.browse_cap) && browse.is_none() {
        problem(problems, "crawl_budget.sync.browse_cap", "a shared browse cap needs a browse cap: add a browse_shed section");
    }
    if crawl_budget.is_some() && module.is_none() {
        problem(problems, "crawl_budget", "crawl budgets need the module: add a module section (stock nginx's limit_req has no per-agent or shared budget, no deep-path limit and no hourly or daily window)");
    }
    let api_tiers = f.api_tiers.as_ref().map(|a| crate::api_tiers::check(a, problems));
    if api_tiers.is_some() && module.is_none() {
        problem(problems, "api_tiers", "API quotas need the module: add a module section (stock nginx's limit_req counts per address or per key, not per account, and has no hourly or daily window)");
    }
    let ranges_dir = absolute(f.catalogue.ranges_dir.as_deref(), "/var/lib/crawlward/ranges", "catalogue.ranges_dir", problems);
    let mut feeds: Vec<FeedV> = Vec::new();
    for (i, feed) in f.catalogue.feeds.iter().enumerate() {
        if !(feed.url.starts_with("https://") || feed.url.starts_with("http://")) {
            problem(problems, format!("catalogue.feeds[{i}].url"), format!("feed url \"{}\" is not an http(s) URL", feed.url));
        }
        if feeds.iter().any(|x| x.url == feed.url) {
            problem(problems, format!("catalogue.feeds[{i}].url"), format!("duplicate feed \"{}\"", feed.url));
        }
        let purpose = match feed.purpose.as_deref() {
            None => crate::Purpose::AiTraining,
            Some(p) => crate::Purpose::parse(p).filter(|p| *p != crate::Purpose::UnknownBot).unwrap_or_else(|| {
                problem(problems, format!("catalogue.feeds[{i}].purpose"), format!("unknown purpose \"{p}\""));
                crate::Purpose::AiTraining
            }),
        };
        feeds.push(FeedV { url: feed.url.clone(), purpose });
    }
    let layers = layers_of(browse.as_ref(), rate_limits.as_ref(), maintenance.as_ref(), crawl_budget.is_some());
    // the module decides these layers itself, from the catalogue file
    if module.is_some() {
        identity.layers = Some(layers.clone());
    }
    let classifier = check_classifier(f.classifier.as_ref(), problems);
    // the module runs the ladder from the catalogue file
    let preferences = check_preferences(f.preferences.as_ref(), &identity, problems);
    // the module runs the ladder from the catalogue file
    let ladder = match (&module, f.classifier.as_ref()) {
        (Some(_), Some(c)) => check_live(c, f.site.canonical_url.starts_with("https:"), problems).map(|live| (live, c.clone())),
        _ => None,
    };
    Policy {
        source_name: name.to_string(),
        ranges_dir,
        feeds,
        site,
        install,
        identity,
        browse,
        rate_limits,
        robots,
        maintenance,
        preferences,
        module,
        crawl_budget,
        api_tiers,
        layers,
        classifier,
        ladder,
        signature_keys: Vec::new(),
        seen_directories: Vec::new(),
    }
}

/// The layers of a checked policy, as nginx enforces them.
fn layers_of(policy_browse: Option<&Browse>, rate_limits: Option<&RateLimitsV>, maintenance: Option<&Maintenance>, budgets: bool) -> crate::layers::Layers {
    crate::layers::Layers {
        browse_cap: policy_browse.map(|b| crate::layers::BrowseCap {
            paths: b.locations.clone(),
            exempt_verified: b.cap_exempt_verified,
            retry_after: b.retry_after,
        }),
        rate_classes: rate_limits.map(|rl| crate::layers::RateClasses {
            classes: rl.classes.iter().map(|c| crate::layers::RateClass { name: c.name.clone(), paths: c.paths.clone() }).collect(),
            exempt_verified: rl.exempt_verified,
            throttle: rl.throttle.is_some(),
            retry_after: rl.retry_after,
        }),
        maintenance_retry_after: maintenance.map(|m| m.retry_after),
        budgets,
    }
}

/// The classifier's settings and the ladder's from a policy's `classifier`
/// section as written, with `https` whether the site is (its cookie is then
/// `Secure`): what the module reads from the catalogue file, checked by the
/// same code as `crawlward check`. Err for a problem, or no `mode`.
pub fn ladder_settings(c: &model::Classifier, https: bool) -> Result<(crate::classifier::Settings, crate::ladder::Live), String> {
    let mut problems = Vec::new();
    let s = check_classifier(Some(c), &mut problems);
    let live = check_live(c, https, &mut problems);
    match (problems.first(), live) {
        (Some(p), _) => Err(format!("{}: {}", p.path, p.message)),
        (None, None) => Err("the classifier sets no mode (observe or enforce)".into()),
        (None, Some(live)) => Ok((s, live)),
    }
}

/// `1r/s` or `6r/m` as requests a second.
fn per_second(rate: &str) -> Option<f64> {
    let (n, unit) = if let Some(n) = rate.strip_suffix("r/s") { (n, 1.0) } else { (rate.strip_suffix("r/m")?, 60.0) };
    n.parse::<u32>().ok().filter(|n| *n >= 1).map(|n| f64::from(n) / unit)
}

fn check_live(c: &model::Classifier, https: bool, problems: &mut Vec<Problem>) -> Option<crate::ladder::Live> {
    use crate::ladder::{Challenge, CookieSettings, Live, Mode, Rate};
    let mode = match c.mode.as_deref() {
        None | Some("off") => return None,
        Some("observe") => Mode::Observe,
        Some("enforce") => Mode::Enforce,
        Some(m) => {
            problem(problems, "classifier.mode", format!("invalid mode \"{m}\": expected observe, enforce or off"));
            return None;
        }
    };
    let mut live = Live { mode, ..Live::default() };
    if let Some(z) = &c.zone_size {
        check_zone_size(z, "classifier.zone_size", problems);
        live.zone_size = z.clone();
    }
    let bucket = |b: &Option<model::BucketSpec>, default: Rate, path: &str, problems: &mut Vec<Problem>| -> Rate {
        let Some(b) = b else { return default };
        let mut r = default;
        if let Some(burst) = b.burst {
            if (1..=100_000).contains(&burst) {
                r.burst = f64::from(burst);
            } else {
                problem(problems, format!("classifier.{path}.burst"), format!("burst must be from 1 to 100000, not {burst}"));
            }
        }
        if let Some(rate) = &b.rate {
            match per_second(rate) {
                Some(ps) => r.per_second = ps,
                None => problem(problems, format!("classifier.{path}.rate"), format!("invalid rate \"{rate}\": expected e.g. 1r/s or 6r/m, at least 1")),
            }
        }
        r
    };
    live.bucket = bucket(&c.bucket, live.bucket, "bucket", problems);
    live.slow = bucket(&c.slow, live.slow, "slow", problems);
    live.account_route = bucket(&c.account_route, live.account_route, "account_route", problems);
    live.backstop = bucket(&c.backstop, live.backstop, "backstop", problems);
    if let Some(ch) = &c.challenges {
        for (i, (v, name)) in [(&ch.l3, "L3"), (&ch.l4, "L4"), (&ch.l5, "L5")].into_iter().enumerate() {
            let Some(v) = v else { continue };
            match Challenge::parse(v) {
                Some(a) => live.challenges[i] = a,
                None => problem(problems, format!("classifier.challenges.{name}"), format!("invalid answer \"{v}\": expected pass, slow or refuse")),
            }
        }
    }
    if let Some(ra) = c.retry_after {
        if (1..=86_400).contains(&ra) {
            live.retry_after = ra;
        } else {
            problem(problems, "classifier.retry_after", format!("retry_after must be from 1 to 86400 seconds, not {ra}"));
        }
    }
    let cookie = c.cookie.clone().unwrap_or_default();
    live.cookie = if cookie.enabled == Some(false) {
        None
    } else {
        let mut cs = CookieSettings { secure: https, ..CookieSettings::default() };
        // a browser reads the prefixes in any case (older ones with their case), and takes
        // a cookie that has one only from a secure answer
        let prefixed = |n: &str| ["__host-", "__secure-"].iter().any(|p| n.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)));
        if let Some(name) = &cookie.name {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                problem(problems, "classifier.cookie.name", format!("invalid cookie name \"{name}\": letters, digits, _ and - only"));
            } else if prefixed(name) && !https {
                problem(
                    problems,
                    "classifier.cookie.name",
                    format!("invalid cookie name \"{name}\": a browser takes a __Host- or __Secure- cookie only over https, and site.canonical_url is http"),
                );
            } else if prefixed(name) && !name.starts_with(HOST_PREFIX) {
                // a `__Secure-` cookie may carry Domain=, so a sibling host sets it for the
                // whole site; a browser that reads the prefix with its case (older ones)
                // takes `__host-` from anyone
                problem(
                    problems,
                    "classifier.cookie.name",
                    format!(
                        "invalid cookie name \"{name}\": on an https site the prefix is {HOST_PREFIX}, spelled so (or none, and it is added): a __Secure- cookie may be set for the whole domain by any subdomain, and older browsers take another spelling of __Host- from anyone"
                    ),
                );
            } else {
                cs.name = name.clone();
            }
        }
        // on an https site, a name only this host can set: a browser takes a `__Host-`
        // cookie only from a secure answer of the host itself, never from a sibling
        // (user pages on pages.example.org) that would give its own signed cookie to
        // every visitor and make them one client
        if cs.secure && !prefixed(&cs.name) {
            cs.name.insert_str(0, HOST_PREFIX);
        }
        if let Some(l) = &cookie.lifetime {
            match crate::fcrdns::parse_time(l).filter(|ms| (60_000..=400 * 86_400_000).contains(ms)) {
                Some(ms) => cs.lifetime = ms / 1000,
                None => problem(problems, "classifier.cookie.lifetime", format!("invalid lifetime \"{l}\": expected a time from 1m to 400d, e.g. 30d")),
            }
        }
        if let Some(f) = &cookie.key_file {
            match crate::ladder::key_file_problem(f) {
                Some(why) => problem(problems, "classifier.cookie.key_file", why),
                None => cs.key_file = f.clone(),
            }
        }
        Some(cs)
    };
    if let Some(sc) = &c.session_cookie {
        if sc.is_empty() || !sc.bytes().all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b)) {
            problem(problems, "classifier.session_cookie", format!("invalid cookie name \"{sc}\""));
        } else {
            live.session_cookie = Some(sc.clone());
        }
    }
    match c.rung_header.as_deref() {
        None => {}
        Some("off") => live.rung_header = None,
        Some(name) => match crate::ladder::rung_header_problem(name) {
            Some(why) => problem(problems, "classifier.rung_header", why),
            None => live.rung_header = Some(name.to_string()),
        },
    }
    Some(live)
}

fn check_classifier(c: Option<&model::Classifier>, problems: &mut Vec<Problem>) -> crate::classifier::Settings {
    use crate::classifier::{Cut, Settings};
    let mut s = Settings::default();
    let Some(c) = c else { return s };
    if let Some(w) = &c.window {
        match crate::fcrdns::parse_time(w).filter(|ms| *ms >= 60_000 && *ms <= 366 * 86_400_000) {
            Some(ms) => s.window_minutes = ms as f64 / 60_000.0,
            None => problem(problems, "classifier.window", format!("invalid window \"{w}\": expected a time from 1m to 366d, e.g. 24h")),
        }
    }
    for (i, p) in c.auth_paths.iter().enumerate() {
        if check_path(p, &format!("classifier.auth_paths[{i}]"), problems) {
            s.auth_paths.push(p.clone());
        }
    }
    match c.auth_floor {
        None => {}
        Some(x) if x.is_finite() && (0.0..=1.0).contains(&x) => s.auth_floor = x,
        Some(x) => problem(problems, "classifier.auth_floor", format!("auth_floor must be from 0 to 1, not {x}")),
    }
    if let Some(n) = c.rules_expected {
        if n.is_finite() && n >= 1.0 {
            s.rules_expected = n;
        } else {
            problem(problems, "classifier.rules_expected", format!("rules_expected must be at least 1, not {n}"));
        }
    }
    let cut = |v: &Option<model::CutPoints>, default: Cut, path: &str, problems: &mut Vec<Problem>| -> Cut {
        let Some(v) = v else { return default };
        let c = Cut::new(v.from.unwrap_or(default.from), v.to.unwrap_or(default.to));
        if !c.from.is_finite() || !c.to.is_finite() || c.from == c.to {
            problem(problems, format!("classifier.{path}"), format!("from and to must be two different numbers, not {} and {}", c.from, c.to));
            return default;
        }
        c
    };
    let mut weights = s.weights;
    let mut sub = |v: &Option<model::SubScore>, i: usize, default: Cut, problems: &mut Vec<Problem>| -> Cut {
        let name = crate::classifier::SUBSCORES[i];
        let Some(v) = v else { return default };
        if let Some(w) = v.weight {
            if w.is_finite() && (0.0..=1.0).contains(&w) {
                weights[i] = w;
            } else {
                problem(problems, format!("classifier.{name}.weight"), format!("weight must be from 0 to 1, not {w}"));
            }
        }
        cut(&Some(model::CutPoints { from: v.from, to: v.to }), default, name, problems)
    };
    s.rate = sub(&c.rate, 0, s.rate, problems);
    s.novelty = sub(&c.novelty, 1, s.novelty, problems);
    s.concentration = sub(&c.concentration, 2, s.concentration, problems);
    s.ua_spread = sub(&c.ua_spread, 3, s.ua_spread, problems);
    s.rules = sub(&c.rules, 5, s.rules, problems);
    if let Some(session) = &c.session {
        if let Some(w) = session.weight {
            if w.is_finite() && (0.0..=1.0).contains(&w) {
                weights[4] = w;
            } else {
                problem(problems, "classifier.session.weight", format!("weight must be from 0 to 1, not {w}"));
            }
        }
        s.session_reuse = cut(&session.reuse, s.session_reuse, "session.reuse", problems);
        s.session_cross_ip = cut(&session.cross_ip, s.session_cross_ip, "session.cross_ip", problems);
    }
    s.weights = weights;
    if let Some(ceilings) = &c.ladder {
        let rising = ceilings.windows(2).all(|w| w[0] < w[1]);
        if ceilings.len() != 6 || !rising || ceilings.iter().any(|x| !x.is_finite()) {
            problem(problems, "classifier.ladder", "ladder must list six rising ceilings, for L0 to L5 (past L5's, L6)");
        } else {
            for (rung, c) in s.ladder.iter_mut().zip(ceilings) {
                rung.ceiling = *c;
            }
            // L6 holds everything past L5's ceiling
            if let Some(last) = s.ladder.last_mut() {
                last.ceiling = f64::INFINITY;
            }
        }
    }
    s
}

fn check_budget(b: &model::CrawlBudget, problems: &mut Vec<Problem>) -> CrawlBudgetV {
    use crate::budget::{BudgetLimits, Limits};
    let seed = BudgetLimits::SEED_003;
    let mut limits = |v: &Option<String>, default: Limits, path: &str| -> Limits {
        let Some(text) = v else { return default };
        Limits::parse(text).unwrap_or_else(|| {
            problem(
                problems,
                format!("crawl_budget.{path}"),
                format!("invalid limits \"{text}\": expected general,deep rates, e.g. 60r/m,6r/m (r/s, r/m, r/h or r/d)"),
            );
            default
        })
    };
    let limits = BudgetLimits {
        address: limits(&b.address, seed.address, "address"),
        agent: limits(&b.agent, seed.agent, "agent"),
        shared: limits(&b.shared, seed.shared, "shared"),
        verified: b.verified.as_ref().map(|_| limits(&b.verified, seed.address, "verified")),
        verified_until_s: None,
    };
    let verified_end = check_verified_end(b, problems);
    let zone_size = b.zone_size.clone().unwrap_or_else(|| "10m".into());
    check_zone_size(&zone_size, "crawl_budget.zone_size", problems);
    let agents = b.agents.unwrap_or(256);
    if !(1..=65_536).contains(&agents) {
        problem(problems, "crawl_budget.agents", format!("agents must be from 1 to 65536, not {agents}"));
    }
    let signed_in = b.signed_in.clone().unwrap_or_default();
    for (i, v) in signed_in.iter().enumerate() {
        let ok = v.strip_prefix('$').is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'));
        if !ok {
            problem(problems, format!("crawl_budget.signed_in[{i}]"), format!("invalid variable \"{v}\": expected a variable, e.g. $remote_user"));
        }
    }
    let lag = b.lag.clone().unwrap_or_else(|| "50ms".into());
    if lag != "off" && crate::fcrdns::parse_time(&lag).is_none_or(|ms| !(1..=60_000).contains(&ms)) {
        problem(problems, "crawl_budget.lag", format!("invalid lag \"{lag}\": expected a time from 1ms to 60s (e.g. 50ms), or off"));
    }
    let shrink = b.shrink.unwrap_or(4);
    if !(1..=1000).contains(&shrink) {
        problem(problems, "crawl_budget.shrink", format!("shrink must be from 1 to 1000, not {shrink}"));
    }
    let sync = b.sync.as_ref().and_then(|s| check_budget_sync(s, problems));
    let mut budget = CrawlBudgetV { zone_size, limits, agents, signed_in, lag, shrink, sync, verified_end };
    budget.start_verified_end(now_epoch_s());
    budget
}

/// `crawl_budget.verified_until` or `verified_for`, checked.
fn check_verified_end(b: &model::CrawlBudget, problems: &mut Vec<Problem>) -> Option<VerifiedEnd> {
    let end = match (&b.verified_until, &b.verified_for) {
        (None, None) => return None,
        (Some(_), Some(_)) => {
            problem(problems, "crawl_budget.verified_for", "give verified_until or verified_for, not both");
            return None;
        }
        (Some(t), None) => match crate::ranges::epoch_seconds(t) {
            Some(s) => VerifiedEnd::Until(s),
            None => {
                problem(problems, "crawl_budget.verified_until", format!("invalid time \"{t}\": expected an RFC 3339 time, e.g. 2026-12-07T06:00:00Z"));
                return None;
            }
        },
        (None, Some(d)) => match crate::fcrdns::parse_time(d).filter(|ms| *ms >= 60_000) {
            Some(ms) => VerifiedEnd::For((ms / 1000) as i64),
            None => {
                problem(problems, "crawl_budget.verified_for", format!("invalid duration \"{d}\": expected e.g. 6h, 36h or 2d, at least 1m"));
                return None;
            }
        },
    };
    if b.verified.is_none() {
        let key = if b.verified_until.is_some() { "verified_until" } else { "verified_for" };
        problem(problems, format!("crawl_budget.{key}"), "ends nothing: crawl_budget.verified is not set");
    }
    Some(end)
}

fn now_epoch_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl CrawlBudgetV {
    /// Resolve a `verified_for` from `start_s` (the policy file's last change; now for a policy given as text).
    fn start_verified_end(&mut self, start_s: i64) {
        self.limits.verified_until_s = match self.verified_end {
            Some(VerifiedEnd::Until(s)) => Some(s),
            Some(VerifiedEnd::For(secs)) => Some(start_s.saturating_add(secs)),
            None => None,
        };
    }
}

fn check_budget_sync(s: &model::BudgetSync, problems: &mut Vec<Problem>) -> Option<BudgetSyncV> {
    let store = crate::sync::StoreUrl::parse(&s.store)
        .map_err(|why| problem(problems, "crawl_budget.sync.store", format!("invalid store \"{}\": {why}", s.store)))
        .ok();
    if !(1..=1000).contains(&s.nodes) {
        problem(problems, "crawl_budget.sync.nodes", format!("nodes must be from 1 to 1000, not {}", s.nodes));
    }
    let time = |v: &Option<String>, default: &str, path: &str, (lo, hi, range): (u64, u64, &str), problems: &mut Vec<Problem>| {
        let text = v.clone().unwrap_or_else(|| default.into());
        if crate::fcrdns::parse_time(&text).is_none_or(|ms| !(lo..=hi).contains(&ms)) {
            problem(problems, format!("crawl_budget.sync.{path}"), format!("invalid {path} \"{text}\": expected a time from {range}"));
        }
        text
    };
    let interval = time(&s.interval, "100ms", "interval", (10, 10_000, "10ms to 10s"), problems);
    let timeout = time(&s.timeout, "1s", "timeout", (10, 60_000, "10ms to 60s"), problems);
    Some(BudgetSyncV { store: store?, nodes: s.nodes, interval, timeout, browse_cap: s.browse_cap.unwrap_or(false) })
}

fn check_module(m: &model::Module, problems: &mut Vec<Problem>) -> ModuleV {
    let zone_size = m.zone_size.clone().unwrap_or_else(|| "4m".into());
    check_zone_size(&zone_size, "module.zone_size", problems);
    if let Some(s) = &m.status {
        check_path(s, "module.status", problems);
    }
    let mut status_allow = Vec::new();
    match &m.status_allow {
        None => status_allow.extend(["127.0.0.1/32", "::1/128"].iter().filter_map(|n| n.parse::<ipnet::IpNet>().ok())),
        Some(list) => {
            for (i, n) in list.iter().enumerate() {
                match parse_net(n) {
                    Ok(net) => status_allow.push(net),
                    Err(e) => problem(problems, format!("module.status_allow[{i}]"), e),
                }
            }
        }
    }
    let dns = m.dns.as_ref().map(|d| check_module_dns(d, problems));
    let signatures = m.signatures.as_ref().map(|s| check_module_signatures(s, problems));
    ModuleV { zone_size, dry_run: m.dry_run.unwrap_or(false), status: m.status.clone(), status_allow, dns, signatures }
}

fn check_module_signatures(s: &model::ModuleSignatures, problems: &mut Vec<Problem>) -> SignaturesV {
    use crate::signature::{directory_origin, DEFAULT_SKEW_S, MAX_SKEW_S};
    let skew = s.skew.clone().unwrap_or_else(|| format!("{DEFAULT_SKEW_S}s"));
    let skew_s = match crate::fcrdns::parse_time(&skew).filter(|ms| ms % 1000 == 0 && *ms <= MAX_SKEW_S as u64 * 1000) {
        Some(ms) => (ms / 1000) as i64,
        None => {
            problem(problems, "module.signatures.skew", format!("invalid time \"{skew}\": expected whole seconds from 0s to {MAX_SKEW_S}s, e.g. 60s or 5m"));
            DEFAULT_SKEW_S
        }
    };
    let mut directories: Vec<String> = Vec::new();
    for (i, d) in s.directories.iter().flatten().enumerate() {
        match directory_origin(d) {
            Some(origin) if !directories.contains(&origin) => directories.push(origin),
            Some(_) => problem(problems, format!("module.signatures.directories[{i}]"), format!("\"{d}\" is listed twice")),
            None => problem(problems, format!("module.signatures.directories[{i}]"), format!("\"{d}\" is not an https:// origin (https://host, no path)")),
        }
    }
    let mut required = Vec::new();
    for (i, p) in s.required.iter().flatten().enumerate() {
        if check_path(p, &format!("module.signatures.required[{i}]"), problems) {
            required.push(p.clone());
        }
    }
    if let Some(size) = &s.replay_zone {
        check_zone_size(size, "module.signatures.replay_zone", problems);
    }
    let mut hosts = Vec::new();
    for (i, h) in s.hosts.iter().flatten().enumerate() {
        if valid_hostname(h) {
            hosts.push(h.to_ascii_lowercase());
        } else {
            problem(
                problems,
                format!("module.signatures.hosts[{i}]"),
                format!("invalid host name \"{h}\": expected a name such as example.org, without scheme or port"),
            );
        }
    }
    let failures_per_minute = s.failures_per_minute.unwrap_or(crate::signature::DEFAULT_FAILURES_PER_MINUTE);
    let fetch_seen = s.fetch_seen.as_ref().map(|f| {
        if !(f.status.starts_with("http://") || f.status.starts_with("https://")) {
            problem(
                problems,
                "module.signatures.fetch_seen.status",
                format!("\"{}\" is not an http:// or https:// URL of the module's status endpoint", f.status),
            );
        }
        let max = f.max.unwrap_or(4);
        if !(1..=16).contains(&max) {
            problem(problems, "module.signatures.fetch_seen.max", format!("{max}: from 1 to 16 directories"));
        }
        let min_requests = f.min_requests.unwrap_or(100);
        if min_requests == 0 {
            problem(problems, "module.signatures.fetch_seen.min_requests", "at least 1".to_string());
        }
        FetchSeenV { status: f.status.clone(), max: max.clamp(1, 16) as usize, min_requests: min_requests.max(1) }
    });
    SignaturesV { skew, skew_s, directories, required, replay_zone: s.replay_zone.clone(), hosts, failures_per_minute, fetch_seen }
}

fn check_module_dns(d: &model::ModuleDns, problems: &mut Vec<Problem>) -> ModuleDnsV {
    use crate::fcrdns::{parse_time, DnsSettings, Unresolved};
    let mut resolver = Vec::new();
    for (i, r) in d.resolver.iter().flatten().enumerate() {
        let ok = r.parse::<std::net::IpAddr>().is_ok()
            || r.parse::<std::net::SocketAddr>().is_ok()
            || r.strip_prefix('[').and_then(|x| x.strip_suffix(']')).is_some_and(|x| x.parse::<std::net::Ipv6Addr>().is_ok());
        if ok {
            resolver.push(r.clone());
        } else {
            problem(
                problems,
                format!("module.dns.resolver[{i}]"),
                format!("invalid resolver \"{r}\": expected an address with an optional port, e.g. 127.0.0.1:53 or [::1]:53"),
            );
        }
    }
    let defaults = DnsSettings::default();
    let mut time = |value: &Option<String>, default: &str, path: &str, min_ms: u64| -> (String, u64) {
        let v = value.clone().unwrap_or_else(|| default.to_string());
        match parse_time(&v).filter(|ms| *ms >= min_ms) {
            Some(ms) => (v, ms),
            None => {
                problem(
                    problems,
                    format!("module.dns.{path}"),
                    format!("invalid time \"{v}\": expected e.g. 500ms, 30s, 1h or 1d, from {} to 365d", if min_ms >= 1000 { "1s" } else { "1ms" }),
                );
                (v, parse_time(default).unwrap_or(1000))
            }
        }
    };
    let (resolver_timeout, _) = time(&d.resolver_timeout, "5s", "resolver_timeout", 1);
    let (valid_verified, verified) = time(&d.valid_verified, "1d", "valid_verified", 1000);
    let (valid_spoofed, spoofed) = time(&d.valid_spoofed, "1h", "valid_spoofed", 1000);
    let (valid_unresolved, unresolved_ms) = time(&d.valid_unresolved, "1m", "valid_unresolved", 1000);
    let (stale_verified, stale_ms) = match d.stale_verified.as_deref() {
        Some("off") => ("off".to_string(), 0),
        _ => time(&d.stale_verified, "6h", "stale_verified", 1000),
    };
    let zone_size = d.zone_size.clone().unwrap_or_else(|| "1m".into());
    check_zone_size(&zone_size, "module.dns.zone_size", problems);
    let mut lookups = |v: Option<u32>, default: u32, name: &str| {
        let n = v.unwrap_or(default);
        if n == 0 {
            problem(problems, format!("module.dns.{name}"), format!("{name} must be at least 1"));
        }
        n
    };
    let max_lookups = lookups(d.max_lookups, defaults.max_lookups, "max_lookups");
    let lookups_per_address = lookups(d.lookups_per_address, defaults.lookups_per_address, "lookups_per_address");
    let lookups_per_network = lookups(d.lookups_per_network, defaults.lookups_per_network, "lookups_per_network");
    let unresolved = match d.unresolved.as_deref() {
        None => Unresolved::Unverified,
        Some(u) => Unresolved::parse(u).unwrap_or_else(|| {
            problem(problems, "module.dns.unresolved", format!("invalid value \"{u}\": expected unverified or spoofed"));
            Unresolved::Unverified
        }),
    };
    ModuleDnsV {
        resolver,
        resolver_timeout,
        zone_size,
        valid_verified,
        valid_spoofed,
        valid_unresolved,
        stale_verified,
        settings: DnsSettings {
            valid_verified: verified,
            valid_spoofed: spoofed,
            valid_unresolved: unresolved_ms,
            max_lookups,
            lookups_per_address,
            lookups_per_network,
            stale_verified: stale_ms,
        },
        unresolved,
    }
}

fn check_site(s: &model::Site, problems: &mut Vec<Problem>) -> SiteV {
    let host = match url_host(&s.canonical_url) {
        Some(h) => h,
        None => {
            problem(problems, "site.canonical_url", format!("invalid canonical_url \"{}\": expected https://host or http://host", s.canonical_url));
            String::new()
        }
    };
    let mut same_site_hosts = Vec::new();
    for (i, h) in s.same_site_hosts.iter().enumerate() {
        if valid_hostname(h) {
            same_site_hosts.push(h.to_ascii_lowercase());
        } else {
            problem(problems, format!("site.same_site_hosts[{i}]"), format!("invalid host name \"{h}\""));
        }
    }
    let mut redirect_hosts: Vec<String> = Vec::new();
    for (i, h) in s.redirect_hosts.iter().enumerate() {
        let name = h.to_ascii_lowercase();
        if !valid_hostname(h) {
            problem(problems, format!("site.redirect_hosts[{i}]"), format!("invalid host name \"{h}\""));
        } else if name == host {
            problem(problems, format!("site.redirect_hosts[{i}]"), format!("\"{h}\" is the host of canonical_url: redirecting it would loop"));
        } else if !redirect_hosts.contains(&name) {
            redirect_hosts.push(name);
        }
    }
    if same_site_hosts.is_empty() && !host.is_empty() {
        same_site_hosts.push(host);
    }
    let mut trusted_proxies = Vec::new();
    let mut trust_unix_socket = false;
    for (i, p) in s.trusted_proxies.iter().enumerate() {
        if p == "unix:" {
            trust_unix_socket = true;
            continue;
        }
        match parse_net(p) {
            Ok(n) => trusted_proxies.push(n),
            Err(e) => problem(problems, format!("site.trusted_proxies[{i}]"), e),
        }
    }
    let real_ip_header = s.real_ip_header.clone().unwrap_or_else(|| "X-Forwarded-For".into());
    if real_ip_header.is_empty() || !real_ip_header.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        problem(problems, "site.real_ip_header", format!("invalid header name \"{real_ip_header}\""));
    }
    if s.upstream_workers == 0 {
        problem(problems, "site.upstream_workers", "upstream_workers must be at least 1");
    }
    let front_controller = s.front_controller.clone().filter(|fc| match crate::app_path::front_controller_problem(fc) {
        Some(why) => {
            problem(problems, "site.front_controller", format!("\"{fc}\": expected {why}"));
            false
        }
        None => true,
    });
    SiteV {
        canonical_url: s.canonical_url.trim_end_matches('/').to_string(),
        canonical_origin: url_origin(&s.canonical_url).unwrap_or_default(),
        same_site_hosts,
        redirect_hosts,
        trusted_proxies,
        trust_unix_socket,
        real_ip_header,
        upstream_workers: s.upstream_workers,
        front_controller,
    }
}

/// Path prefixes written with the front controller's name before them, or
/// covering the name: the prefixes are matched on the path the application
/// sees, the name dropped (`app_path::prefix_problem`).
fn behind_front_controller(f: &PolicyFile, fc: &str, problems: &mut Vec<Problem>) {
    let mut lists: Vec<(String, &str)> = Vec::new();
    for (i, d) in f.machine_doors.iter().enumerate() {
        lists.push((format!("machine_doors[{i}]"), d));
    }
    if let Some(b) = &f.browse_shed {
        for (i, l) in b.locations.iter().enumerate() {
            lists.push((format!("browse_shed.locations[{i}]"), l));
        }
    }
    if let Some(r) = &f.rate_limits {
        for (c, class) in r.classes.iter().enumerate() {
            for (i, p) in class.paths.iter().enumerate() {
                lists.push((format!("rate_limits.classes[{c}].paths[{i}]"), p));
            }
        }
    }
    if let Some(a) = &f.api_tiers {
        for (i, p) in a.paths.iter().enumerate() {
            lists.push((format!("api_tiers.paths[{i}]"), p));
        }
    }
    if let Some(c) = &f.classifier {
        for (i, p) in c.auth_paths.iter().enumerate() {
            lists.push((format!("classifier.auth_paths[{i}]"), p));
        }
    }
    if let Some(req) = f.module.as_ref().and_then(|m| m.signatures.as_ref()).and_then(|s| s.required.as_ref()) {
        for (i, p) in req.iter().enumerate() {
            lists.push((format!("module.signatures.required[{i}]"), p));
        }
    }
    if let Some(prefs) = &f.preferences {
        for (i, p) in prefs.paths.iter().enumerate() {
            lists.push((format!("preferences.paths[{i}].path"), &p.path));
        }
    }
    for (i, p) in f.robots.deep_paths.iter().enumerate() {
        lists.push((format!("robots.deep_paths[{i}]"), p));
    }
    for (field, path) in lists {
        if let Some(why) = crate::app_path::prefix_problem(path, fc) {
            problem(problems, field, why);
        }
    }
}

/// `scheme://host[:port]` of an `http(s)://host[:port][/path]` URL, the
/// host lower-cased; None where [`url_host`] finds no host.
fn url_origin(url: &str) -> Option<String> {
    let host = url_host(url)?;
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let port = authority.rsplit_once(':').map(|(_, p)| p).filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    Some(match port {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

/// The host of an `http(s)://host[:port][/path]` URL, lower-cased.
pub(crate) fn url_host(url: &str) -> Option<String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\'') {
        return None;
    }
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) && !port.is_empty() => h,
        _ => authority,
    };
    valid_hostname(host).then(|| host.to_ascii_lowercase())
}

fn absolute(v: Option<&str>, default: &str, path: &str, problems: &mut Vec<Problem>) -> String {
    let v = v.unwrap_or(default);
    if !v.starts_with('/') || v.contains(['"', '\'', ';', '{', '}', '$', '\\']) || v.chars().any(char::is_whitespace) {
        problem(problems, path, format!("invalid path \"{v}\": expected an absolute path without spaces, quotes, ';', '$' or braces"));
    } else if v.split('/').any(|part| part == "." || part == "..") {
        // `crawlward check` and `render --root` put the path under a root of their own:
        // a `..` would climb out of it, onto the machine's own files
        problem(problems, path, format!("invalid path \"{v}\": expected a path without . or .. in it"));
    }
    v.to_string()
}

fn positive(v: Option<u32>, default: u32, path: &str, problems: &mut Vec<Problem>) -> u32 {
    match v {
        None => default,
        Some(0) => {
            problem(problems, path, format!("{} must be at least 1", path.rsplit('.').next().unwrap_or(path)));
            default
        }
        Some(n) => n,
    }
}

fn check_param(p: &str, path: &str, problems: &mut Vec<Problem>) -> bool {
    let ok = !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c));
    if !ok {
        problem(problems, path, format!("invalid query parameter name \"{p}\""));
    }
    ok
}

fn check_browse(b: &model::BrowseShed, site: &SiteV, doors: &[String], problems: &mut Vec<Problem>) -> Browse {
    let mut locations = Vec::new();
    if b.locations.is_empty() {
        problem(problems, "browse_shed.locations", "browse_shed needs at least one location");
    }
    for (i, l) in b.locations.iter().enumerate() {
        let path = format!("browse_shed.locations[{i}]");
        if check_path(l, &path, problems) {
            if let Some(d) = doors.iter().find(|d| l.starts_with(d.as_str()) || d.starts_with(l.as_str())) {
                problem(
                    problems,
                    path,
                    format!("\"{l}\" is both a browse location and under the machine door \"{d}\": a door is exempt from the rules a browse page gets"),
                );
            }
            locations.push(l.clone());
        }
    }
    let names: Vec<String> =
        b.facet_names.iter().enumerate().filter(|(i, n)| check_param(n, &format!("browse_shed.facet_names[{i}]"), problems)).map(|(_, n)| n.clone()).collect();
    let prefixes: Vec<String> = b
        .facet_prefixes
        .iter()
        .enumerate()
        .filter(|(i, n)| check_param(n, &format!("browse_shed.facet_prefixes[{i}]"), problems))
        .map(|(_, n)| n.clone())
        .collect();
    if names.is_empty() && prefixes.is_empty() && problems.iter().all(|p| !p.path.starts_with("browse_shed.facet")) {
        problem(problems, "browse_shed", "browse_shed needs facet_names or facet_prefixes");
    }
    let default_cap = (site.upstream_workers / 2).max(1);
    Browse {
        locations,
        facet_names: names,
        facet_prefixes: prefixes,
        crawler_max_params: positive(b.crawler_max_params, FacetGuard::default().crawler_max_params, "browse_shed.crawler_max_params", problems),
        max_facets_without_referer: {
            let n =
                positive(b.max_facets_without_referer, FacetGuard::default().max_facets_without_referer, "browse_shed.max_facets_without_referer", problems);
            if n as usize > crate::query::MAX_DISTINCT {
                problem(
                    problems,
                    "browse_shed.max_facets_without_referer",
                    format!("max_facets_without_referer must be at most {}", crate::query::MAX_DISTINCT),
                );
            }
            n
        },
        exempt_verified: b.exempt_verified.unwrap_or(false),
        max_in_flight: positive(b.max_in_flight, default_cap, "browse_shed.max_in_flight", problems),
        cap_exempt_verified: b.cap_exempt_verified.unwrap_or(true),
        retry_after: positive(b.retry_after, FacetGuard::default().retry_after, "browse_shed.retry_after", problems),
    }
}

fn check_rate(rate: &str, path: &str, problems: &mut Vec<Problem>) {
    let ok = rate.strip_suffix("r/s").or_else(|| rate.strip_suffix("r/m")).and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n >= 1);
    if !ok {
        problem(problems, path, format!("invalid rate \"{rate}\": expected e.g. 60r/m or 5r/s, at least 1"));
    }
}

fn check_rates(r: &model::RateLimits, problems: &mut Vec<Problem>) -> RateLimitsV {
    let mut classes: Vec<RateClassV> = Vec::new();
    let mut defaults = 0;
    for (i, c) in r.classes.iter().enumerate() {
        let path = format!("rate_limits.classes[{i}]");
        if !valid_class_name(&c.name) || c.name == "throttle" {
            problem(problems, format!("{path}.name"), format!("invalid class name \"{}\": use a-z, 0-9 and _ (\"throttle\" is reserved)", c.name));
        }
        if classes.iter().any(|k| k.name == c.name) {
            problem(problems, format!("{path}.name"), format!("duplicate rate class \"{}\"", c.name));
        }
        check_rate(&c.rate, &format!("{path}.rate"), problems);
        if c.paths.is_empty() {
            defaults += 1;
        }
        for (j, p) in c.paths.iter().enumerate() {
            let ppath = format!("{path}.paths[{j}]");
            if check_path(p, &ppath, problems) {
                if c.paths[..j].contains(p) {
                    problem(problems, ppath, format!("duplicate path \"{p}\" in rate class \"{}\"", c.name));
                } else if let Some(other) = classes.iter().find(|k| k.paths.contains(p)) {
                    problem(problems, ppath, format!("path \"{p}\" is in two rate classes, \"{}\" and \"{}\"", other.name, c.name));
                }
            }
        }
        classes.push(RateClassV { name: c.name.clone(), paths: c.paths.clone(), rate: c.rate.clone(), burst: c.burst.unwrap_or(0) });
    }
    if defaults != 1 {
        problem(problems, "rate_limits.classes", format!("exactly one rate class must have no paths (the default class); found {defaults}"));
    }
    let throttle = r.throttle.as_ref().map(|t| {
        check_rate(&t.rate, "rate_limits.throttle.rate", problems);
        RateClassV { name: "throttle".into(), paths: Vec::new(), rate: t.rate.clone(), burst: t.burst.unwrap_or(0) }
    });
    let zone_size = r.zone_size.clone().unwrap_or_else(|| "10m".into());
    check_zone_size(&zone_size, "rate_limits.zone_size", problems);
    RateLimitsV {
        exempt_verified: r.exempt_verified.unwrap_or(true),
        retry_after: positive(r.retry_after, 60, "rate_limits.retry_after", problems),
        zone_size,
        classes,
        throttle,
    }
}

/// The budget zone holds the catalogue's fixed slots (`budget_table::Pinned`)
/// and some room: what the module's `crawlward_budget_zone` needs (the
/// table, and 8 pages of 4k for nginx's slab pool), said before nginx -t.
/// The agents of catalogue feeds, added later, are the module's to count.
fn check_budget_room(zone_size: &str, catalogue: &crate::Catalogue, problems: &mut Vec<Problem>) {
    let Some(kib) = zone_kib(zone_size) else { return };
    // an agent with a ranges_url has its claims' slots once its ranges are read (the snapshot, a download)
    let verifiable = |a: &crate::catalogue::Agent| a.ranges_url.is_some() || a.can_be_verified();
    let slots =
        crate::budget_table::Pinned::new(catalogue.agents().iter().map(|a| (a.name.as_str(), a.ua.is_some() || a.signature_agent.is_some(), verifiable(a))))
            .keys()
            .len();
    let need = (crate::budget_table::min_bytes(slots) + 8 * 4096).div_ceil(1024) as u64;
    if kib < need {
        problem(
            problems,
            "crawl_budget.zone_size",
            format!("zone size \"{zone_size}\" is too small for the catalogue: its {slots} fixed slots need at least {need}k"),
        );
    }
}

fn check_robots(r: &model::Robots, site: &SiteV, problems: &mut Vec<Problem>) -> RobotsV {
    for (i, p) in r.disallow.iter().enumerate() {
        check_path(p, &format!("robots.disallow[{i}]"), problems);
    }
    for (i, p) in r.disallow_params.iter().enumerate() {
        let path = format!("robots.disallow_params[{i}]");
        if check_param(p, &path, problems) && r.open_params.contains(p) {
            problem(problems, path, format!("parameter \"{p}\" is both disallowed and open: pick one list"));
        }
    }
    for (i, p) in r.open_params.iter().enumerate() {
        check_param(p, &format!("robots.open_params[{i}]"), problems);
    }
    for (i, p) in r.deep_paths.iter().enumerate() {
        if let Err(e) = check_robots_pattern(p) {
            problem(problems, format!("robots.deep_paths[{i}]"), e);
        }
    }
    let sitemap = r.sitemap.clone().unwrap_or_else(|| format!("{}/sitemap.xml", site.canonical_url));
    // a sitemap derived from a bad canonical_url is that one problem, reported there
    if r.sitemap.is_some() && url_host(&sitemap).is_none() {
        problem(problems, "robots.sitemap", format!("invalid sitemap URL \"{}\"", sitemap.escape_debug()));
    }
    if let Some(c) = &r.contact {
        if c.contains(['\n', '\r']) {
            problem(problems, "robots.contact", "contact must be one line");
        }
    }
    let source = robots_source(r, problems);
    RobotsV {
        source,
        disallow: r.disallow.clone(),
        disallow_params: r.disallow_params.clone(),
        open_params: r.open_params.clone(),
        deep_paths: r.deep_paths.clone(),
        crawl_delay: r.crawl_delay,
        contact: r.contact.clone(),
        sitemap,
    }
}

/// `preferences`: the site's and each path's, over what the actions say. A
/// preference that grants what an action refuses (`train-ai: y` while
/// `ai-training` is blocked) is a contradiction, and refused.
fn check_preferences(p: Option<&model::Preferences>, identity: &Identity, problems: &mut Vec<Problem>) -> crate::preferences::Preferences {
    use crate::preferences::{content_signal, Pref, Usage};
    use crate::Purpose;
    let empty = model::Preferences::default();
    let p = p.unwrap_or(&empty);
    let action_of = |purpose: Purpose| identity.purpose_action(purpose);
    // one place's preferences (`at`: its path in the policy, with the final '.')
    let usage_of = |search: Option<&String>, train_ai: Option<&String>, at: &str, problems: &mut Vec<Problem>| {
        let mut one = |v: Option<&String>, key: &str, purpose: Purpose| {
            let v = v?;
            let Some(pref) = Pref::parse(v) else {
                problem(problems, format!("{at}{key}"), format!("{key} must be y or n, not \"{}\"", v.escape_debug()));
                return None;
            };
            if let (Pref::Yes, Action::Block(_)) = (pref, action_of(purpose)) {
                problem(
                    problems,
                    format!("{at}{key}"),
                    format!("{key}: y contradicts actions.{}, which blocks those crawlers: say n, or allow them", purpose.as_str()),
                );
            }
            Some(pref)
        };
        // in the order the reference writes them
        let train_ai = one(train_ai, "train-ai", Purpose::AiTraining);
        Usage { search: one(search, "search", Purpose::Search), train_ai }
    };
    let site = Usage::of_actions(action_of).with(usage_of(p.search.as_ref(), p.train_ai.as_ref(), "preferences.", problems));
    let mut paths = Vec::new();
    for (i, pp) in p.paths.iter().enumerate() {
        let at = format!("preferences.paths[{i}].");
        check_path(&pp.path, &format!("{at}path"), problems);
        if paths.iter().any(|(path, _)| *path == pp.path) {
            problem(problems, format!("{at}path"), format!("\"{}\" is listed twice", pp.path));
        }
        let own = usage_of(pp.search.as_ref(), pp.train_ai.as_ref(), &at, problems);
        paths.push((pp.path.clone(), site.with(own)));
    }
    paths.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    if let Some(l) = &p.license {
        if url_host(l).is_none() {
            problem(problems, "preferences.license", format!("invalid license URL \"{}\": expected https://host/path", l.escape_debug()));
        }
    }
    crate::preferences::Preferences {
        content_usage: p.content_usage != Some(false),
        site,
        paths,
        content_signal: (p.content_signal == Some(true)).then(|| content_signal(site, action_of)).flatten(),
        license: p.license.clone(),
        header: p.header == Some(true),
    }
}

fn robots_source(r: &model::Robots, problems: &mut Vec<Problem>) -> RobotsSource {
    match r.source.as_deref() {
        Some("app") => {}
        None | Some("rendered") => {
            for (key, set) in [("robots.app_url", r.app_url.is_some()), ("robots.app_timeout", r.app_timeout.is_some())] {
                if set {
                    problem(problems, key, "only used with robots.source: app (robots.txt is rendered from this policy)");
                }
            }
            return RobotsSource::Rendered;
        }
        Some(other) => {
            problem(problems, "robots.source", format!("unknown source \"{}\": expected rendered or app", other.escape_debug()));
            return RobotsSource::Rendered;
        }
    }
    let Some(url) = &r.app_url else {
        problem(
            problems,
            "robots.app_url",
            "robots.source: app needs app_url, where nginx asks the application for robots.txt (e.g. http://127.0.0.1:8080/robots.txt)",
        );
        return RobotsSource::Rendered;
    };
    if url_host(url).is_none() || url.contains(['$', ';', '{', '}', '\\', '#']) {
        problem(problems, "robots.app_url", format!("invalid URL \"{}\": expected http://host[:port]/path or https://...", url.escape_debug()));
    }
    let timeout = positive(r.app_timeout, 5, "robots.app_timeout", problems);
    let after_scheme = url.split_once("://").map_or("", |(_, rest)| rest);
    let url = if after_scheme.contains('/') { url.clone() } else { format!("{url}/robots.txt") };
    RobotsSource::App { url, timeout }
}

/// The cookie name prefix browsers keep to the host that set it, over https.
const HOST_PREFIX: &str = "__Host-";

/// Whether nginx variable `name` (with its `$`) holds something the client
/// wrote itself: a request header (`$host` is the request line's host or
/// the `Host` header), a cookie, a query argument, the request line or
/// body, or a regular expression's numbered capture (`$1`: of the URI, or
/// of whatever an `if` or a `map` matched). A request is "signed in" only
/// by what the server decided. nginx reads a variable's name in any case
/// (`$HTTP_X_ACCOUNT` is `$http_x_account`), and so does this. What a
/// `map`, `set` or named capture derives from such a variable cannot be
/// seen by its name.
pub fn client_written(name: &str) -> bool {
    let n = name.trim_start_matches('$').to_ascii_lowercase();
    let n = n.as_str();
    ["http_", "cookie_", "arg_"].iter().any(|p| n.starts_with(p))
        || !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        || [
            "args",
            "query_string",
            "request",
            "request_uri",
            "uri",
            "document_uri",
            "request_body",
            "request_method",
            "request_filename",
            "host",
            "content_type",
            "content_length",
            "proxy_add_x_forwarded_for",
            "invalid_referer",
            // the TLS handshake's server name, and what nginx cuts from the request line
            "ssl_server_name",
            "server_protocol",
            "is_args",
            "fastcgi_path_info",
        ]
        .contains(&n)
}

/// Whether a variable comes from the client's TLS certificate: nginx checks
/// a certificate against a CA under `ssl_verify_client on` and `optional`
/// (and refuses a bad one); under `optional_no_ca` any client presents any
/// certificate, and names any subject. `$ssl_client_verify` itself is
/// nginx's verdict.
pub fn from_client_certificate(name: &str) -> bool {
    let n = name.trim_start_matches('$').to_ascii_lowercase();
    n.starts_with("ssl_client_") && n != "ssl_client_verify"
}

/// The warning for a variable read from the client's certificate.
fn certificate_warning(path: String, v: &str) -> Problem {
    Problem {
        path,
        message: format!(
            "{v} is read from the client's certificate, which nginx checks under ssl_verify_client on or optional, not under optional_no_ca, where any client presents any certificate: make sure the server of these doors verifies it"
        ),
    }
}

impl Policy {
    /// What the policy allows but a sysadmin should not rely on, each with
    /// where it is and why. `crawlward check` and `render` print them;
    /// they never stop a render.
    pub fn warnings(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if let Some(b) = self.crawl_budget.as_ref().filter(|b| b.limits.verified.is_some()) {
            let path = match b.verified_end {
                Some(VerifiedEnd::For(_)) => "crawl_budget.verified_for",
                Some(VerifiedEnd::Until(_)) => "crawl_budget.verified_until",
                None => "crawl_budget.verified",
            };
            let message = match (b.verified_end, b.limits.verified_until_s) {
                (None, _) | (_, None) => Some("slows verified crawlers down with no end: Google's crawler documentation says to do this for a short time, a few hours or one to two days, or Googlebot crawls less for longer; give verified_until or verified_for".to_string()),
                (Some(VerifiedEnd::For(secs)), _) if secs > 2 * 86_400 => Some(format!("slows verified crawlers down for {}h, more than two days: Google's crawler documentation says a few hours or one to two days", secs / 3600)),
                (Some(VerifiedEnd::Until(until)), _) if until - now_epoch_s() > 2 * 86_400 => Some("ends more than two days from now: Google's crawler documentation says to slow Googlebot down for a few hours or one to two days".to_string()),
                _ => None,
            };
            if let Some(message) = message {
                out.push(Problem { path: path.into(), message });
            }
        }
        if let Some(b) = &self.crawl_budget {
            for (i, v) in b.signed_in.iter().enumerate() {
                if client_written(v) {
                    out.push(Problem {
                        path: format!("crawl_budget.signed_in[{i}]"),
                        message: format!(
                            "{v} is written by the client: any client that sends one skips every crawl budget; mark signed-in requests with what the server decided, e.g. $remote_user after auth_basic or auth_jwt, a variable set from auth_request, or a cookie the application signs and nginx checks"
                        ),
                    });
                } else if from_client_certificate(v) {
                    out.push(certificate_warning(format!("crawl_budget.signed_in[{i}]"), v));
                }
            }
        }
        if let Some(a) = &self.api_tiers {
            for c in &a.key_conflicts {
                out.push(Problem { path: "api_tiers.keys".into(), message: c.clone() });
            }
            for (i, v) in a.account.iter().enumerate() {
                if client_written(v) {
                    out.push(Problem {
                        path: format!("api_tiers.account[{i}]"),
                        message: format!(
                            "{v} is written by the client: any client can name any account and spend another's quota; take the account from what the server checked, e.g. $remote_user after auth_basic or auth_jwt, a variable set from auth_request, or api_tiers.keys"
                        ),
                    });
                } else if from_client_certificate(v) {
                    out.push(certificate_warning(format!("api_tiers.account[{i}]"), v));
                }
            }
            if let Some(v) = a.tier.as_ref().filter(|v| from_client_certificate(v)) {
                out.push(certificate_warning("api_tiers.tier".into(), v));
            }
            if let Some(v) = a.tier.as_ref().filter(|v| client_written(v)) {
                out.push(Problem {
                    path: "api_tiers.tier".into(),
                    message: format!(
                        "{v} is written by the client: any client can pick the largest tier; name the tier from what the server checked, or in the keys file"
                    ),
                });
            }
            if a.account_names_folded && a.account.is_empty() {
                out.push(Problem {
                    path: "api_tiers.account_names".into(),
                    message: "folded has no effect without account variables: the keys file's accounts are kept as it names them".into(),
                });
            }
            if a.account.iter().any(|v| v.eq_ignore_ascii_case("$remote_user")) {
                out.push(Problem {
                    path: "api_tiers.account".into(),
                    message: "$remote_user is what the client's Authorization header says unless auth_basic or auth_jwt checks it where the doors are: make sure it does, or any client names any account".into(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{client_written, from_client_certificate};

    #[test]
    fn a_client_written_variable_is_found_in_any_case() {
        for v in ["$http_x_account", "$HTTP_X_ACCOUNT", "$Arg_tier", "$COOKIE_session", "$Request_URI", "$args"] {
            assert!(client_written(v), "{v}");
        }
        // the Host, the body's headers, a capture, what X-Forwarded-For and Referer make
        for v in ["$host", "$Host", "$content_type", "$content_length", "$1", "$10", "$proxy_add_x_forwarded_for", "$invalid_referer", "$request_method"] {
            assert!(client_written(v), "{v}");
        }
        // the TLS server name the client sent, and the parts of its request line
        for v in ["$ssl_server_name", "$server_protocol", "$is_args", "$fastcgi_path_info"] {
            assert!(client_written(v), "{v}");
        }
        for v in ["$remote_user", "$REMOTE_USER", "$ssl_client_s_dn", "$jwt_claim_sub", "$server_name", "$remote_addr", "$", "$hostname"] {
            assert!(!client_written(v), "{v}");
        }
    }

    #[test]
    fn a_certificate_s_fields_are_told_apart_from_nginx_s_verdict_on_it() {
        for v in ["$ssl_client_s_dn", "$SSL_CLIENT_S_DN", "$ssl_client_serial", "$ssl_client_fingerprint", "$ssl_client_escaped_cert"] {
            assert!(from_client_certificate(v), "{v}");
        }
        for v in ["$ssl_client_verify", "$remote_user", "$ssl_server_name", "$ssl_cipher"] {
            assert!(!from_client_certificate(v), "{v}");
        }
    }
}
