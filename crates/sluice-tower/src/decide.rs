//! The layer's one decision for a request: from its key and cost to what the store said,
//! on a store that decides at once
//! ([`Store::check_ready`](sluice_core::Store::check_ready)), or the key to await it with.

use crate::key::{InPlace, KeyBuffer, MissingKey, RequestKey};
use crate::outcome::{Outcome, Refusal, outcome};
use crate::shared::Shared;
use http::{Extensions, HeaderMap};
use sluice_core::{Clock, Key, Store, Verdict};

/// What the layer decided for a request before answering it.
pub(crate) enum Decided {
    /// The request proceeds now; its fields are rendered from this verdict, after the
    /// inner call.
    Allowed(Verdict),
    /// Decided at once: the request waits, is refused, has no key, or its store failed.
    Now(Outcome),
    /// The request's key and cost, for a store that must be awaited.
    Later(RequestKey, u64),
}

/// Decides a request from its headers and extensions alone, in place: `None` when the
/// request must be taken apart first (for a cost function, or an extractor that needs the
/// whole head).
#[inline(never)]
pub(crate) fn decide_in_place<S: Store, C: Clock>(
    shared: &Shared<S, C>,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Option<Decided> {
    if shared.cost.is_some() {
        return None;
    }
    let mut buffer = KeyBuffer::new();
    match shared.key.extract_in_place(headers, extensions, &mut buffer) {
        InPlace::Key(key) => Some(decide(shared, Some(key), 1)),
        InPlace::Missing => Some(decide(shared, None, 1)),
        InPlace::NeedsHead => None,
    }
}

/// Decides a request of `cost` whose key is `key` (`None`: it has none): a missing or
/// invalid key takes the shared key of keyless requests if there is a valid one, else the
/// request is refused for want of a key.
#[inline]
pub(crate) fn decide<S: Store, C: Clock>(shared: &Shared<S, C>, key: Option<&[u8]>, cost: u64) -> Decided {
    let Some(key) = key.and_then(|key| Key::new(key).ok()).or_else(|| shared_key(&shared.missing_key)) else {
        return Decided::Now(Outcome::Refused(Refusal::NoKey));
    };
    match shared.check_ready(key, cost) {
        Some(Ok(verdict)) if verdict.decision.allowed && verdict.decision.delay.is_zero() => Decided::Allowed(verdict),
        Some(checked) => Decided::Now(outcome(shared, checked)),
        None => Decided::Later(RequestKey::from(key.as_bytes()), cost),
    }
}

/// The key keyless requests share, if the rule gives one and it is valid.
#[cold]
fn shared_key(rule: &MissingKey) -> Option<Key<'_>> {
    match rule {
        MissingKey::Shared(key) => Key::new(key.as_bytes()).ok(),
        MissingKey::Reject(_) => None,
    }
}
