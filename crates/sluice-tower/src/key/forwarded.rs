//! Reading the address chain of `Forwarded` (RFC 7239) or `X-Forwarded-For`.

use http::HeaderMap;
use smallvec::SmallVec;
use std::net::{IpAddr, SocketAddr};

/// The forwarded addresses, left (the original client) to right (the nearest proxy);
/// `None` for an entry that is not an address (`unknown`, an obfuscated name, garbage).
/// `Forwarded` is read when present, else `X-Forwarded-For`; several lines are joined.
pub(crate) type Chain = SmallVec<[Option<IpAddr>; 4]>;

/// The chain of `headers`.
pub(crate) fn chain(headers: &HeaderMap) -> Chain {
    let forwarded = headers.get_all(http::header::FORWARDED);
    if forwarded.iter().next().is_some() {
        return entries(forwarded.iter()).map(forwarded_for).collect();
    }
    entries(headers.get_all("x-forwarded-for").iter()).map(parse_address).collect()
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
        chain(&headers).into_iter().map(|entry| entry.map(|address| address.to_string())).collect()
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
