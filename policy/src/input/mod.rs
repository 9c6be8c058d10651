//! Input: the policy file as written and where each value stands, the
//! problems found, and what the policy and the operators' files hold
//! (addresses, ranges, robots.txt patterns).

pub(crate) mod checks;
pub(crate) mod error;
pub mod escape;
pub mod model;
pub mod net;
pub(crate) mod positions;
pub mod ranges;
pub mod robots;
