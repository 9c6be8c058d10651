//! `crawlward analyze` as a whole binary: the classifier article's table from its eight
//! clients, logs in both formats, gzip, standard input, unparseable lines,
//! the search-crawler check and its exit code, JSON, labels and the suggestion.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name).display().to_string()
}

fn crawlward(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlward")).env("CRAWLWARD_TEST_RANGES", "1").current_dir(root()).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const POLICY: &str = "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {disallow: [/admin], disallow_params: [sort], crawl_delay: 10}\nclassifier: {auth_paths: [/login]}\n";

fn policy_file(dir: &Path) -> String {
    let p = dir.join("policy.yaml");
    std::fs::write(&p, POLICY).unwrap();
    p.display().to_string()
}

#[test]
fn seed_002s_table_from_its_eight_clients() {
    let o = crawlward(&["analyze", "nginx-conf/forge.yaml", "--aggregates", &data("seed002-clients.yaml"), "--labels", &data("seed002.labels")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let seed = std::fs::read_to_string(data("seed002-table.txt")).unwrap();
    // every block the seed's program prints (the table, the rung costs, the
    // one-signal screen, the routing, precision and false-positive rate, the
    // allowlist) is printed the same, character for character
    for block in seed.split("\n\n") {
        assert!(out.contains(block.trim_end()), "missing from the output:\n{block}\n--- output ---\n{out}");
    }
    // and the contributions add up to each score
    assert!(out.contains("resale-listing-republisher       0.28    0.22   0.10   0.16   0.07   0.07   0.90  crawl-delay"), "{out}");
    assert!(out.contains("academic-longitudinal-study      0.00    0.00   0.02   0.00   0.07   0.00   0.09"), "no negative zero: {out}");
}

#[test]
fn the_policy_moves_the_cut_points() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.yaml");
    std::fs::write(&p, "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nclassifier: {rate: {weight: 0.0}, ladder: [0.10, 0.20, 0.30, 0.40, 0.50, 0.60]}\n").unwrap();
    let o = crawlward(&["analyze", p.to_str().unwrap(), "--aggregates", &data("seed002-clients.yaml"), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["classifier"];
    assert_eq!(c["weights"]["rate"], 0.0);
    let resale = c["clients"].as_array().unwrap().iter().find(|x| x["name"] == "resale-listing-republisher").unwrap();
    // 0.90 less its rate contribution (0.28): 0.62, past the new L5 ceiling (0.60)
    assert_eq!(format!("{:.2}", resale["score"].as_f64().unwrap()), "0.62");
    assert_eq!(resale["placement"], "L6 block");
    assert_eq!(resale["contributions"]["rate"], 0.0);
    assert_eq!(format!("{:.2}", resale["subscores"]["rate"].as_f64().unwrap()), "1.00", "the sub-score is kept; only its weight is 0");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nclassifier: {ladder: [0.5, 0.4], novelty: {weight: 2}}\n",
    )
    .unwrap();
    let o = crawlward(&["analyze", bad.to_str().unwrap(), "--aggregates", &data("seed002-clients.yaml")]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("ladder must list six rising ceilings") && err.contains("weight must be from 0 to 1, not 2"), "{err}");
}

/// A small log: verified and spoofed Googlebot (t/ranges puts Google at 127.0.0.2),
/// a browser scraping sort variants, a scanner, robots.txt, a garbage line.
fn small_log() -> String {
    let g = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
    let mut s = String::new();
    let mut line = |ip: &str, min: u32, sec: u32, req: &str, status: u16, ua: &str| {
        s.push_str(&format!("{ip} - - [10/Oct/2026:13:{min:02}:{sec:02} +0000] \"{req} HTTP/1.1\" {status} 100 \"-\" \"{ua}\"\n"));
    };
    line("127.0.0.2", 0, 1, "GET /robots.txt", 200, g);
    for i in 0..5 {
        line("127.0.0.2", 1, i, &format!("GET /record/{i}"), 200, g);
    }
    line("127.0.0.2", 2, 0, "GET /record/9", 503, g);
    line("203.0.113.9", 3, 0, "GET /admin", 444, g);
    for i in 0..30 {
        line("198.51.100.7", 20 + i / 10, i % 60, &format!("GET /browse?sort={i}"), 200, chrome);
    }
    line("192.0.2.1", 40, 0, "GET /login", 200, "python-requests/2.31");
    s.push_str("this is not a log line\n");
    s
}

#[test]
fn logs_with_no_line_analyze_reads_are_an_error_not_an_empty_report() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    // the policy given where the log goes
    let o = crawlward(&["analyze", &policy, &policy, "--ranges-dir", "t/ranges"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "", "no report");
    let err = text(&o.stderr);
    assert!(err.contains("is an access log line that analyze reads (nginx's combined format, or crawlward_combined): nothing to analyze"), "{err}");
    assert!(err.contains(&format!("lines of {policy} is")), "{err}");
    // an empty log is no error: nothing was there to read
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let o = crawlward(&["analyze", &policy, empty.to_str().unwrap(), "--ranges-dir", "t/ranges"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("search-crawler check: nothing to check, the logs have no lines."), "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("check: ok"), "an empty log passes no check: {}", text(&o.stdout));
    // alone, an empty log is still the log (not a policy), and a log that is not there is a log that cannot be read
    let o = crawlward(&["analyze", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = crawlward(&["analyze", "nosuch.log"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("error: cannot read nosuch.log\n"), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "", "no report of nothing");
    let o = crawlward(&["analyze", &policy, "nosuch.log", "--ranges-dir", "t/ranges"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "", "no report of nothing");
}

#[test]
fn a_log_each_crawler_and_seed_000s_check() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let log = dir.path().join("access.log");
    std::fs::write(&log, small_log()).unwrap();
    let o = crawlward(&["analyze", &policy, log.to_str().unwrap(), "--ranges-dir", "t/ranges"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(6), "the search-crawler check fails the run: {out}\n{}", text(&o.stderr));
    assert!(out.contains(" 0.00 "), "{out}");
    assert!(!out.contains("-0.00"), "no negative zero: {out}");
    assert!(out.contains("crawlward analyze: 40 lines read, 39 parsed, 1 unparseable"), "{out}");
    assert!(out.contains(&format!("address                          1  {}:40: this is not a log line", log.display())), "{out}");
    assert!(out.contains("search-crawler check: POLICY MISTAKES"), "{out}");
    assert!(out.contains("verified Googlebot got 503:1 (first at"), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("Googlebot ") && l.contains(" 7 ") && l.ends_with("200:6 503:1 444:1")
            || l.starts_with("Googlebot ") && l.contains("200:6 444:1 503:1")),
        "{out}"
    );
    // the spoofed claim: 6 verified lines and the 203.0.113.9 one
    let v = json(&policy, &log);
    let g = v["agents"].as_array().unwrap().iter().find(|a| a["agent"] == "Googlebot").unwrap();
    assert_eq!((g["requests"].as_u64(), g["verified"].as_u64(), g["spoofed"].as_u64()), (Some(8), Some(7), Some(1)));
    assert_eq!(g["disallowed"], 1, "the spoofed claim asked for /admin");
    // robots.txt ignored: the browser on ?sort= thirty times
    let by_address = v["robots_ignored"]["by_address"].as_array().unwrap();
    assert_eq!(by_address[0]["name"], "198.51.100.7");
    assert_eq!(by_address[0]["disallowed"], 30);
    assert_eq!(by_address[0]["fetched_robots"], false);
    // the classifier: the verified crawler is one client, named by its agent
    let clients = v["classifier"]["clients"].as_array().unwrap();
    let vg = clients.iter().find(|c| c["name"] == "verified:Googlebot").unwrap();
    assert_eq!(vg["requests"], 7);
    assert!(vg["honoured"].as_array().unwrap().iter().any(|h| h == "robots.txt"), "{vg}");
    let login = clients.iter().find(|c| c["name"] == "192.0.2.1").unwrap();
    assert_eq!(login["placement"], "routed: account controls", "all its requests are on classifier.auth_paths");
    assert_eq!(v["classifier"]["routed"][0], "192.0.2.1");
    assert_eq!(v["unparseable"][0]["reason"], "address");
}

/// The first thing a new user tries: the log they have, and no policy.
#[test]
fn a_log_alone_is_analysed_with_the_built_in_catalogue() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    std::fs::write(&log, small_log()).unwrap();
    let second = dir.path().join("access.log.1");
    std::fs::write(&second, "192.0.2.1 - - [10/Oct/2026:14:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl/8\"\n").unwrap();
    let o = crawlward(&["analyze", log.to_str().unwrap(), second.to_str().unwrap(), "--ranges-dir", "t/ranges"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(6), "the same search-crawler check: {out}\n{err}");
    assert!(err.starts_with("note: no policy given: analysing with the built-in catalogue") && err.contains("t/ranges"), "{err}");
    assert!(out.contains("crawlward analyze: 41 lines read, 40 parsed, 1 unparseable; policy the built-in catalogue"), "{out}");
    assert!(out.contains("verified Googlebot got 503:1"), "{out}");
    // the policy's place may hold a log only: any other file is a policy, and a bad one is refused
    let o = crawlward(&["analyze", second.to_str().unwrap(), log.to_str().unwrap(), "--ranges-dir", "t/ranges"]);
    assert_eq!(o.status.code(), Some(6), "{}", text(&o.stderr));
    let o = crawlward(&["analyze", "README.md", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
}

/// A log where a policy goes, for a command that needs one: one sentence,
/// not the log echoed back (12 MB of it for a 62,000-line log).
#[test]
fn a_log_for_a_policy_is_refused_in_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    std::fs::write(&log, small_log().repeat(500)).unwrap();
    let out = dir.path().join("out");
    for cmd in [&["check"][..], &["render", "--out", out.to_str().unwrap()]] {
        let o = crawlward(&[&[cmd[0], log.to_str().unwrap()], &cmd[1..]].concat());
        let cmd = cmd[0];
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {err}");
        assert!(err.len() < 1000, "{cmd}: {} bytes of error", err.len());
        assert!(err.contains("this is not a policy") && err.contains("crawlward analyze access.log"), "{cmd}: {err}");
    }
    // nor for the other files a command reads
    let o = crawlward(&["analyze", "nginx-conf/catalogue.yaml", "--aggregates", log.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.len() < 400 && err.contains("is an access log: --aggregates takes a YAML file of per-client totals") && !err.contains("struct"),
        "{} bytes: {err}",
        err.len()
    );
    let o = crawlward(&["explain", "nginx-conf/catalogue.yaml", "--requests", log.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.len() < 400 && err.contains(":1: not a request: each line is a JSON object such as") && !err.contains("struct"), "{} bytes: {err}", err.len());
    assert!(err.contains("; this is an access log: crawlward analyze reads those"), "{err}");
}

fn json(policy: &str, log: &Path) -> serde_json::Value {
    let o = crawlward(&["analyze", policy, log.to_str().unwrap(), "--ranges-dir", "t/ranges", "--format", "json"]);
    assert!(o.status.code() == Some(6) || o.status.code() == Some(0), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn gzip_several_files_and_standard_input_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let log = small_log();
    let half = log.lines().count() / 2;
    let first: String = log.lines().take(half).map(|l| format!("{l}\n")).collect();
    let second: String = log.lines().skip(half).map(|l| format!("{l}\n")).collect();
    let gz = dir.path().join("access.log.1.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(first.as_bytes()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let plain = dir.path().join("access.log");
    std::fs::write(&plain, &second).unwrap();
    let whole = dir.path().join("whole.log");
    std::fs::write(&whole, &log).unwrap();
    let both = crawlward(&["analyze", &policy, gz.to_str().unwrap(), plain.to_str().unwrap(), "--ranges-dir", "t/ranges", "--format", "json"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_crawlward"))
        .env("CRAWLWARD_TEST_RANGES", "1")
        .current_dir(root())
        .args(["analyze", &policy, "-", "--ranges-dir", "t/ranges", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(log.as_bytes()).unwrap();
    let stdin = child.wait_with_output().unwrap();
    let one = crawlward(&["analyze", &policy, whole.to_str().unwrap(), "--ranges-dir", "t/ranges", "--format", "json"]);
    let strip = |o: &Output| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["inputs"] = serde_json::Value::Null;
        v["suggestion"] = serde_json::Value::Null;
        v["unparseable"][0]["at"] = serde_json::Value::Null;
        v["checks"]["verified_search_refused"][0]["first_at"] = serde_json::Value::Null;
        v
    };
    assert!(strip(&both) == strip(&one), "a gzip file and a plain one in a row read as one log");
    assert!(strip(&stdin) == strip(&one), "standard input reads as a file");
    let v: serde_json::Value = serde_json::from_slice(&both.stdout).unwrap();
    assert_eq!(v["inputs"][0]["lines"].as_u64().unwrap() + v["inputs"][1]["lines"].as_u64().unwrap(), 40);
}

#[test]
fn a_missing_file_is_an_io_error_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let log = dir.path().join("access.log");
    std::fs::write(&log, "192.0.2.1 - - [10/Oct/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"curl/8\"\n").unwrap();
    let o = crawlward(&["analyze", &policy, "/nonexistent/access.log", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("error: cannot read /nonexistent/access.log"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("1 lines read, 1 parsed"), "{}", text(&o.stdout));
}

#[test]
fn a_bad_labels_file_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let labels = dir.path().join("labels");
    std::fs::write(&labels, "# judged by hand\n198.51.100.7 abusive\n192.0.2.1 friendly\n").unwrap();
    let o = crawlward(&["analyze", "nginx-conf/forge.yaml", "--aggregates", &data("seed002-clients.yaml"), "--labels", labels.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains(":3: unknown label \"friendly\": expected abusive or legitimate"), "{}", text(&o.stderr));
}

#[test]
fn the_crawlward_format_and_the_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let log = dir.path().join("access.log");
    let mut s = String::new();
    // a self-declared bot hammering sort variants, answered 429 by the module's budget
    for i in 0..400 {
        s.push_str(&format!(
            "198.51.100.7 - - [10/Oct/2026:13:{:02}:{:02} +0000] \"GET /browse?sort={i} HTTP/1.1\" {} 10 \"-\" \"Rivetbot/1.0\" rt=0.010 urt=\"0.008\" agent=Rivetbot verdict=unverified action=allow refusal={} facets=0 budget={}\n",
            i / 60,
            i % 60,
            if i % 2 == 0 { 200 } else { 429 },
            if i % 2 == 0 { "" } else { "budget" },
            if i % 2 == 0 { "" } else { "address" },
        ));
    }
    std::fs::write(&log, &s).unwrap();
    let frag = dir.path().join("suggest.yaml");
    let o = crawlward(&["analyze", &policy, log.to_str().unwrap(), "--window", "10m", "--format", "json", "--suggest", frag.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["formats"]["crawlward_combined"], 400);
    let a = v["agents"].as_array().unwrap().iter().find(|a| a["agent"] == "unknown-bot").unwrap();
    assert_eq!(a["refusals"]["budget address"], 200);
    assert_eq!(a["statuses"]["429"], 200);
    assert!((a["upstream_seconds"].as_f64().unwrap() - 3.2).abs() < 1e-6);
    assert_eq!(v["crawler_share"]["time_source"], "upstream");
    assert_eq!(v["crawler_share"]["time_share"], 1.0);
    // a ten-minute window: 40 requests a minute, every one a new URL, robots.txt never read
    let c = &v["classifier"]["clients"][0];
    assert_eq!(c["placement"], "L4 interstitial", "{c}");
    let fragment = std::fs::read_to_string(&frag).unwrap();
    assert!(fragment.starts_with("# Suggested by `crawlward analyze`"), "{fragment}");
    assert!(
        fragment
            .contains("\nactions:\n  unknown-bot: throttle    # was allow; 1 client (Rivetbot), every one at L3 or above; throttle needs rate_limits.throttle"),
        "{fragment}"
    );
    assert!(fragment.contains("deny 198.51.100.7;"), "{fragment}");
    // the fragment is YAML the policy takes
    let merged = format!("{POLICY}rate_limits: {{classes: [{{name: default, rate: 60r/m}}], throttle: {{rate: 10r/m}}}}\n{fragment}");
    let p2 = dir.path().join("merged.yaml");
    std::fs::write(&p2, merged).unwrap();
    let o = crawlward(&["explain", p2.to_str().unwrap(), "--ua", "Rivetbot/1.0", "--ip", "198.51.100.1", "--url", "/browse"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("throttle"), "{}", text(&o.stdout));
}

#[test]
fn a_spoofed_claim_never_gets_its_purpose_limited() {
    // a scraper claiming Googlebot from its own address hammers sort variants, while the
    // real Googlebot (an address in Google's published ranges) crawls as it does
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let ua = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    let mut spoofed = String::new();
    for i in 0..400 {
        spoofed.push_str(&format!(
            "198.51.100.8 - - [10/Oct/2026:13:{:02}:{:02} +0000] \"GET /browse?sort={i} HTTP/1.1\" 200 10 \"-\" \"{ua}\"\n",
            i / 60,
            i % 60
        ));
    }
    let mut verified = spoofed.clone();
    for i in 0..5 {
        verified.push_str(&format!("66.249.66.1 - - [10/Oct/2026:13:{:02}:00 +0000] \"GET /record/{i} HTTP/1.1\" 200 10 \"-\" \"{ua}\"\n", i));
    }
    for (name, log) in [("spoofed only", &spoofed), ("with the verified crawler", &verified)] {
        let path = dir.path().join("access.log");
        std::fs::write(&path, log).unwrap();
        let frag = dir.path().join("suggest.yaml");
        let o = crawlward(&["analyze", &policy, path.to_str().unwrap(), "--window", "10m", "--format", "json", "--suggest", frag.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let c = v["classifier"]["clients"].as_array().unwrap().iter().find(|c| c["name"] == "198.51.100.8").unwrap().clone();
        assert_eq!(c["agent"], "Googlebot (spoofed)", "{name}: {c}");
        let fragment = std::fs::read_to_string(&frag).unwrap();
        assert!(!fragment.contains("\n  search:"), "{name}: {fragment}");
        assert!(fragment.contains("198.51.100.8") && fragment.contains("Googlebot (spoofed)"), "{name}: {fragment}");
    }
    // and were `search: throttle` written by hand, the throttle class is never the verified crawler's
    // (the impostor is the bot-blocker's: spoofed claims are refused with 444)
    let merged = format!("{POLICY}rate_limits: {{classes: [{{name: default, rate: 60r/m}}], throttle: {{rate: 10r/m}}}}\nactions: {{search: throttle}}\n");
    let p2 = dir.path().join("merged.yaml");
    std::fs::write(&p2, merged).unwrap();
    let explain = |ip: &str| text(&crawlward(&["explain", p2.to_str().unwrap(), "--ua", ua, "--ip", ip, "--url", "/browse", "--format", "json"]).stdout);
    let real: serde_json::Value = serde_json::from_str(&explain("66.249.66.1")).unwrap();
    let fake: serde_json::Value = serde_json::from_str(&explain("198.51.100.8")).unwrap();
    assert_eq!((real["verdict"].as_str(), real["limit_class"].as_str()), (Some("verified"), None), "{real}");
    assert_eq!((fake["verdict"].as_str(), fake["action"].as_str()), (Some("spoofed"), Some("block-444")), "{fake}");
}

#[test]
fn a_client_cannot_write_to_the_terminal_or_out_of_a_yaml_comment() {
    // nginx writes a User-Agent's control and non-ASCII bytes as \xHH: ESC [8m would hide what
    // follows on a terminal; U+2028 (E2 80 A8) ends a line for YAML
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let mut log = String::new();
    for (ip, ua) in [("198.51.100.7", r"\x1B[8mhidden/1.0"), ("198.51.100.8", r"evil\xE2\x80\xA8actions: {search: block}/1.0")] {
        for i in 0..400 {
            log.push_str(&format!("{ip} - - [10/Oct/2026:13:{:02}:{:02} +0000] \"GET /browse?sort={i} HTTP/1.1\" 200 10 \"-\" \"{ua}\"\n", i / 60, i % 60));
        }
    }
    log.push_str("192.0.2.1 - - [10/Oct/2026:13:55:36 +0000] \x1b[2J\u{2028}garbage\n");
    let path = dir.path().join("access.log");
    std::fs::write(&path, log).unwrap();
    let frag = dir.path().join("suggest.yaml");
    let o = crawlward(&["analyze", &policy, path.to_str().unwrap(), "--window", "10m", "--suggest", frag.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let fragment = std::fs::read_to_string(&frag).unwrap();
    for (what, out) in [("the report", text(&o.stdout)), ("the fragment", fragment.clone())] {
        assert!(!out.contains('\x1b') && !out.contains('\u{2028}'), "{what} holds the client's bytes: {out:?}");
    }
    let report = text(&o.stdout);
    assert!(report.contains(r"\x1b[8mhidden/1.0") && report.contains(r"\x1B[2J\xE2\x80\xA8garbage"), "{report}");
    assert!(fragment.contains(r"evil\xe2\x80\xa8actions: score"), "{fragment}");
    // merged, the fragment is still only its own comments and actions
    let merged = dir.path().join("merged.yaml");
    std::fs::write(&merged, format!("{POLICY}{fragment}")).unwrap();
    let o = crawlward(&["check", merged.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
    let o = crawlward(&["explain", merged.to_str().unwrap(), "--ua", "Googlebot/2.1", "--ip", "66.249.66.1", "--url", "/", "--format", "json"]);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["action"], "allow");
}

/// A bot the catalogue does not name is logged by its product token, which
/// may hold a `"`: nginx writes it `\x22` in the `agent=` field as in the
/// User-Agent, and analyze reads both the same.
#[test]
fn a_token_nginx_escaped_is_the_agent_analyze_finds() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let mut log = String::new();
    for i in 0..20 {
        log.push_str(&format!(
            "198.51.100.7 - - [10/Oct/2026:13:00:{i:02} +0000] \"GET /p/{i} HTTP/1.1\" 200 10 \"-\" \"Quill\\x22Bot/1.0 (+https://example.com/bot)\" rt=0.010 urt=\"0.008\" agent=Quill\\x22Bot verdict=none action=allow refusal=- facets=- budget=-\n"
        ));
    }
    let path = dir.path().join("access.log");
    std::fs::write(&path, log).unwrap();
    let report = json(&policy, &path);
    assert_eq!(report["agent_disagreements"], 0, "{report}");
}

#[test]
fn what_each_rung_answered_from_the_logged_rung() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_file(dir.path());
    let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
    let g = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    let mut log = String::new();
    let mut line = |ip: &str, sec: u32, status: u16, ua: &str, rung: &str| {
        log.push_str(&format!(
            "{ip} - - [10/Oct/2026:13:00:{sec:02} +0000] \"GET /p/{sec} HTTP/1.1\" {status} 100 \"-\" \"{ua}\" rt=0.010 urt=\"0.008\" agent=- verdict=none action=allow refusal=- facets=- budget=- rung={rung} score=0.50 contributions=rate=0.28\n"
        ));
    };
    for sec in 0..3 {
        line("198.51.100.7", sec, 200, chrome, "L2");
    }
    line("198.51.100.7", 3, 429, chrome, "L2");
    line("198.51.100.8", 4, 403, chrome, "L6");
    line("127.0.0.2", 5, 200, g, "L0");
    let path = dir.path().join("access.log");
    std::fs::write(&path, log).unwrap();
    let v = json(&policy, &path);
    let rows = v["served_by_rung"].as_array().unwrap();
    let row = |rung: &str, population: &str| rows.iter().find(|r| r["rung"] == rung && r["population"] == population).cloned().unwrap_or_default();
    assert_eq!(row("L2", "people and unknown")["requests"], 4);
    assert_eq!(row("L2", "people and unknown")["statuses"]["429"], 1);
    assert_eq!(row("L6", "people and unknown")["statuses"]["4xx"], 1);
    assert_eq!(row("L0", "search")["statuses"]["2xx"], 1);
    let o = crawlward(&["analyze", &policy, path.to_str().unwrap(), "--ranges-dir", "t/ranges"]);
    let out = text(&o.stdout);
    assert!(out.contains("what each rung of the ladder answered"), "{out}");
    assert!(out.contains("L2      people and unknown             4  2xx 3, 429 1"), "{out}");
    // a log without rungs has no such section, and no such field
    let plain = dir.path().join("plain.log");
    std::fs::write(&plain, small_log()).unwrap();
    assert!(json(&policy, &plain).get("served_by_rung").is_none());
}

/// The burner pattern on a generated log whose answer is known: five
/// genuine accounts with normal curves over a day (one of them at its
/// quota once, alone), and three burner accounts from one /24, each
/// spending exactly its 50 an hour and refused, the next appearing an hour
/// later. Also: the tier from the log, percent-encoded names, and lines
/// without an account leave the report alone.
#[test]
fn the_burner_pattern_on_a_generated_log() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nmodule: {}\napi_tiers: {paths: [/api/], account: [$remote_user], tiers: [{name: standard, hourly: 50}, {name: partner, hourly: 500}]}\n",
    )
    .unwrap();
    let mut s = String::new();
    let mut keyed = String::new();
    let mut line = |addr: &str, minute: u32, account: &str, tier: &str, status: u16| {
        let (day, hour, min) = (10 + minute / 1440, (minute / 60) % 24, minute % 60);
        let refusal = if status == 429 { "quota" } else { "-" };
        let source = if account == "-" { "-" } else { "variable" };
        s.push_str(&format!(
            "{addr} - - [{day:02}/Oct/2026:{hour:02}:{min:02}:00 +0000] \"GET /api/items HTTP/1.1\" {status} 10 \"-\" \"client/1.0\" rt=0.010 urt=\"0.008\" agent=- verdict=none action=allow refusal={refusal} facets=- budget=- account={account} tier={tier} source={source}\n"
        ));
    };
    // a partner the keys file names museum, beside the sign-in museum: two accounts
    for i in 0..3 {
        keyed.push_str(&format!(
            "192.0.2.7 - - [10/Oct/2026:09:{i:02}:00 +0000] \"GET /api/items HTTP/1.1\" 200 10 \"-\" \"client/1.0\" rt=0.010 urt=\"0.008\" agent=- verdict=none action=allow refusal=- facets=- budget=- account=museum tier=partner source=key\n"
        ));
    }
    // genuine: office hours, 5 to 30 an hour
    for (k, name) in ["lib-a", "lib-b", "ann%20smith", "museum", "archive"].iter().enumerate() {
        for hour in 8..18u32 {
            for i in 0..(5 + (hour * 3 + k as u32) % 25) {
                line(&format!("198.51.{k}.9"), hour * 60 + i, name, "standard", 200);
            }
        }
    }
    // archive hits its quota once, in hour 20, and nobody follows from its network
    for i in 0..50 {
        line("198.51.4.9", 20 * 60 + i, "archive", "standard", 200);
    }
    // burners: 50 in an hour, exactly the quota, then refused; the next one an hour later
    for (k, name) in ["b1", "b2", "b3"].iter().enumerate() {
        let start = (2 + 2 * k as u32) * 60;
        for i in 0..50 {
            line(&format!("203.0.113.{}", 20 + k), start + i, name, "standard", 200);
        }
        for i in 50..60 {
            line(&format!("203.0.113.{}", 20 + k), start + i, name, "standard", 429);
        }
    }
    // a partner far under its limit, and requests without an account
    for i in 0..300 {
        line("192.0.2.5", 600 + i % 60, "partner-co", "partner", 200);
        line("192.0.2.6", 600 + i % 60, "-", "-", 200);
    }
    s.push_str(&keyed);
    let log = dir.path().join("access.log");
    std::fs::write(&log, &s).unwrap();
    let o = crawlward(&["analyze", policy.to_str().unwrap(), log.to_str().unwrap(), "--format", "json"]);
    assert!(matches!(o.status.code(), Some(0) | Some(6)), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let acc = &v["accounts"];
    assert_eq!(acc["accounts"], 10, "{acc}");
    assert_eq!(acc["burner_chains"], serde_json::json!([{ "accounts": ["b1", "b2", "b3"], "networks": ["203.0.113.0/24"] }]));
    let row = |n: &str| acc["rows"].as_array().unwrap().iter().find(|r| r["account"] == n).cloned().unwrap();
    for b in ["b1", "b2", "b3"] {
        assert_eq!(
            (row(b)["burner"].as_bool(), row(b)["at_quota"].as_bool(), row(b)["peak_hour"].as_u64(), row(b)["refused"].as_u64()),
            (Some(true), Some(true), Some(50), Some(10)),
            "{b}"
        );
        assert_eq!(row(b)["peak_share_of_hourly"], 1.0);
    }
    assert_eq!((row("archive")["at_quota"].as_bool(), row("archive")["burner"].as_bool()), (Some(true), Some(false)), "at its quota once, alone");
    // the keyed museum apart from the sign-in museum, each labelled
    assert_eq!((row("museum [key]")["requests"].as_u64(), row("museum [key]")["source"].as_str()), (Some(3), Some("key")));
    assert_eq!(row("museum [sign-in]")["source"], "variable");
    assert_eq!(row("lib-a")["source"], "variable");
    for g in ["lib-a", "lib-b", "ann smith", "museum [sign-in]", "partner-co"] {
        assert_eq!((row(g)["at_quota"].as_bool(), row(g)["burner"].as_bool()), (Some(false), Some(false)), "{g}");
    }
    assert_eq!(row("partner-co")["tier"], "partner");
    assert_eq!(row("lib-a")["curve"].as_array().unwrap().len(), 10, "office hours: ten hours of curve");
    // the text report says it in words
    let o = crawlward(&["analyze", policy.to_str().unwrap(), log.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(out.contains("burner pattern: b1 -> b2 -> b3 each reached the quota, and the next appeared within two hours from 203.0.113.0/24"), "{out}");
}
