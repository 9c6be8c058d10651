//! The policy file as written: the serde shape of the YAML, before validation.
//!
//! Everything here is plain data. [`crate::validate`] turns a [`PolicyFile`]
//! into a [`crate::Policy`], collecting every problem with its path.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One crawlward policy: everything confgen renders for one site.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// The site this policy protects.
    pub site: Site,
    /// Where the rendered files are installed and where nginx writes.
    #[serde(default)]
    pub install: Install,
    /// The crawler catalogue: the built-in agents plus your additions and overrides.
    #[serde(default)]
    pub catalogue: CatalogueSection,
    /// What happens to each purpose of crawler, and to the special classes
    /// `empty` (no User-Agent) and `spoofed` (claims an agent, comes from outside its ranges).
    #[serde(default)]
    pub actions: Actions,
    /// Status for `block`: 444 (close the connection without a reply) or 403.
    #[serde(default)]
    pub block_status: Option<u16>,
    /// Routes meant for scripts (API, OAI-PMH, ResourceSync, sitemap). robots.txt is always one.
    #[serde(default)]
    pub machine_doors: Vec<String>,
    /// The facet guard and the global in-flight cap on browse pages.
    #[serde(default)]
    pub browse_shed: Option<BrowseShed>,
    /// Per-address request rate classes (`limit_req`).
    #[serde(default)]
    pub rate_limits: Option<RateLimits>,
    /// Crawl budgets per address, agent and all crawlers (the forge's crawl-budget review). Needs the module.
    #[serde(default)]
    pub crawl_budget: Option<CrawlBudget>,
    /// API quotas per account and tier (heratio.org's layer 4). Needs the module.
    #[serde(default)]
    pub api_tiers: Option<ApiTiers>,
    /// robots.txt.
    pub robots: Robots,
    /// Maintenance mode: a flag file turns every page into 503 but robots.txt.
    #[serde(default)]
    pub maintenance: Option<Maintenance>,
    /// The site's preferences for the use of its content (AI training,
    /// search), as robots.txt and the responses say them. Default: derived
    /// from `actions`.
    #[serde(default)]
    pub preferences: Option<Preferences>,
    /// Use ngx_http_crawlward_module (loaded with `load_module`) for identification,
    /// verification and counters instead of the stock-nginx maps.
    #[serde(default)]
    pub module: Option<Module>,
    /// `crawlward analyze`: the proportional classifier (route table,
    /// weights, cut points, ladder). Defaults are the classifier article's.
    #[serde(default)]
    pub classifier: Option<Classifier>,
}

