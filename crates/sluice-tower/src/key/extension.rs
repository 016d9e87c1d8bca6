//! Keys from a request extension, such as the user an authentication layer found.

use super::{KeyExtractor, RequestKey};
use http::request::Parts;
use std::fmt;
use std::marker::PhantomData;

/// Keys a request by the extension of type `T` an earlier layer inserted (an authenticated
/// user id, a tenant), written with its `Display`; a request without it has no key.
///
/// Put the rate-limit layer inside (after) the layer that inserts the extension.
///
/// # Examples
///
/// ```
/// use sluice_tower::key::{ExtensionKey, KeyExtractor};
///
/// #[derive(Clone)]
/// struct UserId(u64);
/// impl std::fmt::Display for UserId {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "user-{}", self.0) }
/// }
///
/// let mut request = http::Request::get("/").body(())?;
/// request.extensions_mut().insert(UserId(7));
/// let (parts, ()) = request.into_parts();
/// assert_eq!(ExtensionKey::<UserId>::new().extract(&parts).unwrap().as_bytes(), b"user-7");
/// # Ok::<(), http::Error>(())
/// ```
pub struct ExtensionKey<T> {
    _type: PhantomData<fn() -> T>,
}

impl<T> ExtensionKey<T> {
    /// Keys by the extension of type `T`.
    pub fn new() -> Self {
        ExtensionKey { _type: PhantomData }
    }
}

impl<T> Default for ExtensionKey<T> {
    fn default() -> Self {
        ExtensionKey::new()
    }
}

impl<T> Clone for ExtensionKey<T> {
    fn clone(&self) -> Self {
        ExtensionKey::new()
    }
}

impl<T> fmt::Debug for ExtensionKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExtensionKey<{}>", std::any::type_name::<T>())
    }
}

impl<T: fmt::Display + Send + Sync + 'static> KeyExtractor for ExtensionKey<T> {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        parts.extensions.get::<T>().map(|value| RequestKey::from(value.to_string()))
    }
}
