//! The budget zone's table: the windows of every address and agent name (and,
//! in its header, the shared budget's), as fixed-size `repr(C)` entries linked by indices, so that
//! it can live in nginx shared memory (see `verdict_cache` for the same
//! layout). The caller provides the memory, the clock and the lock.
//!
//! Every table a client can grow is bounded, and no client can take another's
//! place in it:
//! - the agents of the catalogue have fixed slots, laid out when the table is
//!   made (see [`Pinned`]): never evicted, never `other`, whatever names other
//!   clients send;
//! - addresses and the names of bots that the catalogue does not name
//!   (`unknown-bot`'s product tokens) share the rest, least
//!   recently used evicted first; unknown names take at most `max_names`
//!   keys, and past that count as `other`;
//! - a refused request creates no key: only a request that passes (and so
//!   spends) makes keys. It does keep the keys that refused it at the front,
//!   as nginx's limit_req does: a client over its budget that keeps asking is
//!   the most recently used, so other clients' churn cannot evict its key and
//!   hand it a fresh budget.

use crate::budget::{take_some, Budget, BudgetLimits, Claim, Refusal, Window, Windows};

use crate::escape::escaped;
use crate::slots::{self, Links, List, Slot, NIL};

/// Longest key: a kind byte, a length byte, then the address or the name.
pub const KEY_LEN: usize = 48;
/// Longest agent name kept.
pub const NAME_MAX: usize = KEY_LEN - 2;

const KIND_ADDRESS: u8 = 1;
const KIND_AGENT: u8 = 2;
// 3 is the shared budget's key in the store (SHARED_KEY)
/// An account the keys file names: the kind every account had before
/// accounts were kept apart by where they come from, so that a keyed
/// account's count in a store carries on across that upgrade and a sign-in
/// of the same name inherits none of it.
const KIND_KEYED_ACCOUNT: u8 = 4;
/// An account whose name was too long, by its beginning and hash.
const KIND_KEYED_ACCOUNT_HASHED: u8 = 5;
/// The same two for an account an account variable names (a sign-in),
/// apart from a keyed account of the same name.
const KIND_NAMED_ACCOUNT: u8 = 6;
const KIND_NAMED_ACCOUNT_HASHED: u8 = 7;

/// A key: kind, length, bytes.
pub type Key = [u8; KEY_LEN];

/// The table's key for an address budget: of [`crate::budget::counted_address`].
pub fn address_key(addr: [u8; 16]) -> Key {
    let mut k = [0; KEY_LEN];
    k[0] = KIND_ADDRESS;
    k[1] = 16;
    k[2..18].copy_from_slice(&addr);
    k
}

/// The key of an account's quota (a quota zone holds only these): the name
/// as [`crate::quota::account_key_name`] keeps it, a long name's hashed form
/// under a kind of its own (no name kept as it is can spell it), and a name
/// from the keys file under kinds of its own (no account variable's name can
/// spell it).
pub fn account_key(name: &crate::quota::AccountName) -> Key {
    let bytes = name.as_bytes();
    let mut k = [0; KEY_LEN];
    k[0] = match (name.is_keyed(), name.is_hashed()) {
        (false, false) => KIND_NAMED_ACCOUNT,
        (false, true) => KIND_NAMED_ACCOUNT_HASHED,
        (true, false) => KIND_KEYED_ACCOUNT,
        (true, true) => KIND_KEYED_ACCOUNT_HASHED,
    };
    k[1] = bytes.len() as u8;
    k[2..2 + bytes.len()].copy_from_slice(bytes);
    k
}

pub fn agent_key(name: &str) -> Key {
    agent_key_bytes(name.as_bytes())
}

/// [`agent_key`] of a name as bytes (at most [`NAME_MAX`] are kept).
pub fn agent_key_bytes(name: &[u8]) -> Key {
    let b = &name[..name.len().min(NAME_MAX)];
    let mut k = [0; KEY_LEN];
    k[0] = KIND_AGENT;
    k[1] = b.len() as u8;
    k[2..2 + b.len()].copy_from_slice(b);
    k
}

/// The claims an agent that can be verified has a fixed slot for, in slot order.
const CLAIMS: [Claim; 3] = [Claim::Agent, Claim::Unverified, Claim::Spoofed];

/// The fixed slots of a catalogue's agents, in slot order: one for each
/// agent a User-Agent can name (its own name) or a signature can, and for
/// one that can be verified (published ranges, hostname suffixes or a
/// signature's key directory) two more, for a claim found unverified and
/// one found spoofed, which count apart so that impostors cannot spend the
/// real agent's budget; then one for requests with no User-Agent. An agent
/// nothing names (a robots.txt token) or that counts by its product token
/// (`unknown-bot`) has none. (A signed agent that had none was counted by
/// its name, the key of any unknown bot whose product token spells it.)
#[derive(Debug, Clone, Default)]
pub struct Pinned {
    /// Each agent's first slot, or None.
    first: Vec<Option<u32>>,
    /// Each agent's number of slots: 1, or 3 with the claims.
    count: Vec<u8>,
    keys: Vec<Key>,
    /// The agents only a signature names (no User-Agent pattern), by name in
    /// lower case: a bot whose product token spells one counts as an
    /// unverified claim of it, not under its name, whose key is its slot's
    /// (budget sync sums the counts of one key across nodes).
    signed_only: Vec<(String, usize)>,
}

impl Pinned {
    /// The slots of agents given as (name, named by a User-Agent, can be verified), in catalogue order.
    pub fn new<'a>(agents: impl IntoIterator<Item = (&'a str, bool, bool)>) -> Pinned {
        let mut p = Pinned::default();
        let mut buf = [0u8; NAME_MAX];
        for (name, named, verifiable) in agents {
            if !named {
                p.first.push(None);
                p.count.push(0);
                continue;
            }
            p.first.push(Some(p.keys.len() as u32));
            let claims = if verifiable { &CLAIMS[..] } else { &CLAIMS[..1] };
            p.count.push(claims.len() as u8);
            for claim in claims {
                let n = crate::budget::agent_budget_name(name, *claim, &mut buf);
                p.keys.push(agent_key_bytes(&buf[..n]));
            }
        }
        p.keys.push(agent_key(NO_USER_AGENT));
        p
    }

    /// The slots of a catalogue's agents.
    pub fn of(catalogue: &crate::Catalogue) -> Pinned {
        let mut p = Pinned::new(catalogue.agents().iter().map(|a| (a.name.as_str(), a.ua.is_some() || a.signature_agent.is_some(), a.can_be_verified())));
        p.signed_only = catalogue
            .agents()
            .iter()
            .enumerate()
            .filter(|(_, a)| a.ua.is_none() && a.signature_agent.is_some())
            .map(|(i, a)| (a.name.to_ascii_lowercase(), i))
            .collect();
        p
    }

    /// The agent only a signature names whose name a product token spells (any case).
    pub fn signed_only_named(&self, token: &[u8]) -> Option<usize> {
        self.signed_only.iter().find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(token)).map(|(_, i)| *i)
    }

    /// Agent `agent`'s slot for `claim` (its own when it has no slot for that claim).
    pub fn slot(&self, agent: usize, claim: Claim) -> Option<u32> {
        let first = (*self.first.get(agent)?)?;
        let at = CLAIMS.iter().position(|c| *c == claim).unwrap_or(0);
        Some(first + if at < usize::from(self.count[agent]) { at as u32 } else { 0 })
    }

    /// The slot for requests with no User-Agent, after the agents'.
    pub fn no_user_agent(&self) -> u32 {
        (self.keys.len() - 1) as u32
    }

    /// The keys of the slots, in slot order: what [`Table::init`] lays out.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }
}

/// The name requests with no User-Agent are counted under.
pub const NO_USER_AGENT: &str = "(no User-Agent)";

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    key: Key,
    windows: Windows,
    /// Requests this key refused.
    refused: u64,
    /// Its hash chain (or the free list) and the LRU list; unused by fixed slots.
    links: Links,
    used: u16,
    /// An account's tier, as its last request passed (quota zones only).
    tier: u16,
    /// The next entry on the sync's list of entries with counts the store has
    /// not seen ([`END`]), or [`NOT_LISTED`]. Kept when the entry is evicted and
    /// made again, so that an entry is on the list at most once.
    sync_next: u32,
}

