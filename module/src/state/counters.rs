//! The counters zone: requests by agent, verdict and action (access phase),
//! and responses by agent, verdict and status class (log phase), shared by
//! all workers and carried over on reload.
//!
//! Layout: a [`Table`] without an index, whose header holds the totals and
//! whose entries are slots. A slot is an agent name and its counters, all
//! atomics, so workers count without a lock ([`Table::view`]). Slot 0 counts
//! requests that name no agent, slot 1 the agents that found no free slot
//! ("other"). Slots are assigned only by the master, in the zone's init,
//! before workers start: workers never change the layout, so the table is
//! bounded by the zone size and a full table never fails a request.

use crate::state::shm::Table;
use crawlward_policy::layers::Refused;
use crawlward_policy::layout::{Fingerprint, Kind};
use crawlward_policy::responses::{self, StatusClass, TIME_GROUPS};
use crawlward_policy::signature::Outcome;
use crawlward_policy::{Action, Rule, Verdict};
use ngx::ffi::ngx_shm_zone_t;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The zone's layout; the version is bumped when a field changes meaning without changing a size.
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Root, Slot>(Kind::Counters, 6);
pub const NAME_MAX: usize = 60;
pub const VERDICTS: usize = 5;
pub const ACTIONS: usize = 4;
pub const CLASSES: usize = StatusClass::COUNT;
pub const NO_AGENT: u32 = 0;
pub const OTHER: u32 = 1;

/// The table's header: the slots in use, and the totals.
#[repr(C)]
pub struct Root {
    used: AtomicU32,
    /// Responses to verified search crawlers by status class, whatever their slot.
    verified_search: [AtomicU64; CLASSES],
    /// Requests the facet guard refused, by rule ([`FACET_RULES`]); in a dry run, those it
    /// would have refused.
    facet_refused: [AtomicU64; FACET_RULES.len()],
    facet_dry_run_refused: [AtomicU64; FACET_RULES.len()],
    /// Signed requests by what their signature said ([`SIGNATURE_OUTCOMES`]).
    signatures: [AtomicU64; SIGNATURE_OUTCOMES.len()],
    /// Of the unverified ones, those not checked: their address's failed
    /// verifications had used up the minute's allowance.
    signatures_not_checked: AtomicU64,
    /// Upstream time, a minute a bucket, for the window ([`MINUTES`]).
    minutes: [Minute; MINUTES],
    /// Refusals by what refused them ([`REFUSALS`]).
    refused_by: [AtomicU64; REFUSALS.len()],
    /// Key directories that signed requests but are not in the key file, the
    /// busiest kept ([`UNKNOWN_DIRECTORIES`], space-saving: a new one takes the
    /// place of the least counted, and starts from its count).
    unknown_directories: [UnknownDirectory; UNKNOWN_DIRECTORIES],
    /// Held while a worker changes the list: taken with a try, never waited on,
    /// so that a worker that dies holding it costs only the list's updates.
    unknown_lock: AtomicU32,
    /// Directories given up for another, and updates skipped while another worker held the list.
    unknown_replaced: AtomicU64,
    unknown_skipped: AtomicU64,
}

/// The unknown directories kept in the counters zone.
pub const UNKNOWN_DIRECTORIES: usize = 8;
/// The longest directory origin kept (longer ones are cut).
const DIRECTORY_MAX: usize = 96;

/// A key directory the key file does not hold, and the signed requests naming it.
#[repr(C)]
struct UnknownDirectory {
    len: AtomicU32,
    name: [AtomicU8; DIRECTORY_MAX],
    requests: AtomicU64,
}

impl UnknownDirectory {
    const fn new() -> UnknownDirectory {
        UnknownDirectory { len: AtomicU32::new(0), name: [const { AtomicU8::new(0) }; DIRECTORY_MAX], requests: AtomicU64::new(0) }
    }

