//! Layers 2 and 3: the facet guard and the browse cap, as stock nginx's maps
//! and `limit_conn`, or as the module's directives.

use super::identity::{absent, passing_actions};
use crate::nginx::{Directives, Map};
use crawlward_policy::decide::{prefix_regex, FacetPatterns};
use crawlward_policy::query::FacetSubject;
use crawlward_policy::{Policy, Verdict};

pub fn browse_blocks(policy: &Policy) -> Vec<String> {
    if policy.module.is_some() {
        return module_browse(policy);
    }
    let (Some(b), Some(fp)) = (&policy.browse, FacetPatterns::new(policy)) else { return absent("browse_shed", "$crawlward_facet") };
    let mut out = Vec::new();
    let mut browse =
        Map::new(&format!("---- Layer 2, the facet guard, and layer 3, the browse cap.\nBrowse pages: {}.", b.locations.join(", ")), "$uri", "$cw_browse", "0");
    for l in &b.locations {
        browse.regex(&prefix_regex(l, policy.site.front_controller.as_deref()), "1");
    }
    out.push(browse.to_string());

    let mut crawler = Map::new(
        "Who the facet guard sees: 1 a crawler, 0 a person, x exempt (verified, if so set).",
        "$crawlward_verdict",
        "$cw_facet_bot",
        FacetSubject::Crawler.as_str(),
    );
    for v in Verdict::ALL {
        let subject = policy.facet_subject(v);
        if subject != FacetSubject::Crawler {
            crawler.entry(v.as_str(), subject.as_str());
        }
    }
    out.push(crawler.to_string());

    let mut params = Map::new(&format!("{} or more query parameters.", b.crawler_max_params), "$args", "$cw_params_over", "0");
    params.regex(&fp.params_over, "1");
    out.push(params.to_string());
    let mut facets =
        Map::new(&format!("{} or more facet parameters (a facet named twice counts twice).", b.max_facets_without_referer), "$args", "$cw_facets_over", "0");
    facets.regex(&fp.facets_over, "1");
    out.push(facets.to_string());
    let mut same = Map::new(&format!("A Referer from the site itself: {}.", policy.site.same_site_hosts.join(", ")), "$http_referer", "$cw_same_site", "0");
    same.regex_ci(&fp.same_site, "1");
    out.push(same.to_string());

    // Chained: the regexes above are evaluated for browse pages only.
    let mut signals = Map::new("Chained so that the regexes run on browse pages only.", "$cw_browse", "$cw_signals", "");
    signals.entry("1", "$crawlward_action:$cw_facet_bot$cw_params_over$cw_facets_over$cw_same_site");
    out.push(signals.to_string());
    let mut rule = Map::new(
        "action: who, params over, facets over, same-site Referer -> the facet rule that refuses (429).\nA request the bot-blocker refuses is left to it (the module refuses in the access phase, after this).",
        "$cw_signals",
        "$crawlward_facet",
        "",
    );
    for subject in FacetSubject::ALL {
        for bits in 0..8u8 {
            let bit = |i: u8| bits & (1 << (2 - i)) != 0;
            if let Some(r) = policy.facet_rule(true, subject, bit(0), bit(1), bit(2)) {
                let flags: String = (0..3).map(|i| if bit(i) { '1' } else { '0' }).collect();
                for action in passing_actions() {
                    rule.entry(format!("{}:{}{flags}", action.as_str(), subject.as_str()), r.as_str());
                }
            }
        }
    }
    out.push(rule.to_string());
    out.extend(browse_key(policy));
    out
}

