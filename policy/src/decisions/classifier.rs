//! The proportional classifier: route first, then six passive
//! sub-scores, then a rung of the ladder, with the arithmetic laid open.
//!
//! One row per client, aggregated over a window (24 hours by default).
//! Authentication-shaped traffic (a share of requests on the policy's
//! authentication routes at or above `auth_floor`) is routed to account
//! controls and never placed on the crawler ladder. Every other client gets
//! six sub-scores in [0, 1], each the clamped distance of one feature from
//! the value where it stops being ordinary to the value where it saturates;
//! the score is their weighted sum, and the first rung whose ceiling is
//! above the score is where the client goes. The weights, the cut points and
//! the ceilings come from the policy (`classifier`), with the seed's values
//! as defaults. Every contribution is kept, so a report can show why, never
//! just the verdict.

use std::borrow::Borrow;
use std::fmt;

/// The six sub-scores, in the seed's order.
pub const SUBSCORES: [&str; 6] = ["rate", "novelty", "concentration", "ua-spread", "session", "rules"];

/// Where a sub-score is 0 (`from`: the value at which the signal stops being
/// ordinary) and where it is 1 (`to`: a population outlier). `to` may be
/// below `from` for a signal that grows as the feature falls (rules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    pub from: f64,
    pub to: f64,
}

impl Cut {
    pub const fn new(from: f64, to: f64) -> Cut {
        Cut { from, to }
    }

    /// The feature's place between the two points, clamped to [0, 1].
    pub fn normalise(&self, x: f64) -> f64 {
        clamp((x - self.from) / (self.to - self.from))
    }
}

/// A rung of the ladder: what it does and what it costs the reader.
#[derive(Debug, Clone, PartialEq)]
pub struct Rung {
    /// Scores below this (and at or above the rung below's) land here.
    pub ceiling: f64,
    pub name: &'static str,
    pub action: &'static str,
    pub round_trips: u32,
    pub latency: &'static str,
}

/// The classifier's settings: the policy's `classifier` section, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The aggregation window, in minutes (rate is requests per minute over it).
    pub window_minutes: f64,
    /// Path prefixes of the authentication routes (login, session, account):
    /// the route table that sends a client to account controls.
    pub auth_paths: Vec<String>,
    /// A client with at least this share of requests on them is routed.
    pub auth_floor: f64,
    /// The number of declared rules a client is expected to honour (rules_ok = honoured / this).
    pub rules_expected: f64,
    /// Weights, in [`SUBSCORES`] order.
    pub weights: [f64; 6],
    pub rate: Cut,
    pub novelty: Cut,
    pub concentration: Cut,
    pub ua_spread: Cut,
    /// The session sub-score is half session reuse, half sessions seen on more than one address.
    pub session_reuse: Cut,
    pub session_cross_ip: Cut,
    pub rules: Cut,
    /// The busiest paths the concentration (entropy) is taken over.
    pub top_paths: usize,
    /// L0 to L6.
    pub ladder: Vec<Rung>,
    /// The first rung that challenges a reader (L3): precision and the
    /// false-positive rate count the clients held here or above.
    pub challenge_rung: usize,
    /// A sub-score at least this high flags a client in the one-signal screen.
    pub screen_at: f64,
}

/// The seed's ladder, its ceilings and costs on a 40 ms connection.
pub fn seed_ladder() -> Vec<Rung> {
    let r = |ceiling, name, action, round_trips, latency| Rung { ceiling, name, action, round_trips, latency };
    vec![
        r(0.16, "L0 allow", "no extra work, log only", 0, "0 ms"),
        r(0.30, "L1 allow + count", "meter it, publish the API", 0, "0 ms"),
        r(0.45, "L2 rate limit", "token bucket per session id", 0, "0 ms"),
        r(0.60, "L3 soft challenge", "invisible script, no clearance needed", 3, "80 ms"),
        r(0.75, "L4 interstitial", "visible check, issues clearance cookie", 4, "900 ms"),
        r(0.88, "L5 captcha", "hard gate, the reader pays to pass", 5, "12000 ms"),
        r(1.01, "L6 block", "403, retain logs for legal review", 6, "0 ms"),
    ]
}

