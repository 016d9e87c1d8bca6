//! What a layer and all its services share: the policies, the store, the clock and the
//! rules for keys, costs and answers.

use crate::headers::{AllowedFields, Fields, PolicyFields};
use crate::key::{KeyExtractor, MissingKey, RequestKey};
use crate::response::{Rejection, RejectionBody};
use http::request::Parts;
use sluice_core::{Check, Clock, Key, Limit, RateLimiter, Source, Store, StoreError, Verdict};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A closure giving a request's cost.
pub(crate) type CostFn = Arc<dyn Fn(&Parts) -> u64 + Send + Sync>;
/// A closure answering a rejection.
pub(crate) type RejectFn = Arc<dyn Fn(&Rejection<'_>) -> http::Response<RejectionBody> + Send + Sync>;

/// What a store that cannot decide at all (`Err`, as opposed to a failure mode's verdict)
/// means for the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnStoreError {
    /// The request proceeds, without rate-limit fields.
    Allow,
    /// 503 Service Unavailable (gRPC `UNAVAILABLE`) with a `problem+json` body.
    #[default]
    Reject,
}

/// Everything the services of one layer share.
#[derive(Clone)]
pub(crate) struct Shared<S, C> {
    /// The policies, the store and the clock.
    pub(crate) limiter: RateLimiter<S, C>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) cost: Option<CostFn>,
    pub(crate) missing_key: MissingKey,
    pub(crate) fields: Fields,
    /// Each limit's fields, rendered once for [`fields`](Self::fields).
    pub(crate) policy_fields: Arc<[PolicyFields]>,
    pub(crate) max_delay: Option<Duration>,
    pub(crate) on_rejection: RejectFn,
    pub(crate) on_store_error: OnStoreError,
}

impl<S: Store, C: Clock> Shared<S, C> {
    /// The store's answer for a request of `cost`, when it decides at once (the one
    /// decide-now path, [`Store::check_ready`]); `None` when it must be awaited
    /// ([`check`](Self::check)).
    #[inline(always)]
    pub(crate) fn check_ready(&self, key: Key<'_>, cost: u64) -> Option<Result<Verdict, StoreError>> {
        let limiter = &self.limiter;
        limiter.store().check_ready(Check::new(key, limiter.limits(), limiter.clock().now(), cost))
    }

    /// The store's answer for a request of `cost`, awaited.
    pub(crate) async fn check(&self, key: &RequestKey, cost: u64) -> Result<Verdict, StoreError> {
        let key = Key::new(key.as_bytes()).map_err(|error| StoreError::Refused(error.to_string()))?;
        let limiter = &self.limiter;
        limiter.store().check(Check::new(key, limiter.limits(), limiter.clock().now(), cost)).await
    }
}

impl<S, C> Shared<S, C> {
    /// The fields of an allowed verdict: its limit's, unless no store took part (a fresh
    /// state made up by a store that failed open is not worth announcing).
    #[inline]
    pub(crate) fn allowed_fields(&self, verdict: &Verdict) -> Option<AllowedFields> {
        match verdict.source {
            Source::FailedOpen => None,
            _ => self.policy_fields.get(verdict.limit)?.render(&verdict.decision),
        }
    }
}

/// The fields of each of `limits`.
pub(crate) fn policy_fields(limits: &[Limit], fields: Fields) -> Arc<[PolicyFields]> {
    limits.iter().map(|limit| PolicyFields::new(limit.name(), limit.policy(), fields)).collect()
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for Shared<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limits", &self.limiter.limits().iter().map(Limit::name).collect::<Vec<_>>())
            .field("store", self.limiter.store())
            .field("clock", self.limiter.clock())
            .field("missing_key", &self.missing_key)
            .field("fields", &self.fields)
            .field("max_delay", &self.max_delay)
            .field("on_store_error", &self.on_store_error)
            .finish_non_exhaustive()
    }
}
