//! The server's own directives: maintenance, the bot-blocker, the crawl
//! budgets, robots.txt and the status page.

use super::files::{RenderOptions, ROBOTS_FILE};
use crate::nginx::{quote, Directives, Map};
use crawlward_policy::decide::prefix_regex;
use crawlward_policy::robots_txt::{KEPT_DIR, KEPT_FILE, NEWEST_FILE, REFUSED_FILE};
use crawlward_policy::{Action, Policy, RobotsSource};

/// `site.redirect_hosts` at the http level: which host names are the site's others.
pub fn redirect_map(policy: &Policy) -> Option<Map> {
    let site = &policy.site;
    if site.redirect_hosts.is_empty() {
        return None;
    }
    let comment = format!("The site's other host names (site.redirect_hosts): each answers one 301 to {}.", site.canonical_origin);
    let mut m = Map::new(&comment, "$host", "$cw_redirect", "0");
    for host in &site.redirect_hosts {
        m.entry(host.as_str(), "1");
    }
    Some(m)
}

/// The redirect of `site.redirect_hosts`, first in the server: one 301 to the
/// canonical URL's scheme and host, with the request's path and query as sent.
pub fn redirect(policy: &Policy) -> Option<Directives> {
    if policy.site.redirect_hosts.is_empty() {
        return None;
    }
    let mut d = Directives::default();
    d.block("if ($cw_redirect)", &[format!("return 301 {}$request_uri", policy.site.canonical_origin)]);
    Some(d)
}

pub fn maintenance(policy: &Policy, opts: &RenderOptions) -> Directives {
    let mut d = Directives::default();
    d.line("set $crawlward_maintenance \"\"");
    let Some(m) = &policy.maintenance else { return d };
    d.block(&format!("if (-f {})", quote(&opts.path(&m.flag_file))), &["set $crawlward_maintenance on".into()]);
    d.block("if ($uri = /robots.txt)", &["set $crawlward_maintenance \"\"".into()]);
    d.block("if ($crawlward_maintenance)", &["return 503".into()]);
    d
}

pub fn status_location(policy: &Policy) -> Option<Directives> {
    let m = policy.module.as_ref()?;
    let path = m.status.as_ref()?;
    let mut body = vec!["crawlward off".to_string(), "crawlward_status".to_string()];
    body.extend(m.status_allow.iter().map(|n| format!("allow {n}")));
    body.push("deny all".into());
    let mut d = Directives::default();
    d.block(&format!("location = {}", quote(path)), &body);
    Some(d)
}

pub fn blocker(policy: &Policy) -> Directives {
    let mut d = Directives::default();
    if let Some(m) = &policy.module {
        d.comment("The module refuses in the access phase: 444 closes the connection, 403 answers.");
        d.line("crawlward on");
        if m.dry_run {
            d.comment("Dry run: decide, count and log (\"would refuse\"), refuse nothing.");
            d.line("crawlward_dry_run on");
        }
        return d;
    }
    d.block(&format!("if ($crawlward_action = {})", Action::Block(444).as_str()), &["return 444".into()]);
    d.block(&format!("if ($crawlward_action = {})", Action::Block(403).as_str()), &["return 403".into()]);
    if policy.rate_limits.is_some() {
        d.comment("The client's key in the rate classes, read here, in the server's rewrite phase: its expression's");
        d.comment("captures would otherwise replace the $1, $2... of the site's own regex location where limit_req reads it.");
        d.line("set $cw_client_key_read $cw_client_key");
    }
    d
}

/// The crawl budgets of the server (module only).
pub fn budget(policy: &Policy) -> Option<Directives> {
    let b = policy.crawl_budget.as_ref()?;
    let l = &b.limits;
    let mut d = Directives::default();
    d.comment("GET and HEAD from crawlers (a named agent, or no User-Agent) that are not signed in; deep");
    d.comment("paths (robots.deep_paths) have the tighter limit; 429 with Retry-After past any budget.");
    let until = l.verified_until_s.map(|s| format!(" verified_until={}", crawlward_policy::ranges::rfc3339(s))).unwrap_or_default();
    let verified = match l.verified {
        Some(v) => format!(" verified={},{}{until}", v.general, v.deep),
        None => String::new(),
    };
    if verified.is_empty() {
        d.comment("Verified crawlers are not counted (crawl_budget.verified sets a budget for them); robots.txt");
    } else if until.is_empty() {
        d.comment("Verified crawlers count per agent name against verified= only, with no end (crawlward check warns); robots.txt");
    } else {
        d.comment("Verified crawlers count per agent name against verified= only, until verified_until (a slowdown on");
        d.comment("purpose ends by itself; after it they are not counted); robots.txt");
    }
    d.comment("and the machine doors never are.");
    d.line(format!(
        "crawlward_budget zone=crawlward_budget address={},{} agent={},{} shared={},{}{verified}",
        l.address.general, l.address.deep, l.agent.general, l.agent.deep, l.shared.general, l.shared.deep
    ));
    if !b.signed_in.is_empty() {
        d.line(format!("crawlward_budget_signed_in {}", b.signed_in.join(" ")));
    }
    Some(d)
}

