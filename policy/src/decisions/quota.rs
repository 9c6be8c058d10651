//! API quotas per account (heratio.org's layer 4: "every API key has an
//! hourly limit (1,000 by default) and, optionally, a daily limit"), kept per
//! account rather than per key, so that a client cannot mint ten keys to get
//! ten quotas (the proportional classifier's notes).
//!
//! An account has a tier; a tier has an hourly limit and optionally a daily
//! one. Both windows slide as the crawl budgets' do ([`crate::budget::Window`]),
//! and a request is counted in both only if both have room. The module keeps
//! each account's two windows in a quota zone; `crawlward explain` and the
//! tests use the same functions.
//!
//! Also here: the keys file the module reads (hashed API keys to accounts and
//! tiers), and the IETF `RateLimit-Policy` / `RateLimit` fields
//! (draft-ietf-httpapi-ratelimit-headers) that tell a client where it stands.

use crate::budget::{Rate, Window, Windows};
use std::collections::HashMap;

/// An hour and a day, in ms: the two windows of every account.
pub const HOUR_MS: u64 = 3_600_000;
pub const DAY_MS: u64 = 86_400_000;

/// heratio.org's default: 1,000 requests an hour.
pub const DEFAULT_HOURLY: u32 = 1000;

/// Most tiers a policy may name (the status counts are kept per tier).
pub const MAX_TIERS: usize = 8;

/// Longest account name kept as it is (a longer one is kept as its first
/// bytes and a hash of the whole: [`account_key_name`]).
pub const ACCOUNT_MAX: usize = 46;

/// A tier: its name and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    pub name: String,
    pub hourly: u32,
    pub daily: Option<u32>,
}

impl Tier {
    fn rates(&self) -> [Rate; 2] {
        [Rate { limit: self.hourly, window_ms: HOUR_MS }, Rate { limit: self.daily.unwrap_or(u32::MAX), window_ms: DAY_MS }]
    }

    /// The hourly and daily limits a node enforces when the store's fallback
    /// divides them by `divide` (1: as written), as [`take`] does.
    pub fn enforced(&self, divide: u32) -> (u32, Option<u32>) {
        let [hourly, daily] = self.rates().map(|r| r.shrunk(divide));
        (hourly.limit, self.daily.map(|_| daily.limit))
    }

    /// `RateLimit-Policy` for the tier's own limits: what every metered answer
    /// says unless the store's fallback shrank them ([`Tier::policy_holds`]),
    /// so the module writes it once per configuration.
    pub fn policy_field(&self) -> Vec<u8> {
        let window = |r: Rate| WindowStanding { limit: r.limit, window_s: r.window_ms / 1000, ..Default::default() };
        let [hourly, daily] = self.rates();
        let s = Standing { hourly: window(hourly), daily: self.daily.map(|_| window(daily)), refused: None };
        let mut out = [0; FIELD_MAX];
        let n = policy_field_into(&s, &mut out);
        out[..n].to_vec()
    }

    /// Whether a standing's limits are the tier's own, so that its
    /// `RateLimit-Policy` is [`Tier::policy_field`].
    pub fn policy_holds(&self, s: &Standing) -> bool {
        s.hourly.limit == self.hourly && s.daily.map(|d| d.limit) == self.daily
    }
}

/// A tier's name: `a-z`, `0-9`, `_` and `-`, 1 to 32 (it is a Prometheus label and a directive word).
pub fn valid_tier_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 32 && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Which window refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaWindow {
    Hourly,
    Daily,
}

impl QuotaWindow {
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaWindow::Hourly => "hourly",
            QuotaWindow::Daily => "daily",
        }
    }
}

