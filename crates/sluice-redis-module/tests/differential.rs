//! Module vs scripts vs memory: the same random traces through `SLUICE.CHECK`, the Lua
//! scripts `sluice-redis` runs, and the memory store give the same decisions, every field;
//! after every request the module's keys hold the scripts' bytes and expire when theirs do.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use proptest::prelude::*;
use sluice_core::{Key, Limit, ManualClock, MemoryStore, Timestamp, Verdict};
use sluice_test_support::compare::{case_name, long_log, long_trace, policy, start_time, trace};
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
