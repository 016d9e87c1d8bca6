//! The shares of one bucket among the Envoys holding it: pure and clock-driven (every
//! method takes `now`), so the bound on their sum is tested against random reports and
//! times (`round/tests.rs`).
//!
//! A share is a grant of tokens, paid from the limit's state before it is assigned (the
//! caller pre-debits them, see [`super::payer`]), usable until its time to live ends,
//! and never past the end of the window it was paid in. Each round divides what the
//! limit has left by reported demand, keeping one average holder's part back for an Envoy
//! yet to come, so that neither the first Envoy to report nor an idle one takes what a
//! busy one needs. A grant is renewed (the same tokens: Envoy keeps its token bucket)
//! while its holder reports, and given up when it stops.

use super::holder::{Holder, Usage};
use super::timing::{Timing, Windows};
use sluice_core::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

/// The fewest tokens a grant holds: Envoy 1.40 lets no request through a token bucket of
/// `max_tokens: 1` (seen with tests/envoy_rlqs.rs; 2 and more behave), so a single token
/// would be paid for nothing. The last token of a window is left to RLS checks.
pub(crate) const MIN_GRANT: u64 = 2;

/// One gRPC stream (one Envoy), as the hub numbers them.
pub(crate) type StreamId = u64;

/// What to tell an Envoy about a bucket it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Assignment {
    /// Requests it may let through until the assignment ends.
    pub(crate) tokens: u64,
    /// The assignment's time to live, in whole seconds.
    pub(crate) ttl: Duration,
    /// Alternates between grants (see [`super::assignment`]).
    pub(crate) generation: bool,
    /// The token bucket's fill interval ([`Windows::fill_interval`]).
    pub(crate) fill_interval: Duration,
}

/// The holders of one bucket, and how their grants are timed.
#[derive(Clone, Debug)]
pub(crate) struct BucketShares {
    windows: Windows,
    timing: Timing,
    holders: BTreeMap<StreamId, Holder>,
}

impl BucketShares {
    /// A bucket no Envoy holds yet, of a limit counted in `windows`.
    pub(crate) fn new(windows: Windows, timing: Timing) -> BucketShares {
        BucketShares { windows, timing, holders: BTreeMap::new() }
    }

    /// Takes in `stream`'s report at `now`; the requests it allowed that no grant paid
    /// for, to be counted in the limit's state.
    pub(crate) fn report(&mut self, stream: StreamId, now: Timestamp, usage: Usage) -> u64 {
        self.holders.entry(stream).or_insert_with(|| Holder::new(now)).observe(now, usage)
    }

    /// How many tokens each holder in need should get at `now`, of `remaining` the limit
    /// has left: a part proportional to its demand, at least [`MIN_GRANT`], the most
    /// demanding first.
    pub(crate) fn plan(&self, now: Timestamp, remaining: u64) -> Vec<(StreamId, u64)> {
        if self.windows.ttl_at(now, self.timing.ttl()).is_none() {
            return Vec::new();
        }
        let active: Vec<(&StreamId, &Holder)> = self.holders.iter().filter(|(_, h)| !self.is_stale(h, now)).collect();
        let total: f64 = active.iter().map(|(_, holder)| holder.demand).sum();
        // One average holder's part stays back for an Envoy that has not reported yet.
        let divisor = total + total / active.len().max(1) as f64;
        let mut needy: Vec<(StreamId, f64)> = active
            .iter()
            .filter(|(_, holder)| holder.needs_tokens(now, self.windows))
            .map(|(id, holder)| (**id, holder.demand))
            .collect();
        needy.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut left = remaining.min(u64::from(u32::MAX));
        let mut plan = Vec::new();
        for (stream, demand) in needy {
            let part = (remaining as f64 * demand / divisor).floor() as u64;
            let tokens = part.max(MIN_GRANT).min(left);
            if tokens < MIN_GRANT {
                break;
            }
            left -= tokens;
            plan.push((stream, tokens));
        }
        plan
    }

