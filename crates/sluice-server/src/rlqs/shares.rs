//! The shares of one bucket among the Envoys holding it: pure and clock-driven (every
//! method takes `now`), so the bound on their sum is tested against random reports and
//! times, with Envoys modelled as Envoy 1.40 behaves (`round/tests.rs`).
//!
//! A share is a grant of tokens, paid from the limit's state before it is assigned (the
//! caller pre-debits them, see [`super::payer`]), usable until its time to live ends,
//! and never past the end of the window it was paid in. Each round divides what the
//! limit has left by reported demand, keeping one average holder's part back for an Envoy
//! yet to come, so that neither the first Envoy to report nor an idle one takes what a
//! busy one needs. A share is renewed (the same tokens: Envoy keeps its token bucket)
//! while its holder reports; one that ran dry is replaced by fresh tokens while the limit
//! has some. Every holder is always told something: a holder the limit cannot serve,
//! and an idle one, is refused (`DENY_ALL`) until the next round can serve it, so no
//! Envoy falls back to its `no_assignment_behavior` while Sluice runs. Shares are
//! rebalanced as each window begins: every holder that reported requests gets a new part
//! of the new window, by its demand.

use super::holder::{Answer, Holder, Usage};
use super::timing::{CLOSE_LEAD, Timing, Windows};
use sluice_core::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

/// The fewest tokens a share holds: a fresh token bucket of `max_tokens: 1` lets one
/// request through (tests/envoy_quota_client.rs).
pub(crate) const MIN_GRANT: u64 = 1;

/// One gRPC stream (one Envoy), as the hub numbers them.
pub(crate) type StreamId = u64;

/// What to tell an Envoy about a bucket it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Assignment {
    /// A token bucket of `tokens` requests, in force for `ttl`.
    Share {
        /// Requests it may let through until the assignment ends.
        tokens: u64,
        /// The assignment's time to live, in whole seconds.
        ttl: Duration,
        /// The token bucket's fill interval ([`Windows::fill_interval`]).
        fill_interval: Duration,
        /// Fresh tokens, to start full (see [`super::assignment`]); otherwise the very
        /// assignment in force, renewed, which Envoy keeps as it is.
        fresh: bool,
    },
    /// Refuse every request of the bucket for `ttl`.
    Refusal {
        /// The refusal's time to live, in whole seconds.
        ttl: Duration,
    },
}

impl Assignment {
    /// The tokens it grants (none for a refusal).
    pub(crate) fn tokens(&self) -> u64 {
        match self {
            Assignment::Share { tokens, .. } => *tokens,
            Assignment::Refusal { .. } => 0,
        }
    }
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
        if self.share_ttl(now).is_none() {
            return Vec::new();
        }
        let active: Vec<&Holder> = self.holders.values().filter(|holder| !self.is_stale(holder, now)).collect();
        let total: f64 = active.iter().map(|holder| holder.demand).sum();
        // One average holder's part stays back for an Envoy that has not reported yet.
        let divisor = total + total / active.len().max(1) as f64;
        let mut needy = self.needy(now);
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
    /// `None` when the window has too little left for a share (the tokens are then wasted,
    /// so callers [`plan`](Self::plan) at the same `now`, which gives nothing then).
    pub(crate) fn grant(&mut self, stream: StreamId, tokens: u64, now: Timestamp) -> Option<Assignment> {
        let ttl = self.share_ttl(now)?;
        let holder = self.holders.get_mut(&stream)?;
        holder.take_grant(now, tokens, ttl, self.windows, self.timing.stale_after());
        Some(self.share(tokens, ttl, true))
    }

    /// Refuses, at `now`, the holders in need that the last round could not serve (and
    /// are not refused for a while already).
    pub(crate) fn refuse_unserved(&mut self, now: Timestamp) -> Vec<(StreamId, Assignment)> {
        let unserved: Vec<StreamId> = self
            .needy(now)
            .into_iter()
            .map(|(stream, _)| stream)
            .filter(|stream| self.holders.get(stream).is_some_and(|holder| self.refusal_due(holder, now)))
            .collect();
        unserved.into_iter().map(|stream| (stream, self.refuse(stream, now))).collect()
    }

