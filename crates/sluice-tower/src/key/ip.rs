//! Keys from the client's IP address.

use super::forwarded::{ForwardingHeader, chain};
use super::{KeyExtractor, RequestKey, TrustedProxies};
use axum::extract::ConnectInfo;
use http::request::Parts;
use http::{Extensions, HeaderMap};
use smallvec::SmallVec;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The prefix IPv6 clients are keyed by unless told otherwise: a /64 is what one
/// subscriber usually gets, so a client cannot escape its limit by changing addresses.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The connection's remote address, as the server put it in the request's extensions:
/// axum's `ConnectInfo<SocketAddr>` (`into_make_service_with_connect_info`), tonic's
/// `TcpConnectInfo`, or a plain `SocketAddr` (hyper users insert it themselves).
pub fn peer_addr(parts: &Parts) -> Option<SocketAddr> {
    peer_addr_in(&parts.extensions)
}

/// [`peer_addr`] from the request's extensions alone.
pub(crate) fn peer_addr_in(extensions: &Extensions) -> Option<SocketAddr> {
    if let Some(ConnectInfo(address)) = extensions.get::<ConnectInfo<SocketAddr>>() {
        return Some(*address);
    }
    if let Some(address) = extensions.get::<SocketAddr>() {
        return Some(*address);
    }
    extensions.get::<tonic::transport::server::TcpConnectInfo>().and_then(|info| info.remote_addr())
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

impl PeerIp {
    /// [`extract`](KeyExtractor::extract) from the request's extensions alone.
    pub(crate) fn extract_in(&self, extensions: &Extensions) -> Option<RequestKey> {
        peer_addr_in(extensions).map(|peer| ip_key(peer.ip(), self.ipv6_prefix))
    }
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self.extract_in(&parts.extensions)
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

    /// [`extract`](KeyExtractor::extract) from the request's headers and extensions alone.
    pub(crate) fn extract_in(&self, headers: &HeaderMap, extensions: &Extensions) -> Option<RequestKey> {
        let peer = peer_addr_in(extensions)?.ip();
        Some(ip_key(self.client_in(headers, peer), self.ipv6_prefix))
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Option<RequestKey> {
        self.extract_in(&parts.headers, &parts.extensions)
    }
}

/// The key of `address`: IPv4 as dotted text, IPv6 as its first `prefix` bits in full
/// hexadecimal followed by `/prefix` (IPv4-mapped IPv6 addresses count as IPv4).
pub(crate) fn ip_key(address: IpAddr, prefix: u8) -> RequestKey {
    match address.to_canonical() {
        IpAddr::V4(v4) => ipv4_key(v4),
        IpAddr::V6(v6) => ipv6_key(v6, prefix),
    }
}

fn ipv4_key(address: Ipv4Addr) -> RequestKey {
    // Put together in a register, four bytes per octet from a table (the digits and a dot;
    // the next octet overwrites what is past its digits), and stored once straight into the
    // key's inline buffer: this runs on every request.
    let mut text = 0_u128;
    let mut len = 0;
    for octet in address.octets() {
        let (digits, count) = OCTETS[usize::from(octet)];
        text |= u128::from(u32::from_le_bytes(digits)) << (8 * len);
        len += count;
    }
    let mut buffer = [0_u8; 48];
    buffer[..16].copy_from_slice(&text.to_le_bytes());
    RequestKey(SmallVec::from_buf_and_len(buffer, len - 1))
}

/// Each octet's decimal digits followed by a dot, and how many bytes of that to keep.
const OCTETS: [([u8; 4], usize); 256] = {
    let mut table = [([0_u8; 4], 0); 256];
    let mut octet = 0;
    while octet < 256 {
        let (hundreds, tens, ones) = ((octet / 100) as u8, (octet / 10 % 10) as u8, (octet % 10) as u8);
        table[octet] = match octet {
            0..10 => ([b'0' + ones, b'.', 0, 0], 2),
            10..100 => ([b'0' + tens, b'0' + ones, b'.', 0], 3),
            _ => ([b'0' + hundreds, b'0' + tens, b'0' + ones, b'.'], 4),
        };
        octet += 1;
    }
    table
};

fn ipv6_key(address: Ipv6Addr, prefix: u8) -> RequestKey {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    let network = Ipv6Addr::from(u128::from(address) & mask);
    let mut key = RequestKey::default();
    for (index, segment) in network.segments().into_iter().enumerate() {
        if index > 0 {
            key.0.push(b':');
        }
        key.0.extend_from_slice(format_hex(segment).as_slice());
    }
    key.0.push(b'/');
    key.0.extend_from_slice(itoa::Buffer::new().format(prefix).as_bytes());
    key
}

fn format_hex(segment: u16) -> smallvec::SmallVec<[u8; 4]> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let nibbles = [segment >> 12, (segment >> 8) & 0xf, (segment >> 4) & 0xf, segment & 0xf];
    let first = nibbles.iter().position(|nibble| *nibble != 0).unwrap_or(3);
    nibbles[first..].iter().map(|nibble| DIGITS[usize::from(*nibble)]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str, prefix: u8) -> String {
        String::from_utf8(ip_key(text.parse().unwrap(), prefix).as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn ipv4_keys_are_dotted_text_and_mapped_addresses_count_as_ipv4() {
        assert_eq!(key("203.0.113.9", 64), "203.0.113.9");
        assert_eq!(key("10.0.100.255", 64), "10.0.100.255");
        assert_eq!(key("0.0.0.0", 64), "0.0.0.0");
        assert_eq!(key("255.255.255.255", 64), "255.255.255.255");
        assert_eq!(key("1.22.100.7", 64), "1.22.100.7");
        for octet in 0..=255_u8 {
            let address = std::net::Ipv4Addr::new(octet, 9, octet, octet);
            assert_eq!(key(&address.to_string(), 64), address.to_string());
        }
        assert_eq!(key("::ffff:203.0.113.9", 64), "203.0.113.9");
    }

    #[test]
    fn ipv6_keys_keep_only_the_prefix() {
        assert_eq!(key("2001:db8:1:2:aaaa::1", 64), "2001:db8:1:2:0:0:0:0/64");
        assert_eq!(key("2001:db8:1:2:aaaa::1", 48), "2001:db8:1:0:0:0:0:0/48");
        assert_eq!(key("2001:db8::1", 128), "2001:db8:0:0:0:0:0:1/128");
        assert_eq!(key("2001:db8::1", 0), "0:0:0:0:0:0:0:0/0");
    }
}
