//! The playground: a posted trace of requests, decided by the real algorithms on a
//! throwaway in-memory store, never on the service's own state.
//!
//! Each policy sees the whole trace on its own (not all or nothing), so that the page can
//! show several algorithms side by side on the same stream. Everything is bounded
//! ([`MAX_TRACE`], [`MAX_POLICIES`], [`MAX_COST`], [`MAX_OFFSET_US`], [`MAX_COUNTERS`],
//! [`level::MAX_LEVEL_POINTS`] and the API's body limit), so that a request cannot make the
//! service hold or compute much.
//!
//! Besides each decision, a run gives the remaining quota of the trace's first key over
//! time, stepping where the algorithm really gives quota back ([`level`]).

mod level;

use crate::micros::micros;
use level::{Level, LevelPoint};
use serde::{Deserialize, Serialize};
use sluice_config::ConfigError;
use sluice_core::{Key, Limit, ManualClock, MemoryStore, RetryAfter, Timestamp};
use utoipa::ToSchema;

/// The most requests one trace may hold.
pub(crate) const MAX_TRACE: usize = 2_000;
/// The most policies one trace may be decided under.
pub(crate) const MAX_POLICIES: usize = 8;
/// The largest cost of one request (a sliding log holds one entry per unit of cost).
pub(crate) const MAX_COST: u64 = 100;
/// The latest time a request may come at: 30 days after the trace's start.
pub(crate) const MAX_OFFSET_US: u64 = 30 * 86_400 * 1_000_000;
/// The most sliding-window counters a trace may make the playground hold (8 MB): such a
/// window holds `buckets + 1` counters for every key it sees.
pub(crate) const MAX_COUNTERS: u64 = 1_000_000;

/// Where a trace starts: midnight UTC (day 20 000 after the epoch), so that fixed windows
/// of a second, minute, hour or day start at offset 0.
const START: Timestamp = Timestamp::from_micros(20_000 * 86_400 * 1_000_000);

/// The key requests use when the trace names none.
const DEFAULT_KEY: &str = "playground";

/// Decide a trace of requests under some policies, on a fresh in-memory store.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlaygroundRequest {
    /// Policies by name, written as in the configuration file's `policies:` section
    /// (`docs/service.md`, "The configuration file"), such as `{"log": {"algorithm": "sliding_log", "limit": 3,
    /// "window": "1s"}}`. At most 8.
    #[schema(value_type = Object)]
    pub(crate) policies: serde_yaml_ng::Mapping,
    /// The requests, in time order. At most 2 000.
    pub(crate) trace: Vec<TracedRequest>,
}

/// One request of a trace.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TracedRequest {
    /// When it comes: µs after the trace's start (at most 30 days), never before the
    /// request listed before it.
    pub(crate) at_us: u64,
    /// Its cost (default 1, at most 100).
    #[serde(default = "one")]
    #[schema(default = 1, minimum = 0, maximum = 100)]
    pub(crate) cost: u64,
    /// The caller's key (default `playground`): requests with other keys have states of
    /// their own.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 1024)]
    pub(crate) key: Option<String>,
}

fn one() -> u64 {
    1
}

/// What each policy decided for each request of the trace.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PlaygroundResponse {
    /// One entry per policy, in the order they were posted.
    pub(crate) policies: Vec<PolicyRun>,
}

/// One policy's decisions on the whole trace.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PolicyRun {
    /// The policy's name.
    pub(crate) name: String,
    /// Its algorithm (`sliding_log`, `fixed_window`, `sliding_window`, `token_bucket`, `leaky_bucket`).
    pub(crate) algorithm: &'static str,
    /// Its limit (token bucket: capacity; leaky bucket: burst + 1).
    pub(crate) limit: u64,
    /// One decision per request of the trace, in trace order.
    pub(crate) decisions: Vec<TracedDecision>,
    /// The remaining quota of the first request's key over time, as peeks answer it: from
    /// each point's time until the next point's, `remaining` cost-1 requests would pass.
    /// It starts at 0, has a point at each of the key's requests and at each instant the
    /// algorithm gives quota back, and ends when the quota is whole again after the last
    /// request (or at the 4 000th point). An empty trace has the one point of a fresh key.
    pub(crate) level: Vec<LevelPoint>,
}

