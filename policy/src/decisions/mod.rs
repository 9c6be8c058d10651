//! Decisions on a request: the facet guard, the layers nginx enforces, the
//! crawl budgets, the responses counted, and the proportional classifier.

pub mod app_path;
pub mod budget;
pub mod classifier;
pub mod client_window;
pub mod ladder;
pub mod layers;
pub mod query;
pub mod quota;
pub mod responses;
