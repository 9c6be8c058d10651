//! `crawlward update-ranges` against range files served by a local HTTP
//! server: downloads, keeps the last good copy on failure, re-renders, and
//! tests and reloads only when something changed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Routes = Arc<Mutex<HashMap<String, (u16, String)>>>;

/// A tiny HTTP/1.0 server on 127.0.0.1. `/silent` never answers (for timeouts; it
/// gives up after 5 s). A 3xx route's body is its Location. The thread ends with
/// the test process.
fn serve() -> (u16, Routes) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
    let r = routes.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let routes = r.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]);
                let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
                if path == "/silent" {
                    std::thread::sleep(Duration::from_secs(5));
                    return;
                }
                let (status, body) = routes.lock().unwrap().get(&path).cloned().unwrap_or((404, "not found".into()));
                if (300..400).contains(&status) {
                    let _ = write!(conn, "HTTP/1.0 {status} X\r\nLocation: {body}\r\nContent-Length: 0\r\n\r\n");
                    return;
                }
                let _ = write!(conn, "HTTP/1.0 {status} X\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            });
        }
    });
    (port, routes)
}

fn google_format(prefixes: &[&str]) -> String {
    let items: Vec<String> =
        prefixes.iter().map(|p| if p.contains(':') { format!("{{\"ipv6Prefix\": \"{p}\"}}") } else { format!("{{\"ipv4Prefix\": \"{p}\"}}") }).collect();
    format!("{{\"creationTime\": \"2026-11-29T10:00:00.000000\", \"prefixes\": [{}]}}", items.join(", "))
}

/// The tests' files list documentation networks (192.0.2.0/24, 2001:db8::/48):
/// the test suites' mode lets a range file hold them.
fn crawlward() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crawlward"));
    c.env("CRAWLWARD_TEST_RANGES", "1");
    c
}

fn update(policy: &Path, out: &Path, test: &str, reload: &str) -> Output {
    update_with(crawlward(), policy, out, test, reload)
}

fn update_with(mut command: Command, policy: &Path, out: &Path, test: &str, reload: &str) -> Output {
    command
        .args(["update-ranges"])
        .arg(policy)
        .arg("--out")
        .arg(out)
        .args(["--timeout", "1", "--test-command", test, "--reload-command", reload])
        .output()
        .unwrap()
}

