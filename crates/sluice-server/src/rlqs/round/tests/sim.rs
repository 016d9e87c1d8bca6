//! The simulation the round's tests run: the hub's steps over one bucket (a report's
//! round, a tick every 200 ms that does nothing until the bucket is due, as
//! hub/shared_bucket.rs schedules it), Envoys modelled as Envoy 1.40 behaves
//! (`sluice_test_support::envoy_quota_client`), a fixed-window limit as the store, and
//! the bounds every run must keep.

use super::super::divide;
use crate::rlqs::assignment::actions;
use crate::rlqs::holder::Usage;
use crate::rlqs::payer::QuotaPayer;
use crate::rlqs::shares::{Assignment, BucketShares, StreamId};
use crate::rlqs::timing::{EDGE_MARGIN, TICK, Timing, Windows};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use futures_util::FutureExt;
use parking_lot::Mutex;
use sluice_core::{Alignment, Clock, FixedWindow, Key, Limit, ManualClock, StoreError, Timestamp};
use sluice_test_support::envoy_quota_client::{self as envoy_model, Blanket, EnvoyBucket};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A fixed-window limit as a store holds it: what each window has used.
pub(super) struct Budget {
    pub(super) limit: u64,
    pub(super) windows: Windows,
    pub(super) clock: ManualClock,
    pub(super) used: Mutex<HashMap<u64, u64>>,
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

/// One simulated Envoy: its bucket, as Envoy 1.40 holds it.
pub(super) struct SimEnvoy {
    bucket: EnvoyBucket,
    pub(super) silent: bool,
    /// An assignment of Sluice's reached it.
    answered: bool,
    /// Requests its fallback let through after Sluice's first answer.
    fell_back: u64,
    /// Shares it received: (tokens, from, until).
    shares: Vec<(u64, Timestamp, Timestamp)>,
}

/// `now` as the model of Envoy counts time.
fn envoy_time(now: Timestamp) -> Duration {
    Duration::from_micros(now.as_micros())
}

/// Something the simulation does at a given time.
#[derive(Clone, Debug)]
enum Event {
    Tick,
    Report(usize),
    Deliver(usize, Vec<(Assignment, Timestamp)>),
}

/// The simulation: the hub's steps over one bucket, Envoys and a budget.
pub(super) struct Sim {
    shares: BucketShares,
    budget: Budget,
    pub(super) envoys: Vec<SimEnvoy>,
    latency: Duration,
    timing: Timing,
    report_every: Duration,
    events: BTreeMap<(Timestamp, u64), Event>,
    sequence: u64,
    /// When the hub's tick next has something to do for the bucket, and may next divide it.
    due_at: Timestamp,
    next_round: Timestamp,
    /// Requests let through by Envoys in each window, under Sluice's assignments.
    pub(super) admitted: HashMap<u64, u64>,
    rls: HashMap<u64, u64>,
}

impl Sim {
    pub(super) fn new(budget: Budget, envoys: usize, timing: Timing, latency: Duration, allow_unassigned: bool) -> Sim {
        let now = budget.clock.now();
        let fallback = if allow_unassigned { Blanket::AllowAll } else { Blanket::DenyAll };
        let envoy = || SimEnvoy {
            bucket: EnvoyBucket::new(fallback, None),
            silent: false,
            answered: false,
            fell_back: 0,
            shares: Vec::new(),
        };
        let mut sim = Sim {
            shares: BucketShares::new(budget.windows, timing),
            budget,
            envoys: (0..envoys).map(|_| envoy()).collect(),
            latency,
            timing,
            report_every: timing.report_interval,
            events: BTreeMap::new(),
            sequence: 0,
            due_at: Timestamp::EPOCH,
            next_round: Timestamp::EPOCH,
            admitted: HashMap::new(),
            rls: HashMap::new(),
        };
        sim.schedule(now.saturating_add(TICK), Event::Tick);
        sim
    }

