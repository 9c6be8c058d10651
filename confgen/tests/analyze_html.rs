//! The HTML report in a real browser: Debian's chromium, headless, loads it
//! (from a page that measures what it laid out) and takes a screenshot.
//! `ci/setup` installs chromium; set CRAWLWARD_CHROMIUM to use another binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name).display().to_string()
}

fn chromium() -> String {
    let bin = std::env::var("CRAWLWARD_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(Path::new(&bin).exists(), "no browser at {bin}: ci/setup installs Debian's chromium (or set CRAWLWARD_CHROMIUM)");
    bin
}

/// Run headless chromium with `args` on `url`; its standard output. Bounded in time.
fn browse(profile: &Path, args: &[&str], url: &str) -> String {
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The page that loads the report in a frame and writes what the browser laid out.
const MEASURE: &str = r#"<!DOCTYPE html><html><body><iframe id="r" src="report.html" style="width:1000px;height:6000px"></iframe>
<script>
document.getElementById('r').onload = function () {
  var d = this.contentDocument, out = {};
  var shown = function (e) { var b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0; };
  var count = function (sel) { return [].filter.call(d.querySelectorAll(sel), shown).length; };
  out.title = d.title;
  out.check = (d.getElementById('check') || {}).className || null;
  out.timelines = [].map.call(d.querySelectorAll('svg.timeline'), function (e) { return e.getAttribute('data-group'); });
  out.bars = count('svg.timeline rect.bar');
  out.rungs = count('#ladder rect.rung');
  out.scores = [].map.call(d.querySelectorAll('#ladder rect.score'), function (e) {
    return [e.getAttribute('data-client'), parseFloat(e.getAttribute('data-score')), e.getBoundingClientRect().width]; });
  out.parts = {};
  [].forEach.call(d.querySelectorAll('#contributions rect.part'), function (e) {
    var c = e.getAttribute('data-client'); out.parts[c] = (out.parts[c] || 0) + e.getBoundingClientRect().width; });
  out.agents = count('#agents tbody tr');
  out.images = d.images.length + d.querySelectorAll('link, script, object, embed, iframe').length;
  var pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
};
</script></body></html>"#;

fn measure(report: &str) -> (serde_json::Value, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("report.html"), report).unwrap();
    std::fs::write(dir.path().join("measure.html"), MEASURE).unwrap();
    let profile = dir.path().join("profile");
    let dom = browse(
        &profile,
        &["--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom"],
        &format!("file://{}/measure.html", dir.path().display()),
    );
    let start = dom.find("<pre id=\"measured\">").unwrap_or_else(|| panic!("the measuring page did not run: {dom}")) + "<pre id=\"measured\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end].replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    let png = dir.path().join("report.png");
    browse(&profile, &["--window-size=1000,2400", &format!("--screenshot={}", png.display())], &format!("file://{}/report.html", dir.path().display()));
    (serde_json::from_str(&json).unwrap(), png, dir)
}

fn crawlward(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_crawlward")).env("CRAWLWARD_TEST_RANGES", "1").current_dir(root()).args(args).output().unwrap();
    assert!(matches!(o.status.code(), Some(0 | 6)), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(path: &Path) -> (u32, u32, usize) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    (u32::from_be_bytes([b[16], b[17], b[18], b[19]]), u32::from_be_bytes([b[20], b[21], b[22], b[23]]), b.len())
}

#[test]
fn seed_002s_ladder_and_contributions_as_the_browser_draws_them() {
    let html = crawlward(&[
        "analyze",
        "nginx-conf/forge.yaml",
        "--aggregates",
        &data("seed002-clients.yaml"),
        "--labels",
        &data("seed002.labels"),
        "--format",
        "html",
    ]);
    // self-contained: nothing to fetch, nothing to run
    for outside in ["<script", "src=", "href=\"http", "url(", "@import"] {
        assert!(!html.contains(outside), "the report holds {outside}");
    }
    let (m, png, _dir) = measure(&html);
    assert_eq!(m["title"], "crawlward analyze: nginx-conf/forge.yaml");
    assert_eq!(m["rungs"], 7, "the seven rungs are drawn: {m}");
    let scores = m["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 8, "one bar per client: {m}");
    // each bar's drawn width follows its score (the ladder spans 0 to 1)
    let per_point: Vec<f64> = scores.iter().map(|s| s[2].as_f64().unwrap() / s[1].as_f64().unwrap()).collect();
    for (s, w) in scores.iter().zip(&per_point) {
        assert!((w - per_point[0]).abs() / per_point[0] < 0.02, "{} is drawn out of scale: {m}", s[0]);
    }
    assert_eq!(scores[6][0], "resale-listing-republisher");
    assert!(scores[6][2].as_f64().unwrap() > 500.0, "the highest score is the longest bar: {m}");
    // the contributions add up to the score on screen too
    let parts = &m["parts"];
    for s in scores {
        let drawn = parts[s[0].as_str().unwrap()].as_f64().unwrap();
        let want = s[1].as_f64().unwrap() * parts["resale-listing-republisher"].as_f64().unwrap() / scores[6][1].as_f64().unwrap();
        assert!((drawn - want).abs() < 2.0, "{}'s contributions add up to its score on screen: {drawn} for {want} ({m})", s[0]);
    }
    assert_eq!(m["images"], 0);
    let (w, h, bytes) = png_size(&png);
    assert_eq!((w, h), (1000, 2400));
    assert!(bytes > 40_000, "the screenshot shows charts, not a blank page ({bytes} bytes)");
}

#[test]
fn a_log_report_shows_each_purpose_over_time_and_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let out = Command::new("python3").current_dir(root()).args(["bench/analyze-log.py", "20000", "--format", "crawlward", "--people", "500"]).output().unwrap();
    assert!(out.status.success());
    // and one verified Googlebot request answered 503: the search-crawler check must show it
    let mut text = String::from_utf8(out.stdout).unwrap();
    text.push_str("66.249.64.1 - - [10/Oct/2026:23:59:59 +0000] \"GET /record/1 HTTP/1.1\" 503 0 \"-\" \"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)\" rt=0.001 urt=\"-\" agent=Googlebot verdict=verified action=allow refusal=\n");
    std::fs::write(&log, text).unwrap();
    let html = crawlward(&["analyze", "nginx-conf/catalogue.yaml", log.to_str().unwrap(), "--format", "html"]);
    let json: serde_json::Value =
        serde_json::from_str(&crawlward(&["analyze", "nginx-conf/catalogue.yaml", log.to_str().unwrap(), "--format", "json"])).unwrap();
    let (m, png, _d) = measure(&html);
    assert_eq!(m["check"], "mistake", "{m}");
    let groups: Vec<&str> = m["timelines"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
    for g in ["people and unknown", "search", "scripting", "ai-training"] {
        assert!(groups.contains(&g), "a chart for {g}: {groups:?}");
    }
    // 96 intervals of 15 minutes, one bar each per purpose and status class seen
    assert!(m["bars"].as_u64().unwrap() >= 96 * 4, "{m}");
    assert_eq!(m["agents"].as_u64().unwrap() as usize, json["agents"].as_array().unwrap().len());
    let (w, _, bytes) = png_size(&png);
    assert_eq!(w, 1000);
    assert!(bytes > 40_000, "{bytes} bytes");
}