/// The API quotas of the server (module only): on the metered doors, per
/// account, after nginx's access phase has checked who is asking.
pub fn quota(policy: &Policy) -> Option<Directives> {
    let a = policy.api_tiers.as_ref()?;
    let mut d = Directives::default();
    d.comment("Requests with an account (from the server-checked variables, else a key from the keys file) count");
    d.comment("against their tier's hourly and daily quota: 429 with Retry-After past it, RateLimit-Policy and");
    d.comment("RateLimit on every answer. A request without one keeps its door's per-address rate class.");
    let mut words = vec![format!("crawlward_quota zone=crawlward_quota paths={}", a.paths.join(","))];
    words.extend(a.account.iter().map(|v| format!("account={v}")));
    if a.account_names_folded && !a.account.is_empty() {
        words.push("account_names=folded".into());
    }
    if a.keys_file.is_some() {
        words.push("keys=on".into());
    }
    if let Some(t) = &a.tier {
        words.push(format!("tier={t}"));
    }
    words.push(format!("default={}", a.default));
    d.line(words.join(" "));
    Some(d)
}

/// `preferences.header` at the http level: the `Content-Usage` value of a
/// request's path, the longest of `preferences.paths` that it starts with,
/// else the site's.
pub fn content_usage_map(policy: &Policy) -> Option<Map> {
    let prefs = &policy.preferences;
    if !prefs.header {
        return None;
    }
    let comment = "The site's preferences for the use of its content, for the Content-Usage header (preferences.header).";
    let mut m = Map::new(comment, "$uri", "$crawlward_content_usage", &prefs.site.dictionary().unwrap_or_default());
    // paths are kept longest first: the first regex that matches is the longest prefix
    for (path, usage) in &prefs.paths {
        m.regex(&prefix_regex(path, policy.site.front_controller.as_deref()), usage.dictionary().unwrap_or_default());
    }
    Some(m)
}

/// `preferences.header` in the server: the request's path is read when the
/// request arrives, before a `try_files`, an `index` or a rewrite changes `$uri`.
pub fn content_usage(policy: &Policy) -> Option<Directives> {
    if !policy.preferences.header {
        return None;
    }
    let mut d = Directives::default();
    d.line("set $crawlward_content_usage_of_request $crawlward_content_usage");
    Some(d)
}

/// `robots.source: app` at the http level: an answer of the application is
/// kept only when it is plain text and not encoded; any other 200 is written
/// beside it as `refused.txt`, for the operator to read, and never served.
pub fn robots_keep_map(policy: &Policy, dir: &str) -> Option<Map> {
    let RobotsSource::App { .. } = policy.robots.source else { return None };
    // with the module, a plain-text answer is read before it is kept (crawlward_robots_kept)
    let (comment, good) = if policy.module.is_some() {
        (
            "robots.txt from the application (robots.source: app): a complete plain-text 200, not encoded, is\n\
             stored as robots.txt.new; the module keeps it when it reads as robots.txt. Another 200 is stored as refused.txt.",
            NEWEST_FILE,
        )
    } else {
        (
            "robots.txt from the application (robots.source: app): a complete 200 answer replaces the\n\
             kept copy only when it is plain text, not encoded; another 200 is stored as refused.txt.",
            KEPT_FILE,
        )
    };
    let mut m =
        Map::new(comment, "$upstream_http_content_type|$upstream_http_content_encoding", "$crawlward_robots_keep", &format!("{dir}/{KEPT_DIR}/{REFUSED_FILE}"));
    m.regex_ci(r"^text/plain\s*(;[^|]*)?\|(identity)?$", format!("{dir}/{KEPT_DIR}/{good}"));
    Some(m)
}