impl Default for Settings {
    /// The proportional classifier's published values.
    fn default() -> Settings {
        Settings {
            window_minutes: 24.0 * 60.0,
            auth_paths: Vec::new(),
            auth_floor: 0.50,
            rules_expected: 4.0,
            weights: [0.28, 0.22, 0.10, 0.16, 0.14, 0.10],
            rate: Cut::new(4.0, 30.0),
            novelty: Cut::new(0.25, 0.90),
            concentration: Cut::new(1.40, 3.40),
            ua_spread: Cut::new(0.02, 0.47),
            session_reuse: Cut::new(0.90, 0.99),
            session_cross_ip: Cut::new(0.0, 1.0),
            rules: Cut::new(0.75, 0.0),
            top_paths: 12,
            ladder: seed_ladder(),
            challenge_rung: 3,
            screen_at: 0.50,
        }
    }
}

impl Settings {
    /// Whether `path` (a normalized path, no query) is an authentication route.
    pub fn is_auth_path(&self, path: &[u8]) -> bool {
        self.auth_paths.iter().any(|p| path.starts_with(p.as_bytes()))
    }

    /// The rung for a score: the first whose ceiling is above it (the last one past them all).
    pub fn rung(&self, score: f64) -> usize {
        self.ladder.iter().position(|r| score < r.ceiling).unwrap_or(self.ladder.len().saturating_sub(1))
    }
}

/// Sessions as the window saw them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sessions {
    /// Requests of the busiest session.
    pub max_requests: f64,
    /// Distinct sessions.
    pub count: f64,
    /// Of those, sessions seen from more than one address.
    pub cross_ip: f64,
}

/// What the window shows of one client: the classifier's whole input (also
/// as the module's status endpoint says it of a live client, for `crawlward
/// explain --client`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    pub requests: f64,
    /// Distinct URL paths.
    pub unique_paths: f64,
    /// Hits of the busiest paths, any order (the busiest `top_paths` are used).
    pub top_path_hits: Vec<f64>,
    /// Share of requests on the authentication routes.
    pub auth_frac: f64,
    /// Share of requests (0 to 1) of the client's most used User-Agent family.
    pub top_agent_share: f64,
    /// None when the source has no session identifier: the sub-score is then absent (0).
    pub sessions: Option<Sessions>,
    /// Declared rules the client demonstrably obeys.
    pub rules_honoured: f64,
}

/// The features of the proportional classifier's table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Features {
    /// Requests per minute over the window.
    pub rpm: f64,
    /// Distinct paths per request.
    pub novelty: f64,
    /// Shannon entropy (bits) over the busiest paths.
    pub conc: f64,
    pub auth: f64,
    /// 1 - the share of the most used User-Agent family.
    pub agent_spread: f64,
    /// Busiest session's share of requests.
    pub reuse: Option<f64>,
    /// Share of sessions seen from more than one address.
    pub cross_ip: Option<f64>,
    /// Honoured rules / expected rules.
    pub rules_ok: f64,
}

/// Where a client goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Authentication-shaped: account controls, off the crawler ladder.
    Routed,
    /// A rung of the ladder, by index (0 = L0).
    Rung(usize),
}

/// One client, scored, with every term of the sum.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub features: Features,
    /// Sub-scores in [`SUBSCORES`] order; None where the signal is absent.
    pub subscores: [Option<f64>; 6],
    /// Weight x sub-score, in the same order (0 where absent).
    pub contributions: [f64; 6],
    pub score: f64,
    pub placement: Placement,
}

impl Scored {
    /// The rung's index, also for a routed client (where its score would put it).
    pub fn rung_index(&self) -> Option<usize> {
        match self.placement {
            Placement::Rung(i) => Some(i),
            Placement::Routed => None,
        }
    }
}

/// The declared rules the proportional classifier counts a client honouring, in the order
/// reports list them.
pub const RULES: [&str; 5] = ["declared-ua", "robots.txt", "crawl-delay", "sitemap", "contact"];

/// What a window of one client's requests shows of the rules it keeps
/// (counts may be fractions: a sliding window weighs its earlier half).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RuleCounts {
    pub requests: f64,
    /// Requests whose User-Agent declares a bot, and that give a contact.
    pub declared: f64,
    pub contact: f64,
    /// Requests on paths the published robots.txt disallows for the client.
    pub disallowed: f64,
    /// robots.txt fetched, and the sitemap.
    pub robots: bool,
    pub sitemap: bool,
    /// The most requests in one clock minute.
    pub peak_minute: u32,
}

