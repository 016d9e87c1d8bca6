//! How a table stores its keys: in 16 bytes for the common short keys, compared as two
//! words, and on the heap only beyond 16 bytes.
//!
//! Sixteen bytes cannot hold every key of up to 16 bytes *and* its length (there are more
//! such keys than 16-byte values), so keys are split in three classes by length, each with
//! its own table: exactly 16 bytes (a UUID, an IPv6 address), stored as they are; up to 15
//! bytes, stored with their length in the last byte; and longer keys, boxed. A key's
//! length decides its class, so one key is always in one table, and no key is ever compared
//! with a key of another class.

/// A key in the form a table stores it, and the lookup form it is compared with.
pub(crate) trait StoredKey: Sized + Send + 'static {
    /// The key as a lookup compares it with stored keys.
    type Probe<'a>: Copy;

    /// The stored form of `probe`.
    fn store(probe: Self::Probe<'_>) -> Self;

    /// True when this stored key is `probe`.
    fn is(&self, probe: Self::Probe<'_>) -> bool;

    /// The caller's key bytes.
    fn bytes(&self) -> &[u8];

    /// Bytes held on the heap.
    fn heap_size(&self) -> usize {
        0
    }
}

/// A key of exactly 16 bytes.
pub(crate) type Exact = [u8; 16];

impl StoredKey for Exact {
    type Probe<'a> = [u8; 16];

    fn store(probe: [u8; 16]) -> Self {
        probe
    }

    #[inline]
    fn is(&self, probe: [u8; 16]) -> bool {
        u128::from_ne_bytes(*self) == u128::from_ne_bytes(probe)
    }

    fn bytes(&self) -> &[u8] {
        self
    }
}

/// A key of at most 15 bytes, zero-padded, its length in the last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Short([u8; 16]);

impl Short {
    /// The longest key of this class.
    pub(crate) const MAX_LEN: usize = 15;

    /// `key` (at most [`MAX_LEN`](Self::MAX_LEN) bytes) in its stored form.
    pub(crate) fn encode(key: &[u8]) -> Self {
        let mut bytes = [0; 16];
        bytes[..key.len()].copy_from_slice(key);
        bytes[15] = key.len() as u8;
        Short(bytes)
    }
}

impl StoredKey for Short {
    type Probe<'a> = Short;

    fn store(probe: Short) -> Self {
        probe
    }

    #[inline]
    fn is(&self, probe: Short) -> bool {
        u128::from_ne_bytes(self.0) == u128::from_ne_bytes(probe.0)
    }

    fn bytes(&self) -> &[u8] {
        &self.0[..usize::from(self.0[15])]
    }
}

/// A key longer than 16 bytes.
pub(crate) type Long = Box<[u8]>;

impl StoredKey for Long {
    type Probe<'a> = &'a [u8];

    fn store(probe: &[u8]) -> Self {
        probe.into()
    }

    fn is(&self, probe: &[u8]) -> bool {
        **self == *probe
    }

    fn bytes(&self) -> &[u8] {
        self
    }

    fn heap_size(&self) -> usize {
        self.len()
    }
}

/// A caller's key sorted into its class, ready to be looked up.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Probe<'a> {
    /// Exactly 16 bytes.
    Exact([u8; 16]),
    /// At most 15 bytes.
    Short(Short),
    /// More than 16 bytes.
    Long(&'a [u8]),
}

impl<'a> Probe<'a> {
    /// The class and lookup form of `key`.
    #[inline]
    pub(crate) fn of(key: &'a [u8]) -> Self {
        match <[u8; 16]>::try_from(key) {
            Ok(exact) => Probe::Exact(exact),
            Err(_) if key.len() <= Short::MAX_LEN => Probe::Short(Short::encode(key)),
            Err(_) => Probe::Long(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_is_stored_in_its_class_and_read_back() {
        for len in 0..=40 {
            let key: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            let bytes = match Probe::of(&key) {
                Probe::Exact(probe) => Exact::store(probe).bytes().to_vec(),
                Probe::Short(probe) => Short::store(probe).bytes().to_vec(),
                Probe::Long(probe) => Long::store(probe).bytes().to_vec(),
            };
            assert_eq!(bytes, key, "length {len}");
        }
    }

    #[test]
    fn short_keys_that_differ_only_by_trailing_zeros_are_different() {
        let a = Short::encode(b"ab");
        let b = Short::encode(b"ab\0");
        assert!(!a.is(b) && !b.is(a));
        assert!(a.is(Short::encode(b"ab")));
        assert!(Short::encode(b"").is(Short::encode(b"")));
    }
}
