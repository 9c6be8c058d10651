//! A crawl budget zone: this cycle's view of its table. The table's logic is
//! `crawlward_policy::budget_table`.

use crawlward_policy::budget_table::{Entry, Header, Key, Table};
use crawlward_policy::layout::{Fingerprint, Kind};
use ngx::ffi::NGX_LOG_NOTICE;
use ngx::ngx_log_error;
use std::sync::atomic::{AtomicBool, Ordering};

/// The zone's layout; the version is bumped when a field changes meaning without changing a
/// size (5: keys hashed over their used bytes only, so a zone laid out by 4 is laid out again;
/// 6: an entry's `used` shares its word with an account's tier; 7: the header says which
/// configuration claimed the table; 8: an account a variable names (a sign-in) is keyed apart from one the
/// keys file names, so a quota zone laid out by 7 holds sign-ins under the keyed accounts' key).
pub static LAYOUT: Fingerprint = crate::state::shm::fingerprint::<Header, Entry>(Kind::Budgets, 8);

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
pub struct BudgetShm {
    table: crate::state::shm::Table<Header, Entry>,
    /// The zone's name, for the notice below.
    name: String,
    /// Whether this process counts nothing in the table: a newer configuration laid it out
    /// again (said once, by [`BudgetShm::with`]), or this one could not lay it out.
    stale: AtomicBool,
}

impl BudgetShm {
    pub fn new(table: crate::state::shm::Table<Header, Entry>, name: &str) -> BudgetShm {
        BudgetShm { table, name: name.to_string(), stale: AtomicBool::new(false) }
    }

    /// Runs `f` on the table under the zone's mutex; None once a newer
    /// configuration's workers laid it out again for another catalogue or
    /// other tiers (this process is one of the previous configuration's,
    /// finishing its requests: it counts nothing more, rather than count an
    /// agent or a tier in a slot laid out for another).
    pub fn with<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> Option<T> {
        let done = self.table.with_current(|h, b, e| f(&mut Table::attach(h, b, e)));
        if done.is_none() && !self.stale.swap(true, Ordering::Relaxed) {
            // SAFETY: a plain read of the global nginx keeps its running cycle in.
            let cycle = unsafe { ngx::ffi::ngx_cycle };
            // SAFETY: the running cycle, whose log lives as long.
            let log = unsafe { (*cycle).log };
            ngx_log_error!(
                NGX_LOG_NOTICE,
                log,
                "crawlward_budget_zone \"{}\": laid out again by a newer configuration's workers; this worker of the previous one counts nothing more in it",
                self.name
            );
        }
        done
    }

    /// Whether this process still counts in the table, as far as it knows: false once
    /// [`BudgetShm::with`] found it laid out again by a newer configuration, or this
    /// configuration could not lay it out ([`BudgetShm::counts_nothing`]). A request let out of
    /// its rate class for a quota asks first, so that it is limited by one or the other.
    pub fn counts(&self) -> bool {
        !self.stale.load(Ordering::Relaxed)
    }

    /// This configuration could not lay the table out: it counts nothing in it.
    pub fn counts_nothing(&self) {
        self.stale.store(true, Ordering::Relaxed);
    }

    /// Runs `f` on the table's browse-cap count and sync state, whoever laid the table out:
    /// that part of the header is the same under every catalogue and tiers, and a table laid
    /// out again keeps it, so that a previous configuration's worker gives back into it the
    /// places its requests took. `f` is given the header alone: the table it sees has no
    /// buckets and no entries (those may be laid out for another catalogue).
    pub fn with_browse<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> T {
        self.table.with(|h, _, _| f(&mut Table::attach(h, &mut [], &mut [])))
    }

    /// The table as this cycle's zone init found it, for the workers to lay out again.
    pub fn table(&self) -> &crate::state::shm::Table<Header, Entry> {
        &self.table
    }

    pub fn zone_size(&self) -> usize {
        self.table.zone_size
    }
}
