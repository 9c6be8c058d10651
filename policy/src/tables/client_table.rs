//! The ladder zone's table: one [`ClientWindow`] and one token bucket per
//! client key, as fixed-size `repr(C)` entries linked by indices (see
//! `slots`), so that it can live in nginx shared memory. The caller provides
//! the memory, the clock and the lock.
//!
//! The table is bounded: when it is full, a new client takes the place of
//! the least recently seen one, and is never refused. Verified crawlers and
//! signed-in requests are not tracked at all, so no client can push them
//! out. Every request moves its client's entry to the front, refused or
//! not: a client that keeps asking keeps its window, and one that pauses
//! longer than the table takes to fill with new clients comes back with a
//! fresh one (at the rung its new requests earn). Clients who make new keys
//! to that end (a new Accept-Language a request) still share their
//! network's backstop bucket: each new client's entry costs one of its
//! tokens, and none is made while it is empty.

use crate::client_window::{mix, ClientWindow};
use crate::ladder::Bucket;
use crate::slots::{self, Links, List, Slot, NIL};

/// The ladder's rungs L0 to L6, then the routed clients: the status's rows.
pub const ROWS: usize = 8;
/// The row of the routed clients (authentication-shaped, off the ladder).
pub const ROUTED: usize = 7;
/// The row of an entry that is no client (a network's bucket): counted on no row.
const NO_ROW: u16 = u16::MAX;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The client key (see `ladder::client_key`); 0 is a free entry.
    pub key: u64,
    pub window: ClientWindow,
    pub bucket: Bucket,
    links: Links,
    /// The row the client was last placed on ([`ROWS`]), for the status's counts of clients.
    pub row: u16,
    /// Whether its last request was refused: a cookie's first request then does not
    /// take the entry over (see [`Table::client_from`]).
    pub refused: u16,
}

impl Entry {
    pub const EMPTY: Entry = Entry { key: 0, window: ClientWindow::new(0), bucket: Bucket { level: 0.0, at_ms: 0 }, links: Links::NONE, row: 0, refused: 0 };
}

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
    /// Clients, most recently seen first.
    lru: List,
    free_head: u32,
    pub len: u32,
    /// Clients made, and made in the place of another.
    pub made: u64,
    pub evictions: u64,
    /// Per row (L0 to L6, routed): clients placed there now, requests placed
    /// there, and requests refused there.
    pub clients: [u32; ROWS],
    pub requests: [u64; ROWS],
    pub refused: [u64; ROWS],
    /// Requests never placed on the ladder: verified crawlers and signed-in requests.
    pub untracked: u64,
    /// Mixed into every key: random, chosen when the table is laid out.
    pub hash_seed: u64,
}

impl Header {
    pub const EMPTY: Header = Header {
        lru: List::EMPTY,
        free_head: NIL,
        len: 0,
        made: 0,
        evictions: 0,
        clients: [0; ROWS],
        requests: [0; ROWS],
        refused: [0; ROWS],
        untracked: 0,
        hash_seed: 0,
    };
}

/// The bytes one client costs: its entry and its share of the index.
pub const BYTES_PER_CLIENT: usize = std::mem::size_of::<Entry>() + 4;

/// How many buckets and entries fit in `bytes` after the header (at least 16 entries).
pub fn layout(bytes: usize) -> Option<(usize, usize)> {
    slots::layout(bytes, std::mem::size_of::<Header>(), std::mem::size_of::<Entry>(), 16)
}

pub struct Table<'a> {
    pub header: &'a mut Header,
    buckets: &'a mut [u32],
    entries: &'a mut [Entry],
}