    pub(super) fn now(&self) -> Timestamp {
        self.budget.clock.now()
    }

    fn schedule(&mut self, at: Timestamp, event: Event) {
        self.sequence += 1;
        self.events.insert((at, self.sequence), event);
    }

    /// Runs every event up to `until`, then sets the clock there.
    pub(super) fn advance_to(&mut self, until: Timestamp) {
        while let Some(entry) = self.events.first_entry() {
            let (at, _) = *entry.key();
            if at > until {
                break;
            }
            let event = entry.remove();
            self.budget.clock.set(at);
            self.run(event);
        }
        self.budget.clock.set(until);
    }

    fn run(&mut self, event: Event) {
        let now = self.now();
        match event {
            Event::Tick => {
                self.tick(now);
                self.schedule(now.saturating_add(TICK), Event::Tick);
            }
            Event::Report(envoy) => {
                self.report(envoy, now);
                self.schedule(now.saturating_add(self.report_every), Event::Report(envoy));
            }
            Event::Deliver(envoy, assignments) => self.deliver(envoy, &assignments, now),
        }
    }

    /// The hub's tick: drop the stale, renew, re-divide when due.
    fn tick(&mut self, now: Timestamp) {
        // As the hub schedules each bucket (hub/shared_bucket.rs): nothing until it is due.
        if now < self.due_at {
            return;
        }
        for stream in self.shares.drop_stale(now) {
            // Only a silent Envoy goes stale, and it hears nothing more.
            assert!(self.envoys[usize::try_from(stream).unwrap()].silent, "an Envoy that reports went stale");
        }
        let renewed = self.shares.renew(now);
        self.send(renewed, now);
        if now >= self.next_round {
            self.round(now);
        }
        self.due_at = self.shares.next_due(now, self.next_round);
    }

    /// An Envoy's periodic usage report, taken in by the hub.
    fn report(&mut self, envoy: usize, now: Timestamp) {
        let sim = &mut self.envoys[envoy];
        if sim.silent {
            return;
        }
        if let Some(usage) = sim.bucket.report(envoy_time(now)) {
            self.take_in(envoy, usage, now);
        }
    }

    /// The hub takes in `usage` of `envoy`: what no grant paid for is taken now.
    fn take_in(&mut self, envoy: usize, usage: envoy_model::Usage, now: Timestamp) {
        let usage = Usage { allowed: usage.allowed, denied: usage.denied, elapsed: usage.elapsed };
        let unpaid = self.shares.report(envoy as StreamId, now, usage);
        self.budget.take(key(), &limit(), unpaid).now_or_never().unwrap().unwrap();
        let due = self.shares.renew_one(envoy as StreamId, now);
        self.send(due.map(|due| (envoy as StreamId, due)).into_iter().collect(), now);
        self.round(now);
    }

    /// A division round; one that assigns no share puts the next off by a second (at most
    /// to the window's end), as the hub does.
    fn round(&mut self, now: Timestamp) {
        let (assigned, error) = divide(&mut self.shares, &self.budget, key(), &limit(), now).now_or_never().unwrap();
        assert!(error.is_none());
        if !assigned.iter().any(|(_, assignment)| assignment.tokens() > 0) {
            let retry = now.saturating_add(Duration::from_secs(1));
            self.next_round = retry.min(self.shares.window_end(now));
        }
        self.send(assigned, now);
        self.due_at = self.shares.next_due(now, self.next_round);
    }

    /// Sends each Envoy its assignments, as one response arriving after the latency.
    fn send(&mut self, assigned: Vec<(StreamId, Assignment)>, now: Timestamp) {
        let mut by_envoy: BTreeMap<usize, Vec<(Assignment, Timestamp)>> = BTreeMap::new();
        for (stream, assignment) in assigned {
            by_envoy.entry(usize::try_from(stream).unwrap()).or_default().push((assignment, now));
        }
        for (envoy, assignments) in by_envoy {
            self.schedule(now.saturating_add(self.latency), Event::Deliver(envoy, assignments));
        }
    }

