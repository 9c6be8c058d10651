//! `crawlward_status;`: the counters (and the DNS cache's, the budgets' and
//! the ladder's) as JSON, or as Prometheus text with `?format=prometheus`.

use crate::conf::budget::BudgetZone;
use crate::conf::directive::{conf_error, conf_ok};
use crate::conf::dns::DnsConf;
use crate::conf::ladder::LadderConf;
use crate::conf::MainConf;
use crate::conf::{core_loc_conf_of_cf, main_conf_of_cf};
use crate::request::ext::{confs, RequestExt};
use crate::state::counters::WINDOW_MINUTES;
use crate::state::counters::{Counters, ACTIONS, ACTION_NAMES, CLASSES, FACET_RULES, REFUSALS, SIGNATURE_OUTCOMES, VERDICTS};
use crawlward_policy::budget::Budget;
use crawlward_policy::budget_table::{Header as BudgetHeader, SyncState};
use crawlward_policy::fcrdns::DnsVerdict;
use crawlward_policy::responses::{time_group_name, StatusClass, TIME_GROUPS};
use crawlward_policy::verdict_cache::Header;
use crawlward_policy::{Identity, Verdict};
use ngx::ffi::{
    ngx_chain_t, ngx_command_t, ngx_conf_t, ngx_create_temp_buf, ngx_http_arg, ngx_http_discard_request_body, ngx_http_output_filter, ngx_http_request_t,
    ngx_http_send_header, ngx_int_t, ngx_str_t, NGX_DECLINED, NGX_ERROR, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_HTTP_NOT_ALLOWED, NGX_HTTP_OK, NGX_OK,
};
use ngx::http::Request;
use std::ffi::{c_char, c_void};
use std::fmt::Write;

pub unsafe extern "C" fn set_status(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, _conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: in a location block, cf->ctx is that location's http conf ctx.
        unsafe { core_loc_conf_of_cf(cf) }.handler = Some(status_handler);
        // SAFETY: as above.
        unsafe { main_conf_of_cf(cf) }.has_status = true;
        conf_ok()
    })
}

/// An agent with published ranges, as the status reports it.
struct AgentRanges {
    agent: String,
    networks: usize,
    /// The list's own time stamp.
    as_of: String,
    /// When update-ranges last confirmed the list (seconds since the epoch).
    checked: Option<i64>,
    age: Option<i64>,
}

/// Each agent with published ranges (policy crate: Identity::ranges_age). Read at
/// each status request: the kept copies' times change without a reload.
fn ranges(identity: Option<&Identity>) -> Vec<AgentRanges> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let Some(id) = identity else { return Vec::new() };
    id.catalogue
        .agents()
        .iter()
        .filter(|a| !a.ranges.is_empty())
        .map(|a| AgentRanges {
            agent: a.name.clone(),
            networks: a.ranges.len(),
            as_of: a.ranges_as_of.clone().unwrap_or_default(),
            checked: id.ranges_checked(a),
            age: id.ranges_age(a, now),
        })
        .collect()
}

/// The DNS verdict cache's figures, for both formats.
struct DnsStats<'a> {
    conf: &'a DnsConf,
    header: Header,
    capacity: usize,
    zone_size: usize,
}

fn dns_stats(dns: Option<&DnsConf>) -> Option<DnsStats<'_>> {
    let conf = dns?;
    let cache = conf.cache.as_ref()?;
    let (header, capacity) = cache.stats();
    Some(DnsStats { conf, header, capacity, zone_size: cache.zone_size() })
}

fn dns_json(d: &DnsStats) -> serde_json::Value {
    let h = &d.header;
    let verdicts: serde_json::Map<String, serde_json::Value> =
        DnsVerdict::ALL.iter().zip(h.verdicts).map(|(v, n)| (v.as_str().to_string(), n.into())).collect();
    let s = &d.conf.settings;
    serde_json::json!({
        "zone": { "name": d.conf.zone_name, "size": d.zone_size, "entries": d.capacity, "entries_used": h.len },
        "hits": h.hits,
        "misses": h.misses,
        "lookups_started": h.started,
        "lookups_in_flight": h.in_flight,
        "lookups_capped": h.capped,
        "stale_verified": h.stale,
        "evictions": h.evictions,
        "verdicts": verdicts,
        "valid_ms": { "verified": s.valid_verified, "spoofed": s.valid_spoofed, "unresolved": s.valid_unresolved },
        "stale_verified_ms": s.stale_verified,
        "max_lookups": s.max_lookups,
        "unresolved_as": d.conf.unresolved.as_str(),
    })
}

fn dns_prometheus(s: &mut String, d: &DnsStats) {
    let (h, zone) = (&d.header, &d.conf.zone_name);
    let metrics: [(&str, &str, &str, u64); 9] = [
        ("crawlward_dns_cache_hits_total", "counter", "Claims answered from the DNS verdict cache.", h.hits),
        ("crawlward_dns_cache_misses_total", "counter", "Claims the DNS verdict cache had no verdict for.", h.misses),
        ("crawlward_dns_lookups_total", "counter", "Forward-confirmed reverse DNS lookups started.", h.started),
        ("crawlward_dns_lookups_in_flight", "gauge", "Lookups in flight now, all workers.", h.in_flight as u64),
        (
            "crawlward_dns_lookups_capped_total",
            "counter",
            "Lookups not started because of max_lookups (the unresolved policy applied, or a verified verdict held on).",
            h.capped,
        ),
        (
            "crawlward_dns_stale_verified_total",
            "counter",
            "Lookups unresolved or given up, and requests whose lookup could not start, of addresses whose verified verdict held on (stale_verified).",
            h.stale,
        ),
        ("crawlward_dns_cache_evictions_total", "counter", "Verdicts evicted to make room (least recently used).", h.evictions),
        ("crawlward_dns_cache_entries", "gauge", "Verdicts the DNS cache zone has room for.", d.capacity as u64),
        ("crawlward_dns_cache_entries_used", "gauge", "Verdicts and lookups in the DNS cache zone.", h.len as u64),
    ];
    for (name, kind, help, value) in metrics {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{zone=\"{zone}\"}} {value}");
    }
    let _ = writeln!(s, "# HELP crawlward_dns_verdicts_total Verdicts of finished lookups.\n# TYPE crawlward_dns_verdicts_total counter");
    for (v, n) in DnsVerdict::ALL.iter().zip(h.verdicts) {
        let _ = writeln!(s, "crawlward_dns_verdicts_total{{zone=\"{zone}\",verdict=\"{}\"}} {n}", v.as_str());
    }
}

