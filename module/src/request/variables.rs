//! The module's variables: what it decided, for `map`, `limit_req` and
//! `limit_conn` keys, `add_header` and `log_format`.
//!
//! `$crawlward_agent`, `$crawlward_operator`, `$crawlward_purpose`,
//! `$crawlward_verdict`, `$crawlward_action`, `$crawlward_dns`,
//! `$crawlward_dns_cache`: who is asking. `$crawlward_params`,
//! `$crawlward_facets`, `$crawlward_facet_rule`, `$crawlward_budget`: what the
//! facet guard and the budgets found. With the catalogue file's `layers` (a
//! policy rendered for the module), the layers nginx enforces:
//! `$crawlward_limit_class` and `$crawlward_key_<class>` (the rate classes'
//! `limit_req` keys), `$crawlward_browse_key` (the browse cap's `limit_conn`
//! key), `$crawlward_refusal`, `$crawlward_retry_after` and
//! `$crawlward_throttled` (Retry-After and the throttle log). With
//! `crawlward_ladder`: `$crawlward_rung`, `$crawlward_score` and
//! `$crawlward_contributions` (each sub-score times its weight). With
//! `crawlward_signatures`: `$crawlward_signature` (`verified`, `invalid`,
//! `unverified` or `none`) and `$crawlward_signature_agent` (the signer's
//! directory).
//!
//! Each reads the request's facts (`request/mod.rs`), which are decided once, and
//! is written in one store (`value.rs`). nginx keeps a value for the rest of
//! the request unless it is marked not cacheable: that is done only for a
//! value that may still change (the verdict while a DNS check is in flight,
//! what the facet guard and the budgets found before they ran, the refusal
//! before the response has a status), so that nginx asks again where it
//! flushes variables (complex values, the access log).

use crate::conf::MainConf;
use crate::request::ext::{confs, RequestExt};
use crate::request::{agent_label, facts, layered, RequestState};
use crate::value;
use crawlward_policy::layers::{Answer, Layers, LimitStatus, Refused};
use ngx::ffi::{
    ngx_conf_t, ngx_http_add_variable, ngx_http_get_variable_index, ngx_http_request_t, ngx_int_t, ngx_str_t, ngx_variable_value_t, NGX_ERROR,
    NGX_HTTP_VAR_CHANGEABLE, NGX_HTTP_VAR_NOHASH, NGX_HTTP_VAR_PREFIX, NGX_OK,
};
use ngx::http::Request;

const AGENT: usize = 0;
const OPERATOR: usize = 1;
const PURPOSE: usize = 2;
const VERDICT: usize = 3;
const ACTION: usize = 4;
const DNS: usize = 5;
const DNS_CACHE: usize = 6;
const PARAMS: usize = 7;
const FACETS: usize = 8;
const FACET_RULE: usize = 9;
const BUDGET: usize = 10;
const LIMIT_CLASS: usize = 11;
const BROWSE_KEY: usize = 12;
const REFUSAL: usize = 13;
const RETRY_AFTER: usize = 14;
const THROTTLED: usize = 15;
const LOG_FIELDS: usize = 16;
const RUNG: usize = 17;
const SCORE: usize = 18;
const CONTRIBUTIONS: usize = 19;
const SIGNATURE: usize = 20;
const SIGNATURE_AGENT: usize = 21;
const ACCOUNT: usize = 22;
const TIER: usize = 23;

const NAMES: [(&str, usize); 24] = [
    ("crawlward_agent", AGENT),
    ("crawlward_operator", OPERATOR),
    ("crawlward_purpose", PURPOSE),
    ("crawlward_verdict", VERDICT),
    ("crawlward_action", ACTION),
    ("crawlward_dns", DNS),
    ("crawlward_dns_cache", DNS_CACHE),
    ("crawlward_params", PARAMS),
    ("crawlward_facets", FACETS),
    ("crawlward_facet_rule", FACET_RULE),
    ("crawlward_budget", BUDGET),
    ("crawlward_limit_class", LIMIT_CLASS),
    ("crawlward_browse_key", BROWSE_KEY),
    ("crawlward_refusal", REFUSAL),
    ("crawlward_retry_after", RETRY_AFTER),
    ("crawlward_throttled", THROTTLED),
    ("crawlward_log_fields", LOG_FIELDS),
    ("crawlward_rung", RUNG),
    ("crawlward_score", SCORE),
    ("crawlward_contributions", CONTRIBUTIONS),
    ("crawlward_signature", SIGNATURE),
    ("crawlward_signature_agent", SIGNATURE_AGENT),
    ("crawlward_account", ACCOUNT),
    ("crawlward_tier", TIER),
];

