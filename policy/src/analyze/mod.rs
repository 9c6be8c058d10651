//! Analysis of a logged request for `crawlward analyze`: the signals it
//! gives about its client, which the proportional classifier scores.

pub mod signals;