impl Entry {
    pub const EMPTY: Entry = Entry { key: [0; KEY_LEN], windows: [Window::ZERO; 2], refused: 0, links: Links::NONE, used: 0, tier: 0, sync_next: NOT_LISTED };
}

/// The end of the sync's list.
const END: u32 = NIL;
/// Not on the sync's list.
const NOT_LISTED: u32 = NIL - 1;

/// One of the sync's queues (see [`SyncHeader`]): its first and last entries.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Queue {
    head: u32,
    tail: u32,
}

impl Queue {
    const EMPTY: Queue = Queue { head: END, tail: END };
}

impl Default for Queue {
    fn default() -> Queue {
        Queue::EMPTY
    }
}

/// The queue of the fixed slots, and the queue of the keys clients make.
const PINNED_QUEUE: usize = 0;
const MADE_QUEUE: usize = 1;

impl Slot for Entry {
    fn links(&self) -> &Links {
        &self.links
    }
    fn links_mut(&mut self) -> &mut Links {
        &mut self.links
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// Keys, most recently used first.
    lru: List,
    free_head: u32,
    /// Keys in the shared part (fixed slots not included).
    pub len: u32,
    /// Unknown agent names in the table.
    pub names: u32,
    pub max_names: u32,
    /// Fixed slots at the start of the entries (the catalogue's agents).
    pub pinned: u32,
    /// Counted requests let through, and refused by each budget ([`Budget`] order).
    pub passed: u64,
    pub refused: [u64; 4],
    pub evictions: u64,
    /// Requests that would have been refused under dry run.
    pub dry_run_refused: u64,
    /// The shared budget's windows: in the header, so it is never evicted and
    /// costs no lookup.
    shared: Windows,
    /// Budget sync's state (all zeros without sync).
    pub sync: SyncHeader,
    /// The module's browse cap on this zone (`crawlward_browse_cap`).
    pub browse: BrowseHeader,
    /// A quota zone's requests passed and refused, per tier (configuration order).
    pub quota: QuotaCounts,
    /// Mixed into every key's hash: random, chosen when the table is laid out,
    /// so that no client can know which addresses or names share a bucket.
    hash_seed: u64,
    /// The newest configuration (its generation, [`Table::next_generation`])
    /// whose processes laid the table out or found it laid out for them (the
    /// master claims nothing, so a reload that fails does not): a process of
    /// an older one, starting late, does not lay it out back for its own
    /// catalogue.
    pub claimed_by: u64,
}

/// A quota zone's counts per tier, for the status endpoint.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct QuotaCounts {
    pub passed: [u64; crate::quota::MAX_TIERS],
    pub refused: [u64; crate::quota::MAX_TIERS],
}

/// Process slots whose places in the browse cap are counted apart: every
/// slot nginx has (`ngx_process_slot` is below `NGX_MAX_PROCESSES`, 1024), so
/// that no two processes share a count. A worker that dies holding places is
/// replaced in its slot, and the new one gives them back; with fewer counts,
/// a new process whose slot shared one with a live worker's (past 128 on a
/// machine of many cores, or old workers finishing their requests after
/// reloads) took that worker's places away from the count, and the cap let
/// in more than its maximum.
pub const BROWSE_SLOTS: usize = 1024;

/// The browse cap's count of requests in flight: this node's (all its
/// workers'), and the other nodes' as last read from the store.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BrowseHeader {
    pub in_flight: u32,
    pub others: u32,
    pub passed: u64,
    pub refused: u64,
    /// This node's name in the store (made when the zone is, kept over reloads).
    pub node: u64,
    /// Of `in_flight`, each process slot's.
    pub by_slot: [u32; BROWSE_SLOTS],
}

impl Default for BrowseHeader {
    fn default() -> Self {
        BrowseHeader { in_flight: 0, others: 0, passed: 0, refused: 0, node: 0, by_slot: [0; BROWSE_SLOTS] }
    }
}

/// Whether the zone is synced through a store, and how it stands (kept in
/// the header as its number).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SyncState {
    /// No sync: this node's counts alone, the budgets as written.
    #[default]
    Off = 0,
    /// The store answers: the cluster's counts, the budgets as written.
    Synced = 1,
    /// The store does not answer (or has not yet): this node's counts alone,
    /// every budget divided by the number of nodes.
    Fallback = 2,
}

impl SyncState {
    fn of(n: u32) -> SyncState {
        match n {
            1 => SyncState::Synced,
            2 => SyncState::Fallback,
            _ => SyncState::Off,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Off => "off",
            SyncState::Synced => "synced",
            SyncState::Fallback => "fallback",
        }
    }
}

/// Budget sync's part of the header: the state every worker decides by, the
/// list of entries whose counts the store has not seen, which worker of the
/// node owns the sync, and counters for the status.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SyncHeader {
    /// A [`SyncState`].
    state: u32,
    /// The node count the budgets are divided by in fallback.
    pub nodes: u32,
    /// The sync's two queues of entries whose counts the store has not seen,
    /// first in, first out, each as its first and last entry (END when
    /// empty): the fixed slots (catalogue agents, a bounded number), sent
    /// before the keys that clients make (addresses, self-declared names).
    /// A flood of new keys then delays no agent's counts, and delays each
    /// of its own keys by at most the queue's length over `MAX_CHANGES`
    /// round trips, never for as long as the flood lasts.
    queues: [Queue; 2],
    /// Whether the shared budget's windows have counts the store has not seen.
    shared_listed: u32,
    /// The worker (pid) that syncs the zone for this node, and until when its
    /// claim holds (nginx's clock, ms) unless it renews it.
    pub owner: u64,
    pub lease_until: u64,
    /// The configuration's generation (one more on each reload): a worker of an
    /// older one gives the sync up to the new workers.
    pub generation: u64,
    /// Round trips to the store that completed, commands sent, store failures,
    /// and times the zone went into fallback.
    pub batches: u64,
    pub commands: u64,
    pub failures: u64,
    pub fallbacks: u64,
    /// When the state last changed (wall clock, ms since the epoch).
    pub since_ms: u64,
    /// Configurations the zone has had (its init counts them).
    configs: u64,
}

impl Header {
    pub fn empty(max_names: u32) -> Header {
        Header {
            lru: List::EMPTY,
            free_head: NIL,
            len: 0,
            names: 0,
            max_names,
            pinned: 0,
            passed: 0,
            refused: [0; 4],
            evictions: 0,
            dry_run_refused: 0,
            shared: [Window::ZERO; 2],
            sync: SyncHeader { queues: [Queue::EMPTY; 2], ..SyncHeader::default() },
            browse: BrowseHeader::default(),
            quota: QuotaCounts::default(),
            hash_seed: 0,
            claimed_by: 0,
        }
    }
}

/// Whether a table of `entries` entries has room for `pinned` fixed slots
/// and the keys clients make beside them (what [`Table::init`] asks).
pub fn fits(entries: usize, pinned: usize) -> bool {
    entries >= pinned + 16 && entries < NIL as usize
}

impl Header {
    /// After the table is laid out again in place (a reload with another
    /// catalogue, the same zone), what must outlive its counts, from the
    /// header it replaced: the browse cap's places in flight and the node's
    /// name in the store, and budget sync's lineage of configurations and its
    /// current owner. The previous
    /// cycle's workers still run on this table until they exit, with the
    /// generation they were given: with the lineage started over, one of them
    /// could claim the sync under its higher generation, and no new worker's
    /// would ever be high enough to take it back.
    pub fn carry_lineage(&mut self, was: &Header) {
        // the browse cap's count is the same whatever the catalogue: the requests in flight
        // keep their places, and give them back into this table
        self.browse = was.browse;
        self.sync.configs = was.sync.configs;
        self.sync.generation = was.sync.generation;
        self.sync.owner = was.sync.owner;
        self.sync.lease_until = was.sync.lease_until;
    }
}

/// The fewest bytes [`layout`] finds room in for `pinned` fixed slots.
pub fn min_bytes(pinned: usize) -> usize {
    std::mem::size_of::<Header>() + (pinned + 16) * (std::mem::size_of::<Entry>() + 4)
}

/// How many buckets and entries fit in `bytes` after the header, with room
/// for `pinned` fixed slots and at least 16 shared keys.
pub fn layout(bytes: usize, pinned: usize) -> Option<(usize, usize)> {
    slots::layout(bytes, std::mem::size_of::<Header>(), std::mem::size_of::<Entry>(), pinned + 16)
}

