//! The Web Bot Auth key directories crawlward trusts, and the copies
//! `crawlward update-ranges` keeps of them beside the range files: one file
//! per directory (`signature-directory-<host>.json`), written only after a
//! fetch that passed every rule, so a failed fetch never drops a key.
//! `crawlward render` gathers the kept copies into the key file the module
//! loads (`crawlward_signatures keys=FILE`).

use crate::signature::{KeyRing, DIRECTORY_MAX_BYTES};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where a directory is served under its origin
/// (draft-meunier-http-message-signatures-directory).
pub const WELL_KNOWN_PATH: &str = "/.well-known/http-message-signatures-directory";

/// The environment variable that lets crawlward's own test suites fetch a
/// directory from the listed addresses (`127.0.0.1`), which are otherwise
/// refused as special-purpose. Never on a server.
pub const TEST_ADDRESSES_ENV: &str = "CRAWLWARD_TEST_DIRECTORY_ADDRESSES";

/// A directory as `crawlward update-ranges` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptDirectory {
    /// The origin (`https://chatgpt.com`) whose signatures these keys verify.
    pub origin: String,
    /// When the copy was fetched (RFC 3339).
    pub fetched: String,
    /// How many Ed25519 keys crawlward took from it.
    pub keys: usize,
    /// The directory as its origin served it (`{"keys": [JWK, ...]}`).
    pub directory: serde_json::Value,
}

/// The kept copy's file name for `origin`: `signature-directory-` and its
/// host (and port), in characters any file system takes.
pub fn file_name(origin: &str) -> String {
    let host = origin.strip_prefix("https://").unwrap_or(origin);
    let safe: String = host.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    format!("signature-directory-{safe}.json")
}

/// The URL a directory is fetched from.
pub fn url(origin: &str) -> String {
    format!("{origin}{WELL_KNOWN_PATH}")
}

/// Check a fetched directory `body` for `origin` by the module's own
/// rules (JSON, at most [`DIRECTORY_MAX_BYTES`] and 32 keys, at least one
/// Ed25519 key crawlward takes): the copy to keep, or why not.
pub fn check(origin: &str, body: &[u8], fetched: &str) -> Result<KeptDirectory, String> {
    if body.len() > DIRECTORY_MAX_BYTES {
        return Err(format!("{} bytes, more than the {} KiB a directory may hold", body.len(), DIRECTORY_MAX_BYTES / 1024));
    }
    let text = std::str::from_utf8(body).map_err(|_| "not UTF-8".to_string())?;
    let keys = KeyRing::default().add_directory(origin, text, false)?;
    if keys == 0 {
        return Err("no Ed25519 key crawlward can use (kty OKP, crv Ed25519)".into());
    }
    let directory = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    Ok(KeptDirectory { origin: origin.to_string(), fetched: fetched.to_string(), keys, directory })
}

/// The copy kept in `dir` for `origin`, if there is one and it still passes [`check`].
pub fn kept(dir: &Path, origin: &str) -> Option<KeptDirectory> {
    let text = std::fs::read_to_string(dir.join(file_name(origin))).ok()?;
    let file: KeptDirectory = serde_json::from_str(&text).ok()?;
    let again = check(origin, file.directory.to_string().as_bytes(), &file.fetched).ok()?;
    (file.origin == origin).then_some(again)
}

/// The key file the module loads, from the kept copies: format 1, each
/// directory under its origin, `from_traffic` the ones taken from traffic
/// (they verify, and stand for no signer), and `generated` (JSON has no
/// comments) naming where it comes from.
pub fn key_file(generated: &str, kept: &[KeptDirectory], from_traffic: &[String]) -> String {
    let directories: serde_json::Map<String, serde_json::Value> = kept.iter().map(|k| (k.origin.clone(), k.directory.clone())).collect();
    let doc = serde_json::json!({ "generated": generated, "format": 1, "directories": directories, "from_traffic": from_traffic });
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}

/// The directories `crawlward update-ranges` took from the module's count of
/// key directories that signed requests here but that nothing names
/// (`module.signatures.fetch_seen`): kept beside the range files, so that
/// every later run fetches them as it fetches the named ones.
pub const SEEN_FILE: &str = "signature-directories-seen.json";

/// [`SEEN_FILE`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeenList {
    #[serde(default)]
    pub generated: String,
    pub directories: Vec<SeenDirectory>,
}

/// A directory taken from the requests it signed here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeenDirectory {
    pub origin: String,
    /// When it was taken (RFC 3339), and how many requests it had signed then.
    pub taken: String,
    pub requests: u64,
}

/// The seen list kept in `dir`: empty when there is none, or it does not parse
/// (a broken file is not trusted: its directories are taken again, from traffic).
/// Only `https://` origins, each once.
pub fn seen(dir: &Path) -> SeenList {
    let Some(mut list) = std::fs::read_to_string(dir.join(SEEN_FILE)).ok().and_then(|t| serde_json::from_str::<SeenList>(&t).ok()) else {
        return SeenList::default();
    };
    let mut origins: Vec<String> = Vec::new();
    list.directories.retain(|d| {
        let keep = crate::signature::directory_origin(&d.origin).is_some_and(|o| o == d.origin) && !origins.contains(&d.origin);
        origins.push(d.origin.clone());
        keep
    });
    list
}

