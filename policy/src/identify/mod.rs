//! Identification: who a User-Agent claims to be (the catalogue, its matcher
//! and the bot detector), the feeds that add agents, the worker's memo, the
//! verdict by ranges, forward-confirmed reverse DNS, and signed agents' Web
//! Bot Auth signatures.

pub(crate) mod byte_class;
pub mod catalogue;
pub mod claim;
pub mod detector;
pub mod directories;
pub mod fcrdns;
pub mod feeds;
pub mod identity;
pub mod matcher;
pub mod signature;
pub(crate) mod trigrams;
pub mod ua_cache;
