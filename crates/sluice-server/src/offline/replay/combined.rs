//! nginx's and Apache's combined log format, and the common format it extends:
//!
//! ```text
//! $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
//! ```
//!
//! Read from byte slices without allocating: the key is a slice of the line, and the last
//! `$time_local` text is cached, since consecutive lines mostly share their second.

use super::record::Record;
use super::time_text::{UtcOffset, parse_time_local};
use sluice_core::Timestamp;
use std::borrow::Cow;

/// The field of a combined line that keys requests (`--key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CombinedKey {
    /// `$remote_addr`.
    Ip,
    /// `$remote_user`.
    User,
    /// The Nth double-quoted field, from 1: request, referer, user agent, then any field
    /// appended to the format.
    Quoted(usize),
}

impl CombinedKey {
    /// Reads a `--key` value.
    pub(crate) fn parse(text: &str) -> Result<CombinedKey, String> {
        let quoted = match text {
            "ip" => return Ok(CombinedKey::Ip),
            "user" => return Ok(CombinedKey::User),
            "request" => 1,
            "referer" => 2,
            "user_agent" => 3,
            _ => text.strip_prefix("quoted:").and_then(|n| n.parse::<usize>().ok()).filter(|&n| n >= 1).ok_or_else(
                || format!("unknown key `{text}`: use ip, user, request, referer, user_agent or quoted:N (N ≥ 1)"),
            )?,
        };
        Ok(CombinedKey::Quoted(quoted))
    }

    /// The field's name in messages.
    fn name(self) -> String {
        match self {
            CombinedKey::Ip => "ip".to_owned(),
            CombinedKey::User => "user".to_owned(),
            CombinedKey::Quoted(1) => "request".to_owned(),
            CombinedKey::Quoted(2) => "referer".to_owned(),
            CombinedKey::Quoted(3) => "user_agent".to_owned(),
            CombinedKey::Quoted(n) => format!("quoted:{n}"),
        }
    }
}

/// A combined-log reader: the key choice and the cache of the last time read.
#[derive(Debug)]
pub(crate) struct CombinedParser {
    key: CombinedKey,
    last_time_text: Vec<u8>,
    last_time: (Timestamp, UtcOffset),
}

impl CombinedParser {
    /// A reader keying requests by `key`.
    pub(crate) fn new(key: CombinedKey) -> CombinedParser {
        CombinedParser { key, last_time_text: Vec::with_capacity(32), last_time: (Timestamp::EPOCH, UtcOffset::UTC) }
    }

    /// Reads one non-blank line.
    pub(crate) fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Record<'a>, String> {
        let (ip, rest) = word(line).ok_or("expected `<ip> <ident> <user> [<time>] \"<request>\" …`")?;
        let (_ident, rest) = word(rest).ok_or("expected `<ident> <user> [<time>]` after the address")?;
        let (user, rest) = word(rest).ok_or("expected `<user> [<time>]` after the ident")?;
        let rest = rest.strip_prefix(b"[").ok_or("expected `[` before the time")?;
        let end = memchr::memchr(b']', rest).ok_or("expected `]` after the time")?;
        let (time, offset) = self.time(&rest[..end])?;
        let fields = &rest[end + 1..];
        let request = nth_quoted(fields, 1).ok_or("expected a quoted request after the time")?;
        let status = status(&fields[request.1..])?;
        let (method, target) = method_and_target(request.0);
        let key = match self.key {
            CombinedKey::Ip => ip,
            CombinedKey::User => user,
            CombinedKey::Quoted(1) => request.0,
            CombinedKey::Quoted(n) => {
                nth_quoted(fields, n).ok_or_else(|| format!("the line has no {} field", self.key.name()))?.0
            }
        };
        Ok(Record {
            time,
            key: Cow::Borrowed(key),
            cost: 1,
            method: Cow::Borrowed(method),
            target: Cow::Borrowed(target),
            status: Some(status),
            offset: Some(offset),
        })
    }

    /// The time of `text` and its offset, from the cache when it is the previous line's.
    fn time(&mut self, text: &[u8]) -> Result<(Timestamp, UtcOffset), String> {
        if text != self.last_time_text.as_slice() {
            let time = parse_time_local(text).ok_or_else(|| {
                format!("time `{}` is not like 10/Oct/2000:13:55:36 -0700", String::from_utf8_lossy(text))
            })?;
            self.last_time_text.clear();
            self.last_time_text.extend_from_slice(text);
            self.last_time = time;
        }
        Ok(self.last_time)
    }
}

/// Splits a space-terminated, non-empty word off the front of `text`.
fn word(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = memchr::memchr(b' ', text)?;
    (end > 0).then(|| (&text[..end], &text[end + 1..]))
}

/// The `n`th double-quoted field of `text` (from 1), without its quotes, and the offset
/// just past its closing quote. A backslash escapes the next byte (Apache writes `\"`).
fn nth_quoted(text: &[u8], n: usize) -> Option<(&[u8], usize)> {
    let mut offset = 0;
    for _ in 1..n {
        offset += closing_quote(text.get(offset..)?)?.1;
    }
    let (start, end) = closing_quote(text.get(offset..)?)?;
    Some((&text[offset + start..offset + end - 1], offset + end))
}

