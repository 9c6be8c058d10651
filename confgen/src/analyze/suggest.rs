//! The policy fragment the ladder suggests: YAML a sysadmin reviews and
//! merges by hand. Nothing here changes a policy.
//!
//! crawlward serves no challenge (never a JavaScript challenge), so the
//! ladder's rungs read as the policy's own words: L0 to L2 need nothing
//! new, L3 to L5 (challenges) read as `throttle`, L6 as `block`. A purpose is
//! suggested only when every client of it that the log shows is at the
//! challenge rung or above; one agent or one address alone is written as a
//! comment, since the policy decides by purpose and keys no rule on an address.

use super::report::{Candidate, Report};
use crawlward_policy::classifier::Placement;
use crawlward_policy::{Action, Policy, Purpose};
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn fragment(report: &Report, cands: &[Candidate], policy: &Policy) -> String {
    let s = &policy.classifier;
    let mut out = String::new();
    let span = match (&report.first, &report.last) {
        (Some(a), Some(b)) => format!(", {a} to {b}"),
        _ => String::new(),
    };
    let inputs: Vec<&str> = report.inputs.iter().map(|i| i.name.as_str()).collect();
    let _ = writeln!(
        out,
        "# Suggested by `crawlward analyze` for {} from {}{span}.",
        report.policy,
        if inputs.is_empty() { "standard input".to_string() } else { inputs.join(", ") }
    );
    let _ = writeln!(out, "# Review it: nothing was applied. Merge what you agree with into the policy, then");
    let _ = writeln!(out, "# `crawlward check` and `crawlward render`. The ladder's challenge rungs (L3 to L5) read");
    let _ = writeln!(out, "# as throttle and L6 as block: crawlward serves no challenge.");
    let high = |c: &Candidate| matches!(c.scored.placement, Placement::Rung(r) if r >= s.challenge_rung);
    let top_rung = |c: &Candidate| c.scored.rung_index().unwrap_or(0);
    let rung_name = |r: usize| s.ladder.get(r).map_or("?", |x| x.name);

    // by purpose: the catalogue agents' clients (a verified crawler keeps its allowlist)
    let mut by_purpose: BTreeMap<Purpose, Vec<&Candidate>> = BTreeMap::new();
    for c in cands.iter().filter(|c| !c.verified) {
        if let Some(p) = c.purpose {
            by_purpose.entry(p).or_default().push(c);
        }
    }
    // a purpose whose verified crawlers are in the log is never limited for its impostors:
    // the budgets and the bot-blocker's `spoofed` answer are theirs
    let verified_purposes: Vec<&str> = report.agents.iter().filter(|a| a.verified > 0).map(|a| a.purpose.as_str()).collect();
    let mut actions: Vec<String> = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    for (purpose, list) in &by_purpose {
        let current = policy.identity.purpose_action(*purpose);
        if matches!(current, Action::Block(_)) || !list.iter().all(|c| high(c)) {
            continue;
        }
        if verified_purposes.contains(&purpose.as_str()) {
            kept.push(format!("#   {}: verified crawlers of it are in the log; keep it {}", purpose.as_str(), current.as_str()));
            continue;
        }
        let all_l6 = list.iter().all(|c| top_rung(c) + 1 >= s.ladder.len());
        let word = if all_l6 { "block" } else { "throttle" };
        if word == "throttle" && current == Action::Throttle {
            continue;
        }
        let mut agents: Vec<&str> = list.iter().map(|c| c.agent.as_str()).collect();
        agents.sort();
        agents.dedup();
        let clients = if list.len() == 1 { "1 client".to_string() } else { format!("{} clients", list.len()) };
        let mut line = format!(
            "  {}: {word}    # was {}; {clients} ({}), every one at {} or above",
            purpose.as_str(),
            current.as_str(),
            agents.join(", "),
            rung_name(s.challenge_rung).split(' ').next().unwrap_or("")
        );
        if word == "throttle" && policy.rate_limits.as_ref().is_none_or(|r| r.throttle.is_none()) {
            line.push_str("; throttle needs rate_limits.throttle");
        }
        actions.push(line);
    }
    if !kept.is_empty() {
        let _ = writeln!(out, "\n# Purposes whose unverified clients are all at the challenge rung or above, left as they are:");
        for k in kept {
            let _ = writeln!(out, "{k}");
        }
    }
    if actions.is_empty() {
        let _ = writeln!(out, "\n# No purpose has every one of its clients at the challenge rung or above: no action to change.");
    } else {
        let _ = writeln!(out, "\nactions:");
        for a in actions {
            let _ = writeln!(out, "{a}");
        }
    }

    let mut notes: Vec<String> = Vec::new();
    let mut high_clients: Vec<&Candidate> = cands.iter().filter(|c| high(c) && !c.verified).collect();
    high_clients.sort_by(|a, b| b.scored.score.total_cmp(&a.scored.score).then(a.name.cmp(&b.name)));
    for c in high_clients.iter().take(50) {
        let what = if top_rung(c) + 1 >= s.ladder.len() { "block" } else { "throttle" };
        let agent = if c.agent.is_empty() { "-".to_string() } else { c.agent.clone() };
        let deny = if c.kind == "address" { format!("; nginx, in the server block: deny {};", c.name) } else { String::new() };
        notes.push(format!("#   {:<30} {:<24} score {:.2} {:<20} -> {what}{deny}", c.name, agent, c.scored.score, rung_name(top_rung(c))));
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "\n# Clients at the challenge rung or above (the policy keys no rule on one address or one");
        let _ = writeln!(out, "# agent alone; the crawl budgets already count each address):");
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    let verified: Vec<&Candidate> = cands.iter().filter(|c| c.verified && high(c)).collect();
    if !verified.is_empty() {
        let _ = writeln!(out, "\n# Verified crawlers the ladder alone would challenge: their verified identity keeps them at L0");
        let _ = writeln!(out, "# (allowlist verified identity, keep the ladder for everyone else). Keep their purpose allowed:");
        for c in verified {
            let _ = writeln!(out, "#   {:<30} score {:.2} {} -> L0", c.name, c.scored.score, rung_name(top_rung(c)));
        }
    }
    let one: Vec<&super::report::NetworkRow> = report.networks.iter().filter(|n| n.one_client).collect();
    if !one.is_empty() {
        let _ = writeln!(out, "\n# Networks whose addresses together behave as one client (each alone is lower on the ladder):");
        for n in one {
            let _ = writeln!(
                out,
                "#   {:<22} {} addresses, {} requests, {} together, {} alone at most",
                n.network,
                n.addresses,
                n.requests,
                n.rung,
                n.highest_address_rung.as_deref().unwrap_or("-")
            );
        }
    }
    out
}
