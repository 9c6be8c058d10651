//! The server's own directives: maintenance, the bot-blocker, the crawl
//! budgets, robots.txt and the status page.

use super::files::{RenderOptions, ROBOTS_FILE};
use crate::nginx::{quote, Directives, Map};
use crawlward_policy::{Action, Policy};

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
    d
}

/// The crawl budgets of the server (module only).
pub fn budget(policy: &Policy) -> Option<Directives> {
    let b = policy.crawl_budget.as_ref()?;
    let l = &b.limits;
    let mut d = Directives::default();
    d.comment("GET and HEAD from crawlers (a named agent, or no User-Agent) that are not signed in; deep");
    d.comment("paths (robots.deep_paths) have the tighter limit; 429 with Retry-After past any budget.");
    let verified = match l.verified {
        Some(v) => format!(" verified={},{}", v.general, v.deep),
        None => String::new(),
    };
    if verified.is_empty() {
        d.comment("Verified crawlers are not counted (crawl_budget.verified sets a budget for them); robots.txt");
    } else {
        d.comment("Verified crawlers count per agent name against verified= only; robots.txt");
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

pub fn robots_location(dir: &str) -> Directives {
    let mut d = Directives::default();
    d.block("location = /robots.txt", &[format!("alias {}", quote(&format!("{dir}/{ROBOTS_FILE}"))), "default_type text/plain".into(), "charset utf-8".into()]);
    d
}