impl<'a> Table<'a> {
    /// Lay out an empty table, with `hash_seed` (random) mixed into every key.
    pub fn init(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry], hash_seed: u64) -> Table<'a> {
        assert!(buckets.len().is_power_of_two() && entries.len() >= 16 && entries.len() < NIL as usize);
        *header = Header { hash_seed, free_head: 0, ..Header::EMPTY };
        buckets.fill(NIL);
        entries.fill(Entry::EMPTY);
        slots::chain_free(entries);
        Table { header, buckets, entries }
    }

    pub fn attach(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry]) -> Table<'a> {
        Table { header, buckets, entries }
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    fn bucket(&self, key: u64) -> usize {
        (mix(key ^ self.header.hash_seed) as usize) & (self.buckets.len() - 1)
    }

    fn remove(&mut self, i: u32) {
        let key = self.entries[i as usize].key;
        let b = self.bucket(key);
        slots::unchain(self.entries, &mut self.buckets[b], i);
        slots::unlink(self.entries, &mut self.header.lru, i);
        let row = self.entries[i as usize].row;
        if row != NO_ROW {
            let row = (row as usize).min(ROWS - 1);
            self.header.clients[row] = self.header.clients[row].saturating_sub(1);
        }
        self.entries[i as usize] = Entry { links: Links { hash_next: self.header.free_head, ..Links::NONE }, ..Entry::EMPTY };
        self.header.free_head = i;
        self.header.len -= 1;
    }

    /// The entry of client `key` (never 0), seen at `now_ms`: found and moved
    /// to the front, or made there (in the place of the least recently seen
    /// client when the table is full).
    pub fn client(&mut self, key: u64, now_ms: i64) -> &mut Entry {
        let key = key.max(1);
        let b = self.bucket(key);
        let i = match slots::find(self.entries, self.buckets[b], |e| e.key == key) {
            Some(i) => {
                if self.header.lru.head != i {
                    slots::unlink(self.entries, &mut self.header.lru, i);
                    slots::push_front(self.entries, &mut self.header.lru, i);
                }
                i
            }
            None => {
                if self.header.free_head == NIL {
                    let tail = self.header.lru.tail;
                    self.remove(tail);
                    self.header.evictions += 1;
                }
                let i = self.header.free_head;
                self.header.free_head = self.entries[i as usize].links.hash_next;
                self.entries[i as usize] =
                    Entry { key, window: ClientWindow::new(now_ms), links: Links { hash_next: self.buckets[b], ..Links::NONE }, ..Entry::EMPTY };
                self.buckets[b] = i;
                slots::push_front(self.entries, &mut self.header.lru, i);
                self.header.len += 1;
                self.header.made += 1;
                self.header.clients[0] += 1;
                i
            }
        };
        &mut self.entries[i as usize]
    }

    /// [`Self::client`], but a client not in the table takes over the entry of
    /// the key `from` gives (asked only then) when that one is there, window,
    /// bucket and all: a browser's
    /// first request with its new cookie carries on what its address showed
    /// before, and the address's entry is its own no more. Not an entry whose
    /// last request was refused: that one may be many people behind one
    /// address and browser, and a person offered the cookie on the refusal
    /// comes back as a client of their own, while the entry stays as it is
    /// for the others (the network's backstop still bounds them all).
    pub fn client_from(&mut self, key: u64, from: impl FnOnce() -> u64, now_ms: i64) -> &mut Entry {
        let key = key.max(1);
        if self.get(key).is_none() {
            let from = from().max(1);
            let b = self.bucket(from);
            if let Some(i) = slots::find(self.entries, self.buckets[b], |e| e.key == from && e.refused == 0) {
                slots::unchain(self.entries, &mut self.buckets[b], i);
                let nb = self.bucket(key);
                self.entries[i as usize].key = key;
                self.entries[i as usize].links.hash_next = self.buckets[nb];
                self.buckets[nb] = i;
            }
        }
        self.client(key, now_ms)
    }

    /// Whether the table holds the client that [`Self::client_from`] finds for
    /// `key` (`from`: the entry it would take over), or [`Self::client`] for
    /// `from`'s key without one: false where either would make an entry.
    pub fn holds(&self, key: Option<u64>, from: impl FnOnce() -> u64) -> bool {
        match key {
            Some(key) => self.get(key).is_some() || self.get(from()).is_some_and(|e| e.refused == 0),
            None => self.get(from()).is_some(),
        }
    }

    /// The bucket kept at `key` (an entry that is no client: a network's), made if need be.
    pub fn bucket_of(&mut self, key: u64, now_ms: i64) -> &mut Bucket {
        if self.get(key).is_none() {
            self.client(key, now_ms).row = NO_ROW;
            self.header.clients[0] = self.header.clients[0].saturating_sub(1);
        }
        &mut self.client(key, now_ms).bucket
    }

    /// Count a request on `row`, refused or not, and move its client's (at `key`;
    /// None for a request the table made no client for) count of clients to that row.
    pub fn place(&mut self, key: Option<u64>, row: usize, refused: bool) {
        let row = row.min(ROWS - 1);
        self.header.requests[row] += 1;
        self.header.refused[row] += u64::from(refused);
        let Some(key) = key else { return };
        let b = self.bucket(key.max(1));
        if let Some(i) = slots::find(self.entries, self.buckets[b], |e| e.key == key.max(1)) {
            let e = &mut self.entries[i as usize];
            e.refused = u16::from(refused);
            let old = e.row as usize;
            if e.row != NO_ROW && old != row {
                self.header.clients[old.min(ROWS - 1)] = self.header.clients[old.min(ROWS - 1)].saturating_sub(1);
                self.header.clients[row] += 1;
                e.row = row as u16;
            }
        }
    }

    /// The entry of `key`, if the table holds it (for a look at a live client).
    pub fn get(&self, key: u64) -> Option<&Entry> {
        let key = key.max(1);
        slots::find(self.entries, self.buckets[self.bucket(key)], |e| e.key == key).map(|i| &self.entries[i as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_window::Seen;

    struct Owned {
        header: Header,
        buckets: Vec<u32>,
        entries: Vec<Entry>,
    }

    impl Owned {
        fn new(entries: usize) -> Owned {
            let mut o = Owned { header: Header::EMPTY, buckets: vec![NIL; entries.next_power_of_two() / 2], entries: vec![Entry::EMPTY; entries] };
            Table::init(&mut o.header, &mut o.buckets, &mut o.entries, 0x1234);
            o
        }
        fn table(&mut self) -> Table<'_> {
            Table::attach(&mut self.header, &mut self.buckets, &mut self.entries)
        }
    }

    #[test]
    fn a_full_table_makes_room_for_every_new_client_and_keeps_the_recent_ones() {
        let mut o = Owned::new(16);
        let mut t = o.table();
        for k in 1..=16u64 {
            t.client(k, 0).window.count(&Seen { now_ms: 0, path: k, ..Seen::default() }, 60_000);
        }
        // client 1 keeps asking while 100 new clients come
        for k in 100..200u64 {
            t.client(1, 1);
            t.client(k, 1);
        }
        assert_eq!(t.header.len, 16);
        assert_eq!(t.header.evictions, 100);
        assert!(t.get(1).is_some_and(|e| e.window.current.requests == 1), "the returning client keeps its window");
        assert!(t.get(2).is_none());
        assert_eq!(t.header.clients.iter().sum::<u32>(), 16, "every client is on one row");
    }

    #[test]
    fn rows_follow_the_clients() {
        let mut o = Owned::new(16);
        let mut t = o.table();
        t.client(5, 0);
        t.place(Some(5), 3, false);
        t.place(Some(5), 6, true);
        assert_eq!((t.header.clients[3], t.header.clients[6], t.header.clients[0]), (0, 1, 0));
        assert_eq!((t.header.requests[6], t.header.refused[6]), (1, 1));
        // a request the table made no client for (the backstop's) is on a row, and no
        // client's: not the one whose key is 1, where a key of 0 is kept
        t.client(1, 0);
        t.place(Some(1), 2, false);
        t.place(None, 5, true);
        assert_eq!((t.header.clients[2], t.header.clients[5], t.header.requests[5]), (1, 0, 1));
        assert_eq!(t.get(1).map(|e| (e.row, e.refused)), Some((2, 0)));
    }

    #[test]
    fn a_cookie_takes_over_its_address_entry_and_a_network_bucket_is_no_client() {
        let mut o = Owned::new(16);
        let mut t = o.table();
        t.client(7, 0).window.count(&Seen { now_ms: 0, path: 1, ..Seen::default() }, 60_000);
        assert_eq!(t.client_from(99, || 7, 1).window.current.requests, 1, "the window carried on");
        assert!(t.get(7).is_none(), "the address's entry is the cookie's now");
        assert_eq!((t.header.len, t.header.clients[0]), (1, 1));
        assert_eq!(t.client_from(99, || 8, 2).window.current.requests, 1, "a known client keeps its own");
        assert_eq!(t.bucket_of(1234, 3).take(5.0, 1.0, 3), Ok(()));
        assert_eq!((t.header.len, t.header.clients.iter().sum::<u32>()), (2, 1), "a network's bucket is on no row");
    }

    #[test]
    fn a_cookie_does_not_take_over_an_entry_just_refused() {
        let mut o = Owned::new(16);
        let mut t = o.table();
        t.client(7, 0).window.count(&Seen { now_ms: 0, path: 1, ..Seen::default() }, 60_000);
        t.place(Some(7), 4, true);
        assert_eq!(t.client_from(99, || 7, 1).window.current.requests, 0, "a client of its own");
        assert_eq!(t.get(7).map(|e| e.window.current.requests), Some(1), "the shared entry stays, for the others");
        t.place(Some(7), 2, false);
        assert_eq!(t.client_from(100, || 7, 2).window.current.requests, 1, "passed again: taken over");
    }

    #[test]
    fn holds_says_whether_client_and_client_from_would_make_an_entry() {
        let mut o = Owned::new(16);
        let mut t = o.table();
        t.client(7, 0);
        assert!(t.holds(None, || 7) && !t.holds(None, || 8));
        assert!(t.holds(Some(99), || 7), "a cookie that takes over its address's entry");
        assert!(!t.holds(Some(99), || 8), "a new cookie without one");
        t.place(Some(7), 4, true);
        assert!(!t.holds(Some(99), || 7), "not over an entry just refused");
        t.client(99, 1);
        assert!(t.holds(Some(99), || 8), "a cookie the table holds");
        let (len, made) = (t.header.len, t.header.made);
        let _ = t.holds(Some(5), || 6);
        assert_eq!((t.header.len, t.header.made), (len, made), "holds makes nothing");
    }

    #[test]
    fn a_client_costs_about_a_kilobyte_and_a_quarter() {
        assert_eq!(BYTES_PER_CLIENT, 1220, "docs/module.md says so");
        let (_, entries) = layout(10 << 20).unwrap();
        assert!(entries > 8_500, "10 MB holds {entries} clients");
    }
}