/// Where an account stands after a request: for each window it has (the
/// hourly one, then the daily one if the tier sets it), its limit and
/// length, what is left, and the seconds until it has room again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Standing {
    pub hourly: WindowStanding,
    pub daily: Option<WindowStanding>,
    /// The window that refused the request, if one did.
    pub refused: Option<QuotaRefusal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowStanding {
    pub limit: u32,
    pub window_s: u64,
    pub remaining: u64,
    /// Seconds until more is left than now: until a request fits again when
    /// none is left (draft-ietf-httpapi-ratelimit-headers-10's `t`).
    pub reset_s: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaRefusal {
    pub window: QuotaWindow,
    /// Seconds until that window has room again (Retry-After), at least 1.
    pub retry_after_s: u64,
}

/// Check one request against an account's windows and count it in both if
/// both have room; say where the account stands either way. With `cluster`,
/// the other nodes' last known counts count too (sync); `divide` divides the
/// limits (a node's share while the store does not answer; 1: none).
pub fn take(windows: &mut Windows, now: u64, tier: &Tier, cluster: bool, divide: u32) -> Standing {
    let rates = tier.rates().map(|r| r.shrunk(divide));
    // both windows are checked: when both refuse, the client is told the longer wait,
    // so that it does not come back when the hour has room and meet the day's refusal
    let mut refused: Option<QuotaRefusal> = None;
    let mut used = [0u64; 2];
    for (k, rate) in rates.iter().enumerate() {
        windows[k].roll(now, rate.window_ms);
        used[k] = windows[k].estimate(now, rate.window_ms, cluster);
        if used[k] >= rate.limit as u64 {
            let ms = windows[k].room_rolled(now, *rate, cluster).err().unwrap_or(1);
            let window = if k == 0 { QuotaWindow::Hourly } else { QuotaWindow::Daily };
            let this = QuotaRefusal { window, retry_after_s: ms.div_ceil(1000).max(1) };
            if refused.is_none_or(|r| this.retry_after_s > r.retry_after_s) {
                refused = Some(this);
            }
        }
    }
    if refused.is_none() {
        for (k, rate) in rates.iter().enumerate() {
            windows[k].spend(now, *rate);
            // the estimate counts the current fixed window's requests whole
            used[k] += 1;
        }
    }
    let standing = |k: usize| {
        let rate = rates[k];
        let remaining = (rate.limit as u64).saturating_sub(used[k]);
        // draft-ietf-httpapi-ratelimit-headers-10's `t`: the seconds until more is
        // available than now (a request fits, when none is left). The sliding estimate
        // frees the previous window's requests as it slides, and this window's only once
        // it has ended, so more can come in seconds, or only after the next window began.
        // With nothing used, nothing is freed: the current fixed window's end.
        let reset_ms = if used[k] == 0 {
            let (start, len) = windows[k].fixed();
            (start + len).saturating_sub(now)
        } else {
            let more = Rate { limit: used[k].min(rate.limit.into()) as u32, ..rate };
            windows[k].room_rolled(now, more, cluster).err().unwrap_or(1)
        };
        WindowStanding { limit: rate.limit, window_s: rate.window_ms / 1000, remaining, reset_s: reset_ms.div_ceil(1000) }
    };
    Standing { hourly: standing(0), daily: tier.daily.map(|_| standing(1)), refused }
}

/// Requests over the last hour and day in an account's windows at `now`.
pub fn used(windows: &Windows, now: u64, cluster: bool) -> (u64, u64) {
    let at = |k: usize, len: u64| {
        let mut w: Window = windows[k];
        w.roll(now, len);
        w.estimate(now, len, cluster)
    };
    (at(0, HOUR_MS), at(1, DAY_MS))
}

/// Room for either field: two windows of two numbers of 20 digits and their words.
pub const FIELD_MAX: usize = 128;

/// A field written into a fixed buffer, on the request path: no allocation, no
/// formatting machinery (each metered answer carries two).
struct Field<'a> {
    buf: &'a mut [u8; FIELD_MAX],
    len: usize,
}

impl<'a> Field<'a> {
    fn new(buf: &'a mut [u8; FIELD_MAX]) -> Field<'a> {
        Field { buf, len: 0 }
    }

    /// `s`, when it fits (a field's words and numbers always do: FIELD_MAX).
    fn text(&mut self, s: &[u8]) -> &mut Field<'a> {
        if let Some(to) = self.buf.get_mut(self.len..self.len + s.len()) {
            to.copy_from_slice(s);
            self.len += s.len();
        }
        self
    }

