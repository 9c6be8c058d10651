//! Tables in shared memory: their common bookkeeping and layout, the budget
//! zone's table and the DNS verdict cache.

pub mod budget_table;
pub mod client_table;
pub mod layout;
pub mod replay_table;
pub(crate) mod slots;
pub mod verdict_cache;
