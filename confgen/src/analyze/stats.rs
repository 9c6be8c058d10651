//! One pass over the log lines: per agent, per time interval, per client
//! (a verified crawler by its name, anyone else by address, IPv6 by /64) and
//! per network (/24, /48). Memory grows with the number of clients and
//! networks and with the time the log spans, never with its length: each
//! client is a few counters, a distinct count and two small heavy-hitter
//! tables.

use super::parse::{path_of, unescape, Format, Line, Parser, Reason};
use super::sketch::{hash_bytes, mix, Distinct, TopK};
use crawlward_policy::classifier::{self, Observed, RuleCounts, Scored, Settings};
use crawlward_policy::escape::escaped;
use crawlward_policy::signals::{self, client_address, has_contact, network, ua_family, RobotsRules};
use crawlward_policy::{decide, Policy, Purpose, Verdict};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::net::IpAddr;

type Fast<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A hasher for keys that are already small and well spread (addresses, indices, short strings).
#[derive(Default)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = self.0.rotate_left(5) ^ hash_bytes(bytes);
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u16(&mut self, i: u16) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u128(&mut self, i: u128) {
        self.write_u64(i as u64);
        self.write_u64((i >> 64) as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// Status classes of the charts and tables, in order.
pub const STATUS_CLASSES: [&str; 6] = ["2xx", "3xx", "4xx", "429", "444", "5xx"];

pub fn status_class(status: u16) -> usize {
    match status {
        429 => 3,
        444 => 4,
        200..=299 => 0,
        300..=399 => 1,
        500..=599 => 5,
        _ => 2,
    }
}

/// The ladder's rungs as the log names them: L0 to L6, then routed.
pub const RUNGS: usize = 8;
pub const RUNG_NAMES: [&str; RUNGS] = ["L0", "L1", "L2", "L3", "L4", "L5", "L6", "routed"];

/// Who asked, by purpose, for the charts: the catalogue's purposes, then
/// people and unknown clients (no agent), then requests without a User-Agent.
/// The groups of the crawlers' share of time: the module's own ([`crawlward_policy::responses::time_group`]).
pub use crawlward_policy::responses::{time_group_name as group_name, TIME_GROUPS as GROUPS};

/// What a User-Agent string says, worked out once per string.
#[derive(Debug, Clone, Copy)]
struct UaInfo {
    agent: Option<usize>,
    /// For a bot the catalogue does not name, where its product token is.
    token: Option<(usize, usize)>,
    family: u32,
    declared: bool,
    contact: bool,
}

/// Distinct User-Agent strings remembered; past it the memo starts over.
const UA_MEMO: usize = 1 << 16;
/// Family names kept for display; past it a family is shown by its hash.
const FAMILY_NAMES: usize = 4096;
const TOP_PATHS_HELD: usize = 16;
const TOP_FAMILIES_HELD: usize = 4;

#[derive(Debug, Clone, Default)]
pub struct AgentStats {
    pub requests: u64,
    /// Requests by status (three digits: 0 to 999).
    by_status: Vec<u64>,
    /// By [`Verdict::ALL`] order.
    pub verdicts: [u64; 5],
    pub disallowed: u64,
    pub robots_fetches: u64,
    /// Requests whose `facets=` (the module's facet count) is at least 1.
    pub with_facets: u64,
    pub upstream_seconds: f64,
    pub request_seconds: f64,
    /// Refusals as the log names them (`refusal=`, `budget=`).
    pub refusals: BTreeMap<String, u64>,
    /// Verified requests answered 429 or 5xx (the search-crawler check of heratio.org's guide), and unverified ones.
    pub verified_refused: BTreeMap<u16, u64>,
    pub unverified_refused: BTreeMap<u16, u64>,
    /// Those verified 429s and 5xx by who answered them: the `refusal=` of the
    /// log (`facet`, `rate`, `budget`, `browse-cap`, `maintenance`), or
    /// `upstream or other` when crawlward refused nothing (the site's own answer).
    pub verified_refused_by: BTreeMap<String, u64>,
    /// Where the first verified 429/5xx is in the input.
    pub first_refused_at: Option<String>,
}

impl AgentStats {
    fn count_status(&mut self, status: u16) {
        if self.by_status.is_empty() {
            self.by_status = vec![0; 1000];
        }
        self.by_status[usize::from(status).min(999)] += 1;
    }

    /// The statuses seen, with their counts.
    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        self.by_status.iter().enumerate().filter(|(_, n)| **n > 0).map(|(s, n)| (s as u16, *n)).collect()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Interval {
    pub requests: u64,
    pub crawler_requests: u64,
    pub upstream_seconds: f64,
    pub crawler_upstream_seconds: f64,
    pub request_seconds: f64,
    pub crawler_request_seconds: f64,
    /// [group][status class]
    pub by_group: [[u64; 6]; GROUPS],
}

/// One client's requests in one window.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub start: i64,
    pub requests: u32,
    pub paths: Distinct,
    pub top_paths: TopK,
    pub auth: u32,
    /// User-Agent families (a catalogue agent's family is its name).
    pub families: TopK,
    pub robots: bool,
    pub sitemap: bool,
    pub disallowed: u32,
    pub declared: u32,
    pub contact: u32,
    pub verified: u32,
    minute: i64,
    minute_count: u32,
    pub peak_minute: u32,
    /// Distinct addresses (verified crawlers and networks).
    pub addresses: Distinct,
}

/// A finished window, scored.
#[derive(Debug, Clone)]
pub struct Scoring {
    pub start: i64,
    pub scored: Scored,
    pub honoured: Vec<&'static str>,
    pub requests: u64,
    pub unique_paths: f64,
    pub addresses: f64,
    pub disallowed: u64,
    pub family: u32,
    pub verified: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Client {
    pub window: Window,
    /// The highest-scoring window so far (boxed: a client whose first window
    /// is still open, as most are, holds only the pointer).
    pub best: Option<Box<Scoring>>,
    pub requests: u64,
    pub disallowed: u64,
    pub fetched_robots: bool,
}

/// Clients tracked at once, and networks: about 1.3 kB each at most (a
/// client's window, distinct count and heavy-hitter tables), so about 260 MB
/// and 130 MB at most, whatever the number of addresses in the log (a
/// million clients took 1.33 GB before this bound).
pub const MAX_CLIENTS: usize = 200_000;
pub const MAX_NETWORKS: usize = 100_000;
/// How many clients a full table compares to find the one it gives up.
const EVICTION_SAMPLE: usize = 8;

/// Clients by key: a small index into a list, so that a lookup touches the
/// index's few bytes per client, not each client's counters. At most
/// `capacity` of them: a new client past it takes the place of the one with
/// the fewest requests of a few taken at random (the heavy hitters stay, as
/// in a space-saving sketch), which is then counted as given up.
pub struct Table<K> {
    index: Fast<K, u32>,
    items: Vec<(K, Client)>,
    capacity: usize,
    /// Clients given up for others, and their requests until then.
    pub evicted: u64,
    pub evicted_requests: u64,
    seed: u64,
}

impl<K> Table<K> {
    pub fn with_capacity(capacity: usize) -> Self {
        Table { index: Fast::default(), items: Vec::new(), capacity: capacity.max(1), evicted: 0, evicted_requests: 0, seed: 0x9e37_79b9_7f4a_7c15 }
    }
}

impl<K: std::hash::Hash + Eq + Copy> Table<K> {
    fn get(&mut self, key: K) -> &mut Client {
        if let Some(&i) = self.index.get(&key) {
            return &mut self.items[i as usize].1;
        }
        if self.items.len() < self.capacity {
            self.index.insert(key, self.items.len() as u32);
            self.items.push((key, Client::default()));
            return &mut self.items.last_mut().expect("just pushed").1;
        }
        let n = self.items.len() as u64;
        let victim = (0..EVICTION_SAMPLE)
            .map(|_| {
                self.seed ^= self.seed << 13;
                self.seed ^= self.seed >> 7;
                self.seed ^= self.seed << 17;
                (self.seed % n) as usize
            })
            .min_by_key(|&i| self.items[i].1.requests)
            .expect("a sample");
        let (old, gone) = std::mem::replace(&mut self.items[victim], (key, Client::default()));
        self.index.remove(&old);
        self.index.insert(key, victim as u32);
        self.evicted += 1;
        self.evicted_requests += gone.requests;
        &mut self.items[victim].1
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &Client)> {
        self.items.iter().map(|(k, c)| (k, c))
    }
}

/// Who a client is: a verified crawler by its agent, anyone else by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClientKey {
    Verified(usize),
    Address(IpAddr),
}

#[derive(Debug, Clone)]
pub struct Unparseable {
    pub count: u64,
    pub example: String,
    pub at: String,
}

pub struct Analyzer<'p> {
    pub policy: &'p Policy,
    settings: &'p Settings,
    rules: RobotsRules,
    sitemap_path: Vec<u8>,
    per_minute: Option<u32>,
    window_seconds: i64,
    pub interval_seconds: i64,
    parser: Parser,
    memo: Fast<Box<[u8]>, UaInfo>,
    pub family_names: Fast<u32, String>,
    /// The catalogue purpose of each family that names an agent (kept with its name).
    pub family_purposes: Fast<u32, Purpose>,
    pub lines: u64,
    pub parsed: u64,
    pub formats: BTreeMap<Format, u64>,
    pub first_time: Option<i64>,
    pub last_time: Option<i64>,
    pub unparseable: BTreeMap<Reason, Unparseable>,
    /// Catalogue agents, then people and unknown clients, then no User-Agent.
    pub agents: Vec<AgentStats>,
    /// By start time, in order.
    pub intervals: Vec<(i64, Interval)>,
    pub clients: Table<ClientKey>,
    pub networks: Table<(IpAddr, u8)>,
    pub robots_answers: BTreeMap<u16, u64>,
    /// Lines whose `agent=` names another agent than the catalogue finds for the User-Agent.
    pub agent_disagreements: u64,
    /// Requests with a logged rung (`rung=`), by rung (L0 to L6, routed) and group, by status class.
    pub by_rung: Vec<[u64; 6]>,
    /// Where the current line is, for examples: (input name, line number).
    pub place: (String, u64),
    /// Metered API requests, by account.
    pub accounts: super::accounts::Accounts,
}

impl<'p> Analyzer<'p> {
    pub fn new(policy: &'p Policy, interval_seconds: i64) -> Analyzer<'p> {
        let settings = &policy.classifier;
        let sitemap_path = signals::sitemap_path(policy).into_bytes();
        Analyzer {
            policy,
            settings,
            rules: RobotsRules::new(policy),
            sitemap_path,
            per_minute: signals::crawl_delay_per_minute(policy.robots.crawl_delay),
            window_seconds: (settings.window_minutes * 60.0) as i64,
            interval_seconds: interval_seconds.max(1),
            parser: Parser::default(),
            memo: Fast::default(),
            family_names: Fast::default(),
            family_purposes: Fast::default(),
            lines: 0,
            parsed: 0,
            formats: BTreeMap::new(),
            first_time: None,
            last_time: None,
            unparseable: BTreeMap::new(),
            agents: vec![AgentStats::default(); policy.identity.catalogue.agents().len() + 2],
            intervals: Vec::new(),
            clients: Table::with_capacity(MAX_CLIENTS),
            networks: Table::with_capacity(MAX_NETWORKS),
            robots_answers: BTreeMap::new(),
            agent_disagreements: 0,
            by_rung: vec![[0; 6]; RUNGS * GROUPS],
            place: (String::new(), 0),
            accounts: Default::default(),
        }
    }

    pub fn people_row(&self) -> usize {
        self.agents.len() - 2
    }

    pub fn empty_row(&self) -> usize {
        self.agents.len() - 1
    }

    pub fn unparseable_line(&mut self, reason: Reason, line: &[u8]) {
        let at = format!("{}:{}", self.place.0, self.place.1);
        let e = self.unparseable.entry(reason).or_insert_with(|| Unparseable { count: 0, example: example(line), at });
        e.count += 1;
    }

    fn ua_info(&mut self, ua: &[u8]) -> UaInfo {
        if let Some(i) = self.memo.get(ua) {
            return *i;
        }
        let found = self.policy.identity.catalogue.identify(ua).unwrap_or_default();
        let (agent, token) = (found.agent, found.token);
        // a bot the catalogue does not name: its own product token, as the module logs it
        let family_name = match self.policy.identity.catalogue.label(ua, &found) {
            Some(label) => escaped(label.as_bytes()).to_string(),
            None => ua_family(crawlward_policy::catalogue::read_part(ua)),
        };
        let family = (hash_bytes(family_name.as_bytes()) >> 32) as u32;
        if self.family_names.len() < FAMILY_NAMES {
            self.family_names.entry(family).or_insert(family_name);
            if let Some(i) = agent {
                self.family_purposes.entry(family).or_insert(self.policy.identity.catalogue.agents()[i].purpose);
            }
        }
        let declared = signals::declares(agent.map(|i| &self.policy.identity.catalogue.agents()[i]));
        let info = UaInfo { agent, token, family, declared, contact: has_contact(crawlward_policy::catalogue::read_part(ua)) };
        if self.memo.len() >= UA_MEMO {
            self.memo.clear();
        }
        self.memo.insert(ua.into(), info);
        info
    }

    /// The family of the clients whose claim of family `f` their addresses
    /// disprove: named "(spoofed)", with no purpose, so that nothing they do
    /// counts for the purpose they claim.
    fn spoofed_family(&mut self, f: u32) -> u32 {
        let spoofed = f.rotate_left(16) ^ 0x5b0f_ed00;
        if self.family_names.len() < FAMILY_NAMES && !self.family_names.contains_key(&spoofed) {
            let name = format!("{} (spoofed)", self.family_name(f));
            self.family_names.insert(spoofed, name);
        }
        spoofed
    }

    /// Count one line of the log.
    pub fn line(&mut self, raw: &[u8]) {
        self.lines += 1;
        let (line, format) = match self.parser.parse(raw) {
            Ok(x) => x,
            Err(reason) => return self.unparseable_line(reason, raw),
        };
        self.parsed += 1;
        *self.formats.entry(format).or_insert(0) += 1;
        self.request(&line, format);
    }

    fn request(&mut self, line: &Line<'_>, format: Format) {
        let Some(ip) = line.addr else { return };
        let t = line.time;
        self.first_time = Some(self.first_time.map_or(t, |f| f.min(t)));
        self.last_time = Some(self.last_time.map_or(t, |l| l.max(t)));
        if let Some(account) = line.fields.account {
            let refused = line.fields.refusal == Some(&b"quota"[..]);
            self.accounts.observe(account, line.fields.source, line.fields.tier, t, ip, refused);
        }
        let ua_raw = unescape(line.user_agent);
        // nginx logs "-" for a missing or empty header
        let ua: &[u8] = if &*ua_raw == b"-" { b"" } else { &ua_raw };
        let info = if ua.is_empty() { UaInfo { agent: None, token: None, family: 0, declared: false, contact: false } } else { self.ua_info(ua) };
        let catalogue = &self.policy.identity.catalogue;
        let agent_ref = info.agent.map(|i| &catalogue.agents()[i]);
        if let Some(logged) = line.fields.agent {
            // the module names a bot the catalogue does not name by its product token
            let expected = match (agent_ref, info.token) {
                (Some(a), Some((start, len))) if a.counts_by_token() => ua.get(start..start + len).unwrap_or(a.name.as_bytes()),
                (Some(a), _) => a.name.as_bytes(),
                (None, _) => b"",
            };
            // the log holds it as nginx escaped it (a token may hold a `"` or `\`)
            if expected != &*unescape(logged) {
                self.agent_disagreements += 1;
            }
        }
        let verdict = line.fields.verdict.unwrap_or_else(|| self.policy.identity.verdict(ua, agent_ref, ip));
        // a claim its address disproves is not that agent: a family of its own, with no purpose
        let info = if verdict == Verdict::Spoofed { UaInfo { family: self.spoofed_family(info.family), ..info } } else { info };
        let row = match (info.agent, verdict) {
            (_, Verdict::Empty) => self.empty_row(),
            (Some(i), _) => i,
            (None, _) => self.people_row(),
        };
        let purpose = if row < catalogue.agents().len() { Some(catalogue.agents()[row].purpose) } else { None };
        let group = crawlward_policy::responses::time_group(purpose, verdict);
        // as the module reads it: nginx's `$uri` (percent-decoded, slashes merged, dot segments
        // resolved) and `$args`, and for the site's own paths the path the application sees
        // (site.front_controller); robots.txt's rules on `$uri` and the query. A target nginx
        // answered 400 before any module ran is taken as logged.
        let logged = unescape(line.target);
        let target = decide::absolute_form(&logged).map_or(Cow::Borrowed(&logged[..]), |(_, origin)| origin);
        let (uri, args) = decide::nginx_uri(&target).unwrap_or_else(|| {
            let path = path_of(&target);
            (Cow::Borrowed(path), target.get(path.len() + 1..).unwrap_or(b""))
        });
        let path = self.policy.identity.app_path(&uri);
        let robots = path == b"/robots.txt";
        let disallowed = !robots && self.rules.is_disallowed(agent_ref, &decide::with_query(&uri, args));
        let auth = self.settings.is_auth_path(path);
        let sitemap = path == self.sitemap_path.as_slice();
        let crawler = verdict.is_crawler();
        let status = line.status;
        let refused = status == 429 || (500..=599).contains(&status);

        // per agent
        let place = &self.place;
        let a = &mut self.agents[row];
        a.requests += 1;
        a.count_status(status);
        let vi = Verdict::ALL.iter().position(|v| *v == verdict).unwrap_or(0);
        a.verdicts[vi] += 1;
        a.disallowed += u64::from(disallowed);
        a.robots_fetches += u64::from(robots);
        a.with_facets += u64::from(line.fields.facets.is_some_and(|f| f > 0));
        if let Some(u) = line.fields.upstream_time {
            a.upstream_seconds += u;
        }
        if let Some(r) = line.fields.request_time {
            a.request_seconds += r;
        }
        if let Some(r) = line.fields.refusal {
            let name = match (r, line.fields.budget) {
                (b"budget", Some(b)) => format!("budget {}", escaped(b)),
                (r, _) => escaped(r).to_string(),
            };
            // nginx writes a handful of words here: a few dozen at most are kept apart
            if a.refusals.len() < 32 || a.refusals.contains_key(&name) {
                *a.refusals.entry(name).or_insert(0) += 1;
            }
        }
        if refused && purpose == Some(Purpose::Search) {
            if verdict == Verdict::Verified {
                *a.verified_refused.entry(status).or_insert(0) += 1;
                if format != Format::Combined {
                    let by = line.fields.refusal.map_or_else(|| "upstream or other".to_string(), |r| escaped(r).to_string());
                    if a.verified_refused_by.len() < 32 || a.verified_refused_by.contains_key(&by) {
                        *a.verified_refused_by.entry(by).or_insert(0) += 1;
                    }
                }
                if a.first_refused_at.is_none() {
                    a.first_refused_at = Some(format!("{}:{}", place.0, place.1));
                }
            } else if verdict == Verdict::Unverified {
                *a.unverified_refused.entry(status).or_insert(0) += 1;
            }
        }
        if robots {
            *self.robots_answers.entry(status).or_insert(0) += 1;
        }
        if let Some(rung) = line.fields.rung {
            self.by_rung[rung * GROUPS + group][status_class(status)] += 1;
        }

        // per interval
        let iv = interval_at(&mut self.intervals, t.div_euclid(self.interval_seconds) * self.interval_seconds);
        iv.requests += 1;
        iv.by_group[group][status_class(status)] += 1;
        let up = line.fields.upstream_time.unwrap_or(0.0);
        let rt = line.fields.request_time.unwrap_or(0.0);
        iv.upstream_seconds += up;
        iv.request_seconds += rt;
        if crawler {
            iv.crawler_requests += 1;
            iv.crawler_upstream_seconds += up;
            iv.crawler_request_seconds += rt;
        }

        // per client and network
        let hit = Hit {
            t,
            // distinct URLs: a facet or sort variant is a page of its own (the module's url_hash)
            path: hash_bytes(&decide::with_query(path, args)),
            auth,
            family: info.family,
            robots,
            sitemap,
            disallowed,
            declared: info.declared,
            contact: info.contact,
            verdict,
            address: match ip {
                IpAddr::V4(v4) => mix(u64::from(u32::from(v4))),
                IpAddr::V6(v6) => {
                    let v = u128::from(v6);
                    mix(v as u64 ^ mix((v >> 64) as u64))
                }
            },
        };
        let (s, w, pm) = (self.settings, self.window_seconds, self.per_minute);
        let key = match (verdict, info.agent) {
            (Verdict::Verified, Some(i)) => ClientKey::Verified(i),
            _ => ClientKey::Address(client_address(ip)),
        };
        // an address client is one address: only verified crawlers and networks count theirs
        let verified = matches!(key, ClientKey::Verified(_));
        self.clients.get(key).add(&hit, s, w, pm, verified);
        if !verified {
            self.networks.get(network(ip)).add(&hit, s, w, pm, true);
        }
    }

    /// Score every client's last window.
    pub fn finish(&mut self) {
        let (s, pm) = (self.settings, self.per_minute);
        for c in self.clients.items.iter_mut().map(|(_, c)| c).chain(self.networks.items.iter_mut().map(|(_, c)| c)) {
            c.close_window(s, pm);
        }
    }

    /// Every client's best window, moved out (the clients keep their totals).
    pub fn take_best(&mut self) -> Vec<(ClientKey, Box<Scoring>)> {
        self.clients.items.iter_mut().filter_map(|(k, c)| c.best.take().map(|b| (*k, b))).collect()
    }

    pub fn family_name(&self, f: u32) -> String {
        self.family_names.get(&f).cloned().unwrap_or_else(|| format!("#{f:08x}"))
    }

    /// The catalogue purpose of a family's agent, if it names one.
    pub fn family_purpose(&self, f: u32) -> Option<Purpose> {
        self.family_purposes.get(&f).copied()
    }
}

/// The interval starting at `start`: the last one for a log in time order, else found or inserted.
fn interval_at(v: &mut Vec<(i64, Interval)>, start: i64) -> &mut Interval {
    let at = match v.last() {
        Some((t, _)) if *t == start => v.len() - 1,
        _ => match v.binary_search_by_key(&start, |(t, _)| *t) {
            Ok(i) => i,
            Err(i) => {
                v.insert(i, (start, Interval::default()));
                i
            }
        },
    };
    &mut v[at].1
}

/// What one request adds to its client.
struct Hit {
    t: i64,
    path: u64,
    auth: bool,
    family: u32,
    robots: bool,
    sitemap: bool,
    disallowed: bool,
    declared: bool,
    contact: bool,
    verdict: Verdict,
    address: u64,
}

impl Client {
    fn add(&mut self, h: &Hit, s: &Settings, window: i64, per_minute: Option<u32>, addresses: bool) {
        if self.window.requests > 0 && h.t >= self.window.start + window {
            self.close_window(s, per_minute);
        }
        let w = &mut self.window;
        if w.requests == 0 {
            w.start = h.t;
        }
        w.requests = w.requests.saturating_add(1);
        w.paths.insert(h.path);
        w.top_paths.add((h.path >> 32) as u32, TOP_PATHS_HELD);
        w.auth += u32::from(h.auth);
        w.families.add(h.family, TOP_FAMILIES_HELD);
        w.robots |= h.robots;
        w.sitemap |= h.sitemap;
        w.disallowed += u32::from(h.disallowed);
        w.declared += u32::from(h.declared);
        w.contact += u32::from(h.contact);
        w.verified += u32::from(h.verdict == Verdict::Verified);
        if addresses {
            w.addresses.insert(h.address);
        }
        let minute = h.t.div_euclid(60);
        if minute != w.minute {
            w.minute = minute;
            w.minute_count = 0;
        }
        w.minute_count += 1;
        w.peak_minute = w.peak_minute.max(w.minute_count);
        self.requests += 1;
        self.disallowed += u64::from(h.disallowed);
        self.fetched_robots |= h.robots;
    }

    /// Score the current window and keep it if it is the client's highest.
    fn close_window(&mut self, s: &Settings, per_minute: Option<u32>) {
        let w = std::mem::take(&mut self.window);
        if w.requests == 0 {
            return;
        }
        let scoring = score_window(&w, s, per_minute);
        if self.best.as_ref().is_none_or(|b| scoring.scored.score > b.scored.score) {
            self.best = Some(Box::new(scoring));
        }
    }
}

/// The rules a window shows its client honouring.
pub fn honoured(w: &Window, per_minute: Option<u32>) -> Vec<&'static str> {
    let counts = RuleCounts {
        requests: f64::from(w.requests),
        declared: f64::from(w.declared),
        contact: f64::from(w.contact),
        disallowed: f64::from(w.disallowed),
        robots: w.robots,
        sitemap: w.sitemap,
        peak_minute: w.peak_minute,
    };
    classifier::honoured(&counts, per_minute).collect()
}

fn score_window(w: &Window, s: &Settings, per_minute: Option<u32>) -> Scoring {
    let requests = f64::from(w.requests);
    let top_family = w.families.top().map_or(0, |(_, c)| c);
    let honoured = honoured(w, per_minute);
    let observed = Observed {
        requests,
        unique_paths: w.paths.count().min(requests),
        top_path_hits: w.top_paths.heaviest().iter().map(|(_, c)| f64::from(*c)).collect(),
        auth_frac: f64::from(w.auth) / requests,
        top_agent_share: (f64::from(top_family) / requests).min(1.0),
        sessions: None,
        rules_honoured: honoured.len() as f64,
    };
    let scored = classifier::score(&observed, s);
    Scoring {
        start: w.start,
        unique_paths: observed.unique_paths,
        scored,
        honoured,
        requests: u64::from(w.requests),
        addresses: w.addresses.count().max(1.0),
        disallowed: u64::from(w.disallowed),
        family: w.families.top().map_or(0, |(f, _)| f),
        verified: w.verified * 2 > w.requests,
    }
}

/// A line as an example: at most 300 bytes, every byte but printable ASCII
/// escaped (`\xHH`, as nginx's access log writes them).
pub fn example(line: &[u8]) -> String {
    let cut = &line[..line.len().min(300)];
    let mut s = escaped(cut).to_string();
    if line.len() > 300 {
        s.push_str(" [...]");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// robots.txt's rules are about the URL as the crawler wrote it: the
    /// published file disallows /glam/browse, which /index.php/glam/browse does
    /// not start with, though the application answers both alike.
    #[test]
    fn robots_rules_read_the_url_as_written_behind_a_front_controller() {
        let policy = crawlward_policy::load_str(
            "t.yaml",
            "site: {canonical_url: https://example.org, upstream_workers: 4, front_controller: /index.php}\nrobots: {disallow: [/glam/browse]}\n",
        )
        .unwrap();
        let mut a = Analyzer::new(&policy, 60);
        let ua = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        for target in ["/index.php/glam/browse?page=2", "/glam/browse?page=2", "/index.phpx/glam/browse"] {
            a.line(format!("66.249.66.1 - - [10/Oct/2026:13:55:36 +0000] \"GET {target} HTTP/1.1\" 200 5120 \"-\" \"{ua}\"").as_bytes());
        }
        let googlebot = policy.identity.catalogue.agents().iter().position(|x| x.name == "Googlebot").unwrap();
        assert_eq!(a.agents[googlebot].requests, 3);
        assert_eq!(a.agents[googlebot].disallowed, 1, "only /glam/browse is what robots.txt disallows");
    }

    /// analyze reads a request as the module does, on nginx's `$uri`: an
    /// encoded, doubled or dotted path is the page nginx answers with.
    #[test]
    fn a_request_is_read_on_the_path_nginx_normalizes() {
        let policy =
            crawlward_policy::load_str("t.yaml", "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {disallow: [/glam/browse]}\n")
                .unwrap();
        let mut a = Analyzer::new(&policy, 60);
        let ua = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        for target in [
            "/%72obots.txt",
            "/glam//browse?page=2",
            "/x/../glam/%62rowse",
            "/glam/./browse",
            "/glam/brow%73e?q=%2F",
            "/glam/other",
            "/%zz",
            "http://example.org/glam/browse?x",
            "HTTPS://example.org:8443",
        ] {
            a.line(format!("66.249.66.1 - - [10/Oct/2026:13:55:36 +0000] \"GET {target} HTTP/1.1\" 200 5120 \"-\" \"{ua}\"").as_bytes());
        }
        let googlebot = policy.identity.catalogue.agents().iter().position(|x| x.name == "Googlebot").unwrap();
        assert_eq!(a.agents[googlebot].requests, 9);
        assert_eq!(a.agents[googlebot].robots_fetches, 1, "/%72obots.txt is /robots.txt");
        assert_eq!(a.agents[googlebot].disallowed, 5, "each spelling of /glam/browse, an absolute one too");
    }

    #[test]
    fn a_full_client_table_gives_up_the_lightest_and_keeps_the_heavy_hitters() {
        let mut t: Table<u32> = Table::with_capacity(1_000);
        // 100 heavy clients, then 20,000 that send one request each
        for round in 0..50 {
            for k in 0..100 {
                t.get(k).requests += 1;
            }
            for k in 0..400 {
                t.get(1_000_000 + round * 400 + k).requests += 1;
            }
        }
        assert_eq!(t.items.len(), 1_000, "the table holds at most its capacity");
        assert_eq!(t.index.len(), 1_000);
        for k in 0..100 {
            assert_eq!(t.index.get(&k).map(|&i| t.items[i as usize].1.requests), Some(50), "heavy client {k} kept, its counts whole");
        }
        assert_eq!(t.evicted, 20_000 - 900);
        assert_eq!(t.evicted_requests, t.evicted, "each given up after its one request");
    }
}