    /// `v` in decimal, two digits a division.
    fn number(&mut self, v: u64) -> &mut Field<'a> {
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849\
5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
        let digits = v.checked_ilog10().unwrap_or(0) as usize + 1;
        let Some(to) = self.buf.get_mut(self.len..self.len + digits) else { return self };
        let (mut rest, mut at) = (v, digits);
        while rest >= 100 {
            let pair = (rest % 100) as usize * 2;
            rest /= 100;
            at -= 2;
            to[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if rest >= 10 {
            to[..2].copy_from_slice(&PAIRS[rest as usize * 2..rest as usize * 2 + 2]);
        } else {
            to[0] = b'0' + rest as u8;
        }
        self.len += digits;
        self
    }
}

/// `RateLimit-Policy` for a tier, written into `out` (its length returned):
/// `"hourly";q=1000;w=3600` and, with a daily limit, `, "daily";q=20000;w=86400`.
pub fn policy_field_into(s: &Standing, out: &mut [u8; FIELD_MAX]) -> usize {
    let mut f = Field::new(out);
    f.text(b"\"hourly\";q=").number(s.hourly.limit.into()).text(b";w=").number(s.hourly.window_s);
    if let Some(d) = s.daily {
        f.text(b", \"daily\";q=").number(d.limit.into()).text(b";w=").number(d.window_s);
    }
    f.len
}

/// `RateLimit`, written into `out` (its length returned): what is left of
/// each window and when it resets, `"hourly";r=998;t=3412`.
pub fn remaining_field_into(s: &Standing, out: &mut [u8; FIELD_MAX]) -> usize {
    let mut f = Field::new(out);
    f.text(b"\"hourly\";r=").number(s.hourly.remaining).text(b";t=").number(s.hourly.reset_s);
    if let Some(d) = s.daily {
        f.text(b", \"daily\";r=").number(d.remaining).text(b";t=").number(d.reset_s);
    }
    f.len
}

/// An API key's hash as the keys file holds it: SHA-256, lower-case hex.
pub fn key_hash(key: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, key);
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// A new API key: 24 random bytes from the system's generator, base64url,
/// after `cw_` (so that a leaked one is recognisable in logs and scanners).
pub fn new_key() -> Option<String> {
    use base64::Engine;
    let mut bytes = [0u8; 24];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).ok()?;
    Some(format!("cw_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// One line of the keys file: a key's hash, its account and its tier.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    pub sha256: String,
    pub account: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// The keys file `crawlward render` writes for the module
/// (`crawlward-api-keys.json`): a header naming its source, then the keys.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct KeysFile {
    #[serde(default)]
    pub generated: String,
    pub keys: Vec<KeyEntry>,
}

/// The keys, as the module looks them up: a key's hash to its account and
/// tier (an index into the tiers given).
#[derive(Debug, Clone, Default)]
pub struct Keys {
    by_hash: HashMap<[u8; 32], Named>,
    /// Accounts whose keys gave two tiers, said as a warning: the first
    /// key's tier holds for every key of the account.
    conflicts: Vec<String>,
}

/// What a key names: its account, and its tier if the keys file gives one.
type Named = (String, Option<usize>);

/// An account's name as the quota zone keys it ([`account_key_name`]), in a
/// fixed size that copies without allocating, and where it came from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AccountName {
    bytes: [u8; ACCOUNT_MAX],
    len: u8,
    /// Whether the name was too long and is kept as its beginning and hash.
    hashed: bool,
    /// Whether the keys file named it (else an account variable did).
    keyed: bool,
}

impl AccountName {
    /// An account an account variable names: what the site's own sign-in
    /// checked (`$remote_user`, an `auth_request` answer).
    pub fn new(name: &[u8]) -> AccountName {
        let mut a = AccountName { bytes: [0; ACCOUNT_MAX], len: 0, hashed: name.len() > ACCOUNT_MAX, keyed: false };
        a.len = account_key_name(name, &mut a.bytes) as u8;
        a
    }

    /// An account variable's account, its name folded
    /// (`api_tiers.account_names: folded`) as a directory that ignores case
    /// and spaces compares names: ASCII letters in lower case, leading and
    /// trailing spaces (and tabs) dropped, a run of them inside one space, and
    /// nothing from a NUL byte on (what a sign-in comparing C strings
    /// reads). Where the sign-in takes `ACME`, ` acme` and `acme  ` for
    /// `acme` (an LDAP, a database collation, and passes on what the client
    /// typed), they are one account with one quota, not one a spelling. A
    /// long name is folded before its hash is taken. None for a name of
    /// spaces only, which names no account.
    pub fn folded(name: &[u8]) -> Option<AccountName> {
        let name = name.split(|b| *b == 0).next().unwrap_or_default();
        // most names: nothing to fold
        let space = |b: &u8| matches!(b, b' ' | b'\t');
        let plain = |w: &[u8]| {
            !w.first().is_some_and(space) && !w.last().is_some_and(space) && !w.windows(2).any(|p| space(&p[0]) && space(&p[1])) && !w.contains(&b'\t')
        };
        if !name.iter().any(u8::is_ascii_uppercase) && plain(name) {
            return (!name.is_empty()).then(|| AccountName::new(name));
        }
        let mut out = Vec::with_capacity(name.len());
        for word in name.split(space).filter(|w| !w.is_empty()) {
            if !out.is_empty() {
                out.push(b' ');
            }
            out.extend(word.iter().map(u8::to_ascii_lowercase));
        }
        (!out.is_empty()).then(|| AccountName::new(&out))
    }

    /// An account the keys file names. The quota zone keeps it apart from
    /// an account variable's of the same name: where users choose their own
    /// names (a sign-up), none can take a keyed account's name and spend
    /// its quota.
    pub fn keyed(name: &[u8]) -> AccountName {
        AccountName { keyed: true, ..AccountName::new(name) }
    }