    /// What is due at `now` for the holders still reporting, other than new shares: a
    /// share that ends within the renewal margin is extended as far as its window allows
    /// (by a whole second at least: Envoy counts in seconds), and closed with a refusal
    /// just before it ends when its window does; an idle holder is kept refused.
    pub(crate) fn renew(&mut self, now: Timestamp) -> Vec<(StreamId, Assignment)> {
        let streams: Vec<StreamId> = self.holders.keys().copied().collect();
        streams.into_iter().filter_map(|stream| Some((stream, self.renew_one(stream, now)?))).collect()
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
        !self.needy(now).is_empty()
    }

    /// How many holders were last told, at `now`, a share, a refusal, and nothing (or
    /// what they were told has run out).
    pub(crate) fn census(&self, now: Timestamp) -> [usize; 3] {
        let mut counts = [0; 3];
        for holder in self.holders.values() {
            let live = holder.answer.expires().is_some_and(|expires| expires > now);
            let slot = match holder.answer {
                Answer::Share(_) if live => 0,
                Answer::Refusal { .. } if live => 1,
                _ => 2,
            };
            counts[slot] += 1;
        }
        counts
    }

    /// When the window `now` falls in ends.
    pub(crate) fn window_end(&self, now: Timestamp) -> Timestamp {
        self.windows.end(now)
    }

    /// The next time after `now` something may be due for this bucket without a report: a
    /// holder going stale, an answer to renew, or to renew or close at the latest (a
    /// [`CLOSE_LEAD`] before it ends), the window's end, or (while a
    /// holder needs tokens) `retry`; `now` itself when one of them is reached already (the
    /// next tick sees to it).
    pub(crate) fn next_due(&self, now: Timestamp, retry: Timestamp) -> Timestamp {
        let (stale_after, renew_within) = (self.timing.stale_after(), self.timing.renew_within());
        let holders = self.holders.values().flat_map(|holder| {
            let stale = holder.last_report.saturating_add(stale_after + Duration::from_micros(1));
            let expires = holder.answer.expires().filter(|expires| *expires > now);
            let renewal = expires.map(|expires| before(expires, renew_within)).filter(|at| *at > now);
            // The last moment to renew or close it: due at once once reached.
            let last_call = expires.map(|expires| before(expires, CLOSE_LEAD));
            [Some(stale), renewal, last_call].into_iter().flatten()
        });
        let due = holders.chain(self.wants_round(now).then_some(retry)).min();
        due.map_or(self.windows.end(now), |due| due.min(self.windows.end(now))).max(now)
    }

    /// The holders that need tokens at `now`, with their demand.
    fn needy(&self, now: Timestamp) -> Vec<(StreamId, f64)> {
        let needy = self.holders.iter().filter(|(_, h)| !self.is_stale(h, now) && h.needs_tokens(now, self.windows));
        needy.map(|(&stream, holder)| (stream, holder.demand)).collect()
    }

    /// What is due at `now` for `stream` alone ([`renew`](Self::renew)): the hub asks as
    /// each report comes, so that a holder whose first report counts no request (an
    /// Envoy's stream reopened after Sluice restarted) is refused at once, not left to
    /// its fallback.
    pub(crate) fn renew_one(&mut self, stream: StreamId, now: Timestamp) -> Option<Assignment> {
        let holder = self.holders.get(&stream)?;
        if self.is_stale(holder, now) {
            return None;
        }
        match holder.answer {
            Answer::Share(grant) if grant.expires > now => {
                if grant.expires.saturating_since(now) > self.timing.renew_within() {
                    return None;
                }
                self.extend(stream, now).or_else(|| {
                    let closing = grant.expires.saturating_since(now) <= CLOSE_LEAD;
                    closing.then(|| self.refuse(stream, now))
                })
            }
            // One in need that is not refused yet is answered by the round that follows.
            _ if holder.needs_tokens(now, self.windows) && !holder.is_refused(now) => None,
            _ if !self.refusal_due(holder, now) => None,
            _ => Some(self.refuse(stream, now)),
        }
    }

