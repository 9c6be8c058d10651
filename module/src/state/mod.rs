//! The shared zones, as every process sees them: views of the tables the
//! zones' inits lay out. Nothing here knows the configuration: a view is made
//! from a zone and the values its directive read.

pub mod budgets;
pub mod counters;
pub mod dns_cache;
pub mod ladder;
pub mod replay;
pub mod shm;
