//! Who is asking, for stock nginx: realip from the trusted proxies, the
//! claim maps (`claims.rs`), the published ranges in one `geo`, the verdict,
//! the machine doors and the bot-blocker's action; and what the layers after
//! it share (the actions that pass it, a variable for a layer left out).

use crate::nginx::{Directives, Geo, Map};
use crawlward_policy::decide::prefix_regex;
use crawlward_policy::layers;
use crawlward_policy::{Action, Door, Policy, Purpose, Verdict};

pub fn realip(policy: &Policy) -> Option<Directives> {
    if policy.site.trusted_proxies.is_empty() && !policy.site.trust_unix_socket {
        return None;
    }
    let mut d = Directives::default();
    for net in &policy.site.trusted_proxies {
        d.line(format!("set_real_ip_from {net}"));
    }
    if policy.site.trust_unix_socket {
        d.line("set_real_ip_from unix:");
    }
    d.line(format!("real_ip_header {}", policy.site.real_ip_header));
    d.line("real_ip_recursive on");
    Some(d)
}

/// Who is asking, as "name purpose list" in `$cw_claim` (`claims.rs`). The
/// name, the purpose and the list are then read from it by three short
/// regular expressions.
pub fn claim_maps(policy: &Policy, lists: &RangeLists) -> Vec<String> {
    let ranged_index: Vec<usize> =
        policy.identity.catalogue.agents().iter().enumerate().filter(|(_, a)| a.ua.is_some() && !a.ranges.is_empty()).map(|(i, _)| i).collect();
    let list_of = |agent: usize| ranged_index.iter().position(|i| *i == agent).map_or("-".to_string(), |r| lists.list_of_agent[r].to_string());
    crate::claims::claim_maps(policy, &list_of).into_iter().map(|m| m.to_string()).collect()
}

/// `$crawlward_agent` and `$crawlward_purpose`, read from the claim. `$1`, not a
/// named capture: each named capture is one more variable in nginx's hash.
pub fn claim_parts() -> Vec<String> {
    let part = |variable: &str, pattern: &str| {
        let mut m = Map::new("", "$cw_claim", variable, "");
        m.comment.clear();
        m.entry("", "");
        m.regex(pattern, "$1");
        m.to_string()
    };
    vec![part("$crawlward_agent", "^(\\S+) "), part("$crawlward_purpose", "^\\S+ (\\S+) ")]
}

pub fn empty_map() -> Map {
    let mut m = Map::new("A request with no User-Agent (the forge's crawl-budget review counts it as a crawler).", "$http_user_agent", "$cw_ua_empty", "0");
    m.entry("", "1");
    m
}

/// Agents with published ranges, in catalogue order, with their index.
pub fn ranged(policy: &Policy) -> Vec<(usize, &crawlward_policy::Agent)> {
    policy.identity.catalogue.agents().iter().filter(|a| a.ua.is_some() && !a.ranges.is_empty()).enumerate().collect()
}

/// The published lists in stock nginx, in a fixed number of variables whatever the
/// number of lists (one `geo` per list added a variable per list, and past a dozen
/// lists nginx -t warned that it "could not build optimal variables_hash"):
/// - `$cw_ranges`, one `geo` over every list's networks, whose value names
///   the lists holding the client address (`,0,3,`);
/// - `$cw_ranges_of`, the claimed agent's list number followed by that
///   value (`0,0,3,`), or empty for an agent without ranges; the `geo` is looked
///   up only for an agent with ranges (map values are evaluated lazily);
/// - `$cw_in_ranges`: `1` when the claimed agent's list holds the address,
///   `0` when it does not, empty for an agent without ranges.
pub fn range_blocks(lists: &RangeLists) -> Vec<String> {
    if lists.lists.is_empty() {
        return Vec::new();
    }
    let mut claim = Map::new("Published ranges: the claimed agent's list, then the lists that hold the client address.", "$cw_claim", "$cw_ranges_of", "");
    claim.entry("", "");
    claim.regex(" (\\d+)$", "$1$cw_ranges");
    let mut legend = String::from("The lists, by number:");
    for (i, (names, sources)) in lists.lists.iter().enumerate() {
        legend.push_str(&format!("\n{i}: {}: {}", names.join(", "), sources.join(", ")));
    }
    let geo = Geo { comment: legend, variable: "$cw_ranges".into(), default: String::new(), entries: lists.geo_entries() };
    let mut inside = Map::new(
        "1: the claimed agent's list (the number before the first comma) is among those that hold\nthe client address; 0: it is not; empty: the agent has no ranges.",
        "$cw_ranges_of",
        "$cw_in_ranges",
        "0",
    );
    inside.entry("", "");
    inside.regex("^(\\d+),(?:\\d+,)*\\1,", "1");
    vec![claim.to_string(), geo.to_string(), inside.to_string()]
}

/// The distinct published lists of the ranged agents, and for each network of
/// any list, which lists hold the addresses it matches.
pub struct RangeLists<'a> {
    /// Each list's agents, and where its networks come from (URLs, or the policy).
    lists: Vec<(Vec<&'a str>, Vec<&'a str>)>,
    /// The list of each ranged agent, in `ranged` order.
    list_of_agent: Vec<usize>,
    /// Every network of every list, with the lists that hold the addresses `geo`
    /// matches to it, sorted.
    labels: Vec<(ipnet::IpNet, Vec<usize>)>,
}

