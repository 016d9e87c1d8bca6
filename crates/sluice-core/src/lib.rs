#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod algorithm;
#[cfg(feature = "yaml")]
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
mod decision;
pub mod lease;
mod limit;
mod limiter;
mod policy;
pub mod store;
mod time;

pub use algorithm::Algorithm;
pub use algorithm::fixed_window::{Alignment, FixedWindow};
pub use algorithm::leaky_bucket::{LeakMode, LeakyBucket};
pub use algorithm::sliding_log::{SlidingLog, SlidingLogVariant};
pub use algorithm::sliding_window::{SlidingWindow, SlidingWindowSettings, SlidingWindowVariant};
pub use algorithm::token_bucket::{TokenBucket, TokenBucketSettings};
pub use algorithm::{EXACT_LIMIT, ParameterProblem, PolicyError};
#[cfg(feature = "yaml")]
pub use config::{Config, ConfigError};
pub use decision::{Decision, Quota, RetryAfter};
pub use limit::{DefinitionError, Key, KeyError, Limit, LimitId};
pub use limiter::{BuildError, CheckError, RateLimiter, RateLimiterBuilder};
pub use policy::Policy;
pub use policy::wire::{WireError, WirePolicy};
pub use store::memory::{MemoryStore, MemoryStoreBuilder, RestoreReport, SnapshotError};
pub use store::{Check, GiveBack, LeaseAnswer, Receipt, Source, Store, StoreError, Verdict};
pub use time::{Clock, ManualClock, SystemClock, Timestamp};

/// docs/leases.md, whose Rust snippets run as this crate's doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/leases.md")]
pub struct LeasesGuide;