/// `$crawlward_log_fields`: the module's part of the `crawlward_combined`
/// access log, the label before each variable's value.
const LOG_FIELDS_OF: [(&str, usize); 6] =
    [("agent=", AGENT), (" verdict=", VERDICT), (" action=", ACTION), (" refusal=", REFUSAL), (" facets=", FACETS), (" budget=", BUDGET)];

/// `$crawlward_key_<class>`: nginx gives each name with this prefix the handler and its own name.
const KEY_PREFIX: &str = "crawlward_key_";

pub unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    crate::base::guard(NGX_ERROR as ngx_int_t, || {
        // CHANGEABLE: a policy rendered for stock nginx defines the same names with `map`,
        // which then takes the variable over, so loading the module does not break it.
        for (name, which) in NAMES {
            // SAFETY: in preconfiguration the variables are being added.
            if unsafe { add(cf, name, NGX_HTTP_VAR_CHANGEABLE, get, which) }.is_err() {
                return NGX_ERROR as ngx_int_t;
            }
        }
        // SAFETY: as above.
        if unsafe { add(cf, KEY_PREFIX, NGX_HTTP_VAR_CHANGEABLE | NGX_HTTP_VAR_PREFIX, get_key, 0) }.is_err() {
            return NGX_ERROR as ngx_int_t;
        }
        // the request's state, reached by index: the variable is not changeable, so no
        // directive can set it (nginx answers "duplicate variable"), and NOHASH keeps its
        // name from the setters that look names up at run time; a configuration that reads
        // it reads an empty value
        // SAFETY: as above.
        if unsafe { add(cf, STATE_VARIABLE, NGX_HTTP_VAR_NOHASH, get_nothing, 0) }.is_err() {
            return NGX_ERROR as ngx_int_t;
        }
        let mut n = ngx_str_t { len: STATE_VARIABLE.len(), data: STATE_VARIABLE.as_ptr() as *mut u8 };
        // SAFETY: as above; nginx copies the name.
        let index = unsafe { ngx_http_get_variable_index(cf, &mut n) };
        if index == NGX_ERROR as ngx_int_t {
            return NGX_ERROR as ngx_int_t;
        }
        // SAFETY: in preconfiguration cf->ctx is the http block's.
        unsafe { crate::conf::main_conf_of_cf(cf) }.state_variable = index as usize;
        NGX_OK as ngx_int_t
    })
}

/// The indexed variable whose slot holds a request's state ([`crate::request::state`]).
const STATE_VARIABLE: &str = "crawlward_request_state";

/// The state variable's handler, for a request the module has not identified (the
/// module reads and writes the slot directly): not found.
unsafe extern "C" fn get_nothing(_r: *mut ngx_http_request_t, v: *mut ngx_variable_value_t, _which: usize) -> ngx_int_t {
    // SAFETY: nginx passes a value slot of the request.
    if let Some(v) = unsafe { v.as_mut() } {
        value::set_not_found(v);
    }
    NGX_OK as ngx_int_t
}

/// The least `variables_hash_max_size` with the module loaded.
///
/// nginx's variables hash holds every variable defined: the core's, each loaded
/// module's (Debian's dynamic modules add dozens), this module's, and one per map a
/// configuration renders. With nginx's default of 1024, a configuration near that
/// load makes `nginx -t` warn "could not build optimal variables_hash", and loading
/// this module (as the Debian package does for every site) must not add a warning
/// to a configuration that had none. A larger maximum only lets nginx try larger
/// tables: it still takes the smallest that fits.
pub const VARIABLES_HASH_MIN: usize = 4096;

/// Raises `variables_hash_max_size` to [`VARIABLES_HASH_MIN`] when it is lower; a
/// larger value, whoever set it, is kept. Called in postconfiguration, after the
/// http block is read (so the sysadmin's own setting is in, and setting it is no
/// duplicate) and before nginx builds the hash.
///
/// # Safety
/// `cf` must be the http block's conf in postconfiguration.
pub unsafe fn make_room(cf: *mut ngx_conf_t) {
    // SAFETY: per the contract.
    let cmcf = unsafe { crate::conf::core_main_conf_of_cf(cf) };
    if cmcf.variables_hash_max_size < VARIABLES_HASH_MIN {
        cmcf.variables_hash_max_size = VARIABLES_HASH_MIN;
    }
}

type Handler = unsafe extern "C" fn(*mut ngx_http_request_t, *mut ngx_variable_value_t, usize) -> ngx_int_t;

