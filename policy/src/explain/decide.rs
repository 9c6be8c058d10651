//! The decisions: one implementation, used by `crawlward explain` directly
//! and by `crawlward render`, which enumerates them into nginx `map` tables
//! so that stock nginx decides exactly as this code does.

use crate::{Action, Door, Policy, Purpose, Rule, Verdict};
use regex::bytes::{Regex, RegexBuilder};
use std::fmt::Write;
use std::net::IpAddr;

pub use crate::query::FacetSubject;

impl Policy {
    /// Who the facet guard sees for a verdict.
    pub fn facet_subject(&self, verdict: Verdict) -> FacetSubject {
        FacetSubject::of(verdict, self.browse.as_ref().is_some_and(|b| b.exempt_verified))
    }

    /// The facet guard (heratio.org's guide, layer 2) given what the request
    /// shows: [`crate::query::facet_rule`] on browse pages of a policy with
    /// `browse_shed`.
    pub fn facet_rule(&self, browse: bool, subject: FacetSubject, params_over: bool, facets_over: bool, same_site: bool) -> Option<Rule> {
        if !browse || self.browse.is_none() {
            return None;
        }
        crate::query::facet_rule(subject, params_over, facets_over, same_site)
    }

    /// The facet guard as the module runs it (parsed query and Referer), from browse_shed.
    pub fn facet_guard(&self) -> Option<crate::query::FacetGuard> {
        let b = self.browse.as_ref()?;
        Some(crate::query::FacetGuard {
            facets: crate::query::FacetNames {
                names: b.facet_names.iter().map(|n| crate::query::facet_name_owned(n)).collect(),
                prefixes: b.facet_prefixes.clone(),
            },
            crawler_max_params: b.crawler_max_params,
            max_facets_without_referer: b.max_facets_without_referer,
            same_site_hosts: self.site.same_site_hosts.clone(),
            exempt_verified: b.exempt_verified,
            retry_after: b.retry_after,
            paths: b.locations.clone(),
        })
    }

    /// Whether a request with this verdict takes a place in the browse cap.
    pub fn browse_cap_counts(&self, verdict: Verdict) -> bool {
        self.layers.browse_cap.as_ref().is_none_or(|b| b.counts(verdict))
    }

    /// Whether `path` is a browse page.
    pub fn is_browse(&self, path: &str) -> bool {
        self.layers.browse_cap.as_ref().is_some_and(|b| b.is_browse(path.as_bytes()))
    }

    /// The rate class of a path: the class with the longest matching prefix, else the default class.
    pub fn uri_class(&self, path: &str) -> Option<&str> {
        let rc = self.layers.rate_classes.as_ref()?;
        rc.uri_class(path.as_bytes()).map(|c| rc.name(c))
    }

    /// The rate class a request is counted in, or None when it is exempt.
    pub fn limit_class<'a>(&'a self, action: Action, verdict: Verdict, uri_class: &'a str) -> Option<&'a str> {
        let rc = self.layers.rate_classes.as_ref()?;
        let class = rc.classes.iter().position(|c| c.name == uri_class).map(crate::layers::ClassRef::Class)?;
        rc.limit_class(action, verdict, class).map(|c| rc.name(c))
    }

    /// Path prefixes of each rate class, longest first: the order the nginx
    /// `map` of regexes must try them in to pick the longest prefix.
    pub fn class_prefixes(&self) -> Vec<(&str, &str)> {
        let mut v: Vec<(&str, &str)> =
            self.rate_limits.iter().flat_map(|rl| rl.classes.iter()).flat_map(|c| c.paths.iter().map(move |p| (p.as_str(), c.name.as_str()))).collect();
        v.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        v
    }
}

/// The regular expressions of the facet guard as stock nginx evaluates them
/// on the raw query string and Referer. The same strings go into the rendered
/// `map` blocks and into `explain`, so the two cannot differ.
#[derive(Debug, Clone)]
pub struct FacetPatterns {
    /// Matches a query string with at least `crawler_max_params` non-empty parameters.
    pub params_over: String,
    /// Matches a query string naming facets at least `max_facets_without_referer` times.
    pub facets_over: String,
    /// Matches a Referer whose host is one of the same-site hosts (case-insensitive).
    pub same_site: String,
}

impl FacetPatterns {
    pub fn new(policy: &Policy) -> Option<FacetPatterns> {
        let b = policy.browse.as_ref()?;
        let n = b.crawler_max_params;
        let params_over = if n == 1 { "[^&]".to_string() } else { format!("^&*[^&]+(?:&+[^&]+){{{}}}", n - 1) };
        let mut alts: Vec<String> = b.facet_names.iter().map(|f| php_name_regex(f)).collect();
        alts.extend(b.facet_prefixes.iter().map(|f| format!("{}[^=&]*", php_name_regex(f))));
        // as PHP reads a name (query::php_name): leading spaces dropped, and
        // what follows a `[` or a NUL byte is not part of it
        let facet = format!("(?:\\+|%20)*(?:{})(?:(?:\\[|%5[bB]|%00)[^=&]*)?", alts.join("|"));
        let mut facets_over = String::from("(?:^|&)");
        for _ in 1..b.max_facets_without_referer {
            let _ = write!(facets_over, "{facet}(?:=[^&]*)?&(?:[^&]*&)*");
        }
        let _ = write!(facets_over, "{facet}(?:[=&]|$)");
        let hosts: Vec<String> = policy.site.same_site_hosts.iter().map(|h| regex::escape(h)).collect();
        let same_site = format!("^https?://(?:{})(?::[0-9]+)?(?:[/?#]|$)", hosts.join("|"));
        Some(FacetPatterns { params_over, facets_over, same_site })
    }
}

/// A regular expression for the raw (percent-encoded) forms of a query
/// parameter name that PHP reads as `name` (see [`crate::query::php_name`]):
/// every byte as itself or `%XX` (either case of hex digit), and `_` also as
/// `.`, `+` or `%20` (PHP reads dots and spaces as `_`). The stock maps run it
/// on `$args`, so `%73ubjects` and `place.name` count as the module counts them.
fn php_name_regex(name: &str) -> String {
    let hex = |d: u8| {
        let c = char::from_digit(d as u32, 16).unwrap_or('0');
        if c.is_ascii_digit() {
            c.to_string()
        } else {
            format!("[{}{}]", c, c.to_ascii_uppercase())
        }
    };
    let mut out = String::new();
    for b in name.bytes() {
        let encoded = format!("%{}{}", hex(b >> 4), hex(b & 15));
        if b == b'_' {
            let _ = write!(out, "(?:_|{encoded}|\\.|%2[eE]|\\+|%20)");
        } else {
            let _ = write!(out, "(?:{}|{encoded})", regex::escape(&(b as char).to_string()));
        }
    }
    out
}

