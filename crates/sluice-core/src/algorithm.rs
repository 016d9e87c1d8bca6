//! The shape every rate-limiting algorithm has: a pure state machine.
//!
//! # Adding an algorithm
//!
//! Every fact about one algorithm lives in its own file, as [`Algorithm`]'s methods; the
//! places below only dispatch to it or encode it for another process. Items 1 to 5 fail to
//! compile until the new algorithm has its part (a `match` over [`Policy`](crate::Policy), a
//! required trait method, or a trait bound of the one dispatch); items 6 and 7 are held by
//! tests; item 8 by nothing but review. A `match` on the policy's variants anywhere else
//! fails `tests/algorithm_homes.rs` (sluice-server), which reads this list.
//!
//! 1. `algorithm/<name>.rs`: the parameters, validated in the constructor, and
//!    [`Algorithm`] (`decide`, `record`, `records_rejections`, `lease_terms`,
//!    `decide_leased`, `give_back`,
//!    `expires_at`, `impossible`, `parameters`, `quota_window`, `look_ahead`) and
//!    `ReadParameters`, which reads the parameters from a configuration file and from a
//!    limit's definition by the names `parameters` writes.
//! 2. `policy.rs`: a variant of `Policy`, its arm in `with_algorithm!` (the core's one
//!    dispatch), `policy_from!`, and its configuration word in `READERS`.
//! 3. `policy/wire.rs`: its `Wire` impl (number and `p1..p4`, the form the Redis scripts and
//!    module receive) and its row in `DECODERS`.
//! 4. `store/memory/limit_table.rs`, `store/memory/keyed.rs` and
//!    `store/memory/codec/states.rs`: its table of states (a `LimitTable` variant), its
//!    state's `HeapSize` and `RecordResizing`, and its state's snapshot encoding (a new tag),
//!    with the states it can never hold.
//! 5. `sluice-redis-module`: `check/judge.rs`'s `judge`, `give_back.rs`'s `run` and a
//!    `Layout` in `layout/` (the same bytes as the Lua twin); `sluice-server`:
//!    `config/policy_text.rs` (its parameters in words) and `offline/playground.rs` (the
//!    counters it holds).
//! 6. Held by tests: `READERS` (the definition round trip in `limit/definition.rs` builds one
//!    limit per variant), `DECODERS` (the wire round trip in `policy/wire.rs`), and
//!    sluice-redis's Lua twin in `lua/` with its row in `lua/check.lua`'s `ALGORITHMS` and its
//!    lean script in `script.rs` (`the_scripts_follow_the_wire_numbers`), which then decides
//!    as the core in the differential tests (memory, scripts, module) once it is among
//!    `conformance::policies` and the generators of `policy/arbitrary.rs`. When its
//!    `lease_terms` grant leases, its Lua file's `*_give_back`, which `lua/give_back.lua`
//!    calls under its wire number, takes its units back
//!    (`give_back_follows_the_core_on_every_leased_algorithm`, sluice-redis).
//! 7. Held by tests too: an oracle in `tests/oracle/` written from `docs/semantics.md`.
//! 8. Held by nothing: the dashboard's JavaScript (`ui/playground.js`, `ui/timeline.js`,
//!    `ui/index.html`), which draws each algorithm's quota; `docs/semantics.md`'s
//!    definition and worked examples (`tests/worked_examples.rs` replays them);
//!    `docs/leases.md`'s table of what is leased; and the configuration words listed in
//!    `sluice-server`'s `http/api.rs`.

pub mod fixed_window;
mod holds;
pub mod leaky_bucket;
mod lease_terms;
mod parameters;
pub mod sliding_log;
pub mod sliding_window;
pub(crate) mod source;
pub mod token_bucket;

use crate::{Decision, Timestamp};
pub use holds::{Hold, Holds, Lease, MAX_HOLDS};
pub use lease_terms::{LeaseTerms, Returned};
pub use parameters::{EXACT_LIMIT, ParameterProblem, PolicyError};
use std::fmt;
use std::time::Duration;

/// One rate-limiting algorithm, as a pure state machine with no clock, lock or I/O.
///
/// A decision happens in two steps so that a check against several policies can be
/// all-or-nothing (docs/semantics.md): [`decide`](Algorithm::decide) judges the request without
/// touching the state, and once every policy has answered,
/// [`record`](Algorithm::record) applies the outcome. [`step`](Algorithm::step) chains the two
/// for a single policy, in the `decide(state, now, cost) -> (Decision, State)` form.
pub trait Algorithm {
    /// Per-key state. `Default` is the state of a key never seen before.
    type State: Clone + Default + fmt::Debug + Send + Sync + 'static;

    /// What `record` needs to apply a judged request without computing it again.
    type Plan: Copy + fmt::Debug;

    /// The algorithm's name in configuration files (`sliding_log`, `token_bucket`, …).
    fn name(&self) -> &'static str;

    /// The decision's `limit` (`N`, the capacity, or `burst + 1`): also the largest cost the
    /// algorithm can ever allow.
    fn limit(&self) -> u64;

