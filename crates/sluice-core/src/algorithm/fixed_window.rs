//! Fixed window counter: time is cut into windows of length `window`; each key counts the
//! cost admitted in its current window, and the count resets when a new window begins.
//!
//! ```text
//! limit = 3   |---- window 0 ----|---- window 1 ----|
//! requests     x   x   x   x        x
//! decision     ok  ok  ok  NO       ok
//! ```
//!
//! `aligned` windows start at multiples of `window` after the epoch (shifted by `offset`, so
//! a daily window can start at a user's local midnight), like GitHub's hourly API limit.
//! `anchored` windows start at a key's first admitted request. The cheapest state (two
//! integers), but up to twice the limit can pass across a window edge.

use super::parameters::{PolicyError, Validation};
use super::source::{ParameterSource, ReadParameters, choice};
use super::{Algorithm, Lease, LeaseTerms, Replacement, Returned, replace_if_admitted};
use crate::{Decision, Timestamp};
use std::time::Duration;

/// Where windows start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Alignment {
    /// Windows start at `offset + k × window` for whole `k` (epoch-aligned).
    #[default]
    Aligned,
    /// A window starts at a key's first admitted request at or after the previous one's end.
    Anchored,
}

impl Alignment {
    /// Every choice, in the order configuration messages list them.
    pub const ALL: [Alignment; 2] = [Alignment::Aligned, Alignment::Anchored];

    /// The word that names this choice in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            Alignment::Aligned => "aligned",
            Alignment::Anchored => "anchored",
        }
    }
}

/// The fixed window counter: at most `limit` cost per window.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    limit: u64,
    window: u64,
    alignment: Alignment,
    offset: u64,
}

impl FixedWindow {
    /// A fixed window of `limit` per `window`, with aligned windows shifted by `offset`.
    ///
    /// # Errors
    ///
    /// When `limit` or `window` is zero or too large to compute exactly, or `offset` is not
    /// shorter than `window` or is set on an anchored window.
    pub fn new(limit: u64, window: Duration, alignment: Alignment, offset: Duration) -> Result<Self, PolicyError> {
        let mut checks = Validation::default();
        checks.positive("limit", limit);
        let window = checks.micros("window", window);
        let offset = u64::try_from(offset.as_micros()).unwrap_or(u64::MAX);
        if alignment == Alignment::Anchored && offset != 0 {
            checks.fail("offset", "applies only to aligned windows");
        } else if !checks.failed("window") {
            checks.require(offset < window, "offset", "must be shorter than the window");
        }
        checks.finish(|| FixedWindow { limit, window, alignment, offset })
    }

    /// The limit `N` per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window)
    }

    /// Where windows start.
    pub fn alignment(&self) -> Alignment {
        self.alignment
    }

    /// The shift of aligned windows from the epoch.
    pub fn offset(&self) -> Duration {
        Duration::from_micros(self.offset)
    }

    /// The window a request at `now` falls in (with the count it already holds), where it
    /// ends, and the effective `now` (never before the state's window start).
    fn current(&self, state: &WindowCount, now: u64) -> (WindowCount, u64, u64) {
        let live = state.used > 0;
        let now = if live { now.max(state.start) } else { now };
        let end = match self.alignment {
            // `start = floor((now − offset) / window) × window + offset`, so the end is one
            // window later; computed shifted by one window so that `now < offset` (window
            // −1, which ends at `offset`) needs no negative numbers.
            Alignment::Aligned => {
                let shift = self.window - self.offset;
                (now.saturating_add(shift) / self.window).saturating_mul(self.window).saturating_add(self.offset)
            }
            Alignment::Anchored if live && now < state.start.saturating_add(self.window) => {
                state.start.saturating_add(self.window)
            }
            Alignment::Anchored => now.saturating_add(self.window),
        };
        // Window −1 would start before the epoch: it is stored as starting at 0, which no
        // other window of an offset policy does.
        let start = end.saturating_sub(self.window);
        let used = if live && state.start == start { state.used } else { 0 };
        (WindowCount { start, used }, end, now)
    }
}

impl Algorithm for FixedWindow {
    type State = WindowCount;
    type Plan = Replacement<WindowCount>;

    fn give_back(&self, state: &mut WindowCount, back: Returned) {
        if state.start == back.debited_in && state.used > 0 {
            state.used = state.used.saturating_sub(back.unspent).max(1);
        }
    }

    /// The lease is debited with the request, in its window.
    fn decide_leased(&self, state: &WindowCount, now: Timestamp, cost: u64, lease: Lease) -> (Decision, Self::Plan) {
        self.decide(state, now, cost.saturating_add(lease.units))
    }

    fn records_rejections(&self) -> bool {
        false
    }

    /// Units are debited in the window of the decision and spendable to its end, which an
    /// allowed decision's `reset_after` names.
    fn lease_terms(&self) -> LeaseTerms {
        LeaseTerms::Debited { since_start: self.window(), after_end: Duration::ZERO }
    }

    fn name(&self) -> &'static str {
        "fixed_window"
    }

    fn limit(&self) -> u64 {
        self.limit
    }

    fn quota_window(&self) -> Duration {
        self.window()
    }

    fn look_ahead(&self) -> Duration {
        self.window()
    }

    fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("limit", self.limit.to_string()),
            ("window_us", self.window.to_string()),
            ("alignment", self.alignment.name().to_owned()),
            ("offset_us", self.offset.to_string()),
        ]
    }

    #[inline(always)]
    fn decide(&self, state: &WindowCount, now: Timestamp, cost: u64) -> (Decision, Self::Plan) {
        let (current, end, now) = self.current(state, now.as_micros());
        let reset_after = end.saturating_sub(now);
        let n = self.limit;
        let left = n - current.used;
        if cost == 0 {
            let decision = if left > 0 {
                Decision::allow(n, left, reset_after)
            } else {
                Decision::reject(n, 0, reset_after, reset_after)
            };
            return (decision, None);
        }
        if cost > n {
            return (Decision::never(n, left, reset_after), None);
        }
        if cost > left {
            return (Decision::reject(n, left, reset_after, reset_after), None);
        }
        let next = WindowCount { used: current.used + cost, ..current };
        (Decision::allow(n, left - cost, reset_after), Some(next))
    }

    #[inline(always)]
    fn record(&self, state: &mut WindowCount, plan: Self::Plan, admitted: bool) {
        replace_if_admitted(state, plan, admitted);
    }

    fn expires_at(&self, state: &WindowCount) -> Timestamp {
        if state.used == 0 {
            return Timestamp::EPOCH;
        }
        // The end of the window the state's start lies in (window −1 ends at `offset`).
        Timestamp::from_micros(self.current(state, state.start).1)
    }

    fn impossible(&self, state: &WindowCount) -> Option<String> {
        super::over("a fixed window counting", state.used, self.limit)
    }
}

impl ReadParameters for FixedWindow {
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>> {
        let limit = source.count("limit", 1, None);
        let window = source.duration("window");
        let alignment = choice(source, "alignment", &Alignment::ALL, Alignment::name);
        let offset = source.offset("offset");
        Some(FixedWindow::new(limit?, window?, alignment?, offset?))
    }
}

/// A key's current window: where it starts and the cost admitted in it (`used = 0` is fresh).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCount {
    /// Start of the window, µs since the epoch.
    pub start: u64,
    /// Cost admitted in it.
    pub used: u64,
}
