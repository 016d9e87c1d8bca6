//! The remaining quota between a trace's requests, as the real algorithm gives it back.
//!
//! Between two requests a key's quota only grows (tokens refill, a window resets, entries
//! of a log expire), in steps whose instants depend on the algorithm and its state. They
//! are found here by asking the store itself: a peek (cost 0) changes nothing, so the
//! first instant where a peek's `remaining` differs from the last one is found by
//! bisection over peeks, to the microsecond. The page draws these points as they are, so
//! no algorithm is written twice (once here, once in JavaScript).

use serde::Serialize;
use sluice_core::{Key, Limit, MemoryStore, Timestamp};
use std::time::Duration;
use utoipa::ToSchema;

/// The most points one policy's line may have; past it the line stops, so that a trace
/// of many requests and a large limit cannot make one answer peek without end (each
/// point costs at most 42 peeks: 30 days in µs is under 2^42).
pub(crate) const MAX_LEVEL_POINTS: usize = 4_000;

/// From `at_us` on (until the next point), `remaining` cost-1 requests would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct LevelPoint {
    /// µs after the trace's start.
    pub(crate) at_us: u64,
    /// What a peek answers then.
    pub(crate) remaining: u64,
}

/// One key's line under one policy, built request by request.
#[derive(Debug)]
pub(crate) struct Level<'a> {
    store: &'a MemoryStore,
    limit: &'a Limit,
    key: Key<'a>,
    start: Timestamp,
    points: Vec<LevelPoint>,
}

impl<'a> Level<'a> {
    /// The line of `key` under `limit` on `store`, whose trace starts at `start`; its first
    /// point is the fresh key's quota at 0.
    pub(crate) fn new(store: &'a MemoryStore, limit: &'a Limit, key: Key<'a>, start: Timestamp) -> Level<'a> {
        let mut level = Level { store, limit, key, start, points: Vec::new() };
        let fresh = level.peek(0);
        level.points.push(LevelPoint { at_us: 0, remaining: fresh });
        level
    }

    /// After a request of the key at `at_us`: the quota it left, then every change until
    /// `until_us` (the key's next request, or when its quota is whole again).
    pub(crate) fn follow(&mut self, at_us: u64, until_us: u64) {
        let mut value = self.peek(at_us);
        if !self.push(at_us, value) {
            return;
        }
        let end = self.peek(until_us);
        let mut from = at_us;
        while value != end && from < until_us {
            // Invariant: the peek at `from` answers `value`, the one at `to` does not.
            let mut to = until_us;
            while to - from > 1 {
                let middle = from + (to - from) / 2;
                if self.peek(middle) == value { from = middle } else { to = middle }
            }
            value = self.peek(to);
            if !self.push(to, value) {
                return;
            }
            from = to;
        }
    }

    /// The points, in time order.
    pub(crate) fn into_points(self) -> Vec<LevelPoint> {
        self.points
    }

    /// Adds a point; false when the line is full.
    fn push(&mut self, at_us: u64, remaining: u64) -> bool {
        if self.points.len() >= MAX_LEVEL_POINTS {
            return false;
        }
        self.points.push(LevelPoint { at_us, remaining });
        true
    }

    /// What a cost-1 request could take at `at_us`, asked without taking anything.
    fn peek(&self, at_us: u64) -> u64 {
        let now = self.start.saturating_add(Duration::from_micros(at_us));
        self.store
            .check_now(self.key, std::slice::from_ref(self.limit), now, 0)
            .map_or(0, |verdict| verdict.decision.remaining)
    }
}
