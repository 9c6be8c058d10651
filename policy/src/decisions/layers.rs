//! The layers that stock nginx enforces (`limit_conn` for the browse cap,
//! `limit_req` for the rate classes, `add_header` for Retry-After, the
//! throttle log) and the decisions that feed them: which rate class a request
//! is counted in, whether it takes a place in the browse cap, and why a
//! response refused it.
//!
//! For stock nginx, `crawlward render` enumerates these decisions into `map`
//! tables. With the module, the module makes them from the same data (the
//! `layers` section of the catalogue file) with this code, once per request,
//! and nginx's limits read the answers from its variables: the rendered
//! configuration then needs no map or regex for them. `crawlward explain`
//! calls the same functions through [`crate::Policy`].

use crate::budget;
use crate::checks::{check_path, problem};
use crate::{Action, Problem, Rule, Verdict};
use serde::{Deserialize, Serialize};

/// What the module needs of the policy's `browse_shed`, `rate_limits`,
/// `maintenance` and `crawl_budget` to decide the layers nginx enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layers {
    /// The browse cap (`browse_shed`): its pages and who takes no place in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browse_cap: Option<BrowseCap>,
    /// The rate classes (`rate_limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_classes: Option<RateClasses>,
    /// Retry-After of the maintenance 503, when the policy has `maintenance`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_retry_after: Option<u32>,
    /// Whether the policy has crawl budgets: their 429s go to the throttle log.
    #[serde(default)]
    pub budgets: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrowseCap {
    /// Path prefixes of the browse pages.
    pub paths: Vec<String>,
    /// Verified crawlers take no place in the cap (`cap_exempt_verified`).
    pub exempt_verified: bool,
    /// Retry-After of the cap's 503.
    pub retry_after: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateClasses {
    /// In the policy's order; exactly one has no paths: the default class.
    pub classes: Vec<RateClass>,
    /// Verified crawlers are in no class.
    pub exempt_verified: bool,
    /// Whether the strict class `throttle` exists (for the `throttle` action).
    pub throttle: bool,
    /// Retry-After of a class's 429.
    pub retry_after: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateClass {
    pub name: String,
    pub paths: Vec<String>,
}

/// The class a request is counted in: one of [`RateClasses::classes`], by
/// its place, or the strict class `throttle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassRef {
    Class(usize),
    Throttle,
}

impl RateClasses {
    /// The class of a path: the class with the longest matching prefix, else the default class.
    pub fn uri_class(&self, path: &[u8]) -> Option<ClassRef> {
        let mut best: Option<(usize, usize)> = None;
        for (i, c) in self.classes.iter().enumerate() {
            for p in &c.paths {
                if path.starts_with(p.as_bytes()) && best.is_none_or(|(_, len)| p.len() > len) {
                    best = Some((i, p.len()));
                }
            }
        }
        best.map(|(i, _)| i).or_else(|| self.classes.iter().position(|c| c.paths.is_empty())).map(ClassRef::Class)
    }

    /// The class a request of this action and verdict, on a path of class
    /// `uri_class`, is counted in; None when it is exempt.
    /// A verified crawler is in no class while `exempt_verified` holds, the
    /// throttle class included: a `throttle` action for its purpose throttles
    /// the impostors, never the crawler itself.
    pub fn limit_class(&self, action: Action, verdict: Verdict, uri_class: ClassRef) -> Option<ClassRef> {
        if verdict == Verdict::Verified && self.exempt_verified {
            return None;
        }
        if action == Action::Throttle && self.throttle {
            return Some(ClassRef::Throttle);
        }
        Some(uri_class)
    }

    /// The class's name, as its `limit_req_zone` is named (`crawlward_<name>`).
    pub fn name(&self, class: ClassRef) -> &str {
        match class {
            ClassRef::Class(i) => self.classes.get(i).map_or("", |c| c.name.as_str()),
            ClassRef::Throttle => "throttle",
        }
    }
}

impl BrowseCap {
    /// Whether `path` (a normalized `$uri`) is a browse page.
    pub fn is_browse(&self, path: &[u8]) -> bool {
        self.paths.iter().any(|p| path.starts_with(p.as_bytes()))
    }

    /// Whether a request with this verdict takes a place in the cap.
    pub fn counts(&self, verdict: Verdict) -> bool {
        !(verdict == Verdict::Verified && self.exempt_verified)
    }
}

/// Whether a request with this action meets the browse cap and the rate
/// classes: a request the bot-blocker refuses is the bot-blocker's, except in
/// the module's dry run, where nothing is refused.
pub fn passes(action: Action, dry_run: bool) -> bool {
    dry_run || !matches!(action, Action::Block(_))
}

/// What nginx's `limit_req` or `limit_conn` recorded for a request
/// (`$limit_req_status`, `$limit_conn_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitStatus {
    /// The limit did not run.
    None,
    Passed,
    Delayed,
    Rejected,
    DelayedDryRun,
    RejectedDryRun,
}