    fn name(&self) -> Vec<u8> {
        let len = (self.len.load(Ordering::Relaxed) as usize).min(DIRECTORY_MAX);
        self.name[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }
}

/// What refusals are counted by: `$crawlward_refusal`'s words, then `site`
/// (a 403, 429, 444 or 503 none of crawlward's or nginx's limits gave).
pub const REFUSALS: [&str; Refused::ALL.len() + 1] = {
    let mut names = ["site"; Refused::ALL.len() + 1];
    let mut i = 0;
    while i < Refused::ALL.len() {
        names[i] = Refused::ALL[i].as_str();
        i += 1;
    }
    names
};

/// The minutes of upstream time kept: the window's and the current one.
pub const MINUTES: usize = 16;
/// The window the crawlers' share of server time is over, in minutes: the
/// current minute and the 14 before it.
pub const WINDOW_MINUTES: u64 = 15;

/// One minute of upstream time, per time group
/// ([`crawlward_policy::responses::time_group`]).
#[repr(C)]
struct Minute {
    /// The minute (since the epoch) the counts are of; 0: none yet.
    minute: AtomicU64,
    ms: [AtomicU64; TIME_GROUPS],
    responses: [AtomicU64; TIME_GROUPS],
    /// The crawlers' milliseconds ([`Verdict::is_crawler`], as `crawlward analyze` counts them).
    crawler_ms: AtomicU64,
}

impl Minute {
    const fn new() -> Minute {
        Minute {
            minute: AtomicU64::new(0),
            ms: [const { AtomicU64::new(0) }; TIME_GROUPS],
            responses: [const { AtomicU64::new(0) }; TIME_GROUPS],
            crawler_ms: AtomicU64::new(0),
        }
    }
}

/// The upstream time of the window, per time group: milliseconds and responses; and the crawlers'.
pub struct ServerTime {
    pub ms: [u64; TIME_GROUPS],
    pub responses: [u64; TIME_GROUPS],
    pub crawler_ms: u64,
}

/// The signature outcomes counted, in the status endpoint's order (`none` is every other request).
pub const SIGNATURE_OUTCOMES: [Outcome; 3] = [Outcome::Verified, Outcome::Unverified, Outcome::Invalid];

/// The facet guard's rules, in the status endpoint's order.
pub const FACET_RULES: [Rule; 2] = [Rule::FacetCrawlerParams, Rule::FacetNoReferer];

/// An agent's slot. The master writes its name before it publishes the slot
/// (`used`, Release); a worker reads only slots below `used` (Acquire).
#[repr(C)]
pub struct Slot {
    name_len: AtomicU32,
    name: [AtomicU8; NAME_MAX],
    counts: [AtomicU64; VERDICTS * ACTIONS],
    responses: [AtomicU64; VERDICTS * CLASSES],
    /// When a verified search crawler of this slot was last warned about (seconds of
    /// nginx's monotonic clock; 0: never), for all workers.
    warned_at: AtomicU64,
    /// Upstream milliseconds and the responses that had an upstream, since the zone was made.
    upstream_ms: AtomicU64,
    upstream_responses: AtomicU64,
}

/// One slot's name and counters, copied out.
pub struct SlotCounts {
    pub name: String,
    pub requests: [u64; VERDICTS * ACTIONS],
    pub responses: [u64; VERDICTS * CLASSES],
    pub upstream_ms: u64,
    pub upstream_responses: u64,
}

/// The verdict's place in [`Verdict::ALL`] (the status endpoint's order).
pub fn verdict_index(v: Verdict) -> usize {
    match v {
        Verdict::None => 0,
        Verdict::Empty => 1,
        Verdict::Unverified => 2,
        Verdict::Verified => 3,
        Verdict::Spoofed => 4,
    }
}

pub const ACTION_NAMES: [&str; ACTIONS] = ["allow", "throttle", "block-444", "block-403"];

/// The action's place in [`ACTION_NAMES`]: counting compares no strings.
pub fn action_index(a: Action) -> usize {
    match a {
        Action::Allow => 0,
        Action::Throttle => 1,
        Action::Block(403) => 3,
        Action::Block(_) => 2,
    }
}

impl Root {
    const fn new() -> Root {
        Root {
            used: AtomicU32::new(0),
            verified_search: [const { AtomicU64::new(0) }; CLASSES],
            facet_refused: [const { AtomicU64::new(0) }; FACET_RULES.len()],
            facet_dry_run_refused: [const { AtomicU64::new(0) }; FACET_RULES.len()],
            signatures: [const { AtomicU64::new(0) }; SIGNATURE_OUTCOMES.len()],
            signatures_not_checked: AtomicU64::new(0),
            minutes: [const { Minute::new() }; MINUTES],
            refused_by: [const { AtomicU64::new(0) }; REFUSALS.len()],
            unknown_directories: [const { UnknownDirectory::new() }; UNKNOWN_DIRECTORIES],
            unknown_lock: AtomicU32::new(0),
            unknown_replaced: AtomicU64::new(0),
            unknown_skipped: AtomicU64::new(0),
        }
    }
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            name_len: AtomicU32::new(0),
            name: [const { AtomicU8::new(0) }; NAME_MAX],
            counts: [const { AtomicU64::new(0) }; VERDICTS * ACTIONS],
            responses: [const { AtomicU64::new(0) }; VERDICTS * CLASSES],
            warned_at: AtomicU64::new(0),
            upstream_ms: AtomicU64::new(0),
            upstream_responses: AtomicU64::new(0),
        }
    }

    fn name(&self) -> Vec<u8> {
        let len = (self.name_len.load(Ordering::Relaxed) as usize).min(NAME_MAX);
        self.name[..len].iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// Written by the master only, before the slot is published.
    fn set_name(&self, name: &str) {
        let bytes = &name.as_bytes()[..name.len().min(NAME_MAX)];
        for (to, b) in self.name.iter().zip(bytes) {
            to.store(*b, Ordering::Relaxed);
        }
        self.name_len.store(bytes.len() as u32, Ordering::Relaxed);
    }
}