/// How often robots.txt requests reach the application (`robots.source:
/// app`), per server: robots.txt is never refused, so past this rate nginx
/// answers from the kept copy, and no flood of robots.txt requests, from
/// any number of addresses, reaches the application.
pub const APP_RATE: &str = "5r/s";
pub const APP_BURST: u32 = 10;

/// The zone of that rate, at the http level.
pub fn robots_app_zone(policy: &Policy) -> Option<Directives> {
    let RobotsSource::App { .. } = policy.robots.source else { return None };
    let mut d = Directives::default();
    d.comment(&format!("At most {APP_RATE} (burst {APP_BURST}) robots.txt requests of a server reach the application; past it the kept copy answers."));
    d.line(format!("limit_req_zone $server_name zone=crawlward_robots_app:64k rate={APP_RATE}"));
    Some(d)
}

pub fn robots_location(policy: &Policy, dir: &str, opts: &RenderOptions) -> Directives {
    let mut d = Directives::default();
    let RobotsSource::App { url, timeout } = &policy.robots.source else {
        d.comment("Rendered by crawlward from the same policy.");
        d.block(
            "location = /robots.txt",
            &[format!("alias {}", quote(&format!("{dir}/{ROBOTS_FILE}"))), "default_type text/plain".into(), "charset utf-8".into()],
        );
        return d;
    };
    d.comment("From the application (robots.source: app), never a 5xx: nginx asks the application, stores");
    d.comment("each good 200 answer (proxy_store), and answers from the kept copy, else the rendered one,");
    d.comment("while maintenance is on and when the application answers 429 or 5xx, times out or is down.");
    let mut inner = Directives::default();
    inner.line("error_page 418 429 500 502 503 504 = @crawlward_robots_kept");
    inner.line(format!("limit_req zone=crawlward_robots_app burst={APP_BURST} nodelay"));
    inner.line("limit_req_status 429").line("limit_req_log_level info");
    if let Some(m) = &policy.maintenance {
        inner.block(&format!("if (-f {})", quote(&opts.path(&m.flag_file))), &["return 418".into()]);
    }
    inner.comment("Every client's request is the same request to the application, so none can choose what is");
    inner.comment("kept: GET, no query, the canonical host, no cookie or credentials, no body.");
    inner.line("set $args \"\"");
    inner.line(format!("proxy_pass {}", quote(url)));
    inner.line("proxy_method GET").line("proxy_pass_request_body off").line("proxy_set_header Content-Length \"\"");
    let host = policy.site.canonical_origin.split_once("://").map_or("", |(_, h)| h);
    inner.line(format!("proxy_set_header Host {}", quote(host)));
    inner.line("proxy_set_header Cookie \"\"").line("proxy_set_header Authorization \"\"");
    inner.comment("The kept copy is the whole file as sent: not compressed, not a range, never a 304 (nginx");
    inner.comment("still answers 304 to a client whose copy is current), and no header of the application's");
    inner.comment("turns off the buffering that stores it.");
    for h in ["Accept-Encoding", "Range", "If-Range", "If-Modified-Since", "If-None-Match"] {
        inner.line(format!("proxy_set_header {h} \"\""));
    }
    inner.line("proxy_ignore_headers X-Accel-Redirect X-Accel-Buffering X-Accel-Limit-Rate X-Accel-Charset");
    for t in ["connect", "send", "read"] {
        inner.line(format!("proxy_{t}_timeout {timeout}s"));
    }
    if url.starts_with("https://") {
        inner.line("proxy_ssl_server_name on");
    }
    inner.line("proxy_intercept_errors on").line("proxy_buffering on");
    inner.line("proxy_store $crawlward_robots_keep").line("proxy_store_access user:rw group:r all:r");
    inner.line(format!("proxy_temp_path {}", quote(&format!("{dir}/{KEPT_DIR}"))));
    d.nest("location = /robots.txt", &inner);
    if policy.module.is_some() {
        // the module reads the newest answer, keeps it if it reads as robots.txt, and answers
        d.block("location @crawlward_robots_kept", &[format!("crawlward_robots_kept {}", quote(dir))]);
    } else {
        d.block(
            "location @crawlward_robots_kept",
            &[
                format!("root {}", quote(dir)),
                format!("try_files /{KEPT_DIR}/{KEPT_FILE} /{ROBOTS_FILE} =404"),
                "default_type text/plain".into(),
                "charset utf-8".into(),
            ],
        );
    }
    d
}
