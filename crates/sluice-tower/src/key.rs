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

pub(crate) use key_buffer::KeyBuffer;

use http::request::Parts;
use http::{Extensions, HeaderMap};
use smallvec::SmallVec;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// Takes the key a request is limited by from the request's head.
///
/// `None` means the request has no key; the layer's [`MissingKey`] rule decides then.
/// Closures `Fn(&Parts) -> Option<RequestKey>` are extractors.
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
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of the request whose head is `parts`, if it has one.
    fn extract(&self, parts: &Parts) -> Option<RequestKey>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<RequestKey> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self(parts)
    }
}

/// A layer's extractor. The ready extractors that read only the headers and extensions are
/// kept by type, so that the layer can key a request without taking it apart (moving its
/// head, a couple of hundred bytes, out of the request and back).
#[derive(Clone)]
pub(crate) enum Extractor {
    Peer(PeerIp),
    Client(ClientIp),
    Header(HeaderKey),
    Other(Arc<dyn KeyExtractor>),
}

impl Extractor {
    pub(crate) fn new<K: KeyExtractor>(key: K) -> Self {
        let any: &dyn Any = &key;
        if let Some(peer) = any.downcast_ref::<PeerIp>() {
            return Extractor::Peer(*peer);
        }
        if let Some(client) = any.downcast_ref::<ClientIp>() {
            return Extractor::Client(client.clone());
        }
        if let Some(header) = any.downcast_ref::<HeaderKey>() {
            return Extractor::Header(header.clone());
        }
        Extractor::Other(Arc::new(key))
    }

    /// The key from the request's headers and extensions alone, borrowed from them or
    /// written into `buffer`; `None` when the extractor needs the whole head
    /// ([`extract`](Self::extract) then).
    #[inline]
    pub(crate) fn key_in<'a>(
        &self,
        headers: &'a HeaderMap,
        extensions: &Extensions,
        buffer: &'a mut KeyBuffer,
    ) -> Option<Option<&'a [u8]>> {
        match self {
            Extractor::Peer(peer) => Some(peer.key_in(extensions, buffer)),
            Extractor::Client(client) => Some(client.key_in(headers, extensions, buffer)),
            Extractor::Header(header) => Some(header.key_in(headers)),
            Extractor::Other(_) => None,
        }
    }

    /// The key from the request's head.
    /// Whether the key comes from the connection's peer address (which the server must
    /// put in the request: see [`peer_addr`]).
    pub(crate) fn reads_peer_address(&self) -> bool {
        matches!(self, Extractor::Peer(_) | Extractor::Client(_))
    }

    pub(crate) fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        match self {
            Extractor::Peer(peer) => peer.extract(parts),
            Extractor::Client(client) => client.extract(parts),
            Extractor::Header(header) => header.extract(parts),
            Extractor::Other(other) => other.extract(parts),
        }
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
