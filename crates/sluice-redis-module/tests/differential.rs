//! Module vs scripts vs memory: the same random traces through `SLUICE.CHECK`, the Lua
//! scripts `sluice-redis` runs, and the memory store give the same decisions, every field;
//! after every request the module's keys hold the scripts' bytes and expire when theirs do.
//! Leases and give-backs (`SLUICE.GIVEBACK`) too.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use proptest::prelude::*;
use sluice_core::{
    Check, Decision, GiveBack, Key, Limit, ManualClock, MemoryStore, Receipt, SlidingLog, SlidingLogVariant, Timestamp,
    Verdict,
};
use sluice_test_support::compare::{case_name, long_log, long_trace, policy, start_time, trace};
use sluice_test_support::leases::{LeaseStep, PERIOD, lease_start, lease_trace};
use sluice_test_support::redis::RedisServer;
use std::cell::RefCell;

/// Added to every TTL: keys of injected-time traces must outlive the test, and an hour plus
/// the state's own lifetime (rounded up to ms) still shows that lifetime in the expiry.
const EXTRA_MS: u64 = 3_600_000;

/// Redis `TIME`: seconds and microseconds.
type Time = (u64, u64);

/// A connection, and the scripts it has loaded.
struct Twins {
    con: redis::Connection,
    loaded: std::collections::HashSet<String>,
}

impl Twins {
    /// One request through both: in one transaction, between two reads of Redis's clock, so
    /// that when both reads fall in one millisecond, both writes did too and their expiry
    /// must be equal to the millisecond.
    fn check(&mut self, limits: &[Limit], keys: &[String], packed: &[u8]) -> Result<Vec<u8>, String> {
        let source = harness::script(limits);
        let script = redis::Script::new(source);
        if self.loaded.insert(script.get_hash().to_owned()) {
            let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(source).query(&mut self.con).unwrap();
        }
        let module_keys: Vec<String> = keys.iter().map(|key| format!("m:{key}")).collect();
        let lua_keys: Vec<String> = keys.iter().map(|key| format!("l:{key}")).collect();
        let before = self.expiries(&module_keys, &lua_keys);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("TIME").cmd("SLUICE.CHECK").arg(&module_keys).arg(packed);
        pipe.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len()).arg(&lua_keys).arg(packed).cmd("TIME");
        let (start, module, lua, end): (Time, Vec<u8>, Vec<u8>, Time) =
            pipe.query(&mut self.con).map_err(|e| format!("{e}"))?;
        let cut = |reply: &[u8]| reply[..reply.len().saturating_sub(8)].to_vec();
        if cut(&module) != cut(&lua) {
            let (m, l) = (harness::numbers(&module), harness::numbers(&lua));
            return Err(format!("replies differ:\n module {m:?}\n script {l:?}"));
        }
        let ms = |(seconds, micros): Time| i64::try_from(seconds * 1000 + micros / 1000).unwrap();
        self.compare_states(&module_keys, &lua_keys, &before, ms(end) - ms(start))?;
        Ok(module)
    }

    /// One give-back through both, as [`check`](Self::check): `SLUICE.GIVEBACK` on the
    /// module's keys and the give-back script on the scripts', with the same bytes and
    /// expiry after.
    fn give_back(&mut self, keys: &[String], packed: &[u8]) -> Result<(), String> {
        let script = redis::Script::new(harness::GIVE_BACK);
        if self.loaded.insert(script.get_hash().to_owned()) {
            let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(harness::GIVE_BACK).query(&mut self.con).unwrap();
        }
        let module_keys: Vec<String> = keys.iter().map(|key| format!("m:{key}")).collect();
        let lua_keys: Vec<String> = keys.iter().map(|key| format!("l:{key}")).collect();
        let before = self.expiries(&module_keys, &lua_keys);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("TIME").cmd("SLUICE.GIVEBACK").arg(&module_keys).arg(packed);
        pipe.cmd("EVALSHA").arg(script.get_hash()).arg(keys.len()).arg(&lua_keys).arg(packed).cmd("TIME");
        let (start, module, lua, end): (Time, Vec<u8>, Vec<u8>, Time) =
            pipe.query(&mut self.con).map_err(|e| format!("{e}"))?;
        if module != lua {
            return Err(format!("give-back replies differ: module {module:?}, script {lua:?}"));
        }
        let ms = |(seconds, micros): Time| i64::try_from(seconds * 1000 + micros / 1000).unwrap();
        self.compare_states(&module_keys, &lua_keys, &before, ms(end) - ms(start))
    }

    /// `PEXPIRETIME` of every module key and its script twin.
    fn expiries(&mut self, module_keys: &[String], lua_keys: &[String]) -> Vec<(i64, i64)> {
        let mut pipe = redis::pipe();
        for (m, l) in module_keys.iter().zip(lua_keys) {
            pipe.cmd("PEXPIRETIME").arg(m).cmd("PEXPIRETIME").arg(l);
        }
        let flat: Vec<i64> = pipe.query(&mut self.con).unwrap();
        flat.chunks_exact(2).map(|pair| (pair[0], pair[1])).collect()
    }

    /// The same bytes, and the same expiry: a key both wrote expires as many ms later on
    /// the script's side as the script ran after the module (`spread` bounds it: 0 when both
    /// clock reads fell in one millisecond); a key neither wrote keeps its expiry.
    fn compare_states(
        &mut self,
        module_keys: &[String],
        lua_keys: &[String],
        before: &[(i64, i64)],
        spread: i64,
    ) -> Result<(), String> {
        let after = self.expiries(module_keys, lua_keys);
        for ((m, l), (&was, &(now_m, now_l))) in module_keys.iter().zip(lua_keys).zip(before.iter().zip(&after)) {
            let values: (Option<Vec<u8>>, Option<Vec<u8>>) =
                redis::pipe().cmd("GET").arg(m).cmd("GET").arg(l).query(&mut self.con).unwrap();
            if values.0 != values.1 {
                return Err(format!("{m} holds {:?}, the script's twin {:?}", values.0, values.1));
            }
            if (now_m, now_l) != was && !(0..=spread).contains(&(now_l - now_m)) {
                return Err(format!("{m} expires at {now_m}, the script's twin at {now_l} (were {was:?})"));
            }
        }
        Ok(())
    }
}

