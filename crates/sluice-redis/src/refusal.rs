//! A configuration Redis refuses: a wrong password, an ACL that denies a command Sluice
//! needs, a certificate one side does not trust. Unlike an outage, waiting does not mend
//! it: a server refuses to start on one, and reports one met later as not ready, in every
//! failure mode (`docs/reliability.md`, "A configuration Redis refuses").

use crate::tls::HandshakeError;
use parking_lot::Mutex;
use sluice_core::StoreError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Redis refuses Sluice's configuration: the cause, and what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(String);

impl Refused {
    pub(crate) fn new(message: String) -> Self {
        Refused(message)
    }

    /// The refusal inside `error`, if it is one; `None` for an outage or a fault of a check.
    pub fn of(error: &StoreError) -> Option<Refused> {
        let StoreError::Unavailable(source) = error else { return None };
        refusal(source.as_ref())
    }
}

/// The refusal among `error` and its sources.
fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(handshake) = current.downcast_ref::<HandshakeError>() {
            return Some(Refused(handshake.to_string()));
        }
        if let Some(redis) = current.downcast_ref::<redis::RedisError>()
            && let Some(refused) = redis_refusal(redis)
        {
            return Some(refused);
        }
        cause = current.source();
    }
    None
}

/// Redis's own refusals: authentication and permissions.
fn redis_refusal(error: &redis::RedisError) -> Option<Refused> {
    let code = error.code().unwrap_or_default();
    let text = error.to_string();
    if matches!(code, "WRONGPASS" | "NOAUTH") || error.kind() == redis::ErrorKind::AuthenticationFailed {
        return Some(Refused(format!(
            "Redis refused the store URL's user or password ({text}): correct them in the store URL \
             (redis://USER:PASSWORD@HOST:PORT), or the user's password in Redis"
        )));
    }
    if code == "NOPERM"
        || text.contains("NOPERM")
        || text.contains("no permissions to run")
        || text.contains("can't run this command")
    {
        return Some(Refused(format!(
            "Redis's ACL denies the store URL's user a command Sluice needs ({text}): allow the commands \
             docs/redis.md lists (\"An ACL user\") to that user"
        )));
    }
    None
}

/// How often a refusal that lasts is logged again.
const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Who met a refusal: a check (the ACL may deny a check's command and allow the probe's, so
/// only a check that succeeds ends it), or a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MetBy {
    Check,
    Probe,
}

/// The refusal under way, if any, and how many were met: shared by a store's connections.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    /// Set while a refusal is under way: a check's success looks at it without locking.
    active: AtomicBool,
    current: Mutex<Option<Current>>,
    count: AtomicU64,
}

#[derive(Debug)]
struct Current {
    refused: Refused,
    met_by: MetBy,
    logged_at: Instant,
}

impl Refusals {
    /// Records `refused`, logged as an error when it starts, changes, or every minute.
    pub(crate) fn met(&self, refused: Refused, met_by: MetBy, target: &str) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut current = self.current.lock();
        let log = current.as_ref().is_none_or(|now| now.refused != refused || now.logged_at.elapsed() >= LOG_INTERVAL);
        if log {
            tracing::error!(redis = %target, "Redis refuses Sluice's configuration: {refused}; not ready until it is fixed");
        }
        let logged_at = match current.as_ref() {
            Some(now) if !log => now.logged_at,
            _ => Instant::now(),
        };
        *current = Some(Current { refused, met_by, logged_at });
        self.active.store(true, Ordering::Release);
    }

    /// Ends the refusal when Redis answered `by` (a probe ends only a probe's refusal).
    pub(crate) fn answered(&self, by: MetBy, target: &str) {
        if !self.active.load(Ordering::Acquire) {
            return;
        }
        let mut current = self.current.lock();
        if current.as_ref().is_some_and(|now| by == MetBy::Check || now.met_by == MetBy::Probe) {
            *current = None;
            self.active.store(false, Ordering::Release);
            tracing::warn!(redis = %target, "Redis accepts Sluice's configuration again");
        }
    }

    /// The refusal under way.
    pub(crate) fn current(&self) -> Option<Refused> {
        self.current.lock().as_ref().map(|now| now.refused.clone())
    }

    /// Refusals met so far (each check or probe refused counts).
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_ends_only_a_refusal_a_probe_met() {
        let refusals = Refusals::default();
        refusals.met(Refused("denied".to_owned()), MetBy::Check, "redis://h:1");
        refusals.answered(MetBy::Probe, "redis://h:1");
        assert_eq!(refusals.current(), Some(Refused("denied".to_owned())), "the probe's commands may be allowed");
        refusals.answered(MetBy::Check, "redis://h:1");
        assert_eq!(refusals.current(), None);
        refusals.met(Refused("wrong password".to_owned()), MetBy::Probe, "redis://h:1");
        refusals.answered(MetBy::Probe, "redis://h:1");
        assert_eq!((refusals.current(), refusals.count()), (None, 2));
    }
}
