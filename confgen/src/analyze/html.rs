//! The HTML report: one self-contained file (inline CSS and SVG, no script,
//! nothing fetched), charts first, then the tables they summarise.

use super::report::{ClientRow, Report};
use super::stats::STATUS_CLASSES;
use crawlward_policy::classifier::SUBSCORES;
use std::fmt::Write;

const STATUS_COLOURS: [&str; 6] = ["#4c9a2a", "#7fa7d4", "#e0b030", "#e8743b", "#8e44ad", "#c0392b"];
const SUBSCORE_COLOURS: [&str; 6] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
const RUNG_COLOURS: [&str; 7] = ["#e8f5e9", "#f1f8e9", "#fffde7", "#fff3e0", "#ffe0b2", "#ffccbc", "#ffcdd2"];
/// Most bars a timeline draws: longer logs have adjacent intervals added together.
const MAX_BARS: usize = 240;

pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.1}%", 100.0 * v))
}

pub fn render(r: &Report) -> String {
    let mut h = String::new();
    let title = format!("crawlward analyze: {}", r.policy);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>\n{}\n</style>\n</head>\n<body>\n",
        esc(&title),
        CSS
    );
    let _ = writeln!(h, "<header><h1>{}</h1>", esc(&title));
    if r.source == "log" {
        let span = match (&r.first, &r.last) {
            (Some(a), Some(b)) => format!("{a} to {b}"),
            _ => "no requests".into(),
        };
        let _ = writeln!(
            h,
            "<p class=\"lede\">{} lines read from {}, {} parsed, {} unparseable; {}.</p>",
            r.lines,
            esc(&r.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")),
            r.parsed,
            r.lines - r.parsed,
            esc(&span)
        );
        check_banner(&mut h, r);
    } else {
        let _ = writeln!(h, "<p class=\"lede\">{} clients from an aggregates file.</p>", r.classifier.clients_total);
    }
    let _ = writeln!(h, "</header>");

    if r.source == "log" {
        timelines(&mut h, r);
        share_chart(&mut h, r);
    }
    ladder_chart(&mut h, r);
    contributions_chart(&mut h, r);
    if r.source == "log" {
        agents_table(&mut h, r);
        ignored_tables(&mut h, r);
        networks_table(&mut h, r);
    }
    classifier_tables(&mut h, r);
    if r.source == "log" {
        unparseable_table(&mut h, r);
    }
    if !r.suggestion.is_empty() {
        let _ = writeln!(
            h,
            "<section id=\"suggestion\"><h2>Policy suggestion</h2><p>A fragment to review and merge by hand; nothing was applied.</p><pre>{}</pre></section>",
            esc(&r.suggestion)
        );
    }
    let _ = writeln!(
        h,
        "<footer>Written by crawlward {} (<code>crawlward analyze</code>). Every rung above L2 is paid for by someone who did nothing wrong.</footer>",
        env!("CARGO_PKG_VERSION")
    );
    h.push_str("</body>\n</html>\n");
    h
}

fn check_banner(h: &mut String, r: &Report) {
    let c = &r.checks;
    if r.source == "log" && r.lines == 0 {
        let _ = writeln!(h, "<p id=\"check\">The search-crawler check: nothing to check, the logs have no lines.</p>");
        return;
    }
    if c.ok {
        let _ = writeln!(h, "<p id=\"check\" class=\"ok\">The search-crawler check: no verified search crawler got 429 or 5xx, and robots.txt answered 200 to all {} requests for it.</p>", c.robots_requests);
        return;
    }
    let _ = writeln!(h, "<div id=\"check\" class=\"mistake\"><p><strong>The search-crawler check found policy mistakes.</strong> A 429 or 5xx to a verified search crawler slows the crawling of the whole host.</p><ul>");
    for x in &c.verified_search_refused {
        let st: Vec<String> = x.statuses.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let by: Vec<String> = x.by.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let by = if by.is_empty() { String::new() } else { format!(", from {}", by.join(", ")) };
        let _ = writeln!(
            h,
            "<li class=\"refused\" data-agent=\"{}\">verified {} got {}{} (first at {})</li>",
            esc(&x.agent),
            esc(&x.agent),
            esc(&st.join(", ")),
            esc(&by),
            esc(x.first_at.as_deref().unwrap_or("?"))
        );
    }
    if !c.robots_not_ok.is_empty() {
        let st: Vec<String> = c.robots_not_ok.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = writeln!(
            h,
            "<li class=\"robots\">robots.txt answered {} of {} requests with {}</li>",
            c.robots_not_ok.values().sum::<u64>(),
            c.robots_requests,
            esc(&st.join(", "))
        );
    }
    let _ = writeln!(h, "</ul></div>");
}

