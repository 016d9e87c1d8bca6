//! The bound on the sum of shares, against random requests, RLS checks, silences and
//! delays: the hub's steps (a report's round, a tick every 200 ms) over one bucket, three
//! Envoys modelled as Envoy 1.40 behaves (`sluice_test_support::envoy_quota_client`, which
//! tests/envoy_quota_client.rs measures against the real binary) that report every
//! interval and fall back to `ALLOW_ALL` or `DENY_ALL` when nothing is assigned, and a
//! fixed-window limit as the store.
//!
//! Asserted, for every window `w` of the limit (docs/service.md, "RLQS"):
//! requests let through in `w` under Sluice's assignments + RLS checks admitted in `w` ≤
//! limit; Σ tokens of the shares whose lifetime meets `w` + RLS admitted in `w` ≤ limit;
//! and an Envoy that reports never falls back once assigned (so `ALLOW_ALL` lets through
//! nothing Sluice did not pay for, but a new bucket's first requests).

mod sim;
mod utilisation;

use crate::rlqs::timing::{Timing, Windows};
use parking_lot::Mutex;
use proptest::prelude::*;
use sim::{Budget, Sim};
use sluice_core::{ManualClock, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Step {
    Requests { envoy: usize, count: u8 },
    Rls { count: u8 },
    Silence { envoy: usize },
    Restart,
}

fn step() -> impl Strategy<Value = (u64, Step)> {
    let kind = prop_oneof![
        8 => (0..3usize, 0..4u8).prop_map(|(envoy, count)| Step::Requests { envoy, count }),
        1 => (0..3u8).prop_map(|count| Step::Rls { count }),
        1 => (0..3usize).prop_map(|envoy| Step::Silence { envoy }),
        1 => Just(Step::Restart),
    ];
    (0..3_000u64, kind)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn shares_never_sum_above_the_limit_in_any_window_and_no_reporting_envoy_falls_back(
        limit in 1..40u64,
        window_secs in prop_oneof![Just(3u64), Just(5), Just(60)],
        report_secs in 1..6u64,
        latency_ms in 0..200u64,
        start_ms in 0..120_000u64,
        allow_unassigned in any::<bool>(),
        steps in proptest::collection::vec(step(), 1..200),
    ) {
        let windows = Windows::new(Duration::from_secs(window_secs)).unwrap();
        let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000 + start_ms * 1000));
        let budget = Budget { limit, windows, clock, used: Mutex::new(HashMap::new()) };
        let timing = Timing { report_interval: Duration::from_secs(report_secs) };
        let mut sim = Sim::new(budget, 3, timing, Duration::from_millis(latency_ms), allow_unassigned);
        for (advance_ms, step) in &steps {
            let until = sim.now().saturating_add(Duration::from_millis(*advance_ms));
            sim.advance_to(until);
            match *step {
                Step::Requests { envoy, count } => sim.requests(envoy, count),
                Step::Rls { count } => sim.rls(count),
                Step::Silence { envoy } => sim.envoys[envoy].silent = true,
                Step::Restart => sim.restart(),
            }
        }
        sim.assert_bounds();
    }
}
