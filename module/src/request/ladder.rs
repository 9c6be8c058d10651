//! The proportional ladder on a request (`crawlward_ladder`): the client's
//! key, its window counted and scored, its rung and what the rung answers.
//! The decisions are the policy crate's, the same `crawlward analyze` and
//! `crawlward explain` run: [`crawlward_policy::signals::LadderSignals::seen`]
//! (what a request shows), [`crawlward_policy::client_window`] (the window),
//! [`crawlward_policy::classifier::score`] and [`crawlward_policy::ladder`].

use crate::conf::{LocConf, MainConf};
use crate::request::ext::RequestExt;
use crate::request::Identified;
use crawlward_policy::classifier::{self, Placement};
use crawlward_policy::client_table::ROUTED;
use crawlward_policy::ladder::{self, Answer, Mode};
use crawlward_policy::signals::RequestFacts;
use crawlward_policy::{Door, Verdict};
use ngx::http::Request;
use std::borrow::Cow;

/// Where the ladder placed a request: plain data, in the request's state.
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    pub placement: Placement,
    /// None for a request not tracked: a verified crawler, a signed-in request (L0).
    pub score: Option<f32>,
    /// Each sub-score times its weight.
    pub contributions: [f32; 6],
    /// What the rung answers (in observe mode: what it would).
    pub answer: Answer,
    /// Whether the rung would refuse the request (never robots.txt), and whether it
    /// does (enforce mode).
    pub would_refuse: bool,
    pub refused: bool,
    /// A new client number for the session cookie, 0 for none: the request
    /// came without a valid cookie, and the response (a page) issues one.
    pub issue: u64,
}

/// A cookie value this worker found signed: a returning session sends the
/// same value on every request, and its MAC is computed once.
#[derive(Clone, Copy)]
struct Signed {
    len: usize,
    value: [u8; ladder::COOKIE_MAX],
    id: u64,
    issued: u64,
}

/// The memo's size: a direct-mapped table of values the worker verified.
const SIGNED_MEMO: usize = 256;

thread_local! {
    // workers are single-threaded; a reload starts new workers with the new keys
    static SIGNED: std::cell::RefCell<Vec<Signed>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The client number of a valid session cookie, from the memo or by its MAC.
fn verified_cookie(keys: &ladder::CookieKeys, value: &[u8], now_s: u64, lifetime_s: u64) -> Option<u64> {
    if value.len() > ladder::COOKIE_MAX {
        return None;
    }
    let slot = (crawlward_policy::client_window::hash_bytes(0, value) as usize) % SIGNED_MEMO;
    let memo = SIGNED.with(|m| m.borrow().get(slot).filter(|s| s.len == value.len() && s.value[..s.len] == *value).map(|s| (s.id, s.issued)));
    let (id, issued) = match memo {
        Some(found) => found,
        None => {
            let (id, issued) = keys.signed(value)?;
            let mut entry = Signed { len: value.len(), value: [0; ladder::COOKIE_MAX], id, issued };
            entry.value[..value.len()].copy_from_slice(value);
            SIGNED.with(|m| {
                let mut m = m.borrow_mut();
                if m.is_empty() {
                    m.resize(SIGNED_MEMO, Signed { len: usize::MAX, value: [0; ladder::COOKIE_MAX], id: 0, issued: 0 });
                }
                m[slot] = entry;
            });
            (id, issued)
        }
    };
    ladder::fresh(issued, now_s, lifetime_s).then_some(id)
}

/// The value of cookie `name` in the request's `Cookie` headers (HTTP/2 sends one a cookie).
fn cookie<'a>(r: &'a Request, name: &[u8]) -> Option<&'a [u8]> {
    r.headers_in_iterator().filter(|(k, _)| k.as_bytes().eq_ignore_ascii_case(b"cookie")).find_map(|(_, v)| ladder::cookie_value(v.as_bytes(), name))
}

/// The first header named `name`, if any.
fn header<'a>(r: &'a Request, name: &[u8]) -> &'a [u8] {
    r.headers_in_iterator().find(|(k, _)| k.as_bytes().eq_ignore_ascii_case(name)).map_or(&[], |(_, v)| v.as_bytes())
}

