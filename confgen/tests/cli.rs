//! The `crawlward` binary as a whole: exit codes, stdout, stderr, --help.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn crawlward(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlward")).env("CRAWLWARD_TEST_RANGES", "1").current_dir(root()).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Compare with a snapshot file; `CRAWLWARD_BLESS=1` rewrites it.
fn snapshot(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("CRAWLWARD_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "{name} changed; rerun with CRAWLWARD_BLESS=1 if intended.\n--- got ---\n{got}\n--- want ---\n{want}");
}

#[test]
fn help_texts() {
    let o = crawlward(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    snapshot("help.txt", &text(&o.stdout));
    for cmd in ["render", "check", "explain"] {
        let o = crawlward(&[cmd, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        snapshot(&format!("help-{cmd}.txt"), &text(&o.stdout));
    }
}

/// The manual pages are made from the same help texts: a page per command, each
/// with its own summary and options, and the main page pointing at them.
#[test]
fn man_writes_a_page_per_command_from_the_help_texts() {
    let out = tempfile::tempdir().unwrap();
    let o = crawlward(&["man", "--out", out.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let main = std::fs::read_to_string(out.path().join("crawlward.1")).unwrap();
    assert!(main.contains(".TH crawlward 1"), "{main}");
    assert!(main.contains("Exit codes: 0 success"), "the main page has the exit codes: {main}");
    for (cmd, summary, option) in [
        ("render", "Write the http\\-level conf.d file", "\\-\\-out"),
        ("check", "Render into a temporary directory", "\\-\\-load\\-module"),
        ("explain", "Say which rule decides a request", "\\-\\-ua"),
        ("update-ranges", "Download the agents", "\\-\\-reload\\-command"),
        ("analyze", "Read access logs", "\\-\\-aggregates"),
        ("identify", "Say who each User\\-Agent names", "\\-\\-policy"),
        ("top", "A live screen for the person on call", "\\-\\-interval"),
        ("api-key", "Make an API key for an account", "\\-\\-account"),
        ("init", "Write a first policy for a site", "\\-\\-stock"),
        ("schema", "Print the JSON Schema", ""),
        ("help", "Print this message", ""),
    ] {
        let page = std::fs::read_to_string(out.path().join(format!("crawlward-{cmd}.1"))).unwrap();
        assert!(page.contains(&format!(".TH crawlward-{cmd} 1")), "{cmd}: {page}");
        assert!(page.contains(summary), "{cmd}: {summary}: {page}");
        assert!(page.contains(option), "{cmd}: {option}: {page}");
        assert!(main.contains(&format!("crawlward\\-{}(1)", cmd.replace('-', "\\-"))), "the main page names crawlward-{cmd}(1): {main}");
    }
    let pages = std::fs::read_dir(out.path()).unwrap().count();
    assert_eq!(pages, 12, "no page for the hidden man command itself");
    let help = text(&crawlward(&["--help"]).stdout);
    assert!(!help.contains(" man "), "man is for packagers, not listed: {help}");
}

/// `crawlward identify`: the agent each User-Agent names, as the module names
/// it (a feed reader that mentions Googlebot is the feed reader; a bot the
/// catalogue does not name, by its token; a phone model is no bot).
#[test]
fn identify_names_each_user_agent() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("agents.txt");
    std::fs::write(
        &input,
        "Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)\nMozilla/5.0 (compatible; Rivetbot/1.0)\ncurl/8.5.0\nMozilla/5.0 (Linux; Android 13; CUBOT P60) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36\nEvil\"bot\r\n",
    )
    .unwrap();
    let o = crawlward(&["identify", input.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines: Vec<Vec<String>> = text(&o.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect();
    let row = |i: usize| lines[i][..5].join(" ");
    assert_eq!(row(0), "Feedly feed Feedly none product");
    assert_eq!(row(1), "Rivetbot unknown-bot unknown none a bot word");
    assert_eq!(row(2), "curl scripting unknown (command-line client) none product");
    assert_eq!(row(3), "- - - - -");
    assert_eq!(lines[4][5], "Evil\\x22bot", "the User-Agent escaped as in an access log");
    assert_eq!(lines.len(), 5);

    // a User-Agent given where a file goes: how to give it
    let o = crawlward(&["identify", "Mozilla/5.0 (compatible; Googlebot/2.1)"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).ends_with("hint: identify reads User-Agents from files, one a line; for one User-Agent:  echo 'Mozilla/5.0 (compatible; Googlebot/2.1)' | crawlward identify\n"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn usage_error_is_exit_2() {
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--out <OUT>"), "{}", text(&o.stderr));
}

#[test]
fn render_writes_then_reports_unchanged() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("conf");
    let d = dir.to_str().unwrap();
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml", "--out", d]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    for name in ["crawlward-http.conf", "crawlward-server.conf", "crawlward-limits.conf", "robots.txt", "crawlward-catalogue.json"] {
        assert!(stdout.contains(&format!("created   {d}/{name}")), "{stdout}");
    }
    assert_eq!(text(&o.stderr), "");
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml", "--out", d]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(text(&o.stdout).matches("unchanged ").count(), 5, "{}", text(&o.stdout));
    // no temporary files are left behind
    let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
}

#[test]
fn render_root_prefixes_runtime_paths() {
    let out = tempfile::tempdir().unwrap();
    let d = out.path().to_str().unwrap();
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml", "--out", d, "--root", "/srv/stage"]);
    assert_eq!(o.status.code(), Some(0));
    let server = std::fs::read_to_string(out.path().join("crawlward-server.conf")).unwrap();
    assert!(server.contains("if (-f /srv/stage/var/www/heratio/storage/framework/down)"), "{server}");
    assert!(server.contains("alias /srv/stage/etc/nginx/crawlward/robots.txt;"), "{server}");
    let limits = std::fs::read_to_string(out.path().join("crawlward-limits.conf")).unwrap();
    assert!(limits.contains("access_log /srv/stage/var/log/nginx/heratio-throttled.log crawlward"), "{limits}");
}

#[test]
fn bad_policy_is_exit_1_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("never");
    let o = crawlward(&["render", "policy/testdata/bad/many-problems.yaml", "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout), "");
    let err = text(&o.stderr);
    assert!(err.starts_with("error: invalid CIDR \"not-an-address\""), "{err}");
    assert!(err.contains("--> policy/testdata/bad/many-problems.yaml:8:21 (at site.trusted_proxies[0])"), "{err}");
    assert!(err.contains("policy/testdata/bad/many-problems.yaml:12:45"), "{err}");
    assert!(err.contains("policy/testdata/bad/many-problems.yaml:16:18"), "{err}");
    assert!(err.trim_end().ends_with("3 problems in policy/testdata/bad/many-problems.yaml; nothing was written"), "{err}");
    assert!(!dir.exists(), "nothing may be written for a bad policy");
}

#[test]
fn syntax_error_names_line_and_column() {
    let o = crawlward(&["explain", "policy/testdata/bad/syntax.yaml", "--ua", "x", "--ip", "192.0.2.1", "--url", "/"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("--> policy/testdata/bad/syntax.yaml:5:2"), "{err}");
    let o = crawlward(&["render", "no/such/policy.yaml", "--out", "/tmp/crawlward-never"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).starts_with("error: cannot read the policy: "), "{}", text(&o.stderr));
}

#[test]
fn unwritable_output_is_exit_3() {
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml", "--out", "/proc/crawlward-cannot-write"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).starts_with("error: cannot write to /proc/crawlward-cannot-write\n  caused by: "), "{}", text(&o.stderr));
}

fn nginx() -> Option<String> {
    let bin = std::env::var("TEST_NGINX_BINARY").unwrap_or_else(|_| "/usr/sbin/nginx".into());
    Path::new(&bin).exists().then_some(bin)
}

#[test]
fn check_runs_nginx_t() {
    let Some(bin) = nginx() else {
        eprintln!("no nginx binary: check_runs_nginx_t covers only the failure path");
        return;
    };
    for policy in ["nginx-conf/catalogue.yaml", "nginx-conf/forge.yaml", "policy/testdata/good/custom-agents.yaml"] {
        let o = crawlward(&["check", policy, "--nginx", &bin]);
        assert_eq!(o.status.code(), Some(0), "{policy}: {}{}", text(&o.stdout), text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains("test is successful"), "{out}");
        assert!(out.contains(&format!("crawlward: {policy} renders a configuration that {bin} accepts")), "{out}");
    }
}

#[test]
fn check_fails_when_the_worker_user_cannot_read_the_installed_robots_txt() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(bin) = nginx() else {
        eprintln!("no nginx binary: the worker's access to robots.txt is checked after nginx -t only");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_str().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let policy = "nginx-conf/catalogue.yaml";
    let check = || crawlward(&["check", policy, "--nginx", &bin, "--root", root, "--worker-user", "nobody"]);
    let o = check();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("robots.txt is not installed yet"), "{}", text(&o.stdout));
    let dir = tmp.path().join("etc/nginx/crawlward");
    let o = crawlward(&["render", policy, "--root", root, "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for d in ["etc", "etc/nginx"] {
        std::fs::set_permissions(tmp.path().join(d), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = check();
    assert_eq!(o.status.code(), Some(7), "{}{}", text(&o.stdout), text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "error: nginx's worker user nobody (--worker-user) cannot read {}/robots.txt: it cannot enter {} (mode 0700",
            dir.display(),
            dir.display()
        )),
        "{err}"
    );
    assert!(err.contains("nginx would answer robots.txt with 403"), "{err}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.join("robots.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = check();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("nginx's worker user nobody (--worker-user) can read {}/robots.txt", dir.display())), "{}", text(&o.stdout));
}

/// Serves `body` once, as an application's robots.txt, on a loopback port; its URL.
fn serve_once(body: &'static str) -> String {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/robots.txt", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    url
}

#[test]
fn check_app_warns_where_the_applications_robots_txt_disagrees() {
    let Some(bin) = nginx() else {
        eprintln!("no nginx binary: check --app runs after nginx -t only");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_str().unwrap();
    // heratio's rules, but the sort variants open and every facet closed
    let url = serve_once("User-agent: *\nDisallow: /admin\nDisallow: /api\nDisallow: /login\nDisallow: /research\nDisallow: /print\nDisallow: /export\nDisallow: /*?*subjects=\n");
    let o = crawlward(&["check", "nginx-conf/catalogue.yaml", "--nginx", &bin, "--root", root, "--app", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "warning: robots.txt: /x?sort=1 for every crawler: the policy's robots.txt disallows it (robots.disallow_params sort), the application's allows it"
        ),
        "{err}"
    );
    assert!(
        err.contains("warning: robots.txt: /glam/browse?subjects=1&places=1 for every crawler: the application's robots.txt disallows it, the policy's allows it (two facets"),
        "{err}"
    );
    assert!(err.contains("more: the policy's robots.txt disallows it (its purpose is blocked by the policy), the application's allows it"), "{err}");
    assert!(!err.contains("/admin"), "{err}");
    assert!(text(&o.stdout).contains(&format!("crawlward: the application's robots.txt ({url}) and the policy's disagree on ")), "{}", text(&o.stdout));

    // the policy's own file agrees with it
    let rendered = tmp.path().join("rendered");
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml", "--out", rendered.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let ours: &'static str = Box::leak(std::fs::read_to_string(rendered.join("robots.txt")).unwrap().into_boxed_str());
    let url = serve_once(ours);
    let o = crawlward(&["check", "nginx-conf/catalogue.yaml", "--nginx", &bin, "--root", root, "--app", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("warning: robots.txt"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("and the policy's agree"), "{}", text(&o.stdout));

    // nothing to compare with: an I/O error
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/robots.txt", closed.local_addr().unwrap());
    drop(closed);
    let o = crawlward(&["check", "nginx-conf/catalogue.yaml", "--nginx", &bin, "--root", root, "--app", &url]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains(&format!("error: cannot fetch the application's robots.txt from {url}")), "{}", text(&o.stderr));
}

#[test]
fn check_loads_the_module_from_nginxs_modules_directory_or_says_how_to_give_it() {
    use std::os::unix::fs::PermissionsExt;
    let Some(bin) = nginx() else {
        eprintln!("no nginx binary: check loads the module for nginx -t only");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let modules = tmp.path().join("modules");
    std::fs::create_dir(&modules).unwrap();
    // an nginx whose -V names that modules directory
    let fake = tmp.path().join("nginx");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\nif [ \"$1\" = -V ]; then echo 'configure arguments: --modules-path={}' >&2; exit 0; fi\nexec {bin} \"$@\"\n", modules.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fake = fake.to_str().unwrap();

    let o = crawlward(&["check", "t/policies/module.yaml", "--nginx", fake]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("unknown directive \"crawlward"), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains(&format!(
            "hint: the policy's module section needs ngx_http_crawlward_module, which is not in {fake}'s modules directory: give its .so with --load-module"
        )),
        "{}",
        text(&o.stderr)
    );

    // the module built for this nginx, in its modules directory (after ci/build-module)
    let built = self::root().join("target/modules/debian/ngx_http_crawlward_module.so");
    if bin != "/usr/sbin/nginx" || !built.exists() {
        eprintln!("no module built for {bin}: its loading from the modules directory is not tried");
        return;
    }
    std::os::unix::fs::symlink(&built, modules.join("ngx_http_crawlward_module.so")).unwrap();
    let o = crawlward(&["check", "t/policies/module.yaml", "--nginx", fake]);
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(
        text(&o.stdout)
            .contains(&format!("crawlward: the policy has a module section: loading {}/ngx_http_crawlward_module.so for nginx -t", modules.display())),
        "{}",
        text(&o.stdout)
    );
}

/// What a newcomer's first mistakes get: each says what to do.
#[test]
fn first_mistakes_say_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    // rendered somewhere else than install.dir: where the files must go
    let out = tmp.path().join("out");
    let o = crawlward(&["render", "nginx-conf/catalogue.yaml", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(&format!("note: {} is not install.dir (/etc/nginx/crawlward): the server snippet includes the limits snippet", out.display())),
        "{}",
        text(&o.stdout)
    );
    // an access log given to identify
    let log = tmp.path().join("access.log");
    std::fs::write(&log, "203.0.113.9 - - [04/Dec/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"Mozilla/5.0 (compatible; Googlebot/2.1)\"\n").unwrap();
    let o = crawlward(&["identify", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("is an access log, and identify reads User-Agents, one a line: for the clients of a log, run crawlward analyze"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(text(&o.stdout), "");
    let Some(bin) = nginx() else { return };
    // --app without its scheme
    let o = crawlward(&["check", "nginx-conf/catalogue.yaml", "--nginx", &bin, "--root", tmp.path().to_str().unwrap(), "--app", "127.0.0.1:8000/robots.txt"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("error: --app 127.0.0.1:8000/robots.txt: expected the URL of the application's robots.txt, such as http://"),
        "{}",
        text(&o.stderr)
    );
    // a --load-module that is not a module for this nginx
    let o = crawlward(&["check", "t/policies/module.yaml", "--nginx", &bin, "--load-module", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!("hint: {bin} does not load the module given with --load-module: build it for this nginx (ci/build-module system")),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn check_with_robots_from_the_application_reads_the_kept_copy_and_asks_app_url() {
    let Some(bin) = nginx() else {
        eprintln!("no nginx binary: check reads the kept copy after nginx -t only");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_str().unwrap();
    let policy_with = |url: &str| {
        let text = std::fs::read_to_string(self::root().join("nginx-conf/catalogue.yaml")).unwrap();
        let text = text.replacen("robots:\n", &format!("robots:\n  source: app\n  app_url: {url}\n"), 1);
        let file = tmp.path().join("policy.yaml");
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_string()
    };
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}/robots.txt", closed.local_addr().unwrap());
    drop(closed);
    let policy = policy_with(&down);

    // nothing kept yet, the application down: said, not failed
    let o = crawlward(&["check", &policy, "--nginx", &bin, "--root", root]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("no copy of the application's robots.txt is kept yet"), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains(&format!(
            "warning: cannot fetch the application's robots.txt from {down} (robots.app_url): io: Connection refused; nginx answers robots.txt from its kept copy"
        )),
        "{}",
        text(&o.stderr)
    );

    // a kept plain-text error page says nothing to crawlers
    let kept = tmp.path().join("etc/nginx/crawlward/app-robots");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join("robots.txt"), "Internal error\n").unwrap();
    let o = crawlward(&["check", &policy, "--nginx", &bin, "--root", root]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("(the application's robots.txt that nginx kept) does not read as robots.txt"), "{}", text(&o.stderr));

    // a kept robots.txt, and the application's answer compared with the policy's
    std::fs::write(kept.join("robots.txt"), "User-agent: *\nDisallow: /admin\n").unwrap();
    let url = serve_once("User-agent: *\nDisallow: /admin\n");
    let policy = policy_with(&url);
    let o = crawlward(&["check", &policy, "--nginx", &bin, "--root", root]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("does not read as robots.txt"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("crawlward: the application's robots.txt ({url}) and the policy's disagree on ")), "{}", text(&o.stdout));
}

#[test]
fn check_reports_a_rejection_as_exit_4() {
    // `false` stands in for an nginx that rejects the configuration
    let o = crawlward(&["check", "nginx-conf/catalogue.yaml", "--nginx", "false"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(text(&o.stderr).contains("error: false -t rejected the configuration rendered from nginx-conf/catalogue.yaml"));
    let o = crawlward(&["check", "nginx-conf/catalogue.yaml", "--nginx", "/nonexistent/nginx"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).starts_with("error: cannot run /nonexistent/nginx"));
}

/// (ua, ip, url, referer, maintenance) -> (rule, status)
type Case = (&'static str, &'static str, &'static str, &'static str, bool, &'static str, Option<u16>);
const CATALOGUE_CASES: &[Case] = &[
    ("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)", "192.0.2.1", "/record/1", "", false, "bot-blocker", Some(444)),
    ("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)", "192.0.2.1", "/api/v1/records", "", false, "bot-blocker", Some(444)),
    ("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)", "192.0.2.1", "/robots.txt", "", false, "pass", None),
    ("python-requests/2.31", "192.0.2.1", "/api/v1/records", "", false, "pass", None),
    ("python-requests/2.31", "192.0.2.1", "/oai?verb=Identify", "", false, "pass", None),
    ("python-requests/2.31", "192.0.2.1", "/record/1", "", false, "bot-blocker", Some(444)),
    ("python-requests/2.31", "192.0.2.1", "/robots.txt", "", false, "pass", None),
    ("", "192.0.2.1", "/record/1", "", false, "bot-blocker", Some(444)),
    ("Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", "192.0.2.1", "/", "", false, "bot-blocker", Some(444)),
    // a Googlebot claim from outside Google's published ranges (the shipped snapshot)
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "192.0.2.1", "/record/1", "", false, "bot-blocker", Some(444)),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "66.249.66.1", "/record/1", "", false, "pass", None),
    (
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "66.249.66.1",
        "/glam/browse?a=1&b=2&c=3&page=4",
        "",
        false,
        "facet-crawler-params",
        Some(429),
    ),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "66.249.66.1", "/glam/browse?a=1&b=2&page=4", "", false, "pass", None),
    ("Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "192.0.2.1", "/glam/browse?subjects=1&places=2", "", false, "facet-no-referer", Some(429)),
    ("Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "192.0.2.1", "/glam/browse?subjects=1&places=2", "https://heratio.org/glam/browse", false, "pass", None),
    (
        "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0",
        "192.0.2.1",
        "/glam/browse?subjects=1&places=2",
        "https://heratio.org.evil.example/",
        false,
        "facet-no-referer",
        Some(429),
    ),
    (
        "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0",
        "192.0.2.1",
        "/glam/browse?subjects=1&places=2",
        "https://evil.example/?heratio.org",
        false,
        "facet-no-referer",
        Some(429),
    ),
    ("Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "192.0.2.1", "/record/1?subjects=1&places=2", "", false, "pass", None),
    ("Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "192.0.2.1", "/record/1", "", true, "maintenance", Some(503)),
    ("python-requests/2.31", "192.0.2.1", "/robots.txt", "", true, "pass", None),
];

#[test]
fn explain_decides_the_catalogue_cases() {
    for (ua, ip, url, referer, maintenance, rule, status) in CATALOGUE_CASES {
        let mut args = vec!["explain", "nginx-conf/catalogue.yaml", "--ua", ua, "--ip", ip, "--url", url, "--format", "json"];
        if !referer.is_empty() {
            args.extend(["--referer", referer]);
        }
        if *maintenance {
            args.push("--maintenance");
        }
        let o = crawlward(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["rule"], *rule, "{ua} {url} {referer}: {v:#}");
        assert_eq!(v["status"].as_u64().map(|s| s as u16), *status, "{ua} {url}: {v:#}");
    }
}

#[test]
fn explain_text_says_why() {
    let o = crawlward(&["explain", "nginx-conf/catalogue.yaml", "--ua", "python-requests/2.31", "--ip", "192.0.2.1", "--url", "/api/v1/records"]);
    assert_eq!(o.status.code(), Some(0));
    snapshot("explain-door.txt", &text(&o.stdout));
    let o = crawlward(&[
        "explain",
        "nginx-conf/catalogue.yaml",
        "--ua",
        "Mozilla/5.0 Chrome/131",
        "--ip",
        "2001:db8::1",
        "--url",
        "/glam/browse?subjects=1&places=2",
    ]);
    snapshot("explain-facets.txt", &text(&o.stdout));
}

#[test]
fn explain_reads_a_target_as_nginx_does() {
    let last = |url: &str| {
        let o = crawlward(&["explain", "nginx-conf/catalogue.yaml", "--ua", "Mozilla/5.0 Chrome/131", "--ip", "192.0.2.1", "--url", url]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        let mut lines = out.lines().rev();
        let verdict = lines.next().unwrap_or_default().to_string();
        (lines.next().unwrap_or_default().to_string(), verdict)
    };
    // a path written without its '/': nginx's 400, and why
    let (step, verdict) = last("record 1");
    assert_eq!(verdict, "=> 400 by bad-request");
    assert!(step.contains("the request target \"record 1\" does not start with '/'"), "{step}");
    // a whole URL: an absolute-form target, whose host is the request's
    let (step, verdict) = last("https://www.heratio.org/glam/browse?sort=a");
    assert_eq!(verdict, "=> 301 by canonical-host");
    assert!(step.ends_with("301 to https://heratio.org/glam/browse?sort=a, before any other rule"), "{step}");
    let (step, verdict) = last("http://heratio.org");
    assert_eq!((step.as_str(), verdict.as_str()), ("pass: GET / goes to the site", "=> passes to the site"));
}

#[test]
fn explain_follows_the_modules_dns_check() {
    // t/policies/dns.yaml: Googlebot's only published range is 127.0.0.2, module.dns is on
    let verdict = |ip: &str, dns: Option<&str>| {
        let mut args =
            vec!["explain", "t/policies/dns.yaml", "--ranges-dir", "t/ranges", "--ua", "Googlebot/2.1", "--ip", ip, "--url", "/page", "--format", "json"];
        args.extend(dns.iter().flat_map(|d| ["--dns", *d]));
        let o = crawlward(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["verdict"].as_str().unwrap_or_default().to_string(), v["status"].as_u64())
    };
    assert_eq!(verdict("127.0.0.2", None), ("verified".into(), None), "in the range: no DNS");
    assert_eq!(verdict("127.0.0.2", Some("spoofed")), ("verified".into(), None), "in the range: DNS not asked");
    assert_eq!(verdict("192.0.2.9", Some("verified")), ("verified".into(), None));
    assert_eq!(verdict("192.0.2.9", Some("spoofed")), ("spoofed".into(), Some(403)));
    assert_eq!(verdict("192.0.2.9", Some("unresolved")), ("unverified".into(), None), "fail policy: unverified");
    assert_eq!(verdict("192.0.2.9", None), ("unverified".into(), None), "not known yet: as unresolved");
}

#[test]
fn explain_reports_the_modules_facet_counts_and_budgets() {
    let explain = |ua: &str, url: &str| {
        let o = crawlward(&["explain", "t/policies/module-limits.yaml", "--ranges-dir", "t/ranges", "--ua", ua, "--ip", "192.0.2.1", "--url", url]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let facets = explain("Mozilla/5.0 Chrome/131", "/browse?subjects=1&subjects=2&places=3");
    assert!(facets.contains("3 parameters (a crawler is refused at 4), 2 distinct facets"), "{facets}");
    assert!(facets.contains("=> 429 by facet-no-referer"), "{facets}");
    let repeated = explain("Mozilla/5.0 Chrome/131", "/browse?subjects=1&subjects=2");
    assert!(repeated.contains("1 distinct facets") && repeated.contains("=> passes"), "{repeated}");
    let deep = explain("Rivetbot/1.0", "/alice/repo/commits");
    assert!(deep.contains("deep path (/*/*/commits)") && deep.contains("the address-deep budget refuses first, past 6r/m"), "{deep}");
    let browser = explain("Mozilla/5.0 Chrome/131", "/alice/repo/commits");
    assert!(browser.contains("crawl budget: not counted (not a crawler)"), "{browser}");
    let robots = explain("Rivetbot/1.0", "/robots.txt");
    assert!(robots.contains("crawl budget: not counted (robots.txt is never counted)"), "{robots}");
    // Googlebot's published range is 127.0.0.2 in t/ranges
    let o = crawlward(&[
        "explain",
        "t/policies/module-limits.yaml",
        "--ranges-dir",
        "t/ranges",
        "--ua",
        "Googlebot/2.1",
        "--ip",
        "127.0.0.2",
        "--url",
        "/alice/repo/commits",
    ]);
    let verified = text(&o.stdout);
    assert!(verified.contains("crawl budget: not counted (a verified crawler; crawl_budget.verified sets a budget for them)"), "{verified}");
    // a spoofed claim the policy lets through is counted against its address only, as the
    // module counts it: never the agent's or the shared budget
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("spoofed-allowed.yaml");
    let base = std::fs::read_to_string(root().join("t/policies/module-limits.yaml")).unwrap();
    let base = base.replace(
        "  classes: [{name: default, rate: 6000r/m, burst: 1000}]\n",
        "  classes: [{name: default, rate: 6000r/m, burst: 1000}]\n  throttle: {rate: 6000r/m, burst: 1000}\n",
    );
    std::fs::write(&allowed, format!("{base}\nactions:\n  spoofed: throttle\n")).unwrap();
    let o = crawlward(&[
        "explain",
        allowed.to_str().unwrap(),
        "--ranges-dir",
        "t/ranges",
        "--ua",
        "Googlebot/2.1",
        "--ip",
        "192.0.2.1",
        "--url",
        "/alice/repo/commits",
    ]);
    let spoofed = text(&o.stdout);
    assert!(spoofed.contains("verdict spoofed"), "{spoofed}{}", text(&o.stderr));
    assert!(
        spoofed.contains(
            "crawl budget: a spoofed claim, counted against its address only (never its agent's budgets): deep path (/*/*/commits), address 60r/m (deep 6r/m)"
        ),
        "{spoofed}"
    );
    assert!(!spoofed.contains("refuses first"), "{spoofed}");
}

#[test]
fn explain_says_when_the_budgets_are_the_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("synced.yaml");
    let base = std::fs::read_to_string(root().join("t/policies/module-limits.yaml")).unwrap();
    let synced = base.replace("crawl_budget:\n", "crawl_budget:\n  sync: {store: 'valkey://10.0.0.5:6379', nodes: 3}\n");
    assert_ne!(synced, base);
    std::fs::write(&policy, synced).unwrap();
    let o = crawlward(&[
        "explain",
        policy.to_str().unwrap(),
        "--ranges-dir",
        "t/ranges",
        "--ua",
        "Rivetbot/1.0",
        "--ip",
        "192.0.2.1",
        "--url",
        "/alice/repo/commits",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "the budgets are the cluster's, shared by 3 nodes through valkey://10.0.0.5:6379/0 (each node 1/3 of them while the store does not answer)"
        ),
        "{out}"
    );
}

#[test]
fn signed_in_from_a_client_written_variable_is_warned_about() {
    let out = tempfile::tempdir().unwrap();
    let d = out.path().join("conf");
    let o = crawlward(&["render", "t/policies/module-limits.yaml", "--ranges-dir", "t/ranges", "--out", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "a warning does not stop the render: {}", text(&o.stderr));
    let err = text(&o.stderr);
    for (i, v) in [(0, "$cookie_session"), (1, "$http_authorization")] {
        assert!(
            err.contains(&format!("warning: t/policies/module-limits.yaml: crawl_budget.signed_in[{i}]: {v} is written by the client: any client that sends one skips every crawl budget")),
            "{err}"
        );
    }
    assert!(err.contains("$remote_user after auth_basic or auth_jwt, a variable set from auth_request"), "{err}");
    // the safe choice, and the default (nothing), are not warned about
    let o = crawlward(&["render", "t/policies/protect.yaml", "--ranges-dir", "t/ranges", "--out", d.to_str().unwrap()]);
    assert_eq!(text(&o.stderr), "");
    let conf = std::fs::read_to_string(d.join("crawlward-server.conf")).unwrap();
    assert!(!conf.contains("crawlward_budget_signed_in"), "no default a client can satisfy: {conf}");
}

/// `explain --requests`: a JSON line in, a JSON line out, in order, with the
/// budget the module would refuse with; a bad line or DNS verdict is a usage
/// error that names its line, an unreadable file an I/O error.
#[test]
fn explain_requests_answers_a_line_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("requests.jsonl");
    let gbot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    std::fs::write(
        &file,
        format!(
            "{{\"url\": \"/alice/repo/commits\", \"ip\": \"192.0.2.1\", \"ua\": \"Rivetbot/1.0\"}}\n\n\
             {{\"url\": \"/record/1\", \"ip\": \"127.0.0.2\", \"ua\": \"{gbot}\", \"method\": \"HEAD\"}}\n\
             {{\"url\": \"/%00\", \"ip\": \"192.0.2.1\"}}\n"
        ),
    )
    .unwrap();
    let explain = |f: &str| crawlward(&["explain", "t/policies/module-limits.yaml", "--ranges-dir", "t/ranges", "--requests", f]);
    let o = explain(file.to_str().unwrap());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "one line per request, the blank one skipped: {lines:?}");
    assert_eq!((lines[0]["agent"].as_str(), lines[0]["purpose"].as_str()), (Some("Rivetbot"), Some("unknown-bot")), "{}", lines[0]);
    assert_eq!(lines[0]["budget"], "address-deep", "{}", lines[0]);
    assert_eq!((lines[1]["agent"].as_str(), lines[1]["verdict"].as_str()), (Some("Googlebot"), Some("verified")), "{}", lines[1]);
    assert_eq!(lines[1]["budget"], serde_json::Value::Null, "a verified crawler without a verified budget: {}", lines[1]);
    assert_eq!((lines[2]["rule"].as_str(), lines[2]["status"].as_u64()), (Some("bad-request"), Some(400)), "{}", lines[2]);

    std::fs::write(&file, "{\"url\": \"/\", \"ip\": \"192.0.2.1\", \"dns\": \"maybe\"}\n").unwrap();
    let o = explain(file.to_str().unwrap());
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("requests.jsonl:1: dns is verified, spoofed or unresolved, not \"maybe\""), "{}", text(&o.stderr));
    std::fs::write(&file, "{\"url\": \"/\", \"ip\": \"192.0.2.1\"}\n{\"url\": \"/\"}\n").unwrap();
    let o = explain(file.to_str().unwrap());
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("requests.jsonl:2: not a request"), "{}", text(&o.stderr));
    let o = explain(dir.path().join("none.jsonl").to_str().unwrap());
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
}

/// `explain --requests` lines carry the Web Bot Auth outcome as
/// `explain --signature` does: a path for signed agents answers a verified
/// signature and refuses the rest; a bad outcome, a directory that is not an
/// https:// origin, or one without the other is a usage error naming its line.
#[test]
fn explain_requests_lines_carry_a_signature() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("signed.yaml");
    std::fs::write(&policy, "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nmodule: {signatures: {required: [/agents/]}}\n")
        .unwrap();
    let file = dir.path().join("requests.jsonl");
    let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
    std::fs::write(
        &file,
        format!(
            "{{\"url\": \"/agents/a\", \"ip\": \"192.0.2.1\", \"ua\": \"{chrome}\", \"signature\": \"verified\", \"signature_agent\": \"https://chatgpt.com\"}}\n\
             {{\"url\": \"/agents/a\", \"ip\": \"192.0.2.1\", \"ua\": \"{chrome}\"}}\n\
             {{\"url\": \"/agents/a\", \"ip\": \"192.0.2.1\", \"ua\": \"{chrome}\", \"signature\": \"invalid\", \"signature_agent\": \"https://chatgpt.com\"}}\n"
        ),
    )
    .unwrap();
    let explain = |f: &Path| crawlward(&["explain", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--requests", f.to_str().unwrap()]);
    let o = explain(&file);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(
        (lines[0]["rule"].as_str(), lines[0]["agent"].as_str(), lines[0]["verdict"].as_str()),
        (Some("pass"), Some("ChatGPT-Agent"), Some("verified")),
        "a verified signature on a path for signed agents: {}",
        lines[0]
    );
    assert_eq!((lines[1]["rule"].as_str(), lines[1]["status"].as_u64()), (Some("signature"), Some(403)), "unsigned: {}", lines[1]);
    assert_eq!(
        (lines[2]["verdict"].as_str(), lines[2]["rule"].as_str(), lines[2]["status"].as_u64()),
        (Some("spoofed"), Some("bot-blocker"), Some(444)),
        "a signature that does not hold is a spoofed claim: {}",
        lines[2]
    );
    for (line, says) in [
        (
            "\"signature\": \"maybe\", \"signature_agent\": \"https://chatgpt.com\"",
            "requests.jsonl:1: signature is verified, unverified or invalid, not \"maybe\"",
        ),
        ("\"signature\": \"verified\", \"signature_agent\": \"chatgpt.com\"", "requests.jsonl:1: signature_agent \"chatgpt.com\" is not an https:// origin"),
        ("\"signature\": \"verified\"", "requests.jsonl:1: signature and signature_agent go together"),
    ] {
        std::fs::write(&file, format!("{{\"url\": \"/agents/a\", \"ip\": \"192.0.2.1\", {line}}}\n")).unwrap();
        let o = explain(&file);
        assert_eq!(o.status.code(), Some(2), "{line}");
        assert!(text(&o.stderr).contains(says), "{line}: {}", text(&o.stderr));
    }
}

/// `init` writes a first policy that renders as it is, with the ladder in
/// observe mode and a new cookie key (0600) that the module can read; it
/// never writes over a policy, keeps an existing key file, and without the
/// module (`--stock`) writes neither the module nor the ladder.
#[test]
fn init_writes_a_first_policy_that_renders_with_the_ladder_observing() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("site.yaml");
    let key = dir.path().join("keys/cookie.key");
    let init = |extra: &[&str]| {
        let mut args = vec!["init", "--site", "https://Catalogue.example.org/browse", "--out", policy.to_str().unwrap(), "--key-file", key.to_str().unwrap()];
        args.extend_from_slice(extra);
        crawlward(&args)
    };
    let o = init(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("wrote     ") && text(&o.stdout).contains("next: crawlward check"), "{}", text(&o.stdout));
    let written = std::fs::read_to_string(&policy).unwrap();
    assert!(written.contains("canonical_url: https://catalogue.example.org\n") && written.contains("same_site_hosts: [catalogue.example.org]"), "{written}");
    assert!(written.contains("  mode: observe\n") && written.contains(&format!("cookie: {{key_file: {}}}", key.display())), "{written}");
    let key_text = std::fs::read_to_string(&key).unwrap();
    assert!(crawlward_policy::ladder::CookieKeys::parse(&key_text).is_ok(), "{key_text}");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    let out = dir.path().join("conf");
    let o = crawlward(&["render", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(std::fs::read_to_string(out.join("crawlward-http.conf")).unwrap().contains("crawlward_ladder zone=crawlward_ladder:10m;"));
    assert!(std::fs::read_to_string(out.join("crawlward-catalogue.json")).unwrap().contains("\"mode\": \"observe\""));

    // never over a policy; an existing key is kept
    let o = init(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("exists: init writes a new policy only"), "{}", text(&o.stderr));
    std::fs::remove_file(&policy).unwrap();
    let o = init(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("kept      "), "{}", text(&o.stdout));
    assert_eq!(std::fs::read_to_string(&key).unwrap(), key_text, "the key is not replaced");

    // stock nginx: no module, no ladder
    std::fs::remove_file(&policy).unwrap();
    let o = init(&["--stock"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stock = std::fs::read_to_string(&policy).unwrap();
    assert!(!stock.contains("module:") && !stock.contains("classifier:"), "{stock}");
    for site in ["example.org", "https://a,b]/", "https://[2001:db8::1]/", "https://user@example.org/"] {
        let o = crawlward(&["init", "--site", site, "--out", dir.path().join("x.yaml").to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{site}");
        assert!(text(&o.stderr).contains("give the site's URL, e.g. https://example.org"), "{site}: {}", text(&o.stderr));
    }
    // a key file that is not one is not kept as if it were
    std::fs::remove_file(&policy).unwrap();
    std::fs::write(&key, "short\n").unwrap();
    let o = init(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("exists and is not a cookie key file"), "{}", text(&o.stderr));
    assert!(!policy.exists());

    // a relative key file is named whole, as nginx reads it from its own directory;
    // one nginx's configuration cannot take is refused before anything is written
    let o = crawlward(&["init", "--site", "https://example.org", "--out", policy.to_str().unwrap(), "--key-file", "relative.key"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let written = std::fs::read_to_string(&policy).unwrap();
    assert!(written.contains(&format!("cookie: {{key_file: {}}}", root().join("relative.key").display())), "{written}");
    std::fs::remove_file(root().join("relative.key")).unwrap();
    std::fs::remove_file(&policy).unwrap();
    let spaced = dir.path().join("my keys/cookie.key");
    let o = crawlward(&["init", "--site", "https://example.org", "--out", policy.to_str().unwrap(), "--key-file", spaced.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--key-file: invalid key_file") && text(&o.stderr).contains("a path without spaces"), "{}", text(&o.stderr));
    assert!(!policy.exists() && !spaced.exists());
}

/// account_names: folded where only the keys file names accounts does
/// nothing: check and render say so.
#[test]
fn folded_names_without_account_variables_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("api.yaml");
    std::fs::write(tmp.path().join("keys.yaml"), "keys: []\n").unwrap();
    std::fs::write(
        &policy,
        "site: {canonical_url: https://example.org, upstream_workers: 8}\nrobots: {}\nmodule: {}\napi_tiers:\n  paths: [/api/]\n  keys: keys.yaml\n  account_names: folded\n  tiers: [{name: standard}]\n",
    )
    .unwrap();
    let out = tmp.path().join("conf");
    let o = crawlward(&["render", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("api_tiers.account_names: folded has no effect without account variables"), "{}", text(&o.stderr));
}

/// An account or a tier the client writes is warned about, and a keys file
/// is rendered as hashes, never as the keys; a key listed twice, or an
/// unknown tier, stops the render.
#[test]
fn api_tiers_from_a_client_written_variable_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("api.yaml");
    let keys = tmp.path().join("keys.yaml");
    let hash = "904fc520be4ca9db80d0ffcc6bf7e01b4148e33d45bb6b422ad2e607815fb508";
    std::fs::write(&keys, format!("keys:\n  - {{account: acme, tier: gold, sha256: {hash}}}\n")).unwrap();
    std::fs::write(
        &policy,
        "site: {canonical_url: https://example.org, upstream_workers: 8}\nrobots: {}\nmodule: {}\napi_tiers:\n  paths: [/api/]\n  account: [$http_x_account, $remote_user, $ssl_client_s_dn]\n  tier: $arg_tier\n  keys: keys.yaml\n  tiers: [{name: standard}, {name: gold, hourly: 5000, daily: 50000}]\n",
    )
    .unwrap();
    let out = tmp.path().join("conf");
    let o = crawlward(&["render", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("api_tiers.account[0]: $http_x_account is written by the client: any client can name any account"), "{err}");
    assert!(err.contains("api_tiers.tier: $arg_tier is written by the client: any client can pick the largest tier"), "{err}");
    assert!(err.contains("api_tiers.account: $remote_user is what the client's Authorization header says unless auth_basic or auth_jwt checks it"), "{err}");
    // a certificate's subject is the client's own choice under optional_no_ca
    assert!(
        err.contains("api_tiers.account[2]: $ssl_client_s_dn is read from the client's certificate, which nginx checks under ssl_verify_client on or optional, not under optional_no_ca"),
        "{err}"
    );
    let http = std::fs::read_to_string(out.join("crawlward-http.conf")).unwrap();
    assert!(http.contains("crawlward_api_tier gold hourly=5000 daily=50000;"), "{http}");
    assert!(http.contains("crawlward_api_keys ") && http.contains("crawlward-api-keys.json header=X-API-Key;"), "{http}");
    let server = std::fs::read_to_string(out.join("crawlward-server.conf")).unwrap();
    assert!(
        server
            .contains("crawlward_quota zone=crawlward_quota paths=/api/ account=$http_x_account account=$remote_user account=$ssl_client_s_dn keys=on tier=$arg_tier default=standard;"),
        "{server}"
    );
    // the accounts' names folded where the sign-in ignores case and spaces
    std::fs::write(&policy, std::fs::read_to_string(&policy).unwrap().replace("  tier: $arg_tier\n", "  tier: $arg_tier\n  account_names: folded\n")).unwrap();
    let cased = tmp.path().join("cased");
    let o = crawlward(&["render", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", cased.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let server = std::fs::read_to_string(cased.join("crawlward-server.conf")).unwrap();
    assert!(server.contains(" account=$ssl_client_s_dn account_names=folded keys=on "), "{server}");
    std::fs::write(&policy, std::fs::read_to_string(&policy).unwrap().replace("account_names: folded", "account_names: lower")).unwrap();
    let o = crawlward(&["check", policy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("invalid value \"lower\": exact or folded") && text(&o.stderr).contains("(at api_tiers.account_names)"),
        "{}",
        text(&o.stderr)
    );
    std::fs::write(&policy, std::fs::read_to_string(&policy).unwrap().replace("  account_names: lower\n", "")).unwrap();
    let rendered = std::fs::read_to_string(out.join("crawlward-api-keys.json")).unwrap();
    assert!(rendered.contains(hash) && rendered.contains("\"tier\": \"gold\"") && rendered.contains("Do not edit"), "{rendered}");
    // an unknown tier in the keys file stops the render
    std::fs::write(&keys, format!("keys:\n  - {{account: acme, tier: platinum, sha256: {hash}}}\n")).unwrap();
    let o = crawlward(&["render", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", out.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o.stderr).contains("api_tiers.keys") && text(&o.stderr).contains("account \"acme\": no tier \"platinum\""), "{}", text(&o.stderr));
    // a second key of acme in another tier: rendered, with a warning naming the tier that holds
    let other = "be7df782af8078ebf81424068223c4993133431d522b67c61168fd9152097eb7";
    std::fs::write(&keys, format!("keys:\n  - {{account: acme, tier: gold, sha256: {hash}}}\n  - {{account: acme, sha256: {other}}}\n")).unwrap();
    let o = crawlward(&["render", policy.to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("api_tiers.keys: keys file ")
            && text(&o.stderr).contains(
                "account \"acme\": its keys give two tiers (gold and none); an account has one tier, whichever key is sent: its first key's, gold, holds"
            ),
        "{}",
        text(&o.stderr)
    );
}

/// `api-key` prints a key and the keys file's line with its SHA-256; the
/// line, added to a keys file, renders to the hash, never the key.
#[test]
fn api_key_prints_a_key_and_its_hashed_line() {
    let o = crawlward(&["api-key", "--account", "acme", "--tier", "gold"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    let (key, line) = (lines[0], lines[1]);
    assert!(key.starts_with("cw_") && key.len() == 35, "{out}");
    let hash = crawlward_policy::quota::hex(&crawlward_policy::quota::key_hash(key.as_bytes()));
    assert_eq!(line, format!("  - {{account: acme, tier: gold, sha256: {hash}}}"));
    let again = text(&crawlward(&["api-key", "--account", "acme"]).stdout);
    assert!(!again.contains(key), "a new key each time");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("keys.yaml"), format!("keys:\n{line}\n")).unwrap();
    std::fs::write(
        tmp.path().join("api.yaml"),
        "site: {canonical_url: https://example.org, upstream_workers: 8}\nrobots: {}\nmodule: {}\napi_tiers: {paths: [/api/], keys: keys.yaml, tiers: [{name: standard}, {name: gold}]}\n",
    )
    .unwrap();
    let conf = tmp.path().join("conf");
    let o = crawlward(&["render", tmp.path().join("api.yaml").to_str().unwrap(), "--ranges-dir", "t/ranges", "--out", conf.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let rendered = std::fs::read_to_string(conf.join("crawlward-api-keys.json")).unwrap();
    assert!(rendered.contains(&hash) && !rendered.contains(key), "{rendered}");
    assert_eq!(crawlward(&["api-key", "--account", "a b"]).status.code(), Some(2));
}

#[test]
fn check_reads_the_ladders_cookie_key_file_before_nginx_does() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("cookie.key");
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "site: {{canonical_url: https://example.org, upstream_workers: 8}}\nrobots: {{}}\nmodule: {{}}\nclassifier:\n  mode: observe\n  cookie: {{key_file: {}}}\n",
            key.display()
        ),
    )
    .unwrap();
    // nginx -t is not what this is about: a binary that fails it comes after
    let check = || crawlward(&["check", policy.to_str().unwrap(), "--nginx", "/bin/false"]);

    let o = check();
    assert_eq!(o.status.code(), Some(7), "{}{}", text(&o.stdout), text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("error: the ladder's cookie key file {} cannot be read (", key.display())), "{err}");
    assert!(err.contains("nginx refuses to start without it: make one with `crawlward init`, or: (umask 077; head -c 32 /dev/urandom | base64 >"), "{err}");

    std::fs::write(&key, "short\n").unwrap();
    let o = check();
    assert_eq!(o.status.code(), Some(7), "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stderr).contains(&format!("error: the ladder's cookie key file {}: ", key.display())), "{}", text(&o.stderr));

    std::fs::write(&key, "test-key-0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = check();
    assert_ne!(o.status.code(), Some(7), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!(
            "warning: the ladder's cookie key file {} can be read by users other than its owner (mode 0644): whoever reads it can sign session cookies",
            key.display()
        )),
        "{}",
        text(&o.stderr)
    );

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o620)).unwrap();
    let o = check();
    assert!(
        text(&o.stderr).contains("can be written by users other than its owner (mode 0620): whoever writes a key into it can sign session cookies"),
        "{}",
        text(&o.stderr)
    );

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = check();
    assert_ne!(o.status.code(), Some(7), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("cookie key file"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("crawlward: the ladder's cookie key file {} holds a key that signs", key.display())), "{}", text(&o.stdout));

    // a directory others may write to: they can put another file in its place
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = check();
    assert!(
        text(&o.stderr).contains(&format!(
            "warning: the ladder's cookie key file {}: the directory {} can be written by users other than its owner (mode 0777), who can replace what is in it",
            key.display(),
            tmp.path().display()
        )),
        "{}",
        text(&o.stderr)
    );
    assert!(!text(&o.stdout).contains("holds a key that signs"), "{}", text(&o.stdout));
    // with the sticky bit (as /tmp), only the file's owner can replace it
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = check();
    assert!(!text(&o.stderr).contains("cookie key file"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("holds a key that signs"), "{}", text(&o.stdout));
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();

    // a directory further up that others may write to: they can move the one below away
    let deep = tmp.path().join("open").join("keys");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::set_permissions(tmp.path().join("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let deep_key = deep.join("cookie.key");
    std::fs::copy(&key, &deep_key).unwrap();
    std::fs::set_permissions(&deep_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let deep_policy = tmp.path().join("deep.yaml");
    std::fs::write(
        &deep_policy,
        format!(
            "site: {{canonical_url: https://example.org, upstream_workers: 8}}\nrobots: {{}}\nmodule: {{}}\nclassifier:\n  mode: observe\n  cookie: {{key_file: {}}}\n",
            deep_key.display()
        ),
    )
    .unwrap();
    let o = crawlward(&["check", deep_policy.to_str().unwrap(), "--nginx", "/bin/false"]);
    assert!(
        text(&o.stderr).contains(&format!("the directory {} can be written by users other than its owner (mode 0777)", tmp.path().join("open").display())),
        "{}",
        text(&o.stderr)
    );

    // owned by another user, who can rewrite it whatever its mode; a link another
    // user owns, who can point it elsewhere (as root only: chown)
    if std::os::unix::fs::chown(&key, Some(65534), None).is_ok() {
        let o = check();
        assert!(
            text(&o.stderr).contains(&format!(
                "warning: the ladder's cookie key file {}: {} is owned by uid 65534, who can rewrite it whatever its mode (chown root:root {}): whoever puts a key there can sign session cookies as any client",
                key.display(),
                key.display(),
                key.display()
            )),
            "{}",
            text(&o.stderr)
        );
        std::os::unix::fs::chown(&key, Some(0), None).unwrap();
        let link = tmp.path().join("link.key");
        std::os::unix::fs::symlink(&key, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
        let link_policy = tmp.path().join("link.yaml");
        std::fs::write(
            &link_policy,
            format!(
                "site: {{canonical_url: https://example.org, upstream_workers: 8}}\nrobots: {{}}\nmodule: {{}}\nclassifier:\n  mode: observe\n  cookie: {{key_file: {}}}\n",
                link.display()
            ),
        )
        .unwrap();
        let o = crawlward(&["check", link_policy.to_str().unwrap(), "--nginx", "/bin/false"]);
        assert!(text(&o.stderr).contains("it is a link owned by uid 65534, who can point it at another file"), "{}", text(&o.stderr));
    }
}

/// nginx -t, run as root, makes the temporary directories it knows and gives
/// them to its user: check's test configuration keeps them under its own
/// temporary root, so that the machine's (Debian's /var/lib/nginx/body,
/// www-data's) are never given to `nobody` under the running nginx. A
/// module the build left out has no directive to set.
#[test]
fn checks_nginx_keeps_its_temporary_directories_to_itself() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("seen.conf");
    let nginx = tmp.path().join("nginx");
    std::fs::write(
        &nginx,
        format!(
            "#!/bin/sh\nif [ \"$1\" = -V ]; then echo 'configure arguments: --http-client-body-temp-path=/var/lib/nginx/body --without-http_uwsgi_module' >&2; exit 0; fi\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -c ]; then cp \"$2\" {}; fi; shift; done\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&nginx, std::fs::Permissions::from_mode(0o755)).unwrap();
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(&policy, "site: {canonical_url: https://example.org, upstream_workers: 8}\nrobots: {}\n").unwrap();
    let o = crawlward(&["check", policy.to_str().unwrap(), "--nginx", nginx.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
    let conf = std::fs::read_to_string(&seen).unwrap();
    let root = regex::Regex::new(r"(?m)^pid (\S+)/nginx\.pid;$").unwrap().captures(&conf).unwrap()[1].to_string();
    assert!(root.contains("crawlward-check."), "{conf}");
    for line in [
        format!("client_body_temp_path {root}/client_body_temp;"),
        format!("proxy_temp_path {root}/proxy_temp;"),
        format!("fastcgi_temp_path {root}/fastcgi_temp;"),
        format!("scgi_temp_path {root}/scgi_temp;"),
    ] {
        assert!(conf.lines().any(|l| l.trim() == line), "{line} not in:\n{conf}");
    }
    assert!(!conf.contains("uwsgi_temp_path"), "{conf}");
}
