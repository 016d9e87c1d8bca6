//! What a layer and all its services share: the policies, the store, the clock and the
//! rules for keys, costs and answers.

use crate::headers::{Fields, PolicyFields};
use crate::key::{Extractor, MissingKey};
use crate::response::{Rejection, RejectionBody};
use http::request::Parts;
use sluice::{Limit, MemoryStore, RateLimiter, Store};
use std::any::Any;
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
    pub(crate) key: Extractor,
    pub(crate) cost: Option<CostFn>,
    pub(crate) missing_key: MissingKey,
    pub(crate) fields: Fields,
    /// Each limit's fields, rendered once for [`fields`](Self::fields).
    pub(crate) policy_fields: Arc<[PolicyFields]>,
    pub(crate) max_delay: Option<Duration>,
    pub(crate) on_rejection: RejectFn,
    pub(crate) on_store_error: OnStoreError,
}

impl<S: Store, C> Shared<S, C> {
    /// The layer's store, when it is the memory store (which decides without waiting).
    #[inline]
    pub(crate) fn memory(&self) -> Option<&MemoryStore> {
        (self.limiter.store() as &dyn Any).downcast_ref::<MemoryStore>()
    }

    /// The memory store and the one limit, when the layer has nothing else: its check
    /// needs no future and no verdict.
    #[inline]
    pub(crate) fn memory_one(&self) -> Option<(&MemoryStore, &Limit)> {
        if self.cost.is_some() {
            return None;
        }
        let memory = self.memory()?;
        match self.limiter.limits() {
            [limit] => Some((memory, limit)),
            _ => None,
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