fn legend(h: &mut String, items: &[(&str, &str)]) {
    h.push_str("<p class=\"legend\">");
    for (name, colour) in items {
        let _ = write!(h, "<span><i style=\"background:{colour}\"></i>{}</span>", esc(name));
    }
    h.push_str("</p>\n");
}

/// Requests and statuses over time, one small chart per purpose.
fn timelines(h: &mut String, r: &Report) {
    let _ = writeln!(h, "<section id=\"timelines\"><h2>Requests and statuses over time, per purpose</h2>");
    if r.intervals.is_empty() {
        let _ = writeln!(h, "<p>No requests.</p></section>");
        return;
    }
    let per_bar = r.intervals.len().div_ceil(MAX_BARS).max(1);
    let minutes = r.interval_seconds * per_bar as i64 / 60;
    let _ = writeln!(h, "<p>Each bar is {minutes} minutes, split by the status class of the answers.</p>");
    legend(h, &STATUS_CLASSES.iter().copied().zip(STATUS_COLOURS).collect::<Vec<_>>());
    let mut groups: Vec<(&str, u64)> = Vec::new();
    for iv in &r.intervals {
        for (g, row) in &iv.by_purpose {
            let n: u64 = row.values().sum();
            match groups.iter_mut().find(|x| x.0 == g.as_str()) {
                Some(x) => x.1 += n,
                None => groups.push((g.as_str(), n)),
            }
        }
    }
    groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let bars: Vec<&[super::report::IntervalRow]> = r.intervals.chunks(per_bar).collect();
    let (width, height, left, bottom) = (880.0f64, 110.0f64, 48.0f64, 18.0f64);
    let bw = (width - left) / bars.len() as f64;
    for (g, total) in groups {
        let stacks: Vec<[u64; 6]> = bars
            .iter()
            .map(|chunk| {
                let mut s = [0u64; 6];
                for iv in chunk.iter() {
                    if let Some(row) = iv.by_purpose.get(g) {
                        for (c, name) in STATUS_CLASSES.iter().enumerate() {
                            s[c] += row.get(*name).copied().unwrap_or(0);
                        }
                    }
                }
                s
            })
            .collect();
        let peak = stacks.iter().map(|s| s.iter().sum::<u64>()).max().unwrap_or(1).max(1);
        let _ = writeln!(h, "<figure class=\"timeline\"><figcaption>{} <span>{total} requests</span></figcaption>", esc(g));
        let _ = writeln!(h, "<svg class=\"timeline\" data-group=\"{}\" viewBox=\"0 0 {width} {}\" width=\"{width}\" height=\"{}\" role=\"img\" aria-label=\"{} requests over time\">", esc(g), height + bottom, height + bottom, esc(g));
        let _ = writeln!(h, "<line x1=\"{left}\" y1=\"{height}\" x2=\"{width}\" y2=\"{height}\" class=\"axis\"/><text x=\"{}\" y=\"10\" class=\"tick\" text-anchor=\"end\">{peak}</text><text x=\"{}\" y=\"{height}\" class=\"tick\" text-anchor=\"end\">0</text>", left - 4.0, left - 4.0);
        for (i, s) in stacks.iter().enumerate() {
            let mut y = height;
            for (c, n) in s.iter().enumerate() {
                if *n == 0 {
                    continue;
                }
                let bh = (*n as f64 / peak as f64) * (height - 12.0);
                y -= bh;
                let _ = writeln!(
                    h,
                    "<rect class=\"bar\" x=\"{:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{bh:.2}\" fill=\"{}\"><title>{} {}: {n}</title></rect>",
                    left + i as f64 * bw,
                    (bw - 0.5).max(0.5),
                    STATUS_COLOURS[c],
                    esc(&bars[i][0].start),
                    STATUS_CLASSES[c]
                );
            }
        }
        // first and last time under the axis
        let _ = writeln!(
            h,
            "<text x=\"{left}\" y=\"{}\" class=\"tick\">{}</text><text x=\"{width}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>",
            height + 14.0,
            esc(&bars[0][0].start),
            height + 14.0,
            esc(&bars[bars.len() - 1][0].start)
        );
        let _ = writeln!(h, "</svg></figure>");
    }
    let _ = writeln!(h, "</section>");
}

