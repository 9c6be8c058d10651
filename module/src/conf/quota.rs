//! API quotas per account (heratio.org's layer 4): `crawlward_api_tier`
//! declares a tier, `crawlward_api_keys` the keys file (hashed keys to
//! accounts and tiers, read again when it changes), and `crawlward_quota`
//! meters a location's requests by account, in a zone declared by
//! `crawlward_budget_zone` and used for quotas only. The arithmetic is
//! `crawlward_policy::quota`; the request path is `crate::request::quota`.

use crate::base::HeaderName;
use crate::conf::budget::BudgetZone;
use crate::conf::directive::{args, text};
use crawlward_policy::quota::{KeyedAccount, Keys, Tier, MAX_TIERS};
use ngx::ffi::{ngx_conf_t, ngx_http_get_variable_index, ngx_int_t, ngx_str_t, NGX_LOG_EMERG, NGX_LOG_ERR, NGX_LOG_NOTICE, NGX_LOG_WARN};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::cell::RefCell;

/// `crawlward_api_keys`: the file, the header a client sends its key in, and
/// this worker's copy of the keys (workers are single-threaded).
pub struct ApiKeys {
    pub path: String,
    /// The header a client sends its key in.
    pub header: HeaderName,
    pub loaded: RefCell<Loaded>,
}

/// The keys as last read, and what the file looked like then.
pub struct Loaded {
    pub keys: Keys,
    /// The keys this worker was sent since, and what they named.
    pub memo: crawlward_policy::quota::KeyMemo,
    /// What the file looked like when last looked at: None, gone.
    stamp: Option<Stamp>,
    /// When the file was last looked at (nginx's clock, ms).
    looked_ms: u64,
}

/// How often a worker looks whether the keys file changed.
const LOOK_EVERY_MS: u64 = 1000;

/// What tells a changed keys file: its inode (a file renamed into place is
/// another), its change time (set by every write, and by no `touch -d` or
/// copy that keeps the modification time), its modification time and size.
type Stamp = (u64, u64, i64, i64, u64);

fn stamp(path: &str) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.ctime() * 1_000_000_000 + m.ctime_nsec(), m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size()))
}

fn read(path: &str, tiers: &[Tier]) -> Result<(Keys, Stamp), String> {
    let names: Vec<String> = tiers.iter().map(|t| t.name.clone()).collect();
    let st = stamp(path).ok_or_else(|| format!("cannot read \"{path}\""))?;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read \"{path}\": {e}"))?;
    let keys = Keys::parse(&bytes, &names).map_err(|e| format!("\"{path}\": {e}"))?;
    Ok((keys, st))
}

impl ApiKeys {
    /// The account and tier `key` names, with the keys read again first if
    /// the file changed since it was last looked at, at most once a second.
    /// A file that cannot be read or parsed keeps the keys read before, with
    /// an error in the log.
    pub fn lookup(&self, key: &[u8], tiers: &[Tier], log: *mut ngx::ffi::ngx_log_t) -> Option<KeyedAccount> {
        let now = crate::base::now_ms() as u64;
        let mut l = self.loaded.try_borrow_mut().ok()?;
        if now.saturating_sub(l.looked_ms) >= LOOK_EVERY_MS {
            l.looked_ms = now;
            match stamp(&self.path) {
                Some(seen) if Some(seen) != l.stamp => match read(&self.path, tiers) {
                    Ok((keys, st)) => {
                        ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_api_keys: read \"{}\" again: {} keys", self.path, keys.len());
                        for c in keys.conflicts() {
                            ngx_log_error!(NGX_LOG_WARN, log, "crawlward_api_keys: \"{}\": {c}", self.path);
                        }
                        (l.keys, l.stamp, l.memo) = (keys, Some(st), Default::default());
                    }
                    Err(e) => {
                        // the file as it looked before this read: a write that ends after it
                        // changes it again, and it is read again
                        ngx_log_error!(NGX_LOG_ERR, log, "crawlward_api_keys: {e}; the keys read before still hold");
                        l.stamp = Some(seen);
                    }
                },
                Some(_) => {}
                // gone (said once, until it is back): a key revoked by removing the file
                // would otherwise hold without a word
                None if l.stamp.is_some() => {
                    ngx_log_error!(NGX_LOG_ERR, log, "crawlward_api_keys: \"{}\" is gone; the keys read before still hold", self.path);
                    l.stamp = None;
                }
                None => {}
            }
        }
        let Loaded { keys, memo, .. } = &mut *l;
        memo.lookup(keys, key)
    }
}