/// Twins behind a `RefCell`: proptest's body is a `Fn`.
fn twins(server: &RedisServer) -> RefCell<Twins> {
    RefCell::new(Twins { con: harness::connect(server), loaded: Default::default() })
}

/// Runs `trace` on two interleaved keys through the module, the scripts and a memory
/// store; returns the first difference.
fn compare(twins: &mut Twins, limits: &[Limit], start: u64, trace: &[(i64, u64)]) -> Result<(), String> {
    let memory = MemoryStore::builder().clock(ManualClock::default()).build();
    let case = case_name();
    let callers = [format!("{case}-key"), format!("{case}-other")];
    let mut now = start;
    for (index, &(step, cost)) in trace.iter().enumerate() {
        now = now.saturating_add_signed(step);
        let caller = &callers[usize::from(index % 3 == 2)];
        let keys: Vec<String> = (0..limits.len()).map(|i| format!("{{{caller}}}:{i}")).collect();
        let packed = harness::packed(limits, Some(now), cost, EXTRA_MS, 1);
        let reply = twins.check(limits, &keys, &packed).map_err(|e| format!("request {index} at {now}: {e}"))?;
        let numbers = harness::numbers(&reply);
        let decisions: Vec<_> = numbers[1..numbers.len() - 1].chunks_exact(7).map(harness::decision).collect();
        let got = Verdict::combine(&decisions).unwrap();
        let key = Key::new(caller.as_bytes()).unwrap();
        let expected = memory.check_now(key, limits, Timestamp::from_micros(now), cost).unwrap();
        if (got.decision, got.limit) != (expected.decision, expected.limit) {
            return Err(format!("request {index} at {now} cost {cost}:\n memory {expected:?}\n module {got:?}"));
        }
    }
    Ok(())
}

