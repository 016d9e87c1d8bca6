//! From a request head and a store's verdict to what happens: the layer answers, or the
//! inner service does (after a shaping delay) with rate-limit fields.

use crate::headers::{AllowedFields, insert_rate_limit_headers};
use crate::key::{MissingKey, RequestKey, peer_addr};
use crate::response::{Rejection, RejectionBody, unchecked};
use crate::shared::{OnStoreError, Shared};
use http::request::Parts;
use http::{Response, StatusCode};
use sluice_core::{Decision, Limit, RetryAfter, Source, StoreError, Verdict};
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
pub(crate) fn or_shared_key<S, C>(shared: &Shared<S, C>, key: Option<RequestKey>) -> Option<RequestKey> {
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

/// What the store's answer means for the request.
pub(crate) fn judge<S, C>(shared: &Shared<S, C>, checked: Result<Verdict, StoreError>, parts: &Parts) -> Judgement {
    match forward(shared, checked) {
        Ok((delay, fields)) => Judgement::Forward { delay, fields },
        Err(Ok(verdict)) => refuse(shared, &verdict, parts),
        Err(Err(error)) => store_error(shared, &error, parts),
    }
}

/// The store's answer when it lets the request proceed, which needs nothing of the request:
/// the shaping delay and the fields for the response. Otherwise `checked` back, for
/// [`judge`] to answer.
#[inline]
pub(crate) fn forward<S, C>(shared: &Shared<S, C>, checked: Result<Verdict, StoreError>) -> Result<Forward, Checked> {
    let verdict = match checked {
        Ok(verdict) => verdict,
        Err(_) if shared.on_store_error == OnStoreError::Allow => return Ok((Duration::ZERO, None)),
        Err(error) => return Err(Err(error)),
    };
    let decision = &verdict.decision;
    if !decision.allowed || shared.max_delay.is_some_and(|max_delay| decision.delay > max_delay) {
        return Err(Ok(verdict));
    }
    // A fresh state made up by a store that failed open is not worth announcing.
    let fields = match verdict.source {
        Source::FailedOpen => None,
        _ => {
            let index = verdict.limit.min(shared.policy_fields.len().saturating_sub(1));
            shared.policy_fields.get(index).and_then(|fields| fields.render(decision))
        }
    };
    Ok((decision.delay, fields))
}

/// A request that proceeds: after this shaping delay, and its response gets these fields.
pub(crate) type Forward = (Duration, Option<AllowedFields>);
/// A store's answer.
pub(crate) type Checked = Result<Verdict, StoreError>;

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

fn store_error<S, C>(shared: &Shared<S, C>, error: &StoreError, parts: &Parts) -> Judgement {
    match shared.on_store_error {
        OnStoreError::Reject => {
            Judgement::Answer(unchecked(parts, StatusCode::SERVICE_UNAVAILABLE, &error.to_string()))
        }
        OnStoreError::Allow => Judgement::Forward { delay: Duration::ZERO, fields: None },
    }
}

fn reject<S, C>(shared: &Shared<S, C>, limit: &Limit, decision: &Decision, parts: &Parts) -> Judgement {
    let mut response = (shared.on_rejection)(&Rejection { limit, decision, parts });
    insert_rate_limit_headers(response.headers_mut(), limit.name(), limit.policy(), decision, shared.fields);
    Judgement::Answer(response)
}
