//! Random lease traces, and the memory-vs-Redis comparison of leases and give-backs, shared
//! by the differential tests of the store (scripts, standalone and Cluster) and of the
//! module.

use crate::compare::case_name;
use proptest::prelude::*;
use sluice_core::{Check, GiveBack, Key, Limit, ManualClock, MemoryStore, Receipt, Store, Timestamp};
use sluice_redis::RedisStore;
use std::time::Duration;

/// One step of a lease trace: a check of `cost` asking `lease` more units, `step` µs after
/// the last; then, maybe, `units` given back of one of the leases granted and not given
/// back yet (the `pick`-th).
#[derive(Clone, Debug)]
pub struct LeaseStep {
    /// µs after the last step.
    pub step: i64,
    /// The request's cost.
    pub cost: u64,
    /// Units asked beyond it.
    pub lease: u64,
    /// Which outstanding lease to give back (`pick`), and how many units.
    pub back: Option<(prop::sample::Index, u64)>,
}

/// The lease period the traces ask for.
pub const PERIOD: Duration = Duration::from_millis(100);

/// Lease traces: steps within a lease period too (so that a state holds several leases at
/// once), leases given back in any order, or never (so that leases also end unreported).
pub fn lease_trace() -> impl Strategy<Value = Vec<LeaseStep>> {
    let step = prop_oneof![2 => 0i64..400_000, 1 => 0i64..100];
    let back = prop::option::weighted(0.6, (any::<prop::sample::Index>(), 0u64..8));
    let step =
        (step, 1u64..4, 0u64..6, back).prop_map(|(step, cost, lease, back)| LeaseStep { step, cost, lease, back });
    prop::collection::vec(step, 1..40)
}

/// Where the traces start: far below 2^53, so that every lease's deadline computes exactly.
pub fn lease_start() -> impl Strategy<Value = u64> {
    1u64 << 50..1u64 << 51
}

/// A lease granted and not given back yet: each store's receipts, and its size.
struct Outstanding {
    memory: Vec<Receipt>,
    redis: Vec<Receipt>,
    leased: u64,
}

/// Both stores and the key a trace checks.
struct Stores<'a> {
    runtime: &'a tokio::runtime::Runtime,
    redis: &'a RedisStore,
    memory: MemoryStore,
    key: Key<'a>,
    limits: &'a [Limit],
}

impl Stores<'_> {
    /// A check asking a lease, on both stores: the same answer, and the lease granted by both.
    #[allow(clippy::unwrap_used)] // a memory check that fails is the test's own bug
    fn lease(&self, now: u64, step: &LeaseStep) -> Result<Option<Outstanding>, String> {
        let (key, limits) = (self.key, self.limits);
        let check = Check::new(key, limits, Timestamp::from_micros(now), step.cost).lease(step.lease, PERIOD);
        let expected = self.memory.check_and_lease_now(check).unwrap();
        let got = self.runtime.block_on(self.redis.check_and_lease(check)).map_err(|error| format!("{error:?}"))?;
        if got.verdict.source.is_without_store() {
            return Err(format!("Redis did not decide ({:?})", got.verdict.source));
        }
        if (got.verdict.decision, &got.leased, got.decided_at)
            != (expected.verdict.decision, &expected.leased, expected.decided_at)
        {
            return Err(format!("lease at {now}:\n memory {expected:?}\n redis  {got:?}"));
        }
        let Some(decided_at) = expected.decided_at else { return Ok(None) };
        // Each store's own receipts: Redis stamps its windows' states, the memory store not.
        let receipts = |stamps: &[u64]| -> Vec<Receipt> {
            let terms =
                limits.iter().zip(&expected.leased).map(|(limit, leased)| (limit.policy().lease_terms(), leased));
            let debited = terms.map(|(terms, decision)| terms.debited_in(decision, decided_at, PERIOD));
            let stamp = |index: usize| stamps.get(index).copied().unwrap_or(0);
            debited.enumerate().map(|(index, debited_in)| Receipt { debited_in, stamp: stamp(index) }).collect()
        };
        Ok(Some(Outstanding { memory: receipts(&expected.stamps), redis: receipts(&got.stamps), leased: step.lease }))
    }

    /// `units` of `lease` given back at `now` to both stores, then a peek at both.
    #[allow(clippy::unwrap_used)] // a memory check that fails is the test's own bug
    fn give_back(&self, now: u64, lease: &Outstanding, units: u64) -> Result<(), String> {
        let (key, limits, at) = (self.key, self.limits, Timestamp::from_micros(now));
        self.memory.give_back_now(GiveBack::new(key, limits, &lease.memory, lease.leased, units, at));
        let give_back = GiveBack::new(key, limits, &lease.redis, lease.leased, units, at);
        self.runtime.block_on(self.redis.give_back(give_back)).map_err(|error| format!("{error:?}"))?;
        let expected = self.memory.check_now(key, limits, at, 0).unwrap();
        let got = self.runtime.block_on(self.redis.check(Check::new(key, limits, at, 0)));
        let got = got.map_err(|error| format!("{error:?}"))?;
        if got.decision != expected.decision {
            return Err(format!("peek after giving {units} back at {now}:\n memory {expected:?}\n redis  {got:?}"));
        }
        Ok(())
    }
}

/// Runs `trace` through a fresh memory store and `redis`: leases, and give-backs of some of
/// them (in any order, or never) where the algorithm's terms place them, on the memory store
/// (the core's `Algorithm::give_back`) and on Redis (the scripts or the module, which read
/// each limit's wire form): every answer the same, and a peek after each give-back too.
/// Returns the first mismatch.
#[allow(clippy::unwrap_used)] // a key that cannot be made is the test's own bug
pub fn compare_leases(
    runtime: &tokio::runtime::Runtime,
    redis: &RedisStore,
    limits: &[Limit],
    start: u64,
    trace: &[LeaseStep],
) -> Result<(), String> {
    let memory = MemoryStore::builder().clock(ManualClock::default()).build();
    let key_text = format!("{}-leased", case_name());
    let stores = Stores { runtime, redis, memory, key: Key::new(key_text.as_bytes()).unwrap(), limits };
    let (mut now, mut outstanding) = (start, Vec::new());
    for (index, step) in trace.iter().enumerate() {
        now = now.saturating_add_signed(step.step);
        outstanding.extend(stores.lease(now, step).map_err(|error| format!("step {index}: {error}"))?);
        if let Some((pick, units)) = step.back
            && !outstanding.is_empty()
        {
            let lease = outstanding.remove(pick.index(outstanding.len()));
            stores.give_back(now, &lease, units).map_err(|error| format!("step {index}: {error}"))?;
        }
    }
    Ok(())
}
