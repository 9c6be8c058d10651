//! The signature replay table (`crawlward_signatures ... replay=name:size`):
//! the (directory, key id, nonce) of each verified Web Bot Auth signature,
//! kept until the signature expires, as fixed-size `repr(C)` entries that
//! can live in nginx shared memory. The caller provides the memory, the
//! clock and the lock.
//!
//! Only a verified signature is recorded, so only the holder of a trusted
//! key can add an entry. The table is split evenly between the directories
//! of the key file, so one agent, however busy, can fill only its own part.
//! An entry is never pushed out before it expires: when a signature's part
//! has no room in the slots it may take, its nonce is "not checked", never
//! called a replay.
//!
//! Each entry also holds its directory's tag, so that a reload whose key file
//! lists other directories, or the same in another order (which moves the
//! parts), can carry every live nonce over to its directory's new part
//! ([`Table::relay`]): a signature seen before the reload is still a replay
//! after it.

use crate::client_window::mix;
pub use crate::signature::Replay;

/// The slots a key may take, from its hash on (within its directory's part).
const PROBES: usize = 16;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The key of (directory, key id, nonce); 0 is a free entry.
    pub key: u64,
    /// When the signature stops being accepted (seconds since the epoch, to
    /// 2106): its `expires` plus the clock skew.
    pub until_s: u32,
    /// The tag of the signature's directory ([`Table::nonce`]).
    pub directory: u32,
}

impl Entry {
    pub const EMPTY: Entry = Entry { key: 0, until_s: 0, directory: 0 };

    fn live(&self, now_s: i64) -> bool {
        self.key != 0 && i64::from(self.until_s) >= now_s
    }
}

/// A verified signature's nonce as the table keys it: the key of
/// (directory, key id, nonce) and its directory's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nonce {
    pub key: u64,
    pub directory: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Mixed into every key: random, chosen when the table is laid out.
    pub hash_seed: u64,
    /// Nonces seen for the first time, replayed, and not checked (no room).
    pub first: u64,
    pub replayed: u64,
    pub not_checked: u64,
    /// The configurations that opened the table, counted in the master: each
    /// takes the next number as its generation.
    pub generations: u64,
    /// The newest generation whose workers run on the table: a worker of an
    /// older one, started late, does not lay it out for its own key file.
    pub claimed_by: u64,
}

impl Header {
    pub const EMPTY: Header = Header { hash_seed: 0, first: 0, replayed: 0, not_checked: 0, generations: 0, claimed_by: 0 };
}

/// The bytes one nonce costs.
pub const BYTES_PER_NONCE: usize = std::mem::size_of::<Entry>();

/// How many entries fit in `bytes` after the header (at least 16); no index.
pub fn layout(bytes: usize) -> Option<(usize, usize)> {
    let entries = bytes.checked_sub(std::mem::size_of::<Header>())? / BYTES_PER_NONCE;
    (entries >= 16).then_some((0, entries))
}

pub struct Table<'a> {
    pub header: &'a mut Header,
    entries: &'a mut [Entry],
}

