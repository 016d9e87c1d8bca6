//! The bound on the sum of shares, against random reports, requests, RLS checks and
//! times: Envoys modelled as Envoy 1.40 behaves (a token bucket created full when an
//! assignment differs from the one in force, kept when it repeats, refusing once its
//! time to live is over), a fixed-window limit as the store, and the hub's steps.
//!
//! Asserted, for every window `w` of the limit (docs/service.md, "RLQS"):
//! requests let through in `w` by every Envoy + RLS checks admitted in `w` ≤ limit, and
//! Σ tokens of the grants whose lifetime meets `w` + RLS admitted in `w` ≤ limit.

use super::divide;
use crate::rlqs::holder::Usage;
use crate::rlqs::payer::QuotaPayer;
use crate::rlqs::shares::{Assignment, BucketShares, StreamId};
use crate::rlqs::timing::{EDGE_MARGIN, Timing, Windows};
use futures_util::FutureExt;
use parking_lot::Mutex;
use proptest::prelude::*;
use sluice_core::{Alignment, Clock, FixedWindow, Key, Limit, ManualClock, StoreError, Timestamp};
use std::collections::HashMap;
use std::time::Duration;

/// A fixed-window limit as a store holds it: what each window has used.
struct Budget {
    limit: u64,
    windows: Windows,
    clock: ManualClock,
    used: Mutex<HashMap<u64, u64>>,
}

impl Budget {
    fn left(&self) -> u64 {
        let used = self.used.lock().get(&self.windows.index(self.clock.now())).copied().unwrap_or(0);
        self.limit - used
    }
}

impl QuotaPayer for Budget {
    async fn remaining(&self, _: Key<'_>, _: &Limit) -> Result<u64, StoreError> {
        Ok(self.left())
    }

    async fn take(&self, _: Key<'_>, _: &Limit, tokens: u64) -> Result<u64, StoreError> {
        let taken = tokens.min(self.left());
        *self.used.lock().entry(self.windows.index(self.clock.now())).or_default() += taken;
        Ok(taken)
    }
}

/// The state key and limit the budget ignores (it is the one limit).
fn key() -> Key<'static> {
    Key::new(b"k").unwrap()
}

fn limit() -> Limit {
    Limit::new("test", FixedWindow::new(1, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO).unwrap())
}

/// One Envoy's bucket, as Envoy 1.40 keeps it.
#[derive(Default)]
struct ModelEnvoy {
    /// (tokens, generation, fill interval) in force, until when (Envoy's own clock).
    params: Option<(u64, bool, Duration)>,
    expires: Timestamp,
    tokens: f64,
    rate: f64,
    refilled_at: Timestamp,
    allowed: u64,
    denied: u64,
    reported_at: Timestamp,
    silent: bool,
    /// Grants (tokens, from, until), renewals extending the last.
    grants: Vec<(u64, Timestamp, Timestamp)>,
}

impl ModelEnvoy {
    fn assign(&mut self, assignment: &Assignment, received: Timestamp) {
        let params = (assignment.tokens, assignment.generation, assignment.fill_interval);
        let until = received.saturating_add(assignment.ttl);
        if self.params == Some(params) && self.expires > received {
            self.grants.last_mut().unwrap().2 = until;
        } else {
            self.params = Some(params);
            self.tokens = assignment.tokens as f64;
            self.rate = f64::from(1 + u8::from(assignment.generation)) / assignment.fill_interval.as_secs_f64();
            self.refilled_at = received;
            self.grants.push((assignment.tokens, received, until));
        }
        self.expires = until;
    }

    fn request(&mut self, now: Timestamp) -> bool {
        let Some((max, ..)) = self.params.filter(|_| now < self.expires) else {
            self.denied += 1;
            return false;
        };
        let elapsed = now.saturating_since(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(max as f64);
        self.refilled_at = now;
        let allowed = self.tokens >= 1.0;
        if allowed {
            self.tokens -= 1.0;
            self.allowed += 1;
        } else {
            self.denied += 1;
        }
        allowed
    }
}

#[derive(Clone, Debug)]
enum Step {
    Requests { envoy: usize, count: u8 },
    Report { envoy: usize },
    Tick,
    Rls { count: u8 },
    Silence { envoy: usize },
}

fn step() -> impl Strategy<Value = (u64, Step)> {
    let kind = prop_oneof![
        4 => (0..3usize, 0..4u8).prop_map(|(envoy, count)| Step::Requests { envoy, count }),
        3 => (0..3usize).prop_map(|envoy| Step::Report { envoy }),
        4 => Just(Step::Tick),
        1 => (0..3u8).prop_map(|count| Step::Rls { count }),
        1 => (0..3usize).prop_map(|envoy| Step::Silence { envoy }),
    ];
    (0..3_000u64, kind)
}

/// The simulation: the hub's steps over one bucket, three Envoys and a budget.
struct Run {
    shares: BucketShares,
    budget: Budget,
    envoys: Vec<ModelEnvoy>,
    latency: Duration,
    admitted: HashMap<u64, u64>,
    rls: HashMap<u64, u64>,
}

impl Run {
    fn deliver(&mut self, assigned: Vec<(StreamId, Assignment)>, now: Timestamp) {
        let windows = self.budget.windows;
        for (stream, assignment) in assigned {
            assert!(
                now.saturating_add(assignment.ttl + EDGE_MARGIN) <= windows.end(now),
                "an assignment outlives its window"
            );
            let envoy = &mut self.envoys[usize::try_from(stream).unwrap()];
            if !envoy.silent {
                envoy.assign(&assignment, now.saturating_add(self.latency));
            }
        }
    }