/// Agents listed by refusals in the status.
const TOP_REFUSED: usize = 10;

/// A budget zone's figures, copied out under its lock.
struct BudgetStats<'a> {
    zone: &'a BudgetZone,
    header: BudgetHeader,
    sync_state: SyncState,
    capacity: usize,
    zone_size: usize,
    top: Vec<(String, u64)>,
}

fn budget_stats(zones: &[Box<BudgetZone>]) -> Vec<BudgetStats<'_>> {
    zones
        .iter()
        .filter(|z| !z.quotas)
        .filter_map(|z| {
            let t = z.table.as_ref()?;
            let (header, sync_state, capacity, top) = t.with(|tb| (*tb.header, tb.sync_state(), tb.capacity(), tb.top_refused(TOP_REFUSED)))?;
            Some(BudgetStats { zone: z, header, sync_state, capacity, zone_size: t.zone_size(), top })
        })
        .collect()
}

/// The accounts listed per quota zone: the busiest over the last hour.
const TOP_ACCOUNTS: usize = 10;

/// A quota zone's counts, read under its lock once.
struct QuotaStats<'a> {
    zone: &'a BudgetZone,
    header: crawlward_policy::budget_table::Header,
    sync_state: SyncState,
    capacity: usize,
    top: Vec<crawlward_policy::budget_table::AccountUse>,
}

fn quota_stats(zones: &[Box<BudgetZone>]) -> Vec<QuotaStats<'_>> {
    zones
        .iter()
        .filter(|z| z.quotas)
        .filter_map(|z| {
            let t = z.table.as_ref()?;
            let now = crate::conf::budget::clock_ms(z);
            let (header, sync_state, capacity, top) = t.with(|tb| (*tb.header, tb.sync_state(), tb.capacity(), tb.top_accounts(TOP_ACCOUNTS, now)))?;
            Some(QuotaStats { zone: z, header, sync_state, capacity, top })
        })
        .collect()
}

/// A quota zone: requests and refusals per tier, and the busiest accounts
/// with their use over the last hour and day against their tier's limits
/// (`quota_used`: the fuller window's share, 1 at the quota).
fn quota_json(q: &QuotaStats, tiers: &[crawlward_policy::quota::Tier]) -> serde_json::Value {
    let h = &q.header;
    serde_json::json!({
        "zone": { "name": q.zone.name, "keys": q.capacity, "accounts": h.len, "evictions": h.evictions },
        "sync": sync_json(q.zone, &q.header, q.sync_state),
        "tiers": tiers.iter().enumerate().map(|(i, t)| serde_json::json!({
            "tier": t.name, "hourly": t.hourly, "daily": t.daily,
            "requests": h.quota.passed[i] + h.quota.refused[i], "refused": h.quota.refused[i],
        })).collect::<Vec<_>>(),
        "dry_run_refused": h.dry_run_refused,
        "top_accounts": q.top.iter().map(|a| {
            let tier = tiers.get(a.tier);
            // how near its quota: the fuller of its windows, against the limits this node
            // enforces (in fallback, its share: the limits divided by the nodes)
            let divide = if q.sync_state == SyncState::Fallback { h.sync.nodes } else { 1 };
            let (hourly, daily) = tier.map_or((0.0, 0.0), |t| {
                let (hourly, daily) = t.enforced(divide);
                (a.last_hour as f64 / f64::from(hourly), daily.map_or(0.0, |d| a.last_day as f64 / f64::from(d)))
            });
            serde_json::json!({
                "account": a.account, "hashed": a.hashed, "source": a.source(), "tier": tier.map(|t| t.name.as_str()), "last_hour": a.last_hour, "last_day": a.last_day,
                "hourly": tier.map(|t| t.hourly), "daily": tier.and_then(|t| t.daily), "refused": a.refused,
                "quota_used": (hourly.max(daily) * 1000.0).round() / 1000.0,
            })
        }).collect::<Vec<_>>(),
    })
}

fn quota_prometheus(s: &mut String, q: &QuotaStats, tiers: &[crawlward_policy::quota::Tier]) {
    let (h, zone) = (&q.header, &q.zone.name);
    let _ = writeln!(s, "# HELP crawlward_quota_requests_total Metered API requests, by tier.\n# TYPE crawlward_quota_requests_total counter");
    for (i, t) in tiers.iter().enumerate() {
        let _ = writeln!(s, "crawlward_quota_requests_total{{zone=\"{zone}\",tier=\"{}\"}} {}", t.name, h.quota.passed[i] + h.quota.refused[i]);
    }
    let _ = writeln!(
        s,
        "# HELP crawlward_quota_refused_total API requests refused past their account's quota, by tier.\n# TYPE crawlward_quota_refused_total counter"
    );
    for (i, t) in tiers.iter().enumerate() {
        let _ = writeln!(s, "crawlward_quota_refused_total{{zone=\"{zone}\",tier=\"{}\"}} {}", t.name, h.quota.refused[i]);
    }
    let _ = writeln!(
        s,
        "# HELP crawlward_quota_accounts Accounts in the quota zone.\n# TYPE crawlward_quota_accounts gauge\ncrawlward_quota_accounts{{zone=\"{zone}\"}} {}",
        h.len
    );
    let _ = writeln!(s, "# HELP crawlward_quota_account_requests_last_hour The busiest accounts' requests over the last hour.\n# TYPE crawlward_quota_account_requests_last_hour gauge");
    for a in &q.top {
        // a long name's hashed form is labelled so, apart from a name of the same bytes
        let hashed = if a.hashed { ",hashed=\"true\"" } else { "" };
        // and one the keys file named, apart from an account variable's of the same name
        let source = a.source();
        let _ = writeln!(
            s,
            "crawlward_quota_account_requests_last_hour{{zone=\"{zone}\",account=\"{}\",source=\"{source}\"{hashed}}} {}",
            label(&a.account),
            a.last_hour
        );
    }
}