/// The crawlers' share of requests and of time, per interval.
fn share_chart(h: &mut String, r: &Report) {
    let s = &r.crawler_share;
    let _ = writeln!(h, "<section id=\"share\"><h2>Are the crawlers the load?</h2>");
    let time = match s.time_source {
        Some("upstream") => format!("{} of upstream time", pct(s.time_share)),
        Some(_) => format!("{} of request time (no upstream times in the log)", pct(s.time_share)),
        None => "no times in the log (combined format)".into(),
    };
    let _ = writeln!(
        h,
        "<p>Crawlers (named agents and requests without a User-Agent) sent <strong>{}</strong> of the requests; {}.</p>",
        pct(s.request_share),
        esc(&time)
    );
    if r.intervals.len() >= 2 {
        let (width, height, left) = (880.0f64, 120.0f64, 48.0f64);
        let n = r.intervals.len();
        let x = |i: usize| left + (width - left) * i as f64 / (n - 1) as f64;
        let y = |v: f64| height - v * (height - 10.0);
        let req: Vec<String> = r.intervals.iter().enumerate().map(|(i, iv)| format!("{:.1},{:.1}", x(i), y(iv.request_share))).collect();
        let _ = writeln!(
            h,
            "<svg id=\"share-chart\" viewBox=\"0 0 {width} {}\" width=\"{width}\" height=\"{}\" role=\"img\" aria-label=\"crawlers' share per interval\">",
            height + 18.0,
            height + 18.0
        );
        let _ = writeln!(h, "<line x1=\"{left}\" y1=\"{height}\" x2=\"{width}\" y2=\"{height}\" class=\"axis\"/><text x=\"{}\" y=\"12\" class=\"tick\" text-anchor=\"end\">100%</text><text x=\"{}\" y=\"{height}\" class=\"tick\" text-anchor=\"end\">0</text>", left - 4.0, left - 4.0);
        let _ = writeln!(h, "<polyline class=\"requests\" points=\"{}\"/>", req.join(" "));
        if s.time_source.is_some() {
            let t: Vec<String> = r.intervals.iter().enumerate().map(|(i, iv)| format!("{:.1},{:.1}", x(i), y(iv.time_share.unwrap_or(0.0)))).collect();
            let _ = writeln!(h, "<polyline class=\"time\" points=\"{}\"/>", t.join(" "));
        }
        let _ = writeln!(
            h,
            "<text x=\"{left}\" y=\"{}\" class=\"tick\">{}</text><text x=\"{width}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>",
            height + 14.0,
            esc(&r.intervals[0].start),
            height + 14.0,
            esc(&r.intervals[n - 1].start)
        );
        let _ = writeln!(h, "</svg>");
        legend(h, &[("share of requests", "#1f77b4"), ("share of time", "#d62728")]);
    }
    let _ = writeln!(h, "</section>");
}

