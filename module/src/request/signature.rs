//! A request's Web Bot Auth signature (`crawlward_signatures`): the
//! request as the signature base reads it, checked by
//! [`crawlward_policy::signature::check`] once, when the request is first
//! identified. A request without `Signature-Input` costs one look at its
//! header names. An address whose verifications keep being spent for
//! nothing (failed, replayed, or from a directory taken from traffic) is not
//! checked for the rest of the minute
//! ([`crawlward_policy::signature::FailedVerifications`]).

use crate::conf::signatures::Signatures;
use crate::request::ext::RequestExt;
use crawlward_policy::signature::{self, Message, Outcome, Replay};
use ngx::http::Request;

/// What the request's signature said: plain data, in the request's state.
#[derive(Clone, Copy, Debug)]
pub struct Signed {
    pub outcome: Outcome,
    /// Not verified: its address's verifications spent for nothing used up their allowance.
    pub not_checked: bool,
    /// The signer's directory is one the catalogue or the policy names, not
    /// one taken from traffic (true when the signature names none).
    pub named: bool,
    /// What the replay zone said of a verified signature's nonce (None: no
    /// replay zone, or not verified).
    pub replay: Option<Replay>,
    /// The agent's directory (`https://origin`), copied into the request's
    /// pool (it lives as long as the request and its state); empty for none.
    agent: *const u8,
    agent_len: usize,
}

impl Signed {
    /// The agent's directory, empty when the signature names none; `r` is
    /// the request whose state holds this.
    pub fn agent<'r>(&self, _r: &'r Request) -> &'r [u8] {
        if self.agent.is_null() || self.agent_len == 0 {
            return &[];
        }
        // SAFETY: agent and agent_len are a copy in the pool of the request `r` (see `check`),
        // which lives as long as the request does.
        unsafe { std::slice::from_raw_parts(self.agent, self.agent_len) }
    }
}

/// The request's signature, None when it has no `Signature-Input`.
pub fn check(r: &Request, s: &Signatures) -> Option<Signed> {
    // most requests: one pass over the names, by length first
    let signed = r.headers_in_iterator().any(|(k, _)| k.as_bytes().len() == 15 && k.as_bytes().eq_ignore_ascii_case(b"signature-input"));
    if !signed {
        return None;
    }
    // each field's lines joined, as RFC 9421 section 2.1 reads a field
    let field = |name: &str| {
        let values: Vec<String> = r
            .headers_in_iterator()
            .filter(|(k, _)| k.as_bytes().eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
            .collect();
        (!values.is_empty()).then(|| values.join(", "))
    };
    let scheme = if r.variable_named("https").is_some_and(|v| v == b"on") { "https" } else { "http" };
    let host = r.variable_named("http_host").filter(|h| !h.is_empty()).or_else(|| r.variable_named("host")).unwrap_or_default();
    let authority = authority(&String::from_utf8_lossy(host), scheme);
    let target = String::from_utf8_lossy(r.request_target()).into_owned();
    // an absolute-form target (a proxy's request line): its path on
    let origin_form = match target.split_once("://") {
        Some((_, rest)) if !target.starts_with('/') => rest.find('/').map_or("/", |i| &rest[i..]).to_string(),
        _ => target,
    };
    let (path, query) = match origin_form.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (origin_form.as_str(), None),
    };
    let method = String::from_utf8_lossy(r.request_method()).into_owned();
    let m = Message { method: &method, scheme, authority: &authority, path, query, field: &field };
    let now_s = (crate::base::wall_ms() / 1000) as i64;
    let address = crate::net::binary_addr(r.connection_ref());
    let may_verify = s.failures.try_borrow().is_ok_and(|f| f.may_verify(address, now_s));
    let mut checked = signature::check(&m, &s.keys, now_s, s.settings, &s.hosts, may_verify);
    let (mut replay, mut unlisted) = (None, false);
    if let Some(table) = s.replay.as_ref().and_then(|z| z.table.as_ref()).filter(|_| checked.outcome == Outcome::Verified) {
        match seen(table, s, &checked) {
            Some(seen) => replay = Some(seen),
            // a directory the zone's list does not hold: one the newest configuration's key
            // file dropped (in a worker of the previous one, finishing its requests), or one
            // this configuration added when its first worker could not move the nonces (an
            // alert said so): not verified, with a nonce or without
            None => (checked.outcome, unlisted) = (Outcome::Unverified, true),
        }
    }
    let named = checked.agent.as_deref().is_none_or(|a| s.keys.named(a));
    // a verification that held for an unlisted directory was spent for nothing too
    let spent = unlisted || signature::spent_for_nothing(&checked, named, replay);
    if spent && s.failures.try_borrow_mut().is_ok_and(|mut f| f.failed(address, now_s)) {
        let per_minute = s.failures.try_borrow().map_or(0, |f| f.per_minute());
        ngx::ngx_log_error!(
            ngx::ffi::NGX_LOG_WARN,
            r.connection_ref().log,
            "crawlward: {per_minute} signatures from {} were verified for nothing this minute (failed, replayed or from a directory taken from traffic): \
             its others this minute are not checked (unverified), in this worker",
            crate::net::client_ip(r.connection_ref()).map_or_else(|| "this address".to_string(), |ip| ip.to_string())
        );
    }
    let agent = checked.agent.as_deref().and_then(|a| r.pool_copy(a.as_bytes()));
    Some(Signed {
        outcome: checked.outcome,
        not_checked: checked.not_checked,
        named,
        replay,
        agent: agent.map_or(std::ptr::null(), <[u8]>::as_ptr),
        agent_len: agent.map_or(0, <[u8]>::len),
    })
}

/// A verified signature's nonce in the replay zone: each directory of the
/// key file has its own part of the table (the table's header lists them),
/// and a nonce is kept until the signature would no longer be accepted (its
/// expiry plus the skew). None for a directory the table's list does not
/// hold, whether the signature has a nonce or not.
fn seen(table: &crate::state::replay::ReplayShm, s: &Signatures, checked: &signature::Checked) -> Option<Replay> {
    let now_s = (crate::base::wall_ms() / 1000) as i64;
    let until_s = checked.expires.saturating_add(s.settings.skew_s);
    table.with(|t| {
        if checked.agent.as_deref().is_some_and(|d| !t.holds(d)) {
            return None;
        }
        let (Some(directory), Some(keyid), Some(nonce)) = (checked.agent.as_deref(), checked.keyid.as_deref(), checked.nonce.as_deref()) else {
            return Some(t.without_nonce());
        };
        let nonce = t.nonce(directory, keyid, nonce);
        t.see(nonce, until_s, now_s)
    })
}

/// The request's authority as RFC 9421's `@authority` has it: the host in
/// lower case, the port only when it is not the scheme's default.
fn authority(host: &str, scheme: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let default = if scheme == "https" { ":443" } else { ":80" };
    host.strip_suffix(default).map_or(host.clone(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn the_default_port_is_left_out() {
        assert_eq!(authority("Example.COM:443", "https"), "example.com");
        assert_eq!(authority("example.com:8443", "https"), "example.com:8443");
        assert_eq!(authority("example.com:80", "http"), "example.com");
        assert_eq!(authority("example.com:443", "http"), "example.com:443");
    }
}