/// How long a directory taken from traffic is kept: then it is dropped, and
/// taken again only if it still signs requests here. So directories made up
/// to fill the list hold their places a month at most.
pub const SEEN_KEPT_S: i64 = 30 * 86_400;

/// What a run did to the seen list.
#[derive(Debug, Default, PartialEq)]
pub struct Taken {
    pub added: Vec<SeenDirectory>,
    /// Left out because the list was full: (origin, requests).
    pub full: Vec<(String, u64)>,
    /// Dropped: kept [`SEEN_KEPT_S`] already, or named by the policy now.
    pub dropped: Vec<String>,
}

/// Update the seen list from the status endpoint's count of unknown
/// directories: first drop what is named now or was taken more than
/// [`SEEN_KEPT_S`] ago, then take each directory (busiest first) with at least
/// `min_requests` signed requests, an `https://` origin neither `named` nor
/// already taken, while the list holds fewer than `max`.
pub fn take_seen(list: &mut SeenList, busiest: &[(String, u64)], named: &[String], max: usize, min_requests: u64, now_s: i64) -> Taken {
    let mut taken = Taken::default();
    list.directories.retain(|d| {
        let keep = !named.contains(&d.origin) && crate::ranges::epoch_seconds(&d.taken).is_some_and(|t| now_s - t < SEEN_KEPT_S);
        if !keep {
            taken.dropped.push(d.origin.clone());
        }
        keep
    });
    let mut by_use: Vec<&(String, u64)> = busiest.iter().collect();
    by_use.sort_by_key(|d| std::cmp::Reverse(d.1));
    for (directory, requests) in by_use {
        let Some(origin) = crate::signature::directory_origin(directory) else { continue };
        if *requests < min_requests || named.contains(&origin) || list.directories.iter().any(|d| d.origin == origin) {
            continue;
        }
        if list.directories.len() >= max {
            taken.full.push((origin, *requests));
            continue;
        }
        let d = SeenDirectory { origin, taken: crate::ranges::rfc3339(now_s), requests: *requests };
        list.directories.push(d.clone());
        taken.added.push(d);
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

    #[test]
    fn a_directory_is_kept_only_with_a_usable_key_and_within_its_bounds() {
        let good = format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"{X}"}},{{"kty":"RSA","n":"x","e":"AQAB"}}]}}"#);
        let kept = check("https://agent.example", good.as_bytes(), "2026-12-05T10:00:00Z").unwrap();
        assert_eq!(kept.keys, 1);
        assert!(check("https://agent.example", br#"{"keys":[{"kty":"RSA","n":"x","e":"AQAB"}]}"#, "t").unwrap_err().contains("no Ed25519 key"));
        assert!(check("https://agent.example", b"<html>", "t").unwrap_err().contains("not JSON"));
        let big = vec![b' '; DIRECTORY_MAX_BYTES + 1];
        assert!(check("https://agent.example", &big, "t").unwrap_err().contains("64 KiB"));
        let many: Vec<String> = (0..33).map(|_| format!(r#"{{"kty":"OKP","crv":"Ed25519","x":"{X}"}}"#)).collect();
        assert!(check("https://agent.example", format!(r#"{{"keys":[{}]}}"#, many.join(",")).as_bytes(), "t").unwrap_err().contains("at most 32"));
    }

    #[test]
    fn the_seen_list_takes_the_busiest_new_directories_up_to_its_bound() {
        const NOW: i64 = 1_780_000_000;
        let mut list = SeenList::default();
        let busiest = vec![
            ("https://few.example".to_string(), 5),
            ("https://busy.example".to_string(), 900),
            ("https://named.example".to_string(), 5000),
            ("http://plain.example".to_string(), 800),
            ("https://next.example".to_string(), 300),
            ("https://third.example".to_string(), 200),
        ];
        let named = vec!["https://named.example".to_string()];
        let taken = take_seen(&mut list, &busiest, &named, 2, 100, NOW);
        let origins = |v: &[SeenDirectory]| v.iter().map(|d| d.origin.clone()).collect::<Vec<_>>();
        assert_eq!(origins(&taken.added), ["https://busy.example", "https://next.example"], "busiest first, named and plain http left out");
        assert_eq!(taken.full, [("https://third.example".to_string(), 200)], "past the bound: said, not taken");
        assert!(take_seen(&mut list, &busiest, &named, 2, 100, NOW + 86_400).added.is_empty(), "a directory is taken once");
        // kept, read back; a broken or doubled list is not trusted
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SEEN_FILE), serde_json::to_string(&list).unwrap()).unwrap();
        assert_eq!(seen(dir.path()), list);
        let mut doubled = list.clone();
        doubled.directories.push(list.directories[0].clone());
        doubled.directories.push(SeenDirectory { origin: "https://x.example/path".into(), taken: "t".into(), requests: 1 });
        std::fs::write(dir.path().join(SEEN_FILE), serde_json::to_string(&doubled).unwrap()).unwrap();
        assert_eq!(origins(&seen(dir.path()).directories), ["https://busy.example", "https://next.example"]);
        std::fs::write(dir.path().join(SEEN_FILE), "{").unwrap();
        assert_eq!(seen(dir.path()), SeenList::default());
        // named since: dropped; a month on: dropped, and the place taken again
        let now_named = vec!["https://named.example".to_string(), "https://next.example".to_string()];
        let taken = take_seen(&mut list, &busiest, &now_named, 2, 100, NOW + 86_400);
        assert_eq!(taken.dropped, ["https://next.example"]);
        assert_eq!(origins(&taken.added), ["https://third.example"]);
        let taken = take_seen(&mut list, &[("https://fourth.example".to_string(), 150)], &now_named, 2, 100, NOW + SEEN_KEPT_S);
        assert_eq!(taken.dropped, ["https://busy.example"], "taken a month ago");
        assert_eq!(origins(&taken.added), ["https://fourth.example"]);
    }

    #[test]
    fn fetch_seen_is_checked_with_its_defaults() {
        let load = |fetch_seen: &str| {
            crate::load_str(
                "t.yaml",
                &format!("site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue: {{builtin: false}}\nmodule: {{signatures: {{fetch_seen: {fetch_seen}}}}}\n"),
            )
        };
        let policy = load("{status: 'http://127.0.0.1/crawlward-status'}").unwrap();
        let f = policy.module.as_ref().and_then(|m| m.signatures.as_ref()).and_then(|s| s.fetch_seen.clone()).unwrap();
        assert_eq!((f.status.as_str(), f.max, f.min_requests), ("http://127.0.0.1/crawlward-status", 4, 100));
        assert!(policy.seen_directories.is_empty(), "load_str reads no list");
        let e = load("{status: '127.0.0.1/crawlward-status', max: 40, min_requests: 0}").unwrap_err().to_string();
        for (at, says) in [
            ("module.signatures.fetch_seen.status", "\"127.0.0.1/crawlward-status\" is not an http:// or https:// URL"),
            ("module.signatures.fetch_seen.max", "40: from 1 to 16 directories"),
            ("module.signatures.fetch_seen.min_requests", "at least 1"),
        ] {
            assert!(e.contains(&format!("(at {at})")) && e.contains(says), "{at}: {e}");
        }
    }

    #[test]
    fn a_replay_zone_is_split_between_at_most_256_directories() {
        let load = |named: usize, max: usize| {
            let directories: Vec<String> = (0..named).map(|i| format!("https://d{i}.example")).collect();
            crate::load_str(
                "t.yaml",
                &format!(
                    "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue: {{builtin: false}}\nmodule: {{signatures: {{replay_zone: 1m, directories: [{}], fetch_seen: {{status: 'http://127.0.0.1/s', max: {max}}}}}}}\n",
                    directories.join(", ")
                ),
            )
        };
        assert!(load(240, 16).is_ok());
        let e = load(241, 16).unwrap_err().to_string();
        assert!(
            e.contains("(at module.signatures.replay_zone)")
                && e.contains("up to 257 directories (241 named, and fetch_seen.max): a replay zone is split between at most 256"),
            "{e}"
        );
    }

    #[test]
    fn kept_copies_round_trip_into_the_key_file_the_module_reads() {
        let dir = tempfile::tempdir().unwrap();
        let origin = "https://agent.example:8443";
        assert_eq!(file_name(origin), "signature-directory-agent.example_8443.json");
        assert_eq!(url(origin), "https://agent.example:8443/.well-known/http-message-signatures-directory");
        let body = format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"{X}"}}]}}"#);
        let copy = check(origin, body.as_bytes(), "2026-12-05T10:00:00Z").unwrap();
        std::fs::write(dir.path().join(file_name(origin)), serde_json::to_string(&copy).unwrap()).unwrap();
        assert_eq!(kept(dir.path(), origin), Some(copy.clone()));
        assert_eq!(kept(dir.path(), "https://other.example"), None);
        let file = key_file("generated by crawlward", std::slice::from_ref(&copy), &[]);
        let ring = KeyRing::from_keys_file(&file, false).unwrap();
        assert!(ring.get(origin, "k1").is_some());
        assert_eq!(ring.origins(), [origin.to_string()]);
        assert!(ring.named(origin));
        let ring = KeyRing::from_keys_file(&key_file("g", &[copy], &[origin.to_string()]), false).unwrap();
        assert!(ring.get(origin, "k1").is_some() && !ring.named(origin), "taken from traffic: it verifies, and names no signer");
    }
}