impl<'a> Table<'a> {
    /// Lay out an empty table, with `hash_seed` (random) mixed into every key.
    pub fn init(header: &'a mut Header, entries: &'a mut [Entry], hash_seed: u64) -> Table<'a> {
        *header = Header { hash_seed, ..Header::EMPTY };
        entries.fill(Entry::EMPTY);
        Table { header, entries }
    }

    pub fn attach(header: &'a mut Header, entries: &'a mut [Entry]) -> Table<'a> {
        Table { header, entries }
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The nonce of (directory, key id, nonce) in this table: keyed by its
    /// seed, so that no signer can choose nonces that land on each other.
    pub fn nonce(&self, directory: &str, keyid: &str, nonce: &str) -> Nonce {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (self.header.hash_seed, directory, keyid, nonce).hash(&mut h);
        Nonce { key: h.finish().max(1), directory: self.directory_tag(directory) }
    }

    /// The tag of a directory, the same in every configuration that keeps the table.
    pub fn directory_tag(&self, directory: &str) -> u32 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (self.header.hash_seed, "directory", directory).hash(&mut h);
        h.finish() as u32
    }

    /// Record `nonce`, of a signature of directory `part` of `parts`,
    /// accepted until `until_s`, at `now_s`.
    pub fn see(&mut self, part: usize, parts: usize, nonce: Nonce, until_s: i64, now_s: i64) -> Replay {
        let entry = Entry { key: nonce.key, until_s: until_s.clamp(0, i64::from(u32::MAX)) as u32, directory: nonce.directory };
        let seen = self.find_or_add(part, parts, entry, now_s);
        match seen {
            Replay::First => self.header.first += 1,
            Replay::Replayed => self.header.replayed += 1,
            Replay::NotChecked => self.header.not_checked += 1,
        }
        seen
    }

    /// A verified signature without a nonce: counted as not checked.
    pub fn without_nonce(&mut self) -> Replay {
        self.header.not_checked += 1;
        Replay::NotChecked
    }

    /// After a reload whose key file lists other directories, or lists them
    /// in another order: every live entry moved to the part of its directory
    /// in the new list (`part_of` a tag: its place among `parts`), at
    /// `now_s`. An entry of a directory the new list does not hold is
    /// dropped (its signatures no longer verify), and so is one whose new
    /// part has no room where it may go (its nonce is then no longer
    /// checked, as a nonce seen with a full part never was). The counters
    /// carry over. Returns (moved, dropped).
    pub fn relay(&mut self, part_of: impl Fn(u32) -> Option<usize>, parts: usize, now_s: i64) -> (usize, usize) {
        let live: Vec<Entry> = self.entries.iter().copied().filter(|e| e.live(now_s)).collect();
        self.entries.fill(Entry::EMPTY);
        let mut moved = 0;
        for e in &live {
            if part_of(e.directory).is_some_and(|part| self.find_or_add(part, parts, *e, now_s) == Replay::First) {
                moved += 1;
            }
        }
        (moved, live.len() - moved)
    }

    fn find_or_add(&mut self, part: usize, parts: usize, entry: Entry, now_s: i64) -> Replay {
        let parts = parts.max(1);
        let (start, end) = (self.entries.len() * part.min(parts - 1) / parts, self.entries.len() * (part.min(parts - 1) + 1) / parts);
        let len = end - start;
        if len == 0 || entry.key == 0 {
            return Replay::NotChecked;
        }
        let first = (mix(entry.key ^ self.header.hash_seed) as usize) % len;
        let mut room = None;
        for i in 0..PROBES.min(len) {
            let slot = start + (first + i) % len;
            let e = self.entries[slot];
            let live = e.live(now_s);
            if live && e.key == entry.key {
                return Replay::Replayed;
            }
            if !live && room.is_none() {
                room = Some(slot);
            }
        }
        match room {
            Some(slot) => {
                self.entries[slot] = entry;
                Replay::First
            }
            None => Replay::NotChecked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: usize) -> (Header, Vec<Entry>) {
        let mut h = Header::EMPTY;
        let mut e = vec![Entry::EMPTY; n];
        Table::init(&mut h, &mut e, 0x5eed);
        (h, e)
    }

    #[test]
    fn a_nonce_is_a_replay_until_its_signature_expires() {
        let (mut h, mut e) = table(64);
        let mut t = Table::attach(&mut h, &mut e);
        let k = t.nonce("https://agent.example", "k1", "n-1");
        assert_ne!(k.key, t.nonce("https://agent.example", "k1", "n-2").key);
        assert_ne!(k.key, t.nonce("https://other.example", "k1", "n-1").key, "another directory's nonce is its own");
        assert_eq!(t.see(0, 1, k, 1_000, 900), Replay::First);
        assert_eq!(t.see(0, 1, k, 1_000, 950), Replay::Replayed);
        assert_eq!(t.see(0, 1, k, 1_000, 1_000), Replay::Replayed);
        // past its time the signature is refused anyway; the slot is free again
        assert_eq!(t.see(0, 1, k, 2_000, 1_001), Replay::First);
        assert_eq!((t.header.first, t.header.replayed, t.header.not_checked), (2, 2, 0));
    }

    #[test]
    fn a_full_part_says_not_checked_and_never_pushes_out_an_entry() {
        let (mut h, mut e) = table(32);
        let mut t = Table::attach(&mut h, &mut e);
        // directory 0 of 2 has 16 slots: a busy agent fills them
        let busy: Vec<Nonce> = (0..40).map(|i| t.nonce("https://busy.example", "k", &format!("n{i}"))).collect();
        let seen: Vec<Replay> = busy.iter().map(|k| t.see(0, 2, *k, 10_000, 100)).collect();
        assert_eq!(seen.iter().filter(|s| **s == Replay::First).count(), 16);
        assert!(seen[16..].iter().all(|s| *s == Replay::NotChecked), "{seen:?}");
        // every nonce it recorded is still a replay: none was pushed out
        let recorded: Vec<Nonce> = busy.iter().zip(&seen).filter(|(_, s)| **s == Replay::First).map(|(k, _)| *k).collect();
        assert!(recorded.iter().all(|k| t.see(0, 2, *k, 10_000, 200) == Replay::Replayed));
        // the other directory keeps its own room
        let other = t.nonce("https://other.example", "k", "n0");
        assert_eq!(t.see(1, 2, other, 10_000, 200), Replay::First);
        assert_eq!(t.see(1, 2, other, 10_000, 201), Replay::Replayed);
        // once the busy agent's signatures expire, its part has room again
        assert_eq!(t.see(0, 2, busy[39], 20_000, 10_001), Replay::First);
    }

    #[test]
    fn the_layout_is_sixteen_bytes_a_nonce() {
        assert_eq!(BYTES_PER_NONCE, 16);
        assert_eq!(std::mem::size_of::<Header>(), 48);
        assert_eq!(layout(48 + 16 * 100), Some((0, 100)));
        assert_eq!(layout(48 + 16 * 15), None);
    }

    #[test]
    fn a_reload_that_moves_the_parts_keeps_every_live_nonce_a_replay() {
        let (mut h, mut e) = table(64);
        let mut t = Table::attach(&mut h, &mut e);
        // the key file lists agent (part 0) and other (part 1)
        let agent: Vec<Nonce> = (0..12).map(|i| t.nonce("https://agent.example", "k1", &format!("a{i}"))).collect();
        let other: Vec<Nonce> = (0..12).map(|i| t.nonce("https://other.example", "k1", &format!("o{i}"))).collect();
        let expired = t.nonce("https://agent.example", "k1", "old");
        assert!(agent.iter().all(|n| t.see(0, 2, *n, 1_000, 100) == Replay::First));
        assert!(other.iter().all(|n| t.see(1, 2, *n, 1_000, 100) == Replay::First));
        assert_eq!(t.see(0, 2, expired, 150, 100), Replay::First);
        // the new key file: a directory before them, and other dropped
        let (agent_tag, new_tag) = (t.directory_tag("https://agent.example"), t.directory_tag("https://new.example"));
        let part_of = |tag: u32| [new_tag, agent_tag].iter().position(|t| *t == tag);
        assert_eq!(t.relay(part_of, 2, 200), (12, 12), "agent's twelve moved; other's twelve and the expired one not kept");
        // agent's nonces are replays in their new part
        assert!(agent.iter().all(|n| t.see(1, 2, *n, 1_000, 300) == Replay::Replayed));
        // other's directory is gone from the key file: its entries left room
        assert_eq!(t.see(0, 2, t.nonce("https://new.example", "k1", "n"), 1_000, 300), Replay::First);
        assert_eq!((t.header.first, t.header.replayed), (26, 12), "the counters carry over");
    }

    #[test]
    fn a_nonce_past_2106_is_kept_until_then() {
        let (mut h, mut e) = table(16);
        let mut t = Table::attach(&mut h, &mut e);
        let n = t.nonce("https://agent.example", "k1", "far");
        assert_eq!(t.see(0, 1, n, i64::MAX, 100), Replay::First);
        assert_eq!(t.see(0, 1, n, i64::MAX, i64::from(u32::MAX)), Replay::Replayed);
    }
}