/// The rules a window shows its client honouring, with `per_minute` the rate
/// robots.txt's Crawl-delay allows (None: it sets none): a declared
/// User-Agent and a contact on at least half the requests, robots.txt
/// fetched and nothing it disallows asked for, no minute above the
/// Crawl-delay's rate, the sitemap fetched.
pub fn honoured(r: &RuleCounts, per_minute: Option<u32>) -> impl Iterator<Item = &'static str> {
    let half = |n: f64| n * 2.0 >= r.requests;
    let kept = [half(r.declared), r.robots && r.disallowed == 0.0, per_minute.is_some_and(|pm| r.peak_minute <= pm), r.sitemap, half(r.contact)];
    RULES.into_iter().zip(kept).filter(|(_, k)| *k).map(|(name, _)| name)
}

/// How many rules [`honoured`] finds.
pub fn honoured_count(r: &RuleCounts, per_minute: Option<u32>) -> usize {
    honoured(r, per_minute).count()
}

/// x within [0, 1] (a negative zero, or NaN, is 0).
pub fn clamp(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        0.0
    } else if x > 1.0 {
        1.0
    } else {
        x
    }
}

/// Shannon entropy in bits of the hit counts: 0 for one path, log2(12) = 3.58
/// for twelve paths hit equally often.
pub fn concentration(hits: &[f64]) -> f64 {
    let total: f64 = hits.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let h = -hits.iter().filter(|h| **h > 0.0).map(|h| (h / total) * (h / total).log2()).sum::<f64>();
    // one path gives -0.0: shown as 0
    if h > 0.0 {
        h
    } else {
        0.0
    }
}

/// The features of one client.
pub fn features(o: &Observed, s: &Settings) -> Features {
    let req = o.requests.max(1.0);
    // the busiest paths sorted on the stack (the module's case: a window's 32
    // counters at most), else in a copy
    let mut stack = [0.0f64; 32];
    let mut heap = Vec::new();
    let top: &mut [f64] = match stack.get_mut(..o.top_path_hits.len()) {
        Some(top) => {
            top.copy_from_slice(&o.top_path_hits);
            top
        }
        None => {
            heap.extend_from_slice(&o.top_path_hits);
            &mut heap
        }
    };
    top.sort_unstable_by(|a, b| b.total_cmp(a));
    let busiest = top.len().min(s.top_paths);
    Features {
        rpm: o.requests / s.window_minutes,
        novelty: o.unique_paths / req,
        conc: concentration(&top[..busiest]),
        auth: o.auth_frac,
        agent_spread: 1.0 - o.top_agent_share,
        reuse: o.sessions.map(|x| x.max_requests / req),
        cross_ip: o.sessions.map(|x| if x.count > 0.0 { x.cross_ip / x.count } else { 0.0 }),
        rules_ok: o.rules_honoured / s.rules_expected,
    }
}

/// The six sub-scores of a client's features.
pub fn subscores(f: &Features, s: &Settings) -> [Option<f64>; 6] {
    let session = match (f.reuse, f.cross_ip) {
        (Some(r), Some(c)) => Some(0.5 * s.session_reuse.normalise(r) + 0.5 * s.session_cross_ip.normalise(c)),
        _ => None,
    };
    [
        Some(s.rate.normalise(f.rpm)),
        Some(s.novelty.normalise(f.novelty)),
        Some(s.concentration.normalise(f.conc)),
        Some(s.ua_spread.normalise(f.agent_spread)),
        session,
        Some(s.rules.normalise(f.rules_ok)),
    ]
}

/// Score and place one client.
pub fn score(o: &Observed, s: &Settings) -> Scored {
    let features = features(o, s);
    let subscores = subscores(&features, s);
    let mut contributions = [0.0; 6];
    let mut score = 0.0;
    for i in 0..6 {
        contributions[i] = s.weights[i] * subscores[i].unwrap_or(0.0);
        score += contributions[i];
    }
    let placement = if features.auth >= s.auth_floor { Placement::Routed } else { Placement::Rung(s.rung(score)) };
    Scored { features, subscores, contributions, score, placement }
}

/// What the sysadmin says a client is (the labels file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    Abusive,
    Legitimate,
}