/// A policy in `dir` without the built-in catalogue (no download leaves the
/// machine), its ranges under `dir`, and `rest` appended (more of `catalogue`,
/// then other sections).
fn local_policy(dir: &Path, rest: &str) -> std::path::PathBuf {
    let policy = dir.join("policy.yaml");
    let head = format!(
        "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue:\n  builtin: false\n  ranges_dir: {}/ranges\n",
        dir.display()
    );
    std::fs::write(&policy, head + rest).unwrap();
    policy
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn downloads_keeps_last_good_and_reloads_only_on_change() {
    let (port, routes) = serve();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue:\n  builtin: false\n  ranges_dir: {d}/ranges\n  agents:\n    - {{name: Testbot, operator: Test, purpose: search, ua: Testbot, ranges_url: \"http://127.0.0.1:{port}/testbot.json\", source: test}}\n    - {{name: Brokenbot, operator: Test, purpose: search, ua: Brokenbot, ranges_url: \"http://127.0.0.1:{port}/broken.json\", source: test}}\n    - {{name: Slowbot, operator: Test, purpose: search, ua: Slowbot, ranges_url: \"http://127.0.0.1:{port}/silent\", source: test}}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let out = dir.join("conf");
    let tested = dir.join("tested");
    let reloaded = dir.join("reloaded");
    let test_cmd = format!("touch {}", tested.display());
    let reload_cmd = format!("touch {}", reloaded.display());
    routes.lock().unwrap().insert("/testbot.json".into(), (200, google_format(&["192.0.2.0/24", "2001:db8::/48"])));

    // 1. a first download; one file 404s, one server never answers
    let o = update(&policy, &out, &test_cmd, &reload_cmd);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains(&format!("changed   http://127.0.0.1:{port}/testbot.json: +2 -0, 2 networks")), "{stdout}");
    assert!(stdout.contains(&format!("failed    http://127.0.0.1:{port}/broken.json: ")), "{stdout}");
    assert!(stdout.contains("404"), "{stdout}");
    assert!(stdout.contains(&format!("failed    http://127.0.0.1:{port}/silent: ")), "{stdout}");
    assert!(stdout.contains("no copy: its agents stay unverified"), "{stdout}");
    assert!(tested.exists() && reloaded.exists(), "a change is tested and reloaded: {stdout}");
    let catalogue = std::fs::read_to_string(out.join("crawlward-catalogue.json")).unwrap();
    assert!(catalogue.contains("\"192.0.2.0/24\""), "{catalogue}");
    let stored = std::fs::read_to_string(dir.join("ranges/127.0.0.1_").to_str().unwrap().to_string() + &format!("{port}_testbot.json")).unwrap();
    assert!(stored.contains("\"published\": \"2026-11-29T10:00:00.000000\""), "{stored}");

    // 2. nothing changed: no test, no reload; the kept copy, as it was, gets the
    //    time of the check (the module's crawlward_ranges_age_seconds)
    std::fs::remove_file(&tested).unwrap();
    std::fs::remove_file(&reloaded).unwrap();
    let kept = dir.join(format!("ranges/127.0.0.1_{port}_testbot.json"));
    let content = std::fs::read(&kept).unwrap();
    let long_ago = std::time::UNIX_EPOCH + Duration::from_secs(946_684_800);
    std::fs::File::options().write(true).open(&kept).unwrap().set_modified(long_ago).unwrap();
    let o = update(&policy, &out, &test_cmd, &reload_cmd);
    let stdout = text(&o.stdout);
    assert!(stdout.contains(&format!("unchanged http://127.0.0.1:{port}/testbot.json: 2 networks\n")), "{stdout}");
    assert!(stdout.contains("the rendered configuration is unchanged: nginx is not reloaded"), "{stdout}");
    assert!(!tested.exists() && !reloaded.exists());
    assert_eq!(std::fs::read(&kept).unwrap(), content, "the kept copy is not rewritten");
    let checked = std::fs::metadata(&kept).unwrap().modified().unwrap();
    assert!(checked.elapsed().unwrap_or_default() < Duration::from_secs(60), "the check is its time: {checked:?}");

    // 3. testbot now serves garbage (kept: last good copy), broken is fixed, and nginx -t fails:
    //    the previous files come back and nothing is reloaded
    routes.lock().unwrap().insert("/testbot.json".into(), (200, "<html>maintenance</html>".into()));
    routes.lock().unwrap().insert("/broken.json".into(), (200, google_format(&["198.51.100.0/24"])));
    let before = std::fs::read_to_string(out.join("crawlward-catalogue.json")).unwrap();
    let o = update(&policy, &out, "false", &reload_cmd);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains(&format!("failed    http://127.0.0.1:{port}/testbot.json: line 1: invalid CIDR \"<html>maintenance</html>\"")), "{stdout}");
    assert!(stdout.contains("; keeping the copy from 20"), "{stdout}");
    assert!(stdout.contains("(2 networks)"), "{stdout}");
    assert!(stdout.contains(&format!("changed   http://127.0.0.1:{port}/broken.json: +1 -0, 1 networks")), "{stdout}");
    assert!(text(&o.stderr).starts_with("error: `false` failed, so the previous files are back and nginx is not reloaded"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(out.join("crawlward-catalogue.json")).unwrap(), before);
    assert!(!reloaded.exists());
    // the range file written for broken.json is taken back too: the last good set stays whole
    assert!(!dir.join(format!("ranges/127.0.0.1_{port}_broken.json")).exists(), "a refused run leaves no new range file");

    // 4. explain uses the downloaded copies
    let o = crawlward().args(["explain"]).arg(&policy).args(["--ua", "Testbot/1.0", "--ip", "192.0.2.9", "--url", "/", "--format", "json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{v:#}");
}

#[test]
fn follows_redirects_and_says_when_a_file_moved_for_good() {
    let (port, routes) = serve();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = dir.join("policy.yaml");
    let agents = [("Movedbot", "old/moved.json"), ("Hopbot", "hop.json"), ("Gonebot", "gone.json"), ("Loopbot", "loop.json"), ("Awaybot", "away.json")];
    let mut yaml = format!(
        "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue:\n  builtin: false\n  ranges_dir: {}/ranges\n  agents:\n",
        dir.display()
    );
    for (name, path) in agents {
        yaml.push_str(&format!(
            "    - {{name: {name}, operator: Test, purpose: search, ua: {name}, ranges_url: \"http://127.0.0.1:{port}/{path}\", source: test}}\n"
        ));
    }
    std::fs::write(&policy, yaml).unwrap();
    {
        let mut r = routes.lock().unwrap();
        // a permanent move, with a Location relative to the server
        r.insert("/old/moved.json".into(), (301, "/new/moved.json".into()));
        r.insert("/new/moved.json".into(), (200, google_format(&["192.0.2.0/24"])));
        // a temporary redirect, relative to the directory
        r.insert("/hop.json".into(), (302, "hop-target.json".into()));
        r.insert("/hop-target.json".into(), (200, google_format(&["198.51.100.0/24"])));
        // the old Google URLs: 200 and a note instead of the networks
        r.insert("/gone.json".into(), (200, r#"{"Action needed": "update the location you're fetching from to <https://example.org/new.json>"}"#.into()));
        r.insert("/loop.json".into(), (307, "/loop.json".into()));
        // to a host of another domain, which whoever answers the URL chose
        r.insert("/away.json".into(), (302, format!("http://localhost:{port}/new/moved.json")));
    }
    let out = dir.join("conf");
    let o = update(&policy, &out, "true", "true");
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{stdout}{}", text(&o.stderr));
    assert!(
        stdout.contains(&format!(
            "changed   http://127.0.0.1:{port}/old/moved.json: +1 -0, 1 networks (moved: HTTP 301 to http://127.0.0.1:{port}/new/moved.json; point its ranges_url there)"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "changed   http://127.0.0.1:{port}/hop.json: +1 -0, 1 networks (redirected: HTTP 302 to http://127.0.0.1:{port}/hop-target.json)"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "failed    http://127.0.0.1:{port}/gone.json: no networks in the file; the file says \"Action needed: update the location you're fetching from to <https://example.org/new.json>\"; no copy"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("failed    http://127.0.0.1:{port}/away.json: HTTP 302 from http://127.0.0.1:{port}/away.json to http://localhost:{port}/new/moved.json: not following a redirect to localhost, outside 127.0.0.1's domain and the hosts of the catalogue's lists")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("failed    http://127.0.0.1:{port}/loop.json: more than 5 redirects (redirected: HTTP 307, 307, 307, 307, 307 to http://127.0.0.1:{port}/loop.json)")), "{stdout}");
    // the copy is kept under the catalogue's URL, so the catalogue finds it
    let kept = std::fs::read_to_string(dir.join(format!("ranges/127.0.0.1_{port}_old_moved.json"))).unwrap();
    assert!(kept.contains(&format!("\"url\": \"http://127.0.0.1:{port}/old/moved.json\"")) && kept.contains("192.0.2.0/24"), "{kept}");
    let o = crawlward().args(["explain"]).arg(&policy).args(["--ua", "Movedbot/1.0", "--ip", "192.0.2.9", "--url", "/", "--format", "json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{v:#}");
}

#[test]
fn catalogue_feeds_add_agents_and_never_change_the_catalogues() {
    let (port, routes) = serve();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue:\n  ranges_dir: {d}/ranges\n  feeds:\n    - {{url: \"http://127.0.0.1:{port}/robots.json\"}}\n    - {{url: \"http://127.0.0.1:{port}/v1/crawlers\"}}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    {
        let mut r = routes.lock().unwrap();
        // ai.robots.txt's form: a new agent, and GPTBot, which the catalogue has
        r.insert(
            "/robots.json".into(),
            (200, r#"{"Zyxfeedbot": {"operator": "Zyx", "function": "AI Search Crawlers", "description": "x"}, "GPTBot": {"operator": "OpenAI", "function": "AI Assistants", "description": "x"}}"#.into()),
        );
        // a crawler list: a new agent with its ranges, Googlebot claimed from everywhere, an
        // expression crawlward cannot match
        r.insert(
            "/v1/crawlers".into(),
            (
                200,
                r#"{"version": "1", "ttl": 86400, "policy": {}, "agents": [
                {"name": "Qwxlistbot", "operator": "qwx.example", "purpose": "training", "ua": "Qwxlistbot\\/", "ranges": ["192.0.2.0/24"]},
                {"name": "Googlebot", "operator": "evil", "purpose": "training", "ua": "Googlebot", "ranges": ["8.8.8.0/24"]},
                {"name": "Wildbot", "operator": "x", "purpose": "search", "ua": "Wild.*bot", "ranges": []}
            ], "robots": ""}"#
                    .into(),
            ),
        );
    }
    let out = dir.join("conf");
    // (the built-in agents' range files are out of reach here: those downloads fail, exit 5)
    let o = update(&policy, &out, "true", "true");
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains(&format!("changed   feed http://127.0.0.1:{port}/robots.json: 2 agents (+2 -0)")), "{stdout}");
    assert!(
        stdout.contains(&format!("changed   feed http://127.0.0.1:{port}/v1/crawlers: 2 agents (+2 -0); 1 refused: Wildbot: the expression \"Wild.*bot\" is not a set of product names crawlward can match")),
        "{stdout}"
    );
    let explain = |ua: &str, ip: &str| {
        let o = crawlward().args(["explain"]).arg(&policy).args(["--ua", ua, "--ip", ip, "--url", "/", "--format", "json"]).output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    // the new agents are in the catalogue, with what the feeds say
    let v = explain("Zyxfeedbot/1.0", "198.51.100.1");
    assert_eq!((v["agent"].as_str(), v["purpose"].as_str()), (Some("Zyxfeedbot"), Some("ai-search")), "{v:#}");
    let v = explain("Qwxlistbot/2.0", "192.0.2.7");
    assert_eq!((v["agent"].as_str(), v["purpose"].as_str(), v["verdict"].as_str()), (Some("Qwxlistbot"), Some("ai-training"), Some("verified")), "{v:#}");
    // the catalogue's own agents keep their entries: Googlebot from 8.8.8.8 is no verified Googlebot
    let v = explain("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "8.8.8.8");
    assert_eq!((v["purpose"].as_str(), v["verdict"].as_str()), (Some("search"), Some("spoofed")), "{v:#}");
    let v = explain("GPTBot/1.2", "198.51.100.1");
    assert_eq!(v["purpose"].as_str(), Some("ai-training"), "{v:#}");
    let catalogue = std::fs::read_to_string(out.join("crawlward-catalogue.json")).unwrap();
    assert!(catalogue.contains("\"Qwxlistbot\"") && !catalogue.contains("\"8.8.8.0/24\""), "{catalogue}");

    // the same feeds again: unchanged, nothing rewritten
    let o = update(&policy, &out, "false", "false");
    let stdout = text(&o.stdout);
    assert!(stdout.contains(&format!("unchanged feed http://127.0.0.1:{port}/robots.json: 2 agents")), "{stdout}");
    assert!(stdout.contains("the rendered configuration is unchanged: nginx is not reloaded"), "{stdout}");

    // a feed that fails keeps its last copy, and its agents
    routes.lock().unwrap().insert("/robots.json".into(), (500, "oops".into()));
    let o = update(&policy, &out, "true", "true");
    let stdout = text(&o.stdout);
    assert!(stdout.contains(&format!("failed    feed http://127.0.0.1:{port}/robots.json: ")) && stdout.contains("keeping the copy from 20"), "{stdout}");
    assert_eq!(explain("Zyxfeedbot/1.0", "198.51.100.1")["agent"].as_str(), Some("Zyxfeedbot"));

    // a feed whose every entry is refused is a failed download too: the two agents stay
    routes.lock().unwrap().insert(
        "/v1/crawlers".into(),
        (200, r#"{"version": "1", "agents": [{"name": "Wildbot", "operator": "x", "purpose": "search", "ua": "Wild.*bot", "ranges": []}]}"#.into()),
    );
    let o = update(&policy, &out, "true", "true");
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(&format!("failed    feed http://127.0.0.1:{port}/v1/crawlers: the feed gives no agent crawlward can use; 1 refused: Wildbot")),
        "{stdout}"
    );
    assert_eq!(explain("Qwxlistbot/2.0", "192.0.2.7")["agent"].as_str(), Some("Qwxlistbot"));
}

#[test]
fn a_list_of_special_purpose_or_too_many_networks_is_refused() {
    let (port, routes) = serve();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = dir.join("policy.yaml");
    let agent = |name: &str| {
        format!("    - {{name: {name}, operator: Test, purpose: search, ua: {name}, ranges_url: \"http://127.0.0.1:{port}/{name}.json\", source: test}}\n")
    };
    std::fs::write(
        &policy,
        format!(
            "site: {{canonical_url: https://example.org, upstream_workers: 4}}\nrobots: {{}}\ncatalogue:\n  builtin: false\n  ranges_dir: {d}/ranges\n  agents:\n{}{}{}",
            agent("Loopbot"),
            agent("Widebot"),
            agent("Realbot"),
            d = dir.display()
        ),
    )
    .unwrap();
    let wide: Vec<String> = (0..256).map(|a| format!("{a}.0.0.0/8")).collect();
    let wide: Vec<&str> = wide.iter().map(String::as_str).collect();
    {
        let mut r = routes.lock().unwrap();
        r.insert("/Loopbot.json".into(), (200, google_format(&["66.249.64.0/27", "127.0.0.0/16", "10.1.0.0/16"])));
        r.insert("/Widebot.json".into(), (200, google_format(&wide)));
        r.insert("/Realbot.json".into(), (200, google_format(&["66.249.64.0/27"])));
    }
    // outside the test suites' mode, as on a server
    let mut plain = Command::new(env!("CARGO_BIN_EXE_crawlward"));
    plain.env_remove("CRAWLWARD_TEST_RANGES");
    let o = update_with(plain, &policy, &dir.join("conf"), "true", "true");
    let stdout = text(&o.stdout);
    assert!(stdout.contains(&format!("failed    http://127.0.0.1:{port}/Loopbot.json: network 127.0.0.0/16 is special-purpose")), "{stdout}");
    assert!(
        stdout.contains(&format!("failed    http://127.0.0.1:{port}/Widebot.json: the networks cover 4294967296 IPv4 addresses, more than the 1048576")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("changed   http://127.0.0.1:{port}/Realbot.json: +1 -0, 1 networks")), "{stdout}");
    assert!(!dir.join(format!("ranges/127.0.0.1_{port}_Loopbot.json")).exists() && !dir.join(format!("ranges/127.0.0.1_{port}_Widebot.json")).exists());
    // nobody from 127.0.0.1 or anywhere else is verified as Widebot or Loopbot
    for (ua, ip) in [("Widebot/1.0", "198.18.0.1"), ("Widebot/1.0", "8.8.8.8"), ("Loopbot/1.0", "127.0.0.1")] {
        let o = crawlward()
            .env_remove("CRAWLWARD_TEST_RANGES")
            .args(["explain"])
            .arg(&policy)
            .args(["--ua", ua, "--ip", ip, "--url", "/", "--format", "json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_ne!(v["verdict"], "verified", "{ua} from {ip}: {v}");
    }
}

#[test]
fn the_daily_run_prints_the_policys_warnings_as_render_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = local_policy(
        dir,
        "  agents:\n    - {name: Testbot, operator: Test, purpose: search, ua: Testbot, ranges: [66.249.64.0/27], source: test}\ncrawl_budget:\n  signed_in: [$cookie_session]\nmodule: {}\n",
    );
    let o = update(&policy, &dir.join("conf"), "true", "true");
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("warning: ") && stderr.contains("crawl_budget.signed_in[0]: $cookie_session is written by the client"),
        "{stderr}{}",
        text(&o.stdout)
    );
}

#[test]
fn a_reload_without_a_running_nginx_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = local_policy(dir, "");
    // what Debian's nginx -s reload says when nginx is not running
    let reload = r#"echo 'nginx: [error] invalid PID number "" in "/run/nginx.pid"' >&2; false"#;
    let o = update(&policy, &dir.join("conf"), "true", reload);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("caused by: nginx: [error] invalid PID number"), "{stderr}");
    assert!(stderr.contains("hint: nginx does not seem to be running (no master process to signal): the rendered files passed the test and take effect when nginx starts; pass --no-reload where nginx is not running"), "{stderr}");
}

/// The daily run piped into `head` (or a log reader that goes away) keeps
/// going: it renders, tests and reloads all the same, and exits as it would
/// have, instead of dying at its first line of output.
#[test]
fn a_closed_output_does_not_stop_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let policy = local_policy(dir, "  agents:\n    - {name: Testbot, operator: Test, purpose: search, ua: Testbot, ranges: [192.0.2.0/24], source: test}\n");
    let reloaded = dir.join("reloaded");
    let mut child = crawlward()
        .args(["update-ranges"])
        .arg(&policy)
        .arg("--out")
        .arg(dir.join("conf"))
        .args(["--test-command", "true", "--reload-command"])
        .arg(format!("touch {}", reloaded.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // no one reads: every line it writes meets a closed pipe
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(reloaded.exists(), "the run went on to the reload");
}
