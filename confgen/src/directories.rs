//! Fetching the Web Bot Auth key directories, by stricter rules than the
//! range files: a directory's keys decide who a request is, and its origin
//! is a URL an agent chose. HTTPS only, the draft's well-known path, a 200
//! only, no redirect, at most 64 KiB, a timeout, no proxy, and never to a
//! special-purpose address (loopback, private, link-local...), whatever the
//! name resolves to when the connection is made.

use crawlward_policy::directories::TEST_ADDRESSES_ENV;
use crawlward_policy::ranges::special_purpose;
use crawlward_policy::signature::DIRECTORY_MAX_BYTES;
use std::net::IpAddr;
use std::time::Duration;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// Resolves as the system does, then keeps only the addresses a directory
/// may be fetched from: the connection is made to one of these, so a name
/// that resolves to a private address (or is made to, between two lookups)
/// is never reached.
#[derive(Debug)]
struct PublicAddressesOnly {
    /// Special-purpose addresses the test suites allow ([`TEST_ADDRESSES_ENV`]).
    allowed: Vec<IpAddr>,
}

impl Resolver for PublicAddressesOnly {
    fn resolve(&self, uri: &Uri, config: &Config, timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut kept = self.empty();
        let mut refused = Vec::new();
        for addr in resolved.iter() {
            match refusal(addr.ip(), &self.allowed) {
                None => kept.push(*addr),
                Some(why) => refused.push(why),
            }
        }
        if kept.is_empty() {
            let why = format!("{}: a directory is never fetched from a special-purpose address", refused.join(", "));
            return Err(ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why)));
        }
        Ok(kept)
    }
}

/// Why `ip` may not be fetched from, if it may not.
fn refusal(ip: IpAddr, allowed: &[IpAddr]) -> Option<String> {
    if allowed.contains(&ip) {
        return None;
    }
    let net = ipnet::IpNet::from(ip);
    special_purpose(&net).map(|s| format!("{ip} is in {s}"))
}

/// The addresses [`TEST_ADDRESSES_ENV`] lists.
fn test_addresses() -> Vec<IpAddr> {
    std::env::var(TEST_ADDRESSES_ENV).unwrap_or_default().split([',', ' ']).filter_map(|a| a.trim().parse().ok()).collect()
}

/// A client for directories.
pub struct Fetcher {
    agent: ureq::Agent,
}

impl Fetcher {
    pub fn new(timeout: Duration, tls: ureq::tls::TlsConfig) -> Fetcher {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .https_only(true)
            .max_redirects(0)
            .proxy(None)
            .tls_config(tls)
            .user_agent(concat!("crawlward/", env!("CARGO_PKG_VERSION"), " (Web Bot Auth key directories)"))
            .build();
        let agent = ureq::Agent::with_parts(config, DefaultConnector::default(), PublicAddressesOnly { allowed: test_addresses() });
        Fetcher { agent }
    }

    /// The directory of `origin`, by the rules above.
    pub fn fetch(&self, origin: &str) -> Result<Vec<u8>, String> {
        let url = crawlward_policy::directories::url(origin);
        let mut resp = match self.agent.get(&url).header("accept", "application/http-message-signatures-directory+json").call() {
            Ok(r) => r,
            Err(ureq::Error::StatusCode(status)) => return Err(format!("HTTP {status}: a directory is taken from a 200 only")),
            Err(e) => return Err(e.to_string()),
        };
        let status = resp.status().as_u16();
        if status != 200 {
            let to = resp.headers().get("location").and_then(|l| l.to_str().ok()).map(|l| format!(" to {l}")).unwrap_or_default();
            return Err(format!("HTTP {status}{to}: a directory is taken from a 200 only, and no redirect is followed"));
        }
        resp.body_mut().with_config().limit(DIRECTORY_MAX_BYTES as u64).read_to_vec().map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => format!("more than the {} KiB a directory may hold", DIRECTORY_MAX_BYTES / 1024),
            e => format!("cannot read the answer: {e}"),
        })
    }
}

/// The busiest key directories the module counted in signed requests
/// without holding their keys: its status endpoint's
/// `signatures.unknown_directories.busiest`, as (directory, requests).
pub fn unknown_directories(agent: &ureq::Agent, status_url: &str) -> Result<Vec<(String, u64)>, String> {
    let mut resp = agent.get(status_url).call().map_err(|e| e.to_string())?;
    let body = resp.body_mut().with_config().limit(4 << 20).read_to_vec().map_err(|e| format!("cannot read the answer: {e}"))?;
    let doc: serde_json::Value = serde_json::from_slice(&body).map_err(|_| "not the module's status JSON".to_string())?;
    let Some(signatures) = doc.get("signatures").filter(|s| !s.is_null()) else {
        return Err("its status has no signatures: is crawlward_signatures on there?".to_string());
    };
    let busiest = signatures.pointer("/unknown_directories/busiest").and_then(|b| b.as_array()).cloned().unwrap_or_default();
    Ok(busiest.iter().filter_map(|d| Some((d.get("directory")?.as_str()?.to_string(), d.get("requests")?.as_u64()?))).collect())
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn special_purpose_addresses_are_refused_unless_a_test_allows_them() {
        let ip = |s: &str| s.parse().unwrap();
        assert_eq!(refusal(ip("104.18.32.47"), &[]), None);
        assert_eq!(refusal(ip("2606:4700::6812:202f"), &[]), None);
        for special in
            ["127.0.0.1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fd00::1", "fe80::1", "::ffff:127.0.0.1"]
        {
            assert!(refusal(ip(special), &[]).is_some(), "{special}");
        }
        assert_eq!(refusal(ip("169.254.169.254"), &[]).as_deref(), Some("169.254.169.254 is in 169.254.0.0/16"));
        assert_eq!(refusal(ip("127.0.0.1"), &[ip("127.0.0.1")]), None);
        assert!(refusal(ip("127.0.0.2"), &[ip("127.0.0.1")]).is_some());
    }
}
