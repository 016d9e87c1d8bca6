//! One Envoy holding one bucket: its demand, what it was last told (a share, a refusal,
//! or nothing yet), and the credit its usage reports are matched against, so that usage a
//! share paid for is not counted twice.

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
    /// When it was sent: reports covering time before it say nothing of its use.
    pub(crate) sent: Timestamp,
    /// When the assignment ends, counted from when it was sent.
    pub(crate) expires: Timestamp,
    /// The window the tokens were paid in.
    pub(crate) window: u64,
    /// Requests reported allowed since the grant, by reports that began after it.
    used: u64,
    /// A report that began after it counted refusals, or as many requests as it holds:
    /// its bucket ran dry, and a new one of fresh tokens loses nothing of it.
    pub(crate) spent: bool,
}

/// What an Envoy was last told about the bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Nothing yet (or what it was told has lapsed).
    Nothing,
    /// A share of the limit.
    Share(Grant),
    /// Refuse every request (`DENY_ALL`) until `expires`.
    Refusal {
        /// When the refusal ends, counted from when it was sent.
        expires: Timestamp,
    },
}

impl Answer {
    /// When what it was told ends; `None` for nothing.
    pub(crate) fn expires(self) -> Option<Timestamp> {
        match self {
            Answer::Nothing => None,
            Answer::Share(grant) => Some(grant.expires),
            Answer::Refusal { expires } => Some(expires),
        }
    }
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
    pub(crate) answer: Answer,
    /// Tokens paid for this holder that no report has matched yet, valid until `credit_until`.
    credit: u64,
    credit_until: Timestamp,
}

impl Holder {
    /// A holder whose first report arrives at `now`.
    pub(crate) fn new(now: Timestamp) -> Holder {
        Holder { demand: 0.0, active: false, last_report: now, answer: Answer::Nothing, credit: 0, credit_until: now }
    }

    /// Takes in a report at `now`; the requests it allowed that no grant paid for (before
    /// the first assignment, or after one lapsed), which the limit's state must still count.
    pub(crate) fn observe(&mut self, now: Timestamp, usage: Usage) -> u64 {
        // Envoy's first report of a bucket covers no time: one request, as over a second.
        let seconds = usage.elapsed.as_secs_f64().max(1.0);
        let sample = usage.allowed.saturating_add(usage.denied) as f64 / seconds;
        let first = matches!(self.answer, Answer::Nothing) && self.demand == 0.0;
        self.demand = if first { sample } else { (self.demand + sample) / 2.0 };
        self.active = sample > 0.0;
        let began = std::mem::replace(&mut self.last_report, now);
        if self.credit_until < now {
            self.credit = 0;
        }
        let paid = usage.allowed.min(self.credit);
        self.credit -= paid;
        if let Answer::Share(grant) = &mut self.answer
            && grant.expires > now
            && began >= grant.sent
        {
            grant.used = grant.used.saturating_add(usage.allowed);
            grant.spent |= usage.denied > 0 || grant.used >= grant.tokens;
        }
        usage.allowed - paid
    }

    /// Whether this holder should get tokens at `now`: its last report counted requests,
    /// and it holds no share in force in the current window, or has spent the one it holds.
    pub(crate) fn needs_tokens(&self, now: Timestamp, windows: Windows) -> bool {
        let unserved = match self.answer {
            Answer::Share(grant) => grant.spent || grant.expires <= now || grant.window != windows.index(now),
            Answer::Nothing | Answer::Refusal { .. } => true,
        };
        self.active && unserved
    }

    /// Whether it is refused at `now` already.
    pub(crate) fn is_refused(&self, now: Timestamp) -> bool {
        matches!(self.answer, Answer::Refusal { expires } if expires > now)
    }

    /// Records a grant of `tokens` paid at `now`, in force for `ttl`.
    pub(crate) fn take_grant(&mut self, now: Timestamp, tokens: u64, ttl: Duration, windows: Windows, slack: Duration) {
        let expires = now.saturating_add(ttl);
        let window = windows.index(now);
        self.answer = Answer::Share(Grant { tokens, sent: now, expires, window, used: 0, spent: false });
        let left = if self.credit_until < now { 0 } else { self.credit };
        self.credit = left.saturating_add(tokens);
        self.credit_until = expires.saturating_add(slack);
    }

    /// Records a refusal sent at `now`, in force for `ttl`.
    pub(crate) fn take_refusal(&mut self, now: Timestamp, ttl: Duration) {
        self.answer = Answer::Refusal { expires: now.saturating_add(ttl) };
    }
}
