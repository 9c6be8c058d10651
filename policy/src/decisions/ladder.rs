//! The proportional ladder, live: who a request's client is (its key), what
//! its rung answers, and the signed session cookie that gives a browser an
//! identity without JavaScript. The module and `crawlward explain` call
//! these; the score itself is [`crate::classifier::score`] of a
//! [`crate::client_window::ClientWindow`].

use crate::classifier::Placement;
use crate::client_window::hash_bytes;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Whether the ladder acts on its rungs or only says what it would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Score, place and log every client; refuse nothing.
    #[default]
    Observe,
    Enforce,
}

/// What a challenge rung (L3 to L5) answers, since crawlward serves no challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// Let the request through with `$crawlward_rung` set, for the application to act on.
    Pass,
    /// The client's token bucket at the slow rate.
    Slow,
    /// 429 with Retry-After.
    Refuse,
}

impl Challenge {
    pub fn parse(s: &str) -> Option<Challenge> {
        match s {
            "pass" => Some(Challenge::Pass),
            "slow" => Some(Challenge::Slow),
            "refuse" => Some(Challenge::Refuse),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Challenge::Pass => "pass",
            Challenge::Slow => "slow",
            Challenge::Refuse => "refuse",
        }
    }
}

/// A token bucket's size and refill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub burst: f64,
    pub per_second: f64,
}

/// The ladder as nginx runs it: the classifier's `mode`, `bucket`, `slow`,
/// `challenges` and `cookie`.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    pub mode: Mode,
    /// L2's bucket per client: the classifier article's 60 and 1 a second.
    pub bucket: Rate,
    /// The tighter bucket of a challenge rung that says `slow`.
    pub slow: Rate,
    /// What L3, L4 and L5 answer.
    pub challenges: [Challenge; 3],
    /// Retry-After of a challenge rung that refuses, in seconds.
    pub retry_after: u32,
    /// The session cookie, unless the policy turns it off.
    pub cookie: Option<CookieSettings>,
    /// The application's own session cookie: the session signal, and the
    /// client key when crawlward's cookie is off.
    pub session_cookie: Option<String>,
    /// A routed (authentication-shaped) client's bucket, per network (/24, /48).
    pub account_route: Rate,
    /// Every tracked request's network (/24, /48) bucket: the coarse abuse
    /// backstop the classifier article keeps beside the per-client key, for
    /// clients that make a new key every request.
    pub backstop: Rate,
    /// The ladder zone's size (`crawlward_ladder zone=crawlward_ladder:SIZE`).
    pub zone_size: String,
    /// The request header that carries the rung to the application, unless the policy says `off`.
    pub rung_header: Option<String>,
}

/// The request header that carries the rung to the application, by default.
pub const RUNG_HEADER: &str = "Crawlward-Rung";

/// `X-` names that proxies, frameworks and crawlward give a meaning of their
/// own (lower case): not a name for the rung.
const X_HEADERS_READ_ELSEWHERE: &[&str] = &[
    "x-real-ip",
    "x-client-ip",
    "x-requested-with",
    "x-csrf-token",
    "x-xsrf-token",
    "x-http-method",
    "x-http-method-override",
    "x-method-override",
    "x-original-url",
    "x-rewrite-url",
    "x-api-key",
    "x-account",
];

/// Whether `name` may carry the rung: `Crawlward-` or `X-` and then letters,
/// digits and `-` (nginx drops a client's header with `_` unless
/// `underscores_in_headers` is on), at most 64 bytes, and not a name that
/// proxies or frameworks read (`X-Forwarded-*`, `X-Real-IP`, `X-CSRF-Token`...).
/// None when it may, or why not.
pub fn rung_header_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Some(format!("invalid header name \"{name}\": letters, digits and - only, at most 64 bytes, or off"));
    }
    let lower = name.to_ascii_lowercase();
    let own = lower.strip_prefix("crawlward-").is_some_and(|rest| !rest.is_empty() && rest != "ignored")
        || lower
            .strip_prefix("x-")
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with("forwarded-") && !X_HEADERS_READ_ELSEWHERE.contains(&lower.as_str()));
    (!own).then(|| {
        format!("\"{name}\" is not a name of crawlward's own: Crawlward-... or X-..., and not one that proxies or frameworks read (X-Forwarded-*, X-Real-IP, X-CSRF-Token, Crawlward-Ignored); e.g. {RUNG_HEADER}")
    })
}

/// Whether `path` may name the cookie's key file: absolute (nginx reads it
/// from its master's working directory, `/` under systemd, where `check` and
/// `init` would read a relative one from theirs), and a word nginx's
/// configuration takes as it is. None when it may, or why not.
pub fn key_file_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some(format!(
            "invalid key_file \"{path}\": an absolute path, e.g. /etc/crawlward/cookie.key (nginx would read a relative one from its own working directory, not this one)"
        ));
    }
    (path.contains(['"', '\'', ';', '{', '}', '\\', '$']) || path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()))
        .then(|| format!("invalid key_file \"{path}\": a path without spaces, quotes, ;, \\, $ or braces"))
}