impl LimitStatus {
    pub const ALL: [LimitStatus; 6] =
        [LimitStatus::None, LimitStatus::Passed, LimitStatus::Delayed, LimitStatus::Rejected, LimitStatus::DelayedDryRun, LimitStatus::RejectedDryRun];

    /// The variable's value (empty when the limit did not run).
    pub fn as_str(self) -> &'static str {
        match self {
            LimitStatus::None => "",
            LimitStatus::Passed => "PASSED",
            LimitStatus::Delayed => "DELAYED",
            LimitStatus::Rejected => "REJECTED",
            LimitStatus::DelayedDryRun => "DELAYED_DRY_RUN",
            LimitStatus::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }

    /// From `r->main->limit_req_status`: 0, or 1 to 5 for PASSED, DELAYED,
    /// REJECTED, DELAYED_DRY_RUN, REJECTED_DRY_RUN (nginx 1.17.6 and later).
    pub fn of_limit_req(code: u32) -> LimitStatus {
        match code {
            1 => LimitStatus::Passed,
            2 => LimitStatus::Delayed,
            3 => LimitStatus::Rejected,
            4 => LimitStatus::DelayedDryRun,
            5 => LimitStatus::RejectedDryRun,
            _ => LimitStatus::None,
        }
    }

    /// From `r->main->limit_conn_status`: 0, or 1 to 3 for PASSED, REJECTED,
    /// REJECTED_DRY_RUN (nginx 1.17.6 and later).
    pub fn of_limit_conn(code: u32) -> LimitStatus {
        match code {
            1 => LimitStatus::Passed,
            2 => LimitStatus::Rejected,
            3 => LimitStatus::RejectedDryRun,
            _ => LimitStatus::None,
        }
    }
}

/// Why crawlward refused a request (`$crawlward_refusal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    BotBlocker,
    Maintenance,
    Facet,
    Rate,
    BrowseCap,
    Budget,
    /// The proportional ladder: a rung that slows (429), refuses (429) or blocks (403).
    Ladder,
    /// A Web Bot Auth signature: replayed (429), or missing on a path for signed agents (403).
    Signature,
    /// An account's API quota (429).
    Quota,
}

impl Refused {
    pub const ALL: [Refused; 9] = [
        Refused::BotBlocker,
        Refused::Maintenance,
        Refused::Facet,
        Refused::Rate,
        Refused::BrowseCap,
        Refused::Budget,
        Refused::Ladder,
        Refused::Signature,
        Refused::Quota,
    ];

    /// Whether a response with `status` can be a refusal (403, 429, 444, 503):
    /// every other one is answered without looking further.
    pub fn may_answer(status: usize) -> bool {
        matches!(status, 403 | 429 | 444 | 503)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Refused::BotBlocker => "bot-blocker",
            Refused::Maintenance => "maintenance",
            Refused::Facet => "facet",
            Refused::Rate => "rate",
            Refused::BrowseCap => "browse-cap",
            Refused::Budget => "budget",
            Refused::Ladder => "ladder",
            Refused::Signature => "signature",
            Refused::Quota => "quota",
        }
    }
}

/// What the response to a request shows: the status (as `$status` has it)
/// and what each layer recorded.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub status: usize,
    pub action: Action,
    /// `$crawlward_maintenance` as the rendered server block sets it: `on` or empty.
    pub maintenance: &'a [u8],
    /// The facet rule that refused (or would have, in a dry run).
    pub facet: Option<Rule>,
    pub limit_req: LimitStatus,
    pub limit_conn: LimitStatus,
    /// The crawl budget that refused (or would have).
    pub budget: Option<budget::Refusal>,
    /// Whether the ladder refused (enforce mode).
    pub ladder: bool,
    /// Whether the request was refused for its signature (a replay, or a path for signed agents).
    pub signature: bool,
    /// Whether its account's API quota refused it.
    pub quota: bool,
}