/// Which agent key a request counts under.
#[derive(Debug, Clone, Copy)]
pub enum AgentRef<'a> {
    /// A fixed slot (see [`Pinned`]).
    Pinned(u32),
    /// A name the catalogue does not know (a self-declared bot's product token).
    Name(&'a [u8]),
}

/// Which budgets a request is checked and spent against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A verified crawler: its agent's slot only, with the `verified` limits.
    Verified,
    /// Any other crawler: address, agent and the shared ceiling.
    Crawler,
    /// A spoofed claim: its address only (refusals are still counted under
    /// its agent's slot, for the status).
    AddressOnly,
}

/// How a counted request's claim stands, and so which slot and budgets it
/// goes to: a verified crawler, its agent's verified budget only; a spoofed
/// claim, its address only; a claim that could be verified (the agent has
/// ranges or hostname suffixes) but was not, `<agent> (unverified)`; any
/// other, the agent's own slot.
pub fn claim_of(verdict: crate::Verdict, verifiable: bool) -> (Claim, Scope) {
    match verdict {
        crate::Verdict::Verified => (Claim::Agent, Scope::Verified),
        crate::Verdict::Spoofed => (Claim::Spoofed, Scope::AddressOnly),
        crate::Verdict::Unverified if verifiable => (Claim::Unverified, Scope::Crawler),
        _ => (Claim::Agent, Scope::Crawler),
    }
}

/// What one request is counted as.
#[derive(Debug, Clone)]
pub struct Counted<'a> {
    pub address: [u8; 16],
    pub agent: AgentRef<'a>,
    pub deep: bool,
    pub scope: Scope,
}

/// Whether a key takes one of the `max_names` agent names (`other` does not).
fn counts_as_name(key: &Key) -> bool {
    key[0] == KIND_AGENT && key != &agent_key("other")
}

pub struct Table<'a> {
    pub header: &'a mut Header,
    buckets: &'a mut [u32],
    entries: &'a mut [Entry],
}

fn hash(seed: u64, key: &Key) -> u64 {
    // eight bytes at a time over the key's kind, length and bytes: the rest is zero
    let used = (2 + key[1] as usize).div_ceil(8).min(KEY_LEN / 8) * 8;
    key[..used].chunks_exact(8).fold(0x9e37_79b9_7f4a_7c15u64 ^ seed, |h, c| {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29)
    })
}

