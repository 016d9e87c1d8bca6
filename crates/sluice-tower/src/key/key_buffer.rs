//! [`KeyBuffer`]: room on the stack for a key the layer writes itself (an IP address).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest key a buffer holds: an IPv6 prefix, eight groups of four hexadecimal
/// digits, seven colons, `/` and three digits, is 43 bytes.
const CAPACITY: usize = 48;

/// Room on the stack for the key of an IP address, so that the layer keys the usual
/// request without building a [`RequestKey`](super::RequestKey): its key is then a slice
/// of this buffer, or of the request itself (a header's value). See
/// [`KeyExtractor::extract_in_place`](super::KeyExtractor::extract_in_place).
pub struct KeyBuffer {
    bytes: [u8; CAPACITY],
}

impl KeyBuffer {
    /// An empty buffer.
    #[inline]
    pub fn new() -> Self {
        KeyBuffer { bytes: [0; CAPACITY] }
    }

    /// The key of `address`: IPv4 as dotted text, IPv6 as its first `prefix` bits (a
    /// larger prefix counts as 128) in full hexadecimal followed by `/prefix`; IPv4-mapped
    /// IPv6 addresses count as IPv4. This is the key [`PeerIp`](super::PeerIp) and
    /// [`ClientIp`](super::ClientIp) give an address.
    #[inline]
    pub fn ip(&mut self, address: IpAddr, prefix: u8) -> &[u8] {
        match address.to_canonical() {
            IpAddr::V4(v4) => self.ipv4(v4),
            IpAddr::V6(v6) => self.ipv6(v6, prefix),
        }
    }

    /// `address` in dotted decimal: this runs on every request.
    #[inline]
    fn ipv4(&mut self, address: Ipv4Addr) -> &[u8] {
        let mut len = 0;
        // Four bytes per octet from a table (the digits and a dot); the next octet
        // overwrites what is past its digits. Three octets take at most 12 bytes, so the
        // mask changes nothing; it lets the compiler see that four bytes always fit (no
        // bounds check).
        for octet in address.octets() {
            let (digits, count) = OCTETS[usize::from(octet)];
            let at = len & 31;
            self.bytes[at..at + 4].copy_from_slice(&digits);
            len += count;
        }
        &self.bytes[..len - 1]
    }

    fn ipv6(&mut self, address: Ipv6Addr, prefix: u8) -> &[u8] {
        let prefix = prefix.min(128);
        let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
        let network = Ipv6Addr::from(u128::from(address) & mask);
        let mut len = 0;
        for (index, segment) in network.segments().into_iter().enumerate() {
            if index > 0 {
                len = self.put(len, b":");
            }
            len = self.put(len, &hex(segment));
        }
        len = self.put(len, b"/");
        len = self.put(len, itoa::Buffer::new().format(prefix).as_bytes());
        &self.bytes[..len]
    }

    /// Writes `bytes` at `at`; returns where they end.
    fn put(&mut self, at: usize, bytes: &[u8]) -> usize {
        self.bytes[at..at + bytes.len()].copy_from_slice(bytes);
        at + bytes.len()
    }
}

impl Default for KeyBuffer {
    fn default() -> Self {
        KeyBuffer::new()
    }
}

impl std::fmt::Debug for KeyBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyBuffer").finish_non_exhaustive()
    }
}

/// `segment` in lower-case hexadecimal, without leading zeros.
fn hex(segment: u16) -> smallvec::SmallVec<[u8; 4]> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let nibbles = [segment >> 12, (segment >> 8) & 0xf, (segment >> 4) & 0xf, segment & 0xf];
    let first = nibbles.iter().position(|nibble| *nibble != 0).unwrap_or(3);
    nibbles[first..].iter().map(|nibble| DIGITS[usize::from(*nibble)]).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str, prefix: u8) -> String {
        String::from_utf8(KeyBuffer::new().ip(text.parse().unwrap(), prefix).to_vec()).unwrap()
    }

    #[test]
    fn ipv4_keys_are_dotted_text_and_mapped_addresses_count_as_ipv4() {
        assert_eq!(key("203.0.113.9", 64), "203.0.113.9");
        assert_eq!(key("10.0.100.255", 64), "10.0.100.255");
        assert_eq!(key("0.0.0.0", 64), "0.0.0.0");
        assert_eq!(key("255.255.255.255", 64), "255.255.255.255");
        assert_eq!(key("1.22.100.7", 64), "1.22.100.7");
        for octet in 0..=255_u8 {
            let address = Ipv4Addr::new(octet, 9, octet, octet);
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
        assert_eq!(key("2001:db8::1", 200), "2001:db8:0:0:0:0:0:1/128");
    }

    /// Every prefix length, against a plain formatter: groups cut in the middle included.
    #[test]
    fn ipv6_keys_match_a_plain_rendering_at_every_prefix() {
        for text in ["2001:db8:85a3:8d3:1319:8a2e:370:7348", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::1"] {
            let address: Ipv6Addr = text.parse().unwrap();
            for prefix in 0..=128_u8 {
                let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) };
                let groups = Ipv6Addr::from(u128::from(address) & mask).segments();
                let plain = groups.iter().map(|group| format!("{group:x}")).collect::<Vec<_>>().join(":");
                assert_eq!(key(text, prefix), format!("{plain}/{prefix}"), "{text}/{prefix}");
            }
        }
    }

    #[test]
    fn the_longest_ipv6_key_fits() {
        let longest = key("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 128);
        assert_eq!(longest, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");
        assert_eq!(longest.len(), 43);
    }
}