    /// Extends `stream`'s share in force as far as its window allows at `now`, when that
    /// gains a whole second.
    fn extend(&mut self, stream: StreamId, now: Timestamp) -> Option<Assignment> {
        let ttl = self.windows.ttl_at(now, self.timing.ttl())?;
        let holder = self.holders.get_mut(&stream)?;
        let Answer::Share(grant) = holder.answer else { return None };
        let expires = now.saturating_add(ttl);
        if expires < grant.expires.saturating_add(Duration::from_secs(1)) {
            return None;
        }
        holder.extend(expires, self.timing.stale_after());
        Some(self.share(grant.tokens, ttl, false))
    }

    /// Refuses `stream` at `now`, for an assignment's longest time to live.
    fn refuse(&mut self, stream: StreamId, now: Timestamp) -> Assignment {
        let ttl = self.timing.ttl();
        if let Some(holder) = self.holders.get_mut(&stream) {
            holder.take_refusal(now, ttl);
        }
        Assignment::Refusal { ttl }
    }

    /// Whether `holder` should be (re)told a refusal at `now`: it is not refused, or its
    /// refusal ends within the renewal margin.
    fn refusal_due(&self, holder: &Holder, now: Timestamp) -> bool {
        !holder.is_refused(now)
            || holder.answer.expires().is_some_and(|e| e.saturating_since(now) <= self.timing.renew_within())
    }

    /// The time to live of a share granted at `now`: as long as its window allows, and
    /// over [`CLOSE_LEAD`], so that the refusal closing it is due after it was sent;
    /// `None` near a window's end (needy holders are refused until the next window).
    fn share_ttl(&self, now: Timestamp) -> Option<Duration> {
        self.windows.ttl_at(now, self.timing.ttl()).filter(|ttl| *ttl > CLOSE_LEAD)
    }

    fn share(&self, tokens: u64, ttl: Duration, fresh: bool) -> Assignment {
        Assignment::Share { tokens, ttl, fill_interval: self.windows.fill_interval(), fresh }
    }

    fn is_stale(&self, holder: &Holder, now: Timestamp) -> bool {
        now.saturating_since(holder.last_report) > self.timing.stale_after()
    }
}

