//! Sliding window log: the exact limit. A request is allowed while the window
//! `(now − window, now]` holds fewer than `limit` logged requests.
//!
//! ```text
//! limit = 2, window = 1000 ms, accepted
//! time (ms)   100   400   500          1100
//! decision    ok    ok    NO (600 ms)  ok      <- the 100 ms entry expired at 1100
//! ```
//!
//! Both variants depend only on the newest `limit` entries, so the log is a ring buffer of
//! at most `limit` timestamps ([`SlidingLogState`]). Whether a request fits is one look at the
//! `(limit − cost + 1)`-th newest entry; the number still in the window (for `remaining`) comes
//! from a galloping search from the oldest entry held, and every write drops the entries that
//! expired, so it costs O(1) when requests keep coming and O(log limit) after a long gap, never
//! O(limit). Memory: 4 bytes per slot while the log spans at most about 71 minutes (8 bytes
//! beyond), with the ring's capacity following the entries in the window (doubling and
//! shrinking, amortized O(1)), plus a 40-byte header (8 of them for the leases it holds,
//! one word while it holds none).

mod holding;
mod ring;

use ring::Entries;
pub use ring::SlidingLogState;

use super::parameters::{PolicyError, Validation};
use super::source::{ParameterSource, ReadParameters, choice};
use super::{Algorithm, Hold, Lease, LeaseTerms, MAX_HOLDS, Returned};
use crate::{Decision, Timestamp};
use std::time::Duration;

/// Which requests the log records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SlidingLogVariant {
    /// Only allowed requests are logged: a rejected request changes nothing.
    #[default]
    Accepted,
    /// Every attempt is logged, allowed or not (the textbook variant):
    /// a client that keeps hammering stays blocked.
    Attempts,
}

impl SlidingLogVariant {
    /// Every choice, in the order configuration messages list them.
    pub const ALL: [SlidingLogVariant; 2] = [SlidingLogVariant::Accepted, SlidingLogVariant::Attempts];

    /// The word that names this choice in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            SlidingLogVariant::Accepted => "accepted",
            SlidingLogVariant::Attempts => "attempts",
        }
    }
}

/// The sliding window log: at most `limit` requests in any window of length `window`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window: u64,
    variant: SlidingLogVariant,
}

impl SlidingLog {
    /// The largest limit, 2^30 − 1 (a full log of it holds 4 GiB): the ring buffer keeps
    /// the index of its oldest slot in 30 bits, beside two flags.
    pub const MAX_LIMIT: u64 = (1 << 30) - 1;

    /// A sliding log of `limit` requests per `window`.
    ///
    /// # Errors
    ///
    /// When `limit` is 0 or above [`MAX_LIMIT`](Self::MAX_LIMIT), or `window` is shorter than
    /// one microsecond or too long to compute exactly.
    pub fn new(limit: u64, window: Duration, variant: SlidingLogVariant) -> Result<Self, PolicyError> {
        let mut checks = Validation::default();
        checks.require(limit >= 1, "limit", "must be at least 1");
        if limit > Self::MAX_LIMIT {
            checks.fail("limit", format!("must be at most {}", Self::MAX_LIMIT));
        }
        let window = checks.micros("window", window);
        checks.finish(|| SlidingLog { limit, window, variant })
    }