    /// Every parameter, in a fixed order, as `(name, value)`: durations in whole
    /// microseconds under a name ending in `_us`, choices by their configuration word. A
    /// limit's identity is derived from this list, so it is part of the state layout:
    /// changing it orphans every stored state (see `docs/redis.md`).
    fn parameters(&self) -> Vec<(&'static str, String)>;

    /// The window the quota is announced over (the `w` of the IETF `RateLimit-Policy`
    /// field): the window of the logs and window counters, the time to refill a whole token
    /// bucket, the time a full leaky bucket takes to drain.
    fn quota_window(&self) -> Duration;

    /// How far past the time of a check the algorithm computes, at most. A store that
    /// computes in doubles (Redis) refuses a check whose time plus this is not below 2^53.
    fn look_ahead(&self) -> Duration;

    /// Judges a request of `cost` at `now` against `state`, changing nothing.
    ///
    /// `cost = 0` is a read-only query: it reports whether a cost-1 request would be
    /// allowed, with the current `remaining` and `reset_after`.
    fn decide(&self, state: &Self::State, now: Timestamp, cost: u64) -> (Decision, Self::Plan);

    /// Applies a judged request to `state`. `admitted` is true when every policy checked
    /// together allowed the request; a rejected request changes the state only where the
    /// algorithm's own rule records rejected attempts (the `attempts` variants).
    fn record(&self, state: &mut Self::State, plan: Self::Plan, admitted: bool);

    /// True when a rejected request still changes the state (the `attempts` variants of
    /// the sliding log and the sliding window), so a rejection is written like an admission
    /// and cannot be answered from a cache.
    fn records_rejections(&self) -> bool;

    /// What a quota lease of this algorithm may do (docs/leases.md): where the store's
    /// decision debits its units and how long they stay spendable, or why it cannot be
    /// leased exactly.
    fn lease_terms(&self) -> LeaseTerms;

    /// Judges a request of `cost` at `now` that also asks for `lease`, changing nothing: the
    /// decision for both together (allowed only when the lease fits too), whose plan
    /// [`record`](Self::record) applies. Algorithms leased by their window
    /// ([`LeaseTerms::Debited`]) judge `cost + lease.units` as one request; those whose store
    /// holds leases ([`LeaseTerms::Held`]) keep the units apart until `lease.deadline`.
    fn decide_leased(&self, state: &Self::State, now: Timestamp, cost: u64, lease: Lease) -> (Decision, Self::Plan);

    /// When `state` becomes equivalent to `Default` and may be dropped.
    fn expires_at(&self, state: &Self::State) -> Timestamp;

    /// Takes back a lease's unspent units, when `state` still holds the lease where it was
    /// debited ([`Returned::debited_in`]); changes nothing otherwise. Only the algorithms
    /// that can be leased ([`lease_terms`](Self::lease_terms)) take anything back; a window
    /// never takes back its last unit (a lease's first unit was spent there, so it stays
    /// live).
    fn give_back(&self, state: &mut Self::State, back: Returned);

    /// Why `state` cannot have been written by this algorithm, if it cannot (more counted
    /// than the limit allows, a malformed layout). Stores that read states from outside the
    /// process (snapshots, the Redis module) refuse these: the arithmetic relies on what it
    /// stores itself.
    fn impossible(&self, state: &Self::State) -> Option<String>;

    /// Decides and records one request checked alone: the pure form of the algorithm.
    fn step(&self, state: &Self::State, now: Timestamp, cost: u64) -> (Decision, Self::State) {
        let (decision, plan) = self.decide(state, now, cost);
        let mut next = state.clone();
        self.record(&mut next, plan, decision.allowed);
        (decision, next)
    }
}

/// [`Algorithm::decide`], or [`Algorithm::decide_leased`] when `lease` asks for units.
#[inline(always)]
pub(crate) fn decide_with<A: Algorithm>(
    algorithm: &A,
    state: &A::State,
    now: Timestamp,
    cost: u64,
    lease: Lease,
) -> (Decision, A::Plan) {
    if lease.units == 0 { algorithm.decide(state, now, cost) } else { algorithm.decide_leased(state, now, cost, lease) }
}

/// `what` holds `value`, more than `limit` allows, if it does: the message of
/// [`Algorithm::impossible`].
pub(crate) fn over(what: &str, value: u64, limit: u64) -> Option<String> {
    (value > limit).then(|| format!("{what} {value}, more than the limit of {limit}"))
}

/// `count` times `unit`, in whole microseconds, saturating (far beyond 2^53 µs).
pub(crate) fn micros_product(count: u64, unit: Duration) -> Duration {
    let micros = u128::from(count) * unit.as_micros();
    Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// The plan of the algorithms whose state is a small value: the state to store if the
/// request is admitted (`None` for a read-only query).
pub(crate) type Replacement<S> = Option<S>;

/// Stores `plan` into `state` when the request was admitted.
pub(crate) fn replace_if_admitted<S: Copy>(state: &mut S, plan: Replacement<S>, admitted: bool) {
    if let (true, Some(next)) = (admitted, plan) {
        *state = next;
    }
}
