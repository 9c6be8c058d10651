//! The terminal report. The classifier's part is laid out as the proportional classifier's
//! program prints its table, line for line, so the two can be compared.

use super::report::{ClassifierReport, Report};

/// 925580 -> "925,580", as Python's format(n, ",").
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.1}%", 100.0 * v))
}

/// Lines without trailing spaces, as the seed's `out()` prints them.
struct Out(String);

impl Out {
    fn line(&mut self, s: impl AsRef<str>) {
        self.0.push_str(s.as_ref().trim_end());
        self.0.push('\n');
    }
}

pub fn render(r: &Report, top: usize) -> String {
    let mut o = Out(String::new());
    if r.source == "log" {
        log_sections(r, &mut o, top);
    }
    classifier_section(&r.classifier, &mut o, r.source == "log");
    if !r.suggestion.is_empty() {
        o.line("");
        o.line("policy suggestion (never applied; --suggest FILE writes it for review):");
        for l in r.suggestion.lines().filter(|l| !l.trim().is_empty()).take(top * 2) {
            o.line(format!("  {l}"));
        }
    }
    o.0
}

fn log_sections(r: &Report, o: &mut Out, top: usize) {
    o.line(format!(
        "crawlward analyze: {} lines read, {} parsed, {} unparseable; policy {}",
        thousands(r.lines),
        thousands(r.parsed),
        thousands(r.lines - r.parsed),
        r.policy
    ));
    for i in &r.inputs {
        match &i.error {
            None => o.line(format!("  {}: {} lines", i.name, thousands(i.lines))),
            Some(e) => o.line(format!("  {}: {} lines, then: {e}", i.name, thousands(i.lines))),
        }
    }
    if let (Some(a), Some(b)) = (&r.first, &r.last) {
        o.line(format!("  from {a} to {b}"));
    }
    if !r.formats.is_empty() {
        let f: Vec<String> = r.formats.iter().map(|(k, v)| format!("{k} {}", thousands(*v))).collect();
        o.line(format!("  formats: {}", f.join(", ")));
    }
    if r.agent_disagreements > 0 {
        o.line(format!(
            "  {} lines name another agent than the policy's catalogue finds (the log was written under another catalogue); the policy's is used",
            thousands(r.agent_disagreements)
        ));
    }
    if r.clients_given_up > 0 {
        o.line(format!(
            "  {} clients were given up for others once {} were held (the fewest requests first); their {} requests are counted per agent, status and interval, not scored",
            thousands(r.clients_given_up),
            thousands(super::stats::MAX_CLIENTS as u64),
            thousands(r.clients_given_up_requests)
        ));
    }
    if !r.unparseable.is_empty() {
        o.line("");
        o.line("unparseable lines, by the part that could not be read (one example each):");
        for u in &r.unparseable {
            o.line(format!("  {:<24} {:>9}  {}: {}", u.reason, thousands(u.count), u.at, u.example));
        }
    }

    o.line("");
    let c = &r.checks;
    if r.source == "log" && r.lines == 0 {
        o.line("search-crawler check: nothing to check, the logs have no lines.");
    } else if c.ok {
        o.line(format!(
            "search-crawler check: ok. No verified search crawler got 429 or 5xx; robots.txt answered 200 to all {} requests for it.",
            thousands(c.robots_requests)
        ));
    } else {
        o.line("search-crawler check: POLICY MISTAKES");
    }
    for x in &c.verified_search_refused {
        let st: Vec<String> = x.statuses.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        let by: Vec<String> = x.by.iter().map(|(k, v)| format!("{k} {v}")).collect();
        o.line(format!(
            "  verified {} got {}{} (first at {}): a 429 or 5xx slows the crawling of the whole host; only a limit written for it should do that",
            x.agent,
            st.join(" "),
            if by.is_empty() { String::new() } else { format!(", from {}", by.join(", ")) },
            x.first_at.as_deref().unwrap_or("?")
        ));
    }
    if !c.robots_not_ok.is_empty() {
        let st: Vec<String> = c.robots_not_ok.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        o.line(format!("  robots.txt answered {} (of {} requests): it must always answer 200", st.join(" "), thousands(c.robots_requests)));
    }
    for x in &c.unverified_search_refused {
        let st: Vec<String> = x.statuses.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        o.line(format!("  note: unverified {} got {}: its claim could not be checked (no published ranges, no DNS verdict in the log)", x.agent, st.join(" ")));
    }

    o.line("");
    o.line(format!("agents ({} seen): requests, claims, statuses, robots.txt", r.agents.len()));
    o.line(format!(
        "{:<24} {:<18} {:>10} {:>6} {:>9} {:>8} {:>8} {:>10} {:>11}  {}",
        "agent", "purpose", "requests", "share", "verified", "spoofed", "unverif.", "disallowed", "upstream s", "statuses"
    ));
    for a in r.agents.iter().take(top.max(1) * 2) {
        let mut st: Vec<(&String, &u64)> = a.statuses.iter().collect();
        st.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
        let st: Vec<String> = st.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        o.line(format!(
            "{:<24} {:<18} {:>10} {:>6} {:>9} {:>8} {:>8} {:>10} {:>11.2}  {}",
            a.agent,
            a.purpose,
            thousands(a.requests),
            pct(Some(a.share)),
            a.verified,
            a.spoofed,
            a.unverified,
            a.disallowed,
            a.upstream_seconds,
            st.join(" ")
        ));
    }
    if r.agents.len() > top.max(1) * 2 {
        o.line(format!("  ... {} more (--format json lists them all)", r.agents.len() - top.max(1) * 2));
    }

    o.line("");
    let s = &r.crawler_share;
    let time = match s.time_source {
        Some("upstream") => format!("{} of upstream time ({:.1} of {:.1} s)", pct(s.time_share), s.crawler_seconds, s.seconds),
        Some(_) => format!("{} of request time ({:.1} of {:.1} s; the log has no $upstream_response_time)", pct(s.time_share), s.crawler_seconds, s.seconds),
        None => "time: the log has no $request_time or $upstream_response_time (combined format)".into(),
    };
    o.line(format!("crawlers' share (named agents and no User-Agent): {} of requests, {time}", pct(s.request_share)));
    if !r.intervals.is_empty() {
        let mut busiest: Vec<&super::report::IntervalRow> = r.intervals.iter().collect();
        busiest.sort_by(|a, b| b.time_share.unwrap_or(b.request_share).total_cmp(&a.time_share.unwrap_or(a.request_share)).then(a.epoch.cmp(&b.epoch)));
        o.line(format!("  the {} intervals of {} min where crawlers took the most:", busiest.len().min(top.min(10)), r.interval_seconds / 60));
        o.line(format!("  {:<21} {:>9} {:>8} {:>8} {:>11}", "interval", "requests", "crawler", "share", "time share"));
        for iv in busiest.iter().take(top.min(10)) {
            o.line(format!("  {:<21} {:>9} {:>8} {:>8} {:>11}", iv.start, iv.requests, iv.crawler_requests, pct(Some(iv.request_share)), pct(iv.time_share)));
        }
    }

    o.line("");
    let ig = &r.robots_ignored;
    o.line("robots.txt ignored: requests to paths the published robots.txt disallows");
    if ig.by_agent.is_empty() {
        o.line("  none");
    } else {
        o.line(format!("  {:<30} {:>10} {:>10}  fetched robots.txt", "agent", "requests", "disallowed"));
        for x in ig.by_agent.iter().take(top) {
            o.line(format!("  {:<30} {:>10} {:>10}  {}", x.name, thousands(x.requests), thousands(x.disallowed), if x.fetched_robots { "yes" } else { "no" }));
        }
        o.line(format!("  by client ({} with any):", ig.addresses));
        o.line(format!("  {:<30} {:<24} {:>10} {:>10}  fetched robots.txt", "client", "agent", "requests", "disallowed"));
        for x in &ig.by_address {
            o.line(format!(
                "  {:<30} {:<24} {:>10} {:>10}  {}",
                x.name,
                x.agent,
                thousands(x.requests),
                thousands(x.disallowed),
                if x.fetched_robots { "yes" } else { "no" }
            ));
        }
    }

    if !r.served_by_rung.is_empty() {
        o.line("");
        o.line("what each rung of the ladder answered (the logged rung), by population:");
        o.line(format!("  {:<7} {:<22} {:>9}  statuses", "rung", "population", "requests"));
        for x in &r.served_by_rung {
            let statuses: Vec<String> = x.statuses.iter().map(|(c, n)| format!("{c} {}", thousands(*n))).collect();
            o.line(format!("  {:<7} {:<22} {:>9}  {}", x.rung, x.population, thousands(x.requests), statuses.join(", ")));
        }
    }

    if let Some(acc) = &r.accounts {
        o.line("");
        o.line(format!("API accounts ({} seen), requests that passed hour by hour over the last 48 at most:", thousands(acc.accounts)));
        o.line(format!("  {:<24} {:<10} {:>9} {:>8} {:>9}  {:<8} curve", "account", "tier", "requests", "refused", "peak/hour", "flag"));
        for x in &acc.rows {
            let flag = if x.burner {
                "burner"
            } else if x.at_quota {
                "at quota"
            } else {
                ""
            };
            let peak = match x.peak_share_of_hourly {
                Some(s) => format!("{} ({:.0}%)", x.peak_hour, 100.0 * s),
                None => x.peak_hour.to_string(),
            };
            let curve: Vec<String> = x.curve.iter().map(|n| n.to_string()).collect();
            o.line(format!(
                "  {:<24} {:<10} {:>9} {:>8} {:>9}  {:<8} {}",
                x.account,
                x.tier.as_deref().unwrap_or("-"),
                thousands(x.requests),
                thousands(x.refused),
                peak,
                flag,
                curve.join(" ")
            ));
        }
        if acc.burner_chains.is_empty() {
            o.line("  no burner pattern: no account at its quota followed by a new one from its networks");
        }
        for c in &acc.burner_chains {
            o.line(format!(
                "  burner pattern: {} each reached the quota, and the next appeared within two hours from {}",
                c.accounts.join(" -> "),
                c.networks.join(", ")
            ));
        }
    }

    o.line("");
    o.line("networks (/24, /48) of several addresses, scored as one client:");
    if r.networks.is_empty() {
        o.line("  none");
    } else {
        o.line(format!(
            "  {:<22} {:>9} {:>10} {:>10} {:<22} {:>6}  {:<20} {}",
            "network", "addresses", "requests", "disallowed", "top agent", "score", "rung", "highest address alone"
        ));
        for n in &r.networks {
            o.line(format!(
                "  {:<22} {:>9} {:>10} {:>10} {:<22} {:>6.2}  {:<20} {}{}",
                n.network,
                n.addresses,
                thousands(n.requests),
                thousands(n.disallowed),
                n.family,
                n.score,
                n.rung,
                n.highest_address_rung.as_deref().unwrap_or("-"),
                if n.one_client { "  <- together they behave as one client" } else { "" }
            ));
        }
    }
    o.line("");
}