    /// The limit `N`.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.window)
    }

    /// Which requests are logged.
    pub fn variant(&self) -> SlidingLogVariant {
        self.variant
    }

    fn expired(&self, entry: u64, now: u64) -> bool {
        entry.saturating_add(self.window) <= now
    }

    /// Logical index of the oldest entry still in the window at `now` (`len` if none).
    #[inline(always)]
    fn first_live(&self, state: &Entries<'_>, newest: u64, now: u64) -> usize {
        let len = state.len();
        if len == 0 {
            return 0;
        }
        // Every entry held was live at the last write, which dropped the expired ones, so
        // usually none or one has expired since: in a steady stream of requests, about one
        // per request. The two oldest are read without a branch on the first, which a
        // processor would mispredict about every other request.
        let oldest_expired = self.expired(state.at(newest, 0), now);
        let second = usize::from(len > 1);
        let second_expired = (len > 1) & self.expired(state.at(newest, second), now);
        if !second_expired {
            return usize::from(oldest_expired);
        }
        // Gallop: `lo` is expired; double the step until an entry is live or the log ends.
        let (mut lo, mut step) = (1, 1);
        let mut hi = lo + 1;
        while hi < len && self.expired(state.at(newest, hi), now) {
            lo = hi;
            step *= 2;
            hi = lo + step;
        }
        let mut hi = hi.min(len);
        // Binary search: `lo` is expired, `hi` is live or the end.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.expired(state.at(newest, mid), now) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// [`record`](Algorithm::record), returning how many bytes the log's heap grew by
    /// (negative when it shrank; zero unless its ring was rebuilt): what the memory store
    /// counts against its bound.
    #[inline(always)]
    pub(crate) fn record_resizing(&self, state: &mut SlidingLogState, plan: SlidingLogPlan, admitted: bool) -> isize {
        let limit = self.limit as usize;
        if !admitted && self.variant != SlidingLogVariant::Attempts {
            return 0;
        }
        // A rejection changes nothing of the leases (as on Redis, which writes nothing then).
        if !admitted || (state.holds().is_clear() && plan.hold.is_none()) {
            return state.append(&plan, limit);
        }
        let (ended, grown) = self.record_holds(state, plan);
        grown + self.append_ended(state, plan, &ended)
    }

    /// Logs the units of `ended` leases, each at its deadline (or at the newest entry, if
    /// later: the log stays in time order), then the request at `plan.now`. A lease's
    /// deadline passed since the last admission (which logged those before it), so its
    /// units are logged as they were counted: none leaves the window earlier or later.
    fn append_ended(&self, state: &mut SlidingLogState, plan: SlidingLogPlan, ended: &[Hold]) -> isize {
        let limit = self.limit as usize;
        let mut grown = 0;
        let mut next = plan;
        for hold in ended {
            let at = hold.deadline.max(next.newest);
            grown += state.append(&SlidingLogPlan { now: at, cost: hold.units, ..next }, limit);
            next = SlidingLogPlan { newest: state.newest().unwrap_or(at), first_live: 0, ..plan };
        }
        grown + state.append(&next, limit)
    }

    /// Drops the leases that left the window at `plan.now`, takes out those whose deadline
    /// has passed (to be logged as entries), and adds the one granted, keeping at most
    /// [`MAX_HOLDS`] (the two oldest merge at the later deadline: their units stay in the
    /// window longer, never shorter). Returns the leases taken out, and how many bytes the
    /// list's heap grew by. Only leases not yet ended stay listed: a few per holder.
    #[inline(never)]
    fn record_holds(&self, state: &mut SlidingLogState, plan: SlidingLogPlan) -> (Vec<Hold>, isize) {
        let before = state.holds().heap_bytes();
        let holds = state.holds_mut();
        holds.drop_where(|hold| self.expired(hold.deadline, plan.now));
        let ended = holds.take_until(plan.now);
        if let Some(hold) = plan.hold {
            holds.add_merging_oldest(hold);
        }
        (ended, state.holds().heap_bytes() as isize - before as isize)
    }

    /// `t + window − now` for the `rank`-th newest entry (1 = newest).
    fn wait_for_rank(&self, state: &SlidingLogState, rank: u64, now: u64) -> u64 {
        let index = state.len() - usize::try_from(rank).unwrap_or(usize::MAX).min(state.len());
        state.entry(index).saturating_add(self.window).saturating_sub(now)
    }

    fn reset_after(&self, state: &SlidingLogState, live: u64, now: u64) -> u64 {
        match state.newest() {
            Some(newest) if live > 0 => newest.saturating_add(self.window) - now,
            _ => 0,
        }
    }

    /// The decision for a request that cannot fit (`cost` does not fit now).
    #[inline(always)]
    fn rejection(&self, state: &SlidingLogState, live: u64, now: u64, cost: u64) -> Decision {
        let n = self.limit;
        match self.variant {
            SlidingLogVariant::Accepted if cost > n => Decision::never(n, n - live, self.reset_after(state, live, now)),
            SlidingLogVariant::Accepted => {
                let wait = self.wait_for_rank(state, n - cost + 1, now);
                Decision::reject(n, n - live, self.reset_after(state, live, now), wait)
            }
            SlidingLogVariant::Attempts if cost > n => Decision::never(n, 0, self.window),
            SlidingLogVariant::Attempts => {
                // The attempt itself is logged: the newest `cost` entries become `now`.
                let rank = n - cost + 1;
                let wait = if rank <= cost { self.window } else { self.wait_for_rank(state, rank - cost, now) };
                Decision::reject(n, 0, self.window, wait)
            }
        }
    }
}

