//! From a request head and a store's verdict to what happens: the layer answers, or the
//! inner service does (after a shaping delay) with rate-limit fields.

use crate::headers::{AllowedFields, insert_rate_limit_headers};
use crate::key::{MissingKey, RequestKey, peer_addr};
use crate::response::{Rejection, RejectionBody, unchecked};
use crate::shared::{OnStoreError, Shared};
use http::request::Parts;
use http::{Response, StatusCode};
use sluice_core::{Decision, Limit, RetryAfter, StoreError, Verdict};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What happens to a checked request.
pub(crate) enum Judgement {
    /// The layer answers.
    Answer(Response<RejectionBody>),
    /// The inner service answers, after `delay`, and the response gets `fields`.
    Forward { delay: Duration, fields: Option<AllowedFields> },
}

/// The key of the request whose head is `parts`: its own, or the shared key of keyless
/// requests; `None` when it must be answered with [`missing_key`].
pub(crate) fn request_key<S, C>(shared: &Shared<S, C>, parts: &Parts) -> Option<RequestKey> {
    or_shared_key(shared, shared.key.extract(parts))
}

/// `key` if it is a valid one, else the shared key of keyless requests if there is one
/// (and it is valid itself).
#[inline]
fn or_shared_key<S, C>(shared: &Shared<S, C>, key: Option<RequestKey>) -> Option<RequestKey> {
    let valid = |key: &RequestKey| sluice_core::Key::new(key.as_bytes()).is_ok();
    match (key.filter(valid), &shared.missing_key) {
        (Some(key), _) => Some(key),
        (None, MissingKey::Shared(key)) if valid(key) => Some(key.clone()),
        (None, _) => None,
    }
}

/// The answer to a request without a valid key: the rule's status, or 500 when the rule's
/// shared key is not a valid key itself (a mistake of the layer's, which must neither let
/// keyless requests through unlimited nor blame the client).
pub(crate) fn missing_key<S, C>(shared: &Shared<S, C>, parts: &Parts) -> Response<RejectionBody> {
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

/// What a store's answer means for a request, found without its head.
pub(crate) enum Outcome {
    /// The request proceeds, after `delay`, and its response gets `fields`.
    Proceed { delay: Duration, fields: Option<AllowedFields> },
    /// The store did not let it through: rejected, or allowed after a longer delay than
    /// the layer may wait.
    Refused(Verdict),
    /// The store could not decide, and the layer refuses such requests.
    Failed(StoreError),
}

/// The outcome of a store's answer for a request.
pub(crate) fn outcome<S, C>(shared: &Shared<S, C>, checked: Result<Verdict, StoreError>) -> Outcome {
    let verdict = match checked {
        Ok(verdict) => verdict,
        Err(_) if shared.on_store_error == OnStoreError::Allow => {
            return Outcome::Proceed { delay: Duration::ZERO, fields: None };
        }
        Err(error) => return Outcome::Failed(error),
    };
    let decision = &verdict.decision;
    if !decision.allowed || shared.max_delay.is_some_and(|max_delay| decision.delay > max_delay) {
        return Outcome::Refused(verdict);
    }
    Outcome::Proceed { delay: decision.delay, fields: shared.allowed_fields(&verdict) }
}

/// What happens to a request, from the outcome of its check and its head.
pub(crate) fn judge<S, C>(shared: &Shared<S, C>, outcome: Outcome, parts: &Parts) -> Judgement {
    match outcome {
        Outcome::Proceed { delay, fields } => Judgement::Forward { delay, fields },
        Outcome::Refused(verdict) => refuse(shared, &verdict, parts),
        Outcome::Failed(error) => {
            Judgement::Answer(unchecked(parts, StatusCode::SERVICE_UNAVAILABLE, &error.to_string()))
        }
    }
}

/// The answer to a request the store did not let through (rejected, or allowed after a
/// longer delay than the layer may wait).
fn refuse<S, C>(shared: &Shared<S, C>, verdict: &Verdict, parts: &Parts) -> Judgement {
    let limits = shared.limiter.limits();
    let limit = &limits[verdict.limit.min(limits.len() - 1)];
    let decision = verdict.decision;
    if decision.allowed {
        // Its turn is taken, but waiting that long is not allowed: retry when it comes.
        return reject(shared, limit, &decision.rejected(RetryAfter::After(decision.delay)), parts);
    }
    reject(shared, limit, &decision, parts)
}

fn reject<S, C>(shared: &Shared<S, C>, limit: &Limit, decision: &Decision, parts: &Parts) -> Judgement {
    let mut response = (shared.on_rejection)(&Rejection { limit, decision, parts });
    insert_rate_limit_headers(response.headers_mut(), limit.name(), limit.policy(), decision, shared.fields);
    Judgement::Answer(response)
}