/// A Prometheus label value: `\`, `"` and line ends escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn budget_json(b: &BudgetStats) -> serde_json::Value {
    let h = &b.header;
    let refused: serde_json::Map<String, serde_json::Value> = Budget::ALL.iter().zip(h.refused).map(|(k, n)| (k.as_str().to_string(), n.into())).collect();
    serde_json::json!({
        "zone": { "name": b.zone.name, "size": b.zone_size, "keys": b.capacity, "keys_used": h.len + h.pinned, "fixed_agent_slots": h.pinned },
        "agent_names": h.names,
        "max_agent_names": h.max_names,
        "passed": h.passed,
        "refused": refused,
        "dry_run_refused": h.dry_run_refused,
        "evictions": h.evictions,
        "top_refused": b.top.iter().map(|(a, n)| serde_json::json!({ "agent": a, "refused": n })).collect::<Vec<_>>(),
        "lag_ms": crate::worker::lag_ms(),
        "shrink": crate::worker::shrink(b.zone),
        "sync": sync_json(b.zone, &b.header, b.sync_state),
        "browse_cap": browse_json(b),
        "verified_slowdown": b.zone.verified_slowdown.map(|until| {
            let now_s = (crate::base::wall_ms() / 1000) as i64;
            serde_json::json!({
                "until": until.map(crawlward_policy::ranges::rfc3339),
                "active": until.is_none_or(|u| now_s < u),
            })
        }),
    })
}

/// The module's browse cap on the zone: null without one.
fn browse_json(b: &BudgetStats) -> serde_json::Value {
    if !b.zone.browse_cap {
        return serde_json::Value::Null;
    }
    let c = &b.header.browse;
    serde_json::json!({ "in_flight": c.in_flight, "others_in_flight": c.others, "passed": c.passed, "refused": c.refused })
}

/// Budget sync's state: null without sync.
fn sync_json(zone: &BudgetZone, header: &crawlward_policy::budget_table::Header, state: SyncState) -> serde_json::Value {
    let Some(conf) = &zone.sync else { return serde_json::Value::Null };
    let s = &header.sync;
    serde_json::json!({
        "store": conf.url.to_string(),
        "state": state.as_str(),
        "since_ms": s.since_ms,
        "nodes": conf.nodes,
        "interval_ms": conf.interval_ms,
        "round_trips": s.batches,
        "commands": s.commands,
        "failures": s.failures,
        "fallbacks": s.fallbacks,
        "owner_pid": s.owner,
    })
}

fn budget_prometheus(s: &mut String, b: &BudgetStats) {
    let (h, zone) = (&b.header, &b.zone.name);
    let metrics: [(&str, &str, &str, u64); 6] = [
        ("crawlward_budget_passed_total", "counter", "Counted crawler requests the budgets let through.", h.passed),
        ("crawlward_budget_dry_run_refused_total", "counter", "Requests the budgets would have refused (dry run).", h.dry_run_refused),
        ("crawlward_budget_evictions_total", "counter", "Keys evicted to make room (least recently used).", h.evictions),
        ("crawlward_budget_keys", "gauge", "Keys (addresses, agent names, shared) the budget zone has room for.", b.capacity as u64),
        ("crawlward_budget_keys_used", "gauge", "Keys in the budget zone (the catalogue agents' fixed slots included).", (h.len + h.pinned) as u64),
        ("crawlward_budget_lag_milliseconds", "gauge", "This worker's averaged event-loop lag.", crate::worker::lag_ms()),
    ];
    for (name, kind, help, value) in metrics {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{zone=\"{zone}\"}} {value}");
    }
    let _ =
        writeln!(s, "# HELP crawlward_budget_refused_total Requests refused, by the budget that refused them.\n# TYPE crawlward_budget_refused_total counter");
    for (k, n) in Budget::ALL.iter().zip(h.refused) {
        let _ = writeln!(s, "crawlward_budget_refused_total{{zone=\"{zone}\",budget=\"{}\"}} {n}", k.as_str());
    }
    if let Some(until) = b.zone.verified_slowdown {
        let now_s = (crate::base::wall_ms() / 1000) as i64;
        let active = until.is_none_or(|u| now_s < u) as u64;
        let _ = writeln!(
            s,
            "# HELP crawlward_budget_verified_slowdown_active 1 while verified crawlers are counted against crawl_budget.verified (a slowdown on purpose), 0 once it ended.\n# TYPE crawlward_budget_verified_slowdown_active gauge\ncrawlward_budget_verified_slowdown_active{{zone=\"{zone}\"}} {active}"
        );
        if let Some(u) = until {
            let _ = writeln!(s, "# HELP crawlward_budget_verified_slowdown_end_seconds When the slowdown of verified crawlers ends (seconds since the epoch).\n# TYPE crawlward_budget_verified_slowdown_end_seconds gauge\ncrawlward_budget_verified_slowdown_end_seconds{{zone=\"{zone}\"}} {u}");
        }
    }
    if b.zone.browse_cap {
        let c = &h.browse;
        let metrics: [(&str, &str, &str, u64); 4] = [
            ("crawlward_browse_cap_in_flight", "gauge", "Browse requests in flight on this node (crawlward_browse_cap).", c.in_flight as u64),
            ("crawlward_browse_cap_others_in_flight", "gauge", "Browse requests in flight on the other nodes, as last read from the store.", c.others as u64),
            ("crawlward_browse_cap_passed_total", "counter", "Browse requests that took a place in the cap.", c.passed),
            ("crawlward_browse_cap_refused_total", "counter", "Browse requests refused with 503 by the cap.", c.refused),
        ];
        for (name, kind, help, value) in metrics {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{zone=\"{zone}\"}} {value}");
        }
    }
    if b.zone.sync.is_some() {
        let y = &h.sync;
        let synced = (b.sync_state == SyncState::Synced) as u64;
        let metrics: [(&str, &str, &str, u64); 5] = [
            ("crawlward_budget_sync_synced", "gauge", "1 while the store answers (the cluster's budgets), 0 in fallback (this node's share).", synced),
            ("crawlward_budget_sync_round_trips_total", "counter", "Round trips to the store completed.", y.batches),
            ("crawlward_budget_sync_commands_total", "counter", "Commands sent to the store in completed round trips.", y.commands),
            ("crawlward_budget_sync_failures_total", "counter", "Store failures (no connection, a timeout, an error reply).", y.failures),
            ("crawlward_budget_sync_fallbacks_total", "counter", "Times the zone fell back to this node's share of the budgets.", y.fallbacks),
        ];
        for (name, kind, help, value) in metrics {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{zone=\"{zone}\"}} {value}");
        }
    }
    let _ = writeln!(
        s,
        "# HELP crawlward_budget_agent_refused_total Refusals of the most refused agent names.\n# TYPE crawlward_budget_agent_refused_total counter"
    );
    for (a, n) in &b.top {
        let _ = writeln!(s, "crawlward_budget_agent_refused_total{{zone=\"{zone}\",agent=\"{}\"}} {n}", label(a));
    }
}

