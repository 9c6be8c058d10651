//! robots.txt: the text crawlward publishes, and the check of its patterns.
//!
//! Patterns follow RFC 9309 as Google and Bing read it: a path prefix where
//! `*` matches any run of characters and a final `$` anchors the end.

use crate::{Action, Policy};
use std::fmt::Write;

/// A robots.txt path pattern is a '/' (or '*') followed by URL characters.
pub fn check_robots_pattern(p: &str) -> Result<(), String> {
    let ok = (p.starts_with('/') || p.starts_with('*'))
        && p.chars().all(|c| c.is_ascii_graphic() && !"#\"'\\{};".contains(c))
        && !p[..p.len().saturating_sub(1)].contains('$');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid robots.txt pattern \"{p}\": expected a path starting with '/', with '*' wildcards and an optional final '$'"))
    }
}

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
        out.push_str("\n# Crawlers this site refuses (their purpose is blocked by the policy).\n");
        for token in blocked {
            let _ = writeln!(out, "User-agent: {token}\nDisallow: /\n");
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_check() {
        assert!(check_robots_pattern("/*/*/blob/").is_ok());
        assert!(check_robots_pattern("/x$").is_ok());
        assert!(check_robots_pattern("blob").is_err());
        assert!(check_robots_pattern("/a$b").is_err());
        assert!(check_robots_pattern("/a b").is_err());
    }
}