fn ladder_chart(h: &mut String, r: &Report) {
    let c = &r.classifier;
    let _ = writeln!(h, "<section id=\"ladder-section\"><h2>The ladder</h2>");
    let _ = writeln!(h, "<p>Each client's score on the proportional ladder ({} clients scored{}). The bands are the rungs; a routed client is shown at its score, off the ladder.</p>", c.clients_total, if c.clients.len() < c.clients_total { format!(", the {} shown here have the highest scores or a label", c.clients.len()) } else { String::new() });
    let rows = c.clients.len().max(1);
    let (width, left, row_h, top) = (880.0f64, 250.0f64, 22.0f64, 24.0f64);
    let height = top + rows as f64 * row_h + 8.0;
    let x = |v: f64| left + (width - left - 10.0) * v.clamp(0.0, 1.0);
    let _ = writeln!(
        h,
        "<svg id=\"ladder\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"clients on the ladder\">"
    );
    let mut from = 0.0;
    for (i, rung) in c.ladder.iter().enumerate() {
        let to = rung.ceiling.unwrap_or(1.0).min(1.0);
        let _ = writeln!(
            h,
            "<rect class=\"rung\" data-rung=\"{}\" x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {}</title></rect>",
            esc(rung.name),
            x(from),
            top - 14.0,
            (x(to) - x(from)).max(0.0),
            height - top + 14.0,
            RUNG_COLOURS[i.min(6)],
            esc(rung.name),
            esc(rung.action)
        );
        let _ =
            writeln!(h, "<text x=\"{:.1}\" y=\"{}\" class=\"rung-label\">{}</text>", x(from) + 2.0, top - 4.0, esc(rung.name.split(' ').next().unwrap_or("")));
        from = to;
    }
    for (i, cl) in c.clients.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let colour = if cl.rung.is_none() { "#555" } else { "#333" };
        let _ = writeln!(h, "<text x=\"{}\" y=\"{:.1}\" class=\"name\" text-anchor=\"end\">{}</text>", left - 6.0, y + 15.0, esc(&cl.name));
        let _ = writeln!(
            h,
            "<rect class=\"score\" data-client=\"{}\" data-score=\"{:.4}\" x=\"{left}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{}\" fill=\"{colour}\"{}><title>{}: score {:.2}, {}</title></rect>",
            esc(&cl.name),
            cl.score,
            y + 5.0,
            (x(cl.score) - left).max(1.0),
            row_h - 10.0,
            if cl.rung.is_none() { " fill-opacity=\"0.4\"" } else { "" },
            esc(&cl.name),
            cl.score,
            esc(&cl.placement)
        );
        // a long bar carries its label inside, so that it stays in the chart
        if cl.score > 0.7 {
            let _ = writeln!(
                h,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"value inside\" text-anchor=\"end\">{:.2} {}</text>",
                x(cl.score) - 4.0,
                y + 15.0,
                cl.score,
                esc(&cl.placement)
            );
        } else {
            let _ = writeln!(h, "<text x=\"{:.1}\" y=\"{:.1}\" class=\"value\">{:.2} {}</text>", x(cl.score) + 4.0, y + 15.0, cl.score, esc(&cl.placement));
        }
    }
    let _ = writeln!(h, "</svg>");
    let _ = writeln!(h, "<table id=\"rungs\"><thead><tr><th>rung</th><th>below</th><th>what it does</th><th>costs the reader (40 ms link)</th><th>extra round trips</th><th>clients</th></tr></thead><tbody>");
    for rung in &c.ladder {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(rung.name),
            rung.ceiling.map_or("-".into(), |v| format!("{v:.2}")),
            esc(rung.action),
            esc(rung.latency),
            rung.round_trips,
            rung.clients
        );
    }
    let _ = writeln!(h, "</tbody></table></section>");
}

fn contributions_chart(h: &mut String, r: &Report) {
    let c = &r.classifier;
    let _ = writeln!(h, "<section id=\"contributions-section\"><h2>Score contributions</h2><p>Weight &times; sub-score for each signal: the score is their sum. Weights: {}.</p>", esc(&SUBSCORES.iter().map(|n| format!("{n} {:.2}", c.weights.get(n).copied().unwrap_or(0.0))).collect::<Vec<_>>().join(", ")));
    legend(h, &SUBSCORES.iter().copied().zip(SUBSCORE_COLOURS).collect::<Vec<_>>());
    let rows = c.clients.len().max(1);
    let (width, left, row_h) = (880.0f64, 250.0f64, 22.0f64);
    let height = rows as f64 * row_h + 8.0;
    let scale = (width - left - 60.0) / c.weights.values().sum::<f64>().max(1.0);
    let _ = writeln!(h, "<svg id=\"contributions\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"score contributions per client\">");
    for (i, cl) in c.clients.iter().enumerate() {
        let y = i as f64 * row_h + 4.0;
        let _ = writeln!(h, "<text x=\"{}\" y=\"{:.1}\" class=\"name\" text-anchor=\"end\">{}</text>", left - 6.0, y + 15.0, esc(&cl.name));
        let mut xpos = left;
        for (k, name) in SUBSCORES.iter().enumerate() {
            let v = cl.contributions.get(name).copied().unwrap_or(0.0);
            if v <= 0.0 {
                continue;
            }
            let w = v * scale;
            let _ = writeln!(h, "<rect class=\"part\" data-client=\"{}\" data-subscore=\"{name}\" x=\"{xpos:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\"><title>{}: {name} {:.2}</title></rect>", esc(&cl.name), y + 3.0, row_h - 8.0, SUBSCORE_COLOURS[k], esc(&cl.name), v);
            xpos += w;
        }
        let _ = writeln!(h, "<text x=\"{:.1}\" y=\"{:.1}\" class=\"value\">{:.2}</text>", xpos + 4.0, y + 15.0, cl.score);
    }
    let _ = writeln!(h, "</svg>");
    client_table(h, &c.clients);
    let _ = writeln!(h, "</section>");
}

