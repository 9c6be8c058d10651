//! Layer 4: the rate classes per client address (`limit_req_zone` and the
//! maps that key them, or the module's keys), and the server's limits file
//! (the browse cap, the classes' `limit_req`, Retry-After and the logs).

use super::browse::{module_browse_cap, shared_browse_cap};
use super::files::RenderOptions;
use super::identity::{absent, passing_actions};
use super::logs::ANALYZE_LOG_FORMAT;
use crate::nginx::{quote, Directives, Map};
use crawlward_policy::decide::prefix_regex;
use crawlward_policy::{Policy, Verdict};

pub fn rate_blocks(policy: &Policy) -> Vec<String> {
    if policy.module.is_some() {
        return module_rates(policy);
    }
    let Some(rl) = &policy.rate_limits else { return absent("rate_limits", "$crawlward_limit_class") };
    let mut out = Vec::new();
    let default_class = rl.classes.iter().find(|c| c.paths.is_empty()).map(|c| c.name.as_str()).unwrap_or("default");
    let mut uri = Map::new(
        "---- Layer 4, rate limits per client address. The class of a path: the longest matching prefix.\nrobots.txt is in none: it is never rate-limited.",
        "$uri",
        "$cw_uri_class",
        default_class,
    );
    uri.regex("^/robots\\.txt\\z", "");
    for (prefix, class) in policy.class_prefixes() {
        uri.regex(&prefix_regex(prefix, policy.site.front_controller.as_deref()), class);
    }
    out.push(uri.to_string());

    let mut class = Map::new(
        "The class a request is counted in; empty (not counted) for verified crawlers.",
        "$crawlward_action:$crawlward_verdict:$cw_uri_class",
        "$crawlward_limit_class",
        "",
    );
    for action in passing_actions() {
        for verdict in Verdict::ALL {
            for c in &rl.classes {
                if let Some(counted) = policy.limit_class(action, verdict, &c.name) {
                    class.entry(format!("{}:{}:{}", action.as_str(), verdict.as_str(), c.name), counted);
                }
            }
        }
    }
    out.push(class.to_string());

    // the client's key (crawlward_policy::net::client_key, as the module keys it): an IPv6
    // address by its /64, an IPv4 address an IPv6 socket maps as the IPv4 address; the bytes
    // of $binary_remote_addr, matched whatever they are ((?s): a newline's byte too)
    let mut client = Map::new(
        "A client's key in the rate classes: its address, an IPv6 one by its /64 (one subscriber's network,\nin which a client can take a new address for every request).",
        "$binary_remote_addr",
        "$cw_client_key",
        "$binary_remote_addr",
    );
    client.regex("(?s)^\\x00{10}\\xff\\xff(?<cw_client_v4>.{4})\\z", "$cw_client_v4");
    client.regex("(?s)^(?<cw_client_v6>.{8}).{8}\\z", "$cw_client_v6");
    out.push(client.to_string());
    let all: Vec<&crawlward_policy::RateClassV> = rl.classes.iter().chain(rl.throttle.iter()).collect();
    for c in all {
        let mut key = Map::new("", "$crawlward_limit_class", &format!("$cw_key_{}", c.name), "");
        key.comment.clear();
        key.entry(c.name.as_str(), "$cw_client_key");
        out.push(format!("{key}\nlimit_req_zone $cw_key_{name} zone=crawlward_{name}:{size} rate={rate};", name = c.name, size = rl.zone_size, rate = c.rate));
    }
    out
}

/// With the module: the module puts each request in its rate class and gives
/// each class's key.
fn module_rates(policy: &Policy) -> Vec<String> {
    let Some(rl) = &policy.rate_limits else { return Vec::new() };
    let mut out = vec![format!(
        "# ---- Layer 4, rate limits per client address. The module puts a request in its class,\n\
         # $crawlward_limit_class: the class with the longest matching path prefix, else {}; none\n\
         # for robots.txt{}{}. $crawlward_key_<class> is the client\n\
         # address ($binary_remote_addr) in that class's zone, empty in the others.",
        rl.classes.iter().find(|c| c.paths.is_empty()).map_or("default", |c| c.name.as_str()),
        if rl.exempt_verified { " and for verified crawlers" } else { "" },
        if rl.throttle.is_some() { "; the throttle class for the throttle action" } else { "" },
    )];
    let zones: Vec<String> = rl
        .classes
        .iter()
        .chain(rl.throttle.iter())
        .map(|c| format!("limit_req_zone $crawlward_key_{name} zone=crawlward_{name}:{size} rate={rate};", name = c.name, size = rl.zone_size, rate = c.rate))
        .collect();
    out[0].push('\n');
    out[0].push_str(&zones.join("\n"));
    out
}

pub fn limits(policy: &Policy, opts: &RenderOptions) -> Directives {
    let mut d = Directives::default();
    if let Some(b) = policy.browse.as_ref().filter(|_| module_browse_cap(policy)) {
        let across = if shared_browse_cap(policy) { "across the nodes (the module's, shared through the store)" } else { "site-wide (the module's)" };
        d.comment(&format!("Browse cap: {} requests in flight on browse pages {across}; 503 past it, no queue.", b.max_in_flight));
        d.line(format!("crawlward_browse_cap zone=crawlward_budget max={}", b.max_in_flight));
    } else if let Some(b) = &policy.browse {
        d.comment(&format!("Browse cap: {} requests in flight on browse pages, site-wide; 503 past it, no queue.", b.max_in_flight));
        d.line(format!("limit_conn crawlward_browse {}", b.max_in_flight));
        d.line("limit_conn_status 503");
    }
    if let Some(rl) = &policy.rate_limits {
        d.comment("Rate classes per client address; 429 past them.");
        for c in rl.classes.iter().chain(rl.throttle.iter()) {
            if c.burst > 0 {
                d.line(format!("limit_req zone=crawlward_{} burst={} nodelay", c.name, c.burst));
            } else {
                d.line(format!("limit_req zone=crawlward_{}", c.name));
            }
        }
        d.line("limit_req_status 429");
    }
    if policy.module.is_some() {
        d.comment("Retry-After on crawlward's own 429 and 503: the module adds it (no add_header here).");
    } else {
        d.comment("Retry-After on crawlward's own 429 and 503 only (an empty value adds no header).");
        d.line("add_header Retry-After $crawlward_retry_after always");
    }
    if policy.preferences.header {
        d.comment("The site's preferences for the use of its content (preferences.header), on every response.");
        d.line("add_header Content-Usage $crawlward_content_usage_of_request always");
    }
    d.comment("Throttled requests in their own log, to spot false positives.");
    d.line(format!("access_log {} crawlward if=$crawlward_throttled", quote(&opts.path(&policy.install.throttle_log))));
    if let Some(log) = &policy.install.access_log {
        d.comment("The site's access log, every request, in the format `crawlward analyze` reads.");
        d.line(format!("access_log {} {ANALYZE_LOG_FORMAT}", quote(&opts.path(log))));
    }
    d
}
