//! The robots.txt crawlward publishes for a policy: its rules, the crawlers
//! whose purpose it refuses, and the sitemap.

use crate::{Action, Policy};
use std::fmt::Write;

/// The robots.txt text for a policy. `header` is the generated-file comment.
pub fn robots_txt(policy: &Policy, header: &str) -> String {
    let r = &policy.robots;
    let mut out = String::new();
    for line in header.lines() {
        let _ = writeln!(out, "# {line}");
    }
    if let Some(c) = &r.contact {
        let _ = writeln!(out, "# Contact: {c}");
    }
    out.push('\n');
    out.push_str("User-agent: *\n");
    for p in &r.disallow {
        let _ = writeln!(out, "Disallow: {p}");
    }
    for p in &r.disallow_params {
        // the parameter first in the query, or after another one
        let _ = writeln!(out, "Disallow: /*?{p}=");
        let _ = writeln!(out, "Disallow: /*&{p}=");
    }
    for p in &r.deep_paths {
        let _ = writeln!(out, "Disallow: {p}");
    }
    if let Some(d) = r.crawl_delay {
        let _ = writeln!(out, "Crawl-delay: {d}");
    }
    let blocked = blocked_tokens(policy);
    if !blocked.is_empty() {
        // one group for all of them: consecutive User-agent lines share the rules that follow (RFC 9309)
        out.push_str("\n# Crawlers this site refuses (their purpose is blocked by the policy).\n");
        for token in blocked {
            let _ = writeln!(out, "User-agent: {token}");
        }
        out.push_str("Disallow: /\n\n");
    } else {
        out.push('\n');
    }
    let _ = writeln!(out, "Sitemap: {}", r.sitemap);
    out
}

/// robots.txt tokens of the agents whose purpose the policy blocks, in
/// catalogue order, robots-only tokens included, each once.
pub fn blocked_tokens(policy: &Policy) -> Vec<String> {
    let mut tokens: Vec<String> = Vec::new();
    for agent in policy.identity.catalogue.agents() {
        let blocked = matches!(policy.identity.purpose_action(agent.purpose), Action::Block(_));
        if blocked && agent.purpose.reads_robots() && !tokens.iter().any(|t| t.eq_ignore_ascii_case(&agent.robots_token)) {
            tokens.push(agent.robots_token.clone());
        }
    }
    tokens
}