/// The nginx regular expression for "the path starts with `prefix`", on
/// `$uri`. `explain` and the module test the same thing with `starts_with`
/// on the path the application sees; with a front controller, its name may
/// come first ([`crate::app_path::front_controller_group`]). The escaping is
/// the regex crate's, which PCRE reads alike (a backslash before punctuation
/// is a literal).
pub fn prefix_regex(prefix: &str, front_controller: Option<&str>) -> String {
    let behind = front_controller.map(crate::app_path::front_controller_group).unwrap_or_default();
    format!("^{behind}{}", regex::escape(prefix))
}

fn compile(p: &str, case_insensitive: bool) -> Regex {
    RegexBuilder::new(p).case_insensitive(case_insensitive).unicode(false).build().expect("facet patterns are built from validated names")
}

/// A request to explain.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target as sent: path and query, percent-encoded.
    pub url: String,
    pub user_agent: Vec<u8>,
    pub ip: IpAddr,
    pub referer: Option<String>,
    /// The Host header (or the request line's host); None: the server's own name.
    pub host: Option<String>,
    /// Whether the maintenance flag file exists.
    pub maintenance: bool,
    /// What forward-confirmed reverse DNS says about the client, when the
    /// policy's module checks it (None: not known yet, as on a cache miss).
    pub dns: Option<crate::fcrdns::DnsVerdict>,
    /// What the request's Web Bot Auth signature said, and the directory its
    /// `Signature-Agent` named (the module's `crawlward_signatures`); None: unsigned.
    pub signature: Option<(crate::signature::Outcome, Option<String>)>,
}

/// The outcome for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub rule: Rule,
    /// The status crawlward answers with, or None when the request passes to the site.
    pub status: Option<u16>,
}

/// What `crawlward explain` prints.
#[derive(Debug, Clone)]
pub struct Explanation {
    pub agent: Option<String>,
    pub operator: Option<String>,
    pub purpose: Option<Purpose>,
    pub verdict: Verdict,
    pub door: Door,
    pub action: Action,
    pub decision: Decision,
    /// One line per rule looked at, in the order nginx applies them.
    pub steps: Vec<String>,
    /// The rate class the request is counted in, if it passes.
    pub limit_class: Option<String>,
    /// Whether it counts against the browse in-flight cap.
    pub browse_cap: Option<u32>,
    /// The crawl budget that refuses it first, as `$crawlward_budget` names
    /// it (`address`, `agent-deep`...); None when no budget counts it.
    pub budget: Option<&'static str>,
}

impl Explanation {
    /// The explanation, ended at the step that refuses the request.
    fn refused(mut self, steps: Vec<String>, rule: Rule, status: u16) -> Explanation {
        self.decision = Decision { rule, status: Some(status) };
        self.steps = steps;
        self
    }
}