impl Layers {
    /// The rate class a request is counted in (None: in none). robots.txt is
    /// never rate-limited; a request the bot-blocker refuses meets no class.
    pub fn rate_class(&self, path: &[u8], action: Action, verdict: Verdict, dry_run: bool) -> Option<ClassRef> {
        let rc = self.rate_classes.as_ref()?;
        if path == b"/robots.txt" || !passes(action, dry_run) {
            return None;
        }
        rc.limit_class(action, verdict, rc.uri_class(path)?)
    }

    /// Whether a request takes a place in the browse cap.
    pub fn in_browse_cap(&self, path: &[u8], action: Action, verdict: Verdict, dry_run: bool) -> bool {
        self.browse_cap.as_ref().is_some_and(|b| b.is_browse(path) && b.counts(verdict)) && passes(action, dry_run)
    }

    /// Why the response refused the request, read from its status and what
    /// each layer recorded; None when it was not refused by crawlward (or
    /// not yet answered). The order and the conditions are those of the
    /// `$crawlward_refusal` map that `crawlward render` wrote for the module
    /// before the module decided it (the render tests check both agree).
    pub fn refusal(answer: &Answer) -> Option<Refused> {
        let a = answer;
        let calm = a.maintenance.is_empty();
        match a.status {
            444 if a.action.as_str() == "block-444" => Some(Refused::BotBlocker),
            403 if a.action.as_str() == "block-403" => Some(Refused::BotBlocker),
            503 if a.maintenance == b"on" => Some(Refused::Maintenance),
            429 | 403 if calm && a.signature => Some(Refused::Signature),
            429 if calm && a.facet.is_some() => Some(Refused::Facet),
            // a dry run's REJECTED_DRY_RUN refused nothing: a 429 beside it is another's
            429 if calm && a.limit_req == LimitStatus::Rejected => Some(Refused::Rate),
            503 if calm && a.limit_conn == LimitStatus::Rejected => Some(Refused::BrowseCap),
            429 if calm && a.budget.is_some() => Some(Refused::Budget),
            429 | 403 if calm && a.ladder => Some(Refused::Ladder),
            429 if calm && a.quota => Some(Refused::Quota),
            _ => None,
        }
    }

    /// The Retry-After that nginx adds for a refusal (the module sends its own
    /// with its 429s: the facet guard's and the budgets').
    pub fn retry_after(&self, refused: Refused) -> Option<u32> {
        match refused {
            Refused::Maintenance => self.maintenance_retry_after,
            Refused::BrowseCap => self.browse_cap.as_ref().map(|b| b.retry_after),
            Refused::Rate => self.rate_classes.as_ref().map(|r| r.retry_after),
            Refused::BotBlocker | Refused::Facet | Refused::Budget | Refused::Ladder | Refused::Signature | Refused::Quota => None,
        }
    }

    /// Whether the throttle log keeps a request refused so: 429s and browse-cap 503s.
    pub fn throttled(&self, refused: Refused) -> bool {
        match refused {
            Refused::Facet | Refused::Rate | Refused::BrowseCap => true,
            Refused::Budget => self.budgets,
            Refused::Ladder | Refused::Quota => true,
            Refused::BotBlocker | Refused::Maintenance | Refused::Signature => false,
        }
    }

