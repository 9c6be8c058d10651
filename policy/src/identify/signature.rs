//! Web Bot Auth: a request signed with HTTP Message Signatures (RFC 9421)
//! as the IETF webbotauth working group profiles them
//! (draft-ietf-webbotauth-httpsig-protocol), checked against the keys of
//! the signer's directory (`Signature-Agent`). Agents that act for a person
//! send an ordinary browser User-Agent, so their signature is the only
//! proof of who they are.
//!
//! What is checked, in order: a `Signature-Input` member tagged
//! `web-bot-auth` (none: the request is not signed for this profile); its
//! `created`, `expires` (a lifetime of at most a day) and `keyid`, `alg`
//! absent or Ed25519; the time window, with a skew; `@authority` (or
//! `@target-uri`) and `signature-agent` covered; the agent's directory
//! from `Signature-Agent`, in its dictionary form (the covered component's
//! `key` names the member) or the older bare string; the key of
//! (directory, key id); the Ed25519 signature over the signature base.
//!
//! The structured fields are parsed and serialized by the `sfv` crate
//! (RFC 8941 and 9651, the implementation Firefox ships); Ed25519 is
//! `ring`'s, already in the tree for the ladder's cookie. Nothing here
//! blocks or fetches: the keys are loaded beforehand.

use sfv::{BareItem, Dictionary, Item, ListEntry, ListSerializer, Parser};
use std::collections::HashMap;

/// The longest lifetime (`expires` - `created`) the profile allows: a day.
pub const MAX_LIFETIME_S: i64 = 86_400;
/// The default and the largest clock skew allowed either side of the window.
pub const DEFAULT_SKEW_S: i64 = 60;
pub const MAX_SKEW_S: i64 = 300;
/// What a directory may hold: at most 64 KiB and 32 keys.
pub const DIRECTORY_MAX_BYTES: usize = 64 * 1024;
pub const DIRECTORY_MAX_KEYS: usize = 32;

/// What a signer is asked for when a request is refused for its signature
/// (RFC 9421 section 5.1, `Accept-Signature`): the webbotauth profile's
/// covered components and parameters, with a fresh nonce.
pub const ACCEPT_SIGNATURE: &str = "sig1=(\"@authority\" \"signature-agent\");created;expires;keyid;nonce;tag=\"web-bot-auth\"";

/// What the replay table says of a verified signature's nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Not seen before: recorded until the signature expires.
    First,
    /// Seen before, and the signature is still accepted: a replay.
    Replayed,
    /// No room to record it, or no nonce: neither first nor a replay.
    NotChecked,
}

impl Replay {
    pub fn as_str(self) -> &'static str {
        match self {
            Replay::First => "first",
            Replay::Replayed => "replayed",
            Replay::NotChecked => "not-checked",
        }
    }
}

/// Why a request is refused for its signature, before any other limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A verified signature whose nonce was seen before, within its
    /// lifetime: 429, as the webbotauth draft says.
    Replayed,
    /// A path the policy reserves for signed agents, without a verified
    /// signature: 403.
    Unsigned,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::Replayed => 429,
            Refusal::Unsigned => 403,
        }
    }

    /// For the error log: "refused with 429: ...".
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Replayed => "a replayed signature (its nonce was seen before)",
            Refusal::Unsigned => "a path for signed agents, without a verified signature",
        }
    }
}

/// The refusal a request's signature gets, if any: `exempt` for robots.txt
/// and the site's own key directory, which answer whatever the signature;
/// `required` when the path is one the policy reserves for signed agents.
pub fn refusal(exempt: bool, required: bool, outcome: Outcome, replay: Option<Replay>, named: bool) -> Option<Refusal> {
    if exempt {
        return None;
    }
    if outcome == Outcome::Verified && replay == Some(Replay::Replayed) {
        return Some(Refusal::Replayed);
    }
    // a directory taken from traffic verifies, but anyone can make one: it opens no path
    (required && !(outcome == Outcome::Verified && named)).then_some(Refusal::Unsigned)
}

/// What a request's signature says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No signature tagged `web-bot-auth`.
    None,
    /// Signed by a key of the agent's directory.
    Verified,
    /// Well formed, but no key of (directory, key id) is known.
    Unverified,
    /// A signature tagged `web-bot-auth` that does not hold: treated as a spoofed claim.
    Invalid,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::None => "none",
            Outcome::Verified => "verified",
            Outcome::Unverified => "unverified",
            Outcome::Invalid => "invalid",
        }
    }
}

/// The outcome, why (for the error log and the tests), and what the
/// signature names: the agent's directory, the key id, the nonce and when
/// the signature expires (for the replay table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub outcome: Outcome,
    pub why: &'static str,
    pub agent: Option<String>,
    pub keyid: Option<String>,
    pub nonce: Option<String>,
    pub expires: i64,
    /// An Ed25519 verification ran, and the signature did not hold.
    pub failed_verification: bool,
    /// The signature reached its verification, which was not run: its
    /// address's failures used up their allowance ([`FailedVerifications`]).
    pub not_checked: bool,
}

impl Checked {
    fn none(why: &'static str) -> Checked {
        Checked { outcome: Outcome::None, why, agent: None, keyid: None, nonce: None, expires: 0, failed_verification: false, not_checked: false }
    }
}

/// The request as the signature base reads it. Each field's value is
/// all its lines joined with ", " (RFC 9421 section 2.1); None when the
/// request has no such field.
pub struct Message<'a> {
    pub method: &'a str,
    /// `https` or `http`.
    pub scheme: &'a str,
    /// The host (lower case) and the port when it is not the scheme's default.
    pub authority: &'a str,
    /// The path as the request line sent it, and the query without its `?` (None: no `?`).
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub field: &'a dyn Fn(&str) -> Option<String>,
}

