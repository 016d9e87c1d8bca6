//! Keys from a request header, such as an API key.

use super::{InPlace, KeyBuffer, KeyExtractor, RequestKey};
use http::request::Parts;
use http::{Extensions, HeaderMap, HeaderName};

/// Keys a request by the value of one header (the first line of it); a request without
/// the header, or with an empty one, has no key.
///
/// # Examples
///
/// ```
/// use sluice_tower::key::{HeaderKey, KeyExtractor};
///
/// let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
/// let (parts, ()) = http::Request::get("/").header("x-api-key", "k-123").body(())?.into_parts();
/// assert_eq!(api_key.extract(&parts).unwrap().as_bytes(), b"k-123");
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderKey {
    name: HeaderName,
}

impl HeaderKey {
    /// Keys by the header `name`.
    pub fn new(name: HeaderName) -> Self {
        HeaderKey { name }
    }
}

impl KeyExtractor for HeaderKey {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self.extract_in_place(&parts.headers, &parts.extensions, &mut KeyBuffer::new()).to_request_key()
    }

    #[inline]
    fn extract_in_place<'a>(&self, headers: &'a HeaderMap, _: &'a Extensions, _: &'a mut KeyBuffer) -> InPlace<'a> {
        let value = headers.get(&self.name).map(http::HeaderValue::as_bytes);
        InPlace::from(value.filter(|value| !value.is_empty()))
    }
}
