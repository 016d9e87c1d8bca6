//! The layer's shortest path: a request decided from its head alone, in place, on a store
//! that decides at once ([`Store::check_ready`](sluice_core::Store::check_ready)).

use crate::judge::{Outcome, outcome};
use crate::key::{KeyBuffer, RequestKey};
use crate::shared::Shared;
use http::{Extensions, HeaderMap};
use sluice_core::{Clock, Key, Store, Verdict};

/// What the layer decided for a request at once, from its head alone and in place.
pub(crate) enum AtOnce {
    /// The request proceeds now; its fields are rendered from this verdict, after the
    /// inner call.
    Allowed(Verdict),
    /// The store decided at once, and the request waits, is refused, or its store failed.
    Decided(Outcome),
    /// The request's key, for a store that must be awaited.
    Later(RequestKey),
    /// The shortest path does not apply: a cost function, an extractor that needs the
    /// whole head, or a key that is missing or invalid.
    Elsewhere,
}

/// Decides a request on the layer's shortest path: no cost function, a ready extractor and a
/// valid key, on a store that decides at once.
#[inline(never)]
pub(crate) fn decide_at_once<S: Store, C: Clock>(
    shared: &Shared<S, C>,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> AtOnce {
    if shared.cost.is_some() {
        return AtOnce::Elsewhere;
    }
    let mut buffer = KeyBuffer::new();
    let Some(Some(key)) = shared.key.key_in(headers, extensions, &mut buffer) else { return AtOnce::Elsewhere };
    let Ok(key) = Key::new(key) else { return AtOnce::Elsewhere };
    match shared.check_ready(key, 1) {
        Some(Ok(verdict)) if verdict.decision.allowed && verdict.decision.delay.is_zero() => AtOnce::Allowed(verdict),
        Some(checked) => AtOnce::Decided(outcome(shared, checked)),
        None => AtOnce::Later(RequestKey::from(key.as_bytes())),
    }
}