/// The check's settings: the clock skew allowed (at most [`MAX_SKEW_S`]),
/// and the longest lifetime, the profile's day (the drafts' own examples
/// are signed for a century: their test lifts it).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub skew_s: i64,
    pub max_lifetime_s: i64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { skew_s: DEFAULT_SKEW_S, max_lifetime_s: MAX_LIFETIME_S }
    }
}

/// Ed25519 public keys by (directory origin, key id). A key is found by its
/// RFC 7638 thumbprint and, where its directory gives one, by its `kid`.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    keys: HashMap<(String, String), [u8; 32]>,
    origins: Vec<String>,
    /// The directories taken from traffic (`module.signatures.fetch_seen`):
    /// their signatures verify, and never stand for a named signer.
    from_traffic: Vec<String>,
}

/// RFC 9421's Ed25519 test key (appendix B.1.4), which signs the published
/// examples: anyone can sign with it, so a key ring refuses it unless it is
/// built for a test suite.
pub const RFC_TEST_KEY_X: &str = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs";

impl KeyRing {
    /// Add the keys of a directory (`{"keys": [JWK, ...]}`, RFC 7517) at
    /// `origin`: each Ed25519 key (`kty` OKP, `crv` Ed25519, `alg` absent,
    /// `EdDSA` or `ed25519`), any other skipped. Err for a file that is not
    /// a directory, too large, or with too many keys; the number of keys added.
    pub fn add_directory(&mut self, origin: &str, json: &str, allow_test_keys: bool) -> Result<usize, String> {
        if json.len() > DIRECTORY_MAX_BYTES {
            return Err(format!("a directory of {} bytes: at most {DIRECTORY_MAX_BYTES}", json.len()));
        }
        let doc: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
        self.add_keys(origin, &doc, allow_test_keys)
    }

    /// The key file the module loads (`crawlward_signatures keys=FILE`):
    /// `{"format": 1, "directories": {"https://origin": DIRECTORY, ...}}`,
    /// each directory as its origin serves it. Err names the directory at fault.
    pub fn from_keys_file(text: &str, allow_test_keys: bool) -> Result<KeyRing, String> {
        let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if doc.get("format").and_then(|f| f.as_u64()) != Some(1) {
            return Err("not a key file of format 1".into());
        }
        let directories = doc.get("directories").and_then(|d| d.as_object()).ok_or("no \"directories\" object")?;
        let mut ring = KeyRing::default();
        for (origin, directory) in directories {
            ring.add_keys(origin, directory, allow_test_keys).map_err(|e| format!("directory \"{origin}\": {e}"))?;
            // two names of one origin (`https://A.example`, `https://a.example:443`) are one directory
            let origin = directory_origin(origin).unwrap_or_default();
            if !ring.origins.contains(&origin) {
                ring.origins.push(origin);
            }
        }
        ring.from_traffic =
            doc.get("from_traffic").and_then(|f| f.as_array()).into_iter().flatten().filter_map(|o| o.as_str().and_then(directory_origin)).collect();
        Ok(ring)
    }

    /// Whether directory `origin` is one the catalogue or the policy names,
    /// not one taken from traffic: only such a directory's signature stands
    /// for a signer (a path for signed agents, an agent's identity).
    pub fn named(&self, origin: &str) -> bool {
        !self.from_traffic.iter().any(|o| o == origin)
    }

    /// The directories whose keys the ring holds.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// The place of directory `origin` among [`KeyRing::origins`]; None for a directory the ring does not hold.
    pub fn directory(&self, origin: &[u8]) -> Option<usize> {
        self.origins.iter().position(|o| o.as_bytes() == origin)
    }

    fn add_keys(&mut self, origin: &str, doc: &serde_json::Value, allow_test_keys: bool) -> Result<usize, String> {
        let origin = directory_origin(origin).ok_or_else(|| format!("\"{origin}\" is not an https:// origin"))?;
        let keys = doc.get("keys").and_then(|k| k.as_array()).ok_or("no \"keys\" list")?;
        if keys.len() > DIRECTORY_MAX_KEYS {
            return Err(format!("{} keys: at most {DIRECTORY_MAX_KEYS}", keys.len()));
        }
        let mut added = 0;
        for jwk in keys {
            let text = |name: &str| jwk.get(name).and_then(|v| v.as_str());
            let ed25519 = text("kty") == Some("OKP") && text("crv") == Some("Ed25519") && matches!(text("alg"), None | Some("EdDSA" | "ed25519"));
            let Some(x) = text("x").filter(|_| ed25519) else { continue };
            if x == RFC_TEST_KEY_X && !allow_test_keys {
                continue;
            }
            let Some(key) = decode_b64url(x).and_then(|k| <[u8; 32]>::try_from(k).ok()) else { continue };
            self.keys.insert((origin.clone(), thumbprint(x)), key);
            if let Some(kid) = text("kid") {
                self.keys.insert((origin.clone(), kid.to_string()), key);
            }
            added += 1;
        }
        Ok(added)
    }

    pub fn get(&self, origin: &str, keyid: &str) -> Option<&[u8; 32]> {
        self.keys.get(&(origin.to_string(), keyid.to_string()))
    }
}

/// The RFC 7638 thumbprint of an Ed25519 JWK with public key `x`
/// (base64url): base64url of SHA-256 over its required members in order.
pub fn thumbprint(x: &str) -> String {
    let canonical = format!("{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{x}\"}}");
    let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, digest.as_ref())
}

