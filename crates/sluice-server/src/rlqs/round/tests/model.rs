//! One Envoy 1.40 holding one bucket, as it applies a quota server's actions
//! (tests/envoy_quota_client.rs measures each rule against the real binary): a token
//! bucket that repeats the one in force is kept; one that changes it starts with the old
//! bucket's fill fraction; one after a blanket rule, a lapse or nothing starts full. An
//! assignment lapses when its time to live (whole seconds, from its arrival) is over.

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use sluice_core::Timestamp;
use std::time::Duration;

/// What a bucket enforces.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Enforced {
    /// Nothing assigned: the `no_assignment_behavior`.
    Unassigned,
    Blanket {
        allow: bool,
    },
    Bucket {
        max: u32,
        per_fill: u32,
        interval: u64,
        tokens: f64,
        refilled: Timestamp,
    },
}

/// One Envoy's bucket.
#[derive(Clone, Debug)]
pub(super) struct ModelEnvoy {
    enforced: Enforced,
    expires: Timestamp,
    /// `no_assignment_behavior`: allow every request (`ALLOW_ALL`) or none.
    allow_unassigned: bool,
    /// Requests let through by the fallback after an assignment had arrived.
    pub(super) fell_back: u64,
    assigned_once: bool,
}

impl ModelEnvoy {
    /// A bucket not created yet, with its fallback.
    pub(super) fn new(allow_unassigned: bool) -> ModelEnvoy {
        ModelEnvoy {
            enforced: Enforced::Unassigned,
            expires: Timestamp::EPOCH,
            allow_unassigned,
            fell_back: 0,
            assigned_once: false,
        }
    }

    /// Applies a response's `actions`, in order, as it arrives at `now`.
    pub(super) fn apply(&mut self, actions: &[BucketAction], now: Timestamp) {
        for action in actions {
            match &action.bucket_action {
                Some(Action::AbandonAction(_)) => self.enforced = Enforced::Unassigned,
                Some(Action::QuotaAssignmentAction(assignment)) => {
                    let ttl = assignment.assignment_time_to_live.as_ref().map_or(0, |ttl| ttl.seconds as u64);
                    let strategy = assignment.rate_limit_strategy.as_ref().and_then(|s| s.strategy.as_ref());
                    self.assign(strategy.expect("a strategy"), now);
                    self.expires = now.saturating_add(Duration::from_secs(ttl));
                    self.assigned_once = true;
                }
                None => panic!("an action without a kind"),
            }
        }
    }

    fn assign(&mut self, strategy: &Strategy, now: Timestamp) {
        self.lapse(now);
        self.enforced = match *strategy {
            Strategy::BlanketRule(rule) => Enforced::Blanket { allow: rule == BlanketRule::AllowAll as i32 },
            Strategy::TokenBucket(ref bucket) => {
                let (max, per_fill) = (bucket.max_tokens, bucket.tokens_per_fill.map_or(1, |fill| fill.value));
                let interval = bucket.fill_interval.as_ref().map_or(1, |interval| interval.seconds as u64);
                let tokens = match self.refilled(now) {
                    Enforced::Bucket { max: old, per_fill: old_fill, tokens, .. }
                        if (old, old_fill) == (max, per_fill) =>
                    {
                        tokens
                    }
                    Enforced::Bucket { max: old, tokens, .. } => tokens / f64::from(old) * f64::from(max),
                    _ => f64::from(max),
                };
                Enforced::Bucket { max, per_fill, interval, tokens, refilled: now }
            }
            Strategy::RequestsPerTimeUnit(_) => panic!("not used"),
        };
    }

    /// Whether it lets a request through at `now`, and whether that was decided with
    /// nothing assigned (by its `no_assignment_behavior`).
    pub(super) fn request(&mut self, now: Timestamp) -> (bool, bool) {
        self.lapse(now);
        let enforced = self.refilled(now);
        let (allowed, next) = match enforced {
            Enforced::Unassigned => {
                self.fell_back += u64::from(self.assigned_once && self.allow_unassigned);
                (self.allow_unassigned, enforced)
            }
            Enforced::Blanket { allow } => (allow, enforced),
            Enforced::Bucket { tokens, .. } if tokens >= 1.0 => {
                let Enforced::Bucket { max, per_fill, interval, refilled, .. } = enforced else { unreachable!() };
                (true, Enforced::Bucket { max, per_fill, interval, tokens: tokens - 1.0, refilled })
            }
            Enforced::Bucket { .. } => (false, enforced),
        };
        let unassigned = enforced == Enforced::Unassigned;
        self.enforced = next;
        (allowed, unassigned)
    }

    /// Drops an assignment whose time to live is over at `now`.
    fn lapse(&mut self, now: Timestamp) {
        if self.enforced != Enforced::Unassigned && self.expires <= now {
            self.enforced = Enforced::Unassigned;
        }
    }

    /// What it enforces at `now`, its bucket refilled.
    fn refilled(&self, now: Timestamp) -> Enforced {
        match self.enforced {
            Enforced::Bucket { max, per_fill, interval, tokens, refilled } => {
                let rate = f64::from(per_fill) / interval.max(1) as f64;
                let tokens = (tokens + now.saturating_since(refilled).as_secs_f64() * rate).min(f64::from(max));
                Enforced::Bucket { max, per_fill, interval, tokens, refilled: now }
            }
            other => other,
        }
    }
}
