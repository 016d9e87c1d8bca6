//! One Envoy holding one bucket: its demand, the grant it holds, and the credit its
//! usage reports are matched against, so that usage a grant paid for is not counted twice.

use super::timing::Windows;
use sluice_core::Timestamp;
use std::time::Duration;

/// What an Envoy reported for a bucket since its previous report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Requests it let through.
    pub(crate) allowed: u64,
    /// Requests it refused.
    pub(crate) denied: u64,
    /// The time the counts cover: 0 in the report Envoy sends as it creates a bucket.
    pub(crate) elapsed: Duration,
}

/// Tokens paid for and handed to one Envoy, usable until `expires` within window `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The tokens paid for: the token bucket's size.
    pub(crate) tokens: u64,
    /// When the assignment ends, counted from when it was sent.
    pub(crate) expires: Timestamp,
    /// The window the tokens were paid in.
    pub(crate) window: u64,
    /// Requests reported allowed since the grant.
    used: u64,
}

/// One Envoy's hold on one bucket.
#[derive(Clone, Debug)]
pub(crate) struct Holder {
    /// Requests per second, reported (allowed and denied), smoothed over reports.
    pub(crate) demand: f64,
    /// Its last report counted requests: an Envoy whose last report counted none is idle,
    /// and is given no new share until it reports some.
    active: bool,
    pub(crate) last_report: Timestamp,
    pub(crate) grant: Option<Grant>,
    /// It reported denials, or as many requests as its grant held, since the grant.
    wants_more: bool,
    /// Tokens paid for this holder that no report has matched yet, valid until `credit_until`.
    credit: u64,
    credit_until: Timestamp,
    /// Alternates with each grant, so that two grants in a row always differ for Envoy.
    pub(crate) generation: bool,
}

impl Holder {
    /// A holder whose first report arrives at `now`.
    pub(crate) fn new(now: Timestamp) -> Holder {
        Holder {
            demand: 0.0,
            active: false,
            last_report: now,
            grant: None,
            wants_more: false,
            credit: 0,
            credit_until: now,
            generation: false,
        }
    }

    /// Takes in a report at `now`; the requests it allowed that no grant paid for (before
    /// the first assignment, or after one lapsed), which the limit's state must still count.
    pub(crate) fn observe(&mut self, now: Timestamp, usage: Usage) -> u64 {
        // Envoy's first report of a bucket covers no time: one request, as over a second.
        let seconds = usage.elapsed.as_secs_f64().max(1.0);
        let sample = usage.allowed.saturating_add(usage.denied) as f64 / seconds;
        let first = self.grant.is_none() && self.demand == 0.0;
        self.demand = if first { sample } else { (self.demand + sample) / 2.0 };
        self.active = sample > 0.0;
        self.last_report = now;
        if self.credit_until < now {
            self.credit = 0;
        }
        let paid = usage.allowed.min(self.credit);
        self.credit -= paid;
        if let Some(grant) = self.grant.as_mut().filter(|grant| grant.expires > now) {
            grant.used = grant.used.saturating_add(usage.allowed);
            self.wants_more |= usage.denied > 0 || grant.used >= grant.tokens;
        }
        usage.allowed - paid
    }

    /// Whether this holder should get tokens at `now`: its last report counted requests,
    /// and it holds no grant in force in the current window, or has used up (or been
    /// refused beyond) the one it holds.
    pub(crate) fn needs_tokens(&self, now: Timestamp, windows: Windows) -> bool {
        let in_force = self.grant.is_some_and(|grant| grant.expires > now && grant.window == windows.index(now));
        self.active && (!in_force || self.wants_more)
    }

    /// Records a grant of `tokens` paid at `now`, in force for `ttl`.
    pub(crate) fn take_grant(&mut self, now: Timestamp, tokens: u64, ttl: Duration, windows: Windows, slack: Duration) {
        let expires = now.saturating_add(ttl);
        self.generation = !self.generation;
        self.grant = Some(Grant { tokens, expires, window: windows.index(now), used: 0 });
        self.wants_more = false;
        let left = if self.credit_until < now { 0 } else { self.credit };
        self.credit = left.saturating_add(tokens);
        self.credit_until = expires.saturating_add(slack);
    }

    /// Extends the grant in force to end at `expires` (the same tokens: Envoy keeps its
    /// token bucket when an assignment repeats).
    pub(crate) fn extend(&mut self, expires: Timestamp, slack: Duration) {
        if let Some(grant) = self.grant.as_mut() {
            grant.expires = expires;
            self.credit_until = expires.saturating_add(slack);
        }
    }
}
