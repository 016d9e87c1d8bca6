//! A model of how Envoy 1.40's quota client (the `envoy.filters.http.rate_limit_quota`
//! filter) handles one bucket: the assignments its quota server sends, the requests it
//! admits, and the usage it reports. Pure and clock-driven: every method takes `now`, a
//! [`Duration`] since any origin the caller picks.
//!
//! `tests/envoy_quota_client.rs` in sluice-server feeds the same [`BucketAction`]s and
//! requests to a real Envoy 1.40 and to this model, and checks they admit the same
//! requests; docs/envoy-quota-client.md gives the table.
//!
//! ```text
//! response          what Envoy does to the bucket
//! token bucket      no token bucket in force: a new one, full
//!                   a different one: new, at the old one's fill fraction (spent → empty)
//!                   the same one (max_tokens, tokens_per_fill, fill_interval's nanos):
//!                   kept as it is, tokens and all; only its time to live restarts
//! blanket rule      ALLOW_ALL / DENY_ALL; drops the token bucket (the next starts full)
//! abandon           the bucket is forgotten with its unreported usage; the next request
//!                   recreates it (no_assignment_behavior) and reports it at once
//! time to live      whole seconds; at its end expired_assignment_behavior for its own
//!                   whole seconds, if configured, then no_assignment_behavior
//! ```
//!
//! The stream is no part of a bucket: when it ends (whatever the status, or a reset),
//! assignments stay until their time to live. Envoy opens a new stream at its next report
//! ([`REPORT_INTERVAL`]) and sends that report on it; a report built while no stream can be
//! opened (the server is down) is dropped, its usage lost. So is the report that creates a
//! bucket while the stream is closed.

mod actions;
mod token_bucket;

pub use actions::{abandon, blanket, bucket_id, token_bucket};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use std::time::Duration;
use token_bucket::{Shape, Tokens};

/// How often Envoy 1.40 reports every bucket's usage, whatever `reporting_interval` says.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// A blanket rule: every request admitted, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blanket {
    /// `ALLOW_ALL`.
    AllowAll,
    /// `DENY_ALL`.
    DenyAll,
}

impl Blanket {
    fn admits(self) -> bool {
        self == Blanket::AllowAll
    }
}

/// What a usage report carries for the bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Requests admitted since the last report.
    pub allowed: u64,
    /// Requests refused since the last report.
    pub denied: u64,
    /// Time since the last report, in whole seconds (Envoy sends no nanoseconds).
    pub elapsed: Duration,
}

/// One bucket as one Envoy holds it.
#[derive(Clone, Debug)]
pub struct EnvoyBucket {
    no_assignment: Blanket,
    expired: Option<(Blanket, Duration)>,
    /// `None` while Envoy has no such bucket: no request has matched it yet, or since an
    /// abandon.
    held: Option<Held>,
    created: Option<Usage>,
}

/// A bucket in Envoy's cache.
#[derive(Clone, Debug)]
struct Held {
    rule: Rule,
    allowed: u64,
    denied: u64,
    last_report: Duration,
}

/// What decides the bucket's requests.
#[derive(Clone, Debug)]
enum Rule {
    /// No assignment (never one, or past its time to live and any fallback).
    Unassigned,
    /// The quota server's assignment, until `until`.
    Assigned { assignment: Assignment, until: Duration },
    /// `expired_assignment_behavior`, until `until`.
    Fallback { blanket: Blanket, until: Duration },
}

/// An assignment of the quota server.
#[derive(Clone, Debug)]
enum Assignment {
    Blanket(Blanket),
    TokenBucket {
        shape: Shape,
        tokens: Tokens,
    },
    /// An action with neither an assignment nor an abandon: Envoy keeps it and admits.
    Empty,
}

impl EnvoyBucket {
    /// A bucket Envoy has not seen yet, with the filter's `no_assignment_behavior` and
    /// `expired_assignment_behavior` (its rule and timeout; Envoy reads whole seconds).
    pub fn new(no_assignment: Blanket, expired: Option<(Blanket, Duration)>) -> EnvoyBucket {
        let expired = expired.map(|(blanket, timeout)| (blanket, Duration::from_secs(timeout.as_secs())));
        EnvoyBucket { no_assignment, expired, held: None, created: None }
    }

    /// Whether Envoy holds the bucket (a request created it, no abandon dropped it).
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// Whether an assignment of the quota server decides the bucket's requests at `now`
    /// (neither `expired_assignment_behavior` nor `no_assignment_behavior` does).
    pub fn is_assigned(&mut self, now: Duration) -> bool {
        self.advance(now);
        matches!(self.held, Some(Held { rule: Rule::Assigned { .. }, .. }))
    }