impl<'a> Table<'a> {
    /// Lay out an empty table: the fixed slots `pinned` first, the rest free;
    /// `hash_seed` (random) mixed into the hash of every key made.
    pub fn init(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry], max_names: u32, pinned: &[Key], hash_seed: u64) -> Table<'a> {
        assert!(buckets.len().is_power_of_two() && fits(entries.len(), pinned.len()));
        *header = Header { hash_seed, ..Header::empty(max_names) };
        buckets.fill(NIL);
        entries.fill(Entry::EMPTY);
        for (e, k) in entries.iter_mut().zip(pinned) {
            *e = Entry { key: *k, used: 1, ..Entry::EMPTY };
        }
        slots::chain_free(&mut entries[pinned.len()..]);
        let base = pinned.len() as u32;
        for e in &mut entries[pinned.len()..] {
            if e.links.hash_next != NIL {
                e.links.hash_next += base;
            }
        }
        header.pinned = base;
        header.free_head = base;
        Table { header, buckets, entries }
    }

    pub fn attach(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry]) -> Table<'a> {
        Table { header, buckets, entries }
    }

    /// Every slot: fixed and shared.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    fn bucket(&self, key: &Key) -> usize {
        (hash(self.header.hash_seed, key) as usize) & (self.buckets.len() - 1)
    }

    fn find(&self, key: &Key) -> Option<u32> {
        slots::find(self.entries, self.buckets[self.bucket(key)], |e| e.used != 0 && e.key == *key)
    }

    fn remove(&mut self, i: u32) {
        let key = self.entries[i as usize].key;
        let b = self.bucket(&key);
        slots::unchain(self.entries, &mut self.buckets[b], i);
        slots::unlink(self.entries, &mut self.header.lru, i);
        if counts_as_name(&key) {
            self.header.names = self.header.names.saturating_sub(1);
        }
        let sync_next = self.entries[i as usize].sync_next;
        self.entries[i as usize] = Entry { links: Links { hash_next: self.header.free_head, ..Links::NONE }, sync_next, ..Entry::EMPTY };
        self.header.free_head = i;
        self.header.len -= 1;
    }

    /// The key an unknown agent name counts under: its own if it is in the
    /// table or there is room for another name, else `other`.
    fn name_key(&self, name: &[u8]) -> (Key, Option<u32>) {
        let key = agent_key_bytes(name);
        match self.find(&key) {
            Some(i) => (key, Some(i)),
            None if counts_as_name(&key) && self.header.names >= self.header.max_names => {
                let other = agent_key("other");
                (other, self.find(&other))
            }
            None => (key, None),
        }
    }

    /// The entry of `key`, made (evicting the least recently used key if the
    /// table is full) if it is not there, and moved to the front.
    fn entry(&mut self, key: &Key) -> u32 {
        match self.find(key) {
            Some(i) => {
                self.touch(i);
                i
            }
            None => self.insert(key),
        }
    }

    /// Move entry `i` to the front, unless it is among the two most recent
    /// already: a request touches two keys, which would otherwise swap places
    /// every time.
    fn touch(&mut self, i: u32) {
        let head = self.header.lru.head;
        if head != i && self.entries[head as usize].links.next != i {
            slots::unlink(self.entries, &mut self.header.lru, i);
            slots::push_front(self.entries, &mut self.header.lru, i);
        }
    }

    /// Make an entry for `key`, which is not in the table, at the front,
    /// evicting the least recently used key if the table is full.
    fn insert(&mut self, key: &Key) -> u32 {
        if self.header.free_head == NIL {
            let tail = self.header.lru.tail;
            self.remove(tail);
            self.header.evictions += 1;
        }
        let i = self.header.free_head;
        self.header.free_head = self.entries[i as usize].links.hash_next;
        let b = self.bucket(key);
        let sync_next = self.entries[i as usize].sync_next;
        self.entries[i as usize] = Entry { key: *key, links: Links { hash_next: self.buckets[b], ..Links::NONE }, used: 1, sync_next, ..Entry::EMPTY };
        self.buckets[b] = i;
        slots::push_front(self.entries, &mut self.header.lru, i);
        self.header.len += 1;
        if counts_as_name(key) {
            self.header.names += 1;
        }
        i
    }

    /// A fixed slot's index, if the table has it.
    fn pinned(&self, slot: u32) -> Option<u32> {
        (slot < self.header.pinned).then_some(slot)
    }

    /// Count one request in its budgets, or refuse it spending nothing and
    /// creating no key. Under `dry_run` a refusal is counted only as
    /// `dry_run_refused`: the caller lets the request through, and it spends
    /// nothing, as it would not had it been refused. A verified crawler with
    /// no `verified` limits is not counted at all (the caller need not ask).
    pub fn take(&mut self, c: &Counted, now: u64, limits: &BudgetLimits, shrink: u32, dry_run: bool) -> Result<(), Refusal> {
        if c.scope == Scope::Verified && limits.verified.is_none() {
            return Ok(());
        }
        let address = address_key(c.address);
        let address_at = if c.scope == Scope::Verified { None } else { self.find(&address) };
        let (name_key, agent_at) = match c.agent {
            AgentRef::Pinned(slot) => (None, self.pinned(slot)),
            AgentRef::Name(name) => {
                let (key, at) = self.name_key(name);
                (Some(key), at)
            }
        };
        let windows_of = |at: Option<u32>| at.map_or([Window::ZERO; 2], |i| self.entries[i as usize].windows);
        let mut w = [windows_of(address_at), windows_of(agent_at), self.header.shared];
        // synced: the cluster's counts against the budgets as written; in fallback:
        // this node's alone against its share of them
        let (cluster, shrink) = match SyncState::of(self.header.sync.state) {
            SyncState::Off => (false, shrink),
            SyncState::Synced => (true, shrink),
            SyncState::Fallback => (false, shrink.saturating_mul(self.header.sync.nodes.max(1))),
        };
        let result = {
            let [a, g, s] = &mut w;
            match c.scope {
                Scope::Verified => take_some(&mut [(Budget::Verified, g)], c.deep, now, limits, shrink, cluster),
                Scope::Crawler => take_some(&mut [(Budget::Address, a), (Budget::Agent, g), (Budget::Shared, s)], c.deep, now, limits, shrink, cluster),
                Scope::AddressOnly => take_some(&mut [(Budget::Address, a)], c.deep, now, limits, shrink, cluster),
            }
        };
        match result {
            Ok(()) => {
                // only now are keys made or moved: the address first, then the agent's
                // name, found again only if making the address's key evicted a key
                let evictions = self.header.evictions;
                if c.scope != Scope::Verified {
                    let i = match address_at {
                        Some(i) => {
                            self.touch(i);
                            i
                        }
                        None => self.insert(&address),
                    };
                    self.entries[i as usize].windows = w[0];
                    self.list(i);
                }
                if c.scope != Scope::AddressOnly {
                    let at = match (name_key, agent_at) {
                        (None, at) => at,
                        (Some(_), Some(i)) if self.header.evictions == evictions => {
                            self.touch(i);
                            Some(i)
                        }
                        (Some(key), _) => Some(self.entry(&key)),
                    };
                    if let Some(i) = at {
                        self.entries[i as usize].windows = w[1];
                        self.list(i);
                    }
                }
                if c.scope == Scope::Crawler {
                    self.header.shared = w[2];
                    self.header.sync.shared_listed = 1;
                }
                self.header.passed += 1;
            }
            Err(_) if dry_run => self.header.dry_run_refused += 1,
            Err(r) => {
                // the keys found keep their place at the front (a fixed slot is never evicted)
                if let Some(i) = address_at {
                    self.touch(i);
                }
                if let (Some(_), Some(i)) = (name_key, agent_at) {
                    self.touch(i);
                }
                self.header.refused[r.budget.index()] += 1;
                if let Some(i) = agent_at {
                    self.entries[i as usize].refused += 1;
                }
            }
        }
        result
    }

    /// Count one request of `account` (tier `tier`, an index below
    /// [`crate::quota::MAX_TIERS`]) against its quota, or refuse it spending
    /// nothing; say where the account stands either way. Only accounts the
    /// server checked come here, so only they make keys: a refused request
    /// makes none. Synced, the cluster's counts; in fallback, this node's
    /// against its share of the limits. Under `dry_run` a refusal spends
    /// nothing and is not counted as one.
    pub fn take_account(
        &mut self,
        account: &crate::quota::AccountName,
        tier: usize,
        limits: &crate::quota::Tier,
        now: u64,
        dry_run: bool,
    ) -> crate::quota::Standing {
        let key = account_key(account);
        let at = self.find(&key);
        let mut w = at.map_or([Window::ZERO; 2], |i| self.entries[i as usize].windows);
        let (cluster, divide) = match SyncState::of(self.header.sync.state) {
            SyncState::Off => (false, 1),
            SyncState::Synced => (true, 1),
            SyncState::Fallback => (false, self.header.sync.nodes.max(1)),
        };
        let standing = crate::quota::take(&mut w, now, limits, cluster, divide);
        let tier = tier.min(crate::quota::MAX_TIERS - 1);
        match standing.refused {
            None => {
                let i = match at {
                    Some(i) => {
                        self.touch(i);
                        i
                    }
                    None => self.insert(&key),
                };
                self.entries[i as usize].windows = w;
                self.entries[i as usize].tier = tier as u16;
                self.list(i);
                self.header.quota.passed[tier] += 1;
            }
            Some(_) if dry_run => self.header.dry_run_refused += 1,
            Some(_) => {
                if let Some(i) = at {
                    self.touch(i);
                    self.entries[i as usize].refused += 1;
                }
                self.header.quota.refused[tier] += 1;
            }
        }
        standing
    }

    /// The accounts that used most over the last hour, most first, at most
    /// `n`. It runs under the zone's lock: only the `n` chosen get their
    /// names copied.
    pub fn top_accounts(&self, n: usize, now: u64) -> Vec<AccountUse> {
        let cluster = SyncState::of(self.header.sync.state) == SyncState::Synced;
        let mut used: Vec<(u64, u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.used != 0 && matches!(e.key[0], KIND_NAMED_ACCOUNT | KIND_NAMED_ACCOUNT_HASHED | KIND_KEYED_ACCOUNT | KIND_KEYED_ACCOUNT_HASHED))
            .map(|(i, e)| {
                let (hour, day) = crate::quota::used(&e.windows, now, cluster);
                (hour, day, i as u32)
            })
            .filter(|(hour, day, _)| *hour > 0 || *day > 0)
            .collect();
        let by_use = |a: &(u64, u64, u32), b: &(u64, u64, u32)| b.0.cmp(&a.0).then(b.1.cmp(&a.1));
        if used.len() > n {
            used.select_nth_unstable_by(n, by_use);
            used.truncate(n);
        }
        let mut v: Vec<AccountUse> = used
            .into_iter()
            .map(|(last_hour, last_day, i)| {
                let e = &self.entries[i as usize];
                // escaped as the access log writes it, so that two names stay two and read as analyze shows them
                let account = escaped(&e.key[2..2 + (e.key[1] as usize).min(NAME_MAX)]).to_string();
                let (hashed, keyed) = (
                    matches!(e.key[0], KIND_NAMED_ACCOUNT_HASHED | KIND_KEYED_ACCOUNT_HASHED),
                    matches!(e.key[0], KIND_KEYED_ACCOUNT | KIND_KEYED_ACCOUNT_HASHED),
                );
                AccountUse { account, hashed, keyed, tier: e.tier as usize, last_hour, last_day, refused: e.refused }
            })
            .collect();
        v.sort_by(|a, b| b.last_hour.cmp(&a.last_hour).then(b.last_day.cmp(&a.last_day)).then(a.account.cmp(&b.account)));
        v
    }

    /// Take a place in a browse cap of `max` requests in flight, or refuse
    /// (the caller answers 503, no queue). Synced: the cluster's requests in
    /// flight (this node's and the others' last known); in fallback: this
    /// node's against its share of `max`; without sync: this node's.
    pub fn take_browse(&mut self, max: u32, slot: usize) -> bool {
        let b = &mut self.header.browse;
        let (limit, others) = match SyncState::of(self.header.sync.state) {
            SyncState::Off => (max, 0),
            SyncState::Synced => (max, b.others),
            SyncState::Fallback => ((max / self.header.sync.nodes.max(1)).max(1), 0),
        };
        if b.in_flight.saturating_add(others) < limit {
            b.in_flight += 1;
            b.by_slot[slot % BROWSE_SLOTS] += 1;
            b.passed += 1;
            true
        } else {
            b.refused += 1;
            false
        }
    }

    /// Give a place in the browse cap back (the request, of the process in
    /// `slot`, ended).
    pub fn release_browse(&mut self, slot: usize) {
        let b = &mut self.header.browse;
        let mine = &mut b.by_slot[slot % BROWSE_SLOTS];
        if *mine > 0 {
            *mine -= 1;
            b.in_flight = b.in_flight.saturating_sub(1);
        }
    }

    /// Give back every place the process in `slot` held: a new worker in that
    /// slot calls it as it starts, for the places of one that died there
    /// (a worker that exits has given its places back already).
    pub fn forget_browse_slot(&mut self, slot: usize) -> u32 {
        let b = &mut self.header.browse;
        let held = std::mem::take(&mut b.by_slot[slot % BROWSE_SLOTS]);
        b.in_flight = b.in_flight.saturating_sub(held);
        held
    }

    /// Put entry `i`, whose counts changed, at the end of its sync queue (once).
    fn list(&mut self, i: u32) {
        if self.entries[i as usize].sync_next != NOT_LISTED {
            return;
        }
        let q = &mut self.header.sync.queues[if i < self.header.pinned { PINNED_QUEUE } else { MADE_QUEUE }];
        self.entries[i as usize].sync_next = END;
        match q.tail {
            END => q.head = i,
            last => self.entries[last as usize].sync_next = i,
        }
        q.tail = i;
    }

    /// Sync: up to `max` keys whose counts the store has not seen, taken off
    /// the queues in order (the shared budget, then the catalogue agents'
    /// fixed slots, then the keys clients made, each first in, first out),
    /// each window's new requests marked as added to the store: what the
    /// node sends in one round trip. Its size follows what changed since the
    /// last one, never the table's.
    pub fn take_changes(&mut self, max: usize, out: &mut Vec<Change>) {
        if self.header.sync.shared_listed != 0 && out.len() < max {
            self.header.sync.shared_listed = 0;
            changes(Target::Shared, &SHARED_KEY, &mut self.header.shared, out);
        }
        for q in [PINNED_QUEUE, MADE_QUEUE] {
            while out.len() < max && self.header.sync.queues[q].head != END {
                let i = self.header.sync.queues[q].head;
                let e = &mut self.entries[i as usize];
                let next = e.sync_next;
                e.sync_next = NOT_LISTED;
                let queue = &mut self.header.sync.queues[q];
                queue.head = next;
                if next == END {
                    queue.tail = END;
                }
                if e.used != 0 {
                    let key = e.key;
                    changes(Target::Entry(i), &key, &mut e.windows, out);
                }
            }
        }
    }

    /// Sync: what the store answered for `c`: the cluster's count in its fixed
    /// window, and (the window's first change) in the one before. An entry
    /// evicted or made again for another key since is left alone.
    pub fn learn(&mut self, c: &Change, total: i64, prev_total: Option<i64>) {
        let windows = match c.target {
            Target::Shared => &mut self.header.shared,
            Target::Entry(i) => match self.entries.get_mut(i as usize) {
                Some(e) if e.used != 0 && e.key == c.key => &mut e.windows,
                _ => return,
            },
        };
        let w = &mut windows[c.window];
        let send_again = w.learn(c.start, total, c.ours);
        if let Some(p) = prev_total {
            w.learn_prev(c.start, p);
        }
        if send_again {
            match c.target {
                Target::Shared => self.header.sync.shared_listed = 1,
                Target::Entry(i) => self.list(i),
            }
        }
    }

    /// Sync's state, which every request's decision reads.
    pub fn sync_state(&self) -> SyncState {
        SyncState::of(self.header.sync.state)
    }

    /// Turn sync on for `nodes` nodes (the zone's init): in fallback until the
    /// store first answers.
    pub fn start_sync(&mut self, nodes: u32, wall_ms: u64) {
        self.header.sync.nodes = nodes.max(1);
        if self.sync_state() == SyncState::Off {
            self.header.sync.state = SyncState::Fallback as u32;
            self.header.sync.since_ms = wall_ms;
        }
    }

    /// Sync: the store answered (`up`) or failed; whether the state changed
    /// (the caller logs it, once per change).
    pub fn set_sync(&mut self, up: bool, wall_ms: u64) -> bool {
        let to = if up { SyncState::Synced } else { SyncState::Fallback };
        if !up {
            self.header.sync.failures += 1;
        }
        if self.sync_state() == to || self.sync_state() == SyncState::Off {
            return false;
        }
        if !up {
            self.header.sync.fallbacks += 1;
        }
        self.header.sync.state = to as u32;
        self.header.sync.since_ms = wall_ms;
        true
    }

    /// Sync: whether worker `me`, of configuration `generation`, is the one
    /// that syncs the zone for this node at `now`: it was, and its claim holds
    /// or it renews it; or no claim holds (the owner exited or is stuck);
    /// or the owner belongs to an older configuration (a reload: its workers
    /// finish their requests and exit, the new ones take over at once). A
    /// worker of an older configuration never claims it.
    pub fn claim_sync(&mut self, me: u64, generation: u64, now: u64, lease_ms: u64) -> bool {
        let s = &mut self.header.sync;
        if generation < s.generation {
            return false;
        }
        let free = s.owner == 0 || now >= s.lease_until || generation > s.generation;
        if s.owner == me || free {
            s.owner = me;
            s.generation = generation;
            s.lease_until = now + lease_ms;
            return true;
        }
        false
    }

    /// The zone's init, in the master: the new configuration's generation.
    pub fn next_generation(&mut self) -> u64 {
        self.header.sync.configs += 1;
        self.header.sync.configs
    }

    /// Sync: worker `me` stops syncing (it exits): another may claim it at once.
    pub fn release_sync(&mut self, me: u64) {
        if self.header.sync.owner == me {
            self.header.sync.owner = 0;
            self.header.sync.lease_until = 0;
        }
    }

    /// The agent names with the most refusals, most first, at most `n`.
    pub fn top_refused(&self, n: usize) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .entries
            .iter()
            .filter(|e| e.used != 0 && e.key[0] == KIND_AGENT && e.refused > 0)
            .map(|e| (escaped(&e.key[2..2 + (e.key[1] as usize).min(NAME_MAX)]).to_string(), e.refused))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

