//! Identification and the User-Agent rule: the part of a policy that the
//! nginx module loads. `crawlward render` writes it as JSON
//! (`crawlward-catalogue.json`: every agent resolved, in match order), and
//! [`Identity::from_json`] builds it back with the same checks, so the module
//! and `crawlward explain` decide from the same data with the same code.

use crate::catalogue::{Agent, Catalogue};
use crate::checks::{check_path, parse_action, problem};
use crate::layers::Layers;
use crate::model::{Actions, AgentSpec};
use crate::net::canonical_ip;
use crate::robots::DeepPaths;
use crate::Door;
use crate::{Action, Problem, Purpose, Verdict};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The file format version of [`IdentityFile`]. 2: `ranges_dir`.
pub const IDENTITY_FORMAT: u32 = 2;

#[derive(Debug, Clone)]
pub struct Identity {
    pub catalogue: Catalogue,
    /// Action per purpose, in [`Purpose::ALL`] order.
    pub purpose_actions: Vec<(Purpose, Action)>,
    pub empty_action: Action,
    pub spoofed_action: Action,
    pub block_status: u16,
    /// Path prefixes of the machine doors (robots.txt is handled on its own).
    pub machine_doors: Vec<String>,
    /// robots.txt patterns of the deep paths (`robots.deep_paths`): the crawl
    /// budget's tighter limit applies there.
    pub deep_paths: DeepPaths,
    /// The layers nginx enforces that the module decides (a policy with a
    /// `module:` section): the browse cap's key, the rate classes, the refusal.
    pub layers: Option<Layers>,
    /// Where `crawlward update-ranges` keeps the downloaded lists these ranges were
    /// read from (None: the ranges came from the snapshot and the policy only).
    /// A kept copy's modification time is when update-ranges last found the
    /// operator's list as it is: [`Identity::ranges_checked`].
    pub ranges_dir: Option<String>,
    /// The proportional ladder, when nginx runs it (a policy with a `module:`
    /// section and a classifier `mode`).
    pub ladder: Option<LadderSpec>,
    /// Path prefixes only signed agents may use (`module.signatures.required`):
    /// a request there without a verified signature is refused with 403.
    pub signatures_required: Vec<String>,
    /// The application's front controller (`site.front_controller`): dropped
    /// from a path before any of its prefixes is matched ([`Identity::app_path`]).
    pub front_controller: Option<String>,
}

/// The ladder as the module reads it: the policy's `classifier` section as
/// written and whether the site is HTTPS, checked again by the module with
/// [`crate::classifier_settings`], the code `crawlward check` runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LadderSpec {
    pub classifier: crate::model::Classifier,
    pub https: bool,
    /// The published robots.txt's `User-agent: *` Disallow patterns, and the
    /// tokens whose own group disallows everything: what "disallowed" means.
    pub robots_disallow: Vec<String>,
    pub robots_refused: Vec<String>,
    /// The sitemap's path, and robots.txt's Crawl-delay (seconds).
    pub sitemap_path: String,
    pub crawl_delay: Option<u32>,
}

/// The JSON form of an [`Identity`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityFile {
    /// What wrote the file and that it is not to be edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<String>,
    pub format: u32,
    /// The policy it was rendered from (for messages).
    pub policy: String,
    pub block_status: u16,
    pub actions: Actions,
    pub machine_doors: Vec<String>,
    /// The deep paths (robots.txt patterns) the crawl budget counts as deep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deep_paths: Vec<String>,
    /// Every agent, in match order, every field explicit.
    pub agents: Vec<AgentSpec>,
    /// What the module decides for the browse cap, the rate classes, Retry-After
    /// and the throttle log (rendered for a policy with a `module:` section).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<Layers>,
    /// Where the downloaded lists are kept ([`Identity::ranges_dir`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<LadderSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures_required: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_controller: Option<String>,
}

