//! What `crawlward top` shows, from the status endpoints' JSON: the nodes'
//! counts added up, the rates since the last poll, sorted and filtered, and
//! the screen's lines as plain text (styled by `screen.rs`). Pure: tested
//! without a terminal.

use serde_json::Value;
use std::collections::BTreeMap;

/// One node's answer: its JSON, or why there is none.
pub struct Poll {
    pub url: String,
    pub answer: Result<Value, String>,
}

/// One agent and verdict, all nodes together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub agent: String,
    pub purpose: String,
    pub verdict: String,
    pub requests: u64,
    /// Requests a second since the last poll.
    pub rate: f64,
    pub ok: u64,
    pub s429: u64,
    pub s444: u64,
    pub s5xx: u64,
}

impl Row {
    /// A verified search crawler that got 429 or 5xx: what the person on call must see first.
    pub fn slowed_search(&self) -> bool {
        self.purpose == "search" && self.verdict == "verified" && self.s429 + self.s5xx > 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Rate,
    Requests,
    Refused,
    Agent,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Rate => Sort::Requests,
            Sort::Requests => Sort::Refused,
            Sort::Refused => Sort::Agent,
            Sort::Agent => Sort::Rate,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Rate => "rate",
            Sort::Requests => "requests",
            Sort::Refused => "refused",
            Sort::Agent => "agent",
        }
    }
}

/// An account as the status endpoints tell it apart: its name, where it came
/// from (`key` or `variable`) and whether the name is a long one's short form.
type AccountKey = (String, String, bool);

/// Everything on the screen but the keys' state.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub nodes: usize,
    /// The nodes that did not answer, and why.
    pub down: Vec<(String, String)>,
    pub rows: Vec<Row>,
    /// Upstream seconds over the window, the crawlers' part, and the window's minutes.
    pub seconds: f64,
    pub crawler_seconds: f64,
    pub window_minutes: u64,
    pub refusals: Vec<(String, u64)>,
    /// 429 and 5xx answered to verified search crawlers, all nodes.
    pub search_slowed: u64,
    /// Per budget zone: name, keys used, keys, browse requests in flight (with a cap), slowdown end.
    pub budgets: Vec<Budget>,
    /// The ladder's clients per rung (L0 to L6, routed), all nodes.
    pub rungs: Option<Vec<(String, u64)>>,
    /// API accounts by how much of their quota they used, fullest first:
    /// name, tier, share (1 at the quota). None without quotas.
    pub accounts: Option<Vec<(String, String, f64)>>,
}