fn client_table(h: &mut String, clients: &[ClientRow]) {
    let _ = writeln!(h, "<table id=\"clients\"><thead><tr><th>client</th><th>agent</th><th>requests</th><th>req/min</th><th>novelty</th><th>conc</th><th>ua-spread</th><th>session reuse</th><th>rules ok</th><th>honoured</th><th>score</th><th>rung</th><th>label</th></tr></thead><tbody>");
    for c in clients {
        let f = &c.features;
        let _ = writeln!(
            h,
            "<tr data-client=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.3}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.name),
            esc(&c.name),
            esc(&c.agent),
            c.requests,
            f.rpm,
            f.novelty,
            f.conc,
            f.agent_spread,
            f.reuse.map_or("-".into(), |v| format!("{v:.2}")),
            f.rules_ok,
            esc(&c.honoured.join(", ")),
            c.score,
            esc(&c.placement),
            c.label.unwrap_or("")
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}

fn agents_table(h: &mut String, r: &Report) {
    let _ = writeln!(h, "<section><h2>Agents</h2><table id=\"agents\"><thead><tr><th>agent</th><th>purpose</th><th>requests</th><th>share</th><th>verified</th><th>spoofed</th><th>unverified</th><th>disallowed</th><th>upstream s</th><th>statuses</th></tr></thead><tbody>");
    for a in &r.agents {
        let mut st: Vec<(&String, &u64)> = a.statuses.iter().collect();
        st.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
        let st: Vec<String> = st.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = writeln!(
            h,
            "<tr data-agent=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td></tr>",
            esc(&a.agent),
            esc(&a.agent),
            esc(&a.purpose),
            a.requests,
            pct(Some(a.share)),
            a.verified,
            a.spoofed,
            a.unverified,
            a.disallowed,
            a.upstream_seconds,
            esc(&st.join(", "))
        );
    }
    let _ = writeln!(h, "</tbody></table></section>");
}

fn ignored_tables(h: &mut String, r: &Report) {
    let ig = &r.robots_ignored;
    let _ = writeln!(h, "<section><h2>robots.txt ignored</h2><p>Requests to paths the published robots.txt disallows.</p>");
    if ig.by_agent.is_empty() {
        let _ = writeln!(h, "<p>None.</p></section>");
        return;
    }
    let _ = writeln!(
        h,
        "<table id=\"ignored-agents\"><thead><tr><th>agent</th><th>requests</th><th>disallowed</th><th>fetched robots.txt</th></tr></thead><tbody>"
    );
    for x in &ig.by_agent {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.name),
            x.requests,
            x.disallowed,
            if x.fetched_robots { "yes" } else { "no" }
        );
    }
    let _ = writeln!(h, "</tbody></table><table id=\"ignored-clients\"><thead><tr><th>client</th><th>agent</th><th>requests</th><th>disallowed</th><th>fetched robots.txt</th></tr></thead><tbody>");
    for x in &ig.by_address {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.name),
            esc(&x.agent),
            x.requests,
            x.disallowed,
            if x.fetched_robots { "yes" } else { "no" }
        );
    }
    let _ = writeln!(h, "</tbody></table></section>");
}

fn networks_table(h: &mut String, r: &Report) {
    let _ = writeln!(h, "<section><h2>Networks of several addresses</h2><p>Each IPv4 /24 and IPv6 /48 with more than one address, scored as one client.</p>");
    if r.networks.is_empty() {
        let _ = writeln!(h, "<p>None.</p></section>");
        return;
    }
    let _ = writeln!(h, "<table id=\"networks\"><thead><tr><th>network</th><th>addresses</th><th>requests</th><th>disallowed</th><th>top agent</th><th>score</th><th>rung</th><th>highest address alone</th></tr></thead><tbody>");
    for n in &r.networks {
        let _ = writeln!(
            h,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td></tr>",
            if n.one_client { "one-client" } else { "" },
            esc(&n.network),
            n.addresses,
            n.requests,
            n.disallowed,
            esc(&n.family),
            n.score,
            esc(&n.rung),
            esc(n.highest_address_rung.as_deref().unwrap_or("-"))
        );
    }
    let _ = writeln!(h, "</tbody></table></section>");
}