impl<'a> RangeLists<'a> {
    pub fn of(ranged: &[(usize, &'a crawlward_policy::Agent)]) -> RangeLists<'a> {
        // Agents that share a published list (Google's crawlers) share its number.
        let mut nets_of: Vec<&'a [ipnet::IpNet]> = Vec::new();
        let mut lists: Vec<(Vec<&'a str>, Vec<&'a str>)> = Vec::new();
        let mut list_of_agent = Vec::new();
        for (_, a) in ranged {
            let i = nets_of.iter().position(|nets| *nets == a.ranges.as_slice()).unwrap_or_else(|| {
                nets_of.push(a.ranges.as_slice());
                lists.push((Vec::new(), Vec::new()));
                lists.len() - 1
            });
            let source = match a.ranges_url.as_deref() {
                Some(url) if a.ranges_as_of.as_deref() != Some("policy") => url,
                _ => "ranges given in the policy",
            };
            lists[i].0.push(a.name.as_str());
            if !lists[i].1.contains(&source) {
                lists[i].1.push(source);
            }
            list_of_agent.push(i);
        }
        // geo answers for the most specific network that holds an address. Every network
        // that holds it is that one or wider, so the lists holding the address are the
        // lists with that network or a wider one: found by walking its supernets.
        let mut lists_of_net: std::collections::HashMap<ipnet::IpNet, Vec<usize>> = std::collections::HashMap::new();
        for (i, nets) in nets_of.iter().enumerate() {
            for n in nets.iter() {
                let held = lists_of_net.entry(n.trunc()).or_default();
                if !held.contains(&i) {
                    held.push(i);
                }
            }
        }
        let mut labels: Vec<(ipnet::IpNet, Vec<usize>)> = lists_of_net
            .keys()
            .map(|n| {
                let mut held: Vec<usize> = (0..=n.prefix_len())
                    .filter_map(|len| ipnet::IpNet::new(n.addr(), len).ok().map(|s| s.trunc()))
                    .filter_map(|s| lists_of_net.get(&s))
                    .flatten()
                    .copied()
                    .collect();
                held.sort_unstable();
                held.dedup();
                (*n, held)
            })
            .collect();
        labels.sort_by_key(|(a, _)| *a);
        RangeLists { lists, list_of_agent, labels }
    }

    fn label(held: &[usize]) -> String {
        let mut l = String::from(",");
        for i in held {
            l.push_str(&format!("{i},"));
        }
        l
    }

    fn geo_entries(&self) -> Vec<(String, String)> {
        self.labels.iter().map(|(n, held)| (n.to_string(), Self::label(held))).collect()
    }
}

/// Keyed on the purpose, not the agent: every agent has one, and in_ranges already
/// says whether the claimed agent's list holds the address. Two entries per agent
/// made a map too large for map_hash_max_size with hundreds of ranged agents.
pub fn verdict_map(policy: &Policy) -> Map {
    let ranged = ranged(policy);
    let key = if ranged.is_empty() { "$cw_ua_empty:$crawlward_purpose:" } else { "$cw_ua_empty:$crawlward_purpose:$cw_in_ranges" };
    let mut m = Map::new(
        "The verdict: none (no agent), empty (no User-Agent), unverified (no published ranges),\nverified (inside them) or spoofed (outside them).",
        key,
        "$crawlward_verdict",
        Verdict::Unverified.as_str(),
    );
    m.entry("0::", Verdict::None.as_str());
    m.entry("1::", Verdict::Empty.as_str());
    for purpose in Purpose::ALL {
        if ranged.iter().any(|(_, a)| a.purpose == purpose) {
            m.entry(format!("0:{}:1", purpose.as_str()), Verdict::Verified.as_str());
            m.entry(format!("0:{}:0", purpose.as_str()), Verdict::Spoofed.as_str());
        }
    }
    m
}

pub fn door_map(policy: &Policy) -> Map {
    let mut m = Map::new("", "$uri", "$cw_door", "");
    m.comment.clear();
    // a regex, not a string key: nginx compares map strings case-insensitively,
    // while /ROBOTS.TXT is not robots.txt (location = /robots.txt is exact); \z, as $
    // would also take /robots.txt with a newline after it, which nginx does not serve
    m.regex("^/robots\\.txt\\z", Door::Robots.as_str());
    for d in &policy.identity.machine_doors {
        m.regex(&prefix_regex(d, policy.site.front_controller.as_deref()), Door::Machine.as_str());
    }
    m
}

pub fn action_map(policy: &Policy) -> Map {
    let mut m = Map::new("", "$cw_door:$crawlward_purpose:$crawlward_verdict", "$crawlward_action", Action::Allow.as_str());
    m.comment.clear();
    let purposes: Vec<Option<Purpose>> = std::iter::once(None).chain(Purpose::ALL.into_iter().map(Some)).collect();
    for door in Door::ALL {
        for purpose in &purposes {
            for verdict in Verdict::ALL {
                let action = policy.identity.ua_action(door, *purpose, verdict);
                if action != Action::Allow {
                    let p = purpose.map(|p| p.as_str()).unwrap_or("");
                    m.entry(format!("{}:{}:{}", door.as_str(), p, verdict.as_str()), action.as_str());
                }
            }
        }
    }
    m
}

/// A variable the log format and the refusal map read, for a layer the policy leaves out.
pub fn absent(layer: &str, variable: &str) -> Vec<String> {
    let m = Map::new(&format!("The policy has no {layer}."), "$crawlward_agent", variable, "");
    vec![m.to_string()]
}

/// The actions whose requests reach the facet guard, the browse cap and the
/// rate classes of stock nginx: a blocked request is the bot-blocker's.
pub fn passing_actions() -> Vec<Action> {
    [Action::Allow, Action::Throttle, Action::Block(444), Action::Block(403)].into_iter().filter(|a| layers::passes(*a, false)).collect()
}