/// # Safety
/// `cf` must be the configuration in preconfiguration.
unsafe fn add(cf: *mut ngx_conf_t, name: &'static str, flags: u32, handler: Handler, data: usize) -> Result<(), ()> {
    let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
    // SAFETY: per the contract; nginx copies the name.
    let v = unsafe { ngx_http_add_variable(cf, &mut n, flags as usize) };
    // SAFETY: null, or the variable nginx just added for us.
    let v = unsafe { v.as_mut() }.ok_or(())?;
    v.get_handler = Some(handler);
    v.data = data;
    Ok(())
}

unsafe extern "C" fn get(r: *mut ngx_http_request_t, v: *mut ngx_variable_value_t, which: usize) -> ngx_int_t {
    crate::base::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx evaluates variables for live requests of this http block ...
        let r = unsafe { Request::from_ngx_http_request(r) };
        // SAFETY: ... into a value slot of the request.
        let v = unsafe { &mut *v };
        // the bytes live in the request's pool or the cycle's conf
        let value = if which == LOG_FIELDS { log_fields(r) } else { value_of(r, which) };
        match value {
            Some((bytes, changes)) => value::set(v, bytes, changes),
            None => value::set_not_found(v),
        }
        NGX_OK as ngx_int_t
    })
}

/// `$crawlward_log_fields`: `agent=... verdict=... action=... refusal=...
/// facets=... budget=...` (then `rung=... score=... contributions=...` for a
/// request the ladder placed, `signature=... signer=...` for a signed one,
/// and `nonce=...` for a verified one with a replay zone), byte for byte what the access log writes from the
/// variables (a value not found as `-`; nginx escapes the whole value as
/// it would each part, byte by byte), in one read of one variable instead of
/// six: each read is a call through nginx's variable lookup and its escape
/// scan. It may still change while any of its parts may. None (not found)
/// only if the request's pool is out of memory.
fn log_fields(r: &Request) -> Option<(&[u8], bool)> {
    // the conf and the request's state looked up once for the six
    // SAFETY: a live request of this http block; neither the confs nor the state are kept,
    // and no other reference to the state is held.
    let mut found = unsafe { facts(r) }.map(|st| (unsafe { confs(r) }.0, st));
    let mut parts: [&[u8]; 6] = [b"-"; 6];
    let mut changes = false;
    for (part, &(_, which)) in parts.iter_mut().zip(LOG_FIELDS_OF.iter()) {
        if let Some((bytes, may_change)) = found.as_mut().and_then(|(mcf, st)| value_in(r, mcf, st, which)) {
            *part = bytes;
            changes |= may_change;
        }
    }
    let mut pieces: [&[u8]; 30] = [b""; 30];
    for (i, (part, (label, _))) in parts.iter().zip(LOG_FIELDS_OF.iter()).enumerate() {
        (pieces[2 * i], pieces[2 * i + 1]) = (label.as_bytes(), part);
    }
    // with the ladder: the client's rung, score and contributions ("log the score
    // contributions, never just the verdict"), once it placed the request
    let (mut score, mut contributions) = ([0u8; 24], [0u8; 128]);
    if let Some(p) = found.as_ref().and_then(|(_, st)| st.ladder) {
        let n = p.score.map_or(0, |s| crawlward_policy::ladder::two_decimals(f64::from(s), &mut score));
        let m = if p.score.is_some() { crawlward_policy::ladder::contributions_into(&p.contributions.map(f64::from), &mut contributions) } else { 0 };
        pieces[12..18].copy_from_slice(&[
            b" rung=",
            crawlward_policy::ladder::rung_name(p.placement).as_bytes(),
            b" score=",
            if n == 0 { b"-" } else { &score[..n] },
            b" contributions=",
            if m == 0 { b"-" } else { &contributions[..m] },
        ]);
    }
    // a signed request: what its signature said, and who signed (an unsigned one writes nothing)
    if let Some(s) = found.as_ref().and_then(|(_, st)| st.signature) {
        let agent = s.agent(r);
        pieces[18..22].copy_from_slice(&[b" signature=", s.outcome.as_str().as_bytes(), b" signer=", if agent.is_empty() { b"-" } else { agent }]);
        if let Some(replay) = s.replay {
            pieces[22..24].copy_from_slice(&[b" nonce=", replay.as_str().as_bytes()]);
        }
    }
    // a metered API request: its account (a space, '%', '"' or '~' in it percent-encoded, so
    // that the field stays one word and a long name's hashed form reads apart), tier, and
    // where the account came from (a keyed account and a sign-in of one name are two), for
    // analyze's report per account
    let mut account = [0u8; 3 * crawlward_policy::quota::ACCOUNT_MAX];
    if let Some((mcf, q)) = found.as_ref().and_then(|(mcf, st)| Some((mcf, st.quota?))) {
        let n = crawlward_policy::quota::log_word(&q.account, &mut account);
        let tier = mcf.tiers.get(q.tier as usize).map_or(&b"-"[..], |t| t.name.as_bytes());
        let source = crawlward_policy::quota::source_word(q.account.is_keyed()).as_bytes();
        pieces[24..30].copy_from_slice(&[b" account=", &account[..n], b" tier=", tier, b" source=", source]);
    }
    Some((r.pool_join(&pieces)?, changes))
}

