//! Explain: all the decisions for one request, in words, as `crawlward
//! explain` prints them, and nginx's own answer before any module runs.

pub mod decide;