impl Label {
    pub fn parse(s: &str) -> Option<Label> {
        match s {
            "abusive" => Some(Label::Abusive),
            "legitimate" => Some(Label::Legitimate),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Label::Abusive => "abusive",
            Label::Legitimate => "legitimate",
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One sub-score's line of the one-signal screen: the clients it alone would flag.
#[derive(Debug, Clone, PartialEq)]
pub struct ScreenLine {
    pub subscore: &'static str,
    /// Indices of the flagged clients.
    pub flagged: Vec<usize>,
    pub abusive: usize,
    pub legitimate: usize,
}

/// The one-signal screen (over owned or borrowed scores): for each sub-score, the clients (routed ones
/// included) where it is at least `screen_at`, with no other signal to
/// corroborate it.
pub fn screen<S: Borrow<Scored>>(scored: &[S], labels: &[Option<Label>], s: &Settings) -> Vec<ScreenLine> {
    (0..6)
        .map(|i| {
            let flagged: Vec<usize> = (0..scored.len()).filter(|&c| scored[c].borrow().subscores[i].is_some_and(|v| v >= s.screen_at)).collect();
            let count = |l: Label| flagged.iter().filter(|&&c| labels.get(c).copied().flatten() == Some(l)).count();
            ScreenLine { subscore: SUBSCORES[i], abusive: count(Label::Abusive), legitimate: count(Label::Legitimate), flagged }
        })
        .collect()
}

/// How the ladder does against the labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Clients on the ladder (not routed).
    pub in_scope: Vec<usize>,
    /// Of those, held at the challenge rung or above.
    pub challenged: Vec<usize>,
    /// Challenged and labeled abusive.
    pub caught: Vec<usize>,
    /// Challenged and labeled legitimate.
    pub false_positives: Vec<usize>,
    /// Challenged and not labeled.
    pub unlabeled: Vec<usize>,
    /// Every client labeled abusive (routed ones too) and legitimate.
    pub abusive: usize,
    pub legitimate: usize,
    /// caught / (caught + false positives); None when no labeled client is challenged.
    pub precision: Option<f64>,
    /// false positives / legitimate; None without legitimate labels.
    pub false_positive_rate: Option<f64>,
}

pub fn evaluate<S: Borrow<Scored>>(scored: &[S], labels: &[Option<Label>], s: &Settings) -> Evaluation {
    let label = |c: usize| labels.get(c).copied().flatten();
    let in_scope: Vec<usize> = (0..scored.len()).filter(|&c| scored[c].borrow().placement != Placement::Routed).collect();
    let challenged: Vec<usize> = in_scope.iter().copied().filter(|&c| scored[c].borrow().rung_index().is_some_and(|r| r >= s.challenge_rung)).collect();
    let caught: Vec<usize> = challenged.iter().copied().filter(|&c| label(c) == Some(Label::Abusive)).collect();
    let false_positives: Vec<usize> = challenged.iter().copied().filter(|&c| label(c) == Some(Label::Legitimate)).collect();
    let unlabeled: Vec<usize> = challenged.iter().copied().filter(|&c| label(c).is_none()).collect();
    let abusive = (0..scored.len()).filter(|&c| label(c) == Some(Label::Abusive)).count();
    let legitimate = (0..scored.len()).filter(|&c| label(c) == Some(Label::Legitimate)).count();
    let judged = caught.len() + false_positives.len();
    Evaluation {
        precision: (judged > 0).then(|| caught.len() as f64 / judged as f64),
        false_positive_rate: (legitimate > 0).then(|| false_positives.len() as f64 / legitimate as f64),
        in_scope,
        challenged,
        caught,
        false_positives,
        unlabeled,
        abusive,
        legitimate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eight clients of the proportional classifier's table, as its program computes their inputs.
    fn seed_clients() -> Vec<(&'static str, Observed, Label)> {
        let uniform = |n: usize, h: f64| vec![h; n];
        let o = |requests: f64, unique: f64, top: Vec<f64>, auth: f64, top_agent: f64, sessions: &[(f64, f64)], honoured: f64| Observed {
            requests,
            unique_paths: unique,
            top_path_hits: top,
            auth_frac: auth,
            top_agent_share: top_agent / 100.0,
            sessions: Some(Sessions {
                max_requests: sessions.iter().map(|s| s.0).fold(0.0, f64::max),
                count: sessions.len() as f64,
                cross_ip: sessions.iter().filter(|s| s.1 > 1.0).count() as f64,
            }),
            rules_honoured: honoured,
        };
        let mut flash = vec![210000.0, 180000.0];
        flash.extend(uniform(9, 9000.0));
        vec![
            ("partner-price-feed", o(8640.0, 14.0, vec![4200.0, 3100.0, 1340.0], 0.0, 100.0, &[(8640.0, 1.0)], 4.0), Label::Legitimate),
            ("verified-search-crawler", o(41200.0, 41200.0, uniform(12, 1.0), 0.0, 100.0, &[(2600.0, 1.0); 4], 4.0), Label::Legitimate),
            ("academic-longitudinal-study", o(2600.0, 310.0, vec![900.0, 880.0, 620.0, 200.0], 0.0, 100.0, &[(2600.0, 1.0)], 3.0), Label::Legitimate),
            ("seo-audit-crawler", o(18400.0, 18100.0, uniform(12, 1.0), 0.0, 34.0, &[(4600.0, 6.0); 3], 2.0), Label::Legitimate),
            ("personal-archiver", o(740.0, 740.0, uniform(12, 1.0), 0.0, 100.0, &[(740.0, 1.0)], 2.0), Label::Legitimate),
            ("flash-sale-monitor", o(612000.0, 9400.0, flash, 0.02, 61.0, &[(204000.0, 74.0); 3], 0.0), Label::Abusive),
            ("resale-listing-republisher", o(94000.0, 91200.0, uniform(12, 1.0), 0.0, 44.0, &[(23500.0, 22.0); 4], 1.0), Label::Abusive),
            ("credential-stuffing", o(148000.0, 26.0, vec![121000.0, 21000.0, 6000.0], 1.0, 100.0, &[(3700.0, 210.0); 40], 0.0), Label::Abusive),
        ]
    }

    #[test]
    fn the_seed_table_to_two_decimals() {
        let s = Settings::default();
        // client, req/min, novel (3 decimals), conc, ua-spr, sess, score, rung or routed
        let want = [
            ("partner-price-feed", "6.0", "0.002", "1.45", "0.00", "1.00", "0.09", Some(0)),
            ("verified-search-crawler", "28.6", "1.000", "3.58", "0.00", "0.06", "0.59", Some(3)),
            ("academic-longitudinal-study", "1.8", "0.119", "1.84", "0.00", "1.00", "0.09", Some(0)),
            ("seo-audit-crawler", "12.8", "0.984", "3.58", "0.66", "0.25", "0.68", Some(4)),
            ("personal-archiver", "0.5", "1.000", "3.58", "0.00", "1.00", "0.42", Some(2)),
            ("flash-sale-monitor", "425.0", "0.015", "2.03", "0.39", "0.33", "0.61", Some(4)),
            ("resale-listing-republisher", "65.3", "0.970", "3.58", "0.56", "0.25", "0.90", Some(6)),
            ("credential-stuffing", "102.8", "0.000", "0.82", "0.00", "0.03", "0.45", None),
        ];
        let clients = seed_clients();
        for ((name, o, _), w) in clients.iter().zip(want) {
            let sc = score(o, &s);
            let f = sc.features;
            assert_eq!(*name, w.0);
            assert_eq!(format!("{:.1}", f.rpm), w.1, "{name} rpm");
            assert_eq!(format!("{:.3}", f.novelty), w.2, "{name} novelty");
            assert_eq!(format!("{:.2}", f.conc), w.3, "{name} conc");
            assert_eq!(format!("{:.2}", f.agent_spread), w.4, "{name} ua-spread");
            assert_eq!(format!("{:.2}", f.reuse.unwrap()), w.5, "{name} reuse");
            assert_eq!(format!("{:.2}", sc.score), w.6, "{name} score");
            assert_eq!(sc.rung_index(), w.7, "{name} rung");
            let sum: f64 = sc.contributions.iter().sum();
            assert!((sum - sc.score).abs() < 1e-12, "the contributions add up to the score");
        }
    }

    #[test]
    fn the_seed_screen_and_evaluation() {
        let s = Settings::default();
        let clients = seed_clients();
        let scored: Vec<Scored> = clients.iter().map(|(_, o, _)| score(o, &s)).collect();
        let labels: Vec<Option<Label>> = clients.iter().map(|c| Some(c.2)).collect();
        let names = |v: &[usize]| {
            let mut n: Vec<&str> = v.iter().map(|&i| clients[i].0).collect();
            n.sort();
            n.join(" ")
        };
        let lines = screen(&scored, &labels, &s);
        let got: Vec<(usize, usize, usize, String)> = lines
            .iter()
            .map(|l| {
                let fp: Vec<usize> = l.flagged.iter().copied().filter(|&c| labels[c] == Some(Label::Legitimate)).collect();
                (l.flagged.len(), l.abusive, l.legitimate, names(&fp))
            })
            .collect();
        assert_eq!(got[0], (4, 3, 1, "verified-search-crawler".into()));
        assert_eq!(got[1], (4, 1, 3, "personal-archiver seo-audit-crawler verified-search-crawler".into()));
        assert_eq!(got[2], (4, 1, 3, "personal-archiver seo-audit-crawler verified-search-crawler".into()));
        assert_eq!(got[3], (3, 2, 1, "seo-audit-crawler".into()));
        assert_eq!(got[4], (7, 3, 4, "academic-longitudinal-study partner-price-feed personal-archiver seo-audit-crawler".into()));
        assert_eq!(got[5], (3, 3, 0, "".into()));

        let e = evaluate(&scored, &labels, &s);
        assert_eq!(e.in_scope.len(), 7);
        assert_eq!(e.challenged.len(), 4);
        assert_eq!(names(&e.caught), "flash-sale-monitor resale-listing-republisher");
        assert_eq!(names(&e.false_positives), "seo-audit-crawler verified-search-crawler");
        assert_eq!((e.abusive, e.legitimate), (3, 5));
        assert_eq!(format!("{:.2}", e.precision.unwrap()), "0.50");
        assert_eq!(format!("{:.2}", e.false_positive_rate.unwrap()), "0.40");
    }

    #[test]
    fn cut_points_clamp_and_invert() {
        let c = Cut::new(4.0, 30.0);
        assert_eq!(c.normalise(0.0), 0.0);
        assert_eq!(c.normalise(17.0), 0.5);
        assert_eq!(c.normalise(300.0), 1.0);
        let rules = Cut::new(0.75, 0.0);
        assert_eq!(rules.normalise(1.0), 0.0);
        assert_eq!(rules.normalise(0.0), 1.0);
        assert!((rules.normalise(0.25) - (1.0 - 0.25 / 0.75)).abs() < 1e-15, "the seed's 1 - clamp(x / 0.75)");
    }

    #[test]
    fn rungs_follow_the_ceilings() {
        let s = Settings::default();
        assert_eq!(s.rung(0.0), 0);
        assert_eq!(s.rung(0.16), 1, "a ceiling belongs to the rung above");
        assert_eq!(s.rung(0.5999), 3);
        assert_eq!(s.rung(0.88), 6);
        assert_eq!(s.rung(5.0), 6, "past every ceiling: the last rung");
    }

    #[test]
    fn without_sessions_the_session_signal_is_absent() {
        let s = Settings::default();
        let o = Observed {
            requests: 100.0,
            unique_paths: 100.0,
            top_path_hits: vec![1.0; 12],
            auth_frac: 0.0,
            top_agent_share: 1.0,
            sessions: None,
            rules_honoured: 0.0,
        };
        let sc = score(&o, &s);
        assert_eq!(sc.subscores[4], None);
        assert_eq!(sc.contributions[4], 0.0);
        assert!((sc.score - (0.22 + 0.10 + 0.10)).abs() < 1e-12, "novelty, concentration and rules saturated: {}", sc.score);
    }

    #[test]
    fn precision_needs_a_labeled_challenge() {
        let s = Settings::default();
        let o =
            Observed { requests: 1.0, unique_paths: 1.0, top_path_hits: vec![1.0], auth_frac: 0.0, top_agent_share: 1.0, sessions: None, rules_honoured: 4.0 };
        let scored = vec![score(&o, &s)];
        let e = evaluate(&scored, &[None], &s);
        assert_eq!((e.precision, e.false_positive_rate), (None, None));
    }
}
