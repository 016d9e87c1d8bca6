//! Replies, written in the protocol the connection speaks: RESP2 until the client says
//! `HELLO 3`, RESP3 after. What RESP2 lacks is written as Redis writes it: a map as a flat
//! array of keys and values, a boolean as the integer 1 or 0, a null as `$-1`.

use bytes::Bytes;

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// RESP2, every connection's protocol at first.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The number `HELLO` takes and answers.
    pub(crate) fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply {
    /// `+OK`.
    Simple(&'static str),
    /// `-ERR …`: the text starts with its code (`ERR`, `NOPROTO`, `WRONGPASS`).
    Error(String),
    /// `:42`.
    Integer(i64),
    /// `$5\r\nhello`.
    Bulk(Bytes),
    /// RESP3 `#t`; RESP2 `:1`.
    Boolean(bool),
    /// RESP3 `_`; RESP2 `$-1`.
    Null,
    /// `*n`.
    Array(Vec<Reply>),
    /// RESP3 `%n`; RESP2 a flat array of its keys and values.
    Map(Vec<(&'static str, Reply)>),
}

impl Reply {
    /// `-ERR <text>`.
    pub(crate) fn error(text: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {text}"))
    }

    /// A bulk string of `text`.
    pub(crate) fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    /// Appends the reply to `out` as `protocol` writes it.
    pub(crate) fn write(&self, protocol: Protocol, out: &mut Vec<u8>) {
        let resp3 = protocol == Protocol::Resp3;
        match self {
            Reply::Simple(text) => line(out, b'+', text.as_bytes()),
            // A reply line cannot hold a line break: Redis replaces them with spaces.
            Reply::Error(text) => line(out, b'-', text.replace(['\r', '\n'], " ").as_bytes()),
            Reply::Integer(value) => line(out, b':', itoa::Buffer::new().format(*value).as_bytes()),
            Reply::Bulk(bytes) => {
                line(out, b'$', itoa::Buffer::new().format(bytes.len()).as_bytes());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Boolean(value) if resp3 => line(out, b'#', if *value { b"t" } else { b"f" }),
            Reply::Boolean(value) => line(out, b':', if *value { b"1" } else { b"0" }),
            Reply::Null if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Null => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                line(out, b'*', itoa::Buffer::new().format(items.len()).as_bytes());
                items.iter().for_each(|item| item.write(protocol, out));
            }
            Reply::Map(entries) => {
                let (kind, count) = if resp3 { (b'%', entries.len()) } else { (b'*', 2 * entries.len()) };
                line(out, kind, itoa::Buffer::new().format(count).as_bytes());
                for (key, value) in entries {
                    Reply::Bulk(Bytes::from_static(key.as_bytes())).write(protocol, out);
                    value.write(protocol, out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(reply: &Reply, protocol: Protocol) -> String {
        let mut out = Vec::new();
        reply.write(protocol, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_map_is_a_flat_array_in_resp2_and_a_map_in_resp3() {
        let map = Reply::Map(vec![("allowed", Reply::Boolean(true)), ("retry", Reply::Null)]);
        assert_eq!(written(&map, Protocol::Resp2), "*4\r\n$7\r\nallowed\r\n:1\r\n$5\r\nretry\r\n$-1\r\n");
        assert_eq!(written(&map, Protocol::Resp3), "%2\r\n$7\r\nallowed\r\n#t\r\n$5\r\nretry\r\n_\r\n");
    }

    #[test]
    fn an_error_keeps_to_one_line() {
        assert_eq!(written(&Reply::error("a\r\nb"), Protocol::Resp2), "-ERR a  b\r\n");
        assert_eq!(written(&Reply::Array(vec![Reply::Integer(-1)]), Protocol::Resp3), "*1\r\n:-1\r\n");
    }
}
