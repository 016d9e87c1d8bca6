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

/// The 16 bytes of a key, aligned as a word: a [`Probe`] holding them is read back as two
/// words, not byte by byte.
#[derive(Clone, Copy, Debug)]
#[repr(align(8))]
pub(crate) struct Bytes16([u8; 16]);

impl StoredKey for Exact {
    type Probe<'a> = Bytes16;

    fn store(probe: Bytes16) -> Self {
        probe.0
    }

    #[inline]
    fn is(&self, probe: Bytes16) -> bool {
        u128::from_ne_bytes(*self) == u128::from_ne_bytes(probe.0)
    }

    fn bytes(&self) -> &[u8] {
        self
    }
}

/// A key of at most 15 bytes, zero-padded, its length in the last byte (aligned as a word,
/// as [`Bytes16`] is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(8))]
pub(crate) struct Short([u8; 16]);

impl Short {
    /// The longest key of this class.
    pub(crate) const MAX_LEN: usize = 15;

    /// `key` (at most [`MAX_LEN`](Self::MAX_LEN) bytes) in its stored form.
    ///
    /// Put together in a register from two overlapping reads (the first and the last 8,
    /// 4 or 1 bytes), as short-input hashes do, rather than copied with a `memcpy` call of
    /// variable length: this runs for every check of a short key.
    #[inline]
    pub(crate) fn encode(key: &[u8]) -> Self {
        let len = key.len();
        debug_assert!(len <= Self::MAX_LEN);
        let value = match len {
            // The last 8 bytes, shifted down past those the first 8 already hold.
            8.. => {
                let tail = word::<8>(&key[len - 8..]).checked_shr(8 * (16 - len) as u32).unwrap_or(0);
                u128::from(word::<8>(key)) | u128::from(tail) << 64
            }
            4.. => u128::from(word::<4>(key) | word::<4>(&key[len - 4..]) >> (8 * (8 - len)) << 32),
            1.. => {
                u128::from(key[0])
                    | u128::from(key[len / 2]) << (8 * (len / 2))
                    | u128::from(key[len - 1]) << (8 * (len - 1))
            }
            0 => 0,
        };
        Short((value | (len as u128) << 120).to_le_bytes())
    }
}

/// The first `N` (at most 8) bytes of `bytes`, little-endian: one load of a fixed width.
#[inline(always)]
fn word<const N: usize>(bytes: &[u8]) -> u64 {
    let mut word = [0; 8];
    word[..N].copy_from_slice(&bytes[..N]);
    u64::from_le_bytes(word)
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
    Exact(Bytes16),
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
            Ok(exact) => Probe::Exact(Bytes16(exact)),
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
    fn a_short_key_is_its_bytes_zero_padded_with_its_length_last() {
        for len in 0..=Short::MAX_LEN {
            for seed in [0x00_u8, 0x5a, 0xff] {
                let key: Vec<u8> = (0..len as u8).map(|i| seed ^ i.wrapping_mul(151).wrapping_add(7)).collect();
                let mut expected = [0_u8; 16];
                expected[..len].copy_from_slice(&key);
                expected[15] = len as u8;
                assert_eq!(Short::encode(&key), Short(expected), "length {len}, seed {seed}");
            }
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
