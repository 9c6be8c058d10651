//! The DNS verdict cache of forward-confirmed reverse DNS, as a
//! fixed-capacity table that can live in nginx shared memory: plain
//! `repr(C)` entries linked by indices (no pointers, so every worker maps it
//! alike), no allocation after creation. The caller provides the memory, the
//! clock (milliseconds) and the lock; this code holds no state of its own.
//!
//! - One entry per client address and what it was checked for (the key of
//!   the claimed agent's hostname suffixes: agents that document the same
//!   suffixes share their verdicts), with the verdict and its expiry:
//!   separate TTLs per verdict are the caller's.
//! - Bounded: when full, the least recently used verdict that is not
//!   `verified` is evicted; a verified one only when nothing else is left,
//!   so cheap spoofed or unresolved verdicts cannot push the crawlers the
//!   site wants out of the cache. A full table never fails a request
//!   (`begin` answers `Full` and the caller applies its unresolved policy).
//! - One lookup in flight per address (and suffixes): `begin` on one already
//!   pending answers `Pending` with the deadline, and the caller waits for
//!   the verdict instead of asking DNS again. A lookup past its deadline
//!   (its owner died, or is late) is taken over by the next `begin`.
//! - Each lookup has a ticket: only its owner's `finish` or `abandon` acts
//!   on it, so a late owner never overwrites the lookup that took over; and
//!   `begin` takes over only a lookup past its deadline or an expired
//!   verdict, never a verdict another worker wrote since the caller's own
//!   `lookup` missed (it answers `Hit` with it).
//! - A cap on lookups in flight at once, and a fair share of it: one
//!   address (an IPv6 /64) holds at most `per_address` of them, one network
//!   (an IPv4 /24, an IPv6 /48) at most `per_network`; past any of these,
//!   `begin` answers `Capped`. Lookups in flight sit on their own list, so
//!   the ones past their deadline (a worker that died with lookups in
//!   flight) are swept before the cap is applied and cannot hold it forever,
//!   and the shares are counted over that short list.

use crate::client_window::mix;
use crate::fcrdns::DnsSettings;
pub use crate::fcrdns::DnsVerdict;
use crate::slots::{self, Links, List, Slot, NIL};
use std::net::IpAddr;

#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free = 0,
    Pending = 4,
    Done = 5,
}

/// One slot. `key` is the address as 16 bytes (IPv4 as IPv4-mapped IPv6).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    key: [u8; 16],
    checked_for: u32,
    state: State,
    verdict: u8,
    _pad: [u8; 2],
    /// Expiry of a verdict, or the deadline of a lookup in flight (ms).
    until: u64,
    /// Its hash chain, and the LRU list (Done) or the list of lookups in flight (Pending).
    links: Links,
    /// The lookup's ticket while Pending.
    ticket: u32,
    /// When the last verified verdict for this address and suffixes expired or
    /// expires (ms; 0: none), kept across the lookups that renew it.
    verified_until: u64,
}

impl Slot for Entry {
    fn links(&self) -> &Links {
        &self.links
    }
    fn links_mut(&mut self) -> &mut Links {
        &mut self.links
    }
}

impl Entry {
    pub const EMPTY: Entry =
        Entry { key: [0; 16], checked_for: 0, state: State::Free, verdict: 0, _pad: [0; 2], until: 0, links: Links::NONE, ticket: 0, verified_until: 0 };

    /// Whether the address was verified until less than `stale_verified` ago.
    fn could_hold_on(&self, now: u64, stale_verified: u64) -> bool {
        self.verified_until != 0 && now < self.verified_until.saturating_add(stale_verified)
    }
}

/// The table's header and counters.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// Verified verdicts, most recently used first.
    lru_verified: List,
    /// The other verdicts (spoofed, unresolved), most recently used first: evicted first.
    lru_other: List,
    /// Lookups in flight, most recent first.
    pending: List,
    free_head: u32,
    pub len: u32,
    pub in_flight: u32,
    next_ticket: u32,
    pub hits: u64,
    pub misses: u64,
    pub started: u64,
    pub evictions: u64,
    pub capped: u64,
    /// Verdicts recorded, by kind ([`DnsVerdict`] order).
    pub verdicts: [u64; 3],
    /// Lookups unresolved or given up, and requests whose lookup could not start (the
    /// caps), for an address whose verified verdict held on (`stale_verified`).
    pub stale: u64,
    /// Random, mixed into every key's bucket, so that no client can choose
    /// addresses whose entries share a chain.
    hash_seed: u64,
}

impl Header {
    pub const EMPTY: Header = Header {
        lru_verified: List::EMPTY,
        lru_other: List::EMPTY,
        pending: List::EMPTY,
        free_head: 0,
        len: 0,
        in_flight: 0,
        next_ticket: 1,
        hits: 0,
        misses: 0,
        started: 0,
        evictions: 0,
        capped: 0,
        verdicts: [0; 3],
        stale: 0,
        hash_seed: 0,
    };
}

/// How many buckets and entries fit in `bytes` after the header: one bucket
/// (4 bytes) per entry, rounded down to a power of two.
pub fn layout(bytes: usize) -> Option<(usize, usize)> {
    slots::layout(bytes, std::mem::size_of::<Header>(), std::mem::size_of::<Entry>(), 1)
}

