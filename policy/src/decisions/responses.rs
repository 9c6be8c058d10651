//! What each crawler got: responses by status class, and which layer
//! refused a request that a verified search crawler should not have been
//! refused (Google's crawler documentation: Google slows down the whole host on 429s and 5xx).

use crate::budget::Refusal;
use crate::Rule;
use std::fmt;

/// A response's status class, as the counters keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    S2xx,
    S3xx,
    S404,
    S429,
    /// nginx's 444: the connection closed without a response.
    S444,
    /// Every other 4xx (499 included: the client closed the connection).
    S4xx,
    S5xx,
    /// No status (the request ended before one was set), 1xx, HTTP/0.9.
    Other,
}

impl StatusClass {
    pub const COUNT: usize = 8;

    pub const ALL: [StatusClass; StatusClass::COUNT] = [
        StatusClass::S2xx,
        StatusClass::S3xx,
        StatusClass::S404,
        StatusClass::S429,
        StatusClass::S444,
        StatusClass::S4xx,
        StatusClass::S5xx,
        StatusClass::Other,
    ];

    pub fn of(status: usize) -> StatusClass {
        match status {
            200..=299 => StatusClass::S2xx,
            300..=399 => StatusClass::S3xx,
            404 => StatusClass::S404,
            429 => StatusClass::S429,
            444 => StatusClass::S444,
            400..=499 => StatusClass::S4xx,
            500..=599 => StatusClass::S5xx,
            _ => StatusClass::Other,
        }
    }

    /// Its place in [`StatusClass::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StatusClass::S2xx => "2xx",
            StatusClass::S3xx => "3xx",
            StatusClass::S404 => "404",
            StatusClass::S429 => "429",
            StatusClass::S444 => "444",
            StatusClass::S4xx => "4xx",
            StatusClass::S5xx => "5xx",
            StatusClass::Other => "other",
        }
    }

    /// What Google's crawler documentation says a verified search crawler must get only on purpose.
    pub fn slows_crawlers(self) -> bool {
        matches!(self, StatusClass::S429 | StatusClass::S5xx)
    }
}

/// What a request met on its way, as the module and nginx recorded it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Met {
    /// `$limit_req_status` is `REJECTED`.
    pub limit_req_rejected: bool,
    /// `$limit_conn_status` is `REJECTED`.
    pub limit_conn_rejected: bool,
    /// The bot-blocker's action was a refusal.
    pub blocked: bool,
    pub facet: Option<Rule>,
    pub budget: Option<Refusal>,
    /// Refused for its Web Bot Auth signature (a replay, or a path for signed agents).
    pub signature: bool,
    /// Refused by the ladder's rung (enforce mode).
    pub ladder: bool,
    /// Under `crawlward_dry_run` the module's own layers refuse nothing.
    pub dry_run: bool,
}

/// The layer that answered a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    RateClass,
    BrowseCap,
    BotBlocker,
    Signature,
    Ladder,
    FacetGuard(Rule),
    Budget(Refusal),
    /// Nothing of ours or of nginx's limits: the upstream or the site's own config.
    Site,
}

impl Layer {
    /// Only the layer that refused a request has it recorded as refused: the
    /// others did not run, or let it through.
    pub fn of(met: &Met) -> Layer {
        if met.limit_req_rejected {
            Layer::RateClass
        } else if met.limit_conn_rejected {
            Layer::BrowseCap
        } else if met.dry_run {
            Layer::Site
        } else if met.blocked {
            Layer::BotBlocker
        } else if met.signature {
            Layer::Signature
        } else if met.ladder {
            Layer::Ladder
        } else if let Some(rule) = met.facet {
            Layer::FacetGuard(rule)
        } else if let Some(refusal) = met.budget {
            Layer::Budget(refusal)
        } else {
            Layer::Site
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::RateClass => f.write_str("a rate class (limit_req)"),
            Layer::BrowseCap => f.write_str("the browse cap (limit_conn)"),
            Layer::BotBlocker => f.write_str("the bot-blocker"),
            Layer::Signature => f.write_str("the signature check"),
            Layer::Ladder => f.write_str("the ladder"),
            Layer::FacetGuard(rule) => write!(f, "the facet guard ({})", rule.as_str()),
            Layer::Budget(r) => write!(f, "the crawl budget ({}{})", r.budget.as_str(), if r.deep { ", deep" } else { "" }),
            Layer::Site => f.write_str("the site (upstream or other)"),
        }
    }
}