/// Runs a lease trace through the module, the scripts and a memory store: each check asks
/// its lease (decided with the request, else the request alone), and leases granted are
/// given back (some, in any order) through `SLUICE.GIVEBACK` and the give-back script; every
/// answer as the memory store's, and the module's keys the scripts' bytes and expiry after
/// every command.
fn compare_leases(twins: &mut Twins, limits: &[Limit], start: u64, trace: &[LeaseStep]) -> Result<(), String> {
    let memory = MemoryStore::builder().clock(ManualClock::default()).build();
    let caller = format!("{}-leased", case_name());
    let keys: Vec<String> = (0..limits.len()).map(|i| format!("{{{caller}}}:{i}")).collect();
    let key = Key::new(caller.as_bytes()).unwrap();
    let (mut now, mut outstanding) = (start, Vec::new());
    for (index, step) in trace.iter().enumerate() {
        now = now.saturating_add_signed(step.step);
        let period = u64::try_from(PERIOD.as_micros()).unwrap();
        // As the store: no lease is asked under a limit that cannot be leased exactly.
        let leasable = limits.iter().all(|limit| limit.policy().lease_terms().refusal().is_none());
        let lease = Some((step.lease, period)).filter(|_| step.lease > 0 && leasable);
        let packed = harness::packed_leasing(limits, Some(now), step.cost, lease, (EXTRA_MS, 1));
        let reply = twins.check(limits, &keys, &packed).map_err(|e| format!("step {index} at {now}: {e}"))?;
        let check = Check::new(key, limits, Timestamp::from_micros(now), step.cost).lease(step.lease, PERIOD);
        let expected = memory.check_and_lease_now(check).unwrap();
        let numbers = harness::numbers(&reply);
        let decisions: Vec<_> = numbers[1..=7 * limits.len()].chunks_exact(7).map(harness::decision).collect();
        let granted = lease.is_some() && numbers[1 + 7 * limits.len()] == 1;
        let got = if granted {
            (decisions.clone(), Verdict::combine(&decisions).unwrap().decision)
        } else {
            (Vec::new(), Verdict::combine(&decisions).unwrap().decision)
        };
        if got != (expected.leased.clone(), expected.verdict.decision) {
            return Err(format!("step {index} at {now}:\n memory {expected:?}\n module {got:?}"));
        }
        if granted {
            let stamps = &numbers[2 + 7 * limits.len()..numbers.len() - 1];
            let receipt = |(index, (limit, decision)): (usize, (&Limit, &Decision))| {
                let debited_in = limit.policy().lease_terms().debited_in(decision, Timestamp::from_micros(now), PERIOD);
                (limit.clone(), [debited_in, u64::try_from(stamps[index]).unwrap()])
            };
            outstanding.push((limits.iter().zip(&decisions).enumerate().map(receipt).collect::<Vec<_>>(), step.lease));
        }
        if let Some((pick, units)) = step.back
            && !outstanding.is_empty()
        {
            let (receipts, leased) = outstanding.remove(pick.index(outstanding.len()));
            let packed = harness::packed_give_back(&receipts, Some(now), (leased, units), (EXTRA_MS, 1));
            twins.give_back(&keys, &packed).map_err(|e| format!("give-back {index} at {now}: {e}"))?;
            let memory_receipts: Vec<Receipt> =
                receipts.iter().map(|(_, [debited_in, _])| Receipt { debited_in: *debited_in, stamp: 0 }).collect();
            let at = Timestamp::from_micros(now);
            memory.give_back_now(GiveBack::new(key, limits, &memory_receipts, leased, units, at));
        }
    }
    Ok(())
}