/// Accounts at or above this share of their quota are "near" it.
pub const NEAR_QUOTA: f64 = 0.8;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget {
    pub zone: String,
    pub used: u64,
    pub keys: u64,
    pub in_flight: Option<u64>,
    /// `Some(None)`: a slowdown of verified crawlers with no end; `Some(Some(t))`: until t.
    pub slowdown: Option<Option<String>>,
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// A string of the status JSON as the terminal may print it: names can come from
/// feeds, so anything but printable ASCII is written `\xNN`, as analyze writes them.
fn text(v: &Value) -> String {
    crawlward_policy::escape::escaped(v.as_str().unwrap_or("-").as_bytes()).to_string()
}

impl View {
    /// The nodes' answers added up; `previous` (the last poll's rows) and
    /// `elapsed_s` give the rates.
    pub fn build(polls: &[Poll], previous: &[Row], elapsed_s: f64) -> View {
        let mut view = View { nodes: polls.len(), window_minutes: 15, ..View::default() };
        let mut rows: BTreeMap<(String, String), Row> = BTreeMap::new();
        let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
        let mut budgets: BTreeMap<String, Budget> = BTreeMap::new();
        let mut rungs: Option<BTreeMap<usize, (String, u64)>> = None;
        let mut accounts: Option<BTreeMap<AccountKey, (String, f64)>> = None;
        for poll in polls {
            let j = match &poll.answer {
                Ok(j) => j,
                Err(why) => {
                    view.down.push((poll.url.clone(), why.clone()));
                    continue;
                }
            };
            for r in j["requests"].as_array().into_iter().flatten() {
                let key = (text(&r["agent"]), text(&r["verdict"]));
                let row = rows.entry(key.clone()).or_insert_with(|| Row { agent: key.0.clone(), verdict: key.1.clone(), ..Row::default() });
                row.purpose = text(&r["purpose"]);
                row.requests = row.requests.saturating_add(u(&r["count"]));
            }
            for r in j["responses"].as_array().into_iter().flatten() {
                let key = (text(&r["agent"]), text(&r["verdict"]));
                let row = rows.entry(key.clone()).or_insert_with(|| Row { agent: key.0.clone(), verdict: key.1.clone(), ..Row::default() });
                if row.purpose.is_empty() {
                    row.purpose = text(&r["purpose"]);
                }
                let s = &r["statuses"];
                row.ok = row.ok.saturating_add(u(&s["2xx"])).saturating_add(u(&s["3xx"]));
                row.s429 = row.s429.saturating_add(u(&s["429"]));
                row.s444 = row.s444.saturating_add(u(&s["444"]));
                row.s5xx = row.s5xx.saturating_add(u(&s["5xx"]));
            }
            let t = &j["server_time"];
            view.seconds += t["seconds"].as_f64().unwrap_or(0.0);
            view.crawler_seconds += t["crawler_seconds"].as_f64().unwrap_or(0.0);
            view.window_minutes = t["window_minutes"].as_u64().unwrap_or(15);
            for (layer, n) in j["refusals_by_layer"].as_object().into_iter().flatten() {
                let total = refusals.entry(crawlward_policy::escape::escaped(layer.as_bytes()).to_string()).or_insert(0);
                *total = total.saturating_add(u(n));
            }
            view.search_slowed = view.search_slowed.saturating_add(u(&j["verified_search"]["429_and_5xx"]));
            for b in j["budgets"].as_array().into_iter().flatten() {
                let name = text(&b["zone"]["name"]);
                let e = budgets.entry(name.clone()).or_insert_with(|| Budget { zone: name, ..Budget::default() });
                e.used = e.used.saturating_add(u(&b["zone"]["keys_used"]));
                e.keys = e.keys.saturating_add(u(&b["zone"]["keys"]));
                if b["browse_cap"].is_object() {
                    let n = e.in_flight.get_or_insert(0);
                    *n = n.saturating_add(u(&b["browse_cap"]["in_flight"]));
                }
                let s = &b["verified_slowdown"];
                if s["active"].as_bool() == Some(true) {
                    e.slowdown = Some(s["until"].as_str().map(|_| text(&s["until"])));
                }
            }
            for q in j["quotas"].as_array().into_iter().flatten() {
                let list = accounts.get_or_insert_with(BTreeMap::new);
                for a in q["top_accounts"].as_array().into_iter().flatten() {
                    // with sync every node reports the cluster's use: the largest, not the sum; a
                    // keyed account and an account variable's of the same name are two, and so are a
                    // long name's short form and a name spelled as it
                    let key = (text(&a["account"]), text(&a["source"]), a["hashed"].as_bool().unwrap_or(false));
                    let e = list.entry(key).or_insert_with(|| (text(&a["tier"]), 0.0));
                    e.1 = f64::max(e.1, a["quota_used"].as_f64().unwrap_or(0.0));
                }
            }
            if let Some(list) = j["ladder"]["rungs"].as_array() {
                let map = rungs.get_or_insert_with(BTreeMap::new);
                for (i, r) in list.iter().enumerate() {
                    let e = map.entry(i).or_insert_with(|| (text(&r["rung"]), 0));
                    e.1 = e.1.saturating_add(u(&r["clients"]));
                }
            }
        }
        let before: BTreeMap<(&str, &str), u64> = previous.iter().map(|r| ((r.agent.as_str(), r.verdict.as_str()), r.requests)).collect();
        view.rows = rows
            .into_values()
            .map(|mut r| {
                if let Some(was) = before.get(&(r.agent.as_str(), r.verdict.as_str())).filter(|_| elapsed_s > 0.0) {
                    r.rate = r.requests.saturating_sub(*was) as f64 / elapsed_s;
                }
                r
            })
            .collect();
        view.refusals = refusals.into_iter().filter(|(_, n)| *n > 0).collect();
        view.refusals.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        view.budgets = budgets.into_values().collect();
        view.rungs = rungs.map(|m| m.into_values().collect());
        view.accounts = accounts.map(|m| {
            // a name that both the keys file and a sign-in gave: two accounts, said so
            let mut names: BTreeMap<String, usize> = BTreeMap::new();
            for (a, _, _) in m.keys() {
                *names.entry(a.clone()).or_default() += 1;
            }
            let mut v: Vec<(String, String, f64)> = m
                .into_iter()
                .map(|((a, source, _), (t, s))| {
                    let shown = if names[&a] > 1 { format!("{a} [{}]", if source == "key" { "key" } else { "sign-in" }) } else { a };
                    (shown, t, s)
                })
                .collect();
            v.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
            v
        });
        view
    }

    /// The rows to show: those whose agent, purpose or verdict contains
    /// `filter` (any case), a verified search crawler slowed down first, then by `sort`.
    pub fn shown(&self, sort: Sort, filter: &str) -> Vec<&Row> {
        let needle = filter.to_lowercase();
        let mut rows: Vec<&Row> =
            self.rows.iter().filter(|r| needle.is_empty() || [&r.agent, &r.purpose, &r.verdict].iter().any(|f| f.to_lowercase().contains(&needle))).collect();
        rows.sort_by(|a, b| {
            b.slowed_search().cmp(&a.slowed_search()).then_with(|| match sort {
                Sort::Rate => b.rate.total_cmp(&a.rate).then(b.requests.cmp(&a.requests)),
                Sort::Requests => b.requests.cmp(&a.requests),
                Sort::Refused => (b.s429 + b.s444 + b.s5xx).cmp(&(a.s429 + a.s444 + a.s5xx)),
                Sort::Agent => a.agent.to_lowercase().cmp(&b.agent.to_lowercase()),
            })
        });
        rows
    }

    /// The crawlers' share of upstream time, if any upstream time was counted.
    pub fn share(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.crawler_seconds / self.seconds)
    }

    /// The summary lines above the table, each at most `width` characters.
    pub fn summary(&self, width: usize) -> Vec<String> {
        let mut lines = Vec::new();
        let up = self.nodes - self.down.len();
        let mut nodes = format!("{up} of {} node{} answering", self.nodes, if self.nodes == 1 { "" } else { "s" });
        if let Some((url, why)) = self.down.first() {
            nodes.push_str(&format!("; {url}: {why}"));
        }
        lines.push(nodes);
        lines.push(match self.share() {
            Some(s) => format!(
                "crawlers' share of upstream time, last {} min: {:.0}% ({:.1} s of {:.1} s)",
                self.window_minutes,
                s * 100.0,
                self.crawler_seconds,
                self.seconds
            ),
            None => format!("crawlers' share of upstream time, last {} min: no upstream time yet", self.window_minutes),
        });
        lines.push(if self.search_slowed > 0 {
            format!("VERIFIED SEARCH CRAWLERS GOT {} 429/5xx: see the rows marked !", self.search_slowed)
        } else {
            "verified search crawlers: no 429 or 5xx".to_string()
        });
        let refused: Vec<String> = self.refusals.iter().map(|(l, n)| format!("{l} {n}")).collect();
        lines.push(format!("refused by layer: {}", if refused.is_empty() { "none".to_string() } else { refused.join(", ") }));
        let budgets: Vec<String> = self
            .budgets
            .iter()
            .map(|b| {
                let mut s = format!("{} {}%", b.zone, b.used.saturating_mul(100).checked_div(b.keys).unwrap_or(0).min(999));
                if let Some(n) = b.in_flight {
                    s.push_str(&format!(", browse cap {n} in flight"));
                }
                match &b.slowdown {
                    Some(Some(until)) => s.push_str(&format!(", verified slowed until {until}")),
                    Some(None) => s.push_str(", verified slowed, NO END"),
                    None => {}
                }
                s
            })
            .collect();
        if !budgets.is_empty() {
            lines.push(format!("budgets: {}", budgets.join("; ")));
        }
        if let Some(rungs) = &self.rungs {
            let r: Vec<String> = rungs.iter().map(|(name, n)| format!("{name} {n}")).collect();
            lines.push(format!("ladder clients: {}", r.join(" ")));
        }
        if let Some(accounts) = &self.accounts {
            let near: Vec<String> =
                accounts.iter().filter(|(_, _, s)| *s >= NEAR_QUOTA).map(|(a, t, s)| format!("{a} ({t}) {:.0}%", (s * 100.0).min(999.0))).collect();
            lines.push(format!("accounts near their quota: {}", if near.is_empty() { "none".to_string() } else { near.join(", ") }));
        }
        lines.into_iter().map(|l| cut(&l, width)).collect()
    }
}