impl Default for Live {
    fn default() -> Live {
        Live {
            mode: Mode::Observe,
            bucket: Rate { burst: 60.0, per_second: 1.0 },
            slow: Rate { burst: 10.0, per_second: 0.1 },
            challenges: [Challenge::Pass, Challenge::Slow, Challenge::Refuse],
            retry_after: 60,
            cookie: Some(CookieSettings::default()),
            session_cookie: None,
            account_route: Rate { burst: 5.0, per_second: 10.0 / 60.0 },
            backstop: Rate { burst: 600.0, per_second: 20.0 },
            zone_size: "10m".into(),
            rung_header: Some(RUNG_HEADER.into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CookieSettings {
    pub name: String,
    /// Seconds a cookie is valid after it is issued.
    pub lifetime: u64,
    /// The file of HMAC keys: the first signs, every one verifies.
    pub key_file: String,
    /// Whether the site is HTTPS (the cookie is then `Secure`).
    pub secure: bool,
}

impl Default for CookieSettings {
    fn default() -> CookieSettings {
        CookieSettings { name: "crawlward".into(), lifetime: 30 * 86_400, key_file: "/etc/crawlward/cookie.key".into(), secure: true }
    }
}

/// A client's L2 token bucket: its level and when it was last filled (ms).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bucket {
    pub level: f64,
    pub at_ms: i64,
}

impl Bucket {
    /// Take a token from a bucket of `burst` tokens refilled at `per_second`,
    /// at `now_ms`: Ok, or Err with the seconds until a token is there. A
    /// new bucket (never filled) starts full.
    pub fn take(&mut self, burst: f64, per_second: f64, now_ms: i64) -> Result<(), u32> {
        let level = if self.at_ms == 0 { burst } else { (self.level + (now_ms - self.at_ms).max(0) as f64 * per_second / 1000.0).min(burst) };
        self.at_ms = now_ms.max(1);
        if level >= 1.0 {
            self.level = level - 1.0;
            Ok(())
        } else {
            self.level = level;
            let wait = if per_second > 0.0 { ((1.0 - level) / per_second).ceil() } else { 3600.0 };
            Err(wait.clamp(1.0, 86_400.0) as u32)
        }
    }

    /// What [`Self::take`] would answer at `now_ms`, without taking the token.
    pub fn room(&self, burst: f64, per_second: f64, now_ms: i64) -> Result<(), u32> {
        let mut copy = *self;
        copy.take(burst, per_second, now_ms)
    }
}

/// What a request's rung answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Pass,
    /// The rung's bucket is empty (L2, or a challenge rung at the slow rate): 429.
    Slowed {
        retry_after: u32,
    },
    /// A challenge rung that refuses: 429.
    Refused {
        retry_after: u32,
    },
    /// The client's network is past its backstop bucket: 429.
    Backstop {
        retry_after: u32,
    },
    /// L6: 403.
    Blocked,
}

impl Answer {
    /// The status nginx answers with, None to let the request through.
    pub fn status(self) -> Option<u16> {
        match self {
            Answer::Pass => None,
            Answer::Slowed { .. } | Answer::Refused { .. } | Answer::Backstop { .. } => Some(429),
            Answer::Blocked => Some(403),
        }
    }

    pub fn retry_after(self) -> Option<u32> {
        match self {
            Answer::Slowed { retry_after } | Answer::Refused { retry_after } | Answer::Backstop { retry_after } => Some(retry_after),
            _ => None,
        }
    }
}

/// What a client's place answers at `now_ms`, taking from its bucket where the
/// rung has one. A routed client passes here: the rendered account-route
/// limit (per network) is what holds it. In observe mode the caller lets
/// every request through and counts what this says it would have done.
pub fn answer(placement: Placement, live: &Live, bucket: &mut Bucket, now_ms: i64) -> Answer {
    let take = |bucket: &mut Bucket, r: Rate| match bucket.take(r.burst, r.per_second, now_ms) {
        Ok(()) => Answer::Pass,
        Err(retry_after) => Answer::Slowed { retry_after },
    };
    match placement {
        Placement::Routed | Placement::Rung(0 | 1) => Answer::Pass,
        Placement::Rung(2) => take(bucket, live.bucket),
        Placement::Rung(r @ 3..=5) => match live.challenges[r - 3] {
            Challenge::Pass => Answer::Pass,
            Challenge::Slow => take(bucket, live.slow),
            Challenge::Refuse => Answer::Refused { retry_after: live.retry_after },
        },
        Placement::Rung(_) => Answer::Blocked,
    }
}

/// The rung's name for `$crawlward_rung` and the log: `L0` to `L6`, or `routed`.
pub fn rung_name(placement: Placement) -> &'static str {
    match placement {
        Placement::Routed => "routed",
        Placement::Rung(i) => ["L0", "L1", "L2", "L3", "L4", "L5", "L6"].get(i).copied().unwrap_or("L6"),
    }
}

/// The client key of a request without a valid session: a keyed hash of
/// (address, User-Agent, Accept-Language), as the classifier article says
/// to key a client "when you do not" have a session.
pub fn triple_key(seed: u64, address: &[u8; 16], user_agent: &[u8], accept_language: &[u8]) -> u64 {
    let h = hash_bytes(seed, address);
    let h = hash_bytes(h, user_agent);
    hash_bytes(h ^ 0x7472_6970_6c65, accept_language).max(1)
}

/// The client key of the application's own session cookie (hashed: a value
/// the client chose only makes a new client).
pub fn session_key(seed: u64, value: &[u8]) -> u64 {
    hash_bytes(seed ^ 0x0073_6573_7369_6f6e, value).max(1)
}

/// The key of an address's network (its /24 or /48, `bits` long), for the
/// backstop: hashed from the network and its length under a seed of its
/// own, mixed from the zone's secret seed. A seed that differed from the
/// session keys' by a constant alone would let a session value whose first
/// word is the network's, XORed with that constant moved as the hash moves
/// it, hash to the network's key whatever the secret; the mixed seed's
/// difference depends on the secret, which no client knows.
pub fn network_key(seed: u64, network: &[u8; 16], bits: u8) -> u64 {
    let mut input = [0u8; 17];
    input[..16].copy_from_slice(network);
    input[16] = bits;
    hash_bytes(crate::client_window::mix(seed ^ 0x6e65_7477_6f72_6b00), &input).max(1)
}

/// The signed session cookie: `<payload>.<mac>`, both base64url, where the
/// payload is a version byte, a random client number (8 bytes) and the
/// time it was issued (8 bytes, seconds since the epoch), and the mac is
/// HMAC-SHA256 of the payload, cut to 16 bytes.
pub struct CookieKeys {
    keys: Vec<ring::hmac::Key>,
}

const COOKIE_VERSION: u8 = 1;
const MAC_LEN: usize = 16;

impl CookieKeys {
    /// Keys from a key file's text: one per line (blank lines and `#`
    /// comments skipped), each at least 32 bytes; the first signs.
    pub fn parse(text: &str) -> Result<CookieKeys, String> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.len() < 32 {
                return Err(format!("line {}: a key of {} bytes; a key has at least 32 (e.g. head -c 32 /dev/urandom | base64)", n + 1, line.len()));
            }
            keys.push(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, line.as_bytes()));
        }
        if keys.is_empty() {
            return Err("no key: a key file has one key a line, the first signs (e.g. head -c 32 /dev/urandom | base64)".into());
        }
        Ok(CookieKeys { keys })
    }

    /// A new key file's text: a comment, then one key of 32 random bytes
    /// from the system's generator, base64 (44 characters).
    pub fn new_key_file() -> Option<String> {
        use base64::Engine;
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).ok()?;
        Some(format!(
            "# the ladder's session cookie keys (crawlward_ladder): one a line, the first signs, every one verifies.\n\
             # To rotate, put a new key first and keep this one below it for the cookie lifetime.\n{}\n",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ))
    }

    /// A cookie value for client `id`, issued at `now_s`, in a fixed buffer:
    /// the module signs one for every new client.
    pub fn issue_into(&self, id: u64, now_s: u64) -> [u8; COOKIE_LEN] {
        let mut payload = [0u8; 17];
        payload[0] = COOKIE_VERSION;
        payload[1..9].copy_from_slice(&id.to_le_bytes());
        payload[9..17].copy_from_slice(&now_s.to_le_bytes());
        let tag = ring::hmac::sign(&self.keys[0], &payload);
        // 17 bytes make 23 characters, a dot, 16 bytes make 22: the sizes are fixed
        let mut out = [b'.'; COOKIE_LEN];
        let (head, tail) = out.split_at_mut(23);
        let encoded = URL_SAFE_NO_PAD.encode_slice(payload, head).is_ok() && URL_SAFE_NO_PAD.encode_slice(&tag.as_ref()[..MAC_LEN], &mut tail[1..]).is_ok();
        debug_assert!(encoded);
        out
    }

    /// The client number of a cookie value that one of the keys signed and
    /// that is no older than `lifetime_s` (and not from the future, past a
    /// minute's skew); None for anything else.
    pub fn verify(&self, value: &[u8], now_s: u64, lifetime_s: u64) -> Option<u64> {
        let (id, issued) = self.signed(value)?;
        fresh(issued, now_s, lifetime_s).then_some(id)
    }

    /// The client number and issue time of a cookie value one of the keys signed.
    pub fn signed(&self, value: &[u8]) -> Option<(u64, u64)> {
        if value.len() > COOKIE_MAX {
            return None;
        }
        let dot = value.iter().position(|b| *b == b'.')?;
        let mut payload = [0u8; 18];
        let mut mac = [0u8; 18];
        let n = URL_SAFE_NO_PAD.decode_slice(&value[..dot], &mut payload).ok()?;
        let m = URL_SAFE_NO_PAD.decode_slice(&value[dot + 1..], &mut mac).ok()?;
        if n != 17 || m != MAC_LEN || payload[0] != COOKIE_VERSION {
            return None;
        }
        let signed = self.keys.iter().any(|k| {
            let tag = ring::hmac::sign(k, &payload[..17]);
            constant_time_eq(&tag.as_ref()[..MAC_LEN], &mac[..MAC_LEN])
        });
        if !signed {
            return None;
        }
        let id = u64::from_le_bytes(payload[1..9].try_into().ok()?);
        let issued = u64::from_le_bytes(payload[9..17].try_into().ok()?);
        Some((id.max(1), issued))
    }
}

