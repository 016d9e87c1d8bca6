//! Whether Redis answers, and the outages a store has seen.
//!
//! Each connection has a [`Link`]: up while Redis answers it, down from the first check (or
//! probe) Redis fails until a probe succeeds. On a Cluster, each master has one more,
//! shared by the store's connections (`cluster::shards`): an outage of one master is an
//! outage of its slots only. While it is down, checks are answered by the
//! failure mode at once, without waiting for Redis, and a probe asks Redis again every
//! 100 ms. The [`Outages`] of a store (shared by its
//! connections, one per worker thread in the service) count what happened: an outage starts
//! when the first connection goes down and ends when the last is up again, with one log line
//! each.

use crate::FailureMode;
use parking_lot::Mutex;
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why Redis did not answer a check or probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// No answer within the timeout, or a script that Redis ran past its deadline.
    Timeout,
    /// The connection could not be made or broke (refused, reset, closed).
    Connection,
    /// Redis answered, refusing for now: out of memory, a replica (`READONLY`), loading
    /// its data, busy with a script, a failing save.
    Server,
    /// A Redis Cluster refusing keys (`CLUSTERDOWN`): a slot no master serves, or, under
    /// `cluster-require-full-coverage yes`, every key while a failed master is not yet
    /// replaced.
    ClusterDown,
}

impl Cause {
    /// Every cause, in the order of [`RedisHealth::errors`].
    pub const ALL: [Cause; 4] = [Cause::Timeout, Cause::Connection, Cause::Server, Cause::ClusterDown];

    /// The cause's name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Timeout => "timeout",
            Cause::Connection => "connection",
            Cause::Server => "server",
            Cause::ClusterDown => "cluster_down",
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a store knows of Redis's health, for metrics and readiness. The default is a store
/// that has always answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisHealth {
    /// How long the current outage has lasted (on a Cluster, the longest of its masters');
    /// `None` while every connection and every master is up.
    pub outage: Option<Duration>,
    /// Outages so far (on a Cluster, each master's counted).
    pub outages: u64,
    /// Checks answered by the failure mode so far, because Redis did not answer them or
    /// because an outage was under way.
    pub answered_without_redis: u64,
    /// Checks and probes Redis failed so far, by [`Cause`] (in [`Cause::ALL`] order).
    pub errors: [u64; 4],
    /// A Cluster's masters, each with its slots and its own outage; empty for a standalone
    /// Redis or a Sentinel's primary, and on a Cluster until its topology was read.
    pub nodes: Vec<NodeHealth>,
    /// Redis refuses the store's configuration now (a wrong password, an ACL without a
    /// command Sluice needs, a certificate not trusted): see
    /// [`RedisStore::refusal`](crate::RedisStore::refusal).
    pub refused: bool,
    /// Checks and probes Redis refused so far for the configuration (also counted in `errors`).
    pub refusals: u64,
}

impl RedisHealth {
    /// True while every connection (and every master of a Cluster) is up.
    pub fn is_available(&self) -> bool {
        self.outage.is_none()
    }

    /// True when no key can be decided by Redis: the store's connection is down, or every
    /// master of a Cluster is. False while some master answers for its slots.
    pub fn is_down_everywhere(&self) -> bool {
        !self.is_available() && (self.nodes.is_empty() || self.nodes.iter().all(|node| node.outage.is_some()))
    }
}

/// One master of a Redis Cluster, as [`RedisHealth::nodes`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeHealth {
    /// `host:port`, as the Cluster names it.
    pub address: String,
    /// The slots it serves.
    pub slots: Vec<RangeInclusive<u16>>,
    /// How long its current outage has lasted; `None` while it answers.
    pub outage: Option<Duration>,
    /// Its outages so far.
    pub outages: u64,
}

impl NodeHealth {
    /// The slots as `redis-cli` shows them: `0-5460,10923`.
    pub fn slot_ranges(&self) -> String {
        describe_slots(&self.slots)
    }
}

/// Slot ranges as `redis-cli` shows them: `0-5460,10923`.
pub(crate) fn describe_slots(ranges: &[RangeInclusive<u16>]) -> String {
    let shown: Vec<String> = ranges
        .iter()
        .map(|range| match (range.start(), range.end()) {
            (start, end) if start == end => start.to_string(),
            (start, end) => format!("{start}-{end}"),
        })
        .collect();
    shown.join(",")
}

/// The outages of one store, shared by its connections.
#[derive(Debug)]
pub(crate) struct Outages {
    state: Mutex<OutageState>,
    answered: AtomicU64,
    errors: [AtomicU64; 4],
    /// Where Redis is, for the log lines (no password).
    target: String,
    mode: FailureMode,
}

#[derive(Debug, Default)]
struct OutageState {
    links_down: usize,
    /// When the current outage started, and how many checks were answered before it.
    current: Option<(Instant, u64)>,
    outages: u64,
}

impl Outages {
    pub(crate) fn new(target: String, mode: FailureMode) -> Self {
        Outages { state: Mutex::default(), answered: AtomicU64::new(0), errors: Default::default(), target, mode }
    }