/// The action a purpose gets when the policy names none: heratio.org's
/// bot-blocker refuses AI-training crawlers, aggressive SEO crawlers,
/// vulnerability scanners and scripting libraries; browser automation is
/// scripting too. Feed readers and monitors are people's tools, and an
/// unknown bot is let in, counted and budgeted.
pub fn default_action(purpose: Purpose, block: Action) -> Action {
    match purpose {
        Purpose::AiTraining | Purpose::Seo | Purpose::Scanner | Purpose::Scripting | Purpose::Automation => block,
        _ => Action::Allow,
    }
}

impl Identity {
    pub(crate) fn build(
        builtin: bool,
        agents: &[AgentSpec],
        actions: &Actions,
        block_status: Option<u16>,
        doors: &[String],
        problems: &mut Vec<Problem>,
    ) -> Identity {
        let catalogue = Catalogue::build(builtin, agents, problems);
        let block_status = match block_status {
            None => 444,
            Some(s @ (403 | 444)) => s,
            Some(s) => {
                problem(problems, "block_status", format!("invalid block_status {s}: expected 444 or 403"));
                444
            }
        };
        let a = actions;
        let mut action = |field: &str, value: &Option<String>, default: Action| match value.as_deref() {
            None => default,
            Some(v) => parse_action(v, block_status).unwrap_or_else(|| {
                problem(problems, format!("actions.{field}"), format!("invalid action \"{v}\": expected allow, block, block-403, block-444 or throttle"));
                default
            }),
        };
        let block = Action::Block(block_status);
        let mut written = a.clone();
        let purpose_actions = Purpose::ALL.into_iter().map(|p| (p, action(p.as_str(), written.of(p), default_action(p, block)))).collect();
        let empty_action = action("empty", &a.empty, block);
        let spoofed_action = action("spoofed", &a.spoofed, block);
        if spoofed_action == Action::Allow {
            problem(
                problems,
                "actions.spoofed",
                "spoofed cannot be allow: a claim from outside the agent's published ranges is refused or sent to the throttle class, never let in as that agent",
            );
        }
        let mut machine_doors: Vec<String> = Vec::new();
        for (i, d) in doors.iter().enumerate() {
            if check_path(d, &format!("machine_doors[{i}]"), problems) {
                if machine_doors.contains(d) {
                    problem(problems, format!("machine_doors[{i}]"), format!("duplicate machine door \"{d}\""));
                }
                machine_doors.push(d.clone());
            }
        }
        Identity {
            catalogue,
            purpose_actions,
            empty_action,
            spoofed_action,
            block_status,
            machine_doors,
            deep_paths: DeepPaths::default(),
            layers: None,
            ranges_dir: None,
            ladder: None,
            signatures_required: Vec::new(),
            front_controller: None,
        }
    }