fn decode_b64url(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

/// A directory's origin as keys are filed under it: `https://host[:port]`,
/// the host in lower case, no path but `/`, no user, query or fragment.
/// None for anything else (a directory is fetched over HTTPS only).
pub fn directory_origin(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']');
    if authority.is_empty() || !path.is_empty() || !authority.chars().all(plain) {
        return None;
    }
    let authority = authority.to_ascii_lowercase();
    Some(format!("https://{}", authority.strip_suffix(":443").unwrap_or(&authority)))
}

/// Whether a signature over `authority` (the request's, as `@authority`
/// reads it) was made for this site: its host, without the port, is one of
/// `hosts`, or `hosts` is empty (any host). A signature that verifies but was
/// made for another host is a replay of a request meant for another site.
pub fn for_this_site(authority: &str, hosts: &[String]) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    hosts.is_empty() || hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
}

/// Check the request's Web Bot Auth signature at `now_s` (seconds since the epoch).
pub fn check(m: &Message<'_>, keys: &KeyRing, now_s: i64, settings: Settings, hosts: &[String], may_verify: bool) -> Checked {
    let Some(input) = (m.field)("signature-input") else { return Checked::none("no Signature-Input") };
    let Ok(inputs) = Parser::new(&input).parse_dictionary::<Dictionary>() else { return invalid("Signature-Input is not a dictionary") };
    // the first member tagged for this profile; any other signature is another protocol's
    let tagged = inputs.iter().find_map(|(label, entry)| match entry {
        ListEntry::InnerList(list) if param_str(&list.params, "tag") == Some("web-bot-auth") => Some((label, list)),
        _ => None,
    });
    let Some((label, list)) = tagged else { return Checked::none("no signature tagged web-bot-auth") };
    let params = &list.params;
    let (Some(created), Some(expires), Some(keyid)) = (param_int(params, "created"), param_int(params, "expires"), param_str(params, "keyid")) else {
        return invalid("created, expires and keyid are required");
    };
    let mut out = Checked {
        outcome: Outcome::Invalid,
        why: "",
        agent: None,
        keyid: Some(keyid.to_string()),
        nonce: param_str(params, "nonce").map(str::to_string),
        expires,
        failed_verification: false,
        not_checked: false,
    };
    let fail = |mut out: Checked, why: &'static str| {
        out.why = why;
        out
    };
    if !matches!(param_str(params, "alg"), None | Some("ed25519")) {
        return fail(out, "alg is not ed25519");
    }
    if expires <= created || expires - created > settings.max_lifetime_s {
        return fail(out, "a lifetime of more than a day");
    }
    let skew = settings.skew_s.clamp(0, MAX_SKEW_S);
    if created > now_s + skew {
        return fail(out, "created in the future");
    }
    if expires < now_s - skew {
        return fail(out, "expired");
    }
    let covered = |name: &str| list.items.iter().find(|i| i.bare_item.as_string().is_some_and(|s| s.as_str() == name));
    if covered("@authority").is_none() && covered("@target-uri").is_none() {
        return fail(out, "@authority is not covered");
    }
    let Some(agent_item) = covered("signature-agent") else { return fail(out, "signature-agent is not covered") };
    // the agent's directory: the dictionary member the covered component names, or the bare string
    let agent_field = (m.field)("signature-agent");
    let agent = match (param_str(&agent_item.params, "key"), agent_field.as_deref()) {
        (_, None) => return fail(out, "no Signature-Agent"),
        (Some(key), Some(field)) => Parser::new(field).parse_dictionary::<Dictionary>().ok().and_then(|d| match d.get(key) {
            Some(ListEntry::Item(i)) => i.bare_item.as_string().map(|s| s.as_str().to_string()),
            _ => None,
        }),
        (None, Some(field)) => Parser::new(field).parse_item::<Item>().ok().and_then(|i| i.bare_item.as_string().map(|s| s.as_str().to_string())),
    };
    let Some(agent) = agent else { return fail(out, "Signature-Agent names no directory") };
    let Some(origin) = directory_origin(&agent) else { return fail(out, "Signature-Agent is not an https:// origin") };
    out.agent = Some(origin.clone());
    let Ok(signatures) = Parser::new(&(m.field)("signature").unwrap_or_default()).parse_dictionary::<Dictionary>() else {
        return fail(out, "Signature is not a dictionary");
    };
    let Some(signature) = signatures.get(label).and_then(|e| match e {
        ListEntry::Item(i) => i.bare_item.as_byte_sequence().map(<[u8]>::to_vec),
        ListEntry::InnerList(_) => None,
    }) else {
        return fail(out, "no Signature for the label");
    };
    let base = match signature_base(m, list) {
        Ok(base) => base,
        Err(BaseError::Absent) => return fail(out, "a covered field the request does not have"),
        // a proxy or an agent's extension this check does not read: no grounds to call it forged
        Err(BaseError::Unsupported) => {
            out.outcome = Outcome::Unverified;
            return fail(out, "a covered component this check does not read");
        }
    };
    let Some(key) = keys.get(&origin, keyid) else {
        out.outcome = Outcome::Unverified;
        return fail(out, "no key of the directory has this key id");
    };
    // a signature made for another host than this site's is a request meant for another
    // site, replayed here: invalid whether or not it holds, so it costs no verification
    if !for_this_site(m.authority, hosts) {
        return fail(out, "made for another host");
    }
    if !may_verify {
        // never called invalid unchecked: the same address may also carry a real agent
        out.outcome = Outcome::Unverified;
        out.not_checked = true;
        return fail(out, "not checked: signatures from this address failed to verify too often this minute");
    }
    let verified = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key).verify(base.as_bytes(), &signature).is_ok();
    out.outcome = if verified { Outcome::Verified } else { Outcome::Invalid };
    out.failed_verification = !verified;
    fail(out, if verified { "" } else { "the signature does not verify" })
}

