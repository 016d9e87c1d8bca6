//! What a request is limited by: its key, taken from the request by a [`KeyExtractor`].
//!
//! Ready extractors: the peer's IP ([`PeerIp`]), the client's IP behind trusted proxies
//! ([`ClientIp`]), a header such as an API key ([`HeaderKey`]), a request extension such as
//! an authenticated user id ([`ExtensionKey`]), or any closure `Fn(&Parts) -> Option<RequestKey>`.

mod extension;
mod forwarded;
mod header;
mod ip;
mod key_buffer;
mod trusted;

pub use extension::ExtensionKey;
pub use forwarded::ForwardingHeader;
pub use header::HeaderKey;
pub use ip::{ClientIp, DEFAULT_IPV6_PREFIX, PeerIp, peer_addr};
pub use trusted::TrustedProxies;

pub use key_buffer::KeyBuffer;

use http::request::Parts;
use http::{Extensions, HeaderMap};
use smallvec::SmallVec;
use std::fmt;

/// Takes the key a request is limited by from the request's head.
///
/// `None` means the request has no key; the layer's [`MissingKey`] rule decides then.
/// Closures `Fn(&Parts) -> Option<RequestKey>` are extractors.
///
/// Two provided methods tell the layer more, and the ready extractors override them: a
/// wrapper around one of those keeps what they give by forwarding both.
///
/// - [`extract_in_place`](Self::extract_in_place): the key from the request's headers and
///   extensions alone, so that the layer keys the request without taking it apart (moving
///   its head, a couple of hundred bytes, out of the request and back).
/// - [`reads_peer_address`](Self::reads_peer_address): whether the key comes from the
///   connection's peer address, so that a request the server gave none is answered with
///   what to change in the server.
///
/// # Examples
///
/// ```
/// use http::request::Parts;
/// use sluice_tower::key::{KeyExtractor, RequestKey};
///
/// let tenant = |parts: &Parts| parts.uri.path().split('/').nth(1).map(RequestKey::from);
/// let (parts, ()) = http::Request::get("/acme/orders").body(()).unwrap().into_parts();
/// assert_eq!(tenant.extract(&parts).unwrap().as_bytes(), b"acme");
/// ```
///
/// A wrapper around a ready extractor forwards all three methods:
///
/// ```
/// use http::{Extensions, HeaderMap, request::Parts};
/// use sluice_tower::key::{InPlace, KeyBuffer, KeyExtractor, PeerIp, RequestKey};
///
/// /// The peer's address, under the name the app gives its keys.
/// struct Visitor(PeerIp);
///
/// impl KeyExtractor for Visitor {
///     fn extract(&self, parts: &Parts) -> Option<RequestKey> {
///         self.0.extract(parts)
///     }
///
///     fn extract_in_place<'a>(
///         &self,
///         headers: &'a HeaderMap,
///         extensions: &'a Extensions,
///         buffer: &'a mut KeyBuffer,
///     ) -> InPlace<'a> {
///         self.0.extract_in_place(headers, extensions, buffer)
///     }
///
///     fn reads_peer_address(&self) -> bool {
///         self.0.reads_peer_address()
///     }
/// }
///
/// let mut request = http::Request::get("/").body(())?;
/// request.extensions_mut().insert("192.0.2.1:4000".parse::<std::net::SocketAddr>()?);
/// let (parts, ()) = request.into_parts();
/// let visitor = Visitor(PeerIp::new());
/// let mut buffer = KeyBuffer::new();
/// let in_place = visitor.extract_in_place(&parts.headers, &parts.extensions, &mut buffer);
/// assert_eq!(in_place, InPlace::Key(b"192.0.2.1"));
/// assert!(visitor.reads_peer_address());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of the request whose head is `parts`, if it has one.
    fn extract(&self, parts: &Parts) -> Option<RequestKey>;

    /// The same key as [`extract`](Self::extract), from the request's headers and
    /// extensions alone: borrowed from them or written into `buffer`.
    ///
    /// [`InPlace::NeedsHead`] (the default) when the extractor needs more of the head; the
    /// layer then takes the request apart and calls `extract`.
    #[inline]
    fn extract_in_place<'a>(
        &self,
        headers: &'a HeaderMap,
        extensions: &'a Extensions,
        buffer: &'a mut KeyBuffer,
    ) -> InPlace<'a> {
        let _ = (headers, extensions, buffer);
        InPlace::NeedsHead
    }

    /// Whether the key is (or is derived from) the connection's peer address, which the
    /// server must put in the request (see [`peer_addr`]); false by default.
    ///
    /// When it is, a request without a peer address is answered with what to change in the
    /// server (and the first one is logged), rather than as merely keyless.
    fn reads_peer_address(&self) -> bool {
        false
    }
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<RequestKey> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self(parts)
    }
}

/// A key taken in place, from a request's headers and extensions alone
/// ([`KeyExtractor::extract_in_place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPlace<'a> {
    /// The request's key.
    Key(&'a [u8]),
    /// The request has no key.
    Missing,
    /// The extractor needs the whole head: [`KeyExtractor::extract`] keys the request.
    NeedsHead,
}

impl InPlace<'_> {
    /// The key as an owned [`RequestKey`], if one was found.
    pub fn to_request_key(self) -> Option<RequestKey> {
        match self {
            InPlace::Key(key) => Some(RequestKey::from(key)),
            InPlace::Missing | InPlace::NeedsHead => None,
        }
    }
}

impl<'a> From<Option<&'a [u8]>> for InPlace<'a> {
    /// A key found in place, or [`Missing`](InPlace::Missing).
    fn from(key: Option<&'a [u8]>) -> Self {
        key.map_or(InPlace::Missing, InPlace::Key)
    }
}

/// A request's key: bytes, kept inline when short (IP addresses, API keys).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct RequestKey(SmallVec<[u8; 48]>);

impl RequestKey {
    /// The key's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestKey({:?})", String::from_utf8_lossy(&self.0))
    }
}

impl From<&[u8]> for RequestKey {
    fn from(bytes: &[u8]) -> Self {
        RequestKey(SmallVec::from_slice(bytes))
    }
}

impl From<&str> for RequestKey {
    fn from(text: &str) -> Self {
        RequestKey::from(text.as_bytes())
    }
}

impl From<String> for RequestKey {
    fn from(text: String) -> Self {
        RequestKey::from(text.as_bytes())
    }
}

/// What happens to a request without a key (or with one longer than 1024 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MissingKey {
    /// Rejected with this status (a `problem+json` body): 400 by default, 401 suits an API
    /// key that is required.
    Reject(http::StatusCode),
    /// Limited together with every other keyless request, under this key.
    Shared(RequestKey),
}

impl Default for MissingKey {
    fn default() -> Self {
        MissingKey::Reject(http::StatusCode::BAD_REQUEST)
    }
}
