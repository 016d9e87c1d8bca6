//! Keys from the client's IP address.

use super::forwarded::{ForwardingHeader, chain};
use super::key_buffer::KeyBuffer;
use super::{InPlace, KeyExtractor, RequestKey, TrustedProxies};
use http::request::Parts;
use http::{Extensions, HeaderMap};
use std::net::{IpAddr, SocketAddr};

/// The prefix IPv6 clients are keyed by unless told otherwise: a /64 is what one
/// subscriber usually gets, so a client cannot escape its limit by changing addresses.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The connection's remote address, as the server put it in the request's extensions:
/// axum's `ConnectInfo<SocketAddr>` (`into_make_service_with_connect_info`; `axum`
/// feature), tonic's `TcpConnectInfo` (`tonic` feature), or a plain `SocketAddr` (hyper
/// users insert it themselves).
pub fn peer_addr(parts: &Parts) -> Option<SocketAddr> {
    peer_addr_in(&parts.extensions)
}

/// [`peer_addr`] from the request's extensions alone.
pub(crate) fn peer_addr_in(extensions: &Extensions) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(address)) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(*address);
    }
    if let Some(address) = extensions.get::<SocketAddr>() {
        return Some(*address);
    }
    #[cfg(feature = "tonic")]
    if let Some(address) =
        extensions.get::<tonic::transport::server::TcpConnectInfo>().and_then(|info| info.remote_addr())
    {
        return Some(address);
    }
    None
}

/// Keys a request by the IP address of the peer that sent it. Behind a proxy every
/// request comes from the proxy: use [`ClientIp`] there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerIp {
    ipv6_prefix: u8,
}

impl PeerIp {
    /// The peer's address; IPv6 peers keyed by their /64.
    pub fn new() -> Self {
        PeerIp { ipv6_prefix: DEFAULT_IPV6_PREFIX }
    }

    /// IPv6 peers keyed by their first `bits` bits (at most 128).
    #[must_use]
    pub fn ipv6_prefix(self, bits: u8) -> Self {
        PeerIp { ipv6_prefix: bits.min(128) }
    }
}

impl Default for PeerIp {
    fn default() -> Self {
        PeerIp::new()
    }
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self.extract_in_place(&parts.headers, &parts.extensions, &mut KeyBuffer::new()).to_request_key()
    }

    #[inline]
    fn extract_in_place<'a>(
        &self,
        _: &'a HeaderMap,
        extensions: &'a Extensions,
        buffer: &'a mut KeyBuffer,
    ) -> InPlace<'a> {
        let Some(peer) = peer_addr_in(extensions) else { return InPlace::Missing };
        InPlace::Key(buffer.ip(peer.ip(), self.ipv6_prefix))
    }

    fn reads_peer_address(&self) -> bool {
        true
    }
}

/// Keys a request by the client's IP address, read from `X-Forwarded-For` (or, if you say
/// so, `Forwarded`) only as far back as the proxies are trusted; without trusted proxies
/// (the default) it is the peer's address, and forwarding headers are ignored.
///
/// Only the header your proxies write is read ([`ForwardingHeader`], `X-Forwarded-For` by
/// default). The chain is walked from the right: each trusted hop hands over to the address
/// before it; an entry that is not an address (`unknown`, an obfuscated name) ends the walk
/// at the proxy that wrote it.
///
/// # Examples
///
/// ```
/// use sluice_tower::key::{ClientIp, ForwardingHeader, KeyExtractor, TrustedProxies};
/// use std::net::SocketAddr;
///
/// let client_ip = ClientIp::behind(TrustedProxies::cidrs(["10.0.0.0/8"])?);
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.9")
///     .header("forwarded", "for=198.51.100.1") // written by the client: not read
///     .body(())?;
/// request.extensions_mut().insert("10.0.0.1:4000".parse::<SocketAddr>()?);
/// let (parts, ()) = request.into_parts();
/// assert_eq!(client_ip.extract(&parts).unwrap().as_bytes(), b"203.0.113.9");
///
/// let behind_rfc_7239_proxies = client_ip.header(ForwardingHeader::Forwarded);
/// assert_eq!(behind_rfc_7239_proxies.extract(&parts).unwrap().as_bytes(), b"198.51.100.1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIp {
    proxies: TrustedProxies,
    header: ForwardingHeader,
    ipv6_prefix: u8,
}

impl ClientIp {
    /// The client's address behind `proxies`, read from `X-Forwarded-For`.
    pub fn behind(proxies: TrustedProxies) -> Self {
        ClientIp { proxies, header: ForwardingHeader::default(), ipv6_prefix: DEFAULT_IPV6_PREFIX }
    }

    /// The client's address read from `header` (the one the proxies write) instead.
    #[must_use]
    pub fn header(self, header: ForwardingHeader) -> Self {
        ClientIp { header, ..self }
    }

    /// IPv6 clients keyed by their first `bits` bits (at most 128).
    #[must_use]
    pub fn ipv6_prefix(self, bits: u8) -> Self {
        ClientIp { ipv6_prefix: bits.min(128), ..self }
    }

    /// The client's address for a request from `peer`.
    pub fn client(&self, parts: &Parts, peer: IpAddr) -> IpAddr {
        self.client_in(&parts.headers, peer)
    }

    /// [`client`](Self::client) from the request's headers alone.
    fn client_in(&self, headers: &HeaderMap, peer: IpAddr) -> IpAddr {
        let trusted = match self.proxies {
            TrustedProxies::Hops(hops) => hops > 0,
            TrustedProxies::Cidrs(_) => self.proxies.trusts(peer),
        };
        if !trusted {
            return peer;
        }
        self.proxies.client(peer, &chain(headers, self.header))
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self.extract_in_place(&parts.headers, &parts.extensions, &mut KeyBuffer::new()).to_request_key()
    }

    fn extract_in_place<'a>(
        &self,
        headers: &'a HeaderMap,
        extensions: &'a Extensions,
        buffer: &'a mut KeyBuffer,
    ) -> InPlace<'a> {
        let Some(peer) = peer_addr_in(extensions) else { return InPlace::Missing };
        InPlace::Key(buffer.ip(self.client_in(headers, peer.ip()), self.ipv6_prefix))
    }

    fn reads_peer_address(&self) -> bool {
        true
    }
}
