//! The signature replay zone: this cycle's view of its table. The table's
//! logic is `crawlward_policy::replay_table`.

use crawlward_policy::layout::{Fingerprint, Kind};
use crawlward_policy::replay_table::{Entry, Header, Table};

/// The zone's layout.
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::Replay, 1);

/// This cycle's view of a replay zone's table.
pub struct ReplayShm(pub(crate) crate::state::shm::Table<Header, Entry>);

impl ReplayShm {
    /// Runs `f` on the table under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.0.with(|h, _, e| f(&mut Table::attach(h, e)))
    }

    /// The table's counters and its capacity, copied out.
    pub fn stats(&self) -> (Header, usize) {
        self.with(|t| (*t.header, t.capacity()))
    }
}