/// Counts by status class, keyed by the class's name.
fn by_class(counts: &[u64]) -> serde_json::Map<String, serde_json::Value> {
    StatusClass::ALL.iter().zip(counts).map(|(c, n)| (c.as_str().to_string(), (*n).into())).collect()
}

/// The purpose of the agent a counters slot is named after: "none" for the
/// requests that name no agent ("-"), "other" for the agents past the zone's slots.
fn slot_purpose<'a>(identity: Option<&'a Identity>, slot: &str) -> &'a str {
    match slot {
        "-" => "none",
        "other" => "other",
        name => identity.and_then(|id| id.catalogue.get(name)).map_or("other", |a| a.purpose.as_str()),
    }
}

/// Facet guard refusals by rule, for both formats.
/// The ladder zone's counts, copied under its lock.
struct LadderStats<'a> {
    zone: &'a str,
    size: usize,
    mode: &'static str,
    capacity: usize,
    header: crawlward_policy::client_table::Header,
}

/// The busiest directories that signed requests but are not in the key file.
fn unknown_json(counters: &Counters) -> serde_json::Value {
    let (list, replaced, skipped) = counters.unknown_directories();
    serde_json::json!({
        "busiest": list.iter().map(|(d, n)| serde_json::json!({ "directory": d, "requests": n })).collect::<Vec<_>>(),
        "replaced": replaced,
        "skipped": skipped,
    })
}

/// The replay zone's name, counters and capacity, when there is one.
fn replay_stats(s: &crate::conf::signatures::Signatures) -> Option<(&str, crawlward_policy::replay_table::Header, usize)> {
    let z = s.replay.as_deref()?;
    let (header, capacity) = z.table.as_ref()?.stats();
    Some((&z.name, header, capacity))
}

fn ladder_stats(l: Option<&LadderConf>) -> Option<LadderStats<'_>> {
    let l = l?;
    let (run, table) = (l.run.as_ref()?, l.table.as_ref()?);
    let (header, capacity) = table.with(|t| (*t.header, t.capacity()));
    let mode = match run.live.mode {
        crawlward_policy::ladder::Mode::Observe => "observe",
        crawlward_policy::ladder::Mode::Enforce => "enforce",
    };
    Some(LadderStats { zone: &l.name, size: table.zone_size(), mode, capacity, header })
}

/// A query argument, percent-decoded (`+` a space); None when absent.
fn arg(r: &Request, name: &[u8]) -> Option<Vec<u8>> {
    let mut value = ngx_str_t::empty();
    // SAFETY: nginx reads the name's bytes and the request's args, and points `value` into the args.
    let found = unsafe { ngx_http_arg(r.ptr(), name.as_ptr() as *mut u8, name.len(), &mut value) };
    (found == NGX_OK as ngx_int_t).then(|| crawlward_policy::escape::percent_decoded(value.as_bytes()))
}