    /// Applies one action of a response at `now`; Envoy ignores actions for buckets it does
    /// not hold, without a bucket id, or with a strategy it does not enforce.
    pub fn apply(&mut self, now: Duration, action: &BucketAction) {
        self.advance(now);
        let Some(held) = &mut self.held else { return };
        if action.bucket_id.as_ref().is_none_or(|id| id.bucket.is_empty()) {
            return;
        }
        let assignment = match &action.bucket_action {
            Some(Action::AbandonAction(_)) => {
                self.held = None;
                return;
            }
            Some(Action::QuotaAssignmentAction(assignment)) => assignment,
            None => {
                held.rule = Rule::Assigned { assignment: Assignment::Empty, until: now };
                return;
            }
        };
        let strategy = assignment.rate_limit_strategy.and_then(|strategy| strategy.strategy);
        let Some(next) = held.rule.next(strategy.as_ref(), now) else { return };
        let ttl = assignment.assignment_time_to_live.map_or(0, |ttl| ttl.seconds);
        let until = now + Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
        held.rule = Rule::Assigned { assignment: next, until };
    }

    /// Runs Envoy's timers up to `now`: assignments and fallbacks past their time to live.
    pub fn advance(&mut self, now: Duration) {
        let Some(held) = &mut self.held else { return };
        loop {
            held.rule = match held.rule {
                Rule::Assigned { until, .. } if until <= now => match self.expired {
                    Some((blanket, timeout)) => Rule::Fallback { blanket, until: until + timeout },
                    None => Rule::Unassigned,
                },
                Rule::Fallback { until, .. } if until <= now => Rule::Unassigned,
                _ => return,
            };
        }
    }

    /// Whether Envoy admits a request at `now`. The first request of a bucket Envoy does
    /// not hold creates it (decided by `no_assignment_behavior`) and is reported at once:
    /// see [`EnvoyBucket::take_creation_report`].
    pub fn request(&mut self, now: Duration) -> bool {
        self.advance(now);
        let no_assignment = self.no_assignment;
        let Some(held) = &mut self.held else {
            let admitted = no_assignment.admits();
            let usage = Usage { allowed: u64::from(admitted), denied: u64::from(!admitted), elapsed: Duration::ZERO };
            self.created = Some(usage);
            self.held = Some(Held { rule: Rule::Unassigned, allowed: 0, denied: 0, last_report: now });
            return admitted;
        };
        let admitted = match &mut held.rule {
            Rule::Unassigned => no_assignment.admits(),
            Rule::Fallback { blanket, .. } | Rule::Assigned { assignment: Assignment::Blanket(blanket), .. } => {
                blanket.admits()
            }
            Rule::Assigned { assignment: Assignment::TokenBucket { tokens, .. }, .. } => tokens.take(now),
            Rule::Assigned { assignment: Assignment::Empty, .. } => true,
        };
        *(if admitted { &mut held.allowed } else { &mut held.denied }) += 1;
        admitted
    }

    /// The report sent when the last request created the bucket, once.
    pub fn take_creation_report(&mut self) -> Option<Usage> {
        self.created.take()
    }

    /// What Envoy's periodic report at `now` carries for the bucket (nothing when it does
    /// not hold it), resetting the counts: a report Envoy then fails to send is lost.
    pub fn report(&mut self, now: Duration) -> Option<Usage> {
        self.advance(now);
        let held = self.held.as_mut()?;
        let elapsed = Duration::from_secs(now.saturating_sub(held.last_report).as_secs());
        let usage = Usage { allowed: held.allowed, denied: held.denied, elapsed };
        (held.allowed, held.denied, held.last_report) = (0, 0, now);
        Some(usage)
    }
}

impl Rule {
    /// The assignment `strategy` makes at `now` of the bucket under `self`; `None` when
    /// Envoy ignores it (no strategy, or requests per time unit).
    fn next(&self, strategy: Option<&Strategy>, now: Duration) -> Option<Assignment> {
        match strategy? {
            Strategy::BlanketRule(rule) => match BlanketRule::try_from(*rule).ok()? {
                BlanketRule::AllowAll => Some(Assignment::Blanket(Blanket::AllowAll)),
                BlanketRule::DenyAll => Some(Assignment::Blanket(Blanket::DenyAll)),
            },
            Strategy::TokenBucket(bucket) => {
                let shape = Shape::of(bucket);
                let old = match self {
                    Rule::Assigned { assignment: Assignment::TokenBucket { shape: old, tokens }, .. } => {
                        if *old == shape {
                            return Some(Assignment::TokenBucket { shape, tokens: *tokens });
                        }
                        Some(tokens)
                    }
                    _ => None,
                };
                Some(Assignment::TokenBucket { shape, tokens: Tokens::build(bucket, old, now) })
            }
            Strategy::RequestsPerTimeUnit(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