    fn deliver(&mut self, envoy: usize, assignments: &[(Assignment, Timestamp)], now: Timestamp) {
        let windows = self.budget.windows;
        let id = BucketId { bucket: [("k".to_owned(), "v".to_owned())].into() };
        let sim = &mut self.envoys[envoy];
        if sim.silent {
            return;
        }
        for (assignment, sent) in assignments {
            if let Assignment::Share { tokens, ttl, .. } = *assignment {
                assert!(sent.saturating_add(ttl + EDGE_MARGIN) <= windows.end(*sent), "a share outlives its window");
                sim.shares.push((tokens, now, now.saturating_add(ttl)));
            }
            for action in actions(&id, assignment) {
                sim.bucket.apply(envoy_time(now), &action);
            }
        }
        sim.answered = true;
    }

    /// `count` requests at `envoy`, at the clock's time; the first creates its bucket and
    /// reports it at once, as Envoy does, and its periodic reports follow.
    pub(super) fn requests(&mut self, envoy: usize, count: u8) {
        let now = self.now();
        let window = self.budget.windows.index(now);
        for _ in 0..count {
            let sim = &mut self.envoys[envoy];
            let assigned = sim.bucket.is_assigned(envoy_time(now));
            let allowed = sim.bucket.request(envoy_time(now));
            if allowed && assigned {
                *self.admitted.entry(window).or_default() += 1;
            }
            sim.fell_back += u64::from(allowed && !assigned && sim.answered);
            if let Some(usage) = sim.bucket.take_creation_report().filter(|_| !sim.silent) {
                self.take_in(envoy, usage, now);
                self.schedule(now.saturating_add(self.report_every), Event::Report(envoy));
            }
        }
    }

    /// Sluice restarts at once: its shares are forgotten, responses in flight are lost with
    /// the streams, and each Envoy is answered anew from its next report (the stream
    /// reopens with it), its assignments meanwhile running on.
    pub(super) fn restart(&mut self) {
        self.shares = BucketShares::new(self.budget.windows, self.timing);
        (self.due_at, self.next_round) = (Timestamp::EPOCH, Timestamp::EPOCH);
        self.events.retain(|_, event| !matches!(event, Event::Deliver(..)));
        for envoy in &mut self.envoys {
            envoy.answered = false;
        }
    }

    pub(super) fn rls(&mut self, count: u8) {
        let window = self.budget.windows.index(self.now());
        for _ in 0..count {
            if self.budget.take(key(), &limit(), 1).now_or_never().unwrap().unwrap() == 1 {
                *self.rls.entry(window).or_default() += 1;
            }
        }
    }

    pub(super) fn assert_bounds(&self) {
        let limit = self.budget.limit;
        for (window, admitted) in &self.admitted {
            let rls = self.rls.get(window).copied().unwrap_or(0);
            assert!(admitted + rls <= limit, "window {window}: {admitted} by Envoys + {rls} by RLS > {limit}");
        }
        let windows = self.budget.windows;
        let mut granted: HashMap<u64, u64> = HashMap::new();
        for (tokens, from, until) in self.envoys.iter().flat_map(|envoy| &envoy.shares) {
            for window in windows.index(*from)..=windows.index(*until) {
                *granted.entry(window).or_default() += tokens;
            }
        }
        for (window, granted) in granted {
            let rls = self.rls.get(&window).copied().unwrap_or(0);
            assert!(granted + rls <= limit, "window {window}: shares of {granted} + {rls} by RLS > {limit}");
        }
        for (index, envoy) in self.envoys.iter().enumerate().filter(|(_, envoy)| !envoy.silent) {
            assert_eq!(envoy.fell_back, 0, "Envoy {index} fell back to ALLOW_ALL while it reported");
        }
    }
}
