//! The words every decision is made in: a crawler's purpose, a verdict on
//! its claim, an action, the kind of route, and the rule that decided.

use std::fmt;

/// Which kind of route a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Door {
    /// An ordinary page.
    None,
    /// A machine door (API, OAI-PMH, ResourceSync, sitemap): the User-Agent
    /// rule does not apply, but AI-training crawlers stay refused.
    Machine,
    /// robots.txt: open to everyone, always.
    Robots,
}

impl Door {
    pub const ALL: [Door; 3] = [Door::None, Door::Machine, Door::Robots];

    pub fn as_str(self) -> &'static str {
        match self {
            Door::None => "",
            Door::Machine => "door",
            Door::Robots => "robots",
        }
    }
}

/// The rule that decided a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// nginx itself refused the request line: no rule of crawlward's ran.
    BadRequest,
    /// A redirect host of the site (`site.redirect_hosts`): one 301 to the canonical host.
    CanonicalHost,
    Maintenance,
    BotBlocker,
    /// A path only signed agents may use, without a verified signature
    /// (`module.signatures.required`); or a replayed signature.
    Signature,
    FacetCrawlerParams,
    FacetNoReferer,
    Pass,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::BadRequest => "bad-request",
            Rule::CanonicalHost => "canonical-host",
            Rule::Maintenance => "maintenance",
            Rule::BotBlocker => "bot-blocker",
            Rule::Signature => "signature",
            Rule::FacetCrawlerParams => "facet-crawler-params",
            Rule::FacetNoReferer => "facet-no-referer",
            Rule::Pass => "pass",
        }
    }
}

/// Why a crawler fetches pages, as its operator documents it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Purpose {
    Search,
    AiSearch,
    AiUser,
    AiTraining,
    Seo,
    Archive,
    Preview,
    /// Feed readers and feed fetchers, hosted or self-hosted: people's tools.
    Feed,
    /// Uptime, performance and synthetic monitors.
    Monitor,
    /// Academic and research crawlers.
    Research,
    Scanner,
    Scripting,
    /// Browser automation and headless browsers.
    Automation,
    /// A general-purpose crawler of a known operator that fits no other purpose.
    Crawler,
    /// A User-Agent that reads as a bot (a bot word, a contact address, a
    /// library's or a headless browser's shape) but names no catalogue agent:
    /// the catalogue's `unknown-bot` entry, named by the bot's own product token.
    UnknownBot,
}

impl Purpose {
    pub const ALL: [Purpose; 15] = [
        Purpose::Search,
        Purpose::AiSearch,
        Purpose::AiUser,
        Purpose::AiTraining,
        Purpose::Seo,
        Purpose::Archive,
        Purpose::Preview,
        Purpose::Feed,
        Purpose::Monitor,
        Purpose::Research,
        Purpose::Scanner,
        Purpose::Scripting,
        Purpose::Automation,
        Purpose::Crawler,
        Purpose::UnknownBot,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Search => "search",
            Purpose::AiSearch => "ai-search",
            Purpose::AiUser => "ai-user",
            Purpose::AiTraining => "ai-training",
            Purpose::Seo => "seo",
            Purpose::Archive => "archive",
            Purpose::Preview => "preview",
            Purpose::Feed => "feed",
            Purpose::Monitor => "monitor",
            Purpose::Research => "research",
            Purpose::Scanner => "scanner",
            Purpose::Scripting => "scripting",
            Purpose::Automation => "automation",
            Purpose::Crawler => "crawler",
            Purpose::UnknownBot => "unknown-bot",
        }
    }

    pub fn parse(s: &str) -> Option<Purpose> {
        Purpose::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Whether an agent of this purpose is a library or a tool that others
    /// build on (scripting, automation): its name yields to any other agent's
    /// in the same User-Agent (`matcher.rs`).
    pub fn yields(self) -> bool {
        matches!(self, Purpose::Scripting | Purpose::Automation)
    }

    /// Whether agents of this purpose read robots.txt and can be named there
    /// (scanners, bare libraries and automation do not read it; an unknown
    /// bot has no token to name), so blocking them renders a robots.txt group.
    pub fn reads_robots(self) -> bool {
        !matches!(self, Purpose::Scanner | Purpose::Scripting | Purpose::Automation | Purpose::UnknownBot)
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the User-Agent rule does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Allow,
    /// Refuse with this status: 444 (close without a reply) or 403.
    Block(u16),
    /// Send to the strict rate class.
    Throttle,
}

impl Action {
    /// The token used in nginx variables and logs: `allow`, `throttle`,
    /// `block-444` or `block-403`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Throttle => "throttle",
            Action::Block(403) => "block-403",
            Action::Block(_) => "block-444",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Block(s) => write!(f, "block ({s})"),
            a => f.write_str(a.as_str()),
        }
    }
}

/// What is known about the identity a request claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The User-Agent names no known agent: a browser or an unknown client.
    None,
    /// No User-Agent at all (or only white space).
    Empty,
    /// A known agent that publishes no ranges: the claim cannot be checked.
    Unverified,
    /// A known agent, from inside its published ranges.
    Verified,
    /// A known agent that publishes ranges, from outside them.
    Spoofed,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [Verdict::None, Verdict::Empty, Verdict::Unverified, Verdict::Verified, Verdict::Spoofed];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::None => "none",
            Verdict::Empty => "empty",
            Verdict::Unverified => "unverified",
            Verdict::Verified => "verified",
            Verdict::Spoofed => "spoofed",
        }
    }

    /// Whether the request counts as a crawler for the facet guard and budgets:
    /// it names an agent, or sends no User-Agent at all (the forge's crawl-budget review).
    pub fn is_crawler(self) -> bool {
        !matches!(self, Verdict::None)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod index_order {
    /// The module counts by position in these lists; the orders are part of its zone layout.
    #[test]
    fn verdicts_and_actions_keep_their_order() {
        use crate::{Action, Verdict};
        let v: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(v, ["none", "empty", "unverified", "verified", "spoofed"]);
        let a: Vec<&str> = [Action::Allow, Action::Throttle, Action::Block(444), Action::Block(403)].iter().map(|a| a.as_str()).collect();
        assert_eq!(a, ["allow", "throttle", "block-444", "block-403"]);
    }
}
