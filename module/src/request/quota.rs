//! API quotas on a request (`crawlward_quota`), in the precontent phase:
//! after nginx's access phase, so that `auth_basic`, `auth_jwt` and
//! `auth_request` have checked the identity the account variable holds (a
//! made-up Basic user is refused by them before it is metered, and never
//! spends the real account's quota). The account is the first account
//! variable that is not empty, else the account of the key the client sent
//! in `crawlward_api_keys`' header, looked up by its hash. A request with no
//! account is not metered: the door's per-address rate class applies.

use crate::base::HeaderName;
use crate::conf::quota::QuotaLoc;
use crate::conf::MainConf;
use crate::request::ext::{confs, RequestExt};
use crate::request::{facts, RequestState};
use crawlward_policy::quota::{self, AccountName, KeyedAccount, Standing};
use ngx::ffi::{ngx_int_t, NGX_HTTP_BAD_REQUEST, NGX_LOG_INFO};
use ngx::http::Request;
use ngx::ngx_log_debug_http;

/// What the quota found for a request, kept in its state.
#[derive(Clone, Copy)]
pub struct Metered {
    pub account: AccountName,
    pub tier: u8,
    pub standing: Standing,
    /// Refused (not under a dry run).
    pub refused: bool,
}

/// A variable's value, if set and not empty.
fn variable(r: &Request, index: usize) -> Option<&[u8]> {
    r.indexed_variable(index).filter(|v| !v.is_empty())
}

/// What a client sent in the key header: under any spelling an application
/// may read as its name ([`RequestExt::headers_named`]).
enum SentKey<'r> {
    /// Not at all, or empty.
    None,
    One(&'r [u8]),
    /// More than once: nginx 1.23+ joins the values into one
    /// (`$http_x_api_key`), 1.22 takes the first, and an application may take
    /// either, so such a request names no account (and a metered door refuses it).
    Repeated,
}

fn sent_key<'r>(r: &'r Request, name: &'r HeaderName) -> SentKey<'r> {
    let mut sent = r.headers_named(name);
    match (sent.next(), sent.next()) {
        (Some(_), Some(_)) => SentKey::Repeated,
        (Some(key), None) if !key.is_empty() => SentKey::One(key),
        _ => SentKey::None,
    }
}

/// The account a key the client sent names, and its tier, by the key's
/// hash: looked up once per request (the rate class asks in the preaccess
/// phase, the quota in the precontent phase), kept in its state `st`.
fn keyed_account(r: &Request, mcf: &MainConf, st: &mut RequestState) -> Option<KeyedAccount> {
    if let Some(known) = st.keyed {
        return known;
    }
    let found = (|| {
        let keys = mcf.api_keys.as_ref()?;
        let SentKey::One(key) = sent_key(r, &keys.header) else { return None };
        keys.lookup(key, &mcf.tiers, r.connection_ref().log)
    })();
    st.keyed = Some(found);
    found
}

/// The request's account and tier, if it has one.
fn account_of(r: &Request, mcf: &MainConf, q: &QuotaLoc, st: &mut RequestState) -> Option<(AccountName, usize)> {
    // folded: a name of spaces only names no account
    let named = |a: &[u8]| if q.account_names_folded { AccountName::folded(a) } else { Some(AccountName::new(a)) };
    let from_variable = q.accounts.iter().find_map(|i| variable(r, *i).and_then(named)).map(|a| (a, None));
    let (account, keyed_tier) = match from_variable {
        Some(found) => found,
        None if q.keys => keyed_account(r, mcf, st).map(|(account, tier)| (account, tier.map(usize::from)))?,
        None => return None,
    };
    let named_tier = q.tier_var.and_then(|i| variable(r, i)).and_then(|t| mcf.tiers.iter().position(|x| x.name.as_bytes() == t));
    Some((account, keyed_tier.or(named_tier).unwrap_or(q.default_tier)))
}

