//! The DNS verdict cache's zone: this cycle's view of its table. The table's
//! logic is `crawlward_policy::verdict_cache`.

use crawlward_policy::layout::{Fingerprint, Kind};
use crawlward_policy::verdict_cache::{Entry, Header, Table};

/// The zone's layout; the version is bumped when a field changes meaning without changing a size.
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::DnsCache, 3);

/// This cycle's view of the verdict table.
pub struct Cache(pub(crate) crate::state::shm::Table<Header, Entry>);

impl Cache {
    /// Runs `f` on the table under the zone's mutex.
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.0.with(|h, b, e| f(&mut Table::attach(h, b, e)))
    }

    /// The table's counters and its capacity, copied out.
    pub fn stats(&self) -> (Header, usize) {
        self.with(|t| (*t.header, t.capacity()))
    }

    pub fn zone_size(&self) -> usize {
        self.0.zone_size
    }
}
