//! The User-Agent matcher: any User-Agent against the shipped catalogue.
//! The compiled matcher (literal prefilter, automaton built up front) answers what trying
//! each agent's pattern in catalogue order answers; the worker's memo
//! answers what classifying answers; a self-declared bot's product token
//! lies inside the User-Agent.
#![no_main]

use crawlward_policy::budget::crawler_token_span;
use crawlward_policy::ua_cache::{Classified, UaCache};
use crawlward_policy::Policy;
use libfuzzer_sys::fuzz_target;
use regex::bytes::{Regex, RegexBuilder};
use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};

struct Fixture {
    policy: Policy,
    /// Each agent's pattern compiled on its own, in catalogue order.
    patterns: Vec<(usize, Regex)>,
}

fn fixture() -> &'static Fixture {
    // built once per process (libFuzzer runs the target on one thread; the matcher is per thread, as in a worker)
    thread_local! {
        static FIXTURE: &'static Fixture = {
            let text = include_str!("../../nginx-conf/catalogue.yaml");
            let policy = crawlward_policy::load_str("catalogue.yaml", text).expect("the example policy loads");
            let patterns = policy
                .identity
                .catalogue
                .agents()
                .iter()
                .enumerate()
                .filter_map(|(i, a)| a.ua.as_ref().map(|p| (i, RegexBuilder::new(p).case_insensitive(true).unicode(false).build().unwrap())))
                .collect();
            Box::leak(Box::new(Fixture { policy, patterns }))
        };
    }
    FIXTURE.with(|f| *f)
}

thread_local! {
    static MEMO: RefCell<UaCache> = RefCell::new(UaCache::default());
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let catalogue = &f.policy.identity.catalogue;
    let by_matcher = catalogue.classify_index(data);
    let by_patterns = f.patterns.iter().find(|(_, re)| re.is_match(data)).map(|(i, _)| *i);
    assert_eq!(by_matcher, by_patterns, "User-Agent {:?}", String::from_utf8_lossy(data));

    // the module's prefilter: its cheap half never says no where the whole one says yes,
    // and no agent matches where the whole one says no
    let needle = catalogue.may_match(data);
    assert!(!needle || catalogue.may_match_roughly(data), "User-Agent {:?}", String::from_utf8_lossy(data));
    assert!(needle || by_matcher.is_none(), "User-Agent {:?}", String::from_utf8_lossy(data));

    // as the module asks the memo: only a User-Agent with a needle is classified and kept
    let classify = |u: &[u8]| {
        if !catalogue.may_match(u) {
            return None;
        }
        let agent = catalogue.classify_index(u);
        let generic = agent.is_some_and(|i| catalogue.agents()[i].counts_by_token());
        Some(Classified { agent, token: if generic { crawler_token_span(u) } else { None } })
    };
    let direct = classify(data).unwrap_or_default();
    // the memo keeps a token up to 255 bytes long (budget names keep fewer)
    let kept = Classified { token: direct.token.map(|(start, len)| (start, len.min(255))), ..direct };
    let expected = if data.len() <= crawlward_policy::ua_cache::MAX_KEY { kept } else { direct };
    // twice: the first may fill the memo's slot, the second reads it
    for _ in 0..2 {
        let memo = MEMO.with(|m| m.borrow_mut().get_or_classify(data, classify));
        assert_eq!(memo, expected, "User-Agent {:?}", String::from_utf8_lossy(data));
    }
    if let Some((start, len)) = crawler_token_span(data) {
        assert!(len > 0 && start + len <= data.len());
    }
    let agent = by_matcher.map(|i| &catalogue.agents()[i]);
    let ip = IpAddr::V4(Ipv4Addr::new(198, 51, 100, data.len() as u8));
    let _ = f.policy.identity.verdict(data, agent, ip);
});
