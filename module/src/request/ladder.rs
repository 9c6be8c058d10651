//! The proportional ladder on a request (`crawlward_ladder`): the client's
//! key, its window counted and scored, its rung and what the rung answers.
//! The decisions are the policy crate's, the same `crawlward analyze` and
//! `crawlward explain` run: [`crawlward_policy::signals::LadderSignals::seen`]
//! (what a request shows), [`crawlward_policy::client_window`] (the window),
//! [`crawlward_policy::classifier::score`] and [`crawlward_policy::ladder`].

use crate::conf::{LocConf, MainConf};
use crate::request::ext::RequestExt;
use crate::request::headers::{add_request_header, set_request_header};
use crate::request::Identified;
use crawlward_policy::classifier::{self, Observed, Placement};
use crawlward_policy::client_table::ROUTED;
use crawlward_policy::client_window::ClientWindow;
use crawlward_policy::ladder::{self, Answer, Mode};
use crawlward_policy::signals::{RequestFacts, UaTraits};
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
    // what the window shows, scored on every request: its list keeps its allocation
    static OBSERVED: std::cell::RefCell<Observed> = std::cell::RefCell::new(Observed::default());
}

/// The memo's size: a direct-mapped table of User-Agents' traits, 32 KiB a worker.
const TRAITS_MEMO: usize = 1024;

thread_local! {
    // (a keyed hash of the User-Agent, its length, its traits)
    static TRAITS: std::cell::RefCell<Vec<(u64, usize, UaTraits)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What a User-Agent shows the ladder, from the worker's memo: most clients
/// send one of a few browser User-Agents. An entry is found by a hash keyed
/// with the zone's random seed and the length: a User-Agent that collided
/// with another would get that one's family and contact, signals of its own
/// client only, which any client sets by what it sends anyway.
fn ua_traits(seed: u64, ua: &[u8]) -> UaTraits {
    let hash = crawlward_policy::client_window::hash_bytes(seed ^ 0x7561_2d74_7261_6974, ua);
    let slot = hash as usize % TRAITS_MEMO;
    TRAITS.with(|memo| {
        let mut memo = memo.borrow_mut();
        if memo.is_empty() {
            memo.resize(TRAITS_MEMO, (0, usize::MAX, UaTraits::default()));
        }
        let entry = &mut memo[slot];
        if entry.0 != hash || entry.1 != ua.len() {
            *entry = (hash, ua.len(), crawlward_policy::signals::ua_traits(seed, ua));
        }
        entry.2
    })
}

/// The client number of a valid session cookie, from the memo or by its MAC.
/// The memo's slot comes from a hash keyed with the zone's random `seed`, so
/// no client can aim its values at the slot of another's, and a value is
/// compared with the one verified in a time that does not say where they
/// differ.
fn verified_cookie(keys: &ladder::CookieKeys, seed: u64, value: &[u8], now_s: u64, lifetime_s: u64) -> Option<u64> {
    if value.len() > ladder::COOKIE_MAX {
        return None;
    }
    let slot = (crawlward_policy::client_window::hash_bytes(seed ^ 0x636f_6f6b_6965_2d6d, value) as usize) % SIGNED_MEMO;
    let memo =
        SIGNED.with(|m| m.borrow().get(slot).filter(|s| s.len == value.len() && ladder::constant_time_eq(&s.value[..s.len], value)).map(|s| (s.id, s.issued)));
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

/// What the ladder reads of the request's headers, in one walk of the list.
struct Headers<'a> {
    /// crawlward's session cookie and the application's, by the policy's names.
    cookie: Option<&'a [u8]>,
    session: Option<&'a [u8]>,
    /// The first Accept-Language.
    accept_language: Option<&'a [u8]>,
}

/// The cookies named `cookie` and `session` in the request's `Cookie` headers
/// (HTTP/2 sends one a cookie), and its first Accept-Language.
fn headers<'a>(r: &'a Request, cookie: Option<&[u8]>, session: Option<&[u8]>) -> Headers<'a> {
    let mut found = Headers { cookie: None, session: None, accept_language: None };
    for (key, value) in r.headers_in_iterator() {
        let (key, value) = (key.as_bytes(), value.as_bytes());
        // the length first: most headers are neither
        if key.len() == 6 && key.eq_ignore_ascii_case(b"cookie") {
            found.cookie = found.cookie.or_else(|| ladder::cookie_value(value, cookie?));
            found.session = found.session.or_else(|| ladder::cookie_value(value, session?));
        } else if key.len() == 15 && found.accept_language.is_none() && key.eq_ignore_ascii_case(b"accept-language") {
            found.accept_language = Some(value);
        }
    }
    found
}

/// Place the request on the ladder, once (the caller keeps the answer in its
/// state). None without a ladder.
pub fn place(r: &Request, mcf: &MainConf, lcf: &LocConf, id: &Identified, door: Door) -> Option<Placed> {
    place_as(r, mcf, lcf, id, door, Acting::Decide)
}

