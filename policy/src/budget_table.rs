//! The budget zone's table: the windows of every address and agent name (and,
//! in its header, the shared budget's), as fixed-size `repr(C)` entries linked by indices, so that
//! it can live in nginx shared memory (see `verdict_cache` for the same
//! layout). The caller provides the memory, the clock and the lock.
//!
//! Every table a client can grow is bounded: the table by its capacity, with
//! the least recently used key evicted (it starts over with an empty
//! budget), and agent names by `max_names` within it: past that, a new name
//! counts as `other`.

use crate::budget::{take, take_some, Budget, BudgetLimits, Refusal, Windows};

use crate::slots::{self, Links, List, Slot, NIL};

/// Longest key: a kind byte, a length byte, then the address or the name.
pub const KEY_LEN: usize = 48;
/// Longest agent name kept.
pub const NAME_MAX: usize = KEY_LEN - 2;

const KIND_ADDRESS: u8 = 1;
const KIND_AGENT: u8 = 2;

/// A key: kind, length, bytes.
pub type Key = [u8; KEY_LEN];

pub fn address_key(addr: [u8; 16]) -> Key {
    let mut k = [0; KEY_LEN];
    k[0] = KIND_ADDRESS;
    k[1] = 16;
    k[2..18].copy_from_slice(&addr);
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

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    key: Key,
    windows: Windows,
    /// Requests this key refused.
    refused: u64,
    /// Its hash chain (or the free list) and the LRU list.
    links: Links,
    used: u32,
}

impl Entry {
    pub const EMPTY: Entry = Entry { key: [0; KEY_LEN], windows: [crate::budget::Window::ZERO; 2], refused: 0, links: Links::NONE, used: 0 };
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
    /// Keys, most recently used first.
    lru: List,
    free_head: u32,
    pub len: u32,
    /// Agent names in the table.
    pub names: u32,
    pub max_names: u32,
    /// Counted requests let through, and refused by each budget ([`Budget`] order).
    pub passed: u64,
    pub refused: [u64; 3],
    pub evictions: u64,
    /// Requests that would have been refused under dry run.
    pub dry_run_refused: u64,
    /// The shared budget's windows: in the header, so it is never evicted and
    /// costs no lookup.
    shared: Windows,
}

impl Header {
    pub fn empty(max_names: u32) -> Header {
        Header {
            lru: List::EMPTY,
            free_head: 0,
            len: 0,
            names: 0,
            max_names,
            passed: 0,
            refused: [0; 3],
            evictions: 0,
            dry_run_refused: 0,
            shared: [crate::budget::Window::ZERO; 2],
        }
    }
}

/// How many buckets and entries fit in `bytes` after the header.
pub fn layout(bytes: usize) -> Option<(usize, usize)> {
    let room = bytes.checked_sub(std::mem::size_of::<Header>())?;
    let entries = (room / (std::mem::size_of::<Entry>() + 4)).min(NIL as usize - 1);
    if entries < 16 {
        return None;
    }
    let buckets = 1usize << (usize::BITS - 1 - entries.leading_zeros());
    Some((buckets, entries))
}

/// What one request is counted as.
#[derive(Debug, Clone)]
pub struct Counted<'a> {
    pub address: [u8; 16],
    /// The agent budget's name (see [`crate::budget::agent_budget_name`]).
    pub agent: &'a [u8],
    pub deep: bool,
    /// A spoofed claim: only its address budget is checked and spent (its
    /// refusals are still counted under its agent name, for the status).
    pub address_only: bool,
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

fn hash(key: &Key) -> u64 {
    // eight bytes at a time over the whole key (unused bytes are zero)
    key.chunks_exact(8).fold(0x9e37_79b9_7f4a_7c15u64, |h, c| {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29)
    })
}

