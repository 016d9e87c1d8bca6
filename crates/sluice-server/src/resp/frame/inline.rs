//! An inline command's line split into arguments as Redis splits it (`sdssplitargs`), so
//! that what `redis-cli`, `telnet` or `nc` users type means here what it means to Redis:
//!
//! - words are separated by spaces (`isspace`: space, `\t`, `\n`, `\v`, `\f`, `\r`);
//! - `"double quotes"` take the escapes `\n`, `\r`, `\t`, `\b`, `\a`, `\xHH` (two hex
//!   digits), and any other escaped byte stands for itself (`\\`, `\"`);
//! - `'single quotes'` take only `\'`; any other backslash is itself;
//! - a quote may open inside a word (`ab"c d"` is `abc d`) and ends it;
//! - a quote left open, or a closing quote followed by anything but a space, is the
//!   protocol error `unbalanced quotes in request`.
//!
//! `sdssplitargs` reads the line as a C string: a NUL byte ends its words, and so it does
//! here. (Redis itself never gets that far: it looks for the line's end with `strchr`, which
//! stops at the NUL, and leaves the connection waiting.)

use crate::resp::frame::ProtocolError;
use bytes::Bytes;

/// The arguments of `line` (without its line break), as Redis splits them.
///
/// # Errors
///
/// A quote is left open, or closes before something other than a space.
pub(super) fn split(line: &[u8]) -> Result<Vec<Bytes>, ProtocolError> {
    let line = &line[..memchr::memchr(0, line).unwrap_or(line.len())];
    let mut args = Vec::new();
    let mut at = 0;
    loop {
        while line.get(at).copied().is_some_and(is_space) {
            at += 1;
        }
        if at == line.len() {
            return Ok(args);
        }
        let (arg, next) = word(line, at)?;
        args.push(Bytes::from(arg));
        at = next;
    }
}

/// C's `isspace` in the "C" locale: what separates words.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The word that starts at `at` (not a space), and where it ends. Unquoted, only a space,
/// `\t`, `\r` or `\n` ends a word (Redis's own list: `\v` and `\f` do not).
fn word(line: &[u8], mut at: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut arg = Vec::new();
    loop {
        match line.get(at) {
            None | Some(b' ' | b'\t' | b'\r' | b'\n') => return Ok((arg, at)),
            Some(b'"') => return double_quoted(line, at + 1, arg),
            Some(b'\'') => return single_quoted(line, at + 1, arg),
            Some(&byte) => {
                arg.push(byte);
                at += 1;
            }
        }
    }
}

/// The rest of a word after its opening `"` at `at - 1`, appended to `arg`.
fn double_quoted(line: &[u8], mut at: usize, mut arg: Vec<u8>) -> Result<(Vec<u8>, usize), ProtocolError> {
    loop {
        match &line[at..] {
            [] => return Err(unbalanced()),
            [b'\\', b'x', high, low, ..] if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                arg.push((hex(*high) << 4) | hex(*low));
                at += 4;
            }
            [b'\\', escaped, ..] => {
                arg.push(unescape(*escaped));
                at += 2;
            }
            [b'"', rest @ ..] => return closed(rest, arg, at + 1),
            [byte, ..] => {
                arg.push(*byte);
                at += 1;
            }
        }
    }
}

/// The rest of a word after its opening `'` at `at - 1`, appended to `arg`.
fn single_quoted(line: &[u8], mut at: usize, mut arg: Vec<u8>) -> Result<(Vec<u8>, usize), ProtocolError> {
    loop {
        match &line[at..] {
            [] => return Err(unbalanced()),
            [b'\\', b'\'', ..] => {
                arg.push(b'\'');
                at += 2;
            }
            [b'\'', rest @ ..] => return closed(rest, arg, at + 1),
            [byte, ..] => {
                arg.push(*byte);
                at += 1;
            }
        }
    }
}

/// A closing quote ends its word, and must be followed by a space or nothing.
fn closed(rest: &[u8], arg: Vec<u8>, next: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    match rest.first() {
        Some(&byte) if !is_space(byte) => Err(unbalanced()),
        _ => Ok((arg, next)),
    }
}

/// The byte `\<escaped>` stands for in double quotes.
fn unescape(escaped: u8) -> u8 {
    match escaped {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

/// The value of an ASCII hex digit.
fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        _ => (digit | 0x20) - b'a' + 10,
    }
}

fn unbalanced() -> ProtocolError {
    ProtocolError("unbalanced quotes in request".into())
}

#[cfg(test)]
mod tests;