/// The table's header line.
pub const HEADER: &str = "  agent             purpose     verdict     req/s requests     ok  429  444  5xx";

/// A table row, as wide as [`HEADER`] (`!` marks a verified search crawler slowed down).
pub fn row_line(r: &Row, width: usize) -> String {
    let mark = if r.slowed_search() { "! " } else { "  " };
    let line = format!(
        "{mark}{:<17} {:<11} {:<10} {:>6.1} {:>8} {:>6} {:>4} {:>4} {:>4}",
        cut(&r.agent, 17),
        cut(&r.purpose, 11),
        cut(&r.verdict, 10),
        r.rate,
        r.requests,
        r.ok,
        r.s429,
        r.s444,
        r.s5xx
    );
    cut(&line, width)
}

/// At most `width` characters.
pub fn cut(s: &str, width: usize) -> String {
    s.chars().take(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(googlebot_429: u64) -> Value {
        serde_json::json!({
            "requests": [
                { "agent": "Googlebot", "purpose": "search", "verdict": "verified", "action": "allow", "count": 10 },
                { "agent": "-", "purpose": "none", "verdict": "none", "action": "allow", "count": 40 },
                { "agent": "GPTBot", "purpose": "ai-training", "verdict": "spoofed", "action": "block-444", "count": 5 },
            ],
            "responses": [
                { "agent": "Googlebot", "verdict": "verified", "statuses": { "2xx": 10 - googlebot_429, "429": googlebot_429 } },
                { "agent": "-", "verdict": "none", "statuses": { "2xx": 40 } },
                { "agent": "GPTBot", "verdict": "spoofed", "statuses": { "444": 5 } },
            ],
            "verified_search": { "429_and_5xx": googlebot_429 },
            "server_time": { "window_minutes": 15, "seconds": 10.0, "crawler_seconds": 4.0 },
            "refusals_by_layer": { "bot-blocker": 5, "budget": googlebot_429 },
            "budgets": [ { "zone": { "name": "crawlward_budget", "keys": 1000, "keys_used": 250 },
                           "browse_cap": { "in_flight": 2 }, "verified_slowdown": { "until": "2026-12-07T06:00:00Z", "active": true } } ],
        })
    }

    #[test]
    fn a_hostile_node_cannot_write_to_the_terminal_or_overflow_the_sums() {
        let hostile = serde_json::json!({
            "requests": [ { "agent": "Evil\u{1b}]52;c;aGk=\u{7}", "purpose": "\u{1b}[2J", "verdict": "none", "count": u64::MAX } ],
            "responses": [ { "agent": "Evil\u{1b}]52;c;aGk=\u{7}", "verdict": "none", "statuses": { "2xx": u64::MAX, "3xx": u64::MAX } } ],
            "refusals_by_layer": { "\u{1b}]0;owned\u{7}": u64::MAX },
            "verified_search": { "429_and_5xx": u64::MAX },
            "budgets": [ { "zone": { "name": "z\u{1b}[31m", "keys": 10, "keys_used": u64::MAX },
                           "verified_slowdown": { "until": "\u{1b}]52;c;eA==\u{7}", "active": true } } ],
        });
        let polls = vec![Poll { url: "http://a/s".into(), answer: Ok(hostile.clone()) }, Poll { url: "http://b/s".into(), answer: Ok(hostile) }];
        let v = View::build(&polls, &[], 0.0);
        let mut screen = v.summary(200);
        screen.extend(v.rows.iter().map(|r| row_line(r, 200)));
        for line in &screen {
            assert!(line.bytes().all(|b| (0x20..0x7f).contains(&b)), "only printable ASCII reaches the terminal: {line:?}");
        }
        assert_eq!((v.rows[0].requests, v.rows[0].ok, v.search_slowed), (u64::MAX, u64::MAX, u64::MAX), "sums saturate");
        assert!(screen.iter().any(|l| l.contains("refused by layer: \\x1B]0;owned\\x07")), "{screen:?}");
    }

    #[test]
    fn nodes_add_up_and_a_slowed_search_crawler_comes_first() {
        let polls = vec![
            Poll { url: "http://a/s".into(), answer: Ok(node(0)) },
            Poll { url: "http://b/s".into(), answer: Ok(node(2)) },
            Poll { url: "http://c/s".into(), answer: Err("connection refused".into()) },
        ];
        let v = View::build(&polls, &[], 0.0);
        let google = v.rows.iter().find(|r| r.agent == "Googlebot").unwrap();
        assert_eq!((google.requests, google.ok, google.s429), (20, 18, 2));
        assert_eq!(v.search_slowed, 2);
        assert_eq!(v.share(), Some(0.4));
        let shown = v.shown(Sort::Requests, "");
        assert_eq!(shown[0].agent, "Googlebot", "slowed down: first whatever the sort");
        assert_eq!(shown[1].agent, "-");
        assert!(row_line(shown[0], 200).starts_with("! Googlebot"));
        let summary = v.summary(200).join("\n");
        assert!(summary.contains("2 of 3 nodes answering; http://c/s: connection refused"), "{summary}");
        assert!(summary.contains("crawlers' share of upstream time, last 15 min: 40% (8.0 s of 20.0 s)"), "{summary}");
        assert!(summary.contains("VERIFIED SEARCH CRAWLERS GOT 2 429/5xx"), "{summary}");
        assert!(summary.contains("refused by layer: bot-blocker 10, budget 2"), "{summary}");
        assert!(summary.contains("budgets: crawlward_budget 25%, browse cap 4 in flight, verified slowed until 2026-12-07T06:00:00Z"), "{summary}");
        assert!(v.summary(30).iter().all(|l| l.chars().count() <= 30));
        assert_eq!(HEADER.chars().count(), 80);
        assert!(v.rows.iter().all(|r| row_line(r, 200).chars().count() == 80), "a row is as wide as the header");
    }

    #[test]
    fn rates_come_from_the_last_poll_and_the_filter_matches_any_column() {
        let polls = vec![Poll { url: "a".into(), answer: Ok(node(0)) }];
        let first = View::build(&polls, &[], 0.0);
        let mut previous = first.rows.clone();
        for r in &mut previous {
            r.requests -= 4;
        }
        let v = View::build(&polls, &previous, 2.0);
        assert!(v.rows.iter().all(|r| r.rate == 2.0));
        let ai: Vec<&str> = v.shown(Sort::Agent, "AI-TRAIN").iter().map(|r| r.agent.as_str()).collect();
        assert_eq!(ai, ["GPTBot"]);
        let sorted: Vec<&str> = v.shown(Sort::Refused, "").iter().map(|r| r.agent.as_str()).collect();
        assert_eq!(sorted[0], "GPTBot");
        assert_eq!(Sort::Rate.next().next().next().next(), Sort::Rate);
    }

    /// Accounts near their quota: the fullest first, each once across nodes
    /// (with sync every node reports the cluster's use), only those at 80% or more.
    #[test]
    fn accounts_near_their_quota() {
        let node = |acme: f64| {
            serde_json::json!({ "quotas": [ { "top_accounts": [
                { "account": "acme", "tier": "standard", "quota_used": acme },
                { "account": "beta", "tier": "partner", "quota_used": 0.85 },
                { "account": "calm", "tier": "standard", "quota_used": 0.2 },
            ] } ] })
        };
        let polls = vec![Poll { url: "a".into(), answer: Ok(node(1.0)) }, Poll { url: "b".into(), answer: Ok(node(0.9)) }];
        let v = View::build(&polls, &[], 0.0);
        let summary = v.summary(200).join("\n");
        assert!(summary.contains("accounts near their quota: acme (standard) 100%, beta (partner) 85%"), "{summary}");
        // the keys file's acme and a user who signed up as acme: two accounts, told apart
        let both = serde_json::json!({ "quotas": [ { "top_accounts": [
            { "account": "acme", "source": "key", "tier": "partner", "quota_used": 0.95 },
            { "account": "acme", "source": "variable", "tier": "standard", "quota_used": 0.9 },
        ] } ] });
        let v = View::build(&[Poll { url: "a".into(), answer: Ok(both) }], &[], 0.0);
        let summary = v.summary(200).join("\n");
        assert!(summary.contains("accounts near their quota: acme [key] (partner) 95%, acme [sign-in] (standard) 90%"), "{summary}");
        let none = View::build(&[Poll { url: "a".into(), answer: Ok(serde_json::json!({ "quotas": [ { "top_accounts": [] } ] })) }], &[], 0.0);
        assert!(none.summary(200).join("\n").contains("accounts near their quota: none"));
        let without = View::build(&[Poll { url: "a".into(), answer: Ok(serde_json::json!({})) }], &[], 0.0);
        assert!(!without.summary(200).join("\n").contains("accounts near"), "no line without quotas");
    }

    #[test]
    fn client_written_names_cannot_reach_the_terminal_raw() {
        let j = serde_json::json!({ "requests": [ { "agent": "Evil\u{1b}[8m\u{202e}", "purpose": "x", "verdict": "none", "count": 1 } ] });
        let v = View::build(&[Poll { url: "a".into(), answer: Ok(j) }], &[], 0.0);
        assert_eq!(v.rows[0].agent, "Evil\\x1B[8m\\xE2\\x80\\xAE");
    }
}
