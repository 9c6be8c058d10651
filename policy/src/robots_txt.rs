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
    let prefs = &policy.preferences;
    if prefs.content_usage {
        // the site's, then each path's (the longest matching path applies)
        if let Some(d) = prefs.site.dictionary() {
            let _ = writeln!(out, "Content-Usage: {d}");
        }
        for (path, usage) in &prefs.paths {
            if let Some(d) = usage.dictionary() {
                let _ = writeln!(out, "Content-Usage: {path} {d}");
            }
        }
    }
    if let Some(signal) = &prefs.content_signal {
        let _ = writeln!(out, "Content-Signal: {signal}");
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
    if let Some(license) = &policy.preferences.license {
        let _ = writeln!(out, "License: {license}");
    }
    let _ = writeln!(out, "Sitemap: {}", r.sitemap);
    out
}

/// `robots.source: app`: the directory, beside the rendered files, where
/// nginx keeps the application's robots.txt (it creates it at start, owned
/// by its worker user, as the location's temporary path).
pub const KEPT_DIR: &str = "app-robots";
/// The application's last answer that reads as robots.txt, in [`KEPT_DIR`].
pub const KEPT_FILE: &str = "robots.txt";
/// With the module: the application's newest plain-text 200, not read yet.
pub const NEWEST_FILE: &str = "robots.txt.new";
/// An answer that is not kept, for the operator to read.
pub const REFUSED_FILE: &str = "refused.txt";
/// The most of a robots.txt crawlers read (Google: 500 KiB); a longer answer is not kept.
pub const KEPT_MAX: u64 = 500 * 1024;

/// Whether an answer of the application reads as robots.txt, and may be
/// kept: at most [`KEPT_MAX`] bytes of UTF-8, not markup, with at least one
/// group (a `User-agent` line). An error page, a maintenance page or an
/// empty answer is not kept.
pub fn reads_as_robots(body: &[u8]) -> bool {
    if body.len() as u64 > KEPT_MAX {
        return false;
    }
    let Ok(text) = std::str::from_utf8(body) else { return false };
    let text = text.trim_start_matches('\u{feff}').trim_start();
    !text.starts_with('<') && RobotsFile::parse(text).has_groups()
}

/// What nginx answers for robots.txt when the application cannot (the
/// module's `crawlward_robots_kept`), from the rendered directory `dir`:
/// the application's newest answer when it reads as robots.txt, which then
/// becomes the kept copy (one that does not is moved to [`REFUSED_FILE`]);
/// else the kept copy; else the rendered robots.txt. None when none can be read.
pub fn kept_answer(dir: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let read = |p: &std::path::Path| -> Option<Vec<u8>> {
        let mut body = Vec::new();
        std::fs::File::open(p).ok()?.take(KEPT_MAX + 1).read_to_end(&mut body).ok()?;
        Some(body)
    };
    let kept = dir.join(KEPT_DIR);
    let newest = kept.join(NEWEST_FILE);
    if let Some(body) = read(&newest) {
        // a rename: whole, and a worker that meets the file gone reads the kept copy
        let to = if reads_as_robots(&body) { KEPT_FILE } else { REFUSED_FILE };
        let _ = std::fs::rename(&newest, kept.join(to));
    }
    read(&kept.join(KEPT_FILE)).filter(|b| reads_as_robots(b)).or_else(|| read(&dir.join("robots.txt")))
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

/// A robots.txt as crawlers read it (RFC 9309): its groups.
#[derive(Debug, Clone, Default)]
pub struct RobotsFile {
    groups: Vec<Group>,
}

/// One group: the product tokens it names (lower-cased), and its rules,
/// `(allow, pattern)`.
#[derive(Debug, Clone, Default)]
struct Group {
    agents: Vec<String>,
    rules: Vec<(bool, String)>,
}

impl RobotsFile {
    /// Read a robots.txt: `User-agent` lines open a group (consecutive ones
    /// share it), `Allow` and `Disallow` lines are its rules; comments,
    /// other fields and lines before the first group are left out. An empty
    /// `Disallow` allows everything, as no rule.
    pub fn parse(text: &str) -> RobotsFile {
        let mut file = RobotsFile::default();
        let mut open_for_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once(':') else { continue };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if !open_for_agents {
                        file.groups.push(Group::default());
                        open_for_agents = true;
                    }
                    if let Some(group) = file.groups.last_mut() {
                        group.agents.push(value.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    open_for_agents = false;
                    if let (Some(group), false) = (file.groups.last_mut(), value.is_empty()) {
                        group.rules.push((key == "allow", value.to_string()));
                    }
                }
                _ => {}
            }
        }
        file
    }

    /// Whether the file has at least one group (a `User-agent` line): a text
    /// without one, such as an error page, says nothing to any crawler.
    pub fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Whether a crawler whose product token is `agent` may fetch `target`
    /// (path and query): the rules of every group that names it (any case),
    /// else of the `*` groups; the longest matching pattern decides, an
    /// allow on a tie; no matching rule allows.
    pub fn allows(&self, agent: &str, target: &str) -> bool {
        let agent = agent.to_ascii_lowercase();
        let names = |g: &Group, name: &str| g.agents.iter().any(|a| a == name);
        let own = if self.groups.iter().any(|g| names(g, &agent)) { agent.as_str() } else { "*" };
        let rules: Vec<&(bool, String)> = self.groups.iter().filter(|g| names(g, own)).flat_map(|g| &g.rules).collect();
        let best = rules.iter().filter(|(_, p)| crate::robots::robots_match(p, target.as_bytes())).max_by_key(|(allow, p)| (p.len(), *allow));
        best.is_none_or(|(allow, _)| *allow)
    }
}

