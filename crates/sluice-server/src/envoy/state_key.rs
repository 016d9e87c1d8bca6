//! The key a matched request is counted under.
//!
//! ```text
//! domain "edge", entries (remote_address, 10.0.0.1), (path, /a|b)
//! state key        edge|remote_address=10.0.0.1|path=/a\|b
//! ```
//!
//! The domain, then `|key=value` for every entry of the request, in order. In each part a
//! `\`, `|` or `=` is preceded by `\`, so the key can be split back into its parts and two
//! different requests never share a key. Like envoyproxy/ratelimit's cache key, it holds the
//! request's values rather than the rule's, so a rule without a value (or with a wildcard)
//! gives each value its own counter.

use sluice_core::Key;
use std::fmt;

/// Between the domain and each entry.
const SEPARATOR: char = '|';
/// Between an entry's key and its value.
const ASSIGN: char = '=';
/// Precedes any of the three special characters inside a part.
const ESCAPE: char = '\\';

/// The caller key to check a limit at: 1 to [`Key::MAX_LEN`] bytes, so
/// `Key::new(state_key.as_bytes())` always succeeds.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct StateKey(String);

impl StateKey {
    /// Encodes a request, or returns the encoded length when it exceeds [`Key::MAX_LEN`].
    pub(super) fn encode<'e, I>(domain: &str, entries: I) -> Result<StateKey, usize>
    where
        I: Iterator<Item = (&'e str, &'e str)> + Clone,
    {
        let entries_len: usize = entries.clone().map(|(key, value)| 2 + escaped_len(key) + escaped_len(value)).sum();
        let len = escaped_len(domain) + entries_len;
        if len > Key::MAX_LEN {
            return Err(len);
        }
        let mut text = String::with_capacity(len);
        push_escaped(&mut text, domain);
        for (key, value) in entries {
            text.push(SEPARATOR);
            push_escaped(&mut text, key);
            text.push(ASSIGN);
            push_escaped(&mut text, value);
        }
        Ok(StateKey(text))
    }

    /// The key's bytes, for [`Key::new`].
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The key as text (it is always UTF-8).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn is_special(c: char) -> bool {
    matches!(c, SEPARATOR | ASSIGN | ESCAPE)
}

fn escaped_len(part: &str) -> usize {
    // The special characters are ASCII, so counting bytes counts them.
    part.len() + part.bytes().filter(|byte| is_special(char::from(*byte))).count()
}

fn push_escaped(text: &mut String, part: &str) {
    for c in part.chars() {
        if is_special(c) {
            text.push(ESCAPE);
        }
        text.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(domain: &str, entries: &[(&str, &str)]) -> Result<StateKey, usize> {
        StateKey::encode(domain, entries.iter().copied())
    }

    /// Splits a key back into its parts: the proof that the encoding is injective.
    fn decode(key: &str) -> (String, Vec<(String, String)>) {
        let mut parts = vec![String::new()];
        let mut chars = key.chars();
        while let Some(c) = chars.next() {
            match c {
                ESCAPE => parts.last_mut().unwrap().extend(chars.next()),
                SEPARATOR | ASSIGN => parts.push(String::new()),
                c => parts.last_mut().unwrap().push(c),
            }
        }
        let domain = parts.remove(0);
        let entries = parts.chunks(2).map(|pair| (pair[0].clone(), pair[1].clone())).collect();
        (domain, entries)
    }

    #[test]
    fn escapes_the_separators_inside_parts() {
        let key = encode("edge", &[("remote_address", "10.0.0.1"), ("path", "/a|b=c\\")]).unwrap();
        assert_eq!(key.as_str(), r"edge|remote_address=10.0.0.1|path=/a\|b\=c\\");
        assert_eq!(key.as_bytes().len(), key.as_str().len());
    }

    #[test]
    fn refuses_keys_longer_than_a_store_accepts() {
        let value = "x".repeat(Key::MAX_LEN);
        assert_eq!(encode("d", &[("k", &value)]), Err(Key::MAX_LEN + 4));
        let fits = "x".repeat(Key::MAX_LEN - 4);
        assert_eq!(encode("d", &[("k", &fits)]).unwrap().as_bytes().len(), Key::MAX_LEN);
    }

    proptest! {
        #[test]
        fn decodes_back_to_what_was_encoded(
            domain in "[a-z|=\\\\]{1,6}",
            entries in prop::collection::vec(("[a-z|=\\\\]{0,5}", "[a-z|=\\\\é]{0,5}"), 1..4),
        ) {
            let borrowed: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let key = encode(&domain, &borrowed).unwrap();
            prop_assert_eq!(decode(key.as_str()), (domain, entries));
        }
    }
}