/// A request without an account at a door metered by keys that sent the key
/// header more than once: 400, since the application may read either copy
/// as its key and serve an account that no quota counted. None to go on.
fn repeated_key(r: &Request, mcf: &MainConf, q: &QuotaLoc, dry_run: bool, st: &mut RequestState) -> Option<ngx_int_t> {
    let keys = mcf.api_keys.as_ref().filter(|_| q.keys)?;
    if !matches!(sent_key(r, &keys.header), SentKey::Repeated) {
        return None;
    }
    let log = r.connection_ref().log;
    if dry_run {
        ngx::ngx_log_error!(NGX_LOG_INFO, log, "crawlward dry run: would answer 400: the key header \"{}\" sent more than once", keys.header.key);
        return None;
    }
    ngx::ngx_log_error!(NGX_LOG_INFO, log, "crawlward: 400: the key header \"{}\" sent more than once", keys.header.key);
    st.refused = true;
    Some(NGX_HTTP_BAD_REQUEST as ngx_int_t)
}

/// Whether a location's quota meters this request by a key from the keys
/// file: its door's rate class then leaves it to the quota (the key is
/// checked by its hash, so no client can write its way out of the class).
/// Not where the quota zone counts nothing in this configuration (it could
/// not be laid out; or a newer configuration laid it out again while this
/// worker finishes, which the worker learns at the first request that finds
/// so: the requests that passed the preaccess phase before then, while it
/// drains, still left their class), so that a listed key is limited by the
/// one or the other.
pub fn exempt_from_rate_class(r: &Request, mcf: &MainConf, q: &QuotaLoc, st: &mut RequestState) -> bool {
    q.keys
        && q.accounts.is_empty()
        && q.zone().table.as_ref().is_some_and(|t| t.counts())
        && q.meters(crate::request::app_path(r, mcf))
        && keyed_account(r, mcf, st).is_some()
}

/// The API quota of the request's location, once per request: None to go on.
pub fn meter(r: &Request) -> Option<ngx_int_t> {
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, lcf) = unsafe { confs(r) };
    let q = lcf.quota()?;
    if !r.is_main_request() || !q.meters(crate::request::app_path(r, mcf)) {
        return None;
    }
    // SAFETY: no other reference to the state is held while this one is used.
    let st = unsafe { facts(r) }?;
    // once; and never for a request refused, or refused before this phase (the access
    // phase's 401 for a key it did not take), at its error page
    if st.quota_done || st.refused || r.answering_refusal() {
        return None;
    }
    st.quota_done = true;
    let Some((account, tier)) = account_of(r, mcf, q, st) else {
        return repeated_key(r, mcf, q, lcf.dry_run == 1, st);
    };
    let zone = q.zone();
    let table = zone.table.as_ref()?;
    let limits = mcf.tiers.get(tier)?;
    let now = crate::conf::budget::clock_ms(zone);
    let dry_run = lcf.dry_run == 1;
    let name = account.as_bytes();
    let standing = table.with(|t| t.take_account(&account, tier, limits, now, dry_run))?;
    let mut m = Metered { account, tier: tier as u8, standing, refused: false };
    ngx_log_debug_http!(r, "crawlward quota: account \"{}\", tier {}, {:?}", crawlward_policy::escape::escaped(name), limits.name, standing);
    let Some(refusal) = standing.refused else {
        st.quota = Some(m);
        return None;
    };
    let log = r.connection_ref().log;
    let say = format!(
        "account \"{}\" (tier {}) is past its {} quota ({}), retry after {}s",
        crawlward_policy::escape::escaped(name),
        limits.name,
        refusal.window.as_str(),
        match refusal.window {
            quota::QuotaWindow::Hourly => format!("{}r/h", standing.hourly.limit),
            quota::QuotaWindow::Daily => format!("{}r/d", standing.daily.map_or(0, |d| d.limit)),
        },
        refusal.retry_after_s
    );
    if dry_run {
        ngx::ngx_log_error!(NGX_LOG_INFO, log, "crawlward dry run: would answer 429: {say}");
        st.quota = Some(m);
        return None;
    }
    ngx::ngx_log_error!(NGX_LOG_INFO, log, "crawlward: 429: {say}");
    m.refused = true;
    st.quota = Some(m);
    st.refused = true;
    Some(429)
}