/// How [`place_as`] places a request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Acting {
    /// Before its answer: it may refuse, and a signed-in request is not tracked.
    Decide,
    /// After an answer something before the ladder gave (the access phase's 401 or
    /// 403, a `limit_req` refusal): counted in its client's window, refusing nothing.
    /// The access phase did not let it in, so no variable says it is signed in.
    CountOnly,
}

/// The request's place on the ladder; see [`Acting`].
pub fn place_as(r: &Request, mcf: &MainConf, lcf: &LocConf, id: &Identified, door: Door, acting: Acting) -> Option<Placed> {
    let (run, table) = mcf.ladder()?;
    let live = &run.live;
    let seed = mcf.ladder.as_ref()?.seed;
    let untracked =
        Placed { placement: Placement::Rung(0), score: None, contributions: [0.0; 6], answer: Answer::Pass, would_refuse: false, refused: false, issue: 0 };
    // verified identity is L0, and never tracked: no client can push it out of the table
    if id.verdict == Verdict::Verified || acting == Acting::Decide && crate::request::signed_in(r, lcf) {
        table.with(|t| {
            t.header.untracked += 1;
            t.header.requests[0] += 1;
        });
        return Some(untracked);
    }
    let now_ms = crate::base::wall_ms() as i64;
    let headers = headers(r, live.cookie.as_ref().map(|c| c.name.as_bytes()), live.session_cookie.as_ref().map(|n| n.as_bytes()));
    let cookie_id =
        live.cookie.as_ref().zip(run.keys.as_ref()).and_then(|(c, keys)| verified_cookie(keys, seed, headers.cookie?, now_ms as u64 / 1000, c.lifetime));
    let session = headers.session;
    let ua = r.user_agent_joined();
    let ip = crate::net::client_ip(r.connection_ref()).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    let address = crawlward_policy::budget::counted_address(ip);
    // (address, User-Agent, Accept-Language): the key without a session, and the entry a
    // session's first request takes over; not read for a session already in the table
    let triple = || ladder::triple_key(seed, &address, &ua, headers.accept_language.unwrap_or_default());
    let session_key = match (cookie_id, session) {
        (Some(id), _) => Some(id),
        // the application's session is the key only when crawlward's cookie is off
        (None, Some(s)) if live.cookie.is_none() => Some(ladder::session_key(seed, s)),
        _ => None,
    };
    let identity = mcf.identity.as_deref()?;
    // a claim its address disproves is not that agent: it counts as no agent at all
    let agent = id.agent.filter(|_| id.verdict != Verdict::Spoofed).map(|i| &identity.catalogue.agents()[i]);
    let label: Option<Cow<'_, str>> = agent.map(|_| crate::request::agent_label(r, mcf, id));
    // the path the application sees for the site's own paths (sign-in, sitemap) and the URLs
    // counted (with the query); robots.txt's rules are matched on nginx's `$uri` and the
    // query, not behind the front controller's name: the published file names those URLs
    let (uri, args) = (r.uri(), r.args());
    let path = identity.app_path(uri);
    let target = crawlward_policy::decide::with_query(uri, args);
    let facts = RequestFacts {
        now_ms,
        path,
        query: args,
        target: &target,
        user_agent: ua_traits(seed, &ua),
        agent,
        label: label.as_deref(),
        session: session.filter(|_| live.cookie.is_some()),
        address: &address,
    };
    let seen = run.signals.seen(seed, &facts, &run.settings);
    // under crawlward_dry_run the ladder refuses nothing either
    let enforce = live.mode == Mode::Enforce && lcf.dry_run != 1 && acting == Acting::Decide;
    let (network, bits) = crawlward_policy::signals::network(ip);
    let network_key = ladder::network_key(seed, &crawlward_policy::budget::counted_address(network), bits);
    // this request counted in a client's window, and the window scored
    let count_and_score = |window: &mut ClientWindow| {
        window.count(&seen, run.window_ms);
        OBSERVED.with(|o| {
            // never held across a call that could come back here
            let mut o = o.borrow_mut();
            window.observed_into(now_ms, run.window_ms, run.signals.per_minute, &mut o);
            classifier::score(&o, &run.settings)
        })
    };
    let to_f32 = |from: [f64; 6]| from.map(|v| v as f32);
    let placed = table.with(|t| {
        let b = live.backstop;
        // (address, User-Agent, Accept-Language) hashed once for a request without a session
        let address_key = session_key.is_none().then(triple);
        let from = || address_key.unwrap_or_else(triple);
        // a client the table does not hold is made only with a token of its network's
        // backstop, whatever its first answer; from a network past its backstop it is refused
        // (where the ladder decides) on a window of this request alone, and not made: a flood
        // of new keys from one network makes clients no faster than the backstop's rate
        let making = !t.holds(session_key, from);
        if making {
            if let Err(retry_after) = t.get(network_key).map_or(Ok(()), |n| n.bucket.room(b.burst, b.per_second, now_ms)) {
                let scored = count_and_score(&mut ClientWindow::new(now_ms));
                let answer = Answer::Backstop { retry_after };
                let would_refuse = door != Door::Robots;
                let refused = enforce && would_refuse;
                t.place(None, scored.rung_index().unwrap_or(ROUTED), refused);
                let contributions = to_f32(scored.contributions);
                // no cookie offered: no client of its own while its network is past the backstop
                let placed = Placed { placement: scored.placement, score: Some(scored.score as f32), contributions, answer, would_refuse, refused, issue: 0 };
                return (placed, 0);
            }
            let _ = t.bucket_of(network_key, now_ms).take(b.burst, b.per_second, now_ms);
        }
        // a client's first request with its cookie carries on the window its address had
        let e = match session_key {
            Some(key) => t.client_from(key, from, now_ms),
            None => t.client(from(), now_ms),
        };
        let key = e.key;
        let scored = count_and_score(&mut e.window);
        let requests = e.window.current.requests;
        let mut answer = ladder::answer(scored.placement, live, &mut e.bucket, now_ms);
        let row = scored.rung_index().unwrap_or(ROUTED);
        if scored.placement == Placement::Routed {
            // authentication-shaped: the account route's limit, per network
            let route = live.account_route;
            if let Err(retry_after) = t.bucket_of(network_key ^ ROUTED as u64, now_ms).take(route.burst, route.per_second, now_ms) {
                answer = Answer::Slowed { retry_after };
            }
        }
        // the network's backstop, whatever the client's key, for a request of a client the
        // table held whose own rung lets it through (a client just made has paid its token): a
        // request refused already (by its rung, or before the ladder for a request only
        // counted) takes nothing from its network, so that a client kept refused cannot
        // starve everyone else behind its /24 or /48
        if answer == Answer::Pass && acting == Acting::Decide && !making {
            if let Err(retry_after) = t.bucket_of(network_key, now_ms).take(b.burst, b.per_second, now_ms) {
                answer = Answer::Backstop { retry_after };
            }
        }
        let would_refuse = door != Door::Robots && answer.status().is_some();
        let refused = enforce && would_refuse;
        t.place(Some(key), row, refused);
        let contributions = to_f32(scored.contributions);
        (Placed { placement: scored.placement, score: Some(scored.score as f32), contributions, answer, would_refuse, refused, issue: 0 }, requests)
    });
    let (placed, requests) = placed;
    // a cookie for a client without one: on its first request (a client that changes its
    // address or User-Agent keeps its key by the cookie from the start), then its 2nd, 4th,
    // 8th... of the period, so that a client that keeps no cookie costs a signature now and
    // then, not on every request; and on every refusal, so that a person behind an address
    // and browser others share can come back as a client of their own
    let offered = requests > 0 && (requests.is_power_of_two() || placed.refused);
    let issue = if live.cookie.is_some() && cookie_id.is_none() && offered { crawlward_policy::random_u64().max(1) } else { 0 };
    Some(Placed { issue, ..placed })
}

