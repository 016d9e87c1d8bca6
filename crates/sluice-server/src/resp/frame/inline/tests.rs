use super::*;
use proptest::prelude::*;

fn words(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    Ok(split(line)?.into_iter().map(|arg| arg.to_vec()).collect())
}

// Each row as redis-server 7.0 splits it (sds.c, `sdssplitargs`).
#[test]
fn lines_split_as_redis_splits_them() {
    let rows: [(&[u8], &[&[u8]]); 16] = [
        (b"CL.THROTTLE k 1 2  3", &[b"CL.THROTTLE", b"k", b"1", b"2", b"3"]),
        (b" \t\x0b\x0cPING\r", &[b"PING"]),
        (b"", &[]),
        (br#"SET "a b" 'c d'"#, &[b"SET", b"a b", b"c d"]),
        (br#""\n\r\t\b\a\\\"\q""#, &[b"\n\r\t\x08\x07\\\"q"]),
        (br#""\x41\x7e\x00\xfF""#, &[b"A~\0\xff"]),
        // `\x` without two hex digits is an escaped `x`.
        (br#""\x4" "\xg1""#, &[b"x4", b"xg1"]),
        (br#"'it\'s' 'a\nb\\c'"#, &[b"it's", b"a\\nb\\\\c"]),
        (br#"ab"c d"  x'y z'"#, &[b"abc d", b"xy z"]),
        (br#""" ''"#, &[b"", b""]),
        // A closing quote may be followed by any space, `\v` and `\f` too.
        (b"\"a\"\x0bb", &[b"a", b"b"]),
        // Unquoted, `\v` and `\f` do not end a word.
        (b"a\x0bb\x0cc d", &[b"a\x0bb\x0cc", b"d"]),
        (b"a\rb", &[b"a", b"b"]),
        // A NUL ends the line: Redis reads it as a C string.
        (b"PING a\0b c", &[b"PING", b"a"]),
        (b"\0\"open", &[]),
        (br#"k "\\""#, &[b"k", b"\\"]),
    ];
    for (line, expected) in rows {
        let expected: Vec<Vec<u8>> = expected.iter().map(|word| word.to_vec()).collect();
        assert_eq!(words(line), Ok(expected), "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn an_open_quote_or_a_quote_glued_to_a_word_is_unbalanced() {
    for line in [&br#"SET "a"#[..], b"SET 'a", br#""a"b"#, b"'a'b", br#""a\""#, br#""a\"#, br"'a\'", br"'a\\'"] {
        let error = ProtocolError("unbalanced quotes in request".into());
        assert_eq!(words(line), Err(error.clone()), "{}", String::from_utf8_lossy(line));
        assert_eq!(error.to_string(), "Protocol error: unbalanced quotes in request");
    }
}

/// `arg` in double quotes, as `redis-cli` and Redis's `sdscatrepr` write it.
fn double_quote(arg: &[u8]) -> Vec<u8> {
    let mut out = vec![b'"'];
    for &byte in arg {
        match byte {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', byte]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            b' '..=b'~' => out.push(byte),
            _ => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    out.push(b'"');
    out
}

/// `arg` in single quotes, when they can hold it: no line break or NUL, no trailing `\`.
fn single_quote(arg: &[u8]) -> Option<Vec<u8>> {
    if arg.iter().any(|&byte| byte == b'\n' || byte == 0) || arg.last() == Some(&b'\\') {
        return None;
    }
    let mut out = vec![b'\''];
    for &byte in arg {
        if byte == b'\'' {
            out.push(b'\\');
        }
        out.push(byte);
    }
    out.push(b'\'');
    Some(out)
}

/// `arg` bare, when it can stand so: not empty, no space, quote or NUL.
fn bare(arg: &[u8]) -> Option<Vec<u8>> {
    let plain = |byte: &u8| !is_space(*byte) && !matches!(byte, b'"' | b'\'' | 0);
    (!arg.is_empty() && arg.iter().all(plain)).then(|| arg.to_vec())
}

proptest! {
    /// Any arguments, each quoted in any way that can hold it, joined by any spaces, are
    /// read back as they were.
    #[test]
    fn quoted_arguments_are_read_back(
        args in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..24), 0..3_u8), 0..8),
        gap in prop_oneof![Just(&b" "[..]), Just(&b"\t"[..]), Just(&b"  \x0b "[..]), Just(&b"\r \x0c"[..])],
    ) {
        let mut line = Vec::new();
        for (arg, how) in &args {
            let quoted = match how {
                0 => bare(arg),
                1 => single_quote(arg),
                _ => None,
            };
            line.extend_from_slice(gap);
            line.extend_from_slice(&quoted.unwrap_or_else(|| double_quote(arg)));
        }
        let expected: Vec<Vec<u8>> = args.into_iter().map(|(arg, _)| arg).collect();
        prop_assert_eq!(words(&line), Ok(expected));
    }

    /// Lines of quotes, backslashes, hex digits and spaces never panic, and an argument is
    /// never longer than its line.
    #[test]
    fn quote_soup_never_panics(line in proptest::collection::vec(
        prop_oneof![Just(b'"'), Just(b'\''), Just(b'\\'), Just(b'x'), Just(b'4'), Just(b'f'), Just(b' '),
                    Just(b'\t'), Just(b'\r'), Just(0x0b), Just(0), any::<u8>()], 0..64)) {
        if let Ok(args) = split(&line) {
            prop_assert!(args.iter().all(|arg| arg.len() <= line.len()));
        }
    }
}
