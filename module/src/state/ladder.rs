//! The ladder zone: this cycle's view of its table of clients. The table's
//! logic is `crawlward_policy::client_table`.

use crawlward_policy::client_table::{Entry, Header, Table};
use crawlward_policy::layout::{Fingerprint, Kind};

/// The zone's layout; the version is bumped when a field changes meaning without changing a
/// size (3: clients' keys and the paths' hashes are made by another hash, so a zone laid out by
/// 2 is laid out again rather than hold both kinds).
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::Ladder, 3);

/// This cycle's view of a ladder zone's table.
pub struct LadderShm(pub(crate) crate::state::shm::Table<Header, Entry>);

impl LadderShm {
    /// Runs `f` on the table under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.0.with(|h, b, e| f(&mut Table::attach(h, b, e)))
    }

    pub fn zone_size(&self) -> usize {
        self.0.zone_size
    }
}
