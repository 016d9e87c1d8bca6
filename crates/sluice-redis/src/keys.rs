//! Redis key names: every state of one caller key shares a Cluster hash tag.

use sluice_core::{Key, Limit};

/// The Redis key holding `limit`'s state for `key`: `<prefix>{<key>}:<limit id>`.
///
/// The caller's key is the hash tag, so every limit checked for one key lives in one
/// Cluster slot and a multi-limit check is one script call (no CROSSSLOT). `~`, `{` and `}`
/// in the key are escaped as `~7e`, `~7b`, `~7d`: a brace would end the tag early, and the
/// escape keeps the mapping one-to-one.
pub(crate) fn state_key(prefix: &str, key: Key<'_>, limit: &Limit) -> Vec<u8> {
    let bytes = key.as_bytes();
    let mut name = Vec::with_capacity(prefix.len() + bytes.len() + 20);
    name.extend_from_slice(prefix.as_bytes());
    name.push(b'{');
    for &byte in bytes {
        match byte {
            b'~' => name.extend_from_slice(b"~7e"),
            b'{' => name.extend_from_slice(b"~7b"),
            b'}' => name.extend_from_slice(b"~7d"),
            other => name.push(other),
        }
    }
    name.extend_from_slice(b"}:");
    name.extend_from_slice(limit.id().to_string().as_bytes());
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{SlidingLog, SlidingLogVariant};
    use std::time::Duration;

    fn limit() -> Limit {
        Limit::new("l", SlidingLog::new(1, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap())
    }

    fn name(key: &[u8]) -> String {
        String::from_utf8(state_key("sl:", Key::new(key).unwrap(), &limit())).unwrap()
    }

    #[test]
    fn the_key_is_the_hash_tag() {
        let id = limit().id();
        assert_eq!(name(b"alice"), format!("sl:{{alice}}:{id}"));
    }

    #[test]
    fn braces_and_tildes_are_escaped_one_to_one() {
        assert_eq!(name(b"}x{"), format!("sl:{{~7dx~7b}}:{}", limit().id()));
        assert_ne!(name(b"~7d"), name(b"}"));
        assert_eq!(name(b"~7d"), format!("sl:{{~7e7d}}:{}", limit().id()));
    }
}
