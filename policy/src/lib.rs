//! crawlward's policy model and decision logic.
//!
//! One implementation of every decision, shared by the `crawlward` CLI
//! (render and explain) and the nginx module: the catalogue and its
//! classifier, the action table per purpose and verdict, the facet guard,
//! and the rate classes. Nothing here touches nginx.
//!
//! Where each decision is made, in the order nginx meets them. The module,
//! `crawlward explain` and the stock render call these, and nothing else
//! decides the same thing:
//!
//! | decision | function |
//! |---|---|
//! | the path nginx matches, or nginx's own 400 | [`decide::nginx_target`] |
//! | which agent a User-Agent claims (a product token, not a mention) | [`Catalogue::identify`], [`claim`] |
//! | the name a client is logged and counted by | [`Catalogue::label`] |
//! | a bot the catalogue does not name | [`detector::bot`] |
//! | the verdict by published ranges | [`Identity::verdict`] |
//! | whether the DNS check runs, and its verdict | [`fcrdns::needs_dns`], [`fcrdns::verdict_of`] |
//! | robots.txt, a machine door or a page | [`Identity::door`] |
//! | the action for a purpose and verdict | [`Identity::ua_action`] |
//! | the facet guard's rule | [`query::facet_rule`] (on a request: [`query::FacetGuard::decide`]) |
//! | the rate class | [`layers::Layers::rate_class`] |
//! | a place in the browse cap | [`layers::Layers::in_browse_cap`] |
//! | whether the crawl budgets count a request, and which | [`budget::counted`], [`budget_table::claim_of`] |
//! | a budget's room, and the one that refuses | [`budget::take_some`]; for explain [`budget::first_to_refuse`] |
//! | an account's API quota, and the RateLimit fields | [`quota::take`], [`quota::policy_field_into`], [`quota::remaining_field_into`] |
//! | an API key's account | [`quota::Keys::lookup`] |
//! | why a response refused, its Retry-After, the throttle log | [`layers::Layers::refusal`], [`layers::Layers::retry_after`], [`layers::Layers::throttled`] |
//! | the ladder's client key | [`ladder::triple_key`], [`ladder::session_key`], [`ladder::CookieKeys::verify`] |
//! | what a request shows of its client | [`signals::LadderSignals::seen`] |
//! | the client's features and score (analyze's too) | [`client_window::ClientWindow::observed`], [`classifier::score`] |
//! | what a rung answers | [`ladder::answer`] |
//! | all of them for one request, in words | [`Policy::explain`] |
//!
//! The files are in folders by stage, each importing only the stages
//! above it in this table (and this file's re-exports keep every module's
//! path short: `crate::catalogue`, not `crate::identify::catalogue`):
//!
//! | folder | stage |
//! |---|---|
//! | `vocabulary.rs` | the words: purpose, verdict, action, door, rule |
//! | `input/` | the policy file as written, its problems, addresses, range files, robots.txt patterns |
//! | `decisions/` | the facet guard, the layers, the crawl budgets, the API quotas, the responses counted, the proportional classifier, a client's window and the ladder |
//! | `identify/` | who is asking: the catalogue, its matcher, the bot detector, feeds, the memo, ranges and DNS verdicts, and the action for them |
//! | `tables/` | the shared-memory tables: budgets, the DNS verdict cache and the ladder's clients |
//! | `sync/` | budget sync through a store, and the protocol it speaks |
//! | `validate.rs`, `api_tiers.rs`, `preferences.rs`, `robots_txt.rs` | the checked policy, its API tiers, the content-use preferences it says, and the robots.txt it publishes |
//! | `explain/`, `analyze/` | one request in words; a logged request's signals for `crawlward analyze` |

#![deny(clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

mod input;
use input::{checks, error, positions};
pub use input::{escape, model, net, ranges, robots};
mod identify;
use identify::{byte_class, trigrams};
pub use identify::{catalogue, claim, detector, directories, fcrdns, feeds, identity, matcher, signature, ua_cache};
mod decisions;
pub use decisions::{app_path, budget, classifier, client_window, ladder, layers, query, quota, responses};
mod tables;
use tables::slots;
pub use tables::{budget_table, client_table, layout, replay_table, verdict_cache};
mod explain;
pub use explain::decide;
mod analyze;
pub use analyze::signals;
pub mod sync;
pub use sync::resp;
pub mod api_tiers;
pub mod exposition;
pub mod preferences;
pub mod robots_txt;
mod validate;
mod vocabulary;

pub use catalogue::{Agent, Catalogue};
pub use decide::{Decision, Explanation, Request};
pub use error::{in_plain_words, Located, PolicyError, Problem};
pub use identity::{default_action, Identity, IdentityFile};
pub use positions::Position;
pub use validate::{
    downloaded, kept_feed, ladder_settings, load, load_str, load_str_with, load_with, shipped, Browse, BudgetSyncV, CrawlBudgetV, FeedV, Install, LoadOptions,
    Maintenance, ModuleDnsV, ModuleV, Policy, RateClassV, RateLimitsV, RobotsSource, RobotsV, SignaturesV, SiteV, VerifiedEnd,
};
pub use vocabulary::{Action, Door, Purpose, Rule, Verdict};

/// A random 64-bit value, from the kernel (`getrandom`): the seeds of the
/// memo's and the tables' hashes, a node's name in the store, the ladder's
/// client numbers. Not the standard library's `RandomState`: its keys are
/// drawn once a process and then counted up, so nginx's workers, forked from
/// a master that had drawn them, would each count the same values. Should
/// the kernel fail, those keys with the process id and the clock hashed in.
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((0x5eed_u64, std::process::id(), now))
}