impl Policy {
    /// Decide a request as the rendered nginx configuration does.
    pub fn explain(&self, req: &Request) -> Explanation {
        let target = nginx_target(req.url.as_bytes());
        let id = &self.identity;
        // every prefix is matched on the path the application sees: its front controller's name dropped
        let (path, query) = match &target {
            Some((p, q)) => (String::from_utf8_lossy(id.app_path(p)).into_owned(), String::from_utf8_lossy(q).into_owned()),
            None => (String::new(), String::new()),
        };
        let behind_front_controller = id.front_controller.as_deref().filter(|_| target.as_ref().is_some_and(|(p, _)| id.app_path(p).len() != p.len()));
        let query = query.as_str();
        let user_agent = header_value(&req.user_agent);
        let referer = req.referer.as_deref().map(|r| header_value(r.as_bytes()));
        let mut found = id.catalogue.identify(user_agent).unwrap_or_default();
        // the module's signature check decides before the address, as request::identify does
        let signed = req.signature.as_ref().and_then(|(outcome, dir)| id.signed(*outcome, dir.as_deref(), found.agent));
        if let Some((named, _)) = signed.filter(|(named, _)| *named != found.agent) {
            found = crate::ua_cache::Classified { agent: named, token: None };
        }
        let agent = found.agent.and_then(|i| id.catalogue.agents().get(i));
        let label = id.catalogue.label(user_agent, &found).map(|l| l.into_owned());
        let mut verdict = signed.map_or_else(|| id.verdict(user_agent, agent, req.ip), |(_, v)| v);
        // the module's DNS check, as handler::identify and dns::advance make it
        let dns_note = match (agent, self.module.as_ref().and_then(|m| m.dns.as_ref())) {
            (Some(a), Some(d)) if signed.is_none() && crate::fcrdns::needs_dns(a, req.ip) => {
                let check = format!("the DNS check: the PTR name of {} must be under {} and resolve back to it", req.ip, a.rdns_suffixes.join(", "));
                Some(match req.dns {
                    Some(v) => {
                        verdict = crate::fcrdns::verdict_of(v, d.unresolved);
                        format!("{check}; DNS says {} (as given), so verdict {verdict}", v.as_str())
                    }
                    None => {
                        verdict = crate::fcrdns::verdict_of(crate::fcrdns::DnsVerdict::Unresolved, d.unresolved);
                        format!(
                            "{check}; until it answers (and if DNS fails) the verdict is {verdict}; give --dns verified|spoofed|unresolved to see each outcome"
                        )
                    }
                })
            }
            _ => None,
        };
        let purpose = agent.map(|a| a.purpose);
        let door = id.door(path.as_bytes());
        let action = id.ua_action(door, purpose, verdict);
        let mut steps = Vec::new();
        if let Some(fc) = behind_front_controller {
            steps.push(format!("path: the application behind {fc} (site.front_controller) answers this as {path}, so every path rule reads {path}"));
        }
        let mut out = Explanation {
            agent: label.clone(),
            operator: agent.map(|a| a.operator.clone()),
            purpose,
            verdict,
            door,
            action,
            decision: Decision { rule: Rule::Pass, status: None },
            steps: Vec::new(),
            limit_class: None,
            browse_cap: None,
            budget: None,
        };

        match (agent, signed) {
            (_, Some((_, Verdict::Spoofed))) => steps.push(format!(
                "identify: the request's Web Bot Auth signature does not hold, so {} is a spoofed claim; verdict spoofed",
                agent.map_or("it".to_string(), |a| format!("its claim of {}", a.name))
            )),
            (Some(a), Some(_)) => steps.push(format!(
                "identify: a key of {} signed the request (Web Bot Auth), the directory of {} ({}, purpose {}), whatever its User-Agent; verdict verified",
                a.signature_agent.as_deref().unwrap_or("its directory"),
                a.name,
                a.operator,
                a.purpose
            )),
            _ => {}
        }
        match agent {
            // said above
            _ if signed.is_some() => {}
            Some(a) if a.counts_by_token() => steps.push(format!(
                "identify: the User-Agent names no known agent but reads as a bot, {} (purpose {}, named and counted by its own product token); verdict {}",
                label.as_deref().unwrap_or(&a.name),
                a.purpose,
                verdict
            )),
            Some(a) if dns_note.is_some() => steps.push(format!(
                "identify: the User-Agent names {} ({}, purpose {}); {}",
                a.name,
                a.operator,
                a.purpose,
                if a.ranges.is_empty() {
                    "the catalogue has no published ranges for it".to_string()
                } else {
                    format!("{} is outside its published ranges", req.ip)
                }
            )),
            Some(a) => steps.push(format!(
                "identify: the User-Agent names {} ({}, purpose {}); verdict {}{}",
                a.name,
                a.operator,
                a.purpose,
                verdict,
                match verdict {
                    Verdict::Verified => format!(": {} is in its published ranges", req.ip),
                    Verdict::Spoofed => format!(": {} is outside its published ranges", req.ip),
                    Verdict::Unverified => ": the catalogue has no published ranges for it".to_string(),
                    _ => String::new(),
                }
            )),
            None if verdict == Verdict::Empty => steps.push("identify: no User-Agent; verdict empty".into()),
            None => steps.push("identify: the User-Agent names no known agent; verdict none".into()),
        }
        if let Some(note) = dns_note {
            steps.push(format!("verify: {note}"));
        }

        if target.is_none() && !req.url.starts_with('/') {
            steps.push(format!(
                "nginx: 400 before any module runs: the request target {:?} does not start with '/' (give the path and query as the site receives them, e.g. /record/1, or a whole http:// URL)",
                req.url
            ));
            return out.refused(steps, Rule::BadRequest, 400);
        }
        if target.is_none() {
            steps.push(format!(
                "nginx: 400 before any module runs: {} has a bad or cut percent-encoding, an encoded NUL, or a dot segment above the root",
                req.url
            ));
            return out.refused(steps, Rule::BadRequest, 400);
        }
        if let Some(host) = req.host.as_deref().map(nginx_host).filter(|h| self.site.redirect_hosts.contains(h)) {
            steps.push(format!(
                "canonical host: {host} is one of site.redirect_hosts, so nginx answers 301 to {}{}, before any other rule",
                self.site.canonical_origin, req.url
            ));
            return out.refused(steps, Rule::CanonicalHost, 301);
        }
        if let Some(m) = &self.maintenance {
            if req.maintenance && door != Door::Robots {
                steps.push(format!("maintenance: {} exists, so every page but robots.txt answers 503 (Retry-After: {})", m.flag_file, m.retry_after));
                return out.refused(steps, Rule::Maintenance, 503);
            }
            steps.push(if req.maintenance {
                "maintenance: on, but robots.txt is always answered".into()
            } else {
                format!("maintenance: off ({} does not exist)", m.flag_file)
            });
        }

        let door_note = match door {
            Door::Robots => "robots.txt: open to every client".to_string(),
            Door::Machine => format!("{path} is a machine door: the User-Agent rule does not apply, except to AI-training crawlers"),
            Door::None => format!("{path} is not a machine door"),
        };
        steps.push(format!("bot-blocker: {door_note}; action {action}"));
        if let Action::Block(status) = action {
            return out.refused(steps, Rule::BotBlocker, status);
        }
        // the module's signature answer, as request::preaccess gives it
        if self.module.as_ref().is_some_and(|m| m.signatures.is_some()) && id.signature_required(path.as_bytes()) {
            let outcome = req.signature.as_ref().map_or(crate::signature::Outcome::None, |(o, _)| *o);
            let signer = req.signature.as_ref().and_then(|(_, d)| d.as_deref());
            let named = !signer.is_some_and(|d| self.seen_directories.iter().any(|s| s == d));
            if let Some(refusal) = crate::signature::refusal(false, true, outcome, None, named) {
                let taken = if named { String::new() } else { format!(" from {}, a directory taken from traffic", signer.unwrap_or_default()) };
                steps.push(format!(
                    "signature: {path} is for signed agents (module.signatures.required) and the request's signature is {}{taken}: {} with Accept-Signature",
                    outcome.as_str(),
                    refusal.status()
                ));
                return out.refused(steps, Rule::Signature, refusal.status());
            }
            steps.push(format!("signature: {path} is for signed agents, and the request's signature is verified (a replayed one would answer 429)"));
        }

        if let (Some(_), Some(b), Some(g)) = (&self.module, &self.browse, self.facet_guard()) {
            // the module's crawlward_facets: the parsed query string and Referer host
            if g.applies_to(path.as_bytes()) {
                let o = g.decide(verdict, query.as_bytes(), referer);
                let same_site = referer.is_some_and(|r| crate::query::same_site(r, &g.same_site_hosts));
                steps.push(format!(
                    "facet guard: browse page; {} parameters (a crawler is refused at {}), {} distinct facets (refused at {} without a same-site Referer); same-site Referer: {}",
                    o.scan.params, g.crawler_max_params, o.scan.facets, g.max_facets_without_referer, yes_no(same_site)
                ));
                if let Some(rule) = o.rule {
                    steps.push(format!("facet guard: {} answers 429 (Retry-After: {})", rule.as_str(), g.retry_after));
                    return out.refused(steps, rule, 429);
                }
                out.browse_cap = Some(b.max_in_flight);
            } else {
                steps.push("facet guard: not a browse page".into());
            }
        } else if let (Some(b), Some(fp)) = (&self.browse, FacetPatterns::new(self)) {
            let browse = self.is_browse(&path);
            if browse {
                let params_over = compile(&fp.params_over, false).is_match(query.as_bytes());
                let facets_over = compile(&fp.facets_over, false).is_match(query.as_bytes());
                let same_site = referer.is_some_and(|r| compile(&fp.same_site, true).is_match(r));
                let subject = self.facet_subject(verdict);
                let who = match subject {
                    FacetSubject::Person => "not a crawler",
                    FacetSubject::Crawler => "a crawler",
                    FacetSubject::Exempt => "a verified crawler, exempt",
                };
                steps.push(format!(
                    "facet guard: browse page; {who}; {} or more parameters: {}; {} or more facets: {}; same-site Referer: {}",
                    b.crawler_max_params,
                    yes_no(params_over),
                    b.max_facets_without_referer,
                    yes_no(facets_over),
                    yes_no(same_site)
                ));
                if let Some(rule) = self.facet_rule(true, subject, params_over, facets_over, same_site) {
                    steps.push(format!("facet guard: {} answers 429 (Retry-After: {})", rule.as_str(), b.retry_after));
                    return out.refused(steps, rule, 429);
                }
                out.browse_cap = Some(b.max_in_flight);
            } else {
                steps.push("facet guard: not a browse page".into());
            }
        }

        if let Some(rl) = &self.rate_limits {
            let uri_class = self.uri_class(&path).unwrap_or("default");
            match self.limit_class(action, verdict, uri_class) {
                _ if door == Door::Robots => steps.push("rate limit: robots.txt is never rate-limited".into()),
                Some(class) => {
                    let spec = if class == "throttle" { rl.throttle.as_ref() } else { rl.classes.iter().find(|c| c.name == class) };
                    let (rate, burst) = spec.map(|c| (c.rate.as_str(), c.burst)).unwrap_or(("?", 0));
                    steps.push(format!("rate limit: class {class}, {rate} per address, burst {burst}; past it 429 (Retry-After: {})", rl.retry_after));
                    out.limit_class = Some(class.to_string());
                }
                None => steps.push("rate limit: exempt (a verified crawler)".into()),
            }
        }
        // nginx runs limit_req before limit_conn: the rate classes, then the browse cap
        if let (Some(cap), Some(b)) = (out.browse_cap, &self.browse) {
            if self.browse_cap_counts(verdict) {
                steps.push(format!("browse cap: counts against the {cap} requests in flight on browse pages; past it 503 (Retry-After: {})", b.retry_after));
            } else {
                out.browse_cap = None;
                steps.push("browse cap: verified crawlers take no place in it (browse_shed.cap_exempt_verified)".into());
            }
        }
        if let Some(cb) = &self.crawl_budget {
            let (step, budget) = self.explain_budget(cb, req, &path, query, door, verdict);
            steps.push(step);
            out.budget = budget;
        }
        if let Some(a) = self.api_tiers.as_ref().filter(|a| a.paths.iter().any(|p| path.starts_with(p.as_str()))) {
            steps.push(explain_quota(a));
        }
        steps.push(match (door, &self.robots.source) {
            (Door::Robots, crate::RobotsSource::Rendered) => format!("pass: {} {} is answered 200 with the rendered robots.txt", req.method, req.url),
            (Door::Robots, crate::RobotsSource::App { .. }) if req.maintenance && self.maintenance.is_some() => format!(
                "pass: {} {} is answered 200 from the kept copy of the application's robots.txt (else the rendered one), without asking the application (maintenance)",
                req.method, req.url
            ),
            (Door::Robots, crate::RobotsSource::App { url, .. }) => format!(
                "pass: {} {} is asked of the application ({url}); nginx answers 200 from its kept copy (else the rendered robots.txt) in maintenance and when the application answers 429 or 5xx, is down or is slow",
                req.method, req.url
            ),
            _ => format!("pass: {} {} goes to the site", req.method, req.url),
        });
        out.steps = steps;
        out
    }
}

