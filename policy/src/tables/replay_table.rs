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
//! The header holds the directories' tags in the key file's order (a
//! directory's part is its place there), and each entry its directory's tag,
//! so that a reload whose key file lists other directories, or the same in
//! another order (which moves the parts), can carry every live nonce over to
//! its directory's new part ([`Table::relay`]), and every process, of the
//! new configuration or of the previous one still finishing its requests,
//! finds a directory's part in the same place: a signature seen before the
//! reload is still a replay after it.

use crate::client_window::mix;
pub use crate::signature::Replay;

/// The slots a key may take, from its hash on (within its directory's part).
const PROBES: usize = 16;

/// The directories a replay zone can be split between.
pub const MAX_DIRECTORIES: usize = 256;

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

/// What a relay did with the live nonces ([`Table::relay`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Relaid {
    /// Moved to their directory's new part.
    pub moved: usize,
    /// Dropped: their directory is no longer listed.
    pub gone: usize,
    /// Dropped: their directory's new part had no free slot where they may go.
    pub lost: usize,
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
    /// How many directories split the table, and their tags
    /// ([`Table::directory_tag`]) in the key file's order.
    pub parts: u64,
    pub tags: [u32; MAX_DIRECTORIES],
}

impl Header {
    pub const EMPTY: Header =
        Header { hash_seed: 0, first: 0, replayed: 0, not_checked: 0, generations: 0, claimed_by: 0, parts: 0, tags: [0; MAX_DIRECTORIES] };
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
    /// Lay out an empty table split between `directories` (the key file's,
    /// in its order), with `hash_seed` (random) mixed into every key. Err
    /// with more than [`MAX_DIRECTORIES`].
    pub fn init(header: &'a mut Header, entries: &'a mut [Entry], hash_seed: u64, directories: &[String]) -> Result<Table<'a>, String> {
        *header = Header { hash_seed, ..Header::EMPTY };
        entries.fill(Entry::EMPTY);
        let mut t = Table { header, entries };
        t.set_directories(directories)?;
        Ok(t)
    }

    /// The directories' tags in the header, in their order.
    fn set_directories(&mut self, directories: &[String]) -> Result<(), String> {
        if directories.len() > MAX_DIRECTORIES {
            return Err(too_many(directories.len()));
        }
        let tags: Vec<u32> = directories.iter().map(|d| self.directory_tag(d)).collect();
        self.header.tags = [0; MAX_DIRECTORIES];
        self.header.tags[..tags.len()].copy_from_slice(&tags);
        self.header.parts = tags.len() as u64;
        Ok(())
    }

    /// The part of the directory with tag `tag`: its place in the header's list.
    fn part_of(&self, tag: u32) -> Option<usize> {
        let parts = (self.header.parts as usize).min(MAX_DIRECTORIES);
        self.header.tags[..parts].iter().position(|t| *t == tag)
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

    /// Record `nonce`, of a signature accepted until `until_s`, at `now_s`,
    /// in its directory's part. None for a directory the table is not split
    /// between: one the newest configuration's key file no longer lists, seen
    /// by a worker of the previous one still finishing its requests, whose
    /// signature is then taken as no longer verified there either.
    pub fn see(&mut self, nonce: Nonce, until_s: i64, now_s: i64) -> Option<Replay> {
        let part = self.part_of(nonce.directory)?;
        let entry = Entry { key: nonce.key, until_s: until_s.clamp(0, i64::from(u32::MAX)) as u32, directory: nonce.directory };
        let seen = self.find_or_add(part, self.header.parts as usize, entry, now_s);
        match seen {
            Replay::First => self.header.first += 1,
            Replay::Replayed => self.header.replayed += 1,
            Replay::NotChecked => self.header.not_checked += 1,
        }
        Some(seen)
    }

    /// Whether the table has a part for `directory`.
    pub fn holds(&self, directory: &str) -> bool {
        self.part_of(self.directory_tag(directory)).is_some()
    }

    /// Whether the table is split between `directories`, in their order.
    pub fn lists(&self, directories: &[String]) -> bool {
        let parts = (self.header.parts as usize).min(MAX_DIRECTORIES);
        parts == directories.len() && directories.iter().zip(&self.header.tags[..parts]).all(|(d, t)| self.directory_tag(d) == *t)
    }

    /// A verified signature without a nonce: counted as not checked.
    pub fn without_nonce(&mut self) -> Replay {
        self.header.not_checked += 1;
        Replay::NotChecked
    }

    /// After a reload whose key file lists other directories, or lists them
    /// in another order: the table split between `directories` (in their
    /// order), and every live entry moved to its directory's new part, at
    /// `now_s`. An entry of a directory the new list does not hold is
    /// dropped (its signatures no longer verify), and so is one for which
    /// its new part has no free slot where it may go (a part whose length
    /// changed places every nonce anew): its nonce is then no longer
    /// checked, as a nonce seen with a full part never was. The seed and the
    /// counters carry over. Err, with nothing changed, with more than
    /// [`MAX_DIRECTORIES`] directories or no memory for a copy of the live
    /// entries.
    pub fn relay(&mut self, directories: &[String], now_s: i64) -> Result<Relaid, String> {
        if directories.len() > MAX_DIRECTORIES {
            return Err(too_many(directories.len()));
        }
        let count = self.entries.iter().filter(|e| e.live(now_s)).count();
        let mut live: Vec<Entry> = Vec::new();
        live.try_reserve_exact(count).map_err(|_| format!("has no memory for a copy of its {count} live nonces"))?;
        live.extend(self.entries.iter().copied().filter(|e| e.live(now_s)));
        self.set_directories(directories)?;
        self.entries.fill(Entry::EMPTY);
        let parts = self.header.parts as usize;
        let mut relaid = Relaid::default();
        for e in &live {
            match self.part_of(e.directory) {
                None => relaid.gone += 1,
                Some(part) if self.find_or_add(part, parts, *e, now_s) == Replay::First => relaid.moved += 1,
                Some(_) => relaid.lost += 1,
            }
        }
        Ok(relaid)
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

fn too_many(n: usize) -> String {
    format!("{n} directories: a replay zone is split between at most {MAX_DIRECTORIES}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(list: &[&str]) -> Vec<String> {
        list.iter().map(|d| format!("https://{d}")).collect()
    }

    fn table(n: usize, directories: &[&str]) -> (Header, Vec<Entry>) {
        let mut h = Header::EMPTY;
        let mut e = vec![Entry::EMPTY; n];
        Table::init(&mut h, &mut e, 0x5eed, &dirs(directories)).unwrap();
        (h, e)
    }

    #[test]
    fn a_nonce_is_a_replay_until_its_signature_expires() {
        let (mut h, mut e) = table(64, &["agent.example"]);
        let mut t = Table::attach(&mut h, &mut e);
        let k = t.nonce("https://agent.example", "k1", "n-1");
        assert_ne!(k.key, t.nonce("https://agent.example", "k1", "n-2").key);
        assert_ne!(k.key, t.nonce("https://other.example", "k1", "n-1").key, "another directory's nonce is its own");
        assert_eq!(t.see(k, 1_000, 900), Some(Replay::First));
        assert_eq!(t.see(k, 1_000, 950), Some(Replay::Replayed));
        assert_eq!(t.see(k, 1_000, 1_000), Some(Replay::Replayed));
        // past its time the signature is refused anyway; the slot is free again
        assert_eq!(t.see(k, 2_000, 1_001), Some(Replay::First));
        // a directory the table is not split between: none
        let stranger = t.nonce("https://other.example", "k1", "n-1");
        assert_eq!(t.see(stranger, 1_000, 900), None);
        assert_eq!((t.header.first, t.header.replayed, t.header.not_checked), (2, 2, 0));
    }

    #[test]
    fn a_full_part_says_not_checked_and_never_pushes_out_an_entry() {
        let (mut h, mut e) = table(32, &["busy.example", "other.example"]);
        let mut t = Table::attach(&mut h, &mut e);
        // directory 0 of 2 has 16 slots: a busy agent fills them
        let busy: Vec<Nonce> = (0..40).map(|i| t.nonce("https://busy.example", "k", &format!("n{i}"))).collect();
        let seen: Vec<Replay> = busy.iter().map(|k| t.see(*k, 10_000, 100).unwrap()).collect();
        assert_eq!(seen.iter().filter(|s| **s == Replay::First).count(), 16);
        assert!(seen[16..].iter().all(|s| *s == Replay::NotChecked), "{seen:?}");
        // every nonce it recorded is still a replay: none was pushed out
        let recorded: Vec<Nonce> = busy.iter().zip(&seen).filter(|(_, s)| **s == Replay::First).map(|(k, _)| *k).collect();
        assert!(recorded.iter().all(|k| t.see(*k, 10_000, 200) == Some(Replay::Replayed)));
        // the other directory keeps its own room
        let other = t.nonce("https://other.example", "k", "n0");
        assert_eq!(t.see(other, 10_000, 200), Some(Replay::First));
        assert_eq!(t.see(other, 10_000, 201), Some(Replay::Replayed));
        // once the busy agent's signatures expire, its part has room again
        assert_eq!(t.see(busy[39], 20_000, 10_001), Some(Replay::First));
    }

    #[test]
    fn the_layout_is_sixteen_bytes_a_nonce() {
        assert_eq!(BYTES_PER_NONCE, 16);
        let header = std::mem::size_of::<Header>();
        assert_eq!(header, 56 + 4 * MAX_DIRECTORIES);
        assert_eq!(layout(header + 16 * 100), Some((0, 100)));
        assert_eq!(layout(header + 16 * 15), None);
    }

    #[test]
    fn a_reload_that_moves_the_parts_keeps_every_live_nonce_a_replay() {
        let (mut h, mut e) = table(64, &["agent.example", "other.example"]);
        let mut t = Table::attach(&mut h, &mut e);
        let agent: Vec<Nonce> = (0..12).map(|i| t.nonce("https://agent.example", "k1", &format!("a{i}"))).collect();
        let other: Vec<Nonce> = (0..12).map(|i| t.nonce("https://other.example", "k1", &format!("o{i}"))).collect();
        let expired = t.nonce("https://agent.example", "k1", "old");
        assert!(agent.iter().all(|n| t.see(*n, 1_000, 100) == Some(Replay::First)));
        assert!(other.iter().all(|n| t.see(*n, 1_000, 100) == Some(Replay::First)));
        assert_eq!(t.see(expired, 150, 100), Some(Replay::First));
        let (before, after) = (dirs(&["agent.example", "other.example"]), dirs(&["new.example", "agent.example"]));
        assert!(t.lists(&before) && !t.lists(&after));
        // the new key file: a directory before agent's, and other's dropped
        assert_eq!(
            t.relay(&after, 200),
            Ok(Relaid { moved: 12, gone: 12, lost: 0 }),
            "agent's twelve moved, other's twelve dropped; the expired one is not live"
        );
        assert!(t.lists(&after) && !t.lists(&before) && !t.lists(&after[..1]));
        assert!(t.holds("https://agent.example") && t.holds("https://new.example") && !t.holds("https://other.example"));
        // agent's nonces are replays in their new part
        assert!(agent.iter().all(|n| t.see(*n, 1_000, 300) == Some(Replay::Replayed)));
        // other's directory is gone from the key file: no part
        assert_eq!(t.see(other[0], 1_000, 300), None);
        // and the new directory has its part
        let new = t.nonce("https://new.example", "k1", "n");
        assert_eq!(t.see(new, 1_000, 300), Some(Replay::First));
        assert_eq!(t.see(new, 1_000, 301), Some(Replay::Replayed));
        assert_eq!((t.header.first, t.header.replayed, t.header.not_checked), (26, 13, 0), "the counters carry over");
    }

    #[test]
    fn a_nonce_with_no_free_slot_in_its_new_part_is_counted_as_lost() {
        // one directory with 32 slots, full, then split with another: 16 slots each
        let (mut h, mut e) = table(32, &["agent.example"]);
        let mut t = Table::attach(&mut h, &mut e);
        let agent: Vec<Nonce> = (0..32).map(|i| t.nonce("https://agent.example", "k1", &format!("a{i}"))).collect();
        let first = agent.iter().filter(|n| t.see(**n, 1_000, 100) == Some(Replay::First)).count();
        let r = t.relay(&dirs(&["agent.example", "other.example"]), 200).unwrap();
        assert_eq!((r.moved + r.lost, r.gone), (first, 0));
        assert!(r.lost >= first - 16, "{r:?}: at most 16 fit");
    }

    #[test]
    fn a_replay_zone_holds_at_most_256_directories() {
        let many: Vec<String> = (0..=MAX_DIRECTORIES).map(|i| format!("https://d{i}.example")).collect();
        let (mut h, mut e) = (Header::EMPTY, vec![Entry::EMPTY; 64]);
        assert_eq!(Table::init(&mut h, &mut e, 1, &many).err().unwrap(), "257 directories: a replay zone is split between at most 256");
        let (mut h, mut e) = table(64, &["agent.example"]);
        let mut t = Table::attach(&mut h, &mut e);
        let n = t.nonce("https://agent.example", "k1", "n");
        assert_eq!(t.see(n, 1_000, 100), Some(Replay::First));
        assert!(t.relay(&many, 200).is_err());
        assert_eq!(t.see(n, 1_000, 200), Some(Replay::Replayed), "a refused relay changes nothing");
        assert!(t.relay(&many[..MAX_DIRECTORIES], 200).is_ok());
    }

    #[test]
    fn a_nonce_past_2106_is_kept_until_then() {
        let (mut h, mut e) = table(16, &["agent.example"]);
        let mut t = Table::attach(&mut h, &mut e);
        let n = t.nonce("https://agent.example", "k1", "far");
        assert_eq!(t.see(n, i64::MAX, 100), Some(Replay::First));
        assert_eq!(t.see(n, i64::MAX, i64::from(u32::MAX)), Some(Replay::Replayed));
    }
}