/// The longest cookie value read: a signed one is [`COOKIE_LEN`] bytes.
pub const COOKIE_MAX: usize = 64;
/// A signed cookie value's length.
pub const COOKIE_LEN: usize = 46;

/// Whether a cookie issued at `issued_s` is still valid at `now_s`: no older
/// than its lifetime, and not from the future past a minute's skew.
pub fn fresh(issued_s: u64, now_s: u64, lifetime_s: u64) -> bool {
    issued_s <= now_s + 60 && now_s.saturating_sub(issued_s) <= lifetime_s
}

/// Whether `a` and `b` are equal, in a time that does not depend on where
/// they differ: a MAC, or a cookie value compared with one a worker verified.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // black_box hides each step's value from the optimiser, so that it cannot end the fold
    // early once the accumulator is non-zero (it may, for a plain fold: nothing in Rust
    // promises the time of one)
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| std::hint::black_box(acc | (x ^ y))) == 0
}

/// `Set-Cookie`'s value for a new cookie, in pieces to join, without
/// allocating (`max_age` is room for the number).
pub fn set_cookie_parts<'a>(c: &'a CookieSettings, value: &'a [u8], max_age: &'a mut [u8; 20]) -> [&'a [u8]; 7] {
    let mut n = c.lifetime;
    let mut at = max_age.len();
    loop {
        at -= 1;
        max_age[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    [c.name.as_bytes(), b"=", value, b"; Path=/; Max-Age=", &max_age[at..], b"; HttpOnly; SameSite=Lax", if c.secure { b"; Secure" } else { b"" }]
}

/// The value of cookie `name` in a `Cookie` header's bytes, if any.
pub fn cookie_value<'a>(header: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    // pair by pair: `name`, spaces, `=`, the value (a name has no `=` and no space)
    let mut rest = header;
    loop {
        let end = memchr::memchr(b';', rest).unwrap_or(rest.len());
        let pair = rest[..end].trim_ascii_start();
        if let Some(after) = pair.strip_prefix(name) {
            if let Some(value) = after.trim_ascii_start().strip_prefix(b"=") {
                return Some(value.trim_ascii());
            }
        }
        rest = rest.get(end + 1..)?;
    }
}

/// `x` (at least 0) with two decimals, rounded half up (`0.59`), into `out`; its length.
pub fn two_decimals(x: f64, out: &mut [u8]) -> usize {
    write_cents(cents(x), out)
}

/// `x` (at least 0) in hundredths, rounded half up.
fn cents(x: f64) -> u64 {
    (x.max(0.0) * 100.0 + 0.5) as u64
}

/// Hundredths as `0.59` into `out`; its length.
fn write_cents(cents: u64, out: &mut [u8]) -> usize {
    // a score and its contributions are below 10: one digit before the point
    if cents < 1000 {
        let c = cents as u16;
        out[..4].copy_from_slice(&[b'0' + (c / 100) as u8, b'.', b'0' + (c / 10 % 10) as u8, b'0' + (c % 10) as u8]);
        return 4;
    }
    let text = format!("{}.{:02}", cents / 100, cents % 100);
    out[..text.len()].copy_from_slice(text.as_bytes());
    text.len()
}

/// `$crawlward_contributions`: each sub-score times its weight, `name=0.00`
/// comma-separated, the terms at 0.00 left out (`none` when all are), into
/// `out` (128 bytes is room); its length. Every byte of a log line costs the
/// access log's escape scan, and most clients score 0.00 on most signals.
pub fn contributions_into(c: &[f64; 6], out: &mut [u8; 128]) -> usize {
    let mut len = 0;
    for (name, v) in crate::classifier::SUBSCORES.iter().zip(c) {
        let cents = cents(*v);
        if cents == 0 {
            continue;
        }
        if len > 0 {
            out[len] = b',';
            len += 1;
        }
        out[len..len + name.len()].copy_from_slice(name.as_bytes());
        len += name.len();
        out[len] = b'=';
        len += 1;
        len += write_cents(cents, &mut out[len..]);
    }
    if len == 0 {
        out[..4].copy_from_slice(b"none");
        len = 4;
    }
    len
}

/// [`contributions_into`] as a string.
pub fn contributions(c: &[f64; 6]) -> String {
    let mut out = [0u8; 128];
    let n = contributions_into(c, &mut out);
    String::from_utf8_lossy(&out[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_answers_as_take_would_without_taking() {
        let mut b = Bucket::default();
        assert_eq!(b.room(2.0, 1.0, 1_000), Ok(()));
        assert_eq!(b, Bucket::default(), "room takes nothing");
        b.take(2.0, 1.0, 1_000).unwrap();
        b.take(2.0, 1.0, 1_000).unwrap();
        assert_eq!(b.room(2.0, 1.0, 1_000), Err(1));
        assert_eq!(b.room(2.0, 1.0, 2_000), Ok(()), "a second later, a token");
        assert_eq!(b.room(2.0, 1.0, 1_000), b.clone().take(2.0, 1.0, 1_000));
    }

    #[test]
    fn a_network_key_is_no_session_value_s_key() {
        let network = [10, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let key = network_key(42, &network, 24);
        // the network's own bytes, with or without its length, as a session value
        let mut with_bits = network.to_vec();
        with_bits.push(24);
        for seed in [42, 42 ^ 24] {
            assert_ne!(session_key(seed, &network), key);
            assert_ne!(session_key(seed, &with_bits), key);
        }
        // the value built to cancel a constant difference of seeds in the first word
        let mut word = [0u8; 8];
        word.copy_from_slice(&network[..8]);
        let first = u64::from_le_bytes(word) ^ 0x0073_6573_7369_6f6e_u64 ^ 0x6e65_7477_6f72_6b00;
        let mut built = first.to_le_bytes().to_vec();
        built.extend_from_slice(&network[8..]);
        built.push(24);
        for seed in [42, 7, u64::MAX] {
            assert_ne!(session_key(seed, &built), network_key(seed, &network, 24), "seed {seed}");
        }
        // the length is part of the key, and the seed
        assert_ne!(network_key(42, &network, 48), key);
        assert_ne!(network_key(43, &network, 24), key);
        assert_eq!(network_key(42, &network, 24), key);
    }

    #[test]
    fn values_compare_whole() {
        assert!(constant_time_eq(b"AQID.abc", b"AQID.abc"));
        assert!(constant_time_eq(b"", b""));
        // a difference anywhere, or a length, is a difference
        assert!(!constant_time_eq(b"AQID.abc", b"BQID.abc"));
        assert!(!constant_time_eq(b"AQID.abc", b"AQID.abd"));
        assert!(!constant_time_eq(b"AQID.abc", b"AQID.ab"));
    }

    /// A cookie value as text.
    fn issue(keys: &CookieKeys, id: u64, now_s: u64) -> String {
        String::from_utf8_lossy(&keys.issue_into(id, now_s)).into_owned()
    }

    fn set_cookie(c: &CookieSettings, value: &str) -> String {
        let mut max_age = [0u8; 20];
        String::from_utf8_lossy(&set_cookie_parts(c, value.as_bytes(), &mut max_age).concat()).into_owned()
    }

    const KEYS: &str = "# crawlward cookie keys\nnew-key-0123456789abcdef0123456789abcdef\nold-key-0123456789abcdef0123456789abcdef\n";

    #[test]
    fn a_cookie_verifies_under_either_key_and_nothing_else_does() {
        let keys = CookieKeys::parse(KEYS).unwrap();
        let v = issue(&keys, 42, 1_000_000);
        assert_eq!(keys.verify(v.as_bytes(), 1_000_100, 86_400), Some(42));
        // signed by the old key (now second): still verifies
        let old = issue(&CookieKeys::parse("old-key-0123456789abcdef0123456789abcdef").unwrap(), 7, 1_000_000);
        assert_eq!(keys.verify(old.as_bytes(), 1_000_100, 86_400), Some(7));
        // another site's key, a forged id, an expired or future cookie, junk
        let other = issue(&CookieKeys::parse("another-site-0123456789abcdef0123456789").unwrap(), 42, 1_000_000);
        assert_eq!(keys.verify(other.as_bytes(), 1_000_100, 86_400), None);
        let mut forged = v.clone().into_bytes();
        forged[3] = if forged[3] == b'A' { b'B' } else { b'A' };
        assert_eq!(keys.verify(&forged, 1_000_100, 86_400), None);
        assert_eq!(keys.verify(v.as_bytes(), 1_000_000 + 86_401, 86_400), None);
        assert_eq!(keys.verify(v.as_bytes(), 999_000, 86_400), None);
        for junk in [&b""[..], b".", b"abc", b"AAAA.BBBB", &[b'a'; 200]] {
            assert_eq!(keys.verify(junk, 1_000_100, 86_400), None);
        }
    }

    #[test]
    fn short_or_missing_keys_are_refused() {
        assert!(CookieKeys::parse("short").err().unwrap().contains("at least 32"));
        let (a, b) = (CookieKeys::new_key_file().unwrap(), CookieKeys::new_key_file().unwrap());
        assert_ne!(a, b, "random keys");
        assert_eq!(CookieKeys::parse(&a).map(|k| k.keys.len()), Ok(1), "a new key file reads as one key: {a}");
        assert!(CookieKeys::parse("# only a comment\n\n").err().unwrap().contains("no key"));
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = b"a=1; crawlward=xyz.abc ;other=2";
        assert_eq!(cookie_value(h, b"crawlward"), Some(&b"xyz.abc"[..]));
        assert_eq!(cookie_value(h, b"crawl"), None);
        assert_eq!(cookie_value(b"ab=1; a = 2", b"a"), Some(&b"2"[..]), "a longer name is another cookie");
        assert_eq!(cookie_value(b"a=1;b=x=y", b"b"), Some(&b"x=y"[..]));
        assert_eq!(cookie_value(b"", b"a"), None);
        assert_eq!(cookie_value(b"a", b"a"), None, "no value");
        let c = CookieSettings { name: "cw".into(), lifetime: 60, key_file: String::new(), secure: false };
        assert_eq!(set_cookie(&c, "v"), "cw=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax");
        let c = CookieSettings { lifetime: 2_592_000, secure: true, ..c };
        assert_eq!(set_cookie(&c, "v"), "cw=v; Path=/; Max-Age=2592000; HttpOnly; SameSite=Lax; Secure");
        assert_eq!(set_cookie(&CookieSettings { lifetime: 0, ..c }, "v"), "cw=v; Path=/; Max-Age=0; HttpOnly; SameSite=Lax; Secure");
    }

    #[test]
    fn each_rung_answers_as_the_policy_says() {
        let live = Live::default();
        let mut b = Bucket::default();
        assert_eq!(answer(Placement::Rung(1), &live, &mut b, 1000), Answer::Pass);
        assert_eq!(answer(Placement::Routed, &live, &mut b, 1000), Answer::Pass);
        for _ in 0..60 {
            assert_eq!(answer(Placement::Rung(2), &live, &mut b, 1000), Answer::Pass);
        }
        assert_eq!(answer(Placement::Rung(2), &live, &mut b, 1000), Answer::Slowed { retry_after: 1 });
        assert_eq!(answer(Placement::Rung(3), &live, &mut Bucket::default(), 1000), Answer::Pass);
        assert_eq!(answer(Placement::Rung(5), &live, &mut b, 1000), Answer::Refused { retry_after: 60 });
        assert_eq!(answer(Placement::Rung(6), &live, &mut b, 1000).status(), Some(403));
        assert_eq!(rung_name(Placement::Rung(4)), "L4");
    }

    #[test]
    fn the_bucket_gives_its_burst_then_its_rate() {
        let mut b = Bucket::default();
        for _ in 0..60 {
            assert_eq!(b.take(60.0, 1.0, 1_000), Ok(()));
        }
        assert_eq!(b.take(60.0, 1.0, 1_000), Err(1));
        assert_eq!(b.take(60.0, 1.0, 2_000), Ok(()), "one token a second");
        assert_eq!(b.take(60.0, 0.5, 2_500), Err(2));
    }

    #[test]
    fn two_decimals_as_the_log_writes_them() {
        let text = |x: f64| {
            let mut b = [0u8; 24];
            let n = two_decimals(x, &mut b);
            String::from_utf8(b[..n].to_vec()).unwrap()
        };
        assert_eq!(text(0.0), "0.00");
        assert_eq!(text(0.5861), "0.59");
        assert_eq!(text(0.999), "1.00");
        assert_eq!(text(12.3456), "12.35");
        assert_eq!(text(-0.0), "0.00");
        // past 2.55 (weights may add up to 6): hundredths do not fit a byte
        assert_eq!(text(2.56), "2.56");
        assert_eq!(text(3.0), "3.00");
        assert_eq!(text(9.99), "9.99");
        for cents in 0..1000u32 {
            let x = f64::from(cents) / 100.0;
            assert_eq!(text(x), format!("{x:.2}"), "{cents} hundredths");
        }
    }

    #[test]
    fn contributions_name_each_term_above_zero() {
        assert_eq!(contributions(&[0.28, 0.0, 0.031, 0.1316, 0.07, 0.1]), "rate=0.28,concentration=0.03,ua-spread=0.13,session=0.07,rules=0.10");
        assert_eq!(contributions(&[0.0, 0.004, 0.0, 0.0, 0.0, 0.1]), "rules=0.10");
        assert_eq!(contributions(&[0.0, 0.004, 0.0, 0.0, 0.0, 0.0]), "none");
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    fn load(classifier: &str, module: bool) -> Result<crate::Policy, String> {
        let yaml = format!(
            "site: {{canonical_url: https://example.org, upstream_workers: 8}}\nrobots: {{}}\n{}classifier:\n{classifier}",
            if module { "module: {}\n" } else { "" }
        );
        crate::load_str("p.yaml", &yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_ladder_runs_only_with_a_mode_and_the_module() {
        assert!(load("  window: 1h\n", true).unwrap().ladder.is_none(), "no mode: analyze only");
        assert!(load("  mode: observe\n", false).unwrap().ladder.is_none(), "no module: nothing in nginx");
        let p = load("  mode: enforce\n  challenges: {L4: refuse}\n  bucket: {burst: 5, rate: 6r/m}\n", true).unwrap();
        let (live, _) = p.ladder.unwrap();
        assert_eq!(live.mode, Mode::Enforce);
        assert_eq!(live.challenges, [Challenge::Pass, Challenge::Refuse, Challenge::Refuse]);
        assert_eq!(live.bucket, Rate { burst: 5.0, per_second: 0.1 });
        assert!(live.cookie.as_ref().is_some_and(|c| c.secure), "an https site's cookie is Secure");
        // and one only this host can set: no sibling subdomain can give its visitors a cookie
        assert_eq!(live.cookie.as_ref().map(|c| c.name.as_str()), Some("__Host-crawlward"));
        let named = |cookie: &str, site: &str| {
            let yaml =
                format!("site: {{canonical_url: {site}, upstream_workers: 8}}\nrobots: {{}}\nmodule: {{}}\nclassifier:\n  mode: observe\n  cookie: {cookie}\n");
            crate::load_str("p.yaml", &yaml).unwrap().ladder.unwrap().0.cookie.unwrap().name
        };
        assert_eq!(named("{name: cw}", "https://example.org"), "__Host-cw");
        assert_eq!(named("{name: __Host-cw}", "https://example.org"), "__Host-cw", "prefixed once");
        assert_eq!(named("{name: cw}", "http://example.org"), "cw", "a browser takes no __Host- cookie without https");
        // a sibling sets a __Secure- cookie for the whole domain; older browsers read __host- as no prefix
        for name in ["__Secure-cw", "__secure-cw", "__host-cw", "__HOST-cw"] {
            let yaml = format!("site: {{canonical_url: https://example.org, upstream_workers: 8}}\nrobots: {{}}\nmodule: {{}}\nclassifier:\n  mode: observe\n  cookie: {{name: {name}}}\n");
            let e = crate::load_str("p.yaml", &yaml).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(&format!("invalid cookie name \"{name}\": on an https site the prefix is __Host-, spelled so")), "{name}: {e}");
        }
        let http = "site: {canonical_url: http://example.org, upstream_workers: 8}\nrobots: {}\nmodule: {}\nclassifier:\n  mode: observe\n  cookie: {name: __HOST-cw}\n";
        let e = crate::load_str("p.yaml", http).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("invalid cookie name \"__HOST-cw\": a browser takes a __Host- or __Secure- cookie only over https"), "{e}");
        assert!(load("  mode: observe\n  cookie: {enabled: false}\n", true).unwrap().ladder.unwrap().0.cookie.is_none());
        assert_eq!(live.rung_header.as_deref(), Some("Crawlward-Rung"), "the application hears the rung by default");
        assert_eq!(load("  mode: enforce\n  rung_header: X-Rung\n", true).unwrap().ladder.unwrap().0.rung_header.as_deref(), Some("X-Rung"));
        assert!(load("  mode: enforce\n  rung_header: off\n", true).unwrap().ladder.unwrap().0.rung_header.is_none());
    }

    #[test]
    fn bad_ladder_settings_say_what_is_wrong() {
        for (yaml, message) in [
            ("  mode: on\n", "invalid mode \"on\": expected observe, enforce or off"),
            ("  mode: enforce\n  challenges: {L3: block}\n", "invalid answer \"block\": expected pass, slow or refuse"),
            ("  mode: enforce\n  bucket: {burst: 0}\n", "burst must be from 1 to 100000, not 0"),
            ("  mode: enforce\n  backstop: {rate: fast}\n", "invalid rate \"fast\": expected e.g. 1r/s or 6r/m, at least 1"),
            ("  mode: enforce\n  cookie: {lifetime: 0}\n", "invalid lifetime \"0\": expected a time from 1m to 400d, e.g. 30d"),
            ("  mode: enforce\n  cookie: {name: a b}\n", "invalid cookie name \"a b\": letters, digits, _ and - only"),
            ("  mode: enforce\n  retry_after: 0\n", "retry_after must be from 1 to 86400 seconds, not 0"),
            ("  mode: enforce\n  rung_header: X_Rung\n", "invalid header name \"X_Rung\": letters, digits and - only"),
            ("  mode: enforce\n  rung_header: Cookie\n", "\"Cookie\" is not a name of crawlward's own: Crawlward-... or X-..."),
            ("  mode: enforce\n  rung_header: X-Forwarded-For\n", "\"X-Forwarded-For\" is not a name of crawlward's own"),
            ("  mode: enforce\n  rung_header: x-real-ip\n", "\"x-real-ip\" is not a name of crawlward's own"),
            ("  mode: enforce\n  rung_header: Crawlward-Ignored\n", "\"Crawlward-Ignored\" is not a name of crawlward's own"),
            ("  mode: enforce\n  rung_header: Origin\n", "\"Origin\" is not a name of crawlward's own"),
            ("  mode: enforce\n  cookie: {key_file: cookie.key}\n", "invalid key_file \"cookie.key\": an absolute path, e.g. /etc/crawlward/cookie.key"),
            ("  mode: enforce\n  cookie: {key_file: '/etc/my keys/c'}\n", "invalid key_file \"/etc/my keys/c\": a path without spaces"),
        ] {
            let e = load(yaml, true).err().unwrap_or_default();
            assert!(e.contains(message), "{yaml}: {e}");
        }
    }

    /// t/module/ladder.t's hammering client: one browser, a new path each request, at
    /// L2 from its first; a few distinct paths can count as fewer in the window's sketch
    /// (by the zone's random seed), which may hold it at L1 for a request or three, never more.
    #[test]
    fn a_hammering_client_is_refused_after_its_burst_whatever_the_seed() {
        use crate::{client_window::ClientWindow, signals};
        let p = load("  mode: enforce\n  window: 1m\n  bucket: {burst: 5, rate: 1r/m}\n  challenges: {L3: refuse, L4: refuse, L5: refuse}\n", true).unwrap();
        let (live, written) = p.ladder.clone().unwrap();
        let (settings, _) = crate::ladder_settings(&written, true).unwrap();
        let read = signals::LadderSignals::new(&signals::ladder_spec(&p, written));
        let ua = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        let (mut most_l1, mut dipped) = (0, 0);
        for s in 0..1000u64 {
            let seed = crate::client_window::mix(s + 1);
            let start = 1_700_000_000_000 + (s as i64 % 60) * 1000;
            let (mut window, mut bucket) = (ClientWindow::new(start), Bucket { level: 0.0, at_ms: 0 });
            let (mut answered, mut on_l1) = (0, 0);
            for i in 1..=50 {
                let now_ms = start + i * 20;
                let path = format!("/greedy/{i}");
                let facts = signals::RequestFacts {
                    now_ms,
                    path: path.as_bytes(),
                    query: b"",
                    target: path.as_bytes(),
                    user_agent: signals::ua_traits(seed, ua),
                    agent: None,
                    label: None,
                    session: None,
                    address: &[0; 16],
                };
                window.count(&read.seen(seed, &facts, &settings), 60_000);
                let placement = crate::classifier::score(&window.observed(now_ms, 60_000, read.per_minute), &settings).placement;
                assert!(matches!(placement, Placement::Rung(1..=4)), "seed {s}, request {i}: {placement:?}");
                on_l1 += usize::from(placement == Placement::Rung(1));
                answered += usize::from(answer(placement, &live, &mut bucket, now_ms) == Answer::Pass);
            }
            assert_eq!(answered, 5 + on_l1, "seed {s}: L2's burst and the requests at L1");
            most_l1 = most_l1.max(on_l1);
            dipped += usize::from(on_l1 > 0);
        }
        assert!(most_l1 <= 3, "at most three requests at L1, not {most_l1}");
        assert!(dipped <= 10, "held at L1 for a request in {dipped} seeds of 1000");
    }

    #[test]
    fn the_module_reads_the_same_settings_from_the_section_as_written() {
        let p = load("  mode: enforce\n  window: 1m\n  rate: {weight: 0.5}\n", true).unwrap();
        let (live, written) = p.ladder.clone().unwrap();
        let (settings, live_again) = crate::ladder_settings(&written, true).unwrap();
        assert_eq!(live_again, live);
        assert_eq!(settings, p.classifier);
        let mut off = written;
        off.mode = None;
        assert!(crate::ladder_settings(&off, true).is_err());
    }
}