/// A location's quota (`crawlward_quota`).
pub struct QuotaLoc {
    pub zone: *const BudgetZone,
    /// Variables that hold the account, set by the server from a checked
    /// identity: the first not empty is the account.
    pub accounts: Vec<usize>,
    /// Whether the accounts' names are folded (`account_names=folded`): compared
    /// without ASCII case and insignificant spaces; by default byte for byte.
    pub account_names_folded: bool,
    /// A variable naming the account's tier when the keys file gives none (else `default`).
    pub tier_var: Option<usize>,
    pub default_tier: usize,
    /// Whether a key in `crawlward_api_keys`' header names the account.
    pub keys: bool,
    /// The metered doors: path prefixes of `$uri` (`paths=`); empty: every request.
    pub paths: Vec<Vec<u8>>,
}

impl QuotaLoc {
    /// Whether the quota meters a request for `uri`.
    pub fn meters(&self, uri: &[u8]) -> bool {
        self.paths.is_empty() || self.paths.iter().any(|p| uri.starts_with(p))
    }
}

impl QuotaLoc {
    pub fn zone(&self) -> &BudgetZone {
        // SAFETY: as for BrowseCapLoc::zone.
        unsafe { &*self.zone }
    }
}

/// A variable's index; None (logged) when the word is not `$name`.
///
/// # Safety
/// Inside a directive handler.
unsafe fn variable(cf: *mut ngx_conf_t, directive: &str, w: &str) -> Option<usize> {
    let Some(name) = w.split_once('=').map_or(w, |(_, v)| v).strip_prefix('$').filter(|n| !n.is_empty()) else {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"{directive}\" directive: expected a variable, e.g. $remote_user");
        return None;
    };
    let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
    // SAFETY: nginx copies the name; unknown variables are reported at the end of
    // configuration ("unknown variable").
    let i = unsafe { ngx_http_get_variable_index(cf, &mut n) };
    (i != ngx::ffi::NGX_ERROR as ngx_int_t).then_some(i as usize)
}

/// `crawlward_api_tier name hourly=N [daily=N];`: a tier, added to `tiers`.
///
/// # Safety
/// Inside a directive handler.
pub unsafe fn parse_tier(cf: *mut ngx_conf_t, tiers: &mut Vec<Tier>) -> Result<(), ()> {
    // SAFETY: per the contract.
    let words: Vec<String> = unsafe { args(cf) }.iter().skip(1).map(text).collect();
    let Some((name, rest)) = words.split_first() else { return Err(()) };
    if !crawlward_policy::quota::valid_tier_name(name) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid tier name \"{name}\" in \"crawlward_api_tier\" directive: use a-z, 0-9, _ and -, up to 32");
        return Err(());
    }
    if tiers.iter().any(|t| &t.name == name) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "duplicate tier \"{name}\" in \"crawlward_api_tier\" directive");
        return Err(());
    }
    if tiers.len() == MAX_TIERS {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_api_tier\" directive: at most {MAX_TIERS} tiers");
        return Err(());
    }
    let mut tier = Tier { name: name.clone(), hourly: crawlward_policy::quota::DEFAULT_HOURLY, daily: None };
    for w in rest {
        let n = |v: &str| v.parse::<u32>().ok().filter(|n| *n >= 1);
        match w.split_once('=') {
            Some(("hourly", v)) if n(v).is_some() => tier.hourly = n(v).unwrap_or(1),
            Some(("daily", v)) if n(v).is_some() => tier.daily = n(v),
            _ => {
                ngx_conf_log_error!(
                    NGX_LOG_EMERG,
                    cf,
                    "invalid parameter \"{w}\" in \"crawlward_api_tier\" directive: expected hourly=N or daily=N, N at least 1"
                );
                return Err(());
            }
        }
    }
    tiers.push(tier);
    Ok(())
}