/// An account's use, for the status endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountUse {
    /// The name as the zone keys it, escaped as the access log escapes it.
    pub account: String,
    /// The name is a long name's short form (its first bytes, `~` and a hash).
    pub hashed: bool,
    /// The keys file named the account (else an account variable did).
    pub keyed: bool,
    /// Its tier, as its last request that passed had it.
    pub tier: usize,
    /// Requests over the last hour and the last day.
    pub last_hour: u64,
    pub last_day: u64,
    pub refused: u64,
}

impl AccountUse {
    /// Where the account came from, as the status JSON's `source` and
    /// Prometheus' `source` label say it: `key` or `variable`.
    pub fn source(&self) -> &'static str {
        crate::quota::source_word(self.keyed)
    }
}

/// The shared budget's key in the store.
pub const SHARED_KEY: Key = {
    let mut k = [0; KEY_LEN];
    k[0] = 3;
    k
};

/// Where a change's counts live in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Shared,
    Entry(u32),
}

/// One window's new requests, for the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub target: Target,
    pub key: Key,
    /// 0: every counted request; 1: deep paths.
    pub window: usize,
    /// The fixed window (ms: its start, a multiple of its length).
    pub start: u64,
    pub len_ms: u64,
    /// Requests to add to the store's count.
    pub delta: u32,
    /// This node's requests in the store's count once they are added.
    pub ours: u32,
    /// The first in this fixed window: read the previous window's count too.
    pub first: bool,
}

impl Change {
    /// The key's bytes that name it in the store (kind, length, then the address or name).
    pub fn key_bytes(&self) -> &[u8] {
        &self.key[..2 + (self.key[1] as usize).min(NAME_MAX)]
    }
}

