//! The module's http-level directives: its catalogue, its counters zone, the
//! DNS cache, the crawl budgets' zone and the ladder's.

use super::files::{API_KEYS_FILE, CATALOGUE_FILE, SIGNATURE_KEYS_FILE};
use crate::nginx::{quote, Directives};
use crawlward_policy::Policy;

pub fn module_http(policy: &Policy, dir: &str) -> Option<Directives> {
    let m = policy.module.as_ref()?;
    let mut d = Directives::default();
    d.line(format!("crawlward_catalogue {}", quote(&format!("{dir}/{CATALOGUE_FILE}"))));
    d.line(format!("crawlward_zone zone=crawlward:{}", m.zone_size));
    if let Some(dns) = &m.dns {
        d.comment("Forward-confirmed reverse DNS for agents with hostname suffixes whose published ranges");
        d.comment("do not cover the client: PTR under a suffix, then A/AAAA back to the address, through");
        d.comment("nginx's resolver; verdicts cached in a shared zone for all workers.");
        if !dns.resolver.is_empty() {
            d.line(format!("resolver {}", dns.resolver.join(" ")));
        }
        d.line(format!("resolver_timeout {}", dns.resolver_timeout));
        d.line(format!(
            "crawlward_dns_cache zone=crawlward_dns:{} verified={} spoofed={} unresolved={} stale_verified={} max_lookups={} lookups_per_address={} lookups_per_network={} unresolved_as={}",
            dns.zone_size,
            dns.valid_verified,
            dns.valid_spoofed,
            dns.valid_unresolved,
            dns.stale_verified,
            dns.settings.max_lookups,
            dns.settings.lookups_per_address,
            dns.settings.lookups_per_network,
            dns.unresolved.as_str()
        ));
    }
    if let Some(b) = &policy.crawl_budget {
        d.comment("Crawl budgets (the forge's crawl-budget review): counts per address, agent name and all crawlers, shared by the workers.");
        let sync = match &b.sync {
            Some(s) => {
                d.comment(&format!("Shared by {} nodes through {}; each node its budgets divided by {} while it does not answer.", s.nodes, s.store, s.nodes));
                format!(" sync={} nodes={} sync_interval={} sync_timeout={}", s.store, s.nodes, s.interval, s.timeout)
            }
            None => String::new(),
        };
        d.line(format!("crawlward_budget_zone zone=crawlward_budget:{} agents={} lag={} shrink={}{sync}", b.zone_size, b.agents, b.lag, b.shrink));
    }
    if let Some(a) = &policy.api_tiers {
        d.comment("API quotas per account (heratio.org's layer 4): a zone of their own, so that no crawler's");
        d.comment("address can take an account's place; shared through the budgets' store when crawl_budget.sync is set.");
        let sync = match policy.crawl_budget.as_ref().and_then(|b| b.sync.as_ref()) {
            Some(s) => format!(" sync={} nodes={} sync_interval={} sync_timeout={}", s.store, s.nodes, s.interval, s.timeout),
            None => String::new(),
        };
        d.line(format!("crawlward_budget_zone zone=crawlward_quota:{}{sync}", a.zone_size));
        for t in &a.tiers {
            let daily = t.daily.map(|n| format!(" daily={n}")).unwrap_or_default();
            d.line(format!("crawlward_api_tier {} hourly={}{daily}", t.name, t.hourly));
        }
        if a.keys_file.is_some() {
            d.comment("API keys by their SHA-256 (never the keys): read again within a second of a new render, no reload.");
            d.line(format!("crawlward_api_keys {} header={}", quote(&format!("{dir}/{API_KEYS_FILE}")), a.key_header));
        }
    }
    if let Some((live, _)) = &policy.ladder {
        d.comment("The proportional ladder: every client scored on passive signals (rate, novelty, path concentration,");
        d.comment(&format!(
            "User-Agent spread, sessions, rules kept) and placed on a rung; {}.",
            match live.mode {
                crawlward_policy::ladder::Mode::Observe => "observe mode: scored, placed and logged, nothing refused",
                crawlward_policy::ladder::Mode::Enforce => "enforce mode: each rung answers as the policy's classifier says",
            }
        ));
        d.line(format!("crawlward_ladder zone=crawlward_ladder:{}", live.zone_size));
    }
    if let Some(s) = &m.signatures {
        let origins = policy.signature_directories();
        let kept: Vec<&str> = policy.signature_keys.iter().map(|k| k.origin.as_str()).collect();
        let missing: Vec<&str> = origins.iter().map(String::as_str).filter(|o| !kept.contains(o)).collect();
        d.comment("Web Bot Auth: HTTP message signatures (RFC 9421) checked against the keys of the signers' directories,");
        d.comment(&format!("as crawlward update-ranges fetched them: {} of {} directories.", kept.len(), origins.len()));
        if !missing.is_empty() {
            d.comment(&format!("No keys yet (their signatures are unverified until update-ranges fetches them): {}.", missing.join(", ")));
        }
        if !policy.seen_directories.is_empty() {
            d.comment(&format!(
                "Taken from traffic (module.signatures.fetch_seen), their signatures verify and name no agent: {}.",
                policy.seen_directories.join(", ")
            ));
        }
        let replay = match &s.replay_zone {
            Some(size) => {
                d.comment("A verified signature's nonce is remembered until it expires: a replay gets 429 with Accept-Signature.");
                format!(" replay=crawlward_replay:{size}")
            }
            None => String::new(),
        };
        if !s.required.is_empty() {
            d.comment(&format!("Only signed agents may use {} (403 with Accept-Signature without a verified signature).", s.required.join(", ")));
        }
        d.comment(&format!("A signature made for another host than {} is a replay of a request meant for another site: invalid.", s.hosts.join(", ")));
        let failures = match s.failures_per_minute {
            0 => {
                d.comment("Every signature is verified, however often an address's fail (about 600,000 instructions each).");
                " failures=0".to_string()
            }
            n => {
                d.comment(&format!(
                    "An address whose signatures fail to verify {n} times in a minute (in a worker) is not checked for the rest of it: unverified."
                ));
                if n == crawlward_policy::signature::DEFAULT_FAILURES_PER_MINUTE {
                    String::new()
                } else {
                    format!(" failures={n}")
                }
            }
        };
        d.line(format!(
            "crawlward_signatures {} skew={}s hosts={}{replay}{failures}",
            quote(&format!("keys={dir}/{SIGNATURE_KEYS_FILE}")),
            s.skew_s,
            s.hosts.join(",")
        ));
    }
    Some(d)
}