/// The answer of [`Table::lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// A verdict for this address and suffixes, still valid.
    Hit(DnsVerdict),
    /// A lookup is in flight until this time (ms): wait for it.
    Pending(u64),
    Miss,
}

/// The caps on lookups in flight, for all workers together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub total: u32,
    /// Per address: an IPv4 address, an IPv6 /64.
    pub per_address: u32,
    /// Per network: an IPv4 /24, an IPv6 /48.
    pub per_network: u32,
    /// How long past its expiry a verified verdict holds on while no lookup
    /// renews it ([`DnsSettings::stale_verified`]); eviction keeps it as long.
    pub stale_verified: u64,
}

impl Caps {
    /// The caps a `crawlward_dns_cache` (or the policy's `module.dns`) sets.
    pub fn of(s: &DnsSettings) -> Caps {
        Caps { total: s.max_lookups, per_address: s.lookups_per_address, per_network: s.lookups_per_network, stale_verified: s.stale_verified }
    }
}

/// The answer of [`Table::begin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// A verdict for this address is there after all (another worker wrote it
    /// since the caller's lookup missed): use it.
    Hit(DnsVerdict),
    /// The caller owns the lookup with this ticket and must `finish` or `abandon` it.
    Started(u32),
    /// Another lookup for this address is in flight until this time.
    Pending(u64),
    /// Every slot holds a lookup in flight: nothing to evict.
    Full,
    /// The cap on lookups in flight, or the address's or network's share of it, is reached.
    Capped,
    /// No lookup could start (the caps), and the address was verified until
    /// less than `stale_verified` ago: it holds on.
    Stale,
}

/// A view of the table over memory the caller owns (shared memory in nginx).
pub struct Table<'a> {
    pub header: &'a mut Header,
    /// Bucket heads, a power of two in length.
    buckets: &'a mut [u32],
    entries: &'a mut [Entry],
}

