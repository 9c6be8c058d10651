//! The User-Agent matcher: any User-Agent against the example catalogue.
//! The matcher (one pass over the chosen trigrams, names compared where
//! they would start) answers what the rule as written answers: the leftmost
//! claim position where a name ends its token, its longest name there, else
//! a library's or a tool's only where no other agent's is claimed, else
//! the bot detector's unknown-bot; the pass never turns away a User-Agent
//! the rule names; the worker's memo answers what classifying answers; an
//! unknown bot's product token lies inside the User-Agent.
#![no_main]

use crawlward_policy::claim::{claim_at, ends_token};
use crawlward_policy::detector::claim_in_device_comment;
use crawlward_policy::matcher::Name;
use crawlward_policy::ua_cache::UaCache;
use crawlward_policy::Policy;
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};

struct Fixture {
    policy: Policy,
    /// Every name with its agent.
    names: Vec<(Name, usize)>,
}

fn fixture() -> &'static Fixture {
    // built once per process (libFuzzer runs the target on one thread; the matcher is per thread, as in a worker)
    thread_local! {
        static FIXTURE: &'static Fixture = {
            let text = include_str!("../../nginx-conf/catalogue.yaml");
            let policy = crawlward_policy::load_str("catalogue.yaml", text).expect("the example policy loads");
            let names = policy.identity.catalogue.names();
            Box::leak(Box::new(Fixture { policy, names }))
        };
    }
    FIXTURE.with(|f| *f)
}

thread_local! {
    static MEMO: RefCell<UaCache> = RefCell::new(UaCache::default());
}

/// The rule as written: the leftmost claim position (outside a device's
/// comment, or at a product inside one) where a name ends its token, its
/// longest name there; a library's or a tool's name only when no other
/// agent's is claimed; else the bot detector's unknown-bot.
fn by_rule(f: &Fixture, ua: &[u8]) -> Option<usize> {
    let agents = f.policy.identity.catalogue.agents();
    let first = |yields: bool| {
        (0..ua.len()).filter(|s| claim_at(ua, *s) && claim_in_device_comment(ua, *s)).find_map(|s| {
            f.names
                .iter()
                .filter(|(_, a)| agents[*a].purpose.yields() == yields)
                .filter(|(n, _)| {
                    (!n.anchored || s == 0)
                        && ua[s..].len() >= n.text.len()
                        && ua[s..s + n.text.len()].eq_ignore_ascii_case(&n.text)
                        && ends_token(ua, s + n.text.len())
                })
                .max_by_key(|(n, _)| n.text.len())
                .map(|(_, a)| *a)
        })
    };
    first(false).or_else(|| first(true)).or_else(|| crawlward_policy::detector::bot(ua).and_then(|_| agents.iter().position(|a| a.counts_by_token())))
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let catalogue = &f.policy.identity.catalogue;
    let by_matcher = catalogue.classify_index(data);
    // identification reads the User-Agent's first 512 bytes
    assert_eq!(by_matcher, by_rule(f, crawlward_policy::catalogue::read_part(data)), "User-Agent {:?}", String::from_utf8_lossy(data));

    // the module's prefilter: its cheap half never says no where the whole one says yes,
    // and no agent names the client where the whole one says no
    let needle = catalogue.may_match(data);
    assert!(!needle || catalogue.may_match_roughly(data), "User-Agent {:?}", String::from_utf8_lossy(data));
    assert!(needle || by_matcher.is_none(), "User-Agent {:?}", String::from_utf8_lossy(data));

    // as the module asks the memo: only a User-Agent with a name or a needle is kept
    let classify = |u: &[u8]| catalogue.identify(u);
    let direct = classify(data).unwrap_or_default();
    assert_eq!(direct.agent, by_matcher);
    if let Some((start, len)) = direct.token {
        assert!(len > 0 && start + len <= data.len() && len <= crawlward_policy::detector::MAX_TOKEN);
    }
    // twice: the first may fill the memo's slot, the second reads it
    for _ in 0..2 {
        let memo = MEMO.with(|m| m.borrow_mut().get_or_classify(data, |u| catalogue.may_match_roughly(u), classify));
        assert_eq!(memo, direct, "User-Agent {:?}", String::from_utf8_lossy(data));
    }
    let agent = by_matcher.map(|i| &catalogue.agents()[i]);
    let ip = IpAddr::V4(Ipv4Addr::new(198, 51, 100, data.len() as u8));
    let _ = f.policy.identity.verdict(data, agent, ip);
});