impl<'a> Table<'a> {
    /// Lay out an empty table.
    pub fn init(header: &'a mut Header, buckets: &'a mut [u32], entries: &'a mut [Entry], max_names: u32) -> Table<'a> {
        assert!(buckets.len().is_power_of_two() && entries.len() >= 16 && entries.len() < NIL as usize);
        *header = Header::empty(max_names);
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

    fn bucket(&self, key: &Key) -> usize {
        (hash(key) as usize) & (self.buckets.len() - 1)
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
        self.entries[i as usize] = Entry { links: Links { hash_next: self.header.free_head, ..Links::NONE }, ..Entry::EMPTY };
        self.header.free_head = i;
        self.header.len -= 1;
    }

    /// The entry of `key`, made (evicting the least recently used key if the
    /// table is full) if it is not there, and moved to the front. An agent
    /// name past `max_names` is `other`.
    fn entry(&mut self, key: &Key) -> u32 {
        if let Some(i) = self.find(key) {
            // a key already among the two most recent stays where it is: a request
            // touches two keys, which would otherwise swap places every time
            let head = self.header.lru.head;
            if head != i && self.entries[head as usize].links.next != i {
                slots::unlink(self.entries, &mut self.header.lru, i);
                slots::push_front(self.entries, &mut self.header.lru, i);
            }
            return i;
        }
        if counts_as_name(key) && self.header.names >= self.header.max_names {
            return self.entry(&agent_key("other"));
        }
        if self.header.free_head == NIL {
            let tail = self.header.lru.tail;
            self.remove(tail);
            self.header.evictions += 1;
        }
        let i = self.header.free_head;
        self.header.free_head = self.entries[i as usize].links.hash_next;
        let b = self.bucket(key);
        self.entries[i as usize] = Entry { key: *key, links: Links { hash_next: self.buckets[b], ..Links::NONE }, used: 1, ..Entry::EMPTY };
        self.buckets[b] = i;
        slots::push_front(self.entries, &mut self.header.lru, i);
        self.header.len += 1;
        if counts_as_name(key) {
            self.header.names += 1;
        }
        i
    }

    /// Count one request in its three budgets, or refuse it spending nothing.
    /// Under `dry_run` a refusal is counted only as `dry_run_refused`: the
    /// caller lets the request through, and it spends nothing, as it would
    /// not had it been refused.
    pub fn take(&mut self, c: &Counted, now: u64, limits: &BudgetLimits, shrink: u32, dry_run: bool) -> Result<(), Refusal> {
        let ids = [self.entry(&address_key(c.address)), self.entry(&agent_key_bytes(c.agent))];
        let mut w = [self.entries[ids[0] as usize].windows, self.entries[ids[1] as usize].windows, self.header.shared];
        let result = if c.address_only {
            take_some(&mut [(Budget::Address, &mut w[0])], c.deep, now, limits, shrink)
        } else {
            let [a, g, s] = &mut w;
            take([a, g, s], c.deep, now, limits, shrink)
        };
        match result {
            Ok(()) => {
                self.entries[ids[0] as usize].windows = w[0];
                self.entries[ids[1] as usize].windows = w[1];
                self.header.shared = w[2];
                self.header.passed += 1;
            }
            Err(_) if dry_run => self.header.dry_run_refused += 1,
            Err(r) => {
                let b = Budget::ALL.iter().position(|b| *b == r.budget).unwrap_or(0);
                self.header.refused[b] += 1;
                self.entries[ids[1] as usize].refused += 1;
            }
        }
        result
    }

    /// The agent names with the most refusals, most first, at most `n`.
    pub fn top_refused(&self, n: usize) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .entries
            .iter()
            .filter(|e| e.used != 0 && e.key[0] == KIND_AGENT && e.refused > 0)
            .map(|e| (String::from_utf8_lossy(&e.key[2..2 + (e.key[1] as usize).min(NAME_MAX)]).into_owned(), e.refused))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Limits;

    struct Mem {
        header: Header,
        buckets: Vec<u32>,
        entries: Vec<Entry>,
    }

    fn mem(n: usize, names: u32) -> Mem {
        let mut m = Mem { header: Header::empty(names), buckets: vec![0; n.next_power_of_two()], entries: vec![Entry::EMPTY; n] };
        Table::init(&mut m.header, &mut m.buckets, &mut m.entries, names);
        m
    }

    fn limits() -> BudgetLimits {
        BudgetLimits {
            address: Limits::parse("60r/m,6r/m").unwrap(),
            agent: Limits::parse("120r/m,12r/m").unwrap(),
            shared: Limits::parse("240r/m,24r/m").unwrap(),
        }
    }

    fn addr(i: u32) -> [u8; 16] {
        crate::budget::address_key(std::net::IpAddr::from(0x0a00_0000u32.wrapping_add(i).to_be_bytes()))
    }

    #[test]
    fn a_spoofer_spends_its_own_address_budget() {
        let mut m = mem(64, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        let real = Counted { address: addr(2), agent: b"Googlebot", deep: true, address_only: false };
        // impostors from 30 addresses: each spends its own address budget only
        for a in 100..130 {
            let spoof = Counted { address: addr(a), agent: b"Googlebot (spoofed)", deep: true, address_only: true };
            let got: Vec<bool> = (0..10).map(|i| t.take(&spoof, i, &limits(), 1, false).is_ok()).collect();
            assert_eq!(got.iter().filter(|x| **x).count(), 6);
        }
        assert!(t.take(&real, 30, &limits(), 1, false).is_ok(), "the real one still gets in: the shared ceiling (24 deep) is untouched");
        assert_eq!(t.header.refused, [120, 0, 0]);
        assert_eq!(t.top_refused(5), vec![("Googlebot (spoofed)".to_string(), 120)]);
    }

    #[test]
    fn names_and_the_table_stay_bounded() {
        let mut m = mem(128, 16);
        let mut t = Table::attach(&mut m.header, &mut m.buckets, &mut m.entries);
        for i in 0..600 {
            let name = format!("Rotbot{i}");
            let c = Counted { address: addr(i), agent: name.as_bytes(), deep: false, address_only: false };
            let _ = t.take(&c, i as u64, &limits(), 1, false);
            assert!(t.header.names <= 16 && (t.header.len as usize) <= t.capacity());
        }
        assert!(t.header.evictions > 0);
        assert!(t.top_refused(100).len() <= 16);
    }
}