impl Policy {
    /// What the crawl budgets do with a request: whether it is counted, on a
    /// deep path, and which budget refuses first (the smallest limit per time).
    fn explain_budget(&self, cb: &crate::CrawlBudgetV, req: &Request, path: &str, query: &str, door: Door, verdict: Verdict) -> (String, Option<&'static str>) {
        use crate::budget::Budget;
        let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        if !crate::budget::counted(matches!(req.method.as_str(), "GET" | "HEAD"), door, verdict, cb.limits.verified_counts(now_s)) {
            let step = format!(
                "crawl budget: not counted ({})",
                match (door, verdict) {
                    (Door::Robots, _) => "robots.txt is never counted".to_string(),
                    (Door::Machine, _) => format!("{path} is a machine door: its rate class limits it"),
                    _ if !matches!(req.method.as_str(), "GET" | "HEAD") => format!("{} is not GET or HEAD", req.method),
                    (_, Verdict::Verified) => match (cb.limits.verified, cb.limits.verified_until_s) {
                        (Some(_), Some(until)) =>
                            format!("a verified crawler; the slowdown crawl_budget.verified set ended at {}", crate::ranges::rfc3339(until)),
                        _ => "a verified crawler; crawl_budget.verified sets a budget for them".to_string(),
                    },
                    _ => "not a crawler".to_string(),
                }
            );
            return (step, None);
        }
        let target = if query.is_empty() { path.to_string() } else { format!("{path}?{query}") };
        let deep = self.identity.deep_paths.first_match(target.as_bytes());
        let deep_note = match deep {
            Some(p) => format!("deep path ({p})"),
            None => "not a deep path".to_string(),
        };
        let first = |budgets: &[Budget]| {
            let (refusal, rate) = crate::budget::first_to_refuse(&cb.limits, budgets, deep.is_some())?;
            Some((refusal.name(), rate))
        };
        let limit = |b: Budget| {
            let l = cb.limits.of(b);
            if deep.is_some() {
                format!("{} {} (deep {})", b.as_str(), l.general, l.deep)
            } else {
                format!("{} {}", b.as_str(), l.general)
            }
        };
        // which budgets count it: the module's own rule (budget_table::claim_of), not a copy
        // (a claim's verifiability only names its slot, not the budgets that count it)
        let (step, first) = match crate::budget_table::claim_of(verdict, true).1 {
            crate::budget_table::Scope::Verified => {
                let first = first(&[Budget::Verified]);
                let step = format!(
                    "crawl budget: a verified crawler, counted by agent name only, against crawl_budget.verified: {deep_note}, {}; past it 429 (Retry-After: when it has room); {}",
                    limit(Budget::Verified),
                    match cb.limits.verified_until_s {
                        Some(until) => format!("a slowdown on purpose, until {}", crate::ranges::rfc3339(until)),
                        None => "with no end".to_string(),
                    }
                );
                (step, first)
            }
            crate::budget_table::Scope::AddressOnly => {
                let first = first(&[Budget::Address]);
                let step = format!(
                    "crawl budget: a spoofed claim, counted against its address only (never its agent's budgets): {deep_note}, {}; past it 429 (Retry-After: when it has room){}",
                    limit(Budget::Address),
                    sync_note(cb)
                );
                (step, first)
            }
            crate::budget_table::Scope::Crawler => {
                let first = first(&[Budget::Address, Budget::Agent, Budget::Shared]);
                let step = format!(
                    "crawl budget: counted unless signed in ({}); {deep_note}; {}, {}, {}: {} (429, Retry-After: when it has room){}",
                    if cb.signed_in.is_empty() { "no crawl_budget.signed_in set".to_string() } else { cb.signed_in.join(", ") },
                    limit(Budget::Address),
                    limit(Budget::Agent),
                    limit(Budget::Shared),
                    first.map_or_else(String::new, |(name, rate)| format!("the {name} budget refuses first, past {rate}")),
                    sync_note(cb)
                );
                (step, first)
            }
        };
        (step, first.map(|(name, _)| name))
    }
}

