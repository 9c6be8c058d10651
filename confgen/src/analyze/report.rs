//! What `crawlward analyze` found, as one value: the terminal table, the
//! JSON and the HTML report are three views of it.

use super::stats::{group_name, Analyzer, ClientKey, Scoring, GROUPS, STATUS_CLASSES};
use crawlward_policy::classifier::{self, Label, Placement, Scored, Settings, SUBSCORES};
use crawlward_policy::{Purpose, Verdict};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Serialize)]
pub struct Report {
    pub policy: String,
    pub inputs: Vec<InputReport>,
    /// `log` or `aggregates`.
    pub source: &'static str,
    pub lines: u64,
    pub parsed: u64,
    pub unparseable: Vec<UnparseableRow>,
    pub formats: BTreeMap<String, u64>,
    pub first: Option<String>,
    pub last: Option<String>,
    pub interval_seconds: i64,
    pub agents: Vec<AgentRow>,
    pub crawler_share: Share,
    pub intervals: Vec<IntervalRow>,
    pub checks: Checks,
    pub robots_ignored: RobotsIgnored,
    pub networks: Vec<NetworkRow>,
    pub classifier: ClassifierReport,
    /// Lines whose `agent=` differs from what the policy's catalogue finds (the log was written under another catalogue).
    pub agent_disagreements: u64,
    /// Clients the analyzer gave up for others once it held `MAX_CLIENTS`
    /// (the fewest requests first), and their requests until then: counted
    /// per agent, status and interval, not scored as clients.
    pub clients_given_up: u64,
    pub clients_given_up_requests: u64,
    /// What each rung of the ladder answered, by population (a log with `rung=`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub served_by_rung: Vec<RungServedRow>,
    /// Metered API requests by account (a log with `account=`), and the burner pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounts: Option<super::accounts::AccountsReport>,
    pub suggestion: String,
}

/// One rung and population of the ladder's log: its requests and what they got.
#[derive(Debug, Serialize)]
pub struct RungServedRow {
    pub rung: &'static str,
    pub population: &'static str,
    pub requests: u64,
    /// By status class (2xx, 3xx, 4xx, 429, 444, 5xx).
    pub statuses: BTreeMap<&'static str, u64>,
}

#[derive(Debug, Serialize)]
pub struct InputReport {
    pub name: String,
    pub lines: u64,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct UnparseableRow {
    pub reason: String,
    pub count: u64,
    pub example: String,
    pub at: String,
}

#[derive(Debug, Serialize)]
pub struct AgentRow {
    pub agent: String,
    pub operator: String,
    pub purpose: String,
    pub requests: u64,
    pub share: f64,
    pub verified: u64,
    pub spoofed: u64,
    pub unverified: u64,
    pub statuses: BTreeMap<String, u64>,
    pub disallowed: u64,
    pub robots_fetches: u64,
    /// Requests with at least one facet (from the module's `facets=`).
    pub with_facets: u64,
    pub upstream_seconds: f64,
    /// Why crawlward refused them (`refusal=`; a budget with its name, from `budget=`).
    pub refusals: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize, Default)]