/// Whether a signature's verification was spent for nothing, and so counts
/// against its address's allowance ([`FailedVerifications`]): it failed, or
/// it held but was a replay (refused), or its directory was taken from
/// traffic (`named` false: anyone can make a directory and sign for it).
pub fn spent_for_nothing(c: &Checked, named: bool, replay: Option<Replay>) -> bool {
    c.failed_verification || (c.outcome == Outcome::Verified && (!named || replay == Some(Replay::Replayed)))
}

/// Failed verifications a client address may cost a worker in a minute
/// before the rest of that minute's signatures from it are not checked.
pub const DEFAULT_FAILURES_PER_MINUTE: u16 = 10;

/// A worker's count of failed verifications per client address, over
/// fixed minutes. An Ed25519 verification costs about 600,000
/// instructions, some forty times a whole request's cost; a signature that
/// names a known key id, in a well-formed request, is all anyone needs to
/// make the server pay it. Past the allowance, an address's signatures are
/// not checked for the rest of the minute: `unverified` (the ordinary
/// policy applies), never `invalid`, since what was not checked cannot be
/// called forged. A real agent's signatures hold and so never count.
///
/// IPv4 addresses are counted each, IPv6 ones by /64 (one subscriber's
/// block). Direct-mapped over a fixed number of slots chosen by foldhash
/// (seeded per process): bounded, and a flood of addresses can only reset
/// other flooding addresses' counts, as only failures make entries.
#[derive(Clone)]
pub struct FailedVerifications {
    per_minute: u16,
    slots: Vec<FailureSlot>,
    hasher: foldhash::fast::RandomState,
}

#[derive(Clone, Copy, Default)]
struct FailureSlot {
    address: [u8; 16],
    minute: i64,
    failures: u16,
}

impl FailedVerifications {
    /// Slots (a power of two): 32 bytes each, 128 KiB a worker once an address fails.
    pub const SLOTS: usize = 4096;

    /// `per_minute` 0: no allowance, every signature is checked.
    pub fn new(per_minute: u16) -> FailedVerifications {
        FailedVerifications { per_minute, slots: Vec::new(), hasher: Default::default() }
    }

    pub fn per_minute(&self) -> u16 {
        self.per_minute
    }

    /// An address's key: IPv4 whole (also as an IPv4-mapped IPv6 address,
    /// from a dual-stack listener), IPv6 by its /64, the family in the last byte.
    fn key(address: &[u8]) -> [u8; 16] {
        let mut key = [0u8; 16];
        match address.len() {
            16 if address[..10].iter().all(|b| *b == 0) && address[10..12] == [0xff, 0xff] => {
                key[..4].copy_from_slice(&address[12..]);
                key[15] = 4;
            }
            4 => {
                key[..4].copy_from_slice(address);
                key[15] = 4;
            }
            _ => {
                key[..8].copy_from_slice(&address[..8]);
                key[15] = 16;
            }
        }
        key
    }

    fn slot(&self, key: &[u8; 16]) -> usize {
        std::hash::BuildHasher::hash_one(&self.hasher, key) as usize & (Self::SLOTS - 1)
    }

    /// Whether a signature from `address` (4 or 16 bytes) may be verified at `now_s`.
    pub fn may_verify(&self, address: &[u8], now_s: i64) -> bool {
        if self.per_minute == 0 || self.slots.is_empty() || !matches!(address.len(), 4 | 16) {
            return true;
        }
        let key = Self::key(address);
        let s = &self.slots[self.slot(&key)];
        !(s.address == key && s.minute == now_s.div_euclid(60) && s.failures >= self.per_minute)
    }

    /// Count a failed verification from `address`; true when it used up the
    /// address's allowance for this minute (to be said once).
    pub fn failed(&mut self, address: &[u8], now_s: i64) -> bool {
        // a client of a Unix socket has no address to tell it from the others
        if self.per_minute == 0 || !matches!(address.len(), 4 | 16) {
            return false;
        }
        if self.slots.is_empty() {
            self.slots = vec![FailureSlot::default(); Self::SLOTS];
        }
        let key = Self::key(address);
        let minute = now_s.div_euclid(60);
        let i = self.slot(&key);
        let s = &mut self.slots[i];
        if s.address != key || s.minute != minute {
            *s = FailureSlot { address: key, minute, failures: 0 };
        }
        s.failures = s.failures.saturating_add(1);
        s.failures == self.per_minute
    }
}

fn invalid(why: &'static str) -> Checked {
    Checked { outcome: Outcome::Invalid, ..Checked::none(why) }
}

fn param_str<'a>(params: &'a sfv::Parameters, name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k.as_str() == name).and_then(|(_, v)| v.as_string()).map(|s| s.as_str())
}

fn param_int(params: &sfv::Parameters, name: &str) -> Option<i64> {
    params.iter().find(|(k, _)| k.as_str() == name).and_then(|(_, v)| v.as_integer()).map(i64::from)
}

/// Why a signature base could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseError {
    /// A covered field the request does not have, or a component that is no
    /// component: the signature cannot hold.
    Absent,
    /// A component or parameter this checker does not read (a response's,
    /// `sf`, `bs`, `req`, `tr`): it cannot say whether the signature holds.
    Unsupported,
}

