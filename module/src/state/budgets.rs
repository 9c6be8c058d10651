//! A crawl budget zone: this cycle's view of its table. The table's logic is
//! `crawlward_policy::budget_table`.

use crawlward_policy::budget_table::{Entry, Header, Key, Table};
use crawlward_policy::layout::{Fingerprint, Kind};

/// The zone's layout; the version is bumped when a field changes meaning without changing a
/// size (5: keys hashed over their used bytes only, so a zone laid out by 4 is laid out again;
/// 6: an entry's `used` shares its word with an account's tier).
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::Budgets, 6);

/// The zone's fingerprint for a set of fixed slots: [`LAYOUT`] with the
/// catalogue's agents (names and order) in its contents field, so that a
/// reload with another catalogue lays the table out again rather than
/// counting an agent in a slot laid out for another; a quota zone's API
/// tiers (names and order: an account's entry and the zone's counts hold a
/// tier's place in them); and whether it is synced, since that changes the
/// clock its windows are kept by.
pub fn fingerprint(pinned: &[Key], tiers: &[String], synced: bool) -> Fingerprint {
    let start = if synced { 0x5eed_5eedu32 } else { 0x811c_9dc5 };
    let step = |h: u32, b: u8| (h ^ b as u32).wrapping_mul(0x0100_0193);
    let hash = pinned.iter().flatten().fold(start, |h, b| step(h, *b));
    // each name ends with a byte no name holds, so that tiers "a", "bc" are not "ab", "c"
    let hash = tiers.iter().fold(hash, |h, t| step(t.bytes().fold(h, step), 0xff));
    Fingerprint { contents: hash, ..LAYOUT }
}

/// This cycle's view of a budget zone's table.
pub struct BudgetShm(pub(crate) crate::state::shm::Table<Header, Entry>);

impl BudgetShm {
    /// Runs `f` on the table under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.0.with(|h, b, e| f(&mut Table::attach(h, b, e)))
    }

    pub fn zone_size(&self) -> usize {
        self.0.zone_size
    }
}