pub struct Share {
    pub requests: u64,
    pub crawler_requests: u64,
    pub request_share: Option<f64>,
    /// `upstream` ($upstream_response_time), `request` ($request_time) or none: what the time share is of.
    pub time_source: Option<&'static str>,
    pub seconds: f64,
    pub crawler_seconds: f64,
    pub time_share: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct IntervalRow {
    pub start: String,
    pub epoch: i64,
    pub requests: u64,
    pub crawler_requests: u64,
    pub request_share: f64,
    pub seconds: f64,
    pub crawler_seconds: f64,
    pub time_share: Option<f64>,
    /// group -> status class -> requests (only the non-zero ones).
    pub by_purpose: BTreeMap<String, BTreeMap<String, u64>>,
}

#[derive(Debug, Serialize, Default)]
pub struct Checks {
    /// The search-crawler check: a verified search crawler that got 429 or 5xx.
    pub verified_search_refused: Vec<Refused>,
    /// Search crawlers whose claim could not be checked (no published ranges, no DNS verdict) that got 429 or 5xx.
    pub unverified_search_refused: Vec<Refused>,
    /// robots.txt answers other than 200 (and 304).
    pub robots_not_ok: BTreeMap<String, u64>,
    pub robots_requests: u64,
    pub ok: bool,
}

#[derive(Debug, Serialize)]
pub struct Refused {
    pub agent: String,
    pub statuses: BTreeMap<String, u64>,
    /// Who answered them, where the log says (crawlward_combined, the throttle log):
    /// a crawlward refusal (`facet`, `rate`, `budget`, `browse-cap`, `maintenance`) or `upstream or other`.
    pub by: BTreeMap<String, u64>,
    pub first_at: Option<String>,
}

#[derive(Debug, Serialize, Default)]
pub struct RobotsIgnored {
    pub by_agent: Vec<IgnoredRow>,
    pub by_address: Vec<IgnoredRow>,
    /// Addresses with any disallowed request (the list above is the busiest).
    pub addresses: usize,
}

#[derive(Debug, Serialize)]
pub struct IgnoredRow {
    pub name: String,
    pub agent: String,
    pub requests: u64,
    pub disallowed: u64,
    pub fetched_robots: bool,
}

#[derive(Debug, Serialize)]
pub struct NetworkRow {
    pub network: String,
    pub addresses: f64,
    pub requests: u64,
    pub disallowed: u64,
    pub family: String,
    pub score: f64,
    pub rung: String,
    /// The highest rung of any of its addresses alone.
    pub highest_address_rung: Option<String>,
    /// Together its addresses land on a higher rung than any of them alone.
    pub one_client: bool,
}

#[derive(Debug, Serialize)]
pub struct ClassifierReport {
    pub window_minutes: f64,
    pub weights: BTreeMap<&'static str, f64>,
    pub auth_paths: Vec<String>,
    pub auth_floor: f64,
    pub clients_total: usize,
    pub requests_total: u64,
    /// The clients shown (highest scores first, labeled ones always).
    pub clients: Vec<ClientRow>,
    pub ladder: Vec<RungRow>,
    pub screen: Vec<ScreenRow>,
    pub routed: Vec<String>,
    pub evaluation: EvaluationRow,
    /// Challenged clients whose identity is verified or labeled legitimate: they become L0.
    pub allowlist: Vec<String>,
    /// Whether the input had session identifiers (the session sub-score needs them).
    pub sessions: bool,
}

#[derive(Debug, Serialize, Clone)]
pub struct ClientRow {
    pub name: String,
    /// `address`, `verified` (a verified crawler, all its addresses) or `aggregate` (from an aggregates file).
    pub kind: &'static str,
    pub agent: String,
    pub window_start: Option<String>,
    pub requests: u64,
    pub unique_paths: f64,
    pub egress_ips: f64,
    pub honoured: Vec<String>,
    pub features: FeatureRow,
    /// Sub-score name -> value (null: the signal is absent).
    pub subscores: BTreeMap<&'static str, Option<f64>>,
    /// Sub-score name -> weight x sub-score.
    pub contributions: BTreeMap<&'static str, f64>,
    pub score: f64,
    pub rung: Option<usize>,
    /// The rung's name, or "routed: account controls".
    pub placement: String,
    pub label: Option<&'static str>,
    pub verified: bool,
    pub disallowed: u64,
    /// What the client declared itself to be, proven out of band (aggregates files only).
    pub declared: Option<String>,
}

#[derive(Debug, Serialize, Clone, Copy)]
pub struct FeatureRow {
    pub rpm: f64,
    pub novelty: f64,
    pub conc: f64,
    pub auth: f64,
    pub agent_spread: f64,
    pub reuse: Option<f64>,
    pub cross_ip: Option<f64>,
    pub rules_ok: f64,
}

#[derive(Debug, Serialize)]
pub struct RungRow {
    pub name: &'static str,
    pub ceiling: Option<f64>,
    pub action: &'static str,
    pub latency: &'static str,
    pub round_trips: u32,
    pub clients: usize,
}

#[derive(Debug, Serialize)]
pub struct ScreenRow {
    pub subscore: &'static str,
    pub flagged: usize,
    pub clients: usize,
    pub abusive: usize,
    pub legitimate: usize,
    pub legitimate_names: Vec<String>,
}

#[derive(Debug, Serialize, Default)]
pub struct EvaluationRow {
    pub in_scope: usize,
    pub challenged: usize,
    pub challenge_rung: String,
    pub caught: Vec<String>,
    pub false_positives: Vec<String>,
    pub unlabeled_challenged: usize,
    pub abusive: usize,
    pub legitimate: usize,
    pub precision: Option<f64>,
    pub false_positive_rate: Option<f64>,
}

use crawlward_policy::ranges::rfc3339;

/// One client for the classifier: its name, what kind it is, its label, its scoring.
pub struct Candidate {
    pub name: String,
    pub kind: &'static str,
    pub agent: String,
    /// The purpose of the catalogue agent it names, if any.
    pub purpose: Option<crawlward_policy::Purpose>,
    pub window_start: Option<i64>,
    pub requests: u64,
    pub unique_paths: f64,
    pub egress_ips: f64,
    pub honoured: Vec<std::borrow::Cow<'static, str>>,
    pub scored: Scored,
    pub verified: bool,
    pub disallowed: u64,
    pub declared: Option<String>,
}

pub fn client_row(c: &Candidate, s: &Settings, label: Option<Label>) -> ClientRow {
    let f = c.scored.features;
    ClientRow {
        name: c.name.clone(),
        kind: c.kind,
        agent: c.agent.clone(),
        window_start: c.window_start.map(rfc3339),
        requests: c.requests,
        unique_paths: c.unique_paths,
        egress_ips: c.egress_ips,
        honoured: c.honoured.iter().map(|h| h.to_string()).collect(),
        features: FeatureRow {
            rpm: f.rpm,
            novelty: f.novelty,
            conc: f.conc,
            auth: f.auth,
            agent_spread: f.agent_spread,
            reuse: f.reuse,
            cross_ip: f.cross_ip,
            rules_ok: f.rules_ok,
        },
        subscores: SUBSCORES.iter().copied().zip(c.scored.subscores).collect(),
        contributions: SUBSCORES.iter().copied().zip(c.scored.contributions).collect(),
        score: c.scored.score,
        rung: c.scored.rung_index(),
        placement: placement_name(&c.scored, s),
        label: label.map(Label::as_str),
        verified: c.verified,
        disallowed: c.disallowed,
        declared: c.declared.clone(),
    }
}

pub fn placement_name(sc: &Scored, s: &Settings) -> String {
    match sc.placement {
        Placement::Routed => "routed: account controls".into(),
        Placement::Rung(i) => s.ladder.get(i).map_or("?", |r| r.name).to_string(),
    }
}

/// The classifier's part of the report, over every candidate; `shown` clients are listed.
pub fn classifier_report(cands: &[Candidate], labels: &HashMap<String, Label>, s: &Settings, shown: usize, sessions: bool) -> ClassifierReport {
    let scored: Vec<&Scored> = cands.iter().map(|c| &c.scored).collect();
    let lab: Vec<Option<Label>> = cands.iter().map(|c| labels.get(&c.name).copied()).collect();
    let names = |v: &[usize]| {
        let mut n: Vec<String> = v.iter().map(|&i| cands[i].name.clone()).collect();
        n.sort();
        n
    };
    let screen = classifier::screen(&scored, &lab, s)
        .into_iter()
        .map(|l| {
            let fp: Vec<usize> = l.flagged.iter().copied().filter(|&c| lab[c] == Some(Label::Legitimate)).collect();
            ScreenRow {
                subscore: l.subscore,
                flagged: l.flagged.len(),
                clients: cands.len(),
                abusive: l.abusive,
                legitimate: l.legitimate,
                legitimate_names: names(&fp),
            }
        })
        .collect();
    let e = classifier::evaluate(&scored, &lab, s);
    let routed: Vec<usize> = (0..cands.len()).filter(|&i| scored[i].placement == Placement::Routed).collect();
    // challenged clients a verified identity or a legitimate label takes off the ladder
    let mut allow: Vec<usize> = e.challenged.iter().copied().filter(|&i| cands[i].verified || lab[i] == Some(Label::Legitimate)).collect();
    allow.sort_by(|a, b| cands[*a].name.cmp(&cands[*b].name));
    // shown: labeled clients, then the highest scores, in input order for an aggregates file
    let mut order: Vec<usize> = (0..cands.len()).collect();
    if cands.iter().any(|c| c.kind != "aggregate") {
        order.sort_by(|a, b| scored[*b].score.total_cmp(&scored[*a].score).then(cands[*a].name.cmp(&cands[*b].name)));
    }
    let mut picked: Vec<usize> = Vec::new();
    let mut unlabeled = 0;
    for &i in &order {
        if lab[i].is_some() {
            picked.push(i);
        } else if unlabeled < shown {
            picked.push(i);
            unlabeled += 1;
        }
    }
    let mut per_rung = vec![0usize; s.ladder.len()];
    for sc in &scored {
        if let Some(r) = sc.rung_index() {
            let last = per_rung.len() - 1;
            per_rung[r.min(last)] += 1;
        }
    }
    ClassifierReport {
        window_minutes: s.window_minutes,
        weights: SUBSCORES.iter().copied().zip(s.weights).collect(),
        auth_paths: s.auth_paths.clone(),
        auth_floor: s.auth_floor,
        clients_total: cands.len(),
        requests_total: cands.iter().map(|c| c.requests).sum(),
        clients: picked.iter().map(|&i| client_row(&cands[i], s, lab[i])).collect(),
        ladder: s
            .ladder
            .iter()
            .enumerate()
            .map(|(i, r)| RungRow {
                name: r.name,
                ceiling: r.ceiling.is_finite().then_some(r.ceiling),
                action: r.action,
                latency: r.latency,
                round_trips: r.round_trips,
                clients: per_rung[i],
            })
            .collect(),
        screen,
        routed: names(&routed),
        evaluation: EvaluationRow {
            in_scope: e.in_scope.len(),
            challenged: e.challenged.len(),
            challenge_rung: s.ladder.get(s.challenge_rung).map_or("?", |r| r.name).split(' ').next().unwrap_or("").to_string(),
            caught: names(&e.caught),
            false_positives: names(&e.false_positives),
            unlabeled_challenged: e.unlabeled.len(),
            abusive: e.abusive,
            legitimate: e.legitimate,
            precision: e.precision,
            false_positive_rate: e.false_positive_rate,
        },
        allowlist: allow.iter().map(|&i| cands[i].name.clone()).collect(),
        sessions,
    }
}

/// The candidates a log gives: every client's highest-scoring window,
/// taken out of the analyzer (after [`log_report`], which reads them).
pub fn log_candidates(a: &mut Analyzer<'_>) -> Vec<Candidate> {
    let taken = a.take_best();
    let agents = a.policy.identity.catalogue.agents();
    let mut out: Vec<Candidate> = taken
        .into_iter()
        .map(|(k, b)| {
            let (name, kind, verified) = match k {
                ClientKey::Verified(i) => (format!("verified:{}", agents.get(i).map_or("", |x| x.name.as_str())), "verified", true),
                ClientKey::Address(ip) => (address_name(ip), "address", b.verified),
            };
            candidate(a, name, kind, verified, *b)
        })
        .collect();
    out.sort_by(|x, y| x.name.cmp(&y.name));
    out
}

fn candidate(a: &Analyzer<'_>, name: String, kind: &'static str, verified: bool, b: Scoring) -> Candidate {
    Candidate {
        name,
        kind,
        agent: a.family_name(b.family),
        purpose: a.family_purpose(b.family),
        window_start: Some(b.start),
        requests: b.requests,
        unique_paths: b.unique_paths,
        egress_ips: b.addresses,
        honoured: b.honoured.into_iter().map(std::borrow::Cow::Borrowed).collect(),
        scored: b.scored,
        verified,
        disallowed: b.disallowed,
        declared: None,
    }
}

/// An address as the report names a client: IPv6 by its /64.
pub fn address_name(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V6(_) => format!("{ip}/64"),
        v4 => v4.to_string(),
    }
}