/// What the API quota does on a metered door (`explain` is not told the
/// request's account: it says where one comes from and what it meets).
fn explain_quota(a: &crate::api_tiers::ApiTiersV) -> String {
    let mut from: Vec<String> = a.account.clone();
    if a.keys_file.is_some() {
        from.push(format!("a key in {} listed in the keys file", a.key_header));
    }
    let tiers: Vec<String> = a
        .tiers
        .iter()
        .map(|t| match t.daily {
            Some(d) => format!("{} {}r/h and {d}r/d", t.name, t.hourly),
            None => format!("{} {}r/h", t.name, t.hourly),
        })
        .collect();
    format!(
        "API quota: a metered door; with an account ({}), counted per account (not per key{}) after nginx's access phase, against its tier ({}; default {}): past it 429 with Retry-After, and RateLimit-Policy and RateLimit on every answer{}; without an account, not metered: its rate class applies",
        from.join(", or "),
        if a.account_names_folded && !a.account.is_empty() { "; a variable's name compared without ASCII case and spaces" } else { "" },
        tiers.join(", "),
        a.default,
        if a.keys_file.is_some() && a.account.is_empty() { "; a listed key leaves the rate class to the quota" } else { "" }
    )
}

/// With `crawl_budget.sync`: whose counts the budgets are.
fn sync_note(cb: &crate::CrawlBudgetV) -> String {
    match &cb.sync {
        Some(s) => format!(
            "; the budgets are the cluster's, shared by {} nodes through {} (each node 1/{} of them while the store does not answer)",
            s.nodes, s.store, s.nodes
        ),
        None => String::new(),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// A Host as nginx's `$host` holds it (`ngx_http_validate_host`): lower-cased,
/// without its port and a final dot.
pub fn nginx_host(host: &str) -> String {
    let host = String::from_utf8_lossy(header_value(host.as_bytes())).to_ascii_lowercase();
    // an IPv6 literal keeps its brackets; any other host ends at its port
    let name = if host.starts_with('[') { host.split_inclusive(']').next() } else { host.split(':').next() }.unwrap_or_default();
    name.strip_suffix('.').unwrap_or(name).to_string()
}

/// A header's value as nginx's HTTP/1 parser keeps it
/// (`ngx_http_parse_header_line`): without the spaces before and after it.
/// Only spaces: a tab at either end stays part of the value.
pub fn header_value(value: &[u8]) -> &[u8] {
    let start = value.iter().position(|&b| b != b' ').unwrap_or(value.len());
    let end = value.iter().rposition(|&b| b != b' ').map_or(start, |i| i + 1);
    &value[start..end]
}

/// An absolute-form request target (`http://host[:port]/path?query`, as a
/// proxy or a scanner sends it) as nginx reads it: the host, with its port as
/// a Host header carries it, and the target in origin form, `/` when it has
/// no path. None for any other target.
pub fn absolute_form(target: &[u8]) -> Option<(&[u8], std::borrow::Cow<'_, [u8]>)> {
    let scheme = |s: &[u8]| target.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s));
    let rest = &target[[&b"http://"[..], b"https://"].into_iter().find(|s| scheme(s))?.len()..];
    let (host, path) = rest.split_at(rest.iter().position(|b| matches!(b, b'/' | b'?')).unwrap_or(rest.len()));
    let path = if path.first() == Some(&b'/') { std::borrow::Cow::Borrowed(path) } else { std::borrow::Cow::Owned([b"/", path].concat()) };
    Some((host, path))
}

/// A path and its query as one URL, `path?query` (the path alone without a
/// query): what robots.txt's rules are matched on, and the URL the ladder counts.
pub fn with_query<'a>(path: &'a [u8], query: &[u8]) -> std::borrow::Cow<'a, [u8]> {
    if query.is_empty() {
        std::borrow::Cow::Borrowed(path)
    } else {
        std::borrow::Cow::Owned([path, b"?", query].concat())
    }
}

/// [`nginx_target`], without a copy for a target nginx takes as it is: one
/// whose path has no `%`, `#`, `//` or `/.` (what nginx's simple parse keeps
/// whole), so that `$uri` is its path.
pub fn nginx_uri(target: &[u8]) -> Option<(std::borrow::Cow<'_, [u8]>, &[u8])> {
    let end = target.iter().position(|&b| b == b'?' || b == b'#').unwrap_or(target.len());
    let path = &target[..end];
    let simple = target.get(end) != Some(&b'#')
        && path.first() == Some(&b'/')
        && !path.contains(&b'%')
        && !path.windows(2).any(|w| w[0] == b'/' && matches!(w[1], b'/' | b'.'));
    if !simple {
        return nginx_target(target).map(|(u, a)| (std::borrow::Cow::Owned(u), a));
    }
    let rest = target.get(end + 1..).unwrap_or(b"");
    let args = &rest[..rest.iter().position(|&b| b == b'#').unwrap_or(rest.len())];
    Some((std::borrow::Cow::Borrowed(path), args))
}

