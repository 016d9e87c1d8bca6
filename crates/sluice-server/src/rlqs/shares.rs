//! The shares of one bucket among the Envoys holding it: pure and clock-driven (every
//! method takes `now`), so the bound on their sum is tested against random reports and
//! times, with Envoys modelled as Envoy 1.40 behaves (`round/tests.rs`).
//!
//! A share is a grant of tokens, paid from the limit's state before it is assigned (the
//! caller pre-debits them, see [`super::payer`]), usable until its time to live ends,
//! and never past the end of the window it was paid in. Each round divides what the
//! limit has left by reported demand, keeping one average holder's part back for an Envoy
//! yet to come, so that neither the first Envoy to report nor an idle one takes what a
//! busy one needs. A share lives until its window ends, so it is never renewed; one that ran dry is replaced by fresh tokens while the limit
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
        Some(self.share(tokens, ttl))
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
    /// share (it lives until its window ends) is closed with a refusal just before it
    /// ends; a refused holder's refusal is renewed, and an idle holder is refused.
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
        let (stale_after, refusal_within) = (self.timing.stale_after(), self.timing.refusal_renew_within());
        let holders = self.holders.values().flat_map(|holder| {
            let stale = holder.last_report.saturating_add(stale_after + Duration::from_micros(1));
            let expires = holder.answer.expires().filter(|expires| *expires > now);
            let is_refusal = matches!(holder.answer, Answer::Refusal { .. });
            let renewal = expires.filter(|_| is_refusal).map(|expires| before(expires, refusal_within));
            // The last moment to renew or close it: due at once once reached.
            let last_call = expires.map(|expires| before(expires, CLOSE_LEAD));
            [Some(stale), renewal.filter(|at| *at > now), last_call].into_iter().flatten()
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
            // A share lives until its window ends: closed by a refusal just before.
            Answer::Share(grant) if grant.expires > now => {
                let closing = grant.expires.saturating_since(now) <= CLOSE_LEAD;
                closing.then(|| self.refuse(stream, now))
            }
            // One in need that is not refused yet is answered by the round that follows.
            _ if holder.needs_tokens(now, self.windows) && !holder.is_refused(now) => None,
            _ if !self.refusal_due(holder, now) => None,
            _ => Some(self.refuse(stream, now)),
        }
    }

    /// Refuses `stream` at `now`, for a refusal's time to live.
    fn refuse(&mut self, stream: StreamId, now: Timestamp) -> Assignment {
        let ttl = self.timing.refusal_ttl();
        if let Some(holder) = self.holders.get_mut(&stream) {
            holder.take_refusal(now, ttl);
        }
        Assignment::Refusal { ttl }
    }

    /// Whether `holder` should be (re)told a refusal at `now`: it is not refused, or its
    /// refusal ends within the renewal margin.
    fn refusal_due(&self, holder: &Holder, now: Timestamp) -> bool {
        !holder.is_refused(now)
            || holder.answer.expires().is_some_and(|e| e.saturating_since(now) <= self.timing.refusal_renew_within())
    }

    /// The time to live of a share granted at `now`: until its window ends (less
    /// [`EDGE_MARGIN`](super::timing::EDGE_MARGIN), in whole seconds), so that it is never
    /// renewed, and over [`CLOSE_LEAD`], so that the refusal closing it is due after it was
    /// sent; `None` near a window's end (needy holders are refused until the next window).
    fn share_ttl(&self, now: Timestamp) -> Option<Duration> {
        self.windows.ttl_at(now, self.windows.length()).filter(|ttl| *ttl > CLOSE_LEAD)
    }

    fn share(&self, tokens: u64, ttl: Duration) -> Assignment {
        Assignment::Share { tokens, ttl, fill_interval: self.windows.fill_interval() }
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
mod tests;