/// The signature base (RFC 9421 section 2.5) of the covered components:
/// the derived components of a request, and fields plain or by `key`.
pub fn signature_base(m: &Message<'_>, list: &sfv::InnerList) -> Result<String, BaseError> {
    let mut base = String::new();
    for item in &list.items {
        let name = item.bare_item.as_string().ok_or(BaseError::Absent)?.as_str();
        let key = param_str(&item.params, "key");
        if item.params.len() > usize::from(key.is_some()) {
            return Err(BaseError::Unsupported);
        }
        let value = match name {
            "@method" => m.method.to_string(),
            "@authority" => m.authority.to_string(),
            "@scheme" => m.scheme.to_string(),
            "@path" => m.path.to_string(),
            "@query" => format!("?{}", m.query.unwrap_or("")),
            "@request-target" => m.query.map_or_else(|| m.path.to_string(), |q| format!("{}?{q}", m.path)),
            "@target-uri" => format!("{}://{}{}", m.scheme, m.authority, m.query.map_or_else(|| m.path.to_string(), |q| format!("{}?{q}", m.path))),
            _ if name.starts_with('@') => return Err(BaseError::Unsupported),
            _ => {
                let field = (m.field)(name).ok_or(BaseError::Absent)?;
                match key {
                    None => field,
                    Some(key) => {
                        let dict = Parser::new(&field).parse_dictionary::<Dictionary>().map_err(|_| BaseError::Absent)?;
                        let mut ser = ListSerializer::new();
                        ser.members([dict.get(key).ok_or(BaseError::Absent)?]);
                        ser.finish().ok_or(BaseError::Absent)?
                    }
                }
            }
        };
        base.push_str(&serialize_item(&item.bare_item, &item.params));
        base.push_str(": ");
        base.push_str(&value);
        base.push('\n');
    }
    let mut params = ListSerializer::new();
    params.members([&ListEntry::InnerList(list.clone())]);
    base.push_str("\"@signature-params\": ");
    base.push_str(&params.finish().ok_or(BaseError::Absent)?);
    Ok(base)
}