/// The classifier article's "measure conversion and support-ticket rate by
/// rung", with what the edge has: the statuses each rung's requests got,
/// per population.
/// The accounts of a log with `account=`, against the policy's tiers (none without a log of them).
fn accounts(a: &Analyzer<'_>, top: usize) -> Option<super::accounts::AccountsReport> {
    if a.accounts.is_empty() {
        return None;
    }
    let tiers = a.policy.api_tiers.as_ref();
    Some(a.accounts.report(tiers.map_or(&[][..], |t| t.tiers.as_slice()), tiers.map(|t| t.default.as_str()), top))
}

fn served_by_rung(a: &Analyzer<'_>) -> Vec<RungServedRow> {
    use super::stats::{group_name, GROUPS, RUNG_NAMES, STATUS_CLASSES};
    let mut rows = Vec::new();
    for (rung, rung_name) in RUNG_NAMES.iter().enumerate() {
        for g in 0..GROUPS {
            let counts = &a.by_rung[rung * GROUPS + g];
            let requests: u64 = counts.iter().sum();
            if requests > 0 {
                let statuses = STATUS_CLASSES.iter().zip(counts).filter(|(_, n)| **n > 0).map(|(c, n)| (*c, *n)).collect();
                rows.push(RungServedRow { rung: rung_name, population: group_name(g), requests, statuses });
            }
        }
    }
    rows
}

