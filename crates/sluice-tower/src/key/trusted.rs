//! Which peers may tell the client's address in `X-Forwarded-For` / `Forwarded`.

use ipnet::IpNet;
use std::net::IpAddr;

/// The proxies whose forwarding headers are believed.
///
/// Forwarding headers are read only when the connection comes from a trusted proxy: a
/// client talking to the service directly could write any address there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustedProxies {
    /// Peers in these networks are proxies: the client is the right-most address of the
    /// chain that is not in them.
    Cidrs(Vec<IpNet>),
    /// Every request passes exactly this many proxies: the client is that many hops from
    /// the peer. Only for deployments where the service cannot be reached around them.
    Hops(usize),
}

impl TrustedProxies {
    /// Proxies in `networks`, such as `"10.0.0.0/8"` or `"2001:db8::1/128"` (a bare address
    /// is a network of one).
    ///
    /// # Errors
    ///
    /// When a network does not parse.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_tower::key::TrustedProxies;
    ///
    /// let proxies = TrustedProxies::cidrs(["10.0.0.0/8", "192.0.2.1"])?;
    /// assert!(proxies.trusts("10.1.2.3".parse()?));
    /// assert!(!proxies.trusts("192.0.2.2".parse()?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cidrs<'a>(networks: impl IntoIterator<Item = &'a str>) -> Result<Self, ipnet::AddrParseError> {
        let parse = |text: &str| {
            text.parse::<IpNet>().or_else(|error| text.parse::<IpAddr>().map(IpNet::from).map_err(|_| error))
        };
        networks.into_iter().map(parse).collect::<Result<_, _>>().map(TrustedProxies::Cidrs)
    }

    /// Exactly `hops` proxies in front of the service.
    pub fn hops(hops: usize) -> Self {
        TrustedProxies::Hops(hops)
    }

    /// Whether `address` is a trusted proxy (always false with a hop count).
    pub fn trusts(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        match self {
            TrustedProxies::Cidrs(networks) => networks.iter().any(|network| network.contains(&address)),
            TrustedProxies::Hops(_) => false,
        }
    }

    /// The client's address: from `peer`, back through `chain` (the forwarded addresses,
    /// left to right as sent; `None` for an entry that is not an address) as far as the
    /// proxies are trusted.
    pub(crate) fn client(&self, peer: IpAddr, chain: &[Option<IpAddr>]) -> IpAddr {
        let mut client = peer;
        for (hop, entry) in chain.iter().rev().enumerate() {
            let believed = match self {
                TrustedProxies::Cidrs(_) => self.trusts(client),
                TrustedProxies::Hops(hops) => hop < *hops,
            };
            match (believed, entry) {
                (true, Some(address)) => client = *address,
                _ => break,
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn walks_back_through_trusted_proxies_only() {
        let proxies = TrustedProxies::cidrs(["10.0.0.0/8"]).unwrap();
        let chain = [Some(ip("1.1.1.1")), Some(ip("203.0.113.9")), Some(ip("10.0.0.2"))];
        assert_eq!(proxies.client(ip("10.0.0.1"), &chain), ip("203.0.113.9"));
        assert_eq!(proxies.client(ip("198.51.100.1"), &chain), ip("198.51.100.1"));
        assert_eq!(proxies.client(ip("10.0.0.1"), &[None, Some(ip("10.0.0.2"))]), ip("10.0.0.2"));
    }

    #[test]
    fn hop_count_takes_that_many_steps_back() {
        let chain = [Some(ip("1.1.1.1")), Some(ip("203.0.113.9")), Some(ip("10.0.0.2"))];
        assert_eq!(TrustedProxies::hops(0).client(ip("10.0.0.1"), &chain), ip("10.0.0.1"));
        assert_eq!(TrustedProxies::hops(2).client(ip("10.0.0.1"), &chain), ip("203.0.113.9"));
        assert_eq!(TrustedProxies::hops(9).client(ip("10.0.0.1"), &chain), ip("1.1.1.1"));
    }
}