    /// Whether the keys file named it.
    pub fn is_keyed(&self) -> bool {
        self.keyed
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Whether this is a long name's hashed form: the quota zone keys those
    /// apart from names kept as they are, so that no name, whatever its
    /// bytes, can take another account's quota by spelling its hashed form.
    pub fn is_hashed(&self) -> bool {
        self.hashed
    }
}

impl std::fmt::Debug for AccountName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Where an account came from, as the status JSON, Prometheus and the access
/// log (`source=`) say it: `key` (the keys file) or `variable` (an account
/// variable).
pub fn source_word(keyed: bool) -> &'static str {
    if keyed {
        "key"
    } else {
        "variable"
    }
}

/// What a listed key names, as the memo keeps it: the account, and the keys
/// file's tier for it (an index into the tiers), if it gives one.
pub type KeyedAccount = (AccountName, Option<u8>);

/// The last keys a worker was sent and what they named, so that a client
/// sending its key on every request costs one SHA-256, not one a request.
/// Direct-mapped: a key has one slot, chosen by foldhash (seeded per
/// process), and takes it from whatever key was there. So a lookup is a
/// hash and one comparison of the whole key, the memo's size is fixed, and a
/// flood of made-up keys only makes other keys' next lookup a SHA-256 again,
/// never wrong. Kept in the worker's memory only, as the request holds the
/// key anyway; made anew with every keys file read.
#[derive(Clone, Default)]
pub struct KeyMemo {
    slots: Vec<MemoSlot>,
    hasher: foldhash::fast::RandomState,
}

#[derive(Clone, Copy)]
struct MemoSlot {
    /// The key's length; 0: an empty slot (an empty key is never looked up).
    len: u8,
    key: [u8; KeyMemo::KEY_MAX],
    found: Option<KeyedAccount>,
}

impl KeyMemo {
    /// Slots (a power of two).
    pub const MAX: usize = 1024;
    /// Longest key remembered (longer ones are hashed every time).
    pub const KEY_MAX: usize = 128;

    /// What `key` names in `keys`, from the memo when it was the last key
    /// seen in its slot.
    pub fn lookup(&mut self, keys: &Keys, key: &[u8]) -> Option<KeyedAccount> {
        let named = |(account, tier): (&str, Option<usize>)| (AccountName::keyed(account.as_bytes()), tier.map(|t| t as u8));
        if key.is_empty() {
            return None;
        }
        if key.len() > Self::KEY_MAX {
            // not remembered, and not a reason to forget another
            return keys.lookup(key).map(named);
        }
        if self.slots.is_empty() {
            self.slots = vec![MemoSlot { len: 0, key: [0; Self::KEY_MAX], found: None }; Self::MAX];
        }
        let slot = &mut self.slots[std::hash::BuildHasher::hash_one(&self.hasher, key) as usize & (Self::MAX - 1)];
        if slot.len as usize == key.len() && &slot.key[..key.len()] == key {
            return slot.found;
        }
        let found = keys.lookup(key).map(named);
        slot.len = key.len() as u8;
        slot.key[..key.len()].copy_from_slice(key);
        slot.found = found;
        found
    }

    /// Keys remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.len != 0).count()
    }
}

impl Keys {
    /// Read the keys file's JSON; `tiers` are the configured tiers' names.
    /// Errors name the line's account and what is wrong.
    pub fn parse(json: &[u8], tiers: &[String]) -> Result<Keys, String> {
        let file: KeysFile = serde_json::from_slice(json).map_err(|e| format!("not a keys file: {e}"))?;
        let mut by_hash = HashMap::with_capacity(file.keys.len());
        // an account has one tier, whichever of its keys a client sends: its first key's
        let mut tier_of: HashMap<String, Option<usize>> = HashMap::new();
        let mut conflicts = Vec::new();
        for k in file.keys {
            let Some(hash) = unhex(&k.sha256) else {
                return Err(format!("account \"{}\": sha256 must be 64 hex digits", k.account));
            };
            if k.account.is_empty() || k.account.len() > ACCOUNT_MAX {
                return Err(format!("account \"{}\": a name of 1 to {ACCOUNT_MAX} bytes", k.account));
            }
            let mut tier = match &k.tier {
                None => None,
                Some(t) => match tiers.iter().position(|n| n == t) {
                    Some(i) => Some(i),
                    None => return Err(format!("account \"{}\": no tier \"{t}\"", k.account)),
                },
            };
            match tier_of.get(&k.account) {
                None => {
                    tier_of.insert(k.account.clone(), tier);
                }
                Some(first) if *first != tier => {
                    let name = |t: Option<usize>| t.map_or("none", |i| tiers[i].as_str());
                    conflicts.push(format!(
                        "account \"{}\": its keys give two tiers ({} and {}); an account has one tier, whichever key is sent: its first key's, {}, holds",
                        k.account,
                        name(*first),
                        name(tier),
                        name(*first)
                    ));
                    tier = *first;
                }
                Some(_) => {}
            }
            if by_hash.insert(hash, (k.account.clone(), tier)).is_some() {
                return Err(format!("account \"{}\": the same key is listed twice", k.account));
            }
        }
        Ok(Keys { by_hash, conflicts })
    }

    /// What the file gave that [`Keys::parse`] took otherwise: an account
    /// whose keys gave two tiers, each said once a key.
    pub fn conflicts(&self) -> &[String] {
        &self.conflicts
    }

