//! Reading commands off a RESP connection: what a Redis server itself accepts from its
//! clients, a multibulk array of bulk strings (`*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n`, what every
//! client library sends) or an inline command (`PING "hi there"\r\n`, what `nc` and `telnet`
//! send), split into words with Redis's quoting rules (`inline.rs`).
//!
//! Every length is checked when its header is read, before any of its bytes are waited
//! for: a declared bulk length over [`MAX_BULK`] (a 512 MB `$536870912` included) or an
//! argument count over [`MAX_ARGS`] is a protocol error at once, so a connection buffers at
//! most one command of bounded size ([`MAX_COMMAND`]). A protocol error answers `-ERR Protocol error: …` and
//! closes the connection, as Redis does.

use bytes::{Bytes, BytesMut};

mod inline;

/// The longest argument (a bulk string) a command may carry, in bytes. Keys are at most
/// 1 024 bytes; the rest are numbers and policy names.
pub(crate) const MAX_BULK: usize = 64 * 1024;

/// The most arguments one command may carry.
pub(crate) const MAX_ARGS: usize = 1024;

/// The longest header or inline command line, in bytes (Redis's own inline limit).
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// The most bytes one command may take on the wire: what a connection buffers at most.
pub(crate) const MAX_COMMAND: usize = 1024 * 1024;

/// A command's arguments, its name first.
pub(crate) type Command = Vec<Bytes>;

/// Bytes that are not a command: the connection is answered with it and closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Protocol error: {0}")]
pub(crate) struct ProtocolError(pub(crate) String);

/// Takes the next whole command off the front of `buffer`: `Ok(None)` when it is not all
/// there yet (nothing is taken), `Ok(Some(empty))` for an empty one (`*0`, a blank line),
/// which is to be skipped.
///
/// # Errors
///
/// The bytes are no command, or one over the bounds.
pub(crate) fn next_command(buffer: &mut BytesMut) -> Result<Option<Command>, ProtocolError> {
    match buffer.first() {
        None => Ok(None),
        Some(b'*') => multibulk(buffer),
        Some(_) => inline_command(buffer),
    }
}

/// `*<count>\r\n` then `count` times `$<length>\r\n<bytes>\r\n`.
fn multibulk(buffer: &mut BytesMut) -> Result<Option<Command>, ProtocolError> {
    let Some((count, mut at)) = header(buffer, 0, "multibulk")? else { return Ok(None) };
    if count > MAX_ARGS as i64 {
        return Err(ProtocolError("invalid multibulk length".into()));
    }
    let mut spans = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for _ in 0..count.max(0) {
        match buffer.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&other) => return Err(ProtocolError(format!("expected '$', got '{}'", char::from(other)))),
        }
        let Some((length, start)) = header(buffer, at, "bulk")? else { return Ok(None) };
        let length = usize::try_from(length).ok().filter(|&length| length <= MAX_BULK);
        let length = length.ok_or_else(|| ProtocolError("invalid bulk length".into()))?;
        let end = start + length;
        if end + 2 > MAX_COMMAND {
            return Err(ProtocolError(format!("command over {MAX_COMMAND} bytes")));
        }
        if buffer.len() < end + 2 {
            return Ok(None);
        }
        if &buffer[end..end + 2] != b"\r\n" {
            return Err(ProtocolError("expected CRLF after a bulk string".into()));
        }
        spans.push((start, end));
        at = end + 2;
    }
    let frame = buffer.split_to(at).freeze();
    Ok(Some(spans.into_iter().map(|(start, end)| frame.slice(start..end)).collect()))
}

/// The number after the type byte at `at` (`*3\r\n`, `$5\r\n`) and where the line ends.
fn header(buffer: &[u8], at: usize, what: &str) -> Result<Option<(i64, usize)>, ProtocolError> {
    let Some(end) = line_end(&buffer[at..]) else {
        // 20 digits and a sign hold any i64: a longer header is no length.
        if buffer.len() - at > 32 {
            return Err(ProtocolError(format!("too big {what} count string")));
        }
        return Ok(None);
    };
    let digits = std::str::from_utf8(&buffer[at + 1..at + end]).ok();
    let number = digits.and_then(|digits| digits.parse::<i64>().ok());
    let invalid = || ProtocolError(format!("invalid {what} length"));
    Ok(Some((number.ok_or_else(invalid)?, at + end + 2)))
}

/// Where the first `\r\n` of `bytes` begins.
fn line_end(bytes: &[u8]) -> Option<usize> {
    memchr::memmem::find(bytes, b"\r\n")
}

/// A line ended by `\n` (`\r\n` too), split into words as Redis splits it (`inline.rs`).
fn inline_command(buffer: &mut BytesMut) -> Result<Option<Command>, ProtocolError> {
    let Some(end) = memchr::memchr(b'\n', buffer) else {
        if buffer.len() > MAX_LINE {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(None);
    };
    if end > MAX_LINE {
        return Err(ProtocolError("too big inline request".into()));
    }
    let line = buffer.split_to(end + 1);
    let text = line.strip_suffix(b"\r\n").unwrap_or(&line[..end]);
    let command = inline::split(text)?;
    if command.len() > MAX_ARGS {
        return Err(ProtocolError("invalid multibulk length".into()));
    }
    Ok(Some(command))
}

#[cfg(test)]
mod tests;