    /// The checks the policy's own validation makes, for a catalogue file.
    pub(crate) fn check(&self, problems: &mut Vec<Problem>) {
        if let Some(b) = &self.browse_cap {
            for (i, p) in b.paths.iter().enumerate() {
                check_path(p, &format!("layers.browse_cap.paths[{i}]"), problems);
            }
        }
        if let Some(rc) = &self.rate_classes {
            for (i, c) in rc.classes.iter().enumerate() {
                if !crate::checks::valid_class_name(&c.name) || c.name == "throttle" || rc.classes[..i].iter().any(|o| o.name == c.name) {
                    problem(problems, format!("layers.rate_classes.classes[{i}].name"), format!("invalid or duplicate class name \"{}\"", c.name));
                }
                for (j, p) in c.paths.iter().enumerate() {
                    check_path(p, &format!("layers.rate_classes.classes[{i}].paths[{j}]"), problems);
                }
            }
            let defaults = rc.classes.iter().filter(|c| c.paths.is_empty()).count();
            if defaults != 1 {
                problem(problems, "layers.rate_classes.classes", format!("exactly one rate class must have no paths (the default class); found {defaults}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_refusal_is_named_and_neither_throttled_nor_given_a_retry_after() {
        let answer = |status: usize, signature: bool| Answer {
            status,
            action: Action::Allow,
            maintenance: b"",
            facet: None,
            limit_req: LimitStatus::Passed,
            limit_conn: LimitStatus::Passed,
            budget: None,
            ladder: false,
            signature,
            quota: false,
        };
        assert_eq!(Layers::refusal(&answer(429, true)), Some(Refused::Signature));
        let quota = Answer { quota: true, ..answer(429, false) };
        assert_eq!(Layers::refusal(&quota), Some(Refused::Quota));
        assert_eq!(Layers::refusal(&Answer { status: 200, ..quota }), None);
        assert_eq!(Layers::refusal(&answer(403, true)), Some(Refused::Signature));
        assert_eq!(Layers::refusal(&answer(403, false)), None, "the site's own 403");
        assert_eq!(Refused::Signature.as_str(), "signature");
        let layers = Layers::default();
        assert_eq!(layers.retry_after(Refused::Signature), None);
        assert!(!layers.throttled(Refused::Signature));
        assert!(Refused::may_answer(444) && !Refused::may_answer(404));
    }

    fn classes() -> RateClasses {
        let c = |n: &str, p: &[&str]| RateClass { name: n.into(), paths: p.iter().map(|s| s.to_string()).collect() };
        RateClasses {
            classes: vec![c("default", &[]), c("search", &["/search", "/glam/search"]), c("api", &["/api/"]), c("api_v1", &["/api/v1/"])],
            exempt_verified: true,
            throttle: true,
            retry_after: 60,
        }
    }

    #[test]
    fn the_longest_prefix_names_the_class_and_the_default_takes_the_rest() {
        let rc = classes();
        let name = |p: &str| rc.uri_class(p.as_bytes()).map(|c| rc.name(c));
        assert_eq!(name("/api/v1/records"), Some("api_v1"));
        assert_eq!(name("/api/v2/records"), Some("api"));
        assert_eq!(name("/glam/search?q"), Some("search"));
        assert_eq!(name("/record/1"), Some("default"));
        assert_eq!(rc.limit_class(Action::Allow, Verdict::Verified, ClassRef::Class(1)), None, "verified crawlers are exempt");
        assert_eq!(rc.limit_class(Action::Throttle, Verdict::Spoofed, ClassRef::Class(1)), Some(ClassRef::Throttle));
        // `search: throttle` throttles a spoofed Googlebot, never the verified one, unless the
        // policy counts verified crawlers in its classes
        assert_eq!(rc.limit_class(Action::Throttle, Verdict::Verified, ClassRef::Class(1)), None, "a verified crawler is not throttled");
        let counted = RateClasses { exempt_verified: false, ..classes() };
        assert_eq!(counted.limit_class(Action::Throttle, Verdict::Verified, ClassRef::Class(1)), Some(ClassRef::Throttle));
        assert_eq!(rc.name(ClassRef::Throttle), "throttle");
    }

    #[test]
    fn robots_txt_and_refused_requests_meet_no_class_nor_the_cap() {
        let layers = Layers {
            browse_cap: Some(BrowseCap { paths: vec!["/browse".into()], exempt_verified: true, retry_after: 30 }),
            rate_classes: Some(classes()),
            ..Layers::default()
        };
        assert_eq!(layers.rate_class(b"/robots.txt", Action::Throttle, Verdict::Spoofed, false), None);
        assert_eq!(layers.rate_class(b"/x", Action::Block(444), Verdict::Spoofed, false), None);
        assert_eq!(layers.rate_class(b"/x", Action::Block(444), Verdict::Spoofed, true), Some(ClassRef::Class(0)), "a dry run refuses nothing");
        assert!(layers.in_browse_cap(b"/browse?a=1", Action::Allow, Verdict::None, false));
        assert!(!layers.in_browse_cap(b"/browse", Action::Allow, Verdict::Verified, false), "cap_exempt_verified");
        assert!(!layers.in_browse_cap(b"/browse", Action::Block(403), Verdict::None, false));
        assert!(!layers.in_browse_cap(b"/record", Action::Allow, Verdict::None, false));
    }
}
