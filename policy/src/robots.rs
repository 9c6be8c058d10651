//! robots.txt: the text crawlward publishes, the check of its patterns, and
//! the pattern matching its deep-path list shares with the crawl budget.
//!
//! Patterns follow RFC 9309 as Google and Bing read it: a path prefix where
//! `*` matches any run of characters and a final `$` anchors the end.

use crate::{Action, Policy};
use std::fmt::Write;

/// A robots.txt path pattern is a '/' (or '*') followed by URL characters.
/// Whether `pattern` matches `path` (the path and query of a request).
pub fn robots_match(pattern: &str, target: &[u8]) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let mut parts = pattern.as_bytes().split(|b| *b == b'*');
    let first = parts.next().unwrap_or(&[]);
    let Some(mut rest) = target.strip_prefix(first) else { return false };
    let mut parts = parts.peekable();
    while let Some(part) = parts.next() {
        if anchored && parts.peek().is_none() {
            return rest.ends_with(part);
        }
        match find(rest, part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    !anchored || rest.is_empty()
}

/// The first position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

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

    #[test]
    fn wildcards_and_anchors() {
        assert!(robots_match("/admin", "/admin/users".as_bytes()));
        assert!(!robots_match("/admin", "/adm".as_bytes()));
        assert!(robots_match("/*/*/blob/", "/alice/repo/blob/main/x.rs".as_bytes()));
        assert!(!robots_match("/*/*/blob/", "/alice/blob".as_bytes()));
        assert!(robots_match("/*?sort=", "/glam/browse?sort=title".as_bytes()));
        assert!(!robots_match("/*?sort=", "/glam/browse?page=2".as_bytes()));
        assert!(robots_match("/*.pdf$", "/a/b.pdf".as_bytes()));
        assert!(!robots_match("/*.pdf$", "/a/b.pdf?x=1".as_bytes()));
        assert!(robots_match("/print$", "/print".as_bytes()));
        assert!(!robots_match("/print$", "/printer".as_bytes()));
        assert!(robots_match("*", "/anything".as_bytes()));
    }
}
