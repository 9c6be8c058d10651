//! The signature replay zone: this cycle's view of its table. The table's
//! logic is `crawlward_policy::replay_table`.

use crawlward_policy::layout::{Fingerprint, Kind};
use crawlward_policy::replay_table::{Entry, Header, Table};

/// The zone's layout (2: each entry holds its directory's tag, and the
/// header the directories' tags and the configurations' generations).
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::Replay, 2);

/// This cycle's view of a replay zone's table.
pub struct ReplayShm(pub(crate) crate::state::shm::Table<Header, Entry>);

impl ReplayShm {
    /// Runs `f` on the table under the zone's mutex. A worker of the previous
    /// configuration, still finishing its requests once a newer one moved the
    /// nonces, finds each directory's part where the newer one put it: the
    /// table's header lists them.
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.0.with(|h, _, e| f(&mut Table::attach(h, e)))
    }

    /// The table's counters and its capacity, copied out (whatever configuration laid it out).
    pub fn stats(&self) -> (Header, usize) {
        self.0.with(|h, _, e| (*h, e.len()))
    }
}