fn classifier_section(c: &ClassifierReport, o: &mut Out, log: bool) {
    let window = if c.window_minutes % 60.0 == 0.0 { format!("{}-hour", c.window_minutes / 60.0) } else { format!("{}-minute", c.window_minutes) };
    o.line(format!("{window} edge view: {} clients, {} requests, passive signals only", c.clients_total, thousands(c.requests_total)));
    let w: Vec<String> = c.weights_in_order().iter().map(|(n, w)| format!("{n}={w:.2}")).collect();
    o.line(format!("weights {}", w.join(" ")));
    if log {
        if c.clients.len() < c.clients_total {
            o.line(format!("(the {} highest scores and every labeled client; --top N or --format json for more)", c.clients.len()));
        }
        if !c.sessions {
            o.line("(the log has no session identifiers: the session sub-score is absent, shown as -, and adds nothing)");
        }
        if c.auth_paths.is_empty() {
            o.line("(classifier.auth_paths is empty: no client is routed to account controls)");
        }
    }
    o.line("");
    o.line(format!("{:<30} {:>7} {:>6} {:>6} {:>7} {:>6} {:>6} {}", "client", "req/min", "novel", "conc", "ua-spr", "sess", "score", "rung"));
    for x in &c.clients {
        let f = &x.features;
        let sess = f.reuse.map_or(format!("{:>6}", "-"), |r| format!("{r:6.2}"));
        o.line(format!("{:<30} {:7.1} {:6.3} {:6.2} {:7.2} {} {:6.2} {}", x.name, f.rpm, f.novelty, f.conc, f.agent_spread, sess, x.score, x.placement));
    }
    o.line("");
    o.line("score contributions (weight x sub-score; - where the signal is absent)");
    o.line(format!("{:<30} {:>6} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}  honoured", "client", "rate", "novelty", "conc", "ua-spr", "sess", "rules", "score"));
    for x in &c.clients {
        let cell = |name: &str, width: usize| -> String {
            match x.subscores.get(name).copied().flatten() {
                Some(_) => format!("{:>width$.2}", x.contributions.get(name).copied().unwrap_or(0.0)),
                None => format!("{:>width$}", "-"),
            }
        };
        o.line(format!(
            "{:<30} {} {} {} {} {} {} {:6.2}  {}",
            x.name,
            cell("rate", 6),
            cell("novelty", 7),
            cell("concentration", 6),
            cell("ua-spread", 6),
            cell("session", 6),
            cell("rules", 6),
            x.score,
            if x.honoured.is_empty() { "-".to_string() } else { x.honoured.join(",") }
        ));
    }
    o.line("");
    o.line("what each rung costs the reader on a 40 ms connection");
    for r in &c.ladder {
        o.line(format!("  {:<19} {:<42} {:>8}  {} extra round trips", r.name, r.action, r.latency, r.round_trips));
    }
    o.line("");
    o.line("one-signal screen: sub-score at least half saturated, no corroboration");
    for s in &c.screen {
        let names = if s.legitimate_names.is_empty() { "-".to_string() } else { s.legitimate_names.join(" ") };
        o.line(format!("  {:<13} flagged {}/{}  abusive {}  legitimate {}  {names}", s.subscore, s.flagged, s.clients, s.abusive, s.legitimate));
    }
    o.line("");
    o.line("route first, rank second: endpoint semantics beat behavioural inference");
    for name in &c.routed {
        if let Some(x) = c.all_routed_rows().into_iter().find(|x| &x.name == name) {
            o.line(format!("  {:<30} {:>8} requests, {:.0}% to auth endpoints, score {:.2}", x.name, thousands(x.requests), 100.0 * x.features.auth, x.score));
        } else {
            o.line(format!("  {name}"));
        }
        o.line("    off the crawler ladder entirely: MFA, per-account lockout, device and ASN bans");
    }
    let e = &c.evaluation;
    o.line("");
    o.line(format!("crawler ladder: {} clients in scope, {} held at {} or above", e.in_scope, e.challenged, e.challenge_rung));
    o.line(format!("  abusive and caught: {} of {}  [{}]", e.caught.len(), e.abusive, e.caught.join(", ")));
    o.line(format!("  legitimate and challenged: {} of {}  [{}]", e.false_positives.len(), e.legitimate, e.false_positives.join(", ")));
    if e.unlabeled_challenged > 0 {
        o.line(format!("  not labeled and challenged: {} (a labels file says which are which)", e.unlabeled_challenged));
    }
    let num = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    o.line(format!("  precision {}  false-positive rate {}", num(e.precision), num(e.false_positive_rate)));
    o.line("");
    o.line("allowlist verified identity, keep the ladder for everyone else:");
    for name in &c.allowlist {
        if let Some(x) = c.clients.iter().find(|x| &x.name == name) {
            o.line(format!("  {:<30} {:.2} -> {:<19} becomes L0", x.name, x.score, x.placement));
        } else {
            o.line(format!("  {name} becomes L0"));
        }
    }
    o.line("");
    o.line("detection tells you who to look at. the ladder is a cost decision,");
    o.line("and every rung above L2 is paid for by someone who did nothing wrong.");
}

impl ClassifierReport {
    fn weights_in_order(&self) -> Vec<(&'static str, f64)> {
        crawlward_policy::classifier::SUBSCORES.iter().map(|n| (*n, self.weights.get(n).copied().unwrap_or(0.0))).collect()
    }

    fn all_routed_rows(&self) -> Vec<&super::report::ClientRow> {
        self.clients.iter().filter(|x| x.rung.is_none()).collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_like_python() {
        assert_eq!(super::thousands(925_580), "925,580");
        assert_eq!(super::thousands(100), "100");
        assert_eq!(super::thousands(1_000), "1,000");
        assert_eq!(super::thousands(0), "0");
    }
}