/// The decision for one request of a trace (durations in whole µs).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TracedDecision {
    /// When the request came, µs after the trace's start.
    pub(crate) at_us: u64,
    /// The request was allowed.
    pub(crate) allowed: bool,
    /// Cost-1 requests that would still pass right after it.
    pub(crate) remaining: u64,
    /// µs until all quota is back if no request came.
    pub(crate) reset_after_us: u64,
    /// µs until a request of the same cost could pass; null when allowed or never.
    pub(crate) retry_after_us: Option<u64>,
    /// The cost is more than the policy can ever allow.
    pub(crate) cost_exceeds_limit: bool,
    /// µs the caller should wait before proceeding (leaky bucket in `delay` mode).
    pub(crate) delay_us: u64,
}

/// Why a trace cannot be decided.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PlaygroundError {
    /// A bound is exceeded: the bound's name and what it allows.
    #[error("{0}")]
    TooLarge(String),
    /// The policies or the trace are invalid.
    #[error("{0}")]
    Invalid(String),
}

impl PlaygroundRequest {
    /// Decides the trace under every policy, each on its own fresh state.
    ///
    /// # Errors
    ///
    /// [`PlaygroundError::TooLarge`] past a bound (checked before any work),
    /// [`PlaygroundError::Invalid`] for policies the configuration file would refuse, or a
    /// trace out of order or with an invalid key.
    pub(crate) fn decide(&self) -> Result<PlaygroundResponse, PlaygroundError> {
        self.check_bounds()?;
        let limits = self.limits()?;
        let keys = self.keys()?;
        check_counters(&limits, &keys)?;
        // One shard (a trace is small), and a store clock that never moves: the trace's
        // times are its own, so no state may be dropped by the wall clock meanwhile.
        let store = MemoryStore::builder().shards(1).clock(ManualClock::at(Timestamp::EPOCH)).build();
        let policies = limits.iter().map(|limit| self.run(&store, limit, &keys)).collect();
        Ok(PlaygroundResponse { policies })
    }

    fn check_bounds(&self) -> Result<(), PlaygroundError> {
        let too_large = |message: String| Err(PlaygroundError::TooLarge(message));
        if self.policies.len() > MAX_POLICIES {
            return too_large(format!("max_policies: at most {MAX_POLICIES} policies, got {}", self.policies.len()));
        }
        if self.trace.len() > MAX_TRACE {
            return too_large(format!("max_trace: at most {MAX_TRACE} requests, got {}", self.trace.len()));
        }
        if let Some(request) = self.trace.iter().find(|request| request.cost > MAX_COST) {
            return too_large(format!("max_cost: a request costs at most {MAX_COST}, got {}", request.cost));
        }
        if let Some(request) = self.trace.iter().find(|request| request.at_us > MAX_OFFSET_US) {
            return too_large(format!(
                "max_offset: requests come at most {MAX_OFFSET_US} µs in, got {}",
                request.at_us
            ));
        }
        Ok(())
    }

    /// The policies, validated as the configuration file's are (the same messages).
    fn limits(&self) -> Result<Vec<Limit>, PlaygroundError> {
        let mut problems = ConfigError::default();
        let limits = sluice_core::config::parse_policies(&self.policies, &mut problems);
        problems.into_result(limits).map_err(|error| PlaygroundError::Invalid(error.to_string()))
    }