/// Where an application's own robots.txt and the policy's disagree, each in
/// a sentence. Both files are asked about the same requests: the site's
/// root; an example of each `robots.disallow` and `deep_paths` pattern; a
/// query with each `disallow_params` and `open_params` parameter; each browse
/// location, bare and with two facets; and the root for each crawler whose
/// purpose the policy blocks. Empty when they answer all of them alike.
pub fn disagreements(policy: &Policy, app: &RobotsFile) -> Vec<String> {
    let ours = RobotsFile::parse(&robots_txt(policy, ""));
    // a pattern as a path a crawler could ask for: each `*` some text, no end anchor
    let example = |pattern: &str| pattern.trim_end_matches('$').replace('*', "x");
    let every = "*".to_string();
    let mut asked: Vec<(String, String, String)> = vec![(every.clone(), "/".into(), "the site's root".into())];
    let r = &policy.robots;
    for (what, patterns) in [("robots.disallow", &r.disallow), ("robots.deep_paths", &r.deep_paths)] {
        asked.extend(patterns.iter().map(|p| (every.clone(), example(p), format!("{what} {p}"))));
    }
    for p in &r.disallow_params {
        for target in [format!("/x?{p}=1"), format!("/x?a=1&{p}=1")] {
            asked.push((every.clone(), target, format!("robots.disallow_params {p}")));
        }
    }
    asked.extend(r.open_params.iter().map(|p| (every.clone(), format!("/x?{p}=2"), format!("robots.open_params {p}"))));
    if let Some(b) = &policy.browse {
        let two: Vec<String> = b.facet_names.iter().take(2).map(|f| format!("{f}=1")).collect();
        for location in &b.locations {
            asked.push((every.clone(), location.clone(), "a browse page of browse_shed".into()));
            if two.len() == 2 {
                asked.push((
                    every.clone(),
                    format!("{location}?{}", two.join("&")),
                    "two facets, which the facet guard refuses without a same-site Referer".into(),
                ));
            }
        }
    }
    asked.extend(blocked_tokens(policy).into_iter().map(|t| (t, "/".into(), "its purpose is blocked by the policy".into())));
    // the same answer for several crawlers is one sentence
    let mut found: Vec<(String, bool, String, Vec<String>)> = Vec::new();
    for (agent, target, why) in asked {
        let (policy_allows, app_allows) = (ours.allows(&agent, &target), app.allows(&agent, &target));
        if policy_allows == app_allows {
            continue;
        }
        match found.iter_mut().find(|(t, a, w, _)| *t == target && *a == app_allows && *w == why) {
            Some((_, _, _, agents)) if !agents.contains(&agent) => agents.push(agent),
            Some(_) => {}
            None => found.push((target, app_allows, why, vec![agent])),
        }
    }
    found
        .into_iter()
        .map(|(target, app_allows, why, agents)| {
            let who = match agents.as_slice() {
                [one] if one == "*" => "every crawler".to_string(),
                few if few.len() <= 4 => few.join(", "),
                many => format!("{} and {} more", many[..3].join(", "), many.len() - 3),
            };
            if app_allows {
                format!("{target} for {who}: the policy's robots.txt disallows it ({why}), the application's allows it")
            } else {
                format!("{target} for {who}: the application's robots.txt disallows it, the policy's allows it ({why})")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_that_reads_as_robots_txt_is_kept() {
        assert!(reads_as_robots(b"User-agent: *\nDisallow: /admin\n"));
        assert!(reads_as_robots(b"\xef\xbb\xbf# hi\nUser-agent: *\nAllow: /\n"), "a byte order mark");
        for bad in [&b""[..], b"Internal error\n", b"<html><body>User-agent: *</body></html>", b"\xff\xfeU\x00", b"  <!DOCTYPE html>"] {
            assert!(!reads_as_robots(bad), "{:?}", String::from_utf8_lossy(bad));
        }
        let long = format!("User-agent: *\n{}", "Disallow: /x\n".repeat(50_000));
        assert!(!reads_as_robots(long.as_bytes()), "longer than crawlers read");
    }

    #[test]
    fn the_kept_answer_takes_the_newest_good_answer_and_keeps_the_last_good_one() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("robots.txt"), "User-agent: *\nDisallow: /rendered\n").unwrap();
        // nothing kept: the rendered file
        assert_eq!(kept_answer(dir).unwrap(), b"User-agent: *\nDisallow: /rendered\n");
        let kept = dir.join(KEPT_DIR);
        std::fs::create_dir(&kept).unwrap();
        // a good newest answer becomes the kept copy
        std::fs::write(kept.join(NEWEST_FILE), "User-agent: *\nDisallow: /one\n").unwrap();
        assert_eq!(kept_answer(dir).unwrap(), b"User-agent: *\nDisallow: /one\n");
        assert!(!kept.join(NEWEST_FILE).exists());
        // a plain-text error page answered 200 replaces nothing, and is put aside
        std::fs::write(kept.join(NEWEST_FILE), "Service temporarily unavailable\n").unwrap();
        assert_eq!(kept_answer(dir).unwrap(), b"User-agent: *\nDisallow: /one\n");
        assert_eq!(std::fs::read(kept.join(REFUSED_FILE)).unwrap(), b"Service temporarily unavailable\n");
        // a kept copy that does not read as robots.txt (written by another version) is not served
        std::fs::write(kept.join(KEPT_FILE), "oops").unwrap();
        assert_eq!(kept_answer(dir).unwrap(), b"User-agent: *\nDisallow: /rendered\n");
        std::fs::remove_file(dir.join("robots.txt")).unwrap();
        assert_eq!(kept_answer(dir), None);
    }

    /// The preference lines are records RFC 9309 parsers skip (an unknown
    /// key): with them, every crawler reads the same rules as without them.
    #[test]
    fn preference_lines_change_no_crawlers_rules() {
        let head = "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {disallow: [/admin], disallow_params: [sort], crawl_delay: 5}\n";
        let plain = crate::load_str("p.yaml", &format!("{head}preferences: {{content_usage: false}}\n")).unwrap();
        let said = crate::load_str(
            "p.yaml",
            &format!("{head}preferences:\n  search: y\n  paths: [{{path: /research/, search: n}}, {{path: /admin/open/, train-ai: n}}]\n  content_signal: true\n  license: https://example.org/licence.xml\n"),
        )
        .unwrap();
        let (plain, said) = (robots_txt(&plain, "h"), robots_txt(&said, "h"));
        assert!(!plain.contains("Content-Usage"), "{plain}");
        for line in [
            "\nCrawl-delay: 5\nContent-Usage: search=y, train-ai=n\nContent-Usage: /admin/open/ search=y, train-ai=n\nContent-Usage: /research/ search=n, train-ai=n\nContent-Signal: search=yes, ai-input=yes, ai-train=no\n",
            "\nLicense: https://example.org/licence.xml\nSitemap: https://example.org/sitemap.xml\n",
        ] {
            assert!(said.contains(line), "{line:?} in:\n{said}");
        }
        let (plain, said) = (RobotsFile::parse(&plain), RobotsFile::parse(&said));
        for agent in ["Googlebot", "GPTBot", "CCBot", "Bingbot"] {
            for target in ["/", "/admin", "/admin/open/x", "/research/a", "/x?sort=1", "/x?a=1&sort=2", "/record/1"] {
                assert_eq!(plain.allows(agent, target), said.allows(agent, target), "{agent} {target}");
            }
        }
    }

    #[test]
    fn groups_and_rules_as_rfc_9309_reads_them() {
        let f = RobotsFile::parse(
            "# a comment\nUser-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n\nUser-agent: *\nDisallow: /admin # staff\nAllow: /admin/public\nDisallow: /*?sort=\nDisallow:\n",
        );
        assert!(!f.allows("gptbot", "/record/1"), "GPTBot's own group, any case");
        assert!(!f.allows("CCBot", "/"), "consecutive User-agent lines share a group");
        assert!(f.allows("Googlebot", "/record/1"));
        assert!(!f.allows("Googlebot", "/admin/x"));
        assert!(f.allows("Googlebot", "/admin/public/x"), "the longest match decides");
        assert!(!f.allows("Googlebot", "/browse?sort=date"));
        assert!(f.allows("Googlebot", "/browse?page=2"));
        assert!(RobotsFile::parse("").allows("x", "/"), "no file, no rule: allowed");
        assert!(RobotsFile::parse("User-agent: *\nAllow: /a\nDisallow: /a\n").allows("x", "/a"), "a tie allows");
    }

    #[test]
    fn an_application_file_is_compared_with_the_policy() {
        let policy = crate::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {disallow: [/admin], disallow_params: [sort], open_params: [page], deep_paths: ['/*/print$']}\nbrowse_shed: {locations: [/browse], facet_names: [subjects, places]}\nactions: {ai-training: block-444}\n",
        )
        .unwrap();
        let ours = RobotsFile::parse(&robots_txt(&policy, ""));
        assert_eq!(disagreements(&policy, &ours), Vec::<String>::new(), "the rendered file agrees with its policy");
        let found = disagreements(&policy, &RobotsFile::parse("User-agent: *\nDisallow: /admin\nDisallow: /*?*subjects=\n"));
        let has = |text: &str| found.iter().any(|d| d.contains(text));
        assert!(
            has("/x?sort=1 for every crawler: the policy's robots.txt disallows it (robots.disallow_params sort), the application's allows it"),
            "{found:#?}"
        );
        assert!(has("/x/print for every crawler: the policy's robots.txt disallows it (robots.deep_paths /*/print$)"), "{found:#?}");
        assert!(
            has("/browse?subjects=1&places=1 for every crawler: the application's robots.txt disallows it, the policy's allows it (two facets"),
            "{found:#?}"
        );
        assert!(has("GPTBot and ") && has(" more: the policy's robots.txt disallows it (its purpose is blocked by the policy)"), "{found:#?}");
        assert!(!has("/admin"), "{found:#?}");
        let closed = disagreements(&policy, &RobotsFile::parse("User-agent: *\nDisallow: /\n"));
        assert_eq!(
            closed.first().map(String::as_str),
            Some("/ for every crawler: the application's robots.txt disallows it, the policy's allows it (the site's root)")
        );
    }
}
