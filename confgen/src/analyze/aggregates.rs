//! An aggregates file: one row per client, already aggregated over the
//! window, in the shape of the proportional classifier's `OBSERVED` (YAML or JSON).
//!
//!     window: 24h          # optional: the policy's classifier.window
//!     clients:
//!       - name: partner-price-feed
//!         requests: 8640
//!         unique_paths: 14
//!         top_paths: [[/api/price, 4200], [/api/stock, 3100], [/api/catalog, 1340]]
//!         auth_frac: 0.0
//!         egress_ips: 4
//!         agents: [[partner-sdk/2.1, 100]]          # family, percent of requests
//!         sessions: [[sess_9f21, 8640, 1]]          # id, requests, distinct addresses
//!         honoured: [declared-ua, robots.txt, api-key, contact]
//!         declared: licensed feed                    # optional
//!         verified: false                            # optional: identity proven out of band

use super::report::Candidate;
use crawlward_policy::classifier::{self, Observed, Sessions, Settings};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    #[serde(default)]
    pub window: Option<String>,
    pub clients: Vec<Row>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub name: String,
    pub requests: u64,
    pub unique_paths: u64,
    #[serde(default)]
    pub top_paths: Vec<(String, u64)>,
    #[serde(default)]
    pub auth_frac: f64,
    #[serde(default)]
    pub egress_ips: u64,
    #[serde(default)]
    pub agents: Vec<(String, f64)>,
    #[serde(default)]
    pub sessions: Option<Vec<(String, u64, u64)>>,
    #[serde(default)]
    pub honoured: Vec<String>,
    #[serde(default)]
    pub declared: Option<String>,
    #[serde(default)]
    pub verified: bool,
}

/// Read an aggregates file; the error names the file, line and column.
pub fn read(path: &str, settings: &mut Settings) -> Result<Vec<Candidate>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    if super::looks_like_log(std::path::Path::new(path)) {
        return Err(format!(
            "{path} is an access log: --aggregates takes a YAML file of per-client totals (docs/analyze.md); give a log as a LOG argument: crawlward analyze [POLICY] {path}"
        ));
    }
    let file: File = serde_yaml::from_str(&text).map_err(|e| format!("{path}: {}", crawlward_policy::in_plain_words(&e.to_string())))?;
    if let Some(w) = &file.window {
        match crawlward_policy::fcrdns::parse_time(w).filter(|ms| *ms >= 60_000) {
            Some(ms) => settings.window_minutes = ms as f64 / 60_000.0,
            None => return Err(format!("{path}: invalid window \"{w}\": expected e.g. 24h")),
        }
    }
    let mut out = Vec::new();
    for (i, r) in file.clients.iter().enumerate() {
        if r.requests == 0 {
            return Err(format!("{path}: clients[{i}] ({}): requests must be at least 1", r.name));
        }
        if out.iter().any(|c: &Candidate| c.name == r.name) {
            return Err(format!("{path}: clients[{i}]: duplicate client \"{}\"", r.name));
        }
        let observed = Observed {
            requests: r.requests as f64,
            unique_paths: r.unique_paths as f64,
            top_path_hits: r.top_paths.iter().map(|(_, h)| *h as f64).collect(),
            auth_frac: r.auth_frac,
            top_agent_share: r.agents.iter().map(|(_, p)| *p).fold(0.0, f64::max) / 100.0,
            sessions: r.sessions.as_ref().filter(|s| !s.is_empty()).map(|s| Sessions {
                max_requests: s.iter().map(|x| x.1 as f64).fold(0.0, f64::max),
                count: s.len() as f64,
                cross_ip: s.iter().filter(|x| x.2 > 1).count() as f64,
            }),
            rules_honoured: r.honoured.len() as f64,
        };
        out.push(Candidate {
            name: r.name.clone(),
            kind: "aggregate",
            agent: r.agents.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|a| a.0.clone()).unwrap_or_default(),
            // the caller looks the agent up in the catalogue
            purpose: None,
            window_start: None,
            requests: r.requests,
            unique_paths: r.unique_paths as f64,
            egress_ips: r.egress_ips as f64,
            honoured: r.honoured.iter().map(|h| std::borrow::Cow::Owned(h.clone())).collect(),
            scored: classifier::score(&observed, settings),
            verified: r.verified,
            disallowed: 0,
            declared: r.declared.clone(),
        });
    }
    Ok(out)
}