    /// Each request's key, checked; and the trace's order.
    fn keys(&self) -> Result<Vec<Key<'_>>, PlaygroundError> {
        let mut previous = 0;
        let mut keys = Vec::with_capacity(self.trace.len());
        for (index, request) in self.trace.iter().enumerate() {
            if request.at_us < previous {
                let message =
                    format!("trace[{index}].at_us: {} comes before the request listed before it", request.at_us);
                return Err(PlaygroundError::Invalid(message));
            }
            previous = request.at_us;
            let key = Key::new(request.key.as_deref().unwrap_or(DEFAULT_KEY).as_bytes())
                .map_err(|error| PlaygroundError::Invalid(format!("trace[{index}].key: {error}")))?;
            keys.push(key);
        }
        Ok(keys)
    }

    fn run(&self, store: &MemoryStore, limit: &Limit, keys: &[Key<'_>]) -> PolicyRun {
        // An empty trace still has a line: the default key's fresh quota.
        let first = keys.first().copied().or_else(|| Key::new(DEFAULT_KEY.as_bytes()).ok());
        let mut level = first.map(|key| Level::new(store, limit, key, START));
        // The times of the first key's requests, to know each one's next.
        let traced_times: Vec<u64> =
            self.trace.iter().zip(keys).filter(|(_, key)| Some(*key) == keys.first()).map(|(r, _)| r.at_us).collect();
        let mut decisions = Vec::with_capacity(self.trace.len());
        let mut followed = 0;
        for (request, key) in self.trace.iter().zip(keys) {
            let is_traced = Some(key) == keys.first();
            followed += usize::from(is_traced);
            let now = START.saturating_add(std::time::Duration::from_micros(request.at_us));
            let Ok(verdict) = store.check_now(*key, std::slice::from_ref(limit), now, request.cost) else {
                continue;
            };
            let decision = traced(request.at_us, &verdict.decision);
            if let Some(line) = level.as_mut().filter(|_| is_traced) {
                let whole_again = request.at_us.saturating_add(decision.reset_after_us);
                line.follow(request.at_us, traced_times.get(followed).copied().unwrap_or(whole_again));
            }
            decisions.push(decision);
        }
        let policy = limit.policy();
        PolicyRun {
            name: limit.name().to_owned(),
            algorithm: policy.algorithm_name(),
            limit: policy.limit(),
            decisions,
            level: level.map(Level::into_points).unwrap_or_default(),
        }
    }
}

/// Refuses a trace whose sliding windows would hold more than [`MAX_COUNTERS`] counters.
fn check_counters(limits: &[Limit], keys: &[Key<'_>]) -> Result<(), PlaygroundError> {
    let distinct_keys = keys.iter().collect::<std::collections::HashSet<_>>().len() as u64;
    let per_key: u64 = limits
        .iter()
        .filter_map(|limit| match limit.policy() {
            sluice_core::Policy::SlidingWindow(window) => Some(window.buckets() + 1),
            sluice_core::Policy::SlidingLog(_)
            | sluice_core::Policy::FixedWindow(_)
            | sluice_core::Policy::TokenBucket(_)
            | sluice_core::Policy::LeakyBucket(_) => None,
        })
        .sum();
    let counters = per_key.saturating_mul(distinct_keys);
    if counters > MAX_COUNTERS {
        return Err(PlaygroundError::TooLarge(format!(
            "max_counters: the sliding windows would hold {counters} counters ({per_key} per key, {distinct_keys} keys), at most {MAX_COUNTERS}"
        )));
    }
    Ok(())
}

fn traced(at_us: u64, decision: &sluice_core::Decision) -> TracedDecision {
    TracedDecision {
        at_us,
        allowed: decision.allowed,
        remaining: decision.remaining,
        reset_after_us: micros(decision.reset_after),
        retry_after_us: decision.retry_after_micros(),
        cost_exceeds_limit: decision.retry_after == Some(RetryAfter::Never),
        delay_us: micros(decision.delay),
    }
}

#[cfg(test)]
mod tests;