/// The proportional classifier: `crawlward analyze` runs it on a log, and
/// with a `module:` section nginx runs it on every request (the ladder).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Classifier {
    /// The aggregation window per client, e.g. `24h` (s, m, h, d). Default `24h`.
    #[serde(default)]
    pub window: Option<String>,
    /// Path prefixes of the authentication routes (login, session, account
    /// endpoints): the route table. Default: none.
    #[serde(default)]
    pub auth_paths: Vec<String>,
    /// A client with at least this share of requests on `auth_paths` goes to
    /// account controls, off the crawler ladder. Default 0.50.
    #[serde(default)]
    pub auth_floor: Option<f64>,
    /// How many declared rules a client is expected to honour. Default 4.
    #[serde(default)]
    pub rules_expected: Option<f64>,
    /// Requests per minute over the window. Default weight 0.28, from 4 to 30.
    #[serde(default)]
    pub rate: Option<SubScore>,
    /// Distinct paths per request. Default weight 0.22, from 0.25 to 0.90.
    #[serde(default)]
    pub novelty: Option<SubScore>,
    /// Entropy in bits over the busiest paths. Default weight 0.10, from 1.40 to 3.40.
    #[serde(default)]
    pub concentration: Option<SubScore>,
    /// 1 - the share of the most used User-Agent family. Default weight 0.16, from 0.02 to 0.47.
    #[serde(default, rename = "ua-spread")]
    pub ua_spread: Option<SubScore>,
    /// Half the busiest session's share of requests (from 0.90 to 0.99), half
    /// the share of sessions seen from more than one address (from 0 to 1). Default weight 0.14.
    #[serde(default)]
    pub session: Option<SessionScore>,
    /// Honoured rules / rules_expected. Default weight 0.10, from 0.75 to 0.
    #[serde(default)]
    pub rules: Option<SubScore>,
    /// The ceilings of L0 to L5 (a score below a ceiling lands on that rung;
    /// past L5's, L6). Default [0.16, 0.30, 0.45, 0.60, 0.75, 0.88].
    #[serde(default)]
    pub ladder: Option<Vec<f64>>,
    /// The ladder in nginx (a policy with a `module:` section): `observe`
    /// (score, place and log every client, refuse nothing), `enforce` (each
    /// rung answers as below) or `off`. Default `observe`.
    #[serde(default)]
    pub mode: Option<String>,
    /// The ladder zone (`crawlward_ladder zone=crawlward_ladder:SIZE`), about
    /// 1 kB a client. Default `10m`.
    #[serde(default)]
    pub zone_size: Option<String>,
    /// L2's token bucket per client. Default burst 60, rate 1r/s.
    #[serde(default)]
    pub bucket: Option<BucketSpec>,
    /// The tighter bucket of a challenge rung that says `slow`. Default burst 10, rate 6r/m.
    #[serde(default)]
    pub slow: Option<BucketSpec>,
    /// What L3, L4 and L5 answer, since crawlward serves no challenge: `pass`
    /// (with `$crawlward_rung` for the application), `slow` or `refuse`
    /// (429). Default pass, slow, refuse.
    #[serde(default)]
    pub challenges: Option<Challenges>,
    /// Retry-After of a challenge rung that refuses, in seconds. Default 60.
    #[serde(default)]
    pub retry_after: Option<u32>,
    /// The signed session cookie that identifies a client without JavaScript.
    #[serde(default)]
    pub cookie: Option<CookieSpec>,
    /// The application's own session cookie, e.g. `sessionid`: the session
    /// signal, and the client key when crawlward's cookie is off.
    #[serde(default)]
    pub session_cookie: Option<String>,
    /// The request header that tells the application a request's rung, so
    /// that it can act on a `pass` rung (ask for a sign-in, serve a lighter
    /// page): in enforce mode nginx sets it on every request the ladder
    /// placed, over any copy the client sent, and `proxy_pass`,
    /// `fastcgi_pass` and the other upstream modules pass it on. A client's
    /// copy is emptied on every request, wherever the ladder does not set it.
    /// `Crawlward-` or `X-` and a name nothing else reads. Default
    /// `Crawlward-Rung`; `off` for none.
    #[serde(default)]
    pub rung_header: Option<String>,
    /// The limit of a routed (authentication-shaped) client, per network
    /// (/24, /48). Default burst 5, rate 10r/m.
    #[serde(default)]
    pub account_route: Option<BucketSpec>,
    /// Every tracked request's bucket per network (/24, /48): the coarse
    /// abuse backstop for clients that make a new key every request (no
    /// cookie kept, a new address or User-Agent each time). Default burst
    /// 600, rate 20r/s.
    #[serde(default)]
    pub backstop: Option<BucketSpec>,
}