/// What [`SlidingLog::record`] needs: the effective time, the cost and the live boundary.
#[derive(Clone, Copy, Debug)]
pub struct SlidingLogPlan {
    /// The log's newest entry when decided (0 when empty).
    newest: u64,
    /// The time of the decision: `now`, or the newest entry if the clock stepped back.
    now: u64,
    cost: u64,
    /// How many of the oldest entries have expired at `now`.
    first_live: usize,
    /// Whether the window is short enough that the live entries always fit a narrow ring.
    narrow_window: bool,
    /// The lease granted with the request, logged at its deadline.
    hold: Option<Hold>,
}

impl Algorithm for SlidingLog {
    type State = SlidingLogState;
    type Plan = SlidingLogPlan;

    fn name(&self) -> &'static str {
        "sliding_log"
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
            ("variant", self.variant.name().to_owned()),
        ]
    }

    #[inline(always)]
    fn decide(&self, state: &SlidingLogState, now: Timestamp, cost: u64) -> (Decision, SlidingLogPlan) {
        if !state.holds().is_clear() {
            return self.decide_holding(state, now, cost, Lease::default());
        }
        // Time never runs backwards inside a state: decide at the newest entry at the earliest.
        let entries = state.view();
        let newest = entries.newest();
        let now = now.as_micros().max(newest);
        let first_live = self.first_live(&entries, newest, now);
        let live = (state.len() - first_live) as u64;
        let narrow_window = self.window <= ring::NARROW_SPAN;
        let plan = SlidingLogPlan { newest, now, cost, first_live, narrow_window, hold: None };
        let n = self.limit;
        let decision = if cost == 0 {
            if live < n {
                Decision::allow(n, n - live, self.reset_after(state, live, now))
            } else {
                let wait = self.wait_for_rank(state, n, now);
                Decision::reject(n, 0, self.reset_after(state, live, now), wait)
            }
        } else if cost <= n && live + cost <= n {
            Decision::allow(n, n - live - cost, self.window)
        } else {
            self.rejection(state, live, now, cost)
        };
        (decision, plan)
    }

    #[inline(always)]
    fn record(&self, state: &mut SlidingLogState, plan: SlidingLogPlan, admitted: bool) {
        self.record_resizing(state, plan, admitted);
    }

    fn decide_leased(
        &self,
        state: &SlidingLogState,
        now: Timestamp,
        cost: u64,
        lease: Lease,
    ) -> (Decision, SlidingLogPlan) {
        self.decide_holding(state, now, cost, lease)
    }

    fn records_rejections(&self) -> bool {
        self.variant == SlidingLogVariant::Attempts
    }

    /// The store logs leased units at the lease's deadline (docs/leases.md): a unit spent
    /// before it leaves the real window no later than the store's copy does.
    fn lease_terms(&self) -> LeaseTerms {
        match self.variant {
            SlidingLogVariant::Accepted => LeaseTerms::Held,
            SlidingLogVariant::Attempts => LeaseTerms::Refused(
                "the attempts variant logs rejected requests too, so an attempt the store rejects \
                 while units are leased out fills the window before they are spent, and the \
                 definition would then refuse them",
            ),
        }
    }

    /// The unspent units leave the log; the spent ones stay logged at the deadline.
    fn give_back(&self, state: &mut SlidingLogState, back: Returned) {
        let holds = state.holds_mut();
        holds.take(back.debited_in, back.leased, back.unspent);
        holds.clear_ended();
    }

    fn expires_at(&self, state: &SlidingLogState) -> Timestamp {
        let newest = state.newest().unwrap_or(0).max(state.holds().last_deadline().unwrap_or(0));
        let expiry = if state.is_empty() && state.holds().is_empty() { 0 } else { newest.saturating_add(self.window) };
        Timestamp::from_micros(expiry)
    }

    fn impossible(&self, state: &SlidingLogState) -> Option<String> {
        super::over("a sliding log holding", state.len() as u64, self.limit)
            .or_else(|| super::over("leases held", state.holds().len() as u64, MAX_HOLDS as u64))
    }
}

impl ReadParameters for SlidingLog {
    fn read(source: &mut dyn ParameterSource) -> Option<Result<Self, PolicyError>> {
        let limit = source.count("limit", 1, None);
        let window = source.duration("window");
        let variant = choice(source, "variant", &SlidingLogVariant::ALL, SlidingLogVariant::name);
        Some(SlidingLog::new(limit?, window?, variant?))
    }
}
