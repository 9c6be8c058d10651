//! The signature replay zone: this cycle's view of its table. The table's
//! logic is `crawlward_policy::replay_table`.

use crawlward_policy::layout::{Fingerprint, Kind};
use crawlward_policy::replay_table::{Entry, Header, Table};

/// The zone's layout (2: each entry holds its directory's tag, and the
/// header the directories' tags and the configurations' generations).
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::Replay, 2);

/// The zone's fingerprint for a key file's directories: [`LAYOUT`] with the
/// directories (names and order) in its contents field, since each has the
/// part of the table at its place in the list: a reload with another list
/// moves the nonces to their directories' new parts ([`crate::conf::signatures::lay_out_again`]).
pub fn fingerprint(directories: &[String]) -> Fingerprint {
    let step = |h: u32, b: u8| (h ^ b as u32).wrapping_mul(0x0100_0193);
    // each name ends with a byte no name holds, so that "a", "bc" is not "ab", "c"
    let hash = directories.iter().fold(0x811c_9dc5, |h, d| step(d.bytes().fold(h, step), 0xff));
    // never 0: the contents of a table being laid out again
    Fingerprint { contents: hash.max(1), ..LAYOUT }
}

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
