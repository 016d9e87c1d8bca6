//! Helpers shared by the core benches.

/// A 16-byte key: `key-` and twelve decimal digits, built without allocating.
pub(crate) fn key_bytes(index: usize) -> [u8; 16] {
    let mut key = *b"key-000000000000";
    let mut rest = index;
    for digit in key[4..].iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    key
}