    /// Build from the JSON `crawlward render` writes. The error names every problem.
    pub fn from_json(text: &str) -> Result<Identity, String> {
        // The format first, so a file from another version of crawlward says so
        // rather than failing on a field this version does not know. (Read
        // on its own, without a tree of the whole file: the module loads this
        // in nginx's master, whose heap every worker inherits.)
        #[derive(Deserialize)]
        struct Format {
            format: Option<serde_json::Value>,
            agents: Option<serde::de::IgnoredAny>,
        }
        const WHAT: &str = "crawlward_catalogue takes the crawlward-catalogue.json that crawlward render writes, not the policy, a log or a ranges file";
        let head = serde_json::from_str::<Format>(text).map_err(|e| format!("invalid catalogue file: not a JSON object ({e}): {WHAT}"))?;
        if head.format.is_none() && head.agents.is_none() {
            return Err(format!("invalid catalogue file: a JSON object, but no catalogue (no format, no agents): {WHAT}"));
        }
        let format = head.format.and_then(|f| f.as_u64());
        if format != Some(u64::from(IDENTITY_FORMAT)) {
            return Err(format!(
                "catalogue file format {} is not {IDENTITY_FORMAT}: render it again with the crawlward that matches this module",
                format.map_or("(none)".to_string(), |f| f.to_string())
            ));
        }
        let file: IdentityFile = serde_json::from_str(text).map_err(|e| format!("invalid catalogue file: {e}"))?;
        let mut problems = Vec::new();
        let mut identity = Identity::build(false, &file.agents, &file.actions, Some(file.block_status), &file.machine_doors, &mut problems);
        for (i, p) in file.deep_paths.iter().enumerate() {
            if let Err(e) = crate::robots::check_robots_pattern(p) {
                problems.push(Problem { path: format!("deep_paths[{i}]"), message: e });
            }
        }
        identity.deep_paths = DeepPaths::new(file.deep_paths);
        if let Some(layers) = &file.layers {
            layers.check(&mut problems);
        }
        identity.layers = file.layers;
        identity.ranges_dir = file.ranges_dir;
        identity.ladder = file.ladder;
        for (i, p) in file.signatures_required.iter().enumerate() {
            if !p.starts_with('/') {
                problems.push(Problem { path: format!("signatures_required[{i}]"), message: format!("\"{p}\" is not a path") });
            }
        }
        identity.signatures_required = file.signatures_required;
        if let Some(why) = file.front_controller.as_deref().and_then(crate::app_path::front_controller_problem) {
            problems.push(Problem { path: "front_controller".into(), message: format!("expected {why}") });
        }
        identity.front_controller = file.front_controller;
        if problems.is_empty() {
            Ok(identity)
        } else {
            // paths as in this file, not in the policy it was rendered from
            let list: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.path.strip_prefix("catalogue.").unwrap_or(&p.path), p.message)).collect();
            Err(format!("invalid catalogue file (rendered from {}): {}", file.policy, list.join("; ")))
        }
    }

    /// The JSON file for the module: every agent resolved and explicit, in match order.
    pub fn to_file(&self, policy: &str) -> IdentityFile {
        let action = |a: Action| Some(a.as_str().to_string());
        let mut actions = Actions { empty: action(self.empty_action), spoofed: action(self.spoofed_action), ..Actions::default() };
        for p in Purpose::ALL {
            *actions.of(p) = action(self.purpose_action(p));
        }
        IdentityFile {
            generated: None,
            format: IDENTITY_FORMAT,
            policy: policy.to_string(),
            block_status: self.block_status,
            actions,
            machine_doors: self.machine_doors.clone(),
            deep_paths: self.deep_paths.patterns().to_vec(),
            agents: self.catalogue.agents().iter().map(Agent::to_spec).collect(),
            layers: self.layers.clone(),
            ranges_dir: self.ranges_dir.clone(),
            ladder: self.ladder.clone(),
            signatures_required: self.signatures_required.clone(),
            front_controller: self.front_controller.clone(),
        }
    }

    /// When `crawlward update-ranges` last confirmed the list `agent`'s ranges come
    /// from (downloaded it, or found it unchanged): the modification time of the
    /// kept copy, in seconds since the epoch. None when there is no kept copy (the
    /// snapshot's ranges) or no ranges_dir.
    pub fn ranges_checked(&self, agent: &Agent) -> Option<i64> {
        let path = std::path::Path::new(self.ranges_dir.as_deref()?).join(crate::ranges::file_name(agent.ranges_url.as_deref()?));
        let modified = std::fs::metadata(path).ok()?.modified().ok()?;
        modified.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs() as i64)
    }

    /// How old an agent's ranges are at `now` (seconds since the epoch): since the
    /// list was last confirmed by update-ranges, or else since its own time stamp
    /// (a snapshot list: when it was published). None for ranges the policy gives,
    /// or with no time stamp.
    pub fn ranges_age(&self, agent: &Agent, now: i64) -> Option<i64> {
        let as_of = agent.ranges_as_of.as_deref().filter(|a| *a != "policy")?;
        let stamped = crate::ranges::epoch_seconds(as_of);
        let newest = stamped.max(self.ranges_checked(agent))?;
        Some((now - newest).max(0))
    }

    /// The action for a purpose.
    pub fn purpose_action(&self, purpose: Purpose) -> Action {
        // the list is made in the enum's order, so the purpose's own place holds it
        match self.purpose_actions.get(purpose as usize) {
            Some((p, a)) if *p == purpose => *a,
            _ => self.purpose_actions.iter().find(|(p, _)| *p == purpose).map_or(Action::Allow, |(_, a)| *a),
        }
    }

    /// Whether a request (its path, and `?` and the query if any) is on a deep
    /// path, for the crawl budget's tighter limit.
    pub fn is_deep(&self, path_and_query: &[u8]) -> bool {
        self.deep_paths.is_match(path_and_query)
    }

    /// The path the application sees of `uri` (nginx's normalized `$uri`):
    /// every path prefix is matched on it ([`crate::app_path`]).
    pub fn app_path<'a>(&self, uri: &'a [u8]) -> &'a [u8] {
        crate::app_path::application_path(uri, self.front_controller.as_deref())
    }

    /// Which door `path` (a normalized URI path, no query) is.
    pub fn door(&self, path: &[u8]) -> Door {
        if path == b"/robots.txt" {
            Door::Robots
        } else if self.machine_doors.iter().any(|d| path.starts_with(d.as_bytes())) {
            Door::Machine
        } else {
            Door::None
        }
    }

    /// Whether `path` (a normalized URI path) is one only signed agents may
    /// use. robots.txt and the site's own key directory never are: every
    /// client may read them.
    pub fn signature_required(&self, path: &[u8]) -> bool {
        !self.signature_exempt(path) && self.signatures_required.iter().any(|p| path.starts_with(p.as_bytes()))
    }

    /// robots.txt and the site's own key directory, which a signature never refuses.
    pub fn signature_exempt(&self, path: &[u8]) -> bool {
        path == b"/robots.txt" || path == crate::directories::WELL_KNOWN_PATH.as_bytes()
    }

    /// The door a request's path is, as far as it can matter for `verdict`:
    /// for a User-Agent that names no agent (a browser's), allowed on every
    /// route and never budgeted, only robots.txt (which the facet guard leaves
    /// alone) is told apart, without the machine doors' prefixes.
    pub fn route(&self, path: &[u8], verdict: Verdict) -> Door {
        if verdict == Verdict::None && path != b"/robots.txt" {
            Door::None
        } else {
            self.door(path)
        }
    }

    /// The User-Agent rule (layer 1 of heratio.org's guide), for every door, purpose and verdict.
    pub fn ua_action(&self, door: Door, purpose: Option<Purpose>, verdict: Verdict) -> Action {
        match (door, verdict, purpose) {
            (Door::Robots, _, _) => Action::Allow,
            (_, Verdict::None, _) => Action::Allow,
            // AI-training crawlers may read only robots.txt: refused at the doors too,
            // whether their claim is verified or not.
            (Door::Machine, _, Some(Purpose::AiTraining)) => self.purpose_action(Purpose::AiTraining),
            (Door::Machine, _, _) => Action::Allow,
            (Door::None, Verdict::Empty, _) => self.empty_action,
            (Door::None, Verdict::Spoofed, _) => self.spoofed_action,
            (Door::None, _, Some(p)) => self.purpose_action(p),
            (Door::None, _, None) => Action::Allow,
        }
    }

    /// Whether a claim's verification can change what happens to a request
    /// on `door` from an agent of `purpose`: not on robots.txt (open to all,
    /// never limited), nor when the policy refuses the purpose the same way
    /// whatever the verdict (an AI-training crawler with the default
    /// actions). The module starts no DNS lookup when it cannot.
    pub fn verdict_matters(&self, door: Door, purpose: Purpose) -> bool {
        if door == Door::Robots {
            return false;
        }
        let first = self.ua_action(door, Some(purpose), Verdict::Verified);
        !matches!(first, Action::Block(_)) || [Verdict::Unverified, Verdict::Spoofed].iter().any(|v| self.ua_action(door, Some(purpose), *v) != first)
    }

    /// What a request's Web Bot Auth signature decides of who is asking,
    /// before its address is looked at: a verified signature from a
    /// directory a catalogue agent names is that agent, verified (an agent
    /// acting for a person sends a browser User-Agent: the signature is its
    /// only proof); an invalid one makes the User-Agent's claim (`ua_agent`,
    /// or none) spoofed. None when it decides nothing: no signature, no
    /// known key, a directory no agent names.
    pub fn signed(&self, outcome: crate::signature::Outcome, directory: Option<&str>, ua_agent: Option<usize>) -> Option<(Option<usize>, Verdict)> {
        use crate::signature::Outcome;
        match outcome {
            Outcome::Verified => directory.and_then(|d| self.catalogue.by_signature_agent(d)).map(|named| (Some(named), Verdict::Verified)),
            Outcome::Invalid => Some((ua_agent, Verdict::Spoofed)),
            Outcome::Unverified | Outcome::None => None,
        }
    }

    /// The verdict for a User-Agent's agent (if any) and the client address.
    pub fn verdict(&self, user_agent: &[u8], agent: Option<&Agent>, ip: IpAddr) -> Verdict {
        // nginx trims the spaces around a header value; an empty one is "no User-Agent"
        if user_agent.is_empty() {
            return Verdict::Empty;
        }
        match agent {
            None => Verdict::None,
            Some(a) if a.ranges.is_empty() => Verdict::Unverified,
            Some(a) if a.in_ranges(canonical_ip(ip)) => Verdict::Verified,
            Some(_) => Verdict::Spoofed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Door;

    /// The age of a downloaded list runs from the last time update-ranges found it
    /// as it is (the kept copy's modification time), else from its own time stamp;
    /// a snapshot list's from its publication; the policy's own ranges have none.
    #[test]
    fn ranges_age_from_the_last_check_of_the_kept_copy() {
        let dir = std::env::temp_dir().join(format!("crawlward-age-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = "https://openai.com/gptbot.json";
        let kept = dir.join(crate::ranges::file_name(url));
        std::fs::write(&kept, format!("{{\"url\": \"{url}\", \"fetched\": \"2026-01-01T00:00:00Z\", \"prefixes\": [\"157.55.39.0/24\"]}}")).unwrap();
        let policy_path = dir.join("p.yaml");
        std::fs::write(
            &policy_path,
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\ncatalogue: {agents: [{name: bingbot, ranges: [192.0.2.0/24]}]}\n",
        )
        .unwrap();
        let p = crate::load_with(&policy_path, &crate::LoadOptions { ranges_dir: Some(dir.clone()), root: None }).unwrap();
        let id = &p.identity;
        assert_eq!(id.ranges_dir.as_deref(), Some(dir.to_str().unwrap()), "named: a list came from there");
        let now = crate::ranges::epoch_seconds("2026-12-01T00:00:00Z").unwrap();
        let gpt = id.catalogue.get("GPTBot").unwrap();
        let set = |secs: u64| {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            std::fs::File::options().write(true).open(&kept).unwrap().set_modified(t).unwrap();
        };
        set(crate::ranges::epoch_seconds("2026-11-30T00:00:00Z").unwrap() as u64);
        assert_eq!(id.ranges_age(gpt, now), Some(86_400), "a day since the last check");
        set(946_684_800);
        assert_eq!(
            id.ranges_age(gpt, now),
            Some(now - crate::ranges::epoch_seconds("2026-01-01T00:00:00Z").unwrap()),
            "an older file time: the fetch time counts"
        );
        let google = id.catalogue.get("Googlebot").unwrap();
        let published = crate::ranges::epoch_seconds(google.ranges_as_of.as_deref().unwrap()).unwrap();
        assert_eq!(id.ranges_age(google, now), Some(now - published), "the snapshot: since it was published");
        assert_eq!(id.ranges_age(id.catalogue.get("bingbot").unwrap(), now), None, "ranges from the policy have no age");
        std::fs::remove_dir_all(&dir).unwrap();
        let none = crate::load_str("t.yaml", "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\n").unwrap();
        assert_eq!(none.identity.ranges_dir, None, "no downloads: no directory to read");
    }

    fn policy() -> crate::Policy {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../nginx-conf/catalogue.yaml");
        crate::load(&path).unwrap()
    }

    #[test]
    fn the_rendered_file_rebuilds_the_same_decisions() {
        let p = policy();
        let json = serde_json::to_string(&p.identity.to_file("catalogue.yaml")).unwrap();
        let back = Identity::from_json(&json).unwrap();
        assert_eq!(back.catalogue.agents().len(), p.identity.catalogue.agents().len());
        // the module's file leaves the sources out: every worker would keep them
        assert!(!json.contains("\"source\""), "the rendered catalogue file holds no source");
        assert!(p.identity.catalogue.agents().iter().all(|a| !a.source.is_empty()), "the policy's catalogue keeps them");
        for ua in ["Mozilla/5.0 (compatible; GPTBot/1.2)", "python-requests/2.31", "Googlebot/2.1", "Mozilla/5.0 Chrome/131", "Rivetbot/1", ""] {
            let a = p.identity.catalogue.classify(ua.as_bytes()).map(|a| a.name.clone());
            let b = back.catalogue.classify(ua.as_bytes()).map(|a| a.name.clone());
            assert_eq!(a, b, "{ua}");
        }
        let purposes: Vec<Option<Purpose>> = std::iter::once(None).chain(Purpose::ALL.into_iter().map(Some)).collect();
        for door in Door::ALL {
            for purpose in &purposes {
                for verdict in Verdict::ALL {
                    assert_eq!(p.identity.ua_action(door, *purpose, verdict), back.ua_action(door, *purpose, verdict));
                }
            }
        }
        assert_eq!(back.machine_doors, p.identity.machine_doors);
    }

    #[test]
    fn a_route_is_told_apart_only_where_it_can_matter() {
        let id = policy().identity;
        for path in [&b"/api/v1/records"[..], b"/sitemap.xml", b"/robots.txt", b"/record/1"] {
            for verdict in Verdict::ALL {
                let (full, route) = (id.door(path), id.route(path, verdict));
                if verdict == Verdict::None {
                    // a browser: the same action and the same budget on either door
                    assert_eq!(id.ua_action(full, None, verdict), id.ua_action(route, None, verdict));
                    assert!(!crate::budget::counted(true, route, verdict, true) && !crate::budget::counted(true, full, verdict, true));
                    assert_eq!(route == Door::Robots, full == Door::Robots, "{}", String::from_utf8_lossy(path));
                } else {
                    assert_eq!(route, full);
                }
            }
        }
    }

    #[test]
    fn a_purpose_action_is_found_in_any_order_of_the_list() {
        let p = policy();
        let id = &p.identity;
        // built in the enum's order, the purpose's own place
        for (i, purpose) in Purpose::ALL.into_iter().enumerate() {
            assert_eq!(id.purpose_actions[i].0, purpose);
        }
        let mut reversed = id.clone();
        reversed.purpose_actions.reverse();
        for purpose in Purpose::ALL {
            assert_eq!(reversed.purpose_action(purpose), id.purpose_action(purpose), "{purpose:?}");
        }
        assert_eq!(id.purpose_action(Purpose::AiTraining), Action::Block(444));
        reversed.purpose_actions.retain(|(p, _)| *p != Purpose::Seo);
        assert_eq!(reversed.purpose_action(Purpose::Seo), Action::Allow);
    }

    #[test]
    fn a_verdict_matters_only_where_it_can_change_the_action() {
        let p = policy();
        let id = &p.identity;
        for purpose in Purpose::ALL {
            assert!(!id.verdict_matters(Door::Robots, purpose), "robots.txt, {purpose:?}");
        }
        // the defaults refuse AI-training crawlers everywhere but robots.txt, verified or not
        assert!(!id.verdict_matters(Door::None, Purpose::AiTraining));
        assert!(!id.verdict_matters(Door::Machine, Purpose::AiTraining));
        // allowed purposes: a spoofed claim is refused, a verified one exempt from limits
        for purpose in [Purpose::Search, Purpose::AiSearch, Purpose::Archive, Purpose::Crawler] {
            assert!(id.verdict_matters(Door::None, purpose), "{purpose:?}");
            assert!(id.verdict_matters(Door::Machine, purpose), "machine door, {purpose:?}");
        }
        // a spoofed claim sent to the throttle class: the verdict changes the action
        let mut throttled = id.clone();
        throttled.spoofed_action = Action::Throttle;
        assert!(throttled.verdict_matters(Door::None, Purpose::AiTraining));
        assert!(!throttled.verdict_matters(Door::Machine, Purpose::AiTraining));
        // AI training allowed: verification matters again
        throttled.purpose_actions.iter_mut().filter(|(p, _)| *p == Purpose::AiTraining).for_each(|(_, a)| *a = Action::Allow);
        assert!(throttled.verdict_matters(Door::Machine, Purpose::AiTraining));
    }

    #[test]
    fn a_signature_names_its_agent_and_a_broken_one_is_spoofed() {
        use crate::signature::Outcome;
        let p = policy();
        let id = &p.identity;
        let chatgpt = id.catalogue.by_signature_agent("https://chatgpt.com");
        assert_eq!(chatgpt.map(|i| id.catalogue.agents()[i].name.as_str()), Some("ChatGPT-Agent"));
        // a browser User-Agent: the signature is the proof
        assert_eq!(id.signed(Outcome::Verified, Some("https://chatgpt.com"), None), Some((chatgpt, Verdict::Verified)));
        // a directory no agent names, or a key the file lacks: the User-Agent and the address decide
        assert_eq!(id.signed(Outcome::Verified, Some("https://agent.example"), None), None);
        assert_eq!(id.signed(Outcome::Unverified, Some("https://chatgpt.com"), None), None);
        assert_eq!(id.signed(Outcome::None, None, Some(3)), None);
        // a broken signature is a spoofed claim, whatever the User-Agent claimed
        assert_eq!(id.signed(Outcome::Invalid, Some("https://chatgpt.com"), None), Some((None, Verdict::Spoofed)));
        assert_eq!(id.signed(Outcome::Invalid, None, Some(3)), Some((Some(3), Verdict::Spoofed)));
        // the rendered file keeps the directories
        let back = Identity::from_json(&serde_json::to_string(&id.to_file("catalogue.yaml")).unwrap()).unwrap();
        assert_eq!(back.catalogue.by_signature_agent("https://chatgpt.com"), chatgpt);
    }

    #[test]
    fn a_bad_file_names_its_problems() {
        let p = policy();
        let mut file = p.identity.to_file("catalogue.yaml");
        file.agents[3].ua = Some("Bad(bot".into());
        file.actions.seo = Some("deny".into());
        let err = Identity::from_json(&serde_json::to_string(&file).unwrap()).unwrap_err();
        assert!(err.starts_with("invalid catalogue file (rendered from catalogue.yaml): "), "{err}");
        assert!(err.contains("; agents[3].ua: invalid ua pattern \"Bad(bot\"") || err.contains(": agents[3].ua: invalid ua pattern \"Bad(bot\""), "{err}");
        assert!(err.contains("actions.seo: invalid action \"deny\""), "{err}");
        assert!(Identity::from_json("{").unwrap_err().starts_with("invalid catalogue file: "));
        // a file of another kind is told so, and what the directive takes
        for (other, says) in [
            ("127.0.0.1 - - [04/Dec/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"x\"\n", "not a JSON object"),
            ("site:\n  canonical_url: https://example.org\n", "not a JSON object"),
            ("{\"creationTime\": \"2026-11-29\", \"prefixes\": []}", "a JSON object, but no catalogue"),
        ] {
            let err = Identity::from_json(other).unwrap_err();
            assert!(
                err.contains(says) && err.ends_with("takes the crawlward-catalogue.json that crawlward render writes, not the policy, a log or a ranges file"),
                "{err}"
            );
        }
        file.format = 99;
        assert!(Identity::from_json(&serde_json::to_string(&file).unwrap()).unwrap_err().contains("format 99"));
    }
}