/// This cycle's view of the zone: the table, and which slot each catalogue agent counts in.
pub struct Counters {
    table: Table<Root, Slot>,
    /// Slot of the catalogue's agent i.
    slot_of_agent: Vec<u32>,
}

impl Counters {
    /// In the zone's init (in the master, before workers start): the zone's table, kept
    /// from the previous cycle (with its counts) or made, and a slot for each of `agents`
    /// (the catalogue's names, in its order): the one of that name, else a free one; and
    /// how many agents found no free slot and count as "other".
    ///
    /// # Safety
    /// `zone` must be the zone nginx passes to its init, with an initialized slab pool.
    pub unsafe fn open(zone: *mut ngx_shm_zone_t, agents: &[String]) -> Result<(Counters, usize), String> {
        let layout = |bytes: usize| Some((0, bytes.saturating_sub(std::mem::size_of::<Root>()) / std::mem::size_of::<Slot>()));
        // SAFETY: per the contract.
        let opened = unsafe { Table::open(zone, &LAYOUT, layout, Root::new(), Slot::new, |_, _, _| Ok(())) }?;
        let (table, _) = opened.fixed()?;
        let mut counters = Counters { table, slot_of_agent: Vec::with_capacity(agents.len()) };
        // slots 0 and 1 always exist
        counters.ensure_slot(NO_AGENT, "-");
        counters.ensure_slot(OTHER, "other");
        let mut full = 0;
        for name in agents {
            let slot = counters.find_or_add(name).unwrap_or_else(|| {
                full += 1;
                OTHER
            });
            counters.slot_of_agent.push(slot);
        }
        Ok((counters, full))
    }

    fn ensure_slot(&self, i: u32, name: &str) {
        if self.used() <= i {
            self.slots()[i as usize].set_name(name);
            self.root().used.store(i + 1, Ordering::Release);
        }
    }

    fn find_or_add(&self, name: &str) -> Option<u32> {
        let key = &name.as_bytes()[..name.len().min(NAME_MAX)];
        let used = self.used();
        if let Some(i) = (2..used).find(|i| self.slots()[*i as usize].name() == key) {
            return Some(i);
        }
        if used >= self.capacity() {
            return None;
        }
        self.slots()[used as usize].set_name(name);
        self.root().used.store(used + 1, Ordering::Release);
        Some(used)
    }

    fn root(&self) -> &Root {
        self.table.view().0
    }

    fn slots(&self) -> &[Slot] {
        self.table.view().1
    }

    fn slot(&self, i: u32) -> &Slot {
        // slot numbers come from slot_of_agent, NO_AGENT or OTHER, all below the capacity,
        // which is at least 16
        &self.slots()[i as usize]
    }

    pub fn zone_size(&self) -> usize {
        self.table.zone_size
    }