/// `crawlward_api_keys file header=Name;`: the keys file, read now (a file
/// that cannot be read fails the configuration). Tiers are declared before it.
///
/// # Safety
/// Inside a directive handler.
pub unsafe fn parse_keys(cf: *mut ngx_conf_t, tiers: &[Tier]) -> Option<ApiKeys> {
    // SAFETY: per the contract.
    let words: Vec<String> = unsafe { args(cf) }.iter().skip(1).map(text).collect();
    let mut path = None;
    let mut header = "X-API-Key".to_string();
    for w in &words {
        match w.split_once('=') {
            Some(("header", h)) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') => header = h.to_string(),
            None if path.is_none() => path = Some(w.clone()),
            _ => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_api_keys\" directive: expected a file and header=Name");
                return None;
            }
        }
    }
    let Some(path) = path else {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_api_keys\" directive needs a file");
        return None;
    };
    let (keys, stamp) = match read(&path, tiers) {
        Ok(k) => k,
        Err(e) => {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_api_keys\" directive: {e}");
            return None;
        }
    };
    for c in keys.conflicts() {
        ngx_conf_log_error!(NGX_LOG_WARN, cf, "\"crawlward_api_keys\" directive: \"{path}\": {c}");
    }
    let header = HeaderName::new(&header);
    Some(ApiKeys { path, header, loaded: RefCell::new(Loaded { keys, memo: Default::default(), stamp: Some(stamp), looked_ms: crate::base::now_ms() as u64 }) })
}

/// `crawlward_quota zone=name [paths=/api/,...] [account=$var ...] [account_names=exact|folded] [keys=on] [tier=$var] [default=tier] | off;`
///
/// # Safety
/// Inside a directive handler.
pub unsafe fn parse_quota(cf: *mut ngx_conf_t, words: &[String], mcf: &mut crate::conf::MainConf) -> Option<QuotaLoc> {
    let mut q =
        QuotaLoc { zone: std::ptr::null(), accounts: Vec::new(), account_names_folded: false, tier_var: None, default_tier: 0, keys: false, paths: Vec::new() };
    let mut zone = None;
    let mut default = None;
    for w in words {
        let bad = |why: &str| {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_quota\" directive: {why}");
            None
        };
        match w.split_once('=') {
            Some(("zone", v)) => match mcf.budget_zones.iter().position(|z| z.name == v) {
                Some(i) => zone = Some(i),
                None => return bad("no such zone: declare it with \"crawlward_budget_zone\" at the http level first"),
            },
            // SAFETY: per the contract.
            Some(("account", _)) => q.accounts.push(unsafe { variable(cf, "crawlward_quota", w) }?),
            // SAFETY: per the contract.
            Some(("tier", _)) => q.tier_var = Some(unsafe { variable(cf, "crawlward_quota", w) }?),
            Some(("account_names", "exact")) => q.account_names_folded = false,
            Some(("account_names", "folded")) => q.account_names_folded = true,
            Some(("account_names", _)) => return bad("expected account_names=exact or account_names=folded"),
            Some(("keys", "on")) => q.keys = true,
            Some(("paths", v)) if v.split(',').all(|p| p.starts_with('/')) => q.paths = v.split(',').map(|p| p.as_bytes().to_vec()).collect(),
            Some(("default", v)) => default = Some(v.to_string()),
            _ => return bad("expected zone=, paths=/a/,/b/, account=$variable, account_names=, keys=on, tier=$variable or default=tier"),
        }
    }
    let Some(zone) = zone else {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_quota\" directive needs zone=name");
        return None;
    };
    if mcf.identity.is_none() {
        // the request's state, which the quota's outcome lives in, is the catalogue's
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_quota\" directive needs a \"crawlward_catalogue\" at the http level first");
        return None;
    }
    if q.keys && mcf.api_keys.is_none() {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_quota\" directive with keys=on needs \"crawlward_api_keys\" at the http level first");
        return None;
    }
    if q.accounts.is_empty() && !q.keys {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_quota\" directive needs account=$variable or keys=on: where the account comes from");
        return None;
    }
    if mcf.tiers.is_empty() {
        mcf.tiers.push(Tier { name: "default".into(), hourly: crawlward_policy::quota::DEFAULT_HOURLY, daily: None });
    }
    mcf.tiers_closed = true;
    if let Some(d) = default {
        match mcf.tiers.iter().position(|t| t.name == d) {
            Some(i) => q.default_tier = i,
            None => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_quota\" directive: no tier \"{d}\": declare it with \"crawlward_api_tier\" first");
                return None;
            }
        }
    }
    let z = &mut mcf.budget_zones[zone];
    if z.budgets || z.browse_cap {
        ngx_conf_log_error!(
            NGX_LOG_EMERG,
            cf,
            "\"crawlward_quota\" directive: zone \"{}\" counts crawl budgets: give quotas a zone of their own, so that no crawler's address can take an account's place",
            z.name
        );
        return None;
    }
    z.quotas = true;
    q.zone = &**z as *const BudgetZone;
    Some(q)
}