/// A token bucket: how many requests at once, and how fast it refills.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BucketSpec {
    #[serde(default)]
    pub burst: Option<u32>,
    /// e.g. `1r/s` or `6r/m`.
    #[serde(default)]
    pub rate: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Challenges {
    #[serde(default, rename = "L3")]
    pub l3: Option<String>,
    #[serde(default, rename = "L4")]
    pub l4: Option<String>,
    #[serde(default, rename = "L5")]
    pub l5: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CookieSpec {
    /// Issue the cookie. Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Default `crawlward`.
    #[serde(default)]
    pub name: Option<String>,
    /// How long a cookie is valid, e.g. `30d`. Default `30d`.
    #[serde(default)]
    pub lifetime: Option<String>,
    /// The HMAC keys, one a line: the first signs, every one verifies (add
    /// the new key on top to rotate). Default `/etc/crawlward/cookie.key`.
    #[serde(default)]
    pub key_file: Option<String>,
}

/// One sub-score: its weight, and where it starts (0) and saturates (1).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubScore {
    #[serde(default)]
    pub weight: Option<f64>,
    /// The value at which the signal stops being ordinary (sub-score 0).
    #[serde(default)]
    pub from: Option<f64>,
    /// The value at which it is a population outlier (sub-score 1).
    #[serde(default)]
    pub to: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionScore {
    #[serde(default)]
    pub weight: Option<f64>,
    /// The busiest session's share of requests.
    #[serde(default)]
    pub reuse: Option<CutPoints>,
    /// The share of sessions seen from more than one address.
    #[serde(default)]
    pub cross_ip: Option<CutPoints>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CutPoints {
    /// The value at which the signal stops being ordinary (0).
    #[serde(default)]
    pub from: Option<f64>,
    /// The value at which it saturates (1).
    #[serde(default)]
    pub to: Option<f64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Module {
    /// Render the module's directives. Default true once the section is present.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// The counters zone (`crawlward_zone zone=crawlward:SIZE`). Default `1m`.
    #[serde(default)]
    pub zone_size: Option<String>,
    /// Decide, count and log, but refuse nothing (`crawlward_dry_run on`). Default false.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// An exact location for the status endpoint (`crawlward_status`), e.g. `/crawlward-status`.
    #[serde(default)]
    pub status: Option<String>,
    /// Addresses or networks allowed to read the status endpoint. Default 127.0.0.1 and ::1.
    #[serde(default)]
    pub status_allow: Option<Vec<String>>,
    /// Forward-confirmed reverse DNS for agents with `rdns_suffixes` whose
    /// published ranges (if any) do not cover the client (`crawlward_dns_cache`).
    /// Off without this section.
    #[serde(default)]
    pub dns: Option<ModuleDns>,
    /// Web Bot Auth: check the HTTP message signatures of agents that sign
    /// their requests (`crawlward_signatures`), with the keys `crawlward
    /// update-ranges` fetches from their directories. Off without this section.
    #[serde(default)]
    pub signatures: Option<ModuleSignatures>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModuleSignatures {
    /// How far a signature's `created` and `expires` may be off this server's clock. Default `60s`, at most `300s`.
    #[serde(default)]
    pub skew: Option<String>,
    /// Key directories to fetch besides those the catalogue's agents name
    /// (`https://origin`): their signatures verify, and name no agent.
    #[serde(default)]
    pub directories: Option<Vec<String>>,
    /// Path prefixes only signed agents may use: a request there without a
    /// verified signature gets 403 with `Accept-Signature`. robots.txt and
    /// `/.well-known/http-message-signatures-directory` always answer.
    #[serde(default)]
    pub required: Option<Vec<String>>,
    /// Refuse a replayed signature (429 with `Accept-Signature`): the size of
    /// the zone that remembers each verified signature's nonce until it
    /// expires (16 bytes a nonce), e.g. `1m`. Off without it.
    #[serde(default)]
    pub replay_zone: Option<String>,
    /// The host names this site's signatures are made for (`@authority`,
    /// without the port): a signature that verifies but was made for another
    /// host is `invalid`, a request meant for another site replayed here.
    /// Default: the canonical URL's host and `site.same_site_hosts`.
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
    /// How many signatures from one client address (an IPv6 /64) may fail
    /// to verify in a minute, in each nginx worker, before the rest of that
    /// minute's from it are not checked: each failure costs a verification
    /// (about 600,000 instructions, some forty requests' worth). Not checked
    /// is `unverified`, never `invalid`. Default 10; 0: check every one.
    #[serde(default)]
    pub failures_per_minute: Option<u16>,
    /// Let `crawlward update-ranges` fetch key directories that signed
    /// requests here but that nothing names, from the module's count of them
    /// in its status endpoint. Their signatures then verify and name no
    /// agent, and open no `required` path. Off without it: any client can name
    /// any directory, so this is the sysadmin's choice.
    #[serde(default)]
    pub fetch_seen: Option<FetchSeen>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchSeen {
    /// The module's status endpoint (`http://127.0.0.1/crawlward-status`),
    /// from which each run reads the busiest unknown directories.
    pub status: String,
    /// Directories taken from traffic at a time (1 to 16), each kept 30 days.
    /// Default 4. Past it, the run names the ones it left out.
    #[serde(default)]
    pub max: Option<u16>,
    /// Signed requests a directory must have made first. Default 100.
    #[serde(default)]
    pub min_requests: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModuleDns {
    /// DNS servers for nginx's `resolver` directive (`127.0.0.1`, `127.0.0.1:5353`, `[::1]:53`).
    /// Without it, the nginx configuration must set `resolver` itself.
    #[serde(default)]
    pub resolver: Option<Vec<String>>,
    /// nginx's `resolver_timeout`: the longest a request waits for its verdict. Default `5s`.
    #[serde(default)]
    pub resolver_timeout: Option<String>,
    /// Size of the verdict cache zone (`zone=crawlward_dns:SIZE`). Default `1m` (about 17,000 addresses).
    #[serde(default)]
    pub zone_size: Option<String>,
    /// How long a verified verdict is cached. Default `1d`.
    #[serde(default)]
    pub valid_verified: Option<String>,
    /// How long a spoofed verdict is cached. Default `1h`.
    #[serde(default)]
    pub valid_spoofed: Option<String>,
    /// How long an unresolved verdict (timeout, SERVFAIL) is cached. Default `1m`.
    #[serde(default)]
    pub valid_unresolved: Option<String>,
    /// How long past its expiry a verified verdict still holds while the lookups
    /// that would renew it fail (a timeout, SERVFAIL, REFUSED or any other
    /// error) or cannot start (`max_lookups`): a DNS outage leaves the crawlers
    /// it confirmed verified. A time, or `off`. Default `6h`.
    #[serde(default)]
    pub stale_verified: Option<String>,
    /// Lookups in flight at once, all workers; past it a claim counts as unresolved. Default 64.
    #[serde(default)]
    pub max_lookups: Option<u32>,
    /// Of those, at most this many for one client address (an IPv6 /64). Default 2.
    #[serde(default)]
    pub lookups_per_address: Option<u32>,
    /// Of those, at most this many for one network (an IPv4 /24, an IPv6 /48). Default 8.
    #[serde(default)]
    pub lookups_per_network: Option<u32>,
    /// What an unresolved claim counts as: `unverified` (default: budgeted, not
    /// blocked) or `spoofed` (fail closed).
    #[serde(default)]
    pub unresolved: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Public address of the site, e.g. `https://heratio.org`. The sitemap line is built from it.
    pub canonical_url: String,
    /// Host names whose Referer counts as "from the site itself" (exact host match).
    #[serde(default)]
    pub same_site_hosts: Vec<String>,
    /// Other host names of the site (a `www.` address, an old domain): each
    /// answers one 301 to the canonical URL's scheme and host, path and query
    /// kept, before any other rule.
    #[serde(default)]
    pub redirect_hosts: Vec<String>,
    /// Addresses or networks of reverse proxies whose forwarded client address is trusted (`set_real_ip_from`), or `unix:` for one in front on a unix socket.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Header carrying the client address from trusted proxies (`real_ip_header`). Default `X-Forwarded-For`.
    #[serde(default)]
    pub real_ip_header: Option<String>,
    /// Number of upstream workers (e.g. PHP-FPM `pm.max_children`). The browse cap defaults to half of it.
    pub upstream_workers: u32,
    /// The application's front controller, e.g. `/index.php`, when it answers
    /// `/index.php/glam/browse` as it answers `/glam/browse` (Laravel,
    /// Symfony, AtoM): every path prefix of the policy is then matched with
    /// that name dropped, so that writing it skips no layer. Default: none.
    #[serde(default)]
    pub front_controller: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Install {
    /// Directory the rendered files are installed in (robots.txt is served from here).
    /// Default `/etc/nginx/crawlward`.
    #[serde(default)]
    pub dir: Option<String>,
    /// Access log for requests refused with 429 or shed with 503.
    /// Default `/var/log/nginx/crawlward-throttled.log`.
    #[serde(default)]
    pub throttle_log: Option<String>,
    /// The site's access log, in the `crawlward_combined` format that
    /// `crawlward analyze` reads: written by the server snippet for every
    /// request. Default: none (the snippet writes no access log of the site).
    #[serde(default)]
    pub access_log: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogueSection {
    /// Start from the catalogue shipped with crawlward. Default true.
    #[serde(default = "yes")]
    pub builtin: bool,
    /// Agents to add (a new name; tried before the built-in ones) or to override
    /// (an existing name; only the fields given change).
    #[serde(default)]
    pub agents: Vec<AgentSpec>,
    /// Where `crawlward update-ranges` keeps the operators' range files.
    /// Default `/var/lib/crawlward/ranges`.
    #[serde(default)]
    pub ranges_dir: Option<String>,
    /// Public lists of crawlers that `crawlward update-ranges` also downloads,
    /// each kept in `ranges_dir`: their agents join the catalogue, and never
    /// change an agent it already has.
    #[serde(default)]
    pub feeds: Vec<FeedSpec>,
}

impl Default for CatalogueSection {
    fn default() -> Self {
        CatalogueSection { builtin: true, agents: Vec::new(), ranges_dir: None, feeds: Vec::new() }
    }
}

/// A catalogue feed: ai.robots.txt's robots.json, or a crawler list
/// (`version`, `agents` with `ua` expressions and `ranges`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedSpec {
    /// Where the list is published (http or https).
    pub url: String,
    /// The purpose of an ai.robots.txt entry whose function says neither AI
    /// search nor a user's assistant. Default ai-training.
    #[serde(default)]
    pub purpose: Option<String>,
}

fn yes() -> bool {
    true
}

/// One agent of the catalogue, as written (built-in data or policy additions).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Unique name, `[A-Za-z0-9._-]`; it appears in nginx variables and logs.
    pub name: String,
    /// Who runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// search, ai-search, ai-user, ai-training, seo, archive, preview, feed, monitor,
    /// research, scanner, scripting, automation or crawler (unknown-bot: the
    /// catalogue's entry for the bots it does not name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Regular expression matched case-insensitively against the User-Agent (first match wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ua: Option<String>,
    /// A robots.txt token only, never sent as a User-Agent (Google-Extended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robots_only: Option<bool>,
    /// Token for robots.txt `User-agent:` lines. Default: the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robots_token: Option<String>,
    /// The operator's published IP-range file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges_url: Option<String>,
    /// Published networks of this agent (CIDR). A claim from outside them is `spoofed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Vec<String>>,
    /// When the ranges were published or fetched (set in the rendered catalogue file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges_as_of: Option<String>,
    /// Documented reverse-DNS hostname suffixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdns_suffixes: Option<Vec<String>>,
    /// The agent's Web Bot Auth key directory, an `https://` origin
    /// (`https://chatgpt.com`): a request its key signed is this agent, verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_agent: Option<String>,
    /// Where the facts about this agent come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The built-in catalogue data file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueFile {
    pub agents: Vec<AgentSpec>,
}

/// Action per purpose. Each value is `allow`, `block` (with `block_status`),
/// `block-403`, `block-444` or `throttle` (the strict rate class).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Actions {
    // one field per purpose, in `Purpose::ALL`'s order (`Actions::of`), then empty and spoofed
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ai-search")]
    pub ai_search: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ai-user")]
    pub ai_user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ai-training")]
    pub ai_training: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub research: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scripting: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crawler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "unknown-bot")]
    pub unknown_bot: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoofed: Option<String>,
}

impl Actions {
    /// The policy's action for a purpose, as written.
    pub fn of(&mut self, purpose: crate::Purpose) -> &mut Option<String> {
        use crate::Purpose::*;
        match purpose {
            Search => &mut self.search,
            AiSearch => &mut self.ai_search,
            AiUser => &mut self.ai_user,
            AiTraining => &mut self.ai_training,
            Seo => &mut self.seo,
            Archive => &mut self.archive,
            Preview => &mut self.preview,
            Feed => &mut self.feed,
            Monitor => &mut self.monitor,
            Research => &mut self.research,
            Scanner => &mut self.scanner,
            Scripting => &mut self.scripting,
            Automation => &mut self.automation,
            Crawler => &mut self.crawler,
            UnknownBot => &mut self.unknown_bot,
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowseShed {
    /// Path prefixes of the browse pages.
    pub locations: Vec<String>,
    /// Query parameters that are facets: exact names.
    #[serde(default)]
    pub facet_names: Vec<String>,
    /// Query parameters that are facets: name prefixes.
    #[serde(default)]
    pub facet_prefixes: Vec<String>,
    /// A crawler User-Agent with this many query parameters or more gets 429. Default 4.
    #[serde(default)]
    pub crawler_max_params: Option<u32>,
    /// This many facets or more without a same-site Referer gets 429. Default 2.
    #[serde(default)]
    pub max_facets_without_referer: Option<u32>,
    /// Whether crawlers verified by their published ranges skip the facet rules. Default false.
    #[serde(default)]
    pub exempt_verified: Option<bool>,
    /// Requests in flight on browse pages across the whole site; 503 past it. Default: half the upstream workers.
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// Whether verified crawlers are left out of the browse cap (they neither take a place
    /// nor get its 503, so a flood of browse pages cannot make them see one). Default true.
    #[serde(default)]
    pub cap_exempt_verified: Option<bool>,
    /// Retry-After seconds on the facet guard's 429 and the cap's 503. Default 30.
    #[serde(default)]
    pub retry_after: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlBudget {
    /// The budget zone (`crawlward_budget_zone zone=crawlward_budget:SIZE`). Default `10m`.
    #[serde(default)]
    pub zone_size: Option<String>,
    /// Per client address (IPv6 by /64): `general,deep`, e.g. `60r/m,6r/m` (r/s, r/m, r/h, r/d). Default `60r/m,6r/m`.
    #[serde(default)]
    pub address: Option<String>,
    /// Per agent name, a second cap: `general,deep`. Default `120r/m,12r/m`.
    #[serde(default)]
    pub agent: Option<String>,
    /// All counted crawlers together: `general,deep`. Default `240r/m,24r/m`.
    /// Verified crawlers are not part of it, so nothing they do not send can spend it for them.
    #[serde(default)]
    pub shared: Option<String>,
    /// Verified crawlers (by published ranges or reverse DNS), per agent name: `general,deep`,
    /// e.g. `600r/m,60r/m` to slow Googlebot down on purpose. Default: not counted.
    #[serde(default)]
    pub verified: Option<String>,
    /// When the verified budget ends, as an RFC 3339 time (`2026-12-07T06:00:00Z`): a slowdown
    /// used on purpose is meant for a few hours or a day or two. After it, verified crawlers are
    /// no longer counted.
    #[serde(default)]
    pub verified_until: Option<String>,
    /// How long the verified budget lasts (`36h`, `2d`), from the policy file's last change.
    #[serde(default)]
    pub verified_for: Option<String>,
    /// Agent names kept apart; past it, new names count as `other`. Default 256.
    #[serde(default)]
    pub agents: Option<u32>,
    /// Variables that mark a signed-in request (never counted) when not empty. They must be
    /// set by the server from a checked identity (`$remote_user` after `auth_basic`, a variable
    /// from `auth_request`): a raw header or cookie lets any client skip the budgets, and
    /// `crawlward check` warns about it. Default: none (every crawler request is counted).
    #[serde(default)]
    pub signed_in: Option<Vec<String>>,
    /// Event-loop lag above which every budget shrinks (`50ms`), or `off`. Default `50ms`.
    #[serde(default)]
    pub lag: Option<String>,
    /// What every budget is divided by while the event loop is late. Default 4.
    #[serde(default)]
    pub shrink: Option<u32>,
    /// Several nginx nodes sharing these budgets through Valkey or Redis. Default: none
    /// (each node its own budgets).
    #[serde(default)]
    pub sync: Option<BudgetSync>,
}

/// `api_tiers`: quotas per account on the metered doors.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiTiers {
    /// The metered doors: path prefixes of `$uri` (e.g. `/api/v2/`).
    pub paths: Vec<String>,
    /// Variables that hold the account, set by the server from a checked identity
    /// (`$remote_user` after `auth_basic` or `auth_jwt`, a variable from `auth_request_set`):
    /// the first not empty is the account. `crawlward check` warns about one the client writes.
    #[serde(default)]
    pub account: Vec<String>,
    /// How the accounts of `account` are compared: `exact` (the default, byte for byte, as
    /// nginx's auth_basic compares user names) or `folded` (ASCII case and spaces ignored, as a
    /// directory that ignores them compares names: `ACME`, ` acme` and `acme` one account).
    #[serde(default)]
    pub account_names: Option<String>,
    /// A variable naming the tier of an account the keys file gives none (a listed key's tier
    /// comes first); else `default`.
    #[serde(default)]
    pub tier: Option<String>,
    /// The keys file: hashed API keys to accounts and tiers (relative to the policy file).
    #[serde(default)]
    pub keys: Option<String>,
    /// The request header a client sends its key in. Default `X-API-Key`.
    #[serde(default)]
    pub key_header: Option<String>,
    /// The tier of an account with none named. Default: the first.
    #[serde(default)]
    pub default: Option<String>,
    /// The quota zone. Default `1m`.
    #[serde(default)]
    pub zone_size: Option<String>,
    /// The tiers, each with its hourly and optional daily limit.
    pub tiers: Vec<TierSpec>,
}

/// One tier of `api_tiers`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// `a-z`, `0-9`, `_` and `-`, up to 32.
    pub name: String,
    /// Requests an hour per account. Default 1000.
    #[serde(default)]
    pub hourly: Option<u32>,
    /// Requests a day per account. Default: none.
    #[serde(default)]
    pub daily: Option<u32>,
}

/// `crawl_budget.sync`: the store the nodes share their counts through.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetSync {
    /// `valkey://host:port[/db]` (or `redis://`); a host name is resolved when nginx reads
    /// its configuration. No password: keep the store on a private network.
    pub store: String,
    /// Nodes sharing the budgets: while the store does not answer, each node keeps its own
    /// budgets divided by it.
    pub nodes: u32,
    /// How often each node sends its new counts and reads the cluster's. Default `100ms`.
    #[serde(default)]
    pub interval: Option<String>,
    /// How long a round trip to the store may take before the node falls back. Default `1s`.
    #[serde(default)]
    pub timeout: Option<String>,
    /// The browse cap (`browse_shed`) counts the requests in flight on every node, shared
    /// through the store (the module's `crawlward_browse_cap`), instead of each node keeping
    /// its own (`limit_conn`). Default false.
    #[serde(default)]
    pub browse_cap: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    /// Clients verified by their published ranges are not rate-limited (an empty key). Default true.
    #[serde(default)]
    pub exempt_verified: Option<bool>,
    /// Retry-After seconds on a 429 from a rate class. Default 60.
    #[serde(default)]
    pub retry_after: Option<u32>,
    /// Shared memory per class zone, e.g. `10m`. Default `10m`.
    #[serde(default)]
    pub zone_size: Option<String>,
    /// The classes. Exactly one has no `paths`: the default class.
    pub classes: Vec<RateClass>,
    /// The class for agents whose action is `throttle` (and spoofed ones, if so set).
    #[serde(default)]
    pub throttle: Option<RateSpec>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateClass {
    /// `[a-z0-9_]`; the zone is named `crawlward_<name>`.
    pub name: String,
    /// Path prefixes; the longest matching prefix of all classes picks the class.
    #[serde(default)]
    pub paths: Vec<String>,
    /// e.g. `60r/m` or `5r/s`.
    pub rate: String,
    /// Requests allowed above the rate at once (`burst`, served without delay). Default 0.
    #[serde(default)]
    pub burst: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateSpec {
    pub rate: String,
    #[serde(default)]
    pub burst: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Robots {
    /// Path prefixes disallowed for every crawler.
    #[serde(default)]
    pub disallow: Vec<String>,
    /// Query parameters whose variants are disallowed (`sort`, `sf_culture`, `view`).
    #[serde(default)]
    pub disallow_params: Vec<String>,
    /// Query parameters that must stay open (pagination). Listed for validation: none may be disallowed.
    #[serde(default)]
    pub open_params: Vec<String>,
    /// Expensive deep paths, robots.txt patterns (`*` wildcard, `$` end). One list: robots.txt
    /// disallows them and the module's crawl budget counts them as deep.
    #[serde(default)]
    pub deep_paths: Vec<String>,
    /// `Crawl-delay` seconds for the `*` group.
    #[serde(default)]
    pub crawl_delay: Option<u32>,
    /// How to reach a person (a URL or mailto:), written as a comment line.
    #[serde(default)]
    pub contact: Option<String>,
    /// Sitemap URL. Default: `<canonical_url>/sitemap.xml`.
    #[serde(default)]
    pub sitemap: Option<String>,
    /// Who writes robots.txt: `rendered` (default: crawlward renders it from
    /// this section) or `app` (the application: nginx proxies robots.txt to
    /// `app_url`, keeps the last good answer on disk and serves that copy, or
    /// the rendered one, whenever the application cannot answer).
    #[serde(default)]
    pub source: Option<String>,
    /// With `source: app`: where nginx asks for the application's robots.txt,
    /// e.g. `http://127.0.0.1:8080/robots.txt`.
    #[serde(default)]
    pub app_url: Option<String>,
    /// With `source: app`: seconds nginx waits for the application to connect
    /// and to answer before it serves the kept copy. Default 5.
    #[serde(default)]
    pub app_timeout: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Preferences {
    /// Whether robots.txt says the preferences in `Content-Usage:` lines
    /// (draft-ietf-aipref-attach). Default true.
    #[serde(default)]
    pub content_usage: Option<bool>,
    /// `y` or `n`: whether the content may be used to train AI models.
    /// Default: `n` when `actions` blocks `ai-training`, else nothing said.
    #[serde(default, rename = "train-ai")]
    pub train_ai: Option<String>,
    /// `y` or `n`: whether the content may be used for search. Default: `y`
    /// when `actions` allows `search`, `n` when it blocks it.
    #[serde(default)]
    pub search: Option<String>,
    /// Path prefixes with their own preferences, over the site's.
    #[serde(default)]
    pub paths: Vec<PathPreference>,
    /// Also write Cloudflare's `Content-Signal:` line (search, ai-input,
    /// ai-train). Default false.
    #[serde(default)]
    pub content_signal: Option<bool>,
    /// A `License:` line (RSL): the URL of the site's licence terms.
    #[serde(default)]
    pub license: Option<String>,
    /// Add a `Content-Usage` header to every response. Default false.
    #[serde(default)]
    pub header: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathPreference {
    /// A path prefix, as `robots.disallow` writes them.
    pub path: String,
    /// `y` or `n`, over the site's `train-ai`.
    #[serde(default, rename = "train-ai")]
    pub train_ai: Option<String>,
    /// `y` or `n`, over the site's `search`.
    #[serde(default)]
    pub search: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Maintenance {
    /// While this file exists, every page answers 503 but robots.txt.
    pub flag_file: String,
    /// Retry-After seconds on the maintenance 503. Default 300.
    #[serde(default)]
    pub retry_after: Option<u32>,
}