/// `?client&address=A&ua=U&lang=L`, or `?client&cookie=V`: one live client of
/// the ladder, its window as the classifier reads it and what the module
/// makes of it, for `crawlward explain --client`. None without `client`.
fn ladder_client(r: &Request, mcf: &MainConf) -> Option<String> {
    arg(r, b"client")?;
    let l = mcf.ladder.as_deref();
    let (Some((run, table)), Some(seed)) = (mcf.ladder(), l.map(|l| l.seed)) else {
        return Some("{\"error\": \"no crawlward_ladder\"}\n".into());
    };
    let now_ms = crate::base::wall_ms() as i64;
    let key = match arg(r, b"cookie") {
        Some(value) => {
            let verified = run.live.cookie.as_ref().zip(run.keys.as_ref()).and_then(|(c, k)| k.verify(&value, now_ms as u64 / 1000, c.lifetime));
            match verified {
                Some(id) => id,
                None => return Some("{\"found\": false, \"why\": \"the cookie does not verify\"}\n".into()),
            }
        }
        None => {
            let address = arg(r, b"address").and_then(|a| std::str::from_utf8(&a).ok()?.parse::<std::net::IpAddr>().ok());
            let Some(ip) = address else { return Some("{\"error\": \"give address= (with ua= and lang=) or cookie=\"}\n".into()) };
            let ua = arg(r, b"ua").unwrap_or_default();
            let lang = arg(r, b"lang").unwrap_or_default();
            crawlward_policy::ladder::triple_key(seed, &crawlward_policy::budget::counted_address(ip), &ua, &lang)
        }
    };
    let window = table.with(|t| t.get(key).map(|e| e.window));
    let v = match window {
        None => serde_json::json!({ "found": false }),
        Some(w) => {
            let observed = w.observed(now_ms, run.window_ms, run.signals.per_minute);
            let scored = crawlward_policy::classifier::score(&observed, &run.settings);
            serde_json::json!({
                "found": true,
                "window_minutes": run.settings.window_minutes,
                "observed": observed,
                "score": scored.score,
                "rung": crawlward_policy::ladder::rung_name(scored.placement),
                "contributions": crawlward_policy::classifier::SUBSCORES.iter().zip(scored.contributions).map(|(n, c)| (n.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
            })
        }
    };
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    Some(s)
}

/// The rows of the ladder's counts: L0 to L6, then the routed clients.
const LADDER_ROWS: [&str; crawlward_policy::client_table::ROWS] = ["L0", "L1", "L2", "L3", "L4", "L5", "L6", "routed"];

fn ladder_json(l: &LadderStats) -> serde_json::Value {
    let h = &l.header;
    serde_json::json!({
        "zone": l.zone,
        "size": l.size,
        "mode": l.mode,
        "capacity": l.capacity,
        "clients": h.len,
        "made": h.made,
        "evictions": h.evictions,
        "untracked_requests": h.untracked,
        "rungs": LADDER_ROWS.iter().enumerate().map(|(i, rung)| serde_json::json!({
            "rung": rung, "clients": h.clients[i], "requests": h.requests[i], "refused": h.refused[i],
        })).collect::<Vec<_>>(),
    })
}

fn ladder_prometheus(s: &mut String, l: &LadderStats) {
    let h = &l.header;
    let zone = l.zone;
    let _ = writeln!(s, "# HELP crawlward_ladder_clients Clients the ladder tracks, by the rung they are on now.\n# TYPE crawlward_ladder_clients gauge");
    for (i, rung) in LADDER_ROWS.iter().enumerate() {
        let _ = writeln!(s, "crawlward_ladder_clients{{zone=\"{zone}\",rung=\"{rung}\"}} {}", h.clients[i]);
    }
    let _ = writeln!(s, "# HELP crawlward_ladder_requests_total Requests placed on each rung (verified and signed-in requests on L0).\n# TYPE crawlward_ladder_requests_total counter");
    for (i, rung) in LADDER_ROWS.iter().enumerate() {
        let _ = writeln!(s, "crawlward_ladder_requests_total{{zone=\"{zone}\",rung=\"{rung}\"}} {}", h.requests[i]);
    }
    let _ = writeln!(s, "# HELP crawlward_ladder_refused_total Requests each rung refused (enforce mode).\n# TYPE crawlward_ladder_refused_total counter");
    for (i, rung) in LADDER_ROWS.iter().enumerate() {
        let _ = writeln!(s, "crawlward_ladder_refused_total{{zone=\"{zone}\",rung=\"{rung}\"}} {}", h.refused[i]);
    }
    let _ = writeln!(s, "# HELP crawlward_ladder_untracked_requests_total Requests of verified crawlers and signed-in users, never tracked.\n# TYPE crawlward_ladder_untracked_requests_total counter");
    let _ = writeln!(s, "crawlward_ladder_untracked_requests_total{{zone=\"{zone}\"}} {}", h.untracked);
    let _ =
        writeln!(s, "# HELP crawlward_ladder_evictions_total Clients given up for a new one in a full table.\n# TYPE crawlward_ladder_evictions_total counter");
    let _ = writeln!(s, "crawlward_ladder_evictions_total{{zone=\"{zone}\"}} {}", h.evictions);
    let _ = writeln!(s, "# HELP crawlward_ladder_capacity Clients the ladder zone holds.\n# TYPE crawlward_ladder_capacity gauge");
    let _ = writeln!(s, "crawlward_ladder_capacity{{zone=\"{zone}\"}} {}", l.capacity);
}

/// The crawlers' share of upstream time over the window, per time group, and
/// each agent's upstream time since the zone was made.
fn server_time_json(counters: &Counters, by_agent: Vec<serde_json::Value>) -> serde_json::Value {
    let t = counters.server_time(crate::base::wall_ms() / 1000);
    let (total, crawlers): (u64, u64) = (t.ms.iter().sum(), t.crawler_ms);
    let groups: serde_json::Map<String, serde_json::Value> = (0..TIME_GROUPS)
        .filter(|g| t.responses[*g] > 0)
        .map(|g| (time_group_name(g).to_string(), serde_json::json!({ "seconds": t.ms[g] as f64 / 1000.0, "responses": t.responses[g] })))
        .collect();
    serde_json::json!({
        "window_minutes": WINDOW_MINUTES,
        "seconds": total as f64 / 1000.0,
        "crawler_seconds": crawlers as f64 / 1000.0,
        "crawler_share": (total > 0).then(|| crawlers as f64 / total as f64),
        "by_group": groups,
        "by_agent": by_agent,
    })
}

fn facet_refusals(counters: &Counters) -> Vec<(&'static str, u64, u64)> {
    let (refused, dry) = counters.facet_refusals();
    FACET_RULES.iter().zip(refused).zip(dry).map(|((r, n), d)| (r.as_str(), n, d)).collect()
}

fn json(counters: &Counters, zone: &str, catalogue: &str, mcf: &MainConf) -> String {
    let (identity, dns, budgets) = (mcf.identity.as_deref(), mcf.dns.as_deref(), &mcf.budget_zones);
    let agents = identity.map_or(0, |i| i.catalogue.agents().len());
    let mut requests = Vec::new();
    let mut responses = Vec::new();
    let mut by_verdict = [0u64; VERDICTS];
    let mut by_action = [0u64; ACTIONS];
    let mut upstream = Vec::new();
    for slot in counters.snapshot() {
        if slot.upstream_responses > 0 {
            upstream.push(serde_json::json!({
                "agent": slot.name, "seconds": slot.upstream_ms as f64 / 1000.0, "responses": slot.upstream_responses,
            }));
        }
        for (k, n) in slot.requests.iter().enumerate().filter(|(_, n)| **n > 0) {
            let (v, a) = (k / ACTIONS, k % ACTIONS);
            by_verdict[v] += n;
            by_action[a] += n;
            requests.push(serde_json::json!({
                "agent": slot.name, "purpose": slot_purpose(identity, &slot.name), "verdict": Verdict::ALL[v].as_str(), "action": ACTION_NAMES[a], "count": n,
            }));
        }
        for (v, classes) in slot.responses.chunks(CLASSES).enumerate().filter(|(_, c)| c.iter().any(|n| *n > 0)) {
            responses.push(serde_json::json!({
                "agent": slot.name, "purpose": slot_purpose(identity, &slot.name), "verdict": Verdict::ALL[v].as_str(), "statuses": by_class(classes),
            }));
        }
    }
    let search = counters.verified_search();
    let mut verified_search = by_class(&search);
    verified_search.insert("responses".into(), search.iter().sum::<u64>().into());
    verified_search.insert("429_and_5xx".into(), StatusClass::ALL.iter().zip(search).filter(|(c, _)| c.slows_crawlers()).map(|(_, n)| n).sum::<u64>().into());
    let verdicts: serde_json::Map<String, serde_json::Value> = Verdict::ALL.iter().zip(by_verdict).map(|(v, n)| (v.as_str().to_string(), n.into())).collect();
    let actions: serde_json::Map<String, serde_json::Value> = ACTION_NAMES.iter().zip(by_action).map(|(a, n)| (a.to_string(), n.into())).collect();
    let v = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "catalogue": { "file": catalogue, "agents": agents },
        "zone": { "name": zone, "size": counters.zone_size(), "slots": counters.capacity(), "slots_used": counters.used() },
        "totals": { "verdict": verdicts, "action": actions },
        "requests": requests,
        "responses": responses,
        "server_time": server_time_json(counters, upstream),
        "refusals_by_layer": REFUSALS.iter().zip(counters.refusals()).map(|(l, n)| (l.to_string(), n.into())).collect::<serde_json::Map<String, serde_json::Value>>(),
        "verified_search": verified_search,
        "facets": facet_refusals(counters).into_iter().map(|(rule, n, dry)| serde_json::json!({
            "rule": rule, "refused": n, "dry_run_refused": dry,
        })).collect::<Vec<_>>(),
        "ranges": ranges(identity).into_iter().map(|r| serde_json::json!({
            "agent": r.agent, "networks": r.networks, "as_of": r.as_of, "checked": r.checked, "age_seconds": r.age,
        })).collect::<Vec<_>>(),
        "dns": dns_stats(dns).as_ref().map(dns_json),
        "budgets": budget_stats(budgets).iter().map(budget_json).collect::<Vec<_>>(),
        "quotas": quota_stats(budgets).iter().map(|q| quota_json(q, &mcf.tiers)).collect::<Vec<_>>(),
        "ladder": ladder_stats(mcf.ladder.as_deref()).as_ref().map(ladder_json),
        "signatures": mcf.signatures.as_ref().map(|s| serde_json::json!({
            "directories": s.keys.origins(),
            "requests": SIGNATURE_OUTCOMES.iter().zip(counters.signatures()).map(|(o, n)| (o.as_str().to_string(), n.into())).collect::<serde_json::Map<String, serde_json::Value>>(),
            "not_checked": counters.signatures_not_checked(),
            "failures_per_minute": s.failures.try_borrow().map_or(0, |f| f.per_minute()),
            "unknown_directories": unknown_json(counters),
            "replay": replay_stats(s).map(|(zone, h, capacity)| serde_json::json!({
                "zone": zone, "capacity": capacity, "first": h.first, "replayed": h.replayed, "not_checked": h.not_checked,
            })),
        })),
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

fn prometheus(counters: &Counters, zone: &str, mcf: &MainConf) -> String {
    let (identity, dns, budgets) = (mcf.identity.as_deref(), mcf.dns.as_deref(), &mcf.budget_zones);
    let mut s = String::new();
    let _ = writeln!(s, "# HELP crawlward_requests_total Requests crawlward decided, by agent, verdict and action, with the agent's purpose.");
    let _ = writeln!(s, "# TYPE crawlward_requests_total counter");
    let slots = counters.snapshot();
    for slot in &slots {
        for (k, n) in slot.requests.iter().enumerate().filter(|(_, n)| **n > 0) {
            let _ = writeln!(
                s,
                "crawlward_requests_total{{agent=\"{}\",verdict=\"{}\",action=\"{}\",purpose=\"{}\"}} {n}",
                slot.name,
                Verdict::ALL[k / ACTIONS].as_str(),
                ACTION_NAMES[k % ACTIONS],
                slot_purpose(identity, &slot.name)
            );
        }
    }
    let _ = writeln!(s, "# HELP crawlward_responses_total Responses by agent, verdict and status class.");
    let _ = writeln!(s, "# TYPE crawlward_responses_total counter");
    for slot in &slots {
        for (k, n) in slot.responses.iter().enumerate().filter(|(_, n)| **n > 0) {
            let _ = writeln!(
                s,
                "crawlward_responses_total{{agent=\"{}\",verdict=\"{}\",status=\"{}\"}} {n}",
                slot.name,
                Verdict::ALL[k / CLASSES].as_str(),
                StatusClass::ALL[k % CLASSES].as_str()
            );
        }
    }
    let _ = writeln!(s, "# HELP crawlward_verified_search_responses_total Responses to verified search crawlers by status class.");
    let _ = writeln!(s, "# TYPE crawlward_verified_search_responses_total counter");
    for (c, n) in StatusClass::ALL.iter().zip(counters.verified_search()) {
        let _ = writeln!(s, "crawlward_verified_search_responses_total{{status=\"{}\"}} {n}", c.as_str());
    }
    let _ = writeln!(s, "# HELP crawlward_facet_refused_total Requests the facet guard refused (429), by rule.\n# TYPE crawlward_facet_refused_total counter");
    let facets = facet_refusals(counters);
    for (rule, n, _) in &facets {
        let _ = writeln!(s, "crawlward_facet_refused_total{{rule=\"{rule}\"}} {n}");
    }
    let _ = writeln!(s, "# HELP crawlward_facet_dry_run_refused_total Requests the facet guard would have refused (dry run), by rule.\n# TYPE crawlward_facet_dry_run_refused_total counter");
    for (rule, _, dry) in &facets {
        let _ = writeln!(s, "crawlward_facet_dry_run_refused_total{{rule=\"{rule}\"}} {dry}");
    }
    let _ = writeln!(s, "# HELP crawlward_refused_total Refusals, by the layer that made them.\n# TYPE crawlward_refused_total counter");
    for (layer, n) in REFUSALS.iter().zip(counters.refusals()) {
        let _ = writeln!(s, "crawlward_refused_total{{layer=\"{layer}\"}} {n}");
    }
    let t = counters.server_time(crate::base::wall_ms() / 1000);
    let _ = writeln!(
        s,
        "# HELP crawlward_upstream_window_seconds Upstream time over the last {WINDOW_MINUTES} minutes, by purpose (people and unknown, no User-Agent).\n# TYPE crawlward_upstream_window_seconds gauge"
    );
    for g in (0..TIME_GROUPS).filter(|g| t.responses[*g] > 0) {
        let _ = writeln!(s, "crawlward_upstream_window_seconds{{group=\"{}\"}} {:.3}", time_group_name(g), t.ms[g] as f64 / 1000.0);
    }
    let _ = writeln!(s, "# HELP crawlward_upstream_window_crawler_seconds The crawlers' part of it.\n# TYPE crawlward_upstream_window_crawler_seconds gauge");
    let _ = writeln!(s, "crawlward_upstream_window_crawler_seconds {:.3}", t.crawler_ms as f64 / 1000.0);
    let _ = writeln!(
        s,
        "# HELP crawlward_upstream_seconds_total Upstream time by agent, since the zone was made.\n# TYPE crawlward_upstream_seconds_total counter"
    );
    for slot in slots.iter().filter(|slot| slot.upstream_responses > 0) {
        let _ = writeln!(s, "crawlward_upstream_seconds_total{{agent=\"{}\"}} {:.3}", slot.name, slot.upstream_ms as f64 / 1000.0);
    }
    if mcf.signatures.is_some() {
        let _ = writeln!(
            s,
            "# HELP crawlward_signed_requests_total Signed requests (Web Bot Auth) by what the signature said.\n# TYPE crawlward_signed_requests_total counter"
        );
        for (o, n) in SIGNATURE_OUTCOMES.iter().zip(counters.signatures()) {
            let _ = writeln!(s, "crawlward_signed_requests_total{{signature=\"{}\"}} {n}", o.as_str());
        }
        let _ = writeln!(
            s,
            "# HELP crawlward_signatures_not_checked_total Signed requests not verified (and counted unverified): their address's failed verifications had used up the minute's allowance.\n# TYPE crawlward_signatures_not_checked_total counter\ncrawlward_signatures_not_checked_total {}",
            counters.signatures_not_checked()
        );
    }
    if let Some((zone, h, capacity)) = mcf.signatures.as_deref().and_then(replay_stats) {
        let _ = writeln!(
            s,
            "# HELP crawlward_signature_nonces_total Verified signatures' nonces: first seen, replayed (refused with 429), or not checked (no room, or no nonce).\n# TYPE crawlward_signature_nonces_total counter"
        );
        for (seen, n) in [("first", h.first), ("replayed", h.replayed), ("not-checked", h.not_checked)] {
            let _ = writeln!(s, "crawlward_signature_nonces_total{{zone=\"{zone}\",nonce=\"{seen}\"}} {n}");
        }
        let _ = writeln!(s, "# HELP crawlward_signature_nonce_slots Nonces the replay zone holds at most.\n# TYPE crawlward_signature_nonce_slots gauge");
        let _ = writeln!(s, "crawlward_signature_nonce_slots{{zone=\"{zone}\"}} {capacity}");
    }
    let _ = writeln!(s, "# HELP crawlward_zone_slots Agent slots in the counters zone.\n# TYPE crawlward_zone_slots gauge");
    let _ = writeln!(s, "crawlward_zone_slots{{zone=\"{zone}\"}} {}", counters.capacity());
    let _ = writeln!(s, "# HELP crawlward_zone_slots_used Agent slots in use.\n# TYPE crawlward_zone_slots_used gauge");
    let _ = writeln!(s, "crawlward_zone_slots_used{{zone=\"{zone}\"}} {}", counters.used());
    let _ = writeln!(s, "# HELP crawlward_zone_size_bytes Size of the counters zone.\n# TYPE crawlward_zone_size_bytes gauge");
    let _ = writeln!(s, "crawlward_zone_size_bytes{{zone=\"{zone}\"}} {}", counters.zone_size());
    let ranges = ranges(identity);
    let _ = writeln!(s, "# HELP crawlward_ranges_networks Published networks of an agent in use.\n# TYPE crawlward_ranges_networks gauge");
    for r in &ranges {
        let _ = writeln!(s, "crawlward_ranges_networks{{agent=\"{}\"}} {}", r.agent, r.networks);
    }
    let _ = writeln!(
        s,
        "# HELP crawlward_ranges_age_seconds Seconds since update-ranges last confirmed an agent's published ranges in use (else since they were published).\n# TYPE crawlward_ranges_age_seconds gauge"
    );
    for r in &ranges {
        if let Some(age) = r.age {
            let _ = writeln!(s, "crawlward_ranges_age_seconds{{agent=\"{}\"}} {age}", r.agent);
        }
    }
    if let Some(d) = dns_stats(dns) {
        dns_prometheus(&mut s, &d);
    }
    for q in quota_stats(budgets) {
        quota_prometheus(&mut s, &q, &mcf.tiers);
    }
    for b in budget_stats(budgets) {
        budget_prometheus(&mut s, &b);
    }
    if let Some(l) = ladder_stats(mcf.ladder.as_deref()) {
        ladder_prometheus(&mut s, &l);
    }
    // zone by zone, a family's lines came apart: one HELP and TYPE a family, its samples together
    crawlward_policy::exposition::grouped(&s)
}

unsafe extern "C" fn status_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls content handlers with a live request of this http block.
        answer_status(unsafe { Request::from_ngx_http_request(r) })
    })
}