/// A request target as nginx reads it (`ngx_http_parse_complex_uri`, with
/// `merge_slashes on`): the path as `$uri` holds it, percent-decoded, slashes
/// merged and dot segments resolved, and the query as `$args` holds it, raw.
/// None where nginx answers 400 before any module runs: a bad or cut
/// percent-encoding, an encoded NUL, or a `..` above the root.
pub fn nginx_target(target: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Usual,
        Slash,
        Dot,
        DotDot,
    }
    // nginx's `u -= 4` and the walk back to the previous '/': the path ends in "/.."
    fn up(u: &mut Vec<u8>) -> Option<()> {
        let mut k = u.len().checked_sub(4)?;
        loop {
            if u[k] == b'/' {
                u.truncate(k + 1);
                return Some(());
            }
            k = k.checked_sub(1)?;
        }
    }
    let args_of = |from: usize| {
        let rest = &target[from..];
        &rest[..rest.iter().position(|&b| b == b'#').unwrap_or(rest.len())]
    };
    // an origin-form target starts with '/' (nginx answers 400 to "GET ?" or "GET ")
    if target.first() != Some(&b'/') {
        return None;
    }
    let mut u = Vec::with_capacity(target.len());
    let mut state = State::Usual;
    let mut p = 0;
    let mut args: &[u8] = b"";
    while p < target.len() {
        let mut ch = target[p];
        p += 1;
        if ch == b'%' {
            let d = crate::query::hex(*target.get(p)?)? << 4 | crate::query::hex(*target.get(p + 1)?)?;
            p += 2;
            match d {
                0 => return None,
                // as themselves, never a query, a fragment or another escape
                b'%' | b'#' | b'?' => {
                    u.push(d);
                    state = State::Usual;
                    continue;
                }
                _ => ch = d,
            }
        } else if ch == b'?' || ch == b'#' {
            match state {
                State::Dot => {
                    u.pop();
                }
                State::DotDot => up(&mut u)?,
                _ => {}
            }
            if ch == b'?' {
                args = args_of(p);
            }
            state = State::Usual;
            break;
        }
        state = match (state, ch) {
            (State::Slash, b'/') => State::Slash,
            (State::Dot, b'/') => {
                u.pop();
                State::Slash
            }
            (State::DotDot, b'/') => {
                up(&mut u)?;
                State::Slash
            }
            (_, b'/') => {
                u.push(b'/');
                State::Slash
            }
            (State::Slash, b'.') => {
                u.push(b'.');
                State::Dot
            }
            (State::Dot, b'.') => {
                u.push(b'.');
                State::DotDot
            }
            (_, c) => {
                u.push(c);
                State::Usual
            }
        };
    }
    match state {
        State::Dot => {
            u.pop();
        }
        State::DotDot => up(&mut u)?,
        _ => {}
    }
    Some((u, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absolute_target_is_its_host_and_its_origin_form() {
        let form = |t: &str| absolute_form(t.as_bytes()).map(|(h, p)| (String::from_utf8_lossy(h).into_owned(), String::from_utf8_lossy(&p).into_owned()));
        assert_eq!(form("http://h/x?y"), Some(("h".into(), "/x?y".into())));
        assert_eq!(form("HTTPS://h:8443?y"), Some(("h:8443".into(), "/?y".into())));
        assert_eq!(form("http://h"), Some(("h".into(), "/".into())));
        assert_eq!(form("/a://b"), None);
        assert_eq!(form("ftp://h/x"), None);
        assert_eq!(form("x"), None);
    }

    #[test]
    fn a_simple_target_is_read_as_nginx_reads_it_without_a_copy() {
        for t in ["/", "/record/1", "/browse?b=2&c=3", "/a?b#c", "/a#b", "/a/./b", "/a/../b", "//a", "/a/.", "/%62rowse?x", "/a?b=%2F", "/a.b/c.d?e", "x", ""] {
            let full = nginx_target(t.as_bytes()).map(|(u, a)| (u, a.to_vec()));
            let quick = nginx_uri(t.as_bytes()).map(|(u, a)| (u.into_owned(), a.to_vec()));
            assert_eq!(quick, full, "{t}");
        }
        assert!(matches!(nginx_uri(b"/browse?b=2"), Some((std::borrow::Cow::Borrowed(b"/browse"), b"b=2"))));
    }

    #[test]
    fn targets_as_nginx_reads_them() {
        let t = |s: &str| nginx_target(s.as_bytes()).map(|(p, a)| (String::from_utf8_lossy(&p).into_owned(), String::from_utf8_lossy(a).into_owned()));
        let ok = |p: &str, a: &str| Some((p.to_string(), a.to_string()));
        assert_eq!(t("/api//v1/%72ecords"), ok("/api/v1/records", ""));
        assert_eq!(t("/a/./b/../c/"), ok("/a/c/", ""));
        assert_eq!(t("/"), ok("/", ""));
        assert_eq!(t("/a/b/.."), ok("/a/", ""), "a trailing dot-dot");
        assert_eq!(t("/a/."), ok("/a/", ""), "a trailing dot");
        assert_eq!(t("/a/%2e%2E/b"), ok("/b", ""), "encoded dots are dots");
        assert_eq!(t("/a%2F%2fb"), ok("/a/b", ""), "an encoded slash is a slash, merged");
        assert_eq!(t("/a/..?x=1"), ok("/", "x=1"));
        assert_eq!(t("/a%3Fb?c#d"), ok("/a?b", "c"), "an encoded ? is not the query; # ends it");
        assert_eq!(t("/a#b?c"), ok("/a", ""), "# before ? ends the path, no query");
        assert_eq!(t("/a/.b/..c"), ok("/a/.b/..c", ""), "dots inside names stay");
        assert_eq!(t("/%25%32%65"), ok("/%2e", ""), "a decoded % starts no escape");
        // nginx's 400s
        for bad in ["", "?x", "%2F", "/%zz", "/x%2", "/x%", "/a%00b", "/..", "/../a", "/a/../..", "//..", "/%2e%2e/x", "/a/../../?q"] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }

    #[test]
    fn header_values_as_nginx_keeps_them() {
        assert_eq!(header_value(b"  Googlebot/2.1  "), b"Googlebot/2.1");
        assert_eq!(header_value(b" "), b"");
        assert_eq!(header_value(b""), b"");
        assert_eq!(header_value(b"a b"), b"a b", "spaces inside stay");
        assert_eq!(header_value(b"\tx\t"), b"\tx\t", "a tab is not trimmed");
    }
}

#[cfg(test)]
mod facet_tests {
    use super::*;

    /// A GET of `url` from 198.51.100.7 with User-Agent `ua`, nothing else set.
    fn get(url: &str, ua: &str) -> Request {
        Request {
            method: "GET".into(),
            url: url.into(),
            user_agent: ua.as_bytes().to_vec(),
            ip: "198.51.100.7".parse().unwrap(),
            referer: None,
            host: None,
            maintenance: false,
            dns: None,
            signature: None,
        }
    }

    fn policy(exempt: bool) -> Policy {
        crate::load_str(
            "t.yaml",
            &format!(
                "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue:\n  agents: [{{name: Googlebot, ranges: [192.0.2.0/24]}}]\nbrowse_shed: {{locations: [/browse], facet_names: [a, b], exempt_verified: {exempt}}}\n"
            ),
        )
        .unwrap()
    }

    #[test]
    fn a_signature_decides_as_the_module_does() {
        use crate::signature::Outcome;
        let p = policy(true);
        let chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        let signed = |outcome: Outcome, dir: &str| {
            p.explain(&Request {
                method: "GET".into(),
                url: "/record/1".into(),
                user_agent: chrome.as_bytes().to_vec(),
                ip: "198.51.100.7".parse().unwrap(),
                referer: None,
                host: None,
                maintenance: false,
                dns: None,
                signature: Some((outcome, Some(dir.into()))),
            })
        };
        let e = signed(Outcome::Verified, "https://chatgpt.com");
        assert_eq!((e.agent.as_deref(), e.verdict, e.action), (Some("ChatGPT-Agent"), Verdict::Verified, Action::Allow));
        assert!(e.steps[0].contains("a key of https://chatgpt.com signed the request"), "{:?}", e.steps);
        let e = signed(Outcome::Invalid, "https://chatgpt.com");
        assert_eq!((e.agent, e.verdict), (None, Verdict::Spoofed));
        assert_eq!(e.decision.status, Some(444), "the spoofed action");
        let e = signed(Outcome::Unverified, "https://chatgpt.com");
        assert_eq!((e.agent, e.verdict), (None, Verdict::None), "no known key: the User-Agent decides");
    }

    #[test]
    fn a_front_controllers_path_meets_the_applications_rules() {
        let p = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4, front_controller: /index.php}\nrobots: {}\nmachine_doors: [/oai]\nbrowse_shed: {locations: [/browse], facet_names: [a, b]}\nrate_limits: {classes: [{name: default, rate: 60r/m}, {name: search, rate: 10r/m, paths: [/search]}]}\n",
        )
        .unwrap();
        let at = |url: &str, ua: &str| p.explain(&get(url, ua));
        let chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        let e = at("/index.php/browse?a=1&b=2", chrome);
        assert_eq!(e.decision.status, Some(429), "the facet guard behind the front controller: {:?}", e.steps);
        assert!(e.steps[0].starts_with("path: the application behind /index.php (site.front_controller) answers this as /browse"), "{:?}", e.steps);
        let (behind, plain) = (at("/index.php/browse?a=1", chrome), at("/browse?a=1", chrome));
        assert_eq!((behind.browse_cap, behind.limit_class.as_deref()), (plain.browse_cap, plain.limit_class.as_deref()));
        assert_eq!(at("/index.php/search?q=x", chrome).limit_class.as_deref(), Some("search"));
        assert_eq!(at("/index.php/oai?verb=Identify", "curl/8.5.0").door, Door::Machine, "a machine door behind it");
        let robots = at("/index.php/robots.txt", "curl/8.5.0");
        assert_eq!(robots.door, Door::None, "robots.txt behind it is the application's page, not robots.txt");
        assert!(!robots.steps.iter().any(|s| s.starts_with("path:")), "{:?}", robots.steps);
        assert!(!at("/browse?a=1&b=2", chrome).steps[0].starts_with("path:"), "nothing to say without it");
    }

    #[test]
    fn a_prefix_behind_the_front_controller_is_refused() {
        let err = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4, front_controller: /index.php}\nmachine_doors: [/index.php/oai]\nbrowse_shed: {locations: [/index.php/browse]}\nrobots: {deep_paths: [/index.php/*/print]}\nmodule: {signatures: {required: [/index.php]}}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("machine_doors[0]") && err.contains("write the application's path, /oai"), "{err}");
        assert!(err.contains("browse_shed.locations[0]") && err.contains("/browse"), "{err}");
        assert!(err.contains("robots.deep_paths[0]"), "{err}");
        assert!(err.contains("module.signatures.required[0]") && err.contains("covers the front controller"), "{err}");
        let err = crate::load_str("t.yaml", "site: {canonical_url: https://example.org, upstream_workers: 4, front_controller: index.php}\nrobots: {}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("site.front_controller") && err.contains("starts with /"), "{err}");
    }

    #[test]
    fn a_metered_door_says_where_the_account_comes_from_and_its_tiers() {
        let p = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nmachine_doors: [/api/, /oai]\nmodule: {}\napi_tiers: {paths: [/api/], account: [$remote_user], tiers: [{name: standard}, {name: partner, hourly: 10, daily: 20}]}\n",
        )
        .unwrap();
        let at = |url: &str| p.explain(&get(url, "curl/8.5.0"));
        let steps = at("/api/items").steps.join("\n");
        assert!(
            steps.contains("API quota: a metered door; with an account ($remote_user), counted per account (not per key) after nginx's access phase, against its tier (standard 1000r/h, partner 10r/h and 20r/d; default standard)"),
            "{steps}"
        );
        let other = at("/oai/x").steps.join("\n");
        assert!(other.contains("pass: GET /oai/x goes to the site") && !other.contains("API quota"), "another door is not metered: {other}");
    }

    #[test]
    fn a_path_for_signed_agents_wants_a_verified_signature() {
        use crate::signature::Outcome;
        let p = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nmodule: {signatures: {required: [/agents/, /]}}\n",
        )
        .unwrap();
        let chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        let ask = |url: &str, signature: Option<Outcome>| {
            p.explain(&Request { signature: signature.map(|o| (o, Some("https://chatgpt.com".to_string()))), ..get(url, chrome) })
        };
        let e = ask("/agents/search", None);
        assert_eq!((e.decision.rule, e.decision.status), (Rule::Signature, Some(403)), "{:?}", e.steps);
        assert!(e.steps.last().unwrap().contains("the request's signature is none: 403 with Accept-Signature"), "{:?}", e.steps);
        assert_eq!(ask("/agents/search", Some(Outcome::Unverified)).decision.status, Some(403));
        assert_eq!(ask("/agents/search", Some(Outcome::Verified)).decision.status, None);
        // robots.txt and the site's own key directory answer every client
        assert_eq!(ask("/robots.txt", None).decision.status, None);
        assert_eq!(ask("/.well-known/http-message-signatures-directory", None).decision.status, None);
        // the catalogue file carries the paths to the module
        let file = serde_json::to_string(&p.identity.to_file("t.yaml")).unwrap();
        let back = crate::Identity::from_json(&file).unwrap();
        assert!(back.signature_required(b"/agents/x") && !back.signature_required(b"/robots.txt"));
    }

    fn rule(p: &Policy, ua: &str, ip: &str, url: &str) -> Option<u16> {
        let req = Request {
            method: "GET".into(),
            url: url.into(),
            user_agent: ua.as_bytes().to_vec(),
            ip: ip.parse().unwrap(),
            referer: None,
            host: None,
            maintenance: false,
            dns: None,
            signature: None,
        };
        p.explain(&req).decision.status
    }

    #[test]
    fn stock_facet_patterns_read_names_as_php_does() {
        let p = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nbrowse_shed: {locations: [/browse], facet_names: [subjects, place_name]}\n",
        )
        .unwrap();
        let fp = FacetPatterns::new(&p).unwrap();
        let over = compile(&fp.facets_over, false);
        for q in [
            "subjects=1&place_name=2",
            "+subjects=1&place_name=2",
            "%73ubjects=1&pl%61ce_name=2",
            "subjects%00x=1&place.name=2",
            "subjects[]=1&place+name=2",
            "%20subjects=1&place%20name=2",
            "subjects=1&place%2Ename=2",
        ] {
            assert!(over.is_match(q.as_bytes()), "{q}: two facets");
        }
        for q in ["subjects=1", "subjectsx=1&place_name=2", "xsubjects=1&place_name=2", "subjects=place_name"] {
            assert!(!over.is_match(q.as_bytes()), "{q}: not two facets");
        }
    }

    #[test]
    fn a_user_agent_of_spaces_is_no_user_agent_as_nginx_reads_it() {
        let p = policy(false);
        let explain = |ua: &str| {
            let req = Request {
                method: "GET".into(),
                url: "/".into(),
                user_agent: ua.as_bytes().to_vec(),
                ip: "198.51.100.1".parse().unwrap(),
                referer: None,
                host: None,
                maintenance: false,
                dns: None,
                signature: None,
            };
            p.explain(&req)
        };
        assert_eq!(explain(" ").agent, None, "a lone space is an empty header to nginx");
        assert_eq!(explain(" ").verdict, explain("").verdict);
        assert_eq!(explain("  Googlebot/2.1 ").agent.as_deref(), Some("Googlebot"));
    }

    #[test]
    fn a_redirect_host_answers_one_301_to_the_canonical_origin_first() {
        let p = crate::load_str(
            "t.yaml",
            "site: {canonical_url: 'https://Example.org:8443/x/', redirect_hosts: [WWW.example.org, old.example.net], upstream_workers: 4}\nrobots: {}\nmaintenance: {flag_file: /down}\n",
        )
        .unwrap();
        assert_eq!(p.site.canonical_origin, "https://example.org:8443");
        assert_eq!(p.site.redirect_hosts, ["www.example.org", "old.example.net"]);
        let explain = |host: Option<&str>, url: &str, maintenance: bool| {
            let req = Request {
                method: "GET".into(),
                url: url.into(),
                user_agent: b"Mozilla/5.0".to_vec(),
                ip: "198.51.100.1".parse().unwrap(),
                referer: None,
                host: host.map(Into::into),
                maintenance,
                dns: None,
                signature: None,
            };
            p.explain(&req)
        };
        for host in ["www.example.org", "WWW.Example.ORG:80", "www.example.org.", " old.example.net "] {
            let e = explain(Some(host), "/a%20b?q=1", true);
            assert_eq!((e.decision.rule, e.decision.status), (Rule::CanonicalHost, Some(301)), "{host}");
            assert!(e.steps.last().unwrap().contains("301 to https://example.org:8443/a%20b?q=1"), "{:?}", e.steps);
        }
        for host in [None, Some("example.org"), Some("x.www.example.org"), Some("www.example.org.x")] {
            assert_eq!(explain(host, "/", true).decision.rule, Rule::Maintenance, "{host:?}");
        }
        assert_eq!(nginx_host("[::1]:8080"), "[::1]");
    }

    #[test]
    fn robots_txt_says_where_its_answer_comes_from() {
        let last = |robots: &str, maintenance: bool| {
            let p = crate::load_str(
                "t.yaml",
                &format!("site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {robots}\nmaintenance: {{flag_file: /down}}\n"),
            )
            .unwrap();
            let req = Request {
                method: "GET".into(),
                url: "/robots.txt".into(),
                user_agent: b"Mozilla/5.0 (compatible; Googlebot/2.1)".to_vec(),
                ip: "198.51.100.1".parse().unwrap(),
                referer: None,
                host: None,
                maintenance,
                dns: None,
                signature: None,
            };
            let e = p.explain(&req);
            assert_eq!(e.decision.status, None, "{robots}: robots.txt passes");
            e.steps.last().cloned().unwrap()
        };
        assert_eq!(last("{}", true), "pass: GET /robots.txt is answered 200 with the rendered robots.txt");
        assert!(last("{source: app, app_url: 'http://127.0.0.1:8080'}", true).ends_with("without asking the application (maintenance)"));
        let app = last("{source: app, app_url: 'http://127.0.0.1:8080'}", false);
        assert!(
            app.starts_with("pass: GET /robots.txt is asked of the application (http://127.0.0.1:8080/robots.txt); nginx answers 200 from its kept copy"),
            "{app}"
        );
    }

    #[test]
    fn exempt_verified_skips_both_facet_rules_for_verified_crawlers_only() {
        let g = "Mozilla/5.0 (compatible; Googlebot/2.1)";
        let exempt = policy(true);
        assert_eq!(rule(&exempt, g, "192.0.2.1", "/browse?a=1&b=2&c=3&d=4"), None, "verified: params rule skipped");
        assert_eq!(rule(&exempt, g, "192.0.2.1", "/browse?a=1&b=2"), None, "verified: facets rule skipped");
        assert_eq!(rule(&exempt, g, "198.51.100.1", "/browse?a=1&b=2"), Some(444), "spoofed is blocked first");
        let strict = policy(false);
        assert_eq!(rule(&strict, g, "192.0.2.1", "/browse?w=1&x=2&y=3&z=4"), Some(429));
        assert_eq!(rule(&strict, g, "192.0.2.1", "/browse?a=1&b=2"), Some(429));
        assert_eq!(rule(&strict, "Mozilla/5.0 Chrome/131", "192.0.2.1", "/browse?w=1&x=2&y=3&z=4"), None, "a person may use many parameters");
    }
}