#[test]
fn leases_and_give_backs_decide_and_write_as_the_scripts() {
    let server = harness::start();
    let twins = twins(&server);
    let policies = prop::collection::vec(policy(), 1..3);
    proptest!(ProptestConfig::with_cases(250), |(policies in policies, start in lease_start(), trace in lease_trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare_leases(&mut twins.borrow_mut(), &limits, start, &trace), Ok(()), "{:?}", policies);
    });
}

/// A ring (a limit above 32) keeps its leases after its slots: leases end and leave the
/// window (the list shrinks in place, the room stays), new ones come, then the ring grows
/// and is rewritten with its list.
#[test]
fn a_ring_keeps_its_leases_beside_its_slots_as_the_scripts() {
    let server = harness::start();
    let mut twins = twins(&server).into_inner();
    let log = SlidingLog::new(100, std::time::Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap();
    let limits = [Limit::new("ring", log)];
    let step = |step, cost, lease| LeaseStep { step, cost, lease, back: None };
    let mut trace: Vec<LeaseStep> = (0..5).map(|_| step(10, 1, 2)).collect();
    trace.extend([step(1_200_000, 1, 0), step(10, 1, 1), step(10, 1, 1), step(10, 30, 1), step(10, 1, 0)]);
    assert_eq!(compare_leases(&mut twins, &limits, 1 << 50, &trace), Ok(()));
}

/// A sliding log's seventeenth lease moves the oldest one's units to the next deadline, in a
/// whole log and in a ring (whose list then shrinks in place), as the scripts and the core.
#[test]
fn a_sliding_logs_seventeenth_lease_merges_as_the_scripts() {
    let server = harness::start();
    let mut twins = twins(&server).into_inner();
    let step = |step, lease| LeaseStep { step, cost: 1, lease, back: None };
    let trace: Vec<LeaseStep> = (0..40).map(|_| step(4_000, 1)).chain((0..40).map(|_| step(1_000, 0))).collect();
    for limit in [32, 100] {
        let log = SlidingLog::new(limit, std::time::Duration::from_millis(10), SlidingLogVariant::Accepted).unwrap();
        let limits = [Limit::new("log", log)];
        assert_eq!(compare_leases(&mut twins, &limits, 1 << 50, &trace), Ok(()), "limit {limit}");
    }
}

#[test]
fn every_algorithm_decides_and_writes_as_the_scripts() {
    let server = harness::start();
    let twins = twins(&server);
    proptest!(ProptestConfig::with_cases(300), |(policy in policy(), start in start_time(), trace in trace())| {
        let limits = [Limit::new("p", policy.clone())];
        prop_assert_eq!(compare(&mut twins.borrow_mut(), &limits, start, &trace), Ok(()), "{:?}", policy);
    });
}

#[test]
fn several_limits_decide_and_write_as_the_scripts() {
    let server = harness::start();
    let twins = twins(&server);
    let policies = prop::collection::vec(policy(), 2..4);
    proptest!(ProptestConfig::with_cases(150), |(policies in policies, start in start_time(), trace in trace())| {
        let limits: Vec<Limit> =
            policies.iter().enumerate().map(|(i, p)| Limit::new(format!("p{i}"), p.clone())).collect();
        prop_assert_eq!(compare(&mut twins.borrow_mut(), &limits, start, &trace), Ok(()), "{:?}", policies);
    });
}

#[test]
fn long_sliding_logs_wrap_grow_and_shrink_as_the_scripts() {
    // Limits above 32 keep a ring: long traces wrap it, overwrite a full ring (`attempts`),
    // grow and shrink it.
    let server = harness::start();
    let twins = twins(&server);
    let (log, trace) = (long_log(), long_trace(50..300));
    proptest!(ProptestConfig::with_cases(80), |(log in log, start in start_time(), trace in trace)| {
        let limits = [Limit::new("log", log.clone())];
        prop_assert_eq!(compare(&mut twins.borrow_mut(), &limits, start, &trace), Ok(()), "{:?}", log);
    });
}