/// A variable's value, and whether it may still change during the request.
/// None: not found (no catalogue, or no state in an out-of-memory pool).
#[inline(always)]
fn value_of(r: &Request, which: usize) -> Option<(&[u8], bool)> {
    // SAFETY: a live request of this http block; neither the confs nor the state are kept,
    // and no other reference to the state is held.
    let (mcf, st) = (unsafe { confs(r) }.0, unsafe { facts(r) }?);
    value_in(r, mcf, st, which)
}

/// [`value_of`] with the conf and the request's state (`st`) at hand.
#[inline(always)]
fn value_in<'a>(r: &'a Request, mcf: &'a MainConf, st: &mut RequestState, which: usize) -> Option<(&'a [u8], bool)> {
    let identity = mcf.identity.as_ref()?;
    // read where needed, not copied whole: this runs for every variable a request reads
    let pending = st.id.pending;
    let agent = st.id.agent.and_then(|i| identity.catalogue.agents().get(i));
    let text = |s: &'a str| Some((s.as_bytes(), false));
    let changing = |s: &'a str| Some((s.as_bytes(), pending));
    // what the facet guard and the budgets found: known once the preaccess handler ran them
    let facet = st.limited.facet.as_ref();
    match which {
        // a bot the catalogue does not name: by its own product token
        AGENT => match agent {
            Some(a) if a.counts_by_token() => Some((r.pool_copy(agent_label(r, mcf, &st.id).as_bytes())?, false)),
            _ => text(agent.map_or("", |a| a.name.as_str())),
        },
        OPERATOR => text(agent.map_or("", |a| a.operator.as_str())),
        PURPOSE => text(agent.map_or("", |a| a.purpose.as_str())),
        VERDICT => changing(st.id.verdict.as_str()),
        ACTION => changing(st.id.action.as_str()),
        DNS => changing(st.id.dns.map_or("", |d| d.as_str())),
        DNS_CACHE => changing(st.id.dns_source.as_str()),
        PARAMS => Some((facet.map_or(Some(&b""[..]), |f| number(r, f.scan.params as u64))?, !st.facets_done)),
        FACETS => Some((facet.map_or(Some(&b""[..]), |f| number(r, f.scan.facets as u64))?, !st.facets_done)),
        FACET_RULE => Some((facet.and_then(|f| f.rule).map_or("", |r| r.as_str()).as_bytes(), !st.facets_done)),
        BUDGET => Some((st.limited.budget.map_or("", |b| b.name()).as_bytes(), !st.budget_done)),
        LIMIT_CLASS => {
            let rc = identity.layers.as_ref().and_then(|l| l.rate_classes.as_ref());
            let class = layered(r, st).and_then(|l| l.class);
            changing(class.zip(rc).map_or("", |(c, rc)| rc.name(c)))
        }
        BROWSE_KEY => changing(if layered(r, st).is_some_and(|l| l.browse) { "browse" } else { "" }),
        // the ladder: known once the preaccess handler placed the request
        RUNG => Some((st.ladder.map_or("", |p| crawlward_policy::ladder::rung_name(p.placement)).as_bytes(), st.ladder.is_none())),
        SCORE => match st.ladder.and_then(|p| p.score) {
            Some(score) => {
                let mut b = [0u8; 24];
                let n = crawlward_policy::ladder::two_decimals(f64::from(score), &mut b);
                Some((r.pool_copy(&b[..n])?, false))
            }
            None => Some((&b""[..], st.ladder.is_none())),
        },
        CONTRIBUTIONS => match st.ladder.filter(|p| p.score.is_some()) {
            Some(p) => {
                let mut b = [0u8; 128];
                let n = crawlward_policy::ladder::contributions_into(&p.contributions.map(f64::from), &mut b);
                Some((r.pool_copy(&b[..n])?, false))
            }
            None => Some((&b""[..], st.ladder.is_none())),
        },
        SIGNATURE => text(st.signature.map_or("none", |s| s.outcome.as_str())),
        SIGNATURE_AGENT => Some((st.signature.map_or(&b""[..], |s| s.agent(r)), false)),
        // the quota's account: known once the precontent phase metered the request
        ACCOUNT => Some((r.pool_copy(st.quota.as_ref().map_or(&b""[..], |q| q.account.as_bytes()))?, !st.quota_done)),
        TIER => Some((st.quota.and_then(|q| mcf.tiers.get(q.tier as usize)).map_or("", |t| t.name.as_str()).as_bytes(), !st.quota_done)),
        _ => {
            let layers = identity.layers.as_ref()?;
            let (refused, changes) = refusal(r, st);
            let bytes = match (which, refused) {
                (REFUSAL, Some(why)) => why.as_str().as_bytes(),
                (RETRY_AFTER, Some(why)) => match layers.retry_after(why) {
                    Some(secs) => number(r, secs as u64)?,
                    None => b"",
                },
                (THROTTLED, Some(why)) if layers.throttled(why) => b"1",
                (THROTTLED, _) => b"0",
                _ => b"",
            };
            Some((bytes, changes))
        }
    }
}