/// In `text`, the start of the first quoted field's content and the offset just past its
/// closing quote.
fn closing_quote(text: &[u8]) -> Option<(usize, usize)> {
    let start = memchr::memchr(b'"', text)? + 1;
    let mut at = start;
    loop {
        let found = at + memchr::memchr2(b'"', b'\\', text.get(at..)?)?;
        if text[found] == b'"' {
            return Some((start, found + 1));
        }
        at = found + 2;
    }
}

/// The status: the three digits of ` <status> ` after the request.
fn status(after_request: &[u8]) -> Result<u16, String> {
    match after_request {
        [b' ', a, b, c, rest @ ..]
            if [a, b, c].iter().all(|digit| digit.is_ascii_digit()) && matches!(rest.first(), None | Some(b' ')) =>
        {
            Ok([a, b, c].iter().fold(0, |status, &&digit| status * 10 + u16::from(digit - b'0')))
        }
        _ => Err("expected a three-digit status after the request".to_owned()),
    }
}

/// The method and target of a request line (`GET /path?q HTTP/1.1`); empty when the
/// request is not of that shape (nginx logs a bad request's bytes as they came).
fn method_and_target(request: &[u8]) -> (&[u8], &[u8]) {
    let mut words = request.split(|&byte| byte == b' ').filter(|word| !word.is_empty());
    match (words.next(), words.next()) {
        (Some(method), Some(target)) => (method, target),
        _ => (b"", b""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINE: &[u8] = br#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a\"b HTTP/1.0" 200 2326 "http://x/" "Mozilla/4.08" "key-7""#;

    fn key_of(key: &str, line: &[u8]) -> Result<String, String> {
        let mut parser = CombinedParser::new(CombinedKey::parse(key)?);
        parser.parse(line).map(|record| String::from_utf8_lossy(&record.key).into_owned())
    }

    #[test]
    fn reads_every_key_choice() {
        assert_eq!(key_of("ip", LINE).unwrap(), "127.0.0.1");
        assert_eq!(key_of("user", LINE).unwrap(), "frank");
        assert_eq!(key_of("request", LINE).unwrap(), r#"GET /a\"b HTTP/1.0"#);
        assert_eq!(key_of("referer", LINE).unwrap(), "http://x/");
        assert_eq!(key_of("user_agent", LINE).unwrap(), "Mozilla/4.08");
        assert_eq!(key_of("quoted:4", LINE).unwrap(), "key-7");
        assert!(key_of("quoted:5", LINE).unwrap_err().contains("no quoted:5 field"));
        assert!(key_of("quoted:0", LINE).unwrap_err().contains("unknown key"));
    }

    #[test]
    fn reads_the_method_target_and_status() {
        let record = CombinedParser::new(CombinedKey::Ip).parse(LINE).unwrap();
        assert_eq!((&*record.method, &*record.target, record.status), (&b"GET"[..], &br#"/a\"b"#[..], Some(200)));
        let odd = br#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "\x16\x03" 400 0"#;
        let record = CombinedParser::new(CombinedKey::Ip).parse(odd).unwrap();
        assert_eq!((&*record.method, &*record.target, record.status), (&b""[..], &b""[..], Some(400)));
    }

    #[test]
    fn reads_the_common_format_and_the_time() {
        let common = br#"10.0.0.2 - - [10/Oct/2000:13:55:37 -0700] "GET / HTTP/1.0" 404 -"#;
        let mut parser = CombinedParser::new(CombinedKey::Ip);
        let record = parser.parse(common).unwrap();
        assert_eq!(record.time.as_micros(), 971_211_337_000_000);
        assert_eq!(&*record.key, b"10.0.0.2");
        assert!(key_of("referer", common).unwrap_err().contains("no referer field"));
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let error = |line: &str| key_of("ip", line.as_bytes()).unwrap_err();
        assert!(error("garbage").contains("expected"));
        assert!(error("1.2.3.4 - - 10/Oct/2000").contains("`[`"));
        assert!(error("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700").contains("`]`"));
        assert!(error("1.2.3.4 - - [yesterday] \"GET /\" 200 1").contains("time `yesterday`"));
        assert!(error("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] GET").contains("request"));
        assert!(error("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /\" ok").contains("status"));
    }

    proptest! {
        #[test]
        fn never_panics(line in proptest::collection::vec(any::<u8>(), 0..200), key in 1usize..6) {
            let _ = CombinedParser::new(CombinedKey::Quoted(key)).parse(&line);
            let _ = CombinedParser::new(CombinedKey::User).parse(&line);
        }

        #[test]
        fn never_panics_on_near_misses(line in r#"[0-9. -]{0,12}\[[0-9A-Za-z/: +-]{0,30}\]? ?"[^"]{0,10}\\?"? ?[0-9]{0,4} ?"?"#) {
            let _ = CombinedParser::new(CombinedKey::Quoted(3)).parse(line.as_bytes());
        }
    }
}