fn classifier_tables(h: &mut String, r: &Report) {
    let c = &r.classifier;
    let _ = writeln!(h, "<section id=\"screen\"><h2>One-signal screen</h2><p>Clients each sub-score alone would flag (at least half saturated), with no other signal to corroborate it.</p><table><thead><tr><th>sub-score</th><th>flagged</th><th>abusive</th><th>legitimate</th><th>legitimate clients flagged</th></tr></thead><tbody>");
    for s in &c.screen {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            s.subscore,
            s.flagged,
            s.clients,
            s.abusive,
            s.legitimate,
            esc(&s.legitimate_names.join(", "))
        );
    }
    let e = &c.evaluation;
    let num = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    let _ = writeln!(h, "</tbody></table><h2>The ladder against the labels</h2><p id=\"evaluation\">{} clients in scope, {} held at {} or above. Abusive and caught: {} of {} ({}). Legitimate and challenged: {} of {} ({}).{} <strong>Precision {}, false-positive rate {}.</strong></p>",
        e.in_scope, e.challenged, esc(&e.challenge_rung), e.caught.len(), e.abusive, esc(&e.caught.join(", ")), e.false_positives.len(), e.legitimate, esc(&e.false_positives.join(", ")),
        if e.unlabeled_challenged > 0 { format!(" Not labeled and challenged: {}.", e.unlabeled_challenged) } else { String::new() },
        num(e.precision), num(e.false_positive_rate));
    if !c.routed.is_empty() {
        let _ = writeln!(h, "<p>Routed to account controls (off the crawler ladder): {}.</p>", esc(&c.routed.join(", ")));
    }
    if !c.allowlist.is_empty() {
        let _ = writeln!(h, "<p>Allowlist verified identity, keep the ladder for everyone else: {} become L0.</p>", esc(&c.allowlist.join(", ")));
    }
    let _ = writeln!(h, "</section>");
}

fn unparseable_table(h: &mut String, r: &Report) {
    let _ = writeln!(h, "<section><h2>Unparseable lines</h2>");
    if r.unparseable.is_empty() {
        let _ = writeln!(h, "<p id=\"unparseable\">None: every line was read.</p></section>");
        return;
    }
    let _ =
        writeln!(h, "<table id=\"unparseable\"><thead><tr><th>what could not be read</th><th>lines</th><th>first at</th><th>example</th></tr></thead><tbody>");
    for u in &r.unparseable {
        let _ = writeln!(h, "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>", esc(&u.reason), u.count, esc(&u.at), esc(&u.example));
    }
    let _ = writeln!(h, "</tbody></table></section>");
}

const CSS: &str = "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Liberation Sans',sans-serif;margin:0 auto;max-width:960px;padding:1.5em;color:#222;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.lede{color:#555}#check{padding:.6em .9em;border-radius:6px}#check.ok{background:#e8f5e9;border:1px solid #a5d6a7}#check.mistake{background:#ffebee;border:1px solid #ef9a9a}
table{border-collapse:collapse;width:100%;font-size:.85em;margin:.6em 0}th,td{border-bottom:1px solid #eee;padding:.25em .4em;text-align:left;vertical-align:top}th{background:#fafafa}
td:nth-child(n+3){font-variant-numeric:tabular-nums}figure{margin:.6em 0}figcaption{font-weight:600;font-size:.9em}figcaption span{font-weight:400;color:#777;margin-left:.5em}
svg{max-width:100%;height:auto;display:block}.axis{stroke:#999;stroke-width:1}.tick,.rung-label,.value,.name{font-size:11px;fill:#444}.value.inside{fill:#fff}.rung-label{font-weight:600}
polyline{fill:none;stroke-width:1.6}polyline.requests{stroke:#1f77b4}polyline.time{stroke:#d62728}
.legend span{display:inline-block;margin-right:1em;font-size:.85em}.legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-.1em;border-radius:2px}
tr.one-client{background:#fff3e0}pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:.8em}code{font-size:.9em;word-break:break-all}footer{margin-top:2em;color:#777;font-size:.85em}";