fn answer_status(r: &mut Request) -> ngx_int_t {
    if let Err(rc) = answer_get(r) {
        return rc;
    }
    // SAFETY: a live request of this http block; the confs are not kept.
    let (mcf, _) = unsafe { confs(r) };
    let Some((counters, zone_name)) = mcf.counters.as_ref().and_then(|z| Some((z.view.as_ref()?, &z.name))) else { return NGX_DECLINED as ngx_int_t };
    if let Some(client) = ladder_client(r, mcf) {
        return send_body(r, client.as_bytes(), b"application/json");
    }
    let mut format = ngx_str_t::empty();
    let name = b"format";
    // SAFETY: nginx reads the name's bytes and the request's args, and points `format` into the args.
    let found = unsafe { ngx_http_arg(r.ptr(), name.as_ptr() as *mut u8, name.len(), &mut format) };
    let wants_prometheus = found == NGX_OK as ngx_int_t && format.as_bytes() == b"prometheus";
    let (body, content_type): (String, &'static [u8]) = if wants_prometheus {
        (prometheus(counters, zone_name, mcf), b"text/plain; version=0.0.4; charset=utf-8")
    } else {
        (json(counters, zone_name, &mcf.catalogue_path, mcf), b"application/json")
    };
    send_body(r, body.as_bytes(), content_type)
}