/// `$crawlward_key_<class>`: the client's address ([`crate::net::client_key`]:
/// an IPv6 address by its /64) when the request is counted in that rate
/// class, else empty.
unsafe extern "C" fn get_key(r: *mut ngx_http_request_t, v: *mut ngx_variable_value_t, data: usize) -> ngx_int_t {
    crate::base::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx evaluates variables for live requests of this http block ...
        let r = unsafe { Request::from_ngx_http_request(r) };
        // SAFETY: ... into a value slot of the request ...
        let v = unsafe { &mut *v };
        // SAFETY: ... and passes a prefix variable's own name as its data.
        let name = unsafe { (*(data as *const ngx_str_t)).as_bytes() };
        // SAFETY: as above; neither the confs nor the state are kept, and no other reference
        // to the state is held.
        let (mcf, st) = (unsafe { confs(r) }.0, unsafe { facts(r) });
        let rc = mcf.identity.as_ref().and_then(|i| i.layers.as_ref()?.rate_classes.as_ref());
        let (Some(rc), Some(st)) = (rc, st) else {
            value::set_not_found(v);
            return NGX_OK as ngx_int_t;
        };
        let class = layered(r, st).and_then(|l| l.class).map(|c| rc.name(c).as_bytes());
        let counted = class.is_some_and(|c| name.get(KEY_PREFIX.len()..) == Some(c));
        // the address lives in the connection, which outlives the request
        let key = if counted { crate::net::client_key(r.connection_ref()) } else { b"" };
        value::set(v, key, st.id.pending);
        NGX_OK as ngx_int_t
    })
}

/// Why the response refused the request (`$crawlward_refusal`), and whether
/// that may still change: before the response has a status, or while the
/// verdict waits for DNS and the answer could be the bot-blocker's (the one
/// layer that reads the verdict's action: maintenance's 503, the site's own
/// error or a rewrite's `return` answer before the preaccess phase ever
/// settles a check). `st` is the request's state.
pub fn refusal(r: &Request, st: &RequestState) -> (Option<Refused>, bool) {
    let status = r.response_status();
    if status == 0 {
        return (None, true);
    }
    // only these answer a refusal: anything else is read without the lookups below
    if !Refused::may_answer(status) {
        return (None, false);
    }
    let (limit_req, limit_conn) = r.limit_statuses();
    let answer = Answer {
        status,
        action: st.id.action,
        // `$crawlward_maintenance`, which the rendered server block sets (`on` while the flag
        // file exists); looked up by name on this rare path, so that the module needs no such
        // variable to start
        maintenance: r.variable_named("crawlward_maintenance").unwrap_or(b""),
        // a dry run's findings refused nothing: a 429 is another's (limit_req's, the site's)
        facet: st.limited.facet.and_then(|f| f.rule).filter(|_| !st.limited.facet_dry),
        limit_req: LimitStatus::of_limit_req(limit_req),
        // the module's browse cap answers as limit_conn would
        limit_conn: if st.limited.browse_cap { LimitStatus::Rejected } else { LimitStatus::of_limit_conn(limit_conn) },
        budget: st.limited.budget.filter(|_| !st.limited.budget_dry),
        ladder: st.limited.ladder,
        signature: st.limited.signature.is_some(),
        quota: st.quota.is_some_and(|q| q.refused),
    };
    match Layers::refusal(&answer) {
        Some(Refused::BotBlocker) | None if st.id.pending => (None, true),
        found => (found, false),
    }
}

/// A number written into the request's pool. None when the pool is out of memory.
fn number(r: &Request, n: u64) -> Option<&[u8]> {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    r.pool_copy(&digits[at..])
}