/// With the module: the facet guard is the module's `crawlward_facets`, and
/// the browse cap's key is the module's `$crawlward_browse_key`.
fn module_browse(policy: &Policy) -> Vec<String> {
    let Some(b) = &policy.browse else { return Vec::new() };
    let exempt = if policy.browse_cap_counts(Verdict::Verified) { "" } else { ", nor a verified crawler (cap_exempt_verified)" };
    if module_browse_cap(policy) {
        let counted = if shared_browse_cap(policy) { "counted in the budget zone and shared with the other nodes" } else { "counted in the budget zone" };
        return vec![format!(
            "# ---- Layer 2, the facet guard: the module's crawlward_facets (crawlward-server.conf).\n\
             # Layer 3, the browse cap on {}: the module's crawlward_browse_cap (crawlward-limits.conf),\n\
             # {counted}; the cap is global, not per address (heratio.org's guide). A\n\
             # place is given back once the upstream is done, so a slow reader holds none. A refused\n\
             # request takes no place in it{exempt}.",
            b.locations.join(", ")
        )];
    }
    vec![format!(
        "# ---- Layer 2, the facet guard: the module's crawlward_facets (crawlward-server.conf).\n\
         # Layer 3, the browse cap on {}: one shared key, the module's\n\
         # $crawlward_browse_key, \"browse\" on a browse page and empty elsewhere; the cap is global,\n\
         # not per address (heratio.org's guide). A refused request takes no place in it{exempt}.\n\
         limit_conn_zone $crawlward_browse_key zone=crawlward_browse:1m;",
        b.locations.join(", ")
    )]
}

/// Whether the module owns the browse cap, shared across the nodes
/// (`crawl_budget.sync.browse_cap`), instead of each node's `limit_conn`.
pub fn shared_browse_cap(policy: &Policy) -> bool {
    policy.module.is_some() && policy.crawl_budget.as_ref().and_then(|c| c.sync.as_ref()).is_some_and(|s| s.browse_cap)
}

/// Whether the browse cap is the module's `crawlward_browse_cap`, counted in
/// the budget zone, rather than `limit_conn`: with the module and a budget
/// zone, unless the zone is synced and the cap is to stay each node's own
/// (`crawl_budget.sync` without `browse_cap`). The module's cap gives a
/// place back once the upstream is done, where `limit_conn` holds it until
/// the client has read the whole response.
pub fn module_browse_cap(policy: &Policy) -> bool {
    policy.module.is_some() && policy.crawl_budget.as_ref().is_some_and(|c| c.sync.as_ref().is_none_or(|s| s.browse_cap))
}

/// The browse cap's key and zone.
fn browse_key(policy: &Policy) -> Vec<String> {
    let exempt = if policy.browse_cap_counts(Verdict::Verified) { "" } else { " Nor do verified crawlers (cap_exempt_verified)." };
    let mut key = Map::new(
        &format!("One shared key: the cap is global, not per address (heratio.org's guide). Refused requests do not count.{exempt}"),
        "$crawlward_action:$crawlward_verdict:$cw_browse",
        "$cw_browse_key",
        "",
    );
    for action in passing_actions() {
        for verdict in Verdict::ALL.into_iter().filter(|v| policy.browse_cap_counts(*v)) {
            key.entry(format!("{}:{}:1", action.as_str(), verdict.as_str()), "browse");
        }
    }
    vec![key.to_string(), "limit_conn_zone $cw_browse_key zone=crawlward_browse:1m;".into()]
}

pub fn facet_guard(policy: &Policy) -> Directives {
    let mut d = Directives::default();
    if let (Some(_), Some(g)) = (&policy.module, policy.facet_guard()) {
        d.comment("The module parses the query string (percent-decoding, +, repeated parameters) and the");
        d.comment("Referer's host, and answers 429 with Retry-After on the browse pages (paths=).");
        let list = |v: &[String]| v.join(",");
        let mut line = format!("crawlward_facets paths={}", list(&g.paths));
        if !g.facets.names.is_empty() {
            line.push_str(&format!(" names={}", list(&g.facets.names.iter().map(|n| n.replace(' ', "+")).collect::<Vec<_>>())));
        }
        if !g.facets.prefixes.is_empty() {
            line.push_str(&format!(" prefixes={}", list(&g.facets.prefixes.iter().map(|n| n.replace(' ', "+")).collect::<Vec<_>>())));
        }
        line.push_str(&format!(" crawler_max_params={} max_facets_without_referer={}", g.crawler_max_params, g.max_facets_without_referer));
        if !g.same_site_hosts.is_empty() {
            line.push_str(&format!(" same_site={}", list(&g.same_site_hosts)));
        }
        line.push_str(&format!(" exempt_verified={} retry_after={}", if g.exempt_verified { "on" } else { "off" }, g.retry_after));
        d.line(line);
        return d;
    }
    d.block("if ($crawlward_facet)", &["return 429".into()]);
    d
}
