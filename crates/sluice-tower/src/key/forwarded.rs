//! Reading the address chain of `X-Forwarded-For` or `Forwarded` (RFC 7239).

use http::HeaderMap;
use smallvec::SmallVec;
use std::net::{IpAddr, SocketAddr};

/// The header a [`ClientIp`](super::ClientIp) reads the forwarded addresses from: the one
/// your proxies write. Only that header is read, never the other: a proxy passes on the
/// headers it does not write as the client sent them, so a `Forwarded` header reaching a
/// service whose proxies append to `X-Forwarded-For` could name any address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForwardingHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`, which nginx, HAProxy, Envoy, cloud load
    /// balancers and CDNs append to (the default).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239), for proxies configured to write it.
    Forwarded,
}

/// The forwarded addresses, left (the original client) to right (the nearest proxy);
/// `None` for an entry that is not an address (`unknown`, an obfuscated name, garbage).
/// Several lines of the header are joined.
pub(crate) type Chain = SmallVec<[Option<IpAddr>; 4]>;

/// The chain that `header` holds in `headers` (empty when it is absent).
pub(crate) fn chain(headers: &HeaderMap, header: ForwardingHeader) -> Chain {
    match header {
        ForwardingHeader::XForwardedFor => {
            entries(headers.get_all("x-forwarded-for").iter()).map(parse_address).collect()
        }
        ForwardingHeader::Forwarded => {
            entries(headers.get_all(http::header::FORWARDED).iter()).map(forwarded_for).collect()
        }
    }
}

/// The comma-separated entries of every line; a line that is not text is one bad entry.
fn entries<'a>(lines: impl Iterator<Item = &'a http::HeaderValue>) -> impl Iterator<Item = &'a str> {
    lines.flat_map(|line| line.to_str().unwrap_or("?").split(','))
}

/// The `for=` address of one `Forwarded` element such as `for="[2001:db8::1]:80";proto=https`.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let pair = element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.eq_ignore_ascii_case("for").then_some(value)
    })?;
    parse_address(pair.trim().trim_matches('"'))
}

/// An address with or without a port, IPv6 possibly in brackets.
fn parse_address(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    if let Ok(address) = text.parse::<IpAddr>() {
        return Some(address);
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    text.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_of(name: &'static str, lines: &[&'static str]) -> Vec<Option<String>> {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(name, line.parse().unwrap());
        }
        let header = if name == "forwarded" { ForwardingHeader::Forwarded } else { ForwardingHeader::XForwardedFor };
        chain(&headers, header).into_iter().map(|entry| entry.map(|address| address.to_string())).collect()
    }

    #[test]
    fn reads_only_the_header_asked_for() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "203.0.113.9".parse().unwrap());
        headers.insert("forwarded", "for=198.51.100.1".parse().unwrap());
        let address = |text: &str| Some(text.parse::<IpAddr>().unwrap());
        assert_eq!(chain(&headers, ForwardingHeader::XForwardedFor).as_slice(), [address("203.0.113.9")]);
        assert_eq!(chain(&headers, ForwardingHeader::Forwarded).as_slice(), [address("198.51.100.1")]);
        assert!(chain(&HeaderMap::new(), ForwardingHeader::default()).is_empty());
    }

    #[test]
    fn reads_x_forwarded_for_across_lines() {
        let chain = chain_of("x-forwarded-for", &["203.0.113.9, 10.0.0.2", "[2001:db8::1]:443,bogus"]);
        let some = |text: &str| Some(text.to_owned());
        assert_eq!(chain, [some("203.0.113.9"), some("10.0.0.2"), some("2001:db8::1"), None]);
    }

    #[test]
    fn reads_forwarded_for_parameters() {
        let chain =
            chain_of("forwarded", &[r#"for=192.0.2.60;proto=http, For="[2001:db8:cafe::17]:4711""#, "for=unknown"]);
        assert_eq!(chain, [Some("192.0.2.60".to_owned()), Some("2001:db8:cafe::17".to_owned()), None]);
    }
}