/// `duration` before `time`.
fn before(time: Timestamp, duration: Duration) -> Timestamp {
    Timestamp::from_micros(time.as_micros().saturating_sub(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)))
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

    fn share(assignment: Assignment) -> (u64, Duration, bool) {
        match assignment {
            Assignment::Share { tokens, ttl, fresh, .. } => (tokens, ttl, fresh),
            Assignment::Refusal { .. } => panic!("a refusal, not a share"),
        }
    }

    #[test]
    fn the_first_envoy_gets_half_of_what_is_left_and_the_next_is_served_from_the_rest() {
        let mut shares = shares();
        assert_eq!(shares.report(1, at(1.0), one_request()), 1, "let through before any share: unpaid");
        assert_eq!(shares.plan(at(1.0), 4), vec![(1, 2)]);
        let assignment = shares.grant(1, 2, at(1.0)).unwrap();
        assert_eq!(share(assignment), (2, Duration::from_secs(15), true));
        let Assignment::Share { fill_interval, .. } = assignment else { unreachable!() };
        assert_eq!(fill_interval, Duration::from_secs(121));
        shares.report(2, at(1.5), one_request());
        assert_eq!(shares.plan(at(1.5), 1), vec![(2, 1)], "one token left: a share of one");
        assert_eq!(shares.plan(at(1.5), 0), vec![]);
    }

    #[test]
    fn a_holder_the_limit_cannot_serve_is_refused_in_the_same_round_and_not_again() {
        let mut shares = shares();
        shares.report(1, at(1.0), one_request());
        assert_eq!(shares.refuse_unserved(at(1.0)), vec![(1, Assignment::Refusal { ttl: Duration::from_secs(15) })]);
        assert_eq!(shares.refuse_unserved(at(2.0)), vec![], "refused already");
        assert!(shares.wants_round(at(2.0)), "it still wants tokens, should the limit have some");
        shares.report(1, at(6.0), Usage { denied: 3, elapsed: Duration::from_secs(5), ..Usage::default() });
        assert_eq!(shares.refuse_unserved(at(6.0)), vec![(1, Assignment::Refusal { ttl: Duration::from_secs(15) })]);
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
    fn refusals_reported_from_before_a_grant_do_not_make_it_spent() {
        let mut shares = shares();
        shares.report(1, at(1.0), one_request());
        shares.report(1, at(6.0), Usage { denied: 4, elapsed: Duration::from_secs(5), ..Usage::default() });
        shares.grant(1, 5, at(6.5)).unwrap();
        shares.report(1, at(11.0), Usage { allowed: 2, denied: 3, elapsed: Duration::from_secs(5) });
        assert_eq!(shares.plan(at(11.0), 10), vec![], "the report began before the grant: its refusals may be older");
        shares.report(1, at(16.0), Usage { allowed: 3, denied: 1, elapsed: Duration::from_secs(5) });
        assert_eq!(shares.plan(at(16.0), 10), vec![(1, 5)], "refused since the grant: spent");
    }

    #[test]
    fn a_renewal_repeats_the_grant_and_ends_before_the_window_does_then_a_refusal_closes_it() {
        let mut shares = shares();
        shares.report(1, at(40.0), one_request());
        shares.grant(1, 2, at(40.0)).unwrap();
        assert_eq!(shares.next_due(at(40.0), at(99.0)), at(45.0), "the tick looks again when renewal is due");
        assert_eq!(shares.renew(at(44.0)), vec![], "11 s left: not due");
        shares.report(1, at(45.0), one_request());
        let renewed = shares.renew(at(46.0));
        assert_eq!(renewed.len(), 1);
        assert_eq!((renewed[0].0, share(renewed[0].1)), (1, (2, Duration::from_secs(13), false)), "the same share");
        assert_eq!(shares.renew(at(47.0)), vec![], "less than a second more: not sent");
        assert_eq!(shares.renew(at(49.0)), vec![], "the window ends: no renewal, and not closing yet");
        assert_eq!(shares.next_due(at(49.0), at(99.0)), at(58.0), "closed a second before it ends");
        let refusal = Assignment::Refusal { ttl: Duration::from_secs(15) };
        assert_eq!(shares.renew(at(58.0)), vec![(1, refusal)]);
    }

    #[test]
    fn a_holder_whose_first_report_counts_no_request_is_refused_at_once() {
        let mut shares = shares();
        shares.report(1, at(1.0), Usage { elapsed: Duration::from_secs(5), ..Usage::default() });
        assert_eq!(shares.plan(at(1.0), 5), vec![], "idle: no tokens");
        let refusal = Assignment::Refusal { ttl: Duration::from_secs(15) };
        assert_eq!(shares.renew_one(1, at(1.0)), Some(refusal));
        assert_eq!(shares.renew_one(1, at(2.0)), None, "refused already");
    }

    #[test]
    fn an_idle_envoy_is_refused_when_the_window_turns_and_a_silent_one_is_dropped() {
        let mut shares = shares();
        for stream in [1, 2] {
            shares.report(stream, at(1.0), one_request());
            shares.grant(stream, 2, at(1.0)).unwrap();
        }
        shares.report(1, at(56.0), Usage { elapsed: Duration::from_secs(5), ..Usage::default() });
        shares.report(2, at(56.0), Usage { allowed: 2, elapsed: Duration::from_secs(5), ..Usage::default() });
        assert_eq!(shares.plan(at(60.2), 5), vec![(2, 1)], "a new window: only the one that sent requests");
        let refusal = Assignment::Refusal { ttl: Duration::from_secs(15) };
        assert_eq!(shares.renew(at(60.2)), vec![(1, refusal)], "the idle one is refused, not left to its fallback");
        assert!(shares.drop_stale(at(70.0)).is_empty(), "reported 14 s ago: not stale");
        assert_eq!(shares.drop_stale(at(71.5)), vec![1, 2]);
    }
}