/// A content handler's start: only GET and HEAD are answered (else the
/// error, 405), and the request body is discarded (else nginx's error).
pub fn answer_get(r: &mut Request) -> Result<(), ngx_int_t> {
    if !r.is_get_or_head() {
        return Err(NGX_HTTP_NOT_ALLOWED as ngx_int_t);
    }
    // SAFETY: a live request in its content phase.
    let rc = unsafe { ngx_http_discard_request_body(r.into()) };
    if rc != NGX_OK as ngx_int_t {
        return Err(rc);
    }
    Ok(())
}

/// Answer 200 with `body` as `content_type`, from a content handler. nginx
/// keeps a pointer to `content_type` until the response is sent, hence static.
pub fn send_body(r: &mut Request, body: &[u8], content_type: &'static [u8]) -> ngx_int_t {
    // SAFETY: the request's pool is live.
    let b = unsafe { ngx_create_temp_buf(r.as_ref().pool, body.len()) };
    // SAFETY: null, or a buffer of the request's pool with room for body.len() bytes.
    let Some(buf) = (unsafe { b.as_mut() }) else { return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t };
    // SAFETY: as above; the buffer's memory does not overlap the body.
    unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), buf.pos, body.len()) };
    buf.last = buf.pos.wrapping_add(body.len());
    buf.set_last_buf(if r.is_main_request() { 1 } else { 0 });
    buf.set_last_in_chain(1);
    let out = &mut r.as_mut().headers_out;
    out.status = NGX_HTTP_OK as usize;
    out.content_type = ngx_str_t { len: content_type.len(), data: content_type.as_ptr() as *mut u8 };
    out.content_type_len = content_type.len();
    out.content_type_lowcase = std::ptr::null_mut();
    out.content_length_n = body.len() as i64;
    // SAFETY: a live request in its content phase, its headers set.
    let rc = unsafe { ngx_http_send_header((&mut *r).into()) };
    if rc == NGX_ERROR as ngx_int_t || rc > NGX_OK as ngx_int_t || r.header_only() {
        return rc;
    }
    let mut chain = ngx_chain_t { buf: b, next: std::ptr::null_mut() };
    // SAFETY: as above; the chain's buffer is the request pool's.
    unsafe { ngx_http_output_filter(r.into(), &mut chain) }
}
