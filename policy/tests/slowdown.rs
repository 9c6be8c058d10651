//! A deliberate slowdown of verified crawlers ends by itself: Google's
//! crawler documentation says a 429 used on purpose is "for a short time, a
//! few hours or one to two days". `crawl_budget.verified_until` and
//! `verified_for` end it; `crawlward check` warns when it has no end or lasts
//! longer; explain says which applies.

use crawlward_policy::{load_str, load_with, LoadOptions, Request, VerifiedEnd};

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

fn policy(budget: &str) -> String {
    format!("site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\nmodule: {{}}\ncrawl_budget: {{{budget}}}\n")
}

fn explain_googlebot(p: &crawlward_policy::Policy) -> Vec<String> {
    // a verified Googlebot: from the shipped snapshot's ranges
    let ip = crawlward_policy::shipped("https://developers.google.com/static/crawling/ipranges/common-crawlers.json")
        .and_then(|(nets, _)| nets.into_iter().find(|n| n.addr().is_ipv4()))
        .map(|n| n.addr())
        .unwrap();
    let e = p.explain(&Request {
        method: "GET".into(),
        url: "/record/1".into(),
        user_agent: GOOGLEBOT.as_bytes().to_vec(),
        ip,
        referer: None,
        host: None,
        maintenance: false,
        dns: None,
        signature: None,
    });
    assert_eq!(e.verdict, crawlward_policy::Verdict::Verified, "{:?}", e.steps);
    e.steps
}

fn warnings(p: &crawlward_policy::Policy) -> Vec<String> {
    p.warnings().iter().map(|w| format!("{}: {}", w.path, w.message)).collect()
}

#[test]
fn a_slowdown_with_no_end_is_warned_about() {
    let p = load_str("t.yaml", &policy("verified: '600r/m,60r/m'")).unwrap();
    assert_eq!(p.crawl_budget.as_ref().unwrap().limits.verified_until_s, None);
    let w = warnings(&p);
    assert!(w.iter().any(|w| w.starts_with("crawl_budget.verified: slows verified crawlers down with no end")), "{w:?}");
    assert!(explain_googlebot(&p).iter().any(|s| s.contains("against crawl_budget.verified") && s.ends_with("with no end")));
    // no slowdown, no warning
    assert!(warnings(&load_str("t.yaml", &policy("")).unwrap()).is_empty());
}

#[test]
fn an_ended_slowdown_counts_verified_crawlers_no_more() {
    let p = load_str("t.yaml", &policy("verified: '600r/m,60r/m', verified_until: '2020-01-01T00:00:00Z'")).unwrap();
    let b = p.crawl_budget.as_ref().unwrap();
    assert_eq!(b.verified_end, Some(VerifiedEnd::Until(1_577_836_800)));
    assert!(!b.limits.verified_counts(1_577_836_800) && b.limits.verified_counts(1_577_836_799));
    let steps = explain_googlebot(&p);
    assert!(
        steps.iter().any(|s| s.contains("not counted (a verified crawler; the slowdown crawl_budget.verified set ended at 2020-01-01T00:00:00Z)")),
        "{steps:?}"
    );
    assert!(warnings(&p).is_empty(), "an end in the past is no warning");
}

#[test]
fn a_slowdown_for_a_while_runs_from_the_policys_last_change() {
    let p = load_str("t.yaml", &policy("verified: '600r/m,60r/m', verified_for: 36h")).unwrap();
    let until = p.crawl_budget.as_ref().unwrap().limits.verified_until_s.unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((until - now - 36 * 3600).abs() < 5, "from now, for a policy given as text");
    assert!(explain_googlebot(&p).iter().any(|s| s.contains("a slowdown on purpose, until ")));
    assert!(warnings(&p).is_empty(), "36 hours is within two days");
    // from a file: its modification time, so that rendering again does not extend it
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, policy("verified: '600r/m,60r/m', verified_for: 36h")).unwrap();
    let changed = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(changed).unwrap();
    let p = load_with(&file, &LoadOptions::default()).unwrap();
    assert_eq!(p.crawl_budget.as_ref().unwrap().limits.verified_until_s, Some(1_800_000_000 + 36 * 3600));
    // longer than two days
    let p = load_str("t.yaml", &policy("verified: '600r/m,60r/m', verified_for: 3d")).unwrap();
    assert!(
        warnings(&p).iter().any(|w| w.starts_with("crawl_budget.verified_for: slows verified crawlers down for 72h, more than two days")),
        "{:?}",
        warnings(&p)
    );
}