/// Empty every copy of `classifier.rung_header` the client sent, on every
/// request of the http block: the application must never hear a value the
/// client wrote, where crawlward is off, where the module refused before the
/// ladder ran (its error page may go to the application), or in observe mode.
/// A value the ladder set is kept.
/// Whether the request has a header of the name (None without one configured).
pub fn clear_client_rung(r: &mut Request, mcf: &MainConf) -> Option<bool> {
    let name = mcf.ladder()?.0.rung_header.as_ref()?;
    // SAFETY: the name is in the configuration's memory, which outlives the request.
    Some(unsafe { set_request_header(r, name, None) })
}

/// Tell the application the request's rung, under `classifier.rung_header`,
/// in enforce mode: over the client's copy, which [`clear_client_rung`]
/// emptied. In observe mode, or under `crawlward_dry_run`, where the ladder
/// acts on no one, the application hears an empty value, or none.
/// `has_header`: what [`clear_client_rung`] found in the same pass of the
/// phase (false: the header is added without another walk of the list).
pub fn tell_application(r: &mut Request, mcf: &MainConf, lcf: &LocConf, placed: &Placed, has_header: bool) {
    let Some((run, _)) = mcf.ladder() else { return };
    let Some(name) = run.rung_header.as_ref() else { return };
    if run.live.mode != Mode::Enforce || lcf.dry_run == 1 {
        return;
    }
    let rung = ladder::rung_name(placed.placement);
    if has_header {
        // SAFETY: the name is in the configuration's memory, which outlives the request; the value is static.
        unsafe { set_request_header(r, name, Some(rung)) };
    } else {
        // SAFETY: as above; the request has no header of the name, as the walk just before found.
        unsafe { add_request_header(r, name, rung) };
    }
}