fn serialize_item(bare: &BareItem, params: &sfv::Parameters) -> String {
    sfv::ItemSerializer::new().bare_item(bare).parameters(params).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_for_this_site_by_its_host() {
        let hosts = vec!["example.org".to_string(), "www.example.org".to_string()];
        assert!(for_this_site("example.org", &hosts));
        assert!(for_this_site("WWW.example.org:8443", &hosts));
        assert!(!for_this_site("other.example", &hosts));
        assert!(!for_this_site("example.org.evil.example", &hosts));
        assert!(for_this_site("other.example", &[]), "no list: any host");
        assert!(for_this_site("[2001:db8::1]:443", &["2001:db8::1".to_string()]));
    }

    const KEYID: &str = "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";
    // the draft's vectors are signed at this time, and valid for a century
    const CREATED: i64 = 1_735_689_600;

    fn message(lookup: &dyn Fn(&str) -> Option<String>) -> Message<'_> {
        Message { method: "GET", scheme: "https", authority: "example.com", path: "/path/to/resource", query: None, field: lookup }
    }

    fn fields(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())).collect();
        move |name: &str| {
            let values: Vec<&str> = owned.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect();
            (!values.is_empty()).then(|| values.join(", "))
        }
    }

    fn test_ring() -> KeyRing {
        let mut ring = KeyRing::default();
        let directory = format!("{{\"keys\":[{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"{RFC_TEST_KEY_X}\"}}]}}");
        assert_eq!(ring.add_directory("https://signature-agent.test", &directory, true), Ok(1));
        ring
    }

    #[test]
    fn the_test_key_thumbprint_is_the_drafts_key_id() {
        assert_eq!(thumbprint(RFC_TEST_KEY_X), KEYID);
    }

    #[test]
    fn the_drafts_vectors_verify() {
        let ring = test_ring();
        // the dictionary form (draft-meunier-web-bot-auth-architecture, Cloudflare's test data)
        let dict = fields(&[
            ("Signature-Agent", "agent2=\"https://signature-agent.test\""),
            ("Signature-Input", "sig2=(\"@authority\" \"signature-agent\";key=\"agent2\");created=1735689600;keyid=\"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U\";alg=\"ed25519\";expires=4889289600;nonce=\"n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==\";tag=\"web-bot-auth\""),
            ("Signature", "sig2=:RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg==:"),
        ]);
        let c = check(&message(&dict), &ring, CREATED + 10, Settings::default(), &[], true);
        assert_eq!((c.outcome, c.why), (Outcome::Invalid, "a lifetime of more than a day"), "signed for a century");
        let c = check(&message(&dict), &ring, CREATED + 10, Settings { max_lifetime_s: i64::MAX, ..Settings::default() }, &[], true);
        assert_eq!((c.outcome, c.why), (Outcome::Verified, ""));
        assert_eq!(c.agent.as_deref(), Some("https://signature-agent.test"));
        assert_eq!(c.keyid.as_deref(), Some(KEYID));
        assert!(c.nonce.is_some_and(|n| n.starts_with("n9p433")));
        // the legacy bare string, an hour's lifetime
        let legacy = fields(&[
            ("Signature-Agent", "\"https://signature-agent.test\""),
            ("Signature-Input", "sig2=(\"@authority\" \"signature-agent\");created=1735689600;keyid=\"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U\";alg=\"ed25519\";expires=1735693200;nonce=\"e8N7S2MFd/qrd6T2R3tdfAuuANngKI7LFtKYI/vowzk4lAZYadIX6wW25MwG7DCT9RUKAJ0qVkU0mEeLElW1qg==\";tag=\"web-bot-auth\""),
            ("Signature", "sig2=:jdq0SqOwHdyHr9+r5jw3iYZH6aNGKijYp/EstF4RQTQdi5N5YYKrD+mCT1HA1nZDsi6nJKuHxUi/5Syp3rLWBA==:"),
        ]);
        let c = check(&message(&legacy), &ring, CREATED + 10, Settings::default(), &[], true);
        assert_eq!((c.outcome, c.why), (Outcome::Verified, ""));
    }

    #[test]
    fn rfc_9421s_ed25519_example_signs_its_base() {
        // RFC 9421 B.2.6, over a POST: the signature base and the signature as published
        let f = fields(&[("Date", "Tue, 20 Apr 2021 02:07:55 GMT"), ("Content-Type", "application/json"), ("Content-Length", "18")]);
        let m = Message { method: "POST", scheme: "https", authority: "example.com", path: "/foo", query: Some("param=Value&Pet=dog"), field: &f };
        let input = "(\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\");created=1618884473;keyid=\"test-key-ed25519\"";
        let ListEntry::InnerList(list) = Parser::new(input).parse_list::<sfv::List>().unwrap().remove(0) else { panic!("an inner list") };
        let base = signature_base(&m, &list).unwrap();
        assert_eq!(
            base,
            "\"date\": Tue, 20 Apr 2021 02:07:55 GMT\n\"@method\": POST\n\"@path\": /foo\n\"@authority\": example.com\n\"content-type\": application/json\n\"content-length\": 18\n\"@signature-params\": (\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\");created=1618884473;keyid=\"test-key-ed25519\""
        );
        use base64::Engine;
        let signature = base64::engine::general_purpose::STANDARD
            .decode("wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==")
            .unwrap();
        let key = decode_b64url(RFC_TEST_KEY_X).unwrap();
        assert!(ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key).verify(base.as_bytes(), &signature).is_ok());
    }

    /// A key pair made for the test, its public key as a JWK's `x`, and its directory.
    fn key_pair() -> (ring::signature::Ed25519KeyPair, String) {
        use base64::Engine;
        use ring::signature::KeyPair;
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        (pair, x)
    }

    fn directory(x: &str, kid: Option<&str>) -> String {
        let kid = kid.map_or(String::new(), |k| format!(",\"kid\":\"{k}\""));
        format!("{{\"keys\":[{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"{x}\"{kid}}}]}}")
    }

    /// The headers of a request to example.com signed by `pair` as `keyid`,
    /// covering `covered` with `params` (created, expires... as Signature-Input writes them).
    fn signed(pair: &ring::signature::Ed25519KeyPair, agent: &str, covered: &str, params: &str) -> Vec<(String, String)> {
        use base64::Engine;
        let input = format!("({covered}){params}");
        let ListEntry::InnerList(list) = Parser::new(&input).parse_list::<sfv::List>().unwrap().remove(0) else { panic!("an inner list") };
        let agent_header = if covered.contains(";key=") { format!("a1=\"{agent}\"") } else { format!("\"{agent}\"") };
        let mut headers = vec![("signature-agent".to_string(), agent_header), ("x-extra".to_string(), "1".to_string())];
        let f = {
            let h = headers.clone();
            move |name: &str| h.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        };
        // a component the check does not read has no base: anything signed then
        let base = signature_base(&message(&f), &list).unwrap_or_default();
        let signature = base64::engine::general_purpose::STANDARD.encode(pair.sign(base.as_bytes()).as_ref());
        headers.push(("signature-input".into(), format!("s1={input}")));
        headers.push(("signature".into(), format!("s1=:{signature}:")));
        headers
    }

    fn lookup(headers: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
        move |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    const NOW: i64 = 1_780_000_000;

    fn params(created: i64, expires: i64, keyid: &str, extra: &str) -> String {
        format!(";created={created};expires={expires};keyid=\"{keyid}\";alg=\"ed25519\";nonce=\"abc\"{extra}")
    }

    /// A forged signature under a known key id costs a verification until its
    /// address's allowance is used; the rest of that minute's from the address
    /// are not checked (unverified, never invalid), a real agent's from another
    /// address still verify, and the next minute starts over.
    #[test]
    fn failed_verifications_have_an_allowance_per_address() {
        let (pair, x) = key_pair();
        let keyid = thumbprint(&x);
        let mut ring = KeyRing::default();
        assert_eq!(ring.add_directory("https://agent.example", &directory(&x, None), false), Ok(1));
        let both = "\"@authority\" \"signature-agent\";key=\"a1\"";
        let p = params(NOW, NOW + 300, &keyid, ";tag=\"web-bot-auth\"");
        let (other, _) = key_pair();
        let forged = signed(&other, "https://agent.example", both, &p);
        let good = signed(&pair, "https://agent.example", both, &p);
        let mut failures = FailedVerifications::new(3);
        let attacker = [192, 0, 2, 1];
        let agent = [198, 51, 100, 7];
        let mut send = |h: &[(String, String)], address: &[u8], now: i64| {
            let f = lookup(h);
            let c = check(&message(&f), &ring, now, Settings::default(), &[], failures.may_verify(address, now));
            let used_up = c.failed_verification && failures.failed(address, now);
            (c.outcome, c.not_checked, used_up)
        };
        assert_eq!(send(&forged, &attacker, NOW), (Outcome::Invalid, false, false));
        assert_eq!(send(&forged, &attacker, NOW), (Outcome::Invalid, false, false));
        assert_eq!(send(&forged, &attacker, NOW), (Outcome::Invalid, false, true), "the third uses the allowance up, said once");
        assert_eq!(send(&forged, &attacker, NOW + 1), (Outcome::Unverified, true, false), "then not checked");
        assert_eq!(send(&good, &agent, NOW + 1), (Outcome::Verified, false, false), "another address verifies");
        assert_eq!(send(&good, &attacker, NOW + 2), (Outcome::Unverified, true, false), "the same address: not checked either");
        let next_minute = (NOW / 60 + 1) * 60;
        assert_eq!(send(&forged, &attacker, next_minute), (Outcome::Invalid, false, false), "a new minute, a new allowance");
        // what counts: a failure, a replay, a directory taken from traffic; never a named signer's first use
        let f = lookup(&good);
        let held = check(&message(&f), &ring, NOW, Settings::default(), &[], true);
        assert_eq!(held.outcome, Outcome::Verified);
        assert!(!spent_for_nothing(&held, true, Some(Replay::First)) && !spent_for_nothing(&held, true, None));
        assert!(spent_for_nothing(&held, true, Some(Replay::Replayed)));
        assert!(spent_for_nothing(&held, false, Some(Replay::First)));
        let f = lookup(&forged);
        assert!(spent_for_nothing(&check(&message(&f), &ring, NOW, Settings::default(), &[], true), true, None));
        // IPv6 by /64: 2001:db8::/64, whose first bytes are those of the IPv4 address 32.1.13.184
        let v6 = |last: u8| [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last];
        let mut v6_failures = FailedVerifications::new(2);
        assert!(!v6_failures.failed(&v6(1), NOW));
        assert!(v6_failures.failed(&v6(2), NOW), "two addresses of one /64 share an allowance");
        assert!(!v6_failures.may_verify(&v6(3), NOW));
        let other64 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1];
        assert!(v6_failures.may_verify(&other64, NOW));
        assert!(v6_failures.may_verify(&[0x20, 0x01, 0x0d, 0xb8], NOW), "the IPv4 address with the same bytes is another key");
        // a dual-stack listener's IPv4-mapped address is its IPv4 address, not the zero /64 every IPv4 client shares
        let mapped = |a: [u8; 4]| [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3]];
        let mut dual = FailedVerifications::new(1);
        assert!(dual.failed(&mapped([192, 0, 2, 1]), NOW));
        assert!(!dual.may_verify(&[192, 0, 2, 1], NOW), "the same IPv4 client");
        assert!(dual.may_verify(&mapped([192, 0, 2, 2]), NOW), "another IPv4 client keeps its allowance");
        // a Unix socket's clients have no address: no allowance is shared between them
        assert!(!dual.failed(&[], NOW));
        assert!(dual.may_verify(&[], NOW));
        assert_eq!(std::mem::size_of::<FailureSlot>(), 32);
        // no allowance: every signature is checked
        let mut off = FailedVerifications::new(0);
        for _ in 0..20 {
            assert!(!off.failed(&attacker, NOW));
            assert!(off.may_verify(&attacker, NOW));
        }
    }

    #[test]
    fn a_signed_request_from_the_attackers_side() {
        let (pair, x) = key_pair();
        let keyid = thumbprint(&x);
        let mut ring = KeyRing::default();
        assert_eq!(ring.add_directory("https://Agent.example/", &directory(&x, Some("k-1")), false), Ok(1));
        let tag = ";tag=\"web-bot-auth\"";
        let both = "\"@authority\" \"signature-agent\";key=\"a1\"";
        let outcome = |h: &[(String, String)], now: i64| {
            let f = lookup(h);
            let c = check(&message(&f), &ring, now, Settings::default(), &[], true);
            (c.outcome, c.why)
        };
        let good = signed(&pair, "https://agent.example", both, &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&good, NOW), (Outcome::Verified, ""));
        assert_eq!(outcome(&good, NOW - 60), (Outcome::Verified, ""), "created within the skew ahead");
        assert_eq!(outcome(&good, NOW + 360), (Outcome::Verified, ""), "expired within the skew");
        assert_eq!(outcome(&good, NOW + 361), (Outcome::Invalid, "expired"));
        assert_eq!(outcome(&good, NOW - 61), (Outcome::Invalid, "created in the future"));
        let by_kid = signed(&pair, "https://agent.example", both, &params(NOW, NOW + 300, "k-1", tag));
        assert_eq!(outcome(&by_kid, NOW), (Outcome::Verified, ""), "the directory's kid names the key too");
        let legacy = signed(&pair, "https://agent.example", "\"@authority\" \"signature-agent\"", &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&legacy, NOW), (Outcome::Verified, ""), "the legacy bare-string Signature-Agent");

        // another key signed, under the known key's id
        let (other, _) = key_pair();
        let forged = signed(&other, "https://agent.example", both, &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&forged, NOW), (Outcome::Invalid, "the signature does not verify"));
        // a covered field changed on the way: the directory named
        let mut tampered = good.clone();
        tampered[0].1 = "a1=\"https://agent.example:8443\"".into();
        assert_eq!(outcome(&tampered, NOW).0, Outcome::Unverified, "another directory: no key of it is known");
        let mut tampered = good.clone();
        tampered.retain(|(k, _)| k != "signature-agent");
        assert_eq!(outcome(&tampered, NOW), (Outcome::Invalid, "no Signature-Agent"));
        // the same signature for another site
        let f = lookup(&good);
        let elsewhere = Message { authority: "other.example", ..message(&f) };
        assert_eq!(check(&elsewhere, &ring, NOW, Settings::default(), &[], true).outcome, Outcome::Invalid);
        // made for a host that is not this site's: invalid, and no verification is spent on it
        let c = check(&elsewhere, &ring, NOW, Settings::default(), &["example.com".to_string()], true);
        assert_eq!((c.outcome, c.why, c.failed_verification), (Outcome::Invalid, "made for another host", false));
        assert_eq!(check(&message(&f), &ring, NOW, Settings::default(), &["example.com".to_string()], true).outcome, Outcome::Verified);

        let untagged = signed(&pair, "https://agent.example", both, &params(NOW, NOW + 300, &keyid, ""));
        assert_eq!(outcome(&untagged, NOW), (Outcome::None, "no signature tagged web-bot-auth"));
        let no_authority = signed(&pair, "https://agent.example", "\"@method\" \"signature-agent\";key=\"a1\"", &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&no_authority, NOW), (Outcome::Invalid, "@authority is not covered"));
        let target_uri = signed(&pair, "https://agent.example", "\"@target-uri\" \"signature-agent\";key=\"a1\"", &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&target_uri, NOW), (Outcome::Verified, ""), "@target-uri covers the authority");
        let no_agent = signed(&pair, "https://agent.example", "\"@authority\"", &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&no_agent, NOW), (Outcome::Invalid, "signature-agent is not covered"));
        let long = signed(&pair, "https://agent.example", both, &params(NOW, NOW + 86_401, &keyid, tag));
        assert_eq!(outcome(&long, NOW), (Outcome::Invalid, "a lifetime of more than a day"));
        let rsa = signed(&pair, "https://agent.example", both, &format!(";created={NOW};expires={};keyid=\"{keyid}\";alg=\"rsa-pss-sha512\"{tag}", NOW + 300));
        assert_eq!(outcome(&rsa, NOW), (Outcome::Invalid, "alg is not ed25519"));
        let plain_http = signed(&pair, "http://agent.example", both, &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&plain_http, NOW), (Outcome::Invalid, "Signature-Agent is not an https:// origin"));
        // a covered field the request lacks cannot hold; a component this check does not read is not forged
        let mut stripped =
            signed(&pair, "https://agent.example", "\"@authority\" \"signature-agent\";key=\"a1\" \"x-extra\"", &params(NOW, NOW + 300, &keyid, tag));
        stripped.retain(|(k, _)| k != "x-extra");
        assert_eq!(outcome(&stripped, NOW), (Outcome::Invalid, "a covered field the request does not have"));
        let responses =
            signed(&pair, "https://agent.example", "\"@authority\" \"signature-agent\";key=\"a1\" \"@status\"", &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&responses, NOW), (Outcome::Unverified, "a covered component this check does not read"));
        let unknown = signed(&pair, "https://unknown.example", both, &params(NOW, NOW + 300, &keyid, tag));
        assert_eq!(outcome(&unknown, NOW), (Outcome::Unverified, "no key of the directory has this key id"));
        let mut unsigned = good.clone();
        unsigned.retain(|(k, _)| k != "signature");
        assert_eq!(outcome(&unsigned, NOW), (Outcome::Invalid, "no Signature for the label"));
        assert_eq!(outcome(&[], NOW), (Outcome::None, "no Signature-Input"));
        let garbage = vec![("signature-input".to_string(), "s1=(((".to_string())];
        assert_eq!(outcome(&garbage, NOW), (Outcome::Invalid, "Signature-Input is not a dictionary"));
    }

    #[test]
    fn directories_are_read_with_their_limits() {
        let (_, x) = key_pair();
        let mut ring = KeyRing::default();
        assert_eq!(ring.add_directory("https://a.example", &directory(RFC_TEST_KEY_X, None), false), Ok(0), "the RFC's test key is refused");
        let many = format!("{{\"keys\":[{}]}}", vec![format!("{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"{x}\"}}"); 33].join(","));
        assert!(ring.add_directory("https://a.example", &many, false).unwrap_err().contains("at most 32"));
        let big = format!("{{\"keys\":[],\"pad\":\"{}\"}}", "x".repeat(DIRECTORY_MAX_BYTES));
        assert!(ring.add_directory("https://a.example", &big, false).unwrap_err().contains("at most 65536"));
        assert!(ring.add_directory("http://a.example", &directory(&x, None), false).unwrap_err().contains("not an https:// origin"));
        let mixed =
            format!("{{\"keys\":[{{\"kty\":\"RSA\",\"n\":\"x\",\"e\":\"AQAB\"}},{{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"alg\":\"EdDSA\",\"x\":\"{x}\"}}]}}");
        assert_eq!(ring.add_directory("https://a.example", &mixed, false), Ok(1), "an RSA key skipped, EdDSA kept");
        assert!(ring.get("https://a.example", &thumbprint(&x)).is_some());
        assert!(ring.add_directory("https://a.example", "[]", false).is_err());
    }

    #[test]
    fn a_key_file_holds_directories() {
        let (_, x) = key_pair();
        let file = format!("{{\"format\":1,\"directories\":{{\"https://a.example\":{}}}}}", directory(&x, Some("k")));
        let ring = KeyRing::from_keys_file(&file, false).unwrap();
        assert!(ring.get("https://a.example", "k").is_some() && ring.get("https://a.example", &thumbprint(&x)).is_some());
        assert_eq!(ring.origins(), ["https://a.example"]);
        // two names of one origin are one directory
        let twice = format!("{{\"format\":1,\"directories\":{{\"https://A.example\":{0},\"https://a.example:443\":{0}}}}}", directory(&x, Some("k")));
        assert_eq!(KeyRing::from_keys_file(&twice, false).unwrap().origins(), ["https://a.example"]);
        assert!(KeyRing::from_keys_file("{\"directories\":{}}", false).unwrap_err().contains("format 1"));
        let bad = "{\"format\":1,\"directories\":{\"http://a.example\":{\"keys\":[]}}}";
        assert!(KeyRing::from_keys_file(bad, false).unwrap_err().contains("directory \"http://a.example\": \"http://a.example\" is not an https:// origin"));
    }

    #[test]
    fn a_directory_is_an_https_origin() {
        assert_eq!(directory_origin("https://ChatGPT.com").as_deref(), Some("https://chatgpt.com"));
        assert_eq!(directory_origin("https://chatgpt.com/").as_deref(), Some("https://chatgpt.com"));
        assert_eq!(directory_origin("https://agent.example:443").as_deref(), Some("https://agent.example"));
        assert_eq!(directory_origin("https://agent.example:8443").as_deref(), Some("https://agent.example:8443"));
        for bad in ["http://chatgpt.com", "https://", "https://a.example/keys", "https://user@a.example", "https://a.example?x", "chatgpt.com"] {
            assert_eq!(directory_origin(bad), None, "{bad}");
        }
    }
}