    /// Where Redis is, for log lines (no password).
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// Counts a check answered by the failure mode.
    pub(crate) fn count_answered(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failure of Redis.
    pub(crate) fn count_error(&self, cause: Cause) {
        let index = Cause::ALL.iter().position(|known| *known == cause).unwrap_or(0);
        self.errors[index].fetch_add(1, Ordering::Relaxed);
    }

    /// The health now.
    pub(crate) fn health(&self) -> RedisHealth {
        let state = self.state.lock();
        RedisHealth {
            outage: state.current.map(|(since, _)| since.elapsed()),
            outages: state.outages,
            answered_without_redis: self.answered.load(Ordering::Relaxed),
            errors: self.errors.each_ref().map(|count| count.load(Ordering::Relaxed)),
            nodes: Vec::new(),
            ..RedisHealth::default()
        }
    }

    fn link_down(&self, cause: &str) {
        let mut state = self.state.lock();
        state.links_down += 1;
        if state.current.is_none() {
            state.current = Some((Instant::now(), self.answered.load(Ordering::Relaxed)));
            state.outages += 1;
            tracing::warn!(
                redis = %self.target,
                failure_mode = %self.mode,
                "Redis unavailable ({cause}): checks are answered by the failure mode until it answers again"
            );
        }
    }

    /// A link that was down is gone: when it was the last, the outage ends without the
    /// "available again" line (nothing showed Redis answering).
    fn link_dropped(&self) {
        let mut state = self.state.lock();
        state.links_down = state.links_down.saturating_sub(1);
        if state.links_down == 0 && state.current.take().is_some() {
            tracing::debug!(redis = %self.target, "the last connection in an outage was closed");
        }
    }

    /// The link's node no longer serves the slots it was asked for (a replica was promoted
    /// in its place): the outage ends, saying who serves them now.
    fn link_retired(&self, served_by: &str) {
        let mut state = self.state.lock();
        state.links_down = state.links_down.saturating_sub(1);
        if let Some((since, answered_before)) = state.current.take() {
            let answered = self.answered.load(Ordering::Relaxed) - answered_before;
            tracing::warn!(
                redis = %self.target,
                served_by,
                lasted_ms = since.elapsed().as_millis() as u64,
                answered_by_failure_mode = answered,
                "Redis outage over after {:.3} s: its slots are served by {served_by} now; {answered} checks were answered by the failure mode meanwhile",
                since.elapsed().as_secs_f64()
            );
        }
    }

    fn link_up(&self) {
        let mut state = self.state.lock();
        state.links_down = state.links_down.saturating_sub(1);
        if state.links_down > 0 {
            return;
        }
        if let Some((since, answered_before)) = state.current.take() {
            let answered = self.answered.load(Ordering::Relaxed) - answered_before;
            tracing::warn!(
                redis = %self.target,
                failure_mode = %self.mode,
                lasted_ms = since.elapsed().as_millis() as u64,
                answered_by_failure_mode = answered,
                "Redis available again after {:.3} s; {answered} checks were answered by the failure mode meanwhile",
                since.elapsed().as_secs_f64()
            );
        }
    }
}

/// The health of one connection.
#[derive(Debug, Default)]
pub(crate) struct Link {
    down: AtomicBool,
    /// A probe is running for this connection.
    probing: AtomicBool,
}

impl Link {
    /// True from the first failure Redis made on this connection until a probe succeeds.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Marks the link down (counted in `outages` when it was up).
    pub(crate) fn fail(&self, outages: &Outages, cause: &str) {
        if !self.down.swap(true, Ordering::AcqRel) {
            outages.link_down(cause);
        }
    }

    /// Marks the link up again.
    pub(crate) fn recover(&self, outages: &Outages) {
        if self.down.swap(false, Ordering::AcqRel) {
            outages.link_up();
        }
    }

    /// Forgets the link (its connection is closed): a down link no longer holds the
    /// outage open.
    pub(crate) fn forget(&self, outages: &Outages) {
        if self.down.swap(false, Ordering::AcqRel) {
            outages.link_dropped();
        }
    }

    /// Ends the link's outage, if any, as its node no longer serves its slots: they are
    /// `served_by` another node now.
    pub(crate) fn retire(&self, outages: &Outages, served_by: &str) {
        if self.down.swap(false, Ordering::AcqRel) {
            outages.link_retired(served_by);
        }
    }

    /// Claims the probe: true when no probe ran, and the caller must start one.
    pub(crate) fn claim_probe(&self) -> bool {
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// Releases the probe, when it ends.
    pub(crate) fn release_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_lasts_from_the_first_link_down_to_the_last_up() {
        let outages = Outages::new("redis://h:1".to_owned(), FailureMode::Open);
        let (a, b) = (Link::default(), Link::default());
        assert!(outages.health().is_available());
        a.fail(&outages, "refused");
        b.fail(&outages, "refused");
        a.fail(&outages, "refused again");
        outages.count_answered();
        a.recover(&outages);
        let health = outages.health();
        assert!(!health.is_available(), "b is still down");
        assert_eq!((health.outages, health.answered_without_redis), (1, 1));
        b.recover(&outages);
        b.recover(&outages);
        assert!(outages.health().is_available());
        a.fail(&outages, "timeout");
        assert_eq!(outages.health().outages, 2);
        a.forget(&outages);
        assert!(outages.health().is_available(), "a closed connection holds no outage open");
    }

    #[test]
    fn slot_ranges_read_as_redis_cli_shows_them() {
        assert_eq!(describe_slots(&[0..=5460, 10923..=10923]), "0-5460,10923");
    }

    #[test]
    fn errors_are_counted_by_cause() {
        let outages = Outages::new(String::new(), FailureMode::Closed);
        outages.count_error(Cause::Server);
        outages.count_error(Cause::Server);
        outages.count_error(Cause::Timeout);
        outages.count_error(Cause::ClusterDown);
        assert_eq!(outages.health().errors, [1, 0, 2, 1]);
    }
}