    fn round(&mut self, now: Timestamp) {
        let (assigned, error) = divide(&mut self.shares, &self.budget, key(), &limit(), now).now_or_never().unwrap();
        assert!(error.is_none());
        self.deliver(assigned, now);
    }

    fn step(&mut self, step: &Step, now: Timestamp) {
        let window = self.budget.windows.index(now);
        match *step {
            Step::Requests { envoy, count } => {
                for _ in 0..count {
                    if self.envoys[envoy].request(now) {
                        *self.admitted.entry(window).or_default() += 1;
                    }
                }
            }
            Step::Report { envoy } if !self.envoys[envoy].silent => {
                let model = &mut self.envoys[envoy];
                let usage = Usage {
                    allowed: model.allowed,
                    denied: model.denied,
                    elapsed: now.saturating_since(model.reported_at),
                };
                (model.allowed, model.denied, model.reported_at) = (0, 0, now);
                // As the hub does: what no grant paid for is taken now (here only usage
                // reported after its grant's credit lapsed: counted twice, never missed).
                let unpaid = self.shares.report(envoy as StreamId, now, usage);
                self.budget.take(key(), &limit(), unpaid).now_or_never().unwrap().unwrap();
                self.round(now);
            }
            Step::Report { .. } => {}
            Step::Tick => {
                // Abandoned, Envoy drops the bucket with its usage counts.
                for stream in self.shares.drop_stale(now) {
                    let envoy = &mut self.envoys[usize::try_from(stream).unwrap()];
                    (envoy.params, envoy.allowed, envoy.denied) = (None, 0, 0);
                }
                let renewed = self.shares.renew(now);
                self.deliver(renewed, now);
                self.round(now);
            }
            Step::Rls { count } => {
                for _ in 0..count {
                    if self.budget.take(key(), &limit(), 1).now_or_never().unwrap().unwrap() == 1 {
                        *self.rls.entry(window).or_default() += 1;
                    }
                }
            }
            Step::Silence { envoy } => self.envoys[envoy].silent = true,
        }
    }

    fn assert_bounds(&self) {
        let limit = self.budget.limit;
        for (window, admitted) in &self.admitted {
            let rls = self.rls.get(window).copied().unwrap_or(0);
            assert!(admitted + rls <= limit, "window {window}: {admitted} by Envoys + {rls} by RLS > {limit}");
        }
        let windows = self.budget.windows;
        let mut granted: HashMap<u64, u64> = HashMap::new();
        for (tokens, from, until) in self.envoys.iter().flat_map(|envoy| &envoy.grants) {
            for window in windows.index(*from)..=windows.index(*until) {
                *granted.entry(window).or_default() += tokens;
            }
        }
        for (window, granted) in granted {
            let rls = self.rls.get(&window).copied().unwrap_or(0);
            assert!(granted + rls <= limit, "window {window}: shares of {granted} + {rls} by RLS > {limit}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn shares_never_sum_above_the_limit_in_any_window(
        limit in 1..40u64,
        window_secs in prop_oneof![Just(2u64), Just(5), Just(60)],
        report_secs in 1..6u64,
        latency_ms in 0..200u64,
        start_ms in 0..120_000u64,
        steps in proptest::collection::vec(step(), 1..200),
    ) {
        let windows = Windows::new(Duration::from_secs(window_secs)).unwrap();
        let clock = ManualClock::at(Timestamp::from_micros(1_700_000_000_000_000 + start_ms * 1000));
        let budget = Budget { limit, windows, clock: clock.clone(), used: Mutex::new(HashMap::new()) };
        let timing = Timing { report_interval: Duration::from_secs(report_secs) };
        let envoys = (0..3).map(|_| ModelEnvoy { reported_at: clock.now(), ..ModelEnvoy::default() }).collect();
        let mut run = Run {
            shares: BucketShares::new(windows, timing),
            budget, envoys,
            latency: Duration::from_millis(latency_ms),
            admitted: HashMap::new(),
            rls: HashMap::new(),
        };
        for (advance_ms, step) in &steps {
            clock.advance(Duration::from_millis(*advance_ms));
            run.step(step, clock.now());
        }
        run.assert_bounds();
    }
}