pub fn key_of(ip: IpAddr) -> [u8; 16] {
    match crate::net::canonical_ip(ip) {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// How many leading bytes of a key make its address (an IPv6 /64) and its
/// network (an IPv4 /24, an IPv6 /48), for the shares of the lookup cap.
fn prefixes(key: &[u8; 16]) -> (usize, usize) {
    if key[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        (16, 15)
    } else {
        (8, 6)
    }
}

/// A key's hash, keyed by the table's random `seed`: each half of the
/// address through splitmix64's finalizer in turn. (An unkeyed multiply let
/// the bucket depend only on the address's low bits, and whoever holds an
/// IPv6 network could pick thousands of its addresses for one chain.)
fn hash(seed: u64, key: &[u8; 16], checked_for: u32) -> u64 {
    let a = u64::from_le_bytes(key[..8].try_into().unwrap_or([0; 8]));
    let b = u64::from_le_bytes(key[8..].try_into().unwrap_or([0; 8]));
    mix(mix(seed ^ a) ^ b ^ u64::from(checked_for).rotate_left(32))
}

impl<'a> Table<'a> {
    /// Lay out an empty table over `buckets` (a power of two long) and `entries`.
    /// `hash_seed` (random) is mixed into the hash of every key.
    pub fn init(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry], hash_seed: u64) -> Table<'a> {
        assert!(buckets.len().is_power_of_two() && !entries.is_empty() && entries.len() < NIL as usize);
        *header = Header { hash_seed, ..Header::EMPTY };
        buckets.fill(NIL);
        entries.fill(Entry::EMPTY);
        slots::chain_free(entries);
        Table { header, buckets, entries }
    }

    /// A view of a table laid out before (by `init`, possibly in another process).
    pub fn attach(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry]) -> Table<'a> {
        Table { header, buckets, entries }
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    fn bucket(&self, key: &[u8; 16], checked_for: u32) -> usize {
        (hash(self.header.hash_seed, key, checked_for) as usize) & (self.buckets.len() - 1)
    }

    fn find(&self, key: &[u8; 16], checked_for: u32) -> Option<u32> {
        let head = self.buckets[self.bucket(key, checked_for)];
        slots::find(self.entries, head, |e| e.state != State::Free && &e.key == key && e.checked_for == checked_for)
    }

    /// The list an entry's state and verdict put it on.
    fn list_of<'h>(header: &'h mut Header, e: &Entry) -> &'h mut List {
        match e.state {
            State::Pending => &mut header.pending,
            _ if e.verdict == DnsVerdict::Verified as u8 => &mut header.lru_verified,
            _ => &mut header.lru_other,
        }
    }

    /// Take entry i off its list.
    fn unlink(&mut self, i: u32) {
        slots::unlink(self.entries, Self::list_of(self.header, &self.entries[i as usize]), i);
    }

    /// Put entry i at the front of its list.
    fn push_front(&mut self, i: u32) {
        slots::push_front(self.entries, Self::list_of(self.header, &self.entries[i as usize]), i);
    }

    fn remove(&mut self, i: u32) {
        let (key, checked_for) = (self.entries[i as usize].key, self.entries[i as usize].checked_for);
        let b = self.bucket(&key, checked_for);
        slots::unchain(self.entries, &mut self.buckets[b], i);
        self.unlink(i);
        if self.entries[i as usize].state == State::Pending {
            self.header.in_flight = self.header.in_flight.saturating_sub(1);
        }
        self.entries[i as usize] = Entry { links: Links { hash_next: self.header.free_head, ..Links::NONE }, ..Entry::EMPTY };
        self.header.free_head = i;
        self.header.len -= 1;
    }

    /// What is known about `ip` for `checked_for` at `now`.
    pub fn lookup(&mut self, ip: IpAddr, checked_for: u32, now: u64) -> Lookup {
        let key = key_of(ip);
        let Some(i) = self.find(&key, checked_for) else {
            self.header.misses += 1;
            return Lookup::Miss;
        };
        let e = self.entries[i as usize];
        match e.state {
            State::Pending if now < e.until => Lookup::Pending(e.until),
            State::Done if now < e.until => {
                if Self::list_of(self.header, &e).head != i {
                    self.unlink(i);
                    self.push_front(i);
                }
                self.header.hits += 1;
                Lookup::Hit(DnsVerdict::from_u8(e.verdict))
            }
            _ => {
                // expired, or a lookup past its deadline
                self.header.misses += 1;
                Lookup::Miss
            }
        }
    }

    /// Start a lookup for `ip` (single flight), to finish by `deadline`.
    pub fn begin(&mut self, ip: IpAddr, checked_for: u32, now: u64, deadline: u64, caps: Caps) -> Begin {
        let key = key_of(ip);
        // the verdict or lookup this one replaces, which stays until the lookup starts: a
        // lookup that cannot start forgets nothing of when the address was last verified
        let mut replaced = Entry::EMPTY;
        if let Some(i) = self.find(&key, checked_for) {
            let e = self.entries[i as usize];
            match e.state {
                State::Pending if now < e.until => return Begin::Pending(e.until),
                State::Done if now < e.until => {
                    self.header.hits += 1;
                    return Begin::Hit(DnsVerdict::from_u8(e.verdict));
                }
                _ => replaced = e,
            }
        }
        let holds_on = replaced.could_hold_on(now, caps.stale_verified);
        if self.header.in_flight >= caps.total {
            self.sweep_pending(now);
        }
        if self.header.in_flight >= caps.total || !self.within_shares(&key, now, caps) {
            self.header.capped += 1;
            self.header.stale += u64::from(holds_on);
            return if holds_on { Begin::Stale } else { Begin::Capped };
        }
        // the sweep may have taken it already
        if let Some(i) = self.find(&key, checked_for) {
            self.remove(i);
        }
        // (never for an address whose entry was just removed: it left a slot)
        if self.header.free_head == NIL && !self.evict_one(now, caps.stale_verified) {
            return Begin::Full;
        }
        let i = self.header.free_head;
        self.header.free_head = self.entries[i as usize].links.hash_next;
        let b = self.bucket(&key, checked_for);
        let ticket = self.header.next_ticket;
        self.header.next_ticket = ticket.wrapping_add(1).max(1);
        self.entries[i as usize] = Entry {
            key,
            checked_for,
            state: State::Pending,
            until: deadline,
            links: Links { hash_next: self.buckets[b], ..Links::NONE },
            ticket,
            verified_until: replaced.verified_until,
            ..Entry::EMPTY
        };
        self.buckets[b] = i;
        self.push_front(i);
        self.header.len += 1;
        self.header.in_flight += 1;
        self.header.started += 1;
        Begin::Started(ticket)
    }

    /// Whether `key`'s address and network hold less than their shares of the
    /// lookups in flight (those before their deadline).
    fn within_shares(&self, key: &[u8; 16], now: u64, caps: Caps) -> bool {
        let (address, network) = prefixes(key);
        let (mut same_address, mut same_network) = (0, 0);
        let mut i = self.header.pending.head;
        // at most one step a slot (a loop left by a worker killed mid-change ends here)
        for _ in 0..self.entries.len() {
            let Some(e) = self.entries.get(i as usize) else { break };
            if now < e.until && e.key[..network] == key[..network] {
                same_network += 1;
                same_address += u32::from(e.key[..address] == key[..address]);
            }
            i = e.links.next;
        }
        same_address < caps.per_address && same_network < caps.per_network
    }

    /// Remove the lookups past their deadline: their owners are gone or late,
    /// and will find their ticket no longer there.
    fn sweep_pending(&mut self, now: u64) -> bool {
        let mut swept = false;
        let mut i = self.header.pending.tail;
        for _ in 0..self.entries.len() {
            let Some(&e) = self.entries.get(i as usize) else { break };
            if now >= e.until {
                self.remove(i);
                swept = true;
            }
            i = e.links.prev;
        }
        swept
    }

    /// Make room: an expired verified verdict (past `stale_verified` too: one
    /// that could still hold on while DNS fails is kept like a live one), else
    /// the least recently used other verdict, else a lookup past its deadline,
    /// else (nothing else is left) the least recently used verified verdict.
    fn evict_one(&mut self, now: u64, stale_verified: u64) -> bool {
        let verified = self.header.lru_verified.tail;
        let expired = verified != NIL && {
            let e = &self.entries[verified as usize];
            now >= e.until && !e.could_hold_on(now, stale_verified)
        };
        let other = self.header.lru_other.tail;
        if !expired && other == NIL && self.sweep_pending(now) {
            return true;
        }
        let i = if expired || other == NIL { verified } else { other };
        if i == NIL {
            return false;
        }
        self.remove(i);
        self.header.evictions += 1;
        true
    }

    /// The entry of the lookup with this ticket, if it is still in flight.
    fn owned(&self, ip: IpAddr, checked_for: u32, ticket: u32) -> Option<u32> {
        let i = self.find(&key_of(ip), checked_for)?;
        let e = &self.entries[i as usize];
        (e.state == State::Pending && e.ticket == ticket).then_some(i)
    }

    /// Record the verdict of the lookup `begin` gave `ticket` for, at `now`,
    /// valid for as long as `settings` say, and answer the verdict that holds
    /// and whether it is a stale one: an unresolved lookup of an address
    /// verified until less than `stale_verified` ago leaves it verified, for
    /// as long as an unresolved verdict lasts. Nothing is stored if another
    /// lookup took it over meanwhile, and DNS's verdict is answered.
    pub fn finish(&mut self, ip: IpAddr, checked_for: u32, ticket: u32, verdict: DnsVerdict, now: u64, settings: &DnsSettings) -> (DnsVerdict, bool) {
        self.header.verdicts[verdict as usize - 1] += 1;
        let Some(i) = self.owned(ip, checked_for, ticket) else { return (verdict, false) };
        let e = &self.entries[i as usize];
        let stale = verdict == DnsVerdict::Unresolved && e.could_hold_on(now, settings.stale_verified);
        let held = if stale { DnsVerdict::Verified } else { verdict };
        let until = now.saturating_add(settings.valid(verdict));
        let verified_until = match verdict {
            DnsVerdict::Verified => until,
            // DNS's own answer that the address is not the crawler's ends what it was
            DnsVerdict::Spoofed => 0,
            DnsVerdict::Unresolved => e.verified_until,
        };
        self.settle(i, held, until, verified_until);
        self.header.stale += u64::from(stale);
        (held, stale)
    }

    /// The lookup at `i` done: `verdict` until `until`, the address verified until `verified_until`.
    fn settle(&mut self, i: u32, verdict: DnsVerdict, until: u64, verified_until: u64) {
        self.unlink(i);
        let e = &mut self.entries[i as usize];
        (e.state, e.verdict, e.until, e.ticket, e.verified_until) = (State::Done, verdict as u8, until, 0, verified_until);
        self.header.in_flight = self.header.in_flight.saturating_sub(1);
        self.push_front(i);
    }

    /// Give up the lookup `begin` gave `ticket` for at `now` (it ran out of a
    /// time it did not choose): the address is free for the next request to
    /// look up, and what it was is kept for that one. Answers the verdict that
    /// holds, as [`Table::finish`] does for an unresolved lookup.
    pub fn abandon(&mut self, ip: IpAddr, checked_for: u32, ticket: u32, now: u64, settings: &DnsSettings) -> (DnsVerdict, bool) {
        let Some(i) = self.owned(ip, checked_for, ticket) else { return (DnsVerdict::Unresolved, false) };
        let e = self.entries[i as usize];
        if !e.could_hold_on(now, settings.stale_verified) {
            self.remove(i);
            return (DnsVerdict::Unresolved, false);
        }
        // an expired verified verdict again, which the next lookup renews: expired for every
        // worker's clock (until 0), so that none reads it as a verdict
        self.settle(i, DnsVerdict::Verified, 0, e.verified_until);
        self.header.stale += 1;
        (DnsVerdict::Verified, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Mem {
        header: Header,
        buckets: Vec<u32>,
        entries: Vec<Entry>,
    }

    fn mem(n: usize) -> Mem {
        let mut m = Mem { header: Header::EMPTY, buckets: vec![0; n.next_power_of_two()], entries: vec![Entry::EMPTY; n] };
        Table::init(&mut m.header, &mut m.buckets, &mut m.entries, 0x5eed);
        m
    }

    /// Addresses of one IPv6 /64 that differ only in the interface ID's bits
    /// 16 to 34 all fell in one bucket of an unkeyed multiply (bits that its
    /// rotation moved above those the bucket reads): anyone with such a
    /// network could chain every verdict it left, and make each lookup walk
    /// them under the zone's lock. Keyed, they spread like any addresses.
    #[test]
    fn chosen_addresses_do_not_share_a_chain() {
        let buckets = 1usize << 14;
        for seed in [0, 0x5eed, u64::MAX] {
            let mut load = vec![0u32; buckets];
            for k in 0..2000u64 {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&0x2001_0db8_0001_0002u64.to_be_bytes());
                key[8..].copy_from_slice(&(0x1234u64 | k << 16).to_le_bytes());
                load[(hash(seed, &key, 1) as usize) & (buckets - 1)] += 1;
            }
            let most = load.iter().max().copied().unwrap_or(0);
            assert!(most <= 8, "seed {seed:#x}: {most} of 2,000 addresses in one bucket");
        }
    }

    fn ip(i: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from(0xc000_0200 + i))
    }

    fn caps(total: u32) -> Caps {
        Caps { total, per_address: total, per_network: total, stale_verified: 0 }
    }

    /// `finish` with the verdict valid until `until`, and no stale verdicts.
    fn finish_until(t: &mut Table<'_>, ip: IpAddr, checked_for: u32, ticket: u32, verdict: DnsVerdict, until: u64) {
        let at_once = DnsSettings { valid_verified: 0, valid_spoofed: 0, valid_unresolved: 0, stale_verified: 0, ..DnsSettings::default() };
        t.finish(ip, checked_for, ticket, verdict, until, &at_once);
    }

    fn started(b: Begin) -> u32 {
        match b {
            Begin::Started(t) => t,
            other => panic!("expected Started, got {other:?}"),
        }
    }

    #[test]
    fn single_flight_then_hits_until_expiry() {
        let mut m = mem(8);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        assert_eq!(t.lookup(ip(1), 7, 0), Lookup::Miss);
        let k = started(t.begin(ip(1), 7, 0, 1000, caps(10)));
        assert_eq!(t.lookup(ip(1), 7, 10), Lookup::Pending(1000), "the others wait");
        assert_eq!(t.begin(ip(1), 7, 10, 1010, caps(10)), Begin::Pending(1000), "no second lookup");
        finish_until(&mut t, ip(1), 7, k, DnsVerdict::Verified, 60_000);
        assert_eq!(t.lookup(ip(1), 7, 500), Lookup::Hit(DnsVerdict::Verified));
        assert_eq!(t.lookup("::ffff:192.0.2.1".parse().unwrap(), 7, 500), Lookup::Hit(DnsVerdict::Verified), "IPv4-mapped is the same address");
        assert_eq!(t.lookup(ip(1), 8, 500), Lookup::Miss, "a verdict is for the suffixes it was checked against");
        let k8 = started(t.begin(ip(1), 8, 500, 1500, caps(10)));
        finish_until(&mut t, ip(1), 8, k8, DnsVerdict::Spoofed, 60_000);
        assert_eq!(t.lookup(ip(1), 7, 500), Lookup::Hit(DnsVerdict::Verified), "both kept");
        assert_eq!(t.lookup(ip(1), 8, 500), Lookup::Hit(DnsVerdict::Spoofed));
        assert_eq!(t.lookup(ip(1), 7, 60_000), Lookup::Miss, "expired");
        assert_eq!((t.header.started, t.header.hits, t.header.in_flight), (2, 4, 0));
        assert_eq!(t.header.verdicts, [1, 1, 0]);
    }

    #[test]
    fn a_lookup_past_its_deadline_is_taken_over_and_its_owner_cannot_overwrite() {
        let mut m = mem(4);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let late = started(t.begin(ip(1), 1, 0, 100, caps(10)));
        assert_eq!(t.lookup(ip(1), 1, 100), Lookup::Miss);
        let now = started(t.begin(ip(1), 1, 100, 200, caps(10)));
        assert_ne!(late, now);
        assert_eq!(t.header.in_flight, 1);
        finish_until(&mut t, ip(1), 1, late, DnsVerdict::Unresolved, 5000);
        t.abandon(ip(1), 1, late, 150, &DnsSettings::default());
        assert_eq!(t.lookup(ip(1), 1, 150), Lookup::Pending(200), "the late owner changed nothing");
        finish_until(&mut t, ip(1), 1, now, DnsVerdict::Spoofed, 5000);
        assert_eq!(t.lookup(ip(1), 1, 150), Lookup::Hit(DnsVerdict::Spoofed));
    }

    #[test]
    fn an_abandoned_lookup_frees_the_address() {
        let mut m = mem(4);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let k = started(t.begin(ip(1), 1, 0, 100, caps(10)));
        t.abandon(ip(1), 2, k, 10, &DnsSettings::default());
        assert_eq!(t.lookup(ip(1), 1, 10), Lookup::Pending(100), "only the owner's own lookup is abandoned");
        t.abandon(ip(1), 1, k, 10, &DnsSettings::default());
        assert_eq!((t.header.in_flight, t.header.len), (0, 0));
        started(t.begin(ip(1), 1, 10, 110, caps(10)));
    }

    #[test]
    fn bounded_with_lru_eviction_and_a_cap_on_lookups() {
        let mut m = mem(16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        for i in 0..16 {
            let k = started(t.begin(ip(i), 1, 0, 100, caps(100)));
            finish_until(&mut t, ip(i), 1, k, DnsVerdict::Verified, 1_000_000);
        }
        // touch 0: it becomes the most recently used
        assert_eq!(t.lookup(ip(0), 1, 10), Lookup::Hit(DnsVerdict::Verified));
        // rotate through far more addresses than slots: the table stays at its size
        for i in 16..10_000 {
            let k = started(t.begin(ip(i), 1, 20, 120, caps(100)));
            finish_until(&mut t, ip(i), 1, k, DnsVerdict::Spoofed, 1_000_000);
            assert!(t.header.len as usize <= t.capacity());
            if i % 8 == 0 {
                assert_eq!(t.lookup(ip(0), 1, 30), Lookup::Hit(DnsVerdict::Verified), "kept while used");
            }
        }
        assert_eq!(t.header.evictions, 10_000 - 16);
        assert_eq!(t.lookup(ip(9_999), 1, 30), Lookup::Hit(DnsVerdict::Spoofed));
        // every slot in flight: nothing to evict, and never a panic
        let mut m = mem(4);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        for i in 0..4 {
            started(t.begin(ip(i), 1, 0, 100, caps(100)));
        }
        assert_eq!(t.begin(ip(5), 1, 10, 110, caps(100)), Begin::Full);
        assert_eq!(t.begin(ip(5), 1, 10, 110, caps(4)), Begin::Capped, "the cap on lookups in flight");
        started(t.begin(ip(5), 1, 100, 200, caps(100)));
    }

    #[test]
    fn lookups_left_by_a_dead_worker_do_not_hold_the_cap() {
        let mut m = mem(64);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        // a worker dies with 4 lookups in flight (the cap): nobody finishes them
        for i in 0..4 {
            started(t.begin(ip(i), 1, 0, 100, caps(4)));
        }
        assert_eq!(t.begin(ip(10), 1, 50, 150, caps(4)), Begin::Capped, "before their deadline: capped");
        // past their deadline they are swept, though the table has room and no begin touches them
        started(t.begin(ip(10), 1, 100, 200, caps(4)));
        assert_eq!((t.header.in_flight, t.header.len), (1, 1));
    }

    fn v6(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_address_or_network_holds_only_its_share_of_the_cap() {
        let mut m = mem(64);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let caps = Caps { total: 16, per_address: 2, per_network: 4, stale_verified: 0 };
        // an IPv6 /64 is one address, however many addresses of it claim Googlebot
        started(t.begin(v6("2001:db8:1:1::1"), 1, 0, 100, caps));
        started(t.begin(v6("2001:db8:1:1::2"), 1, 0, 100, caps));
        assert_eq!(t.begin(v6("2001:db8:1:1::3"), 1, 0, 100, caps), Begin::Capped, "a third lookup from one /64");
        // an IPv4 address holds one lookup per suffix set: two, then capped
        started(t.begin(ip(1), 1, 0, 100, caps));
        started(t.begin(ip(1), 2, 0, 100, caps));
        assert_eq!(t.begin(ip(1), 3, 0, 100, caps), Begin::Capped, "a third lookup from one IPv4 address");
        // an IPv4 /24 holds per_network: 192.0.2.1 has 2, two more, then capped
        started(t.begin(ip(2), 1, 0, 100, caps));
        started(t.begin(ip(3), 1, 0, 100, caps));
        assert_eq!(t.begin(ip(4), 1, 0, 100, caps), Begin::Capped, "a fifth lookup from one /24");
        // an IPv6 /48: 2 from 2001:db8:1:1::/64 above, two more /64s of it, then capped
        started(t.begin(v6("2001:db8:1:2::1"), 1, 0, 100, caps));
        started(t.begin(v6("2001:db8:1:3::1"), 1, 0, 100, caps));
        assert_eq!(t.begin(v6("2001:db8:1:4::1"), 1, 0, 100, caps), Begin::Capped, "a fifth lookup from one /48");
        assert_eq!(t.header.capped, 4);
        // everyone else still gets a lookup: 198.51.100.1 and 2001:db8:2::1
        started(t.begin("198.51.100.1".parse().unwrap(), 1, 0, 100, caps));
        started(t.begin(v6("2001:db8:2::1"), 1, 0, 100, caps));
        // a share is freed by a finished lookup, and by a deadline
        assert_eq!(t.begin(ip(4), 1, 99, 199, caps), Begin::Capped);
        started(t.begin(ip(4), 1, 100, 200, caps));
    }

    #[test]
    fn spoofed_and_unresolved_verdicts_do_not_evict_verified_ones() {
        let mut m = mem(16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        for i in 0..4 {
            let k = started(t.begin(ip(i), 1, 0, 100, caps(100)));
            finish_until(&mut t, ip(i), 1, k, DnsVerdict::Verified, 1_000_000);
        }
        // an attacker rotates far more addresses than slots, never touching the verified ones
        for i in 100..10_000 {
            let k = started(t.begin(ip(i), 1, 10, 110, caps(100)));
            finish_until(&mut t, ip(i), 1, k, if i % 2 == 0 { DnsVerdict::Spoofed } else { DnsVerdict::Unresolved }, 1_000_000);
        }
        for i in 0..4 {
            assert_eq!(t.lookup(ip(i), 1, 20), Lookup::Hit(DnsVerdict::Verified), "verified {i} kept");
        }
        assert_eq!(t.lookup(ip(9_999), 1, 20), Lookup::Hit(DnsVerdict::Unresolved));
        // a table of verified verdicts and lookups only: a verified one makes room for a lookup
        let mut m = mem(16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        for i in 0..16 {
            let k = started(t.begin(ip(i), 1, 0, 100, caps(100)));
            finish_until(&mut t, ip(i), 1, k, DnsVerdict::Verified, 1_000_000 + u64::from(i));
        }
        assert_eq!(t.lookup(ip(0), 1, 10), Lookup::Hit(DnsVerdict::Verified));
        started(t.begin(ip(16), 1, 10, 110, caps(100)));
        assert_eq!(t.lookup(ip(1), 1, 10), Lookup::Miss, "the least recently used verified verdict went");
        assert_eq!(t.lookup(ip(0), 1, 10), Lookup::Hit(DnsVerdict::Verified));
        // an expired verified verdict goes before any live one: ip(3)'s, the oldest left
        let k = started(t.begin(ip(20), 1, 10, 110, caps(100)));
        finish_until(&mut t, ip(20), 1, k, DnsVerdict::Spoofed, 2_000_000);
        started(t.begin(ip(21), 1, 1_000_004, 1_000_100, caps(100)));
        assert_eq!(t.lookup(ip(20), 1, 1_000_004), Lookup::Hit(DnsVerdict::Spoofed), "kept: an expired verdict made room");
        assert_eq!(t.lookup(ip(15), 1, 1_000_004), Lookup::Hit(DnsVerdict::Verified));
    }

    #[test]
    fn begin_never_deletes_a_verdict_written_since_the_lookup_missed() {
        let mut m = mem(8);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        // worker A looks, misses (the owner it waited for gave up) ...
        assert_eq!(t.lookup(ip(1), 1, 0), Lookup::Miss);
        // ... worker B looks it up and writes its verdict before A gets the lock again ...
        let b = started(t.begin(ip(1), 1, 0, 100, caps(10)));
        finish_until(&mut t, ip(1), 1, b, DnsVerdict::Verified, 60_000);
        // ... and A's begin answers with B's verdict, which stays
        assert_eq!(t.begin(ip(1), 1, 5, 105, caps(10)), Begin::Hit(DnsVerdict::Verified));
        assert_eq!(t.lookup(ip(1), 1, 10), Lookup::Hit(DnsVerdict::Verified));
        assert_eq!((t.header.started, t.header.in_flight), (1, 0), "no second lookup");
        // an expired verdict is taken over
        started(t.begin(ip(1), 1, 60_000, 60_100, caps(10)));
    }

    /// A DNS outage does not make a crawler it confirmed unverified: an
    /// unresolved lookup of an address verified until less than
    /// `stale_verified` ago leaves it verified, one unresolved TTL at a time;
    /// DNS's own answer that it is not the crawler's ends that at once, and an
    /// address never verified gets nothing from it.
    #[test]
    fn a_verified_verdict_holds_while_dns_fails_for_a_while() {
        let mut m = mem(8);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let s = DnsSettings { valid_verified: 1_000, valid_spoofed: 1_000, valid_unresolved: 100, stale_verified: 5_000, ..DnsSettings::default() };
        let at = |t: &mut Table<'_>, ip: IpAddr, now: u64, dns: DnsVerdict| {
            assert_eq!(t.lookup(ip, 1, now), Lookup::Miss, "at {now}");
            let k = started(t.begin(ip, 1, now, now + 10, caps(10)));
            t.finish(ip, 1, k, dns, now, &s)
        };
        assert_eq!(at(&mut t, ip(1), 0, DnsVerdict::Verified), (DnsVerdict::Verified, false));
        // verified until 1,000; DNS fails from then on
        assert_eq!(at(&mut t, ip(1), 1_500, DnsVerdict::Unresolved), (DnsVerdict::Verified, true));
        assert_eq!(t.lookup(ip(1), 1, 1_550), Lookup::Hit(DnsVerdict::Verified), "the others read it as verified");
        assert_eq!(at(&mut t, ip(1), 1_600, DnsVerdict::Unresolved), (DnsVerdict::Verified, true), "asked again an unresolved TTL later");
        assert_eq!(at(&mut t, ip(1), 5_900, DnsVerdict::Unresolved), (DnsVerdict::Verified, true));
        assert_eq!(at(&mut t, ip(1), 6_000, DnsVerdict::Unresolved), (DnsVerdict::Unresolved, false), "5 s past the verified verdict's expiry");
        assert_eq!(at(&mut t, ip(1), 6_100, DnsVerdict::Verified), (DnsVerdict::Verified, false), "DNS back");
        assert_eq!(t.header.stale, 3);
        // DNS says no (NXDOMAIN, a PTR elsewhere): no longer the crawler's, whatever came before
        assert_eq!(at(&mut t, ip(1), 7_200, DnsVerdict::Spoofed), (DnsVerdict::Spoofed, false));
        assert_eq!(at(&mut t, ip(1), 8_300, DnsVerdict::Unresolved), (DnsVerdict::Unresolved, false));
        // an address never verified: unresolved is unresolved
        assert_eq!(at(&mut t, ip(2), 1_500, DnsVerdict::Unresolved), (DnsVerdict::Unresolved, false));
        // stale_verified off
        let off = DnsSettings { stale_verified: 0, ..s };
        let k = started(t.begin(ip(3), 1, 0, 10, caps(10)));
        t.finish(ip(3), 1, k, DnsVerdict::Verified, 0, &off);
        let k = started(t.begin(ip(3), 1, 1_500, 1_510, caps(10)));
        assert_eq!(t.finish(ip(3), 1, k, DnsVerdict::Unresolved, 1_500, &off), (DnsVerdict::Unresolved, false));
        // a lookup taken over past its deadline keeps what the address was
        let k = started(t.begin(ip(4), 1, 0, 10, caps(10)));
        t.finish(ip(4), 1, k, DnsVerdict::Verified, 0, &s);
        let _lost = started(t.begin(ip(4), 1, 1_500, 1_510, caps(10)));
        let k = started(t.begin(ip(4), 1, 1_600, 1_610, caps(10)));
        assert_eq!(t.finish(ip(4), 1, k, DnsVerdict::Unresolved, 1_600, &s), (DnsVerdict::Verified, true));
        // so does one given up (out of a shortened time): the next lookup finds it
        let k = started(t.begin(ip(4), 1, 1_700, 1_710, caps(10)));
        assert_eq!(t.abandon(ip(4), 1, k, 1_705, &s), (DnsVerdict::Verified, true));
        assert_eq!(t.lookup(ip(4), 1, 1_706), Lookup::Miss, "nothing new is known: asked again");
        let k = started(t.begin(ip(4), 1, 1_706, 1_716, caps(10)));
        assert_eq!(t.finish(ip(4), 1, k, DnsVerdict::Unresolved, 1_716, &s), (DnsVerdict::Verified, true));
        // given up past stale_verified (or with it off): nothing kept that a worker whose
        // clock lags could read as verified
        let k = started(t.begin(ip(4), 1, 9_000, 9_010, caps(10)));
        assert_eq!(t.abandon(ip(4), 1, k, 9_005, &s), (DnsVerdict::Unresolved, false));
        assert_eq!(t.lookup(ip(4), 1, 0), Lookup::Miss);
        // a lookup of its own past its deadline, swept to make room under the cap, keeps it too
        let one = Caps { total: 1, per_address: 1, per_network: 1, stale_verified: 5_000 };
        let k = started(t.begin(ip(5), 1, 10_000, 10_010, one));
        t.finish(ip(5), 1, k, DnsVerdict::Verified, 10_000, &s);
        let _late = started(t.begin(ip(5), 1, 11_500, 11_510, one));
        let k = started(t.begin(ip(5), 1, 11_600, 11_610, one));
        assert_eq!(t.finish(ip(5), 1, k, DnsVerdict::Unresolved, 11_600, &s), (DnsVerdict::Verified, true));
    }

    /// No lookup can start (every one in flight hangs on a silent DNS, or an
    /// attacker's claims hold the caps): a verified address holds on without
    /// one, and forgets nothing for the lookup that can start later.
    #[test]
    fn a_verified_verdict_holds_when_no_lookup_can_start() {
        let mut m = mem(8);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let s = DnsSettings { valid_verified: 1_000, valid_unresolved: 100, stale_verified: 5_000, ..DnsSettings::default() };
        let one = Caps { total: 1, per_address: 1, per_network: 1, stale_verified: 5_000 };
        let k = started(t.begin(ip(1), 1, 0, 10, one));
        t.finish(ip(1), 1, k, DnsVerdict::Verified, 0, &s);
        let _hung = started(t.begin(ip(2), 1, 1_400, 6_400, one));
        assert_eq!(t.begin(ip(1), 1, 1_500, 6_500, one), Begin::Stale, "capped: held on");
        assert_eq!(t.begin(ip(3), 1, 1_500, 6_500, one), Begin::Capped, "an address never verified: capped");
        assert_eq!(t.begin(ip(1), 1, 6_300, 11_300, one), Begin::Capped, "past stale_verified: capped");
        let k = started(t.begin(ip(1), 1, 6_500, 11_500, Caps { stale_verified: 10_000, ..one }));
        assert_eq!(t.finish(ip(1), 1, k, DnsVerdict::Unresolved, 6_600, &DnsSettings { stale_verified: 10_000, ..s }), (DnsVerdict::Verified, true));
        assert_eq!(t.header.stale, 2);
    }

    /// A full zone makes room with other verdicts before a verified one that
    /// could still hold on: a flood of impostors' claims does not make a
    /// crawler forget it was verified.
    #[test]
    fn eviction_keeps_what_could_hold_on() {
        let mut m = mem(2);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let s = DnsSettings { valid_verified: 1_000, valid_spoofed: 100_000, valid_unresolved: 100, stale_verified: 5_000, ..DnsSettings::default() };
        let c = Caps { stale_verified: 5_000, ..caps(10) };
        let k = started(t.begin(ip(1), 1, 0, 10, c));
        t.finish(ip(1), 1, k, DnsVerdict::Verified, 0, &s);
        let k = started(t.begin(ip(2), 1, 0, 10, c));
        t.finish(ip(2), 1, k, DnsVerdict::Spoofed, 0, &s);
        // at 2,000 the verified verdict has expired, and could hold on until 6,000
        let k = started(t.begin(ip(3), 1, 2_000, 2_010, c));
        t.finish(ip(3), 1, k, DnsVerdict::Spoofed, 2_000, &s);
        assert_eq!(t.lookup(ip(2), 1, 2_001), Lookup::Miss, "the impostor's verdict made room");
        let k = started(t.begin(ip(1), 1, 2_100, 2_110, c));
        assert_eq!(t.finish(ip(1), 1, k, DnsVerdict::Unresolved, 2_100, &s), (DnsVerdict::Verified, true), "the crawler's kept");
        // past stale_verified it is an expired verdict like any
        let k = started(t.begin(ip(4), 1, 7_000, 7_010, c));
        t.finish(ip(4), 1, k, DnsVerdict::Spoofed, 7_000, &s);
        assert_eq!(t.lookup(ip(3), 1, 7_001), Lookup::Hit(DnsVerdict::Spoofed), "the expired verified one went first");
    }

    #[test]
    fn layout_fits_the_bytes() {
        assert_eq!(layout(10), None);
        let (b, e) = layout(1 << 20).unwrap();
        assert!(b.is_power_of_two() && b <= e && e < 2 * b);
        assert!(std::mem::size_of::<Header>() + b * 4 + e * std::mem::size_of::<Entry>() <= 1 << 20);
        assert_eq!(std::mem::size_of::<Entry>(), 56, "docs/policy.md: about 17,000 addresses a megabyte");
    }
}