/// The groups the server's time is told by: each purpose, then people and
/// requests that name no agent, then no User-Agent. `crawlward analyze` and
/// the module's live figures group alike, so they agree on the same traffic.
pub const TIME_GROUPS: usize = crate::Purpose::ALL.len() + 2;

/// The group of a request by its agent's purpose and its verdict.
pub fn time_group(purpose: Option<crate::Purpose>, verdict: crate::Verdict) -> usize {
    match (purpose, verdict) {
        (_, crate::Verdict::Empty) => TIME_GROUPS - 1,
        (Some(p), _) => crate::Purpose::ALL.iter().position(|x| *x == p).unwrap_or(TIME_GROUPS - 2),
        (None, _) => TIME_GROUPS - 2,
    }
}

pub fn time_group_name(g: usize) -> &'static str {
    match g {
        g if g < crate::Purpose::ALL.len() => crate::Purpose::ALL[g].as_str(),
        g if g == crate::Purpose::ALL.len() => "people and unknown",
        _ => "no User-Agent",
    }
}

/// Seconds between two warnings about one agent.
pub const WARN_EVERY_SECS: u64 = 60;

/// Whether to warn now, given when the agent was last warned about (0: never).
pub fn warn_due(last: u64, now: u64) -> bool {
    last == 0 || now.saturating_sub(last) >= WARN_EVERY_SECS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;

    #[test]
    fn classes() {
        let got: Vec<&str> =
            [200, 204, 301, 304, 400, 403, 404, 429, 444, 499, 500, 502, 503, 0, 101, 9, 600].iter().map(|s| StatusClass::of(*s).as_str()).collect();
        assert_eq!(got, ["2xx", "2xx", "3xx", "3xx", "4xx", "4xx", "404", "429", "444", "4xx", "5xx", "5xx", "5xx", "other", "other", "other", "other"]);
        for (i, c) in StatusClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        let slow: Vec<&str> = StatusClass::ALL.iter().filter(|c| c.slows_crawlers()).map(|c| c.as_str()).collect();
        assert_eq!(slow, ["429", "5xx"]);
    }

    #[test]
    fn layers() {
        let budget = Refusal { budget: Budget::Agent, deep: true, retry_after_ms: 5000 };
        let cases = [
            (Met { limit_req_rejected: true, ..Met::default() }, "a rate class (limit_req)"),
            (Met { limit_conn_rejected: true, ..Met::default() }, "the browse cap (limit_conn)"),
            (Met { blocked: true, ..Met::default() }, "the bot-blocker"),
            (Met { facet: Some(Rule::FacetNoReferer), ..Met::default() }, "the facet guard (facet-no-referer)"),
            (Met { budget: Some(budget), ..Met::default() }, "the crawl budget (agent, deep)"),
            (Met::default(), "the site (upstream or other)"),
            // under dry run the module's layers only log
            (Met { budget: Some(budget), dry_run: true, ..Met::default() }, "the site (upstream or other)"),
            (Met { facet: Some(Rule::FacetCrawlerParams), dry_run: true, ..Met::default() }, "the site (upstream or other)"),
            (Met { limit_req_rejected: true, dry_run: true, ..Met::default() }, "a rate class (limit_req)"),
        ];
        for (met, want) in cases {
            assert_eq!(Layer::of(&met).to_string(), want, "{met:?}");
        }
    }

    #[test]
    fn warn_once_a_minute() {
        assert!(warn_due(0, 1_700_000_000));
        assert!(!warn_due(1_700_000_000, 1_700_000_000));
        assert!(!warn_due(1_700_000_000, 1_700_000_059));
        assert!(warn_due(1_700_000_000, 1_700_000_060));
        // a clock that went back never warns twice in a row
        assert!(!warn_due(1_700_000_000, 1_699_999_000));
    }
}