    /// The account and tier of a key the client sent, if it is listed.
    pub fn lookup(&self, key: &[u8]) -> Option<(&str, Option<usize>)> {
        if key.is_empty() {
            return None;
        }
        self.by_hash.get(&key_hash(key)).map(|(a, t)| (a.as_str(), *t))
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

/// An account name (as [`account_key_name`] keeps it) as one word of a log
/// line, written into `out` (three bytes for each of [`ACCOUNT_MAX`] is room
/// enough; what does not fit is left out): a space, `%`, `"` and `~`
/// percent-encoded, and a name that is only `-` (which the log reads as no
/// value) written `%2D`; the rest as it is (nginx escapes the line's other
/// bytes). A long name's hashed form keeps its `~` as it is, so the word
/// tells it apart from a name of the same bytes, as the zone does. Returns
/// the length.
pub fn log_word(name: &AccountName, out: &mut [u8]) -> usize {
    let account = name.as_bytes();
    // the byte of a hashed form's `~`, the one left as it is
    let separator = if name.is_hashed() { HASHED_SEPARATOR_AT } else { usize::MAX };
    let encodes = |(i, b): (usize, &u8)| matches!(b, b' ' | b'%' | b'"') || (*b == b'~' && i != separator);
    // most names need no encoding: one copy
    if !account.iter().enumerate().any(encodes) && account != b"-" {
        let n = account.len().min(out.len());
        out[..n].copy_from_slice(&account[..n]);
        return n;
    }
    let mut n = 0;
    for (i, b) in account.iter().enumerate() {
        let encoded: &[u8] = match b {
            b' ' => b"%20",
            b'%' => b"%25",
            b'"' => b"%22",
            b'~' if i != separator => b"%7E",
            b'-' if account.len() == 1 => b"%2D",
            _ => std::slice::from_ref(b),
        };
        if n + encoded.len() > out.len() {
            break;
        }
        out[n..n + encoded.len()].copy_from_slice(encoded);
        n += encoded.len();
    }
    n
}

/// Where a long name's hashed form has its `~`: after its first 29 bytes.
const HASHED_SEPARATOR_AT: usize = 29;

/// An account name as the quota zone keys it, at most [`ACCOUNT_MAX`]
/// bytes: the name itself when it fits; else its first 29 bytes, `~` and
/// 16 hex digits of the SHA-256 of the whole name (the same on every node),
/// so that two long names that share a beginning (e-mail addresses, OIDC
/// subjects) keep quotas of their own, and nobody who can choose a long
/// name finds one that shares another's (FNV-1a, used before, let a chosen
/// second name be computed). The zone keys a hashed form apart from a name
/// of the same bytes ([`AccountName::is_hashed`]). Returns the length
/// written into `out`.
pub fn account_key_name(name: &[u8], out: &mut [u8; ACCOUNT_MAX]) -> usize {
    if name.len() <= ACCOUNT_MAX {
        out[..name.len()].copy_from_slice(name);
        return name.len();
    }
    out[..HASHED_SEPARATOR_AT].copy_from_slice(&name[..HASHED_SEPARATOR_AT]);
    out[HASHED_SEPARATOR_AT] = b'~';
    // a long name is rare, and costs a SHA-256 and a small string
    out[HASHED_SEPARATOR_AT + 1..].copy_from_slice(hex(&key_hash(name)[..8]).as_bytes());
    ACCOUNT_MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folded_name_is_one_account_whatever_its_case_and_spaces() {
        let folded = |n: &[u8]| AccountName::folded(n).map(|a| String::from_utf8_lossy(a.as_bytes()).into_owned());
        for spelled in [&b"acme"[..], b"ACME", b"Acme", b" acme", b"acme  ", b"  aCmE ", b"acme\0x", b"ACME\0"] {
            assert_eq!(folded(spelled).as_deref(), Some("acme"), "{spelled:?}");
        }
        assert_eq!(folded(b"  Ann   Smith ").as_deref(), Some("ann smith"));
        assert_eq!(folded(b"\tann\t smith").as_deref(), Some("ann smith"));
        // only ASCII: other bytes are kept as they are
        assert_eq!(folded("CAF\u{c9}".as_bytes()).as_deref(), Some("caf\u{c9}"));
        // spaces only, or nothing before a NUL: no account
        for none in [&b"   "[..], b"\0acme", b""] {
            assert_eq!(folded(none), None, "{none:?}");
        }
        // a long name is folded before it is hashed: its hashed form is the folded one's
        let long = AccountName::folded(format!(" {} ", "A".repeat(60)).as_bytes()).unwrap();
        assert!(long.is_hashed());
        assert_eq!(long.as_bytes(), AccountName::new("a".repeat(60).as_bytes()).as_bytes());
        // exact names are kept as sent
        assert_eq!(AccountName::new(b" ACME").as_bytes(), b" ACME");
    }

    fn policy_field(s: &Standing) -> String {
        let mut out = [0; FIELD_MAX];
        let n = policy_field_into(s, &mut out);
        String::from_utf8_lossy(&out[..n]).into_owned()
    }

    fn remaining_field(s: &Standing) -> String {
        let mut out = [0; FIELD_MAX];
        let n = remaining_field_into(s, &mut out);
        String::from_utf8_lossy(&out[..n]).into_owned()
    }

    fn tier(hourly: u32, daily: Option<u32>) -> Tier {
        Tier { name: "t".into(), hourly, daily }
    }

    /// What a standing says is left is what the status's count of use says was
    /// used, at every step of a long run across fixed windows and refusals.
    #[test]
    fn remaining_agrees_with_the_use_counted_at_every_step() {
        let t = tier(50, Some(400));
        let mut w: Windows = [Window::ZERO; 2];
        let mut now = 7_000;
        for i in 0..5_000u64 {
            now += 1_000 + (i * 7919) % 90_000;
            let s = take(&mut w, now, &t, false, 1);
            let (hour, day) = used(&w, now, false);
            assert_eq!(s.hourly.remaining, 50u64.saturating_sub(hour), "request {i} at {now}");
            assert_eq!(s.daily.unwrap().remaining, 400u64.saturating_sub(day), "request {i} at {now}");
            let wait = s.refused.map(|r| r.retry_after_s);
            if let Some(wait) = wait {
                assert!(wait >= 1 && (s.hourly.remaining == 0 || s.daily.unwrap().remaining == 0), "request {i}: {s:?}");
            }
        }
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut values = vec![0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 3600, 86_400, 4_000_000_000, u64::MAX];
        values.extend((0..2000u64).map(|i| i * i * 7919 % 10_000_019));
        for v in values {
            let mut buf = [0u8; FIELD_MAX];
            let mut f = Field::new(&mut buf);
            f.number(v);
            let n = f.len;
            assert_eq!(&buf[..n], v.to_string().as_bytes());
        }
    }

    #[test]
    fn a_tiers_policy_field_is_what_its_standings_say_until_the_limits_shrink() {
        for t in [tier(1000, None), tier(500, Some(2000))] {
            let mut w: Windows = [Window::ZERO; 2];
            let s = take(&mut w, 5_000, &t, false, 1);
            assert!(t.policy_holds(&s));
            assert_eq!(String::from_utf8(t.policy_field()).unwrap(), policy_field(&s));
            let shrunk = take(&mut w, 6_000, &t, false, 2);
            assert!(!t.policy_holds(&shrunk));
        }
    }

    #[test]
    fn the_hourly_limit_refuses_the_next_request_and_says_when() {
        let t = tier(3, None);
        let mut w: Windows = [Window::ZERO; 2];
        for i in 0..3 {
            let s = take(&mut w, 1_000 + i, &t, false, 1);
            assert_eq!(s.refused, None);
            assert_eq!(s.hourly.remaining, 2 - i);
        }
        let s = take(&mut w, 2_000, &t, false, 1);
        let r = s.refused.unwrap();
        assert_eq!(r.window, QuotaWindow::Hourly);
        // the estimate takes the last hour's requests as spread over it: room comes
        // once a third of the next hour has passed
        assert_eq!(r.retry_after_s, 3600 - 2 + 1200, "{r:?}");
        assert_eq!(s.hourly.remaining, 0);
        assert_eq!(s.daily, None);
        assert_eq!(used(&w, 2_000, false), (3, 3), "the refusal spent nothing");
        // an hour and a half later the previous hour counts for half: one more fits
        assert_eq!(take(&mut w, 5_400_000, &t, false, 1).refused, None);
    }

    /// `t` says when more is left: a client that waits it finds one more request
    /// left, and one that comes a second sooner does not.
    #[test]
    fn t_is_when_more_is_left() {
        let t = tier(1000, None);
        let left_at = |w: &Windows, at: u64| 1000 - used(w, at, false).0;
        let mut w: Windows = [Window::ZERO; 2];
        // the first request of a quiet hour, ten minutes in: it frees only after the hour
        // ends, an hour's worth of one request later
        let now = 10 * 60_000;
        let s = take(&mut w, now, &t, false, 1);
        assert_eq!((s.hourly.remaining, s.hourly.reset_s), (999, 50 * 60 + 3600));
        // after an hour of 600 requests, one frees every 6 s as the previous hour slides out
        let mut w: Windows = [Window::ZERO; 2];
        for i in 0..600 {
            take(&mut w, i * 6_000, &t, false, 1);
        }
        let now = HOUR_MS + 10 * 60_000 + 500;
        let s = take(&mut w, now, &t, false, 1);
        assert!(s.hourly.reset_s <= 6, "{s:?}");
        for (s, w, now) in [(s, w, now)].into_iter().chain((0..200u64).map(|k| {
            // and for any spread of requests over two hours
            let mut w: Windows = [Window::ZERO; 2];
            let mut now = k * 104_729;
            let mut s = take(&mut w, now, &t, false, 1);
            for i in 0..(k * 7 % 990) {
                now += (i * 7_919 + k * 15_485_863) % (HOUR_MS / (1 + k % 40));
                s = take(&mut w, now, &t, false, 1);
            }
            (s, w, now)
        })) {
            let r = s.hourly.remaining;
            assert!(left_at(&w, now + s.hourly.reset_s * 1000) > r, "{s:?} at {now}");
            assert!(s.hourly.reset_s == 0 || left_at(&w, now + (s.hourly.reset_s - 1) * 1000) <= r, "{s:?} at {now}: sooner than t");
        }
    }

    #[test]
    fn the_daily_limit_holds_across_hours() {
        let t = tier(10, Some(15));
        let mut w: Windows = [Window::ZERO; 2];
        let mut passed = 0;
        for h in 0..4u64 {
            for i in 0..10 {
                if take(&mut w, h * HOUR_MS * 2 + i, &t, false, 1).refused.is_none() {
                    passed += 1;
                }
            }
        }
        assert_eq!(passed, 15);
        let s = take(&mut w, 7 * HOUR_MS, &t, false, 1);
        assert_eq!(s.refused.unwrap().window, QuotaWindow::Daily);
        assert_eq!(policy_field(&s), "\"hourly\";q=10;w=3600, \"daily\";q=15;w=86400");
        assert!(remaining_field(&s).starts_with("\"hourly\";r=10;t="), "{}", remaining_field(&s));
        assert!(remaining_field(&s).contains("\"daily\";r=0;t="));
        let most = Standing {
            hourly: WindowStanding { limit: u32::MAX, window_s: u64::MAX, remaining: u64::MAX, reset_s: u64::MAX },
            daily: Some(WindowStanding { limit: u32::MAX, window_s: u64::MAX, remaining: u64::MAX, reset_s: u64::MAX }),
            refused: None,
        };
        assert!(remaining_field(&most).ends_with(&format!(";t={}", u64::MAX)), "the longest fits: {}", remaining_field(&most));
    }

    #[test]
    fn a_share_of_the_limits_in_fallback() {
        let t = tier(10, None);
        let mut w: Windows = [Window::ZERO; 2];
        let passed = (0..10).filter(|i| take(&mut w, *i, &t, false, 2).refused.is_none()).count();
        assert_eq!(passed, 5);
    }

    #[test]
    fn keys_are_looked_up_by_their_hash() {
        let tiers = ["standard".to_string(), "partner".to_string()];
        let h = hex(&key_hash(b"k-one"));
        assert_eq!(h.len(), 64);
        let two = hex(&key_hash(b"k-two"));
        let json = format!(r#"{{"keys":[{{"sha256":"{h}","account":"acme","tier":"partner"}},{{"sha256":"{two}","account":"beta"}}]}}"#);
        let keys = Keys::parse(json.as_bytes(), &tiers).unwrap();
        assert_eq!(keys.lookup(b"k-one"), Some(("acme", Some(1))));
        assert_eq!(keys.lookup(b"k-two"), Some(("beta", None)));
        assert!(keys.conflicts().is_empty());
        // a second key of an account in another tier, or in none, would let its client pick
        // its tier by the key it sends: the first key's holds for both, with a warning
        let minted = format!(r#"{{"keys":[{{"sha256":"{h}","account":"acme","tier":"partner"}},{{"sha256":"{two}","account":"acme","tier":"standard"}}]}}"#);
        let keys = Keys::parse(minted.as_bytes(), &tiers).unwrap();
        assert_eq!(keys.lookup(b"k-two"), Some(("acme", Some(1))), "the first key's tier");
        assert_eq!(
            keys.conflicts(),
            ["account \"acme\": its keys give two tiers (partner and standard); an account has one tier, whichever key is sent: its first key's, partner, holds"]
        );
        let untiered = format!(r#"{{"keys":[{{"sha256":"{two}","account":"acme"}},{{"sha256":"{h}","account":"acme","tier":"partner"}}]}}"#);
        let keys = Keys::parse(untiered.as_bytes(), &tiers).unwrap();
        assert_eq!(keys.lookup(b"k-one"), Some(("acme", None)), "none, the first key's");
        assert!(keys.conflicts()[0].contains("(none and partner)"));
        let same = format!(r#"{{"keys":[{{"sha256":"{h}","account":"acme","tier":"partner"}},{{"sha256":"{two}","account":"acme","tier":"partner"}}]}}"#);
        let keys = Keys::parse(same.as_bytes(), &tiers).unwrap();
        assert_eq!((keys.len(), keys.conflicts().len()), (2, 0));
        assert_eq!(keys.lookup(b"k-three"), None);
        assert_eq!(keys.lookup(b""), None);
        let bad = format!(r#"{{"keys":[{{"sha256":"{h}","account":"acme","tier":"gold"}}]}}"#);
        assert_eq!(Keys::parse(bad.as_bytes(), &tiers).unwrap_err(), "account \"acme\": no tier \"gold\"");
        let twice = format!(r#"{{"keys":[{{"sha256":"{h}","account":"a"}},{{"sha256":"{h}","account":"b"}}]}}"#);
        assert!(Keys::parse(twice.as_bytes(), &tiers).unwrap_err().contains("twice"));
        assert!(Keys::parse(br#"{"keys":[{"sha256":"zz","account":"a"}]}"#, &tiers).unwrap_err().contains("64 hex"));
    }

    #[test]
    fn an_account_is_one_word_of_a_log_line() {
        let mut out = [0u8; 3 * ACCOUNT_MAX];
        let n = log_word(&AccountName::new(b"ann smith 100%\""), &mut out);
        assert_eq!(&out[..n], b"ann%20smith%20100%25%22");
        let n = log_word(&AccountName::new(&[b' '; ACCOUNT_MAX]), &mut out);
        assert_eq!(n, 3 * ACCOUNT_MAX, "the longest name fits, encoded");
        let n = log_word(&AccountName::new(b"-"), &mut out);
        assert_eq!(&out[..n], b"%2D", "a name of one dash is not the log's empty value");
        let n = log_word(&AccountName::new(b"--"), &mut out);
        assert_eq!(&out[..n], b"--");
        // a long name's hashed form, and a name that spells it: two words
        let long = AccountName::new(&[b'a'; 60]);
        assert!(long.is_hashed());
        let n = log_word(&long, &mut out);
        let hashed_word = out[..n].to_vec();
        assert_eq!(&hashed_word[..30], b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa~");
        let spelled = AccountName::new(long.as_bytes());
        assert!(!spelled.is_hashed());
        let n = log_word(&spelled, &mut out);
        assert_eq!(&out[..32], b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa%7E");
        assert_ne!(&out[..n], &hashed_word[..]);
    }

    #[test]
    fn the_memo_answers_as_the_keys_do_and_stays_bounded() {
        let json = format!(
            r#"{{"keys":[{{"sha256":"{}","account":"acme"}},{{"sha256":"{}","account":"bee","tier":"gold"}}]}}"#,
            hex(&key_hash(b"good")),
            hex(&key_hash(b"other"))
        );
        let keys = Keys::parse(json.as_bytes(), &["gold".into()]).unwrap();
        let acme = Some((AccountName::keyed(b"acme"), None));
        let mut memo = KeyMemo::default();
        for round in 0..3 {
            assert_eq!(memo.lookup(&keys, b"good"), acme, "round {round}");
            assert_eq!(memo.lookup(&keys, b"other"), Some((AccountName::keyed(b"bee"), Some(0))), "round {round}");
            assert_eq!(memo.lookup(&keys, b"bad"), None);
            assert_eq!(memo.lookup(&keys, b"goo"), None, "a prefix of a key is not the key");
            assert_eq!(memo.lookup(&keys, b"goodx"), None);
        }
        for i in 0..5000 {
            assert_eq!(memo.lookup(&keys, format!("made-up-{i}").as_bytes()), None);
            assert!(memo.len() <= KeyMemo::MAX);
        }
        assert_eq!(memo.lookup(&keys, b"good"), acme, "still right after a flood");
        assert_eq!(memo.lookup(&keys, &[b'k'; 300]), None);
        assert_eq!(memo.lookup(&keys, &[b'k'; KeyMemo::KEY_MAX]), None);
        assert_eq!(memo.lookup(&keys, b""), None);
    }

    #[test]
    fn long_account_names_keep_quotas_of_their_own() {
        let (mut a, mut b) = ([0u8; ACCOUNT_MAX], [0u8; ACCOUNT_MAX]);
        let long = |tail: &str| format!("{}{tail}", "x".repeat(50));
        let na = account_key_name(long("alice@example.org").as_bytes(), &mut a);
        let nb = account_key_name(long("bob@example.org").as_bytes(), &mut b);
        assert_eq!((na, nb), (ACCOUNT_MAX, ACCOUNT_MAX));
        assert_ne!(a, b, "same beginning, different accounts");
        assert_eq!(a[29], b'~');
        let n = account_key_name(b"acme", &mut a);
        assert_eq!(&a[..n], b"acme", "a short name is itself");
        let n = account_key_name(&[0x80; 60], &mut a);
        assert_eq!(n, ACCOUNT_MAX, "not UTF-8: still a name of its own, never empty");
    }

    #[test]
    fn the_enforced_limits_are_the_fallbacks_share() {
        assert_eq!(tier(5, Some(7)).enforced(1), (5, Some(7)));
        assert_eq!(tier(5, Some(7)).enforced(2), (2, Some(3)));
        assert_eq!(tier(5, None).enforced(10), (1, None), "never below one");
    }

    #[test]
    fn both_windows_refusing_give_the_longer_wait() {
        let t = tier(2, Some(2));
        let mut w: Windows = [Window::ZERO; 2];
        take(&mut w, 1_000, &t, false, 1);
        take(&mut w, 2_000, &t, false, 1);
        let r = take(&mut w, 3_000, &t, false, 1).refused.unwrap();
        assert_eq!(r.window, QuotaWindow::Daily, "{r:?}");
        assert!(r.retry_after_s > 3600, "{r:?}");
    }
}