/// A key's windows' new requests.
fn changes(target: Target, key: &Key, windows: &mut Windows, out: &mut Vec<Change>) {
    for (window, w) in windows.iter_mut().enumerate() {
        let (start, len_ms) = w.fixed();
        let (delta, ours, first) = w.take_unpushed();
        if delta > 0 && len_ms > 0 {
            out.push(Change { target, key: *key, window, start, len_ms, delta, ours, first });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Googlebot and bingbot, both verifiable: three slots each, then no User-Agent's.
    fn two() -> Pinned {
        Pinned::new([("Googlebot", true, true), ("bingbot", true, true)])
    }
    use crate::budget::Limits;

    struct Mem {
        header: Header,
        buckets: Vec<u32>,
        entries: Vec<Entry>,
    }

    /// A table of `n` slots whose catalogue is Googlebot and bingbot.
    fn mem(n: usize, names: u32) -> Mem {
        mem_seeded(n, names, 0x5eed)
    }

    fn mem_seeded(n: usize, names: u32, seed: u64) -> Mem {
        let mut m = Mem { header: Header::empty(names), buckets: vec![0; n.next_power_of_two()], entries: vec![Entry::EMPTY; n] };
        Table::init(&mut m.header, &mut m.buckets, &mut m.entries, names, two().keys(), seed);
        m
    }

    #[test]
    fn the_hash_seed_moves_keys_between_buckets_not_their_counts() {
        let (mut a, mut b) = (mem_seeded(256, 64, 1), mem_seeded(256, 64, 2));
        let (mut ta, mut tb) = (Table::attach(&mut a.header, &mut a.buckets, &mut a.entries), Table::attach(&mut b.header, &mut b.buckets, &mut b.entries));
        // the same keys go to other buckets under another seed
        let keys: Vec<Key> = (0..64).map(|i| address_key(addr(i))).chain((0..64).map(|i| agent_key(&format!("Bot{i}")))).collect();
        let moved = keys.iter().filter(|k| ta.bucket(k) != tb.bucket(k)).count();
        assert!(moved > 100, "{moved} of {} keys in another bucket", keys.len());
        // and every request is answered and counted the same
        let l = limits();
        let names: Vec<Vec<u8>> = (0..40).map(|i| format!("Bot{}", i % 13).into_bytes()).collect();
        for (i, name) in names.iter().cycle().take(2_000).enumerate() {
            let c = crawler(i as u32 % 37, name, i % 5 == 0);
            assert_eq!(ta.take(&c, i as u64 * 50, &l, 1, false), tb.take(&c, i as u64 * 50, &l, 1, false), "request {i}");
        }
        assert_eq!((ta.header.passed, ta.header.refused, ta.header.len), (tb.header.passed, tb.header.refused, tb.header.len));
    }

    /// Accounts: one key per account, whatever key or node it came by; a
    /// refused request makes no key; the top list and the tier counts; and
    /// accounts go to the store like any other key.
    #[test]
    fn accounts_share_one_quota_and_sync() {
        let mut m = Mem { header: Header::empty(16), buckets: vec![0; 64], entries: vec![Entry::EMPTY; 64] };
        let mut t = Table::init(&mut m.header, &mut m.buckets, &mut m.entries, 16, &[], 7);
        let tier = crate::quota::Tier { name: "standard".into(), hourly: 3, daily: None };
        for i in 0..3 {
            assert_eq!(t.take_account(&crate::quota::AccountName::new(b"acme"), 0, &tier, i, false).refused, None);
        }
        assert!(t.take_account(&crate::quota::AccountName::new(b"acme"), 0, &tier, 4, false).refused.is_some());
        assert_eq!(t.take_account(&crate::quota::AccountName::new(b"other"), 1, &tier, 5, false).refused, None);
        assert_eq!(t.header.len, 2);
        assert_eq!((t.header.quota.passed[0], t.header.quota.refused[0], t.header.quota.passed[1]), (3, 1, 1));
        let top: Vec<(String, usize, u64, u64, u64)> =
            t.top_accounts(10, 6).into_iter().map(|a| (a.account, a.tier, a.last_hour, a.last_day, a.refused)).collect();
        assert_eq!(top, vec![("acme".to_string(), 0, 3, 3, 1), ("other".to_string(), 1, 1, 1, 0)]);
        let mut out = Vec::new();
        t.take_changes(100, &mut out);
        assert_eq!(
            out.iter().filter(|c| c.key_bytes() == &account_key(&crate::quota::AccountName::new(b"acme"))[..6]).map(|c| c.delta).collect::<Vec<_>>(),
            [3, 3]
        );
        // a dry run refuses nothing and makes no key
        let tiny = crate::quota::Tier { hourly: 1, ..tier };
        assert_eq!(t.take_account(&crate::quota::AccountName::new(b"new"), 0, &tiny, 7, true).refused, None);
        assert!(t.take_account(&crate::quota::AccountName::new(b"new"), 0, &tiny, 8, true).refused.is_some());
        assert_eq!(t.header.dry_run_refused, 1);
    }

    /// A long name is kept as its beginning and hash; a name that spells
    /// that form exactly (46 bytes, which a self-chosen user name or claim
    /// can be) is still an account of its own.
    #[test]
    fn no_name_takes_a_long_names_quota_by_spelling_its_hashed_form() {
        let mut m = Mem { header: Header::empty(16), buckets: vec![0; 64], entries: vec![Entry::EMPTY; 64] };
        let mut t = Table::init(&mut m.header, &mut m.buckets, &mut m.entries, 16, &[], 7);
        let tier = crate::quota::Tier { name: "standard".into(), hourly: 2, daily: None };
        let victim = crate::quota::AccountName::new(format!("{}@example.org", "v".repeat(60)).as_bytes());
        assert!(victim.is_hashed());
        let spelled = crate::quota::AccountName::new(victim.as_bytes());
        assert_eq!(spelled.as_bytes(), victim.as_bytes());
        assert!(!spelled.is_hashed());
        for now in 0..2 {
            assert_eq!(t.take_account(&spelled, 0, &tier, now, false).refused, None);
        }
        assert!(t.take_account(&spelled, 0, &tier, 3, false).refused.is_some(), "the spelled name spends its own quota");
        assert_eq!(t.take_account(&victim, 0, &tier, 4, false).refused, None, "the long name's is untouched");
        assert_eq!(t.header.len, 2);
    }

    /// A user who signs up under the name a keys file gives a partner (an
    /// account variable: `$remote_user`) spends a quota of its own.
    #[test]
    fn an_account_variable_takes_no_keyed_accounts_quota_by_its_name() {
        let mut m = Mem { header: Header::empty(16), buckets: vec![0; 64], entries: vec![Entry::EMPTY; 64] };
        let mut t = Table::init(&mut m.header, &mut m.buckets, &mut m.entries, 16, &[], 7);
        let tier = crate::quota::Tier { name: "standard".into(), hourly: 2, daily: None };
        let partner = crate::quota::AccountName::keyed(b"partner");
        let signed_up = crate::quota::AccountName::new(b"partner");
        assert_eq!(partner.as_bytes(), signed_up.as_bytes());
        assert_ne!(account_key(&partner), account_key(&signed_up));
        for now in 0..2 {
            assert_eq!(t.take_account(&signed_up, 0, &tier, now, false).refused, None);
        }
        assert!(t.take_account(&signed_up, 0, &tier, 3, false).refused.is_some(), "the namesake spends its own quota");
        assert_eq!(t.take_account(&partner, 0, &tier, 4, false).refused, None, "the keyed account's is untouched");
        let top = t.top_accounts(10, 5);
        assert_eq!(top.iter().map(|a| (a.account.as_str(), a.keyed)).collect::<Vec<_>>(), [("partner", false), ("partner", true)]);
        // a long keyed name: hashed, and still apart
        let long = format!("{}@example.org", "p".repeat(60));
        let (keyed, named) = (crate::quota::AccountName::keyed(long.as_bytes()), crate::quota::AccountName::new(long.as_bytes()));
        assert!(keyed.is_hashed() && named.is_hashed());
        assert_ne!(account_key(&keyed), account_key(&named));
    }

    const GOOGLEBOT: usize = 0;

    fn limits() -> BudgetLimits {
        BudgetLimits {
            address: Limits::parse("60r/m,6r/m").unwrap(),
            agent: Limits::parse("120r/m,12r/m").unwrap(),
            shared: Limits::parse("240r/m,24r/m").unwrap(),
            verified: None,
            verified_until_s: None,
        }
    }

    fn addr(i: u32) -> [u8; 16] {
        crate::budget::counted_address(std::net::IpAddr::from(0x0a00_0000u32.wrapping_add(i).to_be_bytes()))
    }

    /// Sync started (two nodes), then three requests from Abot at address 1.
    fn synced_with_three_from_abot(t: &mut Table<'_>, l: &BudgetLimits) {
        t.start_sync(2, 0);
        for i in 0..3 {
            assert!(t.take(&crawler(1, b"Abot", false), i, l, 1, false).is_ok());
        }
    }

    fn crawler(a: u32, name: &[u8], deep: bool) -> Counted<'_> {
        Counted { address: addr(a), agent: AgentRef::Name(name), deep, scope: Scope::Crawler }
    }

    fn verified(a: u32, deep: bool) -> Counted<'static> {
        Counted { address: addr(a), agent: AgentRef::Pinned(two().slot(GOOGLEBOT, Claim::Agent).unwrap()), deep, scope: Scope::Verified }
    }

    #[test]
    fn claims() {
        use crate::Verdict;
        assert_eq!(claim_of(Verdict::Verified, true), (Claim::Agent, Scope::Verified));
        assert_eq!(claim_of(Verdict::Spoofed, true), (Claim::Spoofed, Scope::AddressOnly));
        assert_eq!(claim_of(Verdict::Unverified, true), (Claim::Unverified, Scope::Crawler), "DNS unresolved: apart from the real agent");
        assert_eq!(claim_of(Verdict::Unverified, false), (Claim::Agent, Scope::Crawler), "no means of verification: the agent's own");
        assert_eq!(claim_of(Verdict::Empty, false), (Claim::Agent, Scope::Crawler));
    }

    #[test]
    fn fixed_slots_are_laid_out_by_name_and_claim() {
        let keys = two().keys().to_vec();
        assert_eq!(keys.len(), 7);
        assert_eq!(keys[two().slot(GOOGLEBOT, Claim::Unverified).unwrap() as usize], agent_key("Googlebot (unverified)"));
        assert_eq!(keys[two().slot(1, Claim::Spoofed).unwrap() as usize], agent_key("bingbot (spoofed)"));
        assert_eq!(keys[two().no_user_agent() as usize], agent_key(NO_USER_AGENT));
        let m = mem(64, 16);
        assert_eq!((m.header.pinned, m.header.len, m.header.free_head), (7, 0, 7));
        assert!(layout(1 << 20, 100_000).is_none(), "a zone too small for the catalogue");
    }

    #[test]
    fn a_spoofer_spends_its_own_address_budget() {
        let mut m = mem(64, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let mut l = limits();
        l.verified = Some(Limits::parse("600r/m,60r/m").unwrap());
        // impostors from 30 addresses: each spends its own address budget only
        for a in 100..130 {
            let spoof =
                Counted { address: addr(a), agent: AgentRef::Pinned(two().slot(GOOGLEBOT, Claim::Spoofed).unwrap()), deep: true, scope: Scope::AddressOnly };
            let got: Vec<bool> = (0..10).map(|i| t.take(&spoof, i, &l, 1, false).is_ok()).collect();
            assert_eq!(got.iter().filter(|x| **x).count(), 6);
        }
        assert!(t.take(&verified(2, true), 30, &l, 1, false).is_ok(), "the real one still gets in");
        assert_eq!(t.header.refused, [120, 0, 0, 0]);
        assert_eq!(t.top_refused(5), vec![("Googlebot (spoofed)".to_string(), 120)]);
    }

    #[test]
    fn verified_crawlers_are_counted_only_against_a_limit_written_for_them() {
        let mut m = mem(256, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        // the attack: 1,000 rotated names from a few addresses fill the shared ceiling
        // (240 a minute) and every unknown-name slot
        let names: Vec<String> = (0..1000).map(|i| format!("Rot{i}bot")).collect();
        // (the agent cap on `other` stops the rotation at 16 + 120: lift it to reach the ceiling)
        let mut flood = limits();
        flood.agent = Limits::parse("100000r/m,100000r/m").unwrap();
        let mut passed = 0;
        for (i, n) in names.iter().enumerate() {
            passed += t.take(&crawler(1 + (i % 8) as u32, n.as_bytes(), false), i as u64, &flood, 1, false).is_ok() as u32;
        }
        assert_eq!(passed, 240, "eight addresses and the rotation spent the shared ceiling");
        assert_eq!(t.header.names, 16, "unknown names took their 16 slots, no more");
        assert!(t.take(&crawler(9, b"Freshbot", false), 2000, &flood, 1, false).is_err(), "the ceiling is spent for anyone unverified");
        // verified Googlebot, not counted by default: every request passes, nothing is stored
        let before = (t.header.len, t.header.passed);
        for i in 0..500 {
            assert!(t.take(&verified(50 + i % 8, true), 3000 + i as u64, &limits(), 1, false).is_ok());
        }
        assert_eq!((t.header.len, t.header.passed), before, "not counted: no key, no count");
        // with a limit written for it (Google's documented deliberate slowdown): its whole budget, then 429
        let mut l = limits();
        l.verified = Some(Limits::parse("600r/m,60r/m").unwrap());
        let got: Vec<bool> = (0..70).map(|i| t.take(&verified(50 + i % 8, true), 4000 + i as u64, &l, 1, false).is_ok()).collect();
        assert_eq!(got.iter().filter(|x| **x).count(), 60, "60 deep requests a minute, across its addresses");
        let r = t.take(&verified(50, true), 4100, &l, 1, false).unwrap_err();
        assert_eq!((r.budget, r.deep), (Budget::Verified, true));
    }

    #[test]
    fn a_refused_request_creates_no_key_and_moves_none() {
        let mut m = mem(64, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let mut l = limits();
        l.shared = Limits::parse("2r/m,2r/m").unwrap();
        assert!(t.take(&crawler(1, b"Abot", false), 0, &l, 1, false).is_ok());
        assert!(t.take(&crawler(2, b"Bbot", false), 1, &l, 1, false).is_ok());
        let (len, names) = (t.header.len, t.header.names);
        for i in 0..100 {
            let name = format!("Rot{i}bot");
            assert!(t.take(&crawler(100 + i, name.as_bytes(), false), 2 + i as u64, &l, 1, false).is_err());
        }
        assert_eq!((t.header.len, t.header.names), (len, names), "100 refused requests stored nothing");
        assert_eq!(t.header.evictions, 0);
    }

    /// Found by bench/soak: a crawler over its address budget, refused on
    /// every request, had its key evicted by other clients' new keys within
    /// seconds (a refusal did not move it), and came back with a fresh
    /// budget: 168 passes in a minute of a 60-a-minute budget.
    #[test]
    fn a_refused_client_keeps_its_key_under_churn() {
        let mut m = mem(7 + 32, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let mut l = limits();
        l.address = Limits::parse("6r/m,6r/m").unwrap();
        l.agent = Limits::parse("100000r/m,100000r/m").unwrap();
        l.shared = Limits::parse("100000r/m,100000r/m").unwrap();
        let mut passed = 0;
        for i in 0..400u32 {
            // the hot client asks every step; 400 new addresses pass meanwhile, 12 times the table
            passed += t.take(&crawler(1, b"Hotbot", false), 1000 + 2 * i as u64, &l, 1, false).is_ok() as u32;
            assert!(t.take(&crawler(1000 + i, b"Otherbot", false), 1001 + 2 * i as u64, &l, 1, false).is_ok());
        }
        assert!(t.header.evictions > 300, "the table turned over");
        assert_eq!(passed, 6, "its budget, 6 a minute, however much the table turned over");
        // a key that stops asking ages out as before
        for i in 0..64u32 {
            assert!(t.take(&crawler(5000 + i, b"Otherbot", false), 2000 + i as u64, &l, 1, false).is_ok());
        }
        assert!(t.find(&address_key(addr(1))).is_none(), "an idle key is evicted");
    }

    #[test]
    fn names_and_the_table_stay_bounded() {
        let mut m = mem(128, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        for i in 0..600 {
            let name = format!("Rotbot{i}");
            let _ = t.take(&crawler(i, name.as_bytes(), false), i as u64, &limits(), 1, false);
            assert!(t.header.names <= 16 && (t.header.len + t.header.pinned) as usize <= t.capacity());
        }
        assert!(t.header.evictions > 0);
        assert!(t.top_refused(100).len() <= 16 + 7);
        // the fixed slots were never evicted: Googlebot's is where it was laid out
        let slot = two().slot(GOOGLEBOT, Claim::Unverified).unwrap() as usize;
        assert_eq!(m.entries[slot].key, agent_key("Googlebot (unverified)"));
    }

    #[test]
    fn one_worker_of_a_node_syncs_and_a_reload_hands_it_over() {
        let mut m = mem(64, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        assert!(t.claim_sync(101, 1, 0, 300), "the first to ask");
        assert!(!t.claim_sync(102, 1, 100, 300), "another worker while the claim holds");
        assert!(t.claim_sync(101, 1, 200, 300), "renewed");
        assert!(t.claim_sync(102, 1, 501, 300), "the owner stopped renewing (exited, or stuck): another takes over");
        assert!(!t.claim_sync(101, 1, 502, 300));
        // a reload: a new worker takes over at once, the old one never again
        assert!(t.claim_sync(201, 2, 503, 300));
        assert!(!t.claim_sync(102, 1, 5000, 300), "an old worker never claims it back");
        t.release_sync(201);
        assert!(t.claim_sync(202, 2, 504, 300), "released on exit: at once");
    }

    /// A reload with another catalogue lays the zone out again in place,
    /// while the previous workers still run on it: the lineage goes on, so
    /// the new workers' generation is the highest, and an old worker that
    /// ticks before it exits cannot take the sync for good.
    /// A bot whose product token spells an agent only a signature names
    /// (ChatGPT-Agent, in the built-in catalogue) is that agent's unverified
    /// claim, in its slot for those: never under the name's key, the key of
    /// the agent's own slot, which budget sync would sum with it.
    #[test]
    fn a_token_that_spells_a_signed_agent_is_its_unverified_claim() {
        let catalogue = crate::Catalogue::build(true, &[], &mut Vec::new());
        let p = Pinned::of(&catalogue);
        let i = p.signed_only_named(b"chatgpt-AGENT").expect("ChatGPT-Agent is named only by signatures");
        assert_eq!(catalogue.agents()[i].name, "ChatGPT-Agent");
        let (own, unverified) = (p.slot(i, Claim::Agent).unwrap(), p.slot(i, Claim::Unverified).unwrap());
        assert_ne!(own, unverified);
        assert_eq!(p.keys()[unverified as usize], agent_key("ChatGPT-Agent (unverified)"));
        assert_eq!(p.signed_only_named(b"GPTBot"), None, "an agent a User-Agent names is claimed by it");
    }

    #[test]
    fn a_table_laid_out_again_keeps_the_sync_lineage() {
        let mut m = mem(64, 16);
        let old = {
            let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
            let mut g = 0;
            for _ in 0..3 {
                g = t.next_generation();
            }
            assert!(t.claim_sync(301, g, 0, 300));
            g
        };
        m.header.browse.node = 0x77;
        let node = m.header.browse.node;
        {
            let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
            assert!(t.take_browse(4, 3) && t.take_browse(4, 3));
        }
        let was = m.header;
        Table::init(&mut m.header, &mut m.buckets, &mut m.entries, 16, two().keys(), 0x5eed);
        m.header.carry_lineage(&was);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let new = t.next_generation();
        assert!(new > old, "the new configuration's generation {new} after {old}");
        assert!(t.claim_sync(401, new, 10, 300), "a new worker takes the sync at once");
        assert!(!t.claim_sync(301, old, 20, 300), "an old worker, still draining, cannot take it");
        t.release_sync(401);
        assert!(!t.claim_sync(301, old, 5000, 300), "nor once the new one released it");
        assert!(t.claim_sync(402, new, 5001, 300));
        assert_eq!(t.header.browse.node, node, "the node keeps its name in the store");
        assert_eq!((t.header.browse.in_flight, t.header.browse.by_slot[3]), (2, 2), "the places in flight are kept");
        t.release_browse(3);
        t.release_browse(3);
        assert_eq!(t.header.browse.in_flight, 0, "and given back into the new table");
    }

    #[test]
    fn an_entry_is_on_the_sync_list_once_and_evicted_ones_send_nothing() {
        let mut m = mem(7 + 16, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let l = limits();
        synced_with_three_from_abot(&mut t, &l);
        let mut c = Vec::new();
        t.take_changes(100, &mut c);
        assert_eq!(c.len(), 3, "shared, address, name: {c:?}");
        assert!(c.iter().all(|c| c.delta == 3 && c.ours == 3 && c.first));
        // a learnt count for a key evicted and made again for another is dropped
        let addr_change = c.iter().find(|c| c.key == address_key(addr(1))).copied().unwrap();
        for i in 0..40 {
            assert!(t.take(&crawler(100 + i, b"Abot", false), 10 + i as u64, &l, 1, false).is_ok());
        }
        assert!(t.find(&address_key(addr(1))).is_none());
        let Target::Entry(at) = addr_change.target else { panic!() };
        let before = t.entries[at as usize].windows;
        t.learn(&addr_change, 1000, None);
        assert_eq!(t.entries[at as usize].windows, before, "its slot, now another key's, learnt nothing");
        let mut c = Vec::new();
        t.take_changes(1000, &mut c);
        assert!(c.len() <= 16 + 1, "no more changes than keys in the table, each once: {}", c.len());
        t.take_changes(1000, &mut c);
        assert!(c.len() <= 16 + 1, "the list is empty now");
    }

    #[test]
    fn a_flood_of_new_keys_delays_no_agent_and_no_older_key_for_long() {
        // room for 200 keys made by clients; 5 changes sent per round trip
        let mut m = mem(7 + 200, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        t.start_sync(2, 0);
        let wide = Limits::parse("1000r/m,100r/m").unwrap();
        let l = BudgetLimits { address: wide, agent: wide, shared: wide, verified: None, verified_until_s: None };
        let bingbot = |a| Counted { address: addr(a), agent: AgentRef::Pinned(two().slot(1, Claim::Agent).unwrap()), deep: false, scope: Scope::Crawler };
        // an early client, then a flood of new addresses, then bingbot's next request
        assert!(t.take(&crawler(1, b"Abot", false), 0, &l, 1, false).is_ok());
        for i in 0..150 {
            assert!(t.take(&crawler(1000 + i, b"Abot", false), 1, &l, 1, false).is_ok());
        }
        assert!(t.take(&bingbot(7), 2, &l, 1, false).is_ok());
        let mut c = Vec::new();
        t.take_changes(5, &mut c);
        let bing_key = two().keys().to_vec()[two().slot(1, Claim::Agent).unwrap() as usize];
        assert_eq!(c[0].target, Target::Shared, "the shared budget first: {c:?}");
        assert_eq!(c[1].key, bing_key, "then the catalogue agent, however many keys came after it: {c:?}");
        assert_eq!(c[2].key, address_key(addr(1)), "then the oldest key clients made: {c:?}");
        assert_eq!(c[3].key, agent_key("Abot"), "first in, first out: {c:?}");
        assert_eq!(c[4].key, address_key(addr(1000)), "first in, first out: {c:?}");
        // each key once, in order: 150 more addresses and bingbot's
        let mut rest = Vec::new();
        loop {
            let mut c = Vec::new();
            t.take_changes(5, &mut c);
            if c.is_empty() {
                break;
            }
            rest.extend(c);
        }
        assert_eq!(rest.len(), 150);
        assert_eq!(rest[148].key, address_key(addr(1149)));
        assert_eq!(rest[149].key, address_key(addr(7)));
    }

    #[test]
    fn a_store_that_lost_a_key_gets_this_nodes_requests_again() {
        let mut m = mem(7 + 16, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let l = limits();
        synced_with_three_from_abot(&mut t, &l);
        let sent = |t: &mut Table<'_>| {
            let mut c = Vec::new();
            t.take_changes(100, &mut c);
            c.into_iter().find(|c| c.key == agent_key("Abot"))
        };
        let name = sent(&mut t).unwrap();
        t.learn(&name, 8, None); // the other node had sent 5
        assert!(sent(&mut t).is_none(), "nothing new");
        // the store restarted: this node's next request finds a count of 1
        assert!(t.take(&crawler(1, b"Abot", false), 3, &l, 1, false).is_ok());
        let name = sent(&mut t).unwrap();
        assert_eq!((name.delta, name.ours), (1, 4));
        t.learn(&name, 1, None);
        let again = sent(&mut t).expect("the key is sent again");
        assert_eq!((again.delta, again.ours), (3, 4), "the 3 requests the store lost");
        t.learn(&again, 4, None);
        assert!(sent(&mut t).is_none(), "once");
    }

    #[test]
    fn making_the_address_key_may_evict_the_name_found_before() {
        // room for 16 shared keys; Oldbot's name ends up the least recently used
        let mut m = mem(7 + 16, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let l = limits();
        assert!(t.take(&crawler(1, b"Oldbot", false), 0, &l, 1, false).is_ok());
        assert!(t.take(&crawler(1, b"Filler", false), 1, &l, 1, false).is_ok());
        assert!(t.take(&crawler(2, b"Filler", false), 2, &l, 1, false).is_ok());
        assert!(t.take(&crawler(1, b"Filler", false), 3, &l, 1, false).is_ok());
        for i in 0..12 {
            assert!(t.take(&crawler(10 + i, b"Filler", false), 4 + i as u64, &l, 1, false).is_ok());
        }
        assert_eq!((t.header.len, t.header.evictions), (16, 0));
        assert_eq!(t.entries[t.header.lru.tail as usize].key, agent_key("Oldbot"), "Oldbot's name is the oldest key");
        // a new address for Oldbot: making its key evicts Oldbot's name, found just before
        assert!(t.take(&crawler(99, b"Oldbot", false), 100, &l, 1, false).is_ok());
        let i = t.find(&agent_key("Oldbot")).expect("Oldbot's name is in the table again");
        let w = t.entries[i as usize].windows[0];
        assert!(
            w.room(100, Limits::parse("2r/m,2r/m").unwrap().general).is_err() && w.room(100, Limits::parse("3r/m,3r/m").unwrap().general).is_ok(),
            "with both its requests"
        );
    }
}