    fn slot_of(&self, agent: Option<usize>) -> &Slot {
        self.slot(match agent {
            None => NO_AGENT,
            Some(i) => self.slot_of_agent.get(i).copied().unwrap_or(OTHER),
        })
    }

    pub fn count(&self, agent: Option<usize>, verdict: Verdict, action: Action) {
        self.slot_of(agent).counts[verdict_index(verdict) * ACTIONS + action_index(action)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a response. For a verified search crawler's 429 or 5xx, answers whether a
    /// warning is due now (`now` in seconds), claiming it for this process: of all the
    /// workers, one warns about an agent in a minute.
    pub fn respond(&self, agent: Option<usize>, verdict: Verdict, class: StatusClass, verified_search: bool, now: u64) -> bool {
        let slot = self.slot_of(agent);
        slot.responses[verdict_index(verdict) * CLASSES + class.index()].fetch_add(1, Ordering::Relaxed);
        if !verified_search {
            return false;
        }
        self.root().verified_search[class.index()].fetch_add(1, Ordering::Relaxed);
        if !class.slows_crawlers() {
            return false;
        }
        let last = slot.warned_at.load(Ordering::Relaxed);
        responses::warn_due(last, now) && slot.warned_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Responses to verified search crawlers, by status class.
    pub fn verified_search(&self) -> [u64; CLASSES] {
        load(&self.root().verified_search)
    }

    /// Counts a facet guard refusal (`dry_run`: one it would have made).
    pub fn facet_refused(&self, rule: Rule, dry_run: bool) {
        let Some(i) = FACET_RULES.iter().position(|r| *r == rule) else { return };
        let root = self.root();
        let counts = if dry_run { &root.facet_dry_run_refused } else { &root.facet_refused };
        counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a response's upstream time (`ms`) for its agent and its time group, at `now_s`
    /// (seconds since the epoch). A minute's bucket is reset by the first worker to count
    /// in it; a count another worker adds at that moment may be lost (the figures are for
    /// the person on call, not billing).
    pub fn upstream(&self, agent: Option<usize>, group: usize, crawler: bool, ms: u64, now_s: u64) {
        let slot = self.slot_of(agent);
        slot.upstream_ms.fetch_add(ms, Ordering::Relaxed);
        slot.upstream_responses.fetch_add(1, Ordering::Relaxed);
        let minute = now_s / 60;
        let m = &self.root().minutes[(minute % MINUTES as u64) as usize];
        let seen = m.minute.load(Ordering::Acquire);
        if seen != minute && m.minute.compare_exchange(seen, minute, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            for a in m.ms.iter().chain(m.responses.iter()).chain([&m.crawler_ms]) {
                a.store(0, Ordering::Relaxed);
            }
        }
        if crawler {
            m.crawler_ms.fetch_add(ms, Ordering::Relaxed);
        }
        if let (Some(ms_of), Some(n)) = (m.ms.get(group), m.responses.get(group)) {
            ms_of.fetch_add(ms, Ordering::Relaxed);
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The upstream time of the last [`WINDOW_MINUTES`] minutes at `now_s`, per time group.
    pub fn server_time(&self, now_s: u64) -> ServerTime {
        let minute = now_s / 60;
        let mut out = ServerTime { ms: [0; TIME_GROUPS], responses: [0; TIME_GROUPS], crawler_ms: 0 };
        for m in &self.root().minutes {
            let at = m.minute.load(Ordering::Acquire);
            if at == 0 || at > minute || minute - at >= WINDOW_MINUTES {
                continue;
            }
            out.crawler_ms += m.crawler_ms.load(Ordering::Relaxed);
            for g in 0..TIME_GROUPS {
                out.ms[g] += m.ms[g].load(Ordering::Relaxed);
                out.responses[g] += m.responses[g].load(Ordering::Relaxed);
            }
        }
        out
    }

    /// Counts a signed request naming `directory`, which the key file does not hold.
    /// Any client can name any directory, so the list keeps the busiest: a new one
    /// takes the place of the least counted and starts from its count (an upper
    /// bound of its own). Skipped, and counted as such, while another worker changes it.
    pub fn unknown_directory(&self, directory: &[u8]) {
        let root = self.root();
        let name = &directory[..directory.len().min(DIRECTORY_MAX)];
        if root.unknown_lock.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            root.unknown_skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let list = &root.unknown_directories;
        match list.iter().find(|d| d.len.load(Ordering::Relaxed) != 0 && d.name() == name) {
            Some(d) => {
                d.requests.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                let (at, least) = list.iter().enumerate().map(|(i, d)| (i, d.requests.load(Ordering::Relaxed))).min_by_key(|(_, n)| *n).unwrap_or((0, 0));
                let d = &list[at];
                if least > 0 {
                    root.unknown_replaced.fetch_add(1, Ordering::Relaxed);
                }
                for (to, b) in d.name.iter().zip(name) {
                    to.store(*b, Ordering::Relaxed);
                }
                d.len.store(name.len() as u32, Ordering::Relaxed);
                d.requests.store(least + 1, Ordering::Relaxed);
            }
        }
        root.unknown_lock.store(0, Ordering::Release);
    }

    /// The unknown directories, busiest first, and the replaced and skipped counts.
    pub fn unknown_directories(&self) -> (Vec<(String, u64)>, u64, u64) {
        let root = self.root();
        let mut list: Vec<(String, u64)> = root
            .unknown_directories
            .iter()
            .filter(|d| d.len.load(Ordering::Relaxed) != 0)
            .map(|d| (String::from_utf8_lossy(&d.name()).into_owned(), d.requests.load(Ordering::Relaxed)))
            .collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        (list, root.unknown_replaced.load(Ordering::Relaxed), root.unknown_skipped.load(Ordering::Relaxed))
    }

    /// Counts a refusal by what refused it (None: the site's own).
    pub fn refused_by(&self, why: Option<Refused>) {
        let i = why.and_then(|w| Refused::ALL.iter().position(|r| *r == w)).unwrap_or(Refused::ALL.len());
        self.root().refused_by[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Refusals in [`REFUSALS`] order.
    pub fn refusals(&self) -> [u64; REFUSALS.len()] {
        load(&self.root().refused_by)
    }

    /// Counts a signed request by what its signature said, and whether it was
    /// not checked.
    pub fn signature(&self, outcome: Outcome, not_checked: bool) {
        if let Some(i) = SIGNATURE_OUTCOMES.iter().position(|o| *o == outcome) {
            self.root().signatures[i].fetch_add(1, Ordering::Relaxed);
        }
        if not_checked {
            self.root().signatures_not_checked.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Signed requests not checked (counted as unverified too).
    pub fn signatures_not_checked(&self) -> u64 {
        self.root().signatures_not_checked.load(Ordering::Relaxed)
    }

    /// Signed requests, in [`SIGNATURE_OUTCOMES`] order.
    pub fn signatures(&self) -> [u64; SIGNATURE_OUTCOMES.len()] {
        load(&self.root().signatures)
    }

    /// Facet guard refusals by rule, and dry-run ones, in [`FACET_RULES`] order.
    pub fn facet_refusals(&self) -> ([u64; FACET_RULES.len()], [u64; FACET_RULES.len()]) {
        (load(&self.root().facet_refused), load(&self.root().facet_dry_run_refused))
    }

    pub fn capacity(&self) -> u32 {
        self.slots().len().min(u32::MAX as usize) as u32
    }

    pub fn used(&self) -> u32 {
        self.root().used.load(Ordering::Acquire)
    }

    /// Every slot in use: its name and counters, copied out.
    pub fn snapshot(&self) -> Vec<SlotCounts> {
        (0..self.used().min(self.capacity()))
            .map(|i| {
                let s = self.slot(i);
                SlotCounts {
                    name: String::from_utf8_lossy(&s.name()).into_owned(),
                    requests: load(&s.counts),
                    responses: load(&s.responses),
                    upstream_ms: s.upstream_ms.load(Ordering::Relaxed),
                    upstream_responses: s.upstream_responses.load(Ordering::Relaxed),
                }
            })
            .collect()
    }
}

fn load<const N: usize>(from: &[AtomicU64; N]) -> [u64; N] {
    let mut out = [0u64; N];
    for (o, a) in out.iter_mut().zip(from.iter()) {
        *o = a.load(Ordering::Relaxed);
    }
    out
}