    /// Records that `tokens` were paid at `now` for `stream`; what to assign it.
    /// `None` when the window has no whole second left (the tokens are then wasted, so
    /// callers [`plan`](Self::plan) at the same `now`, which gives nothing then).
    pub(crate) fn grant(&mut self, stream: StreamId, tokens: u64, now: Timestamp) -> Option<Assignment> {
        let ttl = self.windows.ttl_at(now, self.timing.ttl())?;
        let holder = self.holders.get_mut(&stream)?;
        holder.take_grant(now, tokens, ttl, self.windows, self.timing.stale_after());
        Some(assignment_in(self.windows, tokens, ttl, holder.generation))
    }

    /// The grants that end within the renewal margin at `now`, extended as far as their
    /// window allows (by a whole second at least: Envoy counts in seconds), for holders
    /// still reporting.
    pub(crate) fn renew(&mut self, now: Timestamp) -> Vec<(StreamId, Assignment)> {
        let (windows, timing) = (self.windows, self.timing);
        let mut renewed = Vec::new();
        for (&stream, holder) in &mut self.holders {
            let Some(grant) = holder.grant else { continue };
            let live = grant.expires > now && grant.window == windows.index(now);
            let due = grant.expires.saturating_since(now) <= timing.renew_within();
            let reporting = now.saturating_since(holder.last_report) <= timing.stale_after();
            let Some(ttl) = windows.ttl_at(now, timing.ttl()).filter(|_| live && due && reporting) else { continue };
            let expires = now.saturating_add(ttl);
            if expires >= grant.expires.saturating_add(Duration::from_secs(1)) {
                holder.extend(expires, timing.stale_after());
                renewed.push((stream, assignment_in(windows, grant.tokens, ttl, holder.generation)));
            }
        }
        renewed
    }

    /// Removes the holders that stopped reporting at `now`; their streams.
    pub(crate) fn drop_stale(&mut self, now: Timestamp) -> Vec<StreamId> {
        let stale: Vec<StreamId> =
            self.holders.iter().filter(|(_, holder)| self.is_stale(holder, now)).map(|(&id, _)| id).collect();
        for stream in &stale {
            self.holders.remove(stream);
        }
        stale
    }

    /// Forgets `stream` (its stream ended).
    pub(crate) fn remove(&mut self, stream: StreamId) {
        self.holders.remove(&stream);
    }

    /// Whether some holder needs tokens at `now`.
    pub(crate) fn wants_round(&self, now: Timestamp) -> bool {
        self.holders.values().any(|holder| !self.is_stale(holder, now) && holder.needs_tokens(now, self.windows))
    }

    /// When the window `now` falls in ends.
    pub(crate) fn window_end(&self, now: Timestamp) -> Timestamp {
        self.windows.end(now)
    }

    /// The next time after `now` something may be due for this bucket without a report: a
    /// holder going stale, a grant to renew, the window's end, or (while a holder needs
    /// tokens) `retry`. A time already reached (a renewal its window stops) counts as a
    /// second later: a renewal must gain a whole second anyway.
    pub(crate) fn next_due(&self, now: Timestamp, retry: Timestamp) -> Timestamp {
        let (stale_after, renew_within) = (self.timing.stale_after(), self.timing.renew_within());
        let holders = self.holders.values().flat_map(|holder| {
            let stale = holder.last_report.saturating_add(stale_after + Duration::from_micros(1));
            let renewal = holder
                .grant
                .filter(|grant| grant.expires > now)
                .map(|grant| Timestamp::from_micros(grant.expires.as_micros().saturating_sub(micros(renew_within))));
            [Some(stale), renewal].into_iter().flatten()
        });
        let due = holders.chain(self.wants_round(now).then_some(retry)).min();
        let due = due.map_or(self.windows.end(now), |due| due.min(self.windows.end(now)));
        if due <= now { now.saturating_add(Duration::from_secs(1)) } else { due }
    }

