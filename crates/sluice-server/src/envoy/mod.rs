//! Rate-limit rules in the envoyproxy/ratelimit YAML format, and their resolution for Envoy
//! rate-limit requests (a domain and descriptors), as envoyproxy/ratelimit resolves them.
//!
//! Pure: no I/O, no clock, no store. [`Rules::resolve`] says which [`sluice_core::Limit`] applies
//! to a descriptor and the [`StateKey`] to check it at; the caller asks its store.
//!
//! # Format
//!
//! A file of envoyproxy/ratelimit loads unchanged:
//!
//! ```yaml
//! domain: mongo_cps
//! descriptors:
//!   - key: database
//!     value: users                  # exact value
//!     rate_limit: {unit: second, requests_per_unit: 500}
//!   - key: remote_address           # no value: any value, each with its own counter
//!     rate_limit: {unit: minute, requests_per_unit: 10}
//!     shadow_mode: true             # count and report, but never refuse
//!   - key: path
//!     value: "/api/*"               # a trailing `*` matches any value with that prefix
//!     rate_limit: {unit: second, requests_per_unit: 5, name: api_paths}
//!   - key: source_cluster
//!     value: proxy
//!     descriptors:                  # nested: the request's next entry is matched here
//!       - key: destination_cluster
//!         rate_limit: {unlimited: true}
//! ```
//!
//! `unit` is `second`, `minute`, `hour`, `day` or `week`, in any case. A `rate_limit` becomes
//! a [`sluice_core::FixedWindow`] of `requests_per_unit` per unit, aligned to the Unix epoch as
//! envoyproxy/ratelimit's windows are, named by `rate_limit.name` or else by the rule's
//! [`path`](Rule::path) (`mongo_cps.database_users`). The limit's id hashes that name and the
//! parameters, so editing a rule starts its counters afresh while the others keep theirs.
//! `detailed_metric` is kept for the metrics ([`Rule::detailed_metric`]). `replaces` is
//! checked for shape and otherwise ignored: every descriptor of a request is checked
//! against its own rule.
//!
//! Sluice extends the format with several domains per file and named Sluice policies
//! (parsed by the caller from the same file's `policies` section):
//!
//! ```yaml
//! policies:
//!   api: {algorithm: token_bucket, capacity: 100, refill_amount: 10, refill_interval: 1s}
//! domains:
//!   - domain: edge
//!     descriptors:
//!       - key: api_key
//!         policy: api               # instead of rate_limit
//! ```
//!
//! # Differences from envoyproxy/ratelimit
//!
//! Loading is stricter, and reports every problem with its path at once:
//! `requests_per_unit` is required (ratelimit takes a missing one as 0, which blocks
//! everything); a `*` inside a value is refused rather than read literally; floats are
//! refused as keys or values (`1.50` would read as `1.5`); `month` and `year` are refused;
//! newer ratelimit fields (`share_threshold`, `value_to_metric`, `unit_multiplier`) are
//! refused by name. Keys and values are matched separately, so `key: a_b, value: c` and
//! `key: a, value: b_c` are different descriptors (ratelimit joins them with `_`). Wildcards
//! work at every level of nesting.

mod parse;
mod resolve;
mod rules;
mod state_key;
mod unit;

pub use resolve::{OVERRIDE_NAME, Resolution};
pub use rules::{Quota, Rule, Rules};
pub use state_key::StateKey;
pub use unit::Unit;
