//! What happens to a request, from a store's verdict: the inner service answers (after a
//! shaping delay) with rate-limit fields, or the layer answers, from the request's head.

use crate::headers::{AllowedFields, insert_rate_limit_headers};
use crate::key::{MissingKey, peer_addr};
use crate::response::{Rejection, RejectionBody, store_unavailable, unchecked};
use crate::shared::{OnStoreError, Shared};
use http::request::Parts;
use http::{Response, StatusCode};
use sluice_core::{Decision, Limit, RetryAfter, Source, StoreError, Verdict};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What happens to a request, found without its head.
pub(crate) enum Outcome {
    /// The inner service answers, after `delay`, and the response gets `fields`.
    Proceed { delay: Duration, fields: Option<AllowedFields> },
    /// The layer answers.
    Refused(Refusal),
}

/// Why the layer answers a request itself.
pub(crate) enum Refusal {
    /// The store did not let it through: rejected, or allowed after a longer delay than the
    /// layer may wait.
    Limited(Verdict),
    /// The store is down and its failure mode refuses requests meanwhile (the Redis
    /// store's `closed`): an outage, not a spent quota. Holds the store's suggested wait.
    StoreDown(Option<RetryAfter>),
    /// The store could not decide, and the layer refuses such requests.
    StoreFailed(StoreError),
    /// The request has no valid key, and keyless requests share none.
    NoKey,
}

/// The outcome of a store's answer for a request.
pub(crate) fn outcome<S, C>(shared: &Shared<S, C>, checked: Result<Verdict, StoreError>) -> Outcome {
    let verdict = match checked {
        Ok(verdict) => verdict,
        Err(_) if shared.on_store_error == OnStoreError::Allow => {
            return Outcome::Proceed { delay: Duration::ZERO, fields: None };
        }
        Err(error) => return Outcome::Refused(Refusal::StoreFailed(error)),
    };
    let decision = &verdict.decision;
    if verdict.source == Source::FailedClosed && !decision.allowed {
        return Outcome::Refused(Refusal::StoreDown(decision.retry_after));
    }
    if !decision.allowed || shared.max_delay.is_some_and(|max_delay| decision.delay > max_delay) {
        return Outcome::Refused(Refusal::Limited(verdict));
    }
    Outcome::Proceed { delay: decision.delay, fields: shared.allowed_fields(&verdict) }
}

impl Refusal {
    /// The layer's answer to the request whose head is `parts`.
    pub(crate) fn answer<S, C>(self, shared: &Shared<S, C>, parts: &Parts) -> Response<RejectionBody> {
        match self {
            Refusal::Limited(verdict) => refuse(shared, &verdict, parts),
            Refusal::StoreDown(retry_after) => store_unavailable(parts, STORE_DOWN, retry_after),
            Refusal::StoreFailed(error @ StoreError::Unavailable(_)) => {
                store_unavailable(parts, &error.to_string(), Some(RetryAfter::After(UNREACHABLE_RETRY)))
            }
            Refusal::StoreFailed(error) => unchecked(parts, StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
            Refusal::NoKey => missing_key(shared, parts),
        }
    }
}

/// How long a client is told to wait when the store cannot be reached and says no more:
/// the least a `Retry-After` can say.
const UNREACHABLE_RETRY: Duration = Duration::from_secs(1);

/// Why a request of a store down in the `closed` failure mode is refused.
const STORE_DOWN: &str = "the rate limiter's store cannot answer, and the limiter refuses requests meanwhile \
    (failure mode `closed`)";

/// The answer to a request without a valid key: the rule's status, or 500 when the rule's
/// shared key is not a valid key itself (a mistake of the layer's, which must neither let
/// keyless requests through unlimited nor blame the client).
fn missing_key<S, C>(shared: &Shared<S, C>, parts: &Parts) -> Response<RejectionBody> {
    match shared.missing_key {
        MissingKey::Reject(status) if shared.key.reads_peer_address() && peer_addr(parts).is_none() => {
            warn_no_peer_address();
            unchecked(parts, status, NO_PEER_ADDRESS)
        }
        MissingKey::Reject(status) => unchecked(parts, status, "the request has no valid rate-limit key"),
        MissingKey::Shared(_) => unchecked(
            parts,
            StatusCode::INTERNAL_SERVER_ERROR,
            "the rate limiter's shared key for requests without a key is not a valid key (1 to 1024 bytes)",
        ),
    }
}

/// Why a request keyed by its peer's address has no key, when the server gave it none.
const NO_PEER_ADDRESS: &str = "the rate limiter keys requests by the client's IP address, and the server gave this \
    request none: serve the axum app with `into_make_service_with_connect_info::<SocketAddr>()` (or insert the \
    peer's `SocketAddr` into the request's extensions)";

/// Logs [`NO_PEER_ADDRESS`] once per process: every request of such a server has no key.
fn warn_no_peer_address() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::error!("{NO_PEER_ADDRESS}; until then every request is answered 400");
    }
}

/// The answer to a request the store did not let through (rejected, or allowed after a
/// longer delay than the layer may wait).
fn refuse<S, C>(shared: &Shared<S, C>, verdict: &Verdict, parts: &Parts) -> Response<RejectionBody> {
    let limits = shared.limiter.limits();
    let limit = &limits[verdict.limit.min(limits.len() - 1)];
    let decision = verdict.decision;
    if decision.allowed {
        // Its turn is taken, but waiting that long is not allowed: retry when it comes.
        return reject(shared, limit, &decision.rejected(RetryAfter::After(decision.delay)), parts);
    }
    reject(shared, limit, &decision, parts)
}

fn reject<S, C>(shared: &Shared<S, C>, limit: &Limit, decision: &Decision, parts: &Parts) -> Response<RejectionBody> {
    let mut response = (shared.on_rejection)(&Rejection { limit, decision, parts });
    insert_rate_limit_headers(response.headers_mut(), limit.name(), limit.policy(), decision, shared.fields);
    response
}