/// Place the request on the ladder, once (the caller keeps the answer in its
/// state). None without a ladder.
pub fn place(r: &Request, mcf: &MainConf, lcf: &LocConf, id: &Identified, door: Door) -> Option<Placed> {
    let (run, table) = mcf.ladder()?;
    let live = &run.live;
    let seed = mcf.ladder.as_ref()?.seed;
    let untracked =
        Placed { placement: Placement::Rung(0), score: None, contributions: [0.0; 6], answer: Answer::Pass, would_refuse: false, refused: false, issue: 0 };
    // verified identity is L0, and never tracked: no client can push it out of the table
    if id.verdict == Verdict::Verified || crate::request::signed_in(r, lcf) {
        table.with(|t| {
            t.header.untracked += 1;
            t.header.requests[0] += 1;
        });
        return Some(untracked);
    }
    let now_ms = crate::base::wall_ms() as i64;
    let cookie_id = live
        .cookie
        .as_ref()
        .zip(run.keys.as_ref())
        .and_then(|(c, keys)| verified_cookie(keys, cookie(r, c.name.as_bytes())?, now_ms as u64 / 1000, c.lifetime));
    let session = live.session_cookie.as_ref().and_then(|n| cookie(r, n.as_bytes()));
    let ua = r.user_agent_joined();
    let ip = crate::net::client_ip(r.connection_ref()).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    let address = crawlward_policy::budget::counted_address(ip);
    let triple = ladder::triple_key(seed, &address, &ua, header(r, b"accept-language"));
    let key = match (cookie_id, session) {
        (Some(id), _) => id,
        // the application's session is the key only when crawlward's cookie is off
        (None, Some(s)) if live.cookie.is_none() => ladder::session_key(seed, s),
        _ => triple,
    };
    let identity = mcf.identity.as_deref()?;
    // a claim its address disproves is not that agent: it counts as no agent at all
    let agent = id.agent.filter(|_| id.verdict != Verdict::Spoofed).map(|i| &identity.catalogue.agents()[i]);
    let label: Option<Cow<'_, str>> = agent.map(|_| crate::request::agent_label(r, mcf, id));
    let (path, args) = (r.uri(), r.args());
    let target: Cow<'_, [u8]> = if args.is_empty() { Cow::Borrowed(path) } else { Cow::Owned([path, b"?", args].concat()) };
    let facts = RequestFacts {
        now_ms,
        path,
        target: &target,
        user_agent: &ua,
        agent,
        label: label.as_deref(),
        session: session.filter(|_| live.cookie.is_some()),
        address: &address,
    };
    let seen = run.signals.seen(seed, &facts, &run.settings);
    // under crawlward_dry_run the ladder refuses nothing either
    let enforce = live.mode == Mode::Enforce && lcf.dry_run != 1;
    let (network, bits) = crawlward_policy::signals::network(ip);
    let network_key = ladder::session_key(seed ^ u64::from(bits), &crawlward_policy::budget::counted_address(network));
    let placed = table.with(|t| {
        // a client's first request with its cookie carries on the window its address had
        let e = if key != triple { t.client_from(key, triple, now_ms) } else { t.client(key, now_ms) };
        e.window.count(&seen, run.window_ms);
        let requests = e.window.current.requests;
        let observed = e.window.observed(now_ms, run.window_ms, run.signals.per_minute);
        let scored = classifier::score(&observed, &run.settings);
        let mut answer = ladder::answer(scored.placement, live, &mut e.bucket, now_ms);
        let row = scored.rung_index().unwrap_or(ROUTED);
        if scored.placement == Placement::Routed {
            // authentication-shaped: the account route's limit, per network
            let route = live.account_route;
            if let Err(retry_after) = t.bucket_of(network_key ^ ROUTED as u64, now_ms).take(route.burst, route.per_second, now_ms) {
                answer = Answer::Slowed { retry_after };
            }
        }
        // the network's backstop, whatever the client's key
        let b = live.backstop;
        let backstop = t.bucket_of(network_key, now_ms).take(b.burst, b.per_second, now_ms);
        if let (Answer::Pass, Err(retry_after)) = (answer, backstop) {
            answer = Answer::Backstop { retry_after };
        }
        let would_refuse = door != Door::Robots && answer.status().is_some();
        let refused = enforce && would_refuse;
        t.place(key, row, refused);
        let mut contributions = [0.0f32; 6];
        for (c, v) in contributions.iter_mut().zip(scored.contributions) {
            *c = v as f32;
        }
        (Placed { placement: scored.placement, score: Some(scored.score as f32), contributions, answer, would_refuse, refused, issue: 0 }, requests)
    });
    let (placed, requests) = placed;
    // a cookie for a client without one: on its first request, then its 2nd, 4th, 8th...
    // of the period, so that a client that keeps no cookie costs a signature now and then
    let issue = if live.cookie.is_some() && cookie_id.is_none() && requests.is_power_of_two() { crawlward_policy::random_u64().max(1) } else { 0 };
    Some(Placed { issue, ..placed })
}
