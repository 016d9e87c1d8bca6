//! Redis Cluster hash slots, computed here as Redis computes them: the store needs to know
//! which master serves a key before it asks, to answer at once for a master known down.

use std::fmt::Write as _;

/// How many hash slots a Cluster has.
pub(crate) const SLOTS: u16 = 16384;

/// The slot of `key`: CRC16 (XMODEM) of its hash tag (the bytes between the first `{` and
/// the next `}`, when not empty), else of the whole key, modulo [`SLOTS`].
pub(crate) fn slot_of(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of `key` that decides its slot.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&byte| byte == b'{') else { return key };
    let rest = &key[open + 1..];
    match rest.iter().position(|&byte| byte == b'}') {
        Some(length) if length > 0 => &rest[..length],
        _ => key,
    }
}

/// CRC16, the XMODEM variant (polynomial 0x1021, initial value 0) that Redis Cluster uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 { crc << 1 } else { (crc << 1) ^ 0x1021 };
        }
    }
    crc
}

/// A key that lives in `slot`: `<prefix>probe{<n>}` with the smallest `n` whose slot it is.
/// Every slot has one below 2^20, so the search ends; it runs once per topology change.
pub(crate) fn key_in_slot(prefix: &str, slot: u16) -> String {
    let target = slot % SLOTS;
    let mut tag = String::new();
    let n = (0u32..).find(|n| {
        tag.clear();
        let _ = write!(tag, "{n}");
        slot_of(tag.as_bytes()) == target
    });
    format!("{prefix}probe{{{}}}", n.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_those_redis_computes() {
        // CRC16/XMODEM's check value, and `CLUSTER KEYSLOT` answers from Redis's docs.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot_of(b"somekey"), 11058);
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"foo{hash_tag}"), slot_of(b"hash_tag"));
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"{user1000}.followers"));
    }

    #[test]
    fn an_empty_or_unclosed_tag_hashes_the_whole_key() {
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
    }

    #[test]
    fn a_probe_key_lands_in_the_slot_asked_for() {
        for slot in [0, 1, 5460, 5461, 10922, 16383] {
            let key = key_in_slot("sluice:", slot);
            assert!(key.starts_with("sluice:probe{"), "{key}");
            assert_eq!(slot_of(key.as_bytes()), slot, "{key}");
        }
    }
}
