//! What a layer and all its services share: the policies, the store, the clock and the
//! rules for keys, costs and answers.

use crate::headers::{AllowedFields, Fields, PolicyFields};
use crate::key::{Extractor, KeyBuffer, MissingKey};
use crate::response::{Rejection, RejectionBody};
use http::request::Parts;
use http::{Extensions, HeaderMap};
use sluice_core::{Clock, Decision, Key, Limit, MemoryStore, RateLimiter, Store};
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

/// What the memory store decided for a request at once, from its head alone.
pub(crate) enum AtOnce {
    /// The request proceeds now; its fields are rendered from this decision.
    Allowed(Decision),
    /// The request waits (shaping) or is rejected.
    Refused(Decision),
    /// The layer's shortest path does not apply: several limits, a cost function, an
    /// extractor that needs the whole head, a key that is missing or invalid, or a store
    /// that must be awaited.
    Elsewhere,
}

impl<S: Store, C: Clock> Shared<S, C> {
    /// Decides a request on the layer's shortest path: one limit on the memory store, no
    /// cost function, a ready extractor and a valid key.
    #[inline(never)]
    pub(crate) fn decide_at_once(&self, headers: &HeaderMap, extensions: &Extensions) -> AtOnce {
        let Some((memory, limit)) = self.memory_one() else { return AtOnce::Elsewhere };
        let mut buffer = KeyBuffer::new();
        let Some(Some(key)) = self.key.key_in(headers, extensions, &mut buffer) else { return AtOnce::Elsewhere };
        let Ok(key) = Key::new(key) else { return AtOnce::Elsewhere };
        // A store error (a memory store full of limited keys) is answered on the usual path.
        let Ok(decision) = memory.check_one(key, limit, self.limiter.clock().now(), 1) else {
            return AtOnce::Elsewhere;
        };
        if decision.allowed && decision.delay.is_zero() { AtOnce::Allowed(decision) } else { AtOnce::Refused(decision) }
    }
}

impl<S, C> Shared<S, C> {
    /// The fields of an allowed decision of the layer's one limit.
    #[inline]
    pub(crate) fn allowed_fields(&self, decision: &Decision) -> Option<AllowedFields> {
        self.policy_fields[0].render(decision)
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