/// Everything but the classifier and the suggestion, from a log.
pub fn log_report(a: &Analyzer<'_>, policy_name: &str, inputs: Vec<InputReport>, top: usize) -> Report {
    let catalogue = a.policy.identity.catalogue.agents();
    let total: u64 = a.agents.iter().map(|x| x.requests).sum();
    let mut agents: Vec<AgentRow> = a
        .agents
        .iter()
        .enumerate()
        .filter(|(_, s)| s.requests > 0)
        .map(|(i, s)| {
            let (agent, operator, purpose) = match catalogue.get(i) {
                Some(x) => (x.name.clone(), x.operator.clone(), x.purpose.as_str().to_string()),
                None if i == a.people_row() => ("(no agent)".into(), String::new(), "people and unknown".into()),
                None => ("(no User-Agent)".into(), String::new(), "none".into()),
            };
            let v = |x: Verdict| s.verdicts[Verdict::ALL.iter().position(|y| *y == x).unwrap_or(0)];
            AgentRow {
                agent,
                operator,
                purpose,
                requests: s.requests,
                share: s.requests as f64 / total.max(1) as f64,
                verified: v(Verdict::Verified),
                spoofed: v(Verdict::Spoofed),
                unverified: v(Verdict::Unverified),
                statuses: s.statuses().iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                disallowed: s.disallowed,
                robots_fetches: s.robots_fetches,
                with_facets: s.with_facets,
                upstream_seconds: s.upstream_seconds,
                refusals: s.refusals.clone(),
            }
        })
        .collect();
    agents.sort_by(|x, y| y.requests.cmp(&x.requests).then(x.agent.cmp(&y.agent)));

    let has_upstream = a.agents.iter().any(|s| s.upstream_seconds > 0.0);
    let has_request_time = a.agents.iter().any(|s| s.request_seconds > 0.0);
    let time_source = if has_upstream {
        Some("upstream")
    } else if has_request_time {
        Some("request")
    } else {
        None
    };
    let secs = |iv: &super::stats::Interval| match time_source {
        Some("upstream") => (iv.upstream_seconds, iv.crawler_upstream_seconds),
        Some(_) => (iv.request_seconds, iv.crawler_request_seconds),
        None => (0.0, 0.0),
    };
    let mut share = Share { time_source, ..Share::default() };
    let intervals: Vec<IntervalRow> = a
        .intervals
        .iter()
        .map(|(t, iv)| {
            let (sec, csec) = secs(iv);
            share.requests += iv.requests;
            share.crawler_requests += iv.crawler_requests;
            share.seconds += sec;
            share.crawler_seconds += csec;
            let mut by_purpose = BTreeMap::new();
            for g in 0..GROUPS {
                let row: BTreeMap<String, u64> =
                    (0..6).filter(|&c| iv.by_group[g][c] > 0).map(|c| (STATUS_CLASSES[c].to_string(), iv.by_group[g][c])).collect();
                if !row.is_empty() {
                    by_purpose.insert(group_name(g).to_string(), row);
                }
            }
            IntervalRow {
                start: rfc3339(*t),
                epoch: *t,
                requests: iv.requests,
                crawler_requests: iv.crawler_requests,
                request_share: iv.crawler_requests as f64 / iv.requests.max(1) as f64,
                seconds: sec,
                crawler_seconds: csec,
                time_share: (time_source.is_some() && sec > 0.0).then(|| csec / sec),
                by_purpose,
            }
        })
        .collect();
    share.request_share = (share.requests > 0).then(|| share.crawler_requests as f64 / share.requests as f64);
    share.time_share = (time_source.is_some() && share.seconds > 0.0).then(|| share.crawler_seconds / share.seconds);

    // the search-crawler check
    let mut checks = Checks::default();
    for (i, s) in a.agents.iter().enumerate() {
        let Some(agent) = catalogue.get(i) else { continue };
        if agent.purpose != Purpose::Search {
            continue;
        }
        let map = |m: &BTreeMap<u16, u64>| m.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<String, u64>>();
        if !s.verified_refused.is_empty() {
            checks.verified_search_refused.push(Refused {
                agent: agent.name.clone(),
                statuses: map(&s.verified_refused),
                by: s.verified_refused_by.clone(),
                first_at: s.first_refused_at.clone(),
            });
        }
        if !s.unverified_refused.is_empty() {
            checks.unverified_search_refused.push(Refused {
                agent: agent.name.clone(),
                statuses: map(&s.unverified_refused),
                by: BTreeMap::new(),
                first_at: None,
            });
        }
    }
    checks.robots_requests = a.robots_answers.values().sum();
    checks.robots_not_ok = a.robots_answers.iter().filter(|(s, _)| **s != 200 && **s != 304).map(|(s, n)| (s.to_string(), *n)).collect();
    checks.ok = checks.verified_search_refused.is_empty() && checks.robots_not_ok.is_empty();

    // robots.txt ignored
    let mut ignored = RobotsIgnored::default();
    for (i, s) in a.agents.iter().enumerate() {
        if s.disallowed > 0 {
            let name =
                catalogue.get(i).map_or_else(|| if i == a.people_row() { "(no agent)".to_string() } else { "(no User-Agent)".to_string() }, |x| x.name.clone());
            ignored.by_agent.push(IgnoredRow {
                name: name.clone(),
                agent: name,
                requests: s.requests,
                disallowed: s.disallowed,
                fetched_robots: s.robots_fetches > 0,
            });
        }
    }
    ignored.by_agent.sort_by(|x, y| y.disallowed.cmp(&x.disallowed).then(x.name.cmp(&y.name)));
    let mut by_address: Vec<IgnoredRow> = a
        .clients
        .iter()
        .filter(|(_, c)| c.disallowed > 0)
        .map(|(k, c)| {
            let agent = c.best.as_ref().map(|b| a.family_name(b.family)).unwrap_or_default();
            let name = match k {
                ClientKey::Verified(i) => format!("verified:{}", catalogue.get(*i).map_or("", |x| x.name.as_str())),
                ClientKey::Address(ip) => address_name(*ip),
            };
            IgnoredRow { name, agent, requests: c.requests, disallowed: c.disallowed, fetched_robots: c.fetched_robots }
        })
        .collect();
    ignored.addresses = by_address.len();
    by_address.sort_by(|x, y| y.disallowed.cmp(&x.disallowed).then(x.name.cmp(&y.name)));
    by_address.truncate(top);
    ignored.by_address = by_address;

    // networks that behave as one client
    let s = &a.policy.classifier;
    let mut best_member: HashMap<(std::net::IpAddr, u8), usize> = HashMap::new();
    for (k, c) in a.clients.iter() {
        if let (ClientKey::Address(ip), Some(b)) = (k, &c.best) {
            if let Some(r) = b.scored.rung_index() {
                let e = best_member.entry(crawlward_policy::signals::network(*ip)).or_insert(0);
                *e = (*e).max(r);
            }
        }
    }
    let mut networks: Vec<NetworkRow> = a
        .networks
        .iter()
        .filter_map(|((net, len), c)| {
            let b = c.best.as_ref()?;
            if b.addresses < 2.0 {
                return None;
            }
            let member = best_member.get(&(*net, *len)).copied();
            let rung = b.scored.rung_index();
            Some(NetworkRow {
                network: format!("{net}/{len}"),
                addresses: b.addresses.round(),
                requests: b.requests,
                disallowed: b.disallowed,
                family: a.family_name(b.family),
                score: b.scored.score,
                rung: placement_name(&b.scored, s),
                highest_address_rung: member.and_then(|m| s.ladder.get(m)).map(|r| r.name.to_string()),
                one_client: matches!((rung, member), (Some(r), Some(m)) if r > m),
            })
        })
        .collect();
    networks.sort_by(|x, y| y.one_client.cmp(&x.one_client).then(y.score.total_cmp(&x.score)).then(x.network.cmp(&y.network)));
    networks.truncate(top);

    Report {
        policy: policy_name.to_string(),
        inputs,
        source: "log",
        lines: a.lines,
        parsed: a.parsed,
        unparseable: a
            .unparseable
            .iter()
            .map(|(r, u)| UnparseableRow { reason: r.to_string(), count: u.count, example: u.example.clone(), at: u.at.clone() })
            .collect(),
        formats: a.formats.iter().map(|(f, n)| (f.as_str().to_string(), *n)).collect(),
        first: a.first_time.map(rfc3339),
        last: a.last_time.map(rfc3339),
        interval_seconds: a.interval_seconds,
        agents,
        crawler_share: share,
        intervals,
        checks,
        robots_ignored: ignored,
        networks,
        classifier: classifier_report(&[], &HashMap::new(), s, 0, false),
        agent_disagreements: a.agent_disagreements,
        clients_given_up: a.clients.evicted,
        clients_given_up_requests: a.clients.evicted_requests,
        served_by_rung: served_by_rung(a),
        accounts: accounts(a, top),
        suggestion: String::new(),
    }
}