    fn is_stale(&self, holder: &Holder, now: Timestamp) -> bool {
        now.saturating_since(holder.last_report) > self.timing.stale_after()
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn assignment_in(windows: Windows, tokens: u64, ttl: Duration, generation: bool) -> Assignment {
    Assignment { tokens, ttl, generation, fill_interval: windows.fill_interval() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE_US: u64 = 60_000_000;

    fn at(seconds: f64) -> Timestamp {
        // A minute's start, well after the epoch, plus `seconds`.
        Timestamp::from_micros(29_000_000 * MINUTE_US + (seconds * 1e6) as u64)
    }

    fn shares() -> BucketShares {
        let windows = Windows::new(Duration::from_secs(60)).unwrap();
        BucketShares::new(windows, Timing { report_interval: Duration::from_secs(5) })
    }

    fn one_request() -> Usage {
        Usage { allowed: 1, ..Usage::default() }
    }

    #[test]
    fn the_first_envoy_gets_half_of_what_is_left_and_the_next_is_served_from_the_rest() {
        let mut shares = shares();
        assert_eq!(shares.report(1, at(1.0), one_request()), 1, "let through before any share: unpaid");
        assert_eq!(shares.plan(at(1.0), 4), vec![(1, 2)]);
        let assignment = shares.grant(1, 2, at(1.0)).unwrap();
        assert_eq!((assignment.tokens, assignment.ttl, assignment.generation), (2, Duration::from_secs(15), true));
        assert_eq!(assignment.fill_interval, Duration::from_secs(121));
        shares.report(2, at(1.5), one_request());
        assert_eq!(shares.plan(at(1.5), 1), vec![], "one token left: less than a grant");
        assert_eq!(shares.plan(at(1.5), 2), vec![(2, 2)]);
    }

    #[test]
    fn usage_a_grant_paid_for_is_not_unpaid() {
        let mut shares = shares();
        shares.report(1, at(1.0), one_request());
        shares.grant(1, 3, at(1.0)).unwrap();
        let usage = Usage { allowed: 4, denied: 2, elapsed: Duration::from_secs(5) };
        assert_eq!(shares.report(1, at(6.0), usage), 1, "3 paid by the grant, 1 not");
        assert_eq!(shares.plan(at(6.0), 10), vec![(1, 5)], "refused, it asks for more: alone, half of what is left");
    }

    #[test]
    fn a_renewal_repeats_the_grant_and_ends_before_the_window_does() {
        let mut shares = shares();
        shares.report(1, at(40.0), one_request());
        shares.grant(1, 2, at(40.0)).unwrap();
        assert_eq!(shares.next_due(at(40.0), at(99.0)), at(45.0), "the tick looks again when renewal is due");
        assert_eq!(shares.renew(at(44.0)), vec![], "11 s left: not due");
        shares.report(1, at(45.0), one_request());
        let renewed = shares.renew(at(46.0));
        assert_eq!(renewed.len(), 1);
        let (stream, assignment) = renewed[0];
        assert_eq!((stream, assignment.tokens, assignment.generation), (1, 2, true), "the very same assignment");
        assert_eq!(assignment.ttl, Duration::from_secs(13), "up to 59.75 s, in whole seconds");
        assert_eq!(shares.renew(at(47.0)), vec![], "less than a second more: not sent");
    }

    #[test]
    fn an_idle_envoy_gets_nothing_when_the_window_turns_and_a_silent_one_is_dropped() {
        let mut shares = shares();
        for stream in [1, 2] {
            shares.report(stream, at(1.0), one_request());
            shares.grant(stream, 2, at(1.0)).unwrap();
        }
        shares.report(1, at(56.0), Usage { elapsed: Duration::from_secs(5), ..Usage::default() });
        shares.report(2, at(56.0), Usage { allowed: 2, elapsed: Duration::from_secs(5), ..Usage::default() });
        assert_eq!(shares.plan(at(60.2), 5), vec![(2, 2)], "a new window: only the one that sent requests");
        assert!(shares.drop_stale(at(70.0)).is_empty(), "reported 14 s ago: not stale");
        assert_eq!(shares.drop_stale(at(71.5)), vec![1, 2]);
    }
}
