//! From a request head and a store's verdict to what happens: the layer answers, or the
//! inner service does (after a shaping delay) with rate-limit fields.

use crate::headers::{AllowedFields, insert_rate_limit_headers};
use crate::key::{MissingKey, RequestKey};
use crate::response::{Rejection, RejectionBody, unchecked};
use crate::shared::{OnStoreError, Shared};
use http::request::Parts;
use http::{Response, StatusCode};
use sluice::{Decision, Limit, RetryAfter, Source, StoreError, Verdict};
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
    let key = shared.key.extract(parts).filter(|key| sluice::Key::new(key.as_bytes()).is_ok());
    match (key, &shared.missing_key) {
        (Some(key), _) => Some(key),
        (None, MissingKey::Shared(key)) => Some(key.clone()),
        (None, MissingKey::Reject(_)) => None,
    }
}

/// The answer to a request without a valid key.
pub(crate) fn missing_key<S, C>(shared: &Shared<S, C>, parts: &Parts) -> Response<RejectionBody> {
    let status = match shared.missing_key {
        MissingKey::Reject(status) => status,
        MissingKey::Shared(_) => StatusCode::BAD_REQUEST,
    };
    unchecked(parts, status, "the request has no valid rate-limit key")
}

/// What the store's answer means for the request.
pub(crate) fn judge<S, C>(shared: &Shared<S, C>, checked: Result<Verdict, StoreError>, parts: &Parts) -> Judgement {
    let verdict = match checked {
        Ok(verdict) => verdict,
        Err(error) => return store_error(shared, &error, parts),
    };
    let limits = shared.limiter.limits();
    let index = verdict.limit.min(limits.len() - 1);
    let limit = &limits[index];
    let decision = verdict.decision;
    if decision.allowed && decision.delay > shared.max_delay {
        // Its turn is taken, but waiting that long is not allowed: retry when it comes.
        return reject(shared, limit, &decision.rejected(RetryAfter::After(decision.delay)), parts);
    }
    if !decision.allowed {
        return reject(shared, limit, &decision, parts);
    }
    // A fresh state made up by a store that failed open is not worth announcing.
    let fields = match verdict.source {
        Source::FailedOpen => None,
        _ => shared.policy_fields.get(index).and_then(|fields| fields.render(&decision)),
    };
    Judgement::Forward { delay: decision.delay, fields }
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
