use super::*;
use proptest::prelude::*;

fn parse_all(bytes: &[u8]) -> Result<Vec<Vec<String>>, ProtocolError> {
    let mut buffer = BytesMut::from(bytes);
    let mut commands = Vec::new();
    while let Some(command) = next_command(&mut buffer)? {
        commands.push(command.iter().map(|arg| String::from_utf8_lossy(arg).into_owned()).collect());
    }
    Ok(commands)
}

#[test]
fn multibulk_and_inline_commands_are_read_in_order() {
    let bytes = b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\nCL.THROTTLE k 1 2  3\r\n*0\r\n\r\n*1\r\n$4\r\nQUIT\r\n";
    let commands = parse_all(bytes).unwrap();
    let expected: Vec<Vec<&str>> =
        vec![vec!["PING", "hi"], vec!["CL.THROTTLE", "k", "1", "2", "3"], vec![], vec![], vec!["QUIT"]];
    assert_eq!(commands, expected);
}

#[test]
fn a_command_in_pieces_is_taken_once_whole() {
    let bytes = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
    for cut in 0..bytes.len() {
        let mut buffer = BytesMut::from(&bytes[..cut]);
        assert_eq!(next_command(&mut buffer), Ok(None), "cut at {cut}");
        assert_eq!(buffer.len(), cut, "nothing taken at {cut}");
        buffer.extend_from_slice(&bytes[cut..]);
        let command = next_command(&mut buffer).unwrap().unwrap();
        assert_eq!(command, vec![Bytes::from_static(b"ECHO"), Bytes::from_static(b"hello")]);
        assert!(buffer.is_empty());
    }
}

#[test]
fn a_512_mb_bulk_length_is_refused_before_any_byte_of_it() {
    let mut buffer = BytesMut::from(&b"*1\r\n$536870912\r\n"[..]);
    assert_eq!(next_command(&mut buffer), Err(ProtocolError("invalid bulk length".into())));
    let mut many = BytesMut::from(&b"*1048576\r\n"[..]);
    assert_eq!(next_command(&mut many), Err(ProtocolError("invalid multibulk length".into())));
    // Each argument within its bound, the command over its own.
    let mut whole = BytesMut::from(format!("*17\r\n${MAX_BULK}\r\n").as_bytes());
    whole.extend_from_slice(&vec![b'x'; MAX_BULK]);
    whole.extend_from_slice(format!("\r\n${MAX_BULK}\r\n").as_bytes());
    for _ in 0..15 {
        whole.extend_from_slice(&vec![b'x'; MAX_BULK]);
        whole.extend_from_slice(format!("\r\n${MAX_BULK}\r\n").as_bytes());
    }
    assert!(matches!(next_command(&mut whole), Ok(None) | Err(_)));
    whole.extend_from_slice(&vec![b'x'; MAX_BULK]);
    assert_eq!(next_command(&mut whole), Err(ProtocolError(format!("command over {MAX_COMMAND} bytes"))));
}

#[test]
fn malformed_frames_are_named() {
    for (bytes, error) in [
        (&b"*1\r\n+PING\r\n"[..], "expected '$', got '+'"),
        (b"*x\r\n", "invalid multibulk length"),
        (b"*1\r\n$-1\r\n", "invalid bulk length"),
        (b"*1\r\n$4\r\nPINGxx", "expected CRLF after a bulk string"),
        (b"*111111111111111111111111111111111111", "too big multibulk count string"),
    ] {
        assert_eq!(parse_all(bytes), Err(ProtocolError(error.into())), "{}", String::from_utf8_lossy(bytes));
    }
    let long_line = vec![b'a'; MAX_LINE + 1];
    assert_eq!(parse_all(&long_line), Err(ProtocolError("too big inline request".into())));
}

proptest! {
    /// Any bytes, cut anywhere: no panic, and nothing buffered beyond one command's bound.
    #[test]
    fn arbitrary_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
        let mut buffer = BytesMut::new();
        'feed: for chunk in chunks {
            buffer.extend_from_slice(&chunk);
            loop {
                match next_command(&mut buffer) {
                    Ok(Some(command)) => prop_assert!(command.len() <= MAX_ARGS),
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
            }
            prop_assert!(buffer.len() <= MAX_COMMAND + 64);
        }
    }

    /// Frames that look nearly right (RESP's own bytes, in any order) never panic either.
    #[test]
    fn near_frames_never_panic(parts in proptest::collection::vec(
        prop_oneof![Just("*".to_owned()), Just("$".to_owned()), Just("\r\n".to_owned()), Just("-1".to_owned()),
                    Just("2".to_owned()), Just("536870912".to_owned()), "[a-z ]{0,5}".prop_map(|s| s)], 0..40)) {
        let bytes = parts.concat();
        let _ = parse_all(bytes.as_bytes());
    }

    /// What a client library writes is read back as it was written.
    #[test]
    fn written_commands_are_read_back(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8)) {
        let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
        for arg in &args {
            bytes.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            bytes.extend_from_slice(arg);
            bytes.extend_from_slice(b"\r\n");
        }
        let mut buffer = BytesMut::from(&bytes[..]);
        let command = next_command(&mut buffer).unwrap().unwrap();
        prop_assert_eq!(command.iter().map(|arg| arg.to_vec()).collect::<Vec<_>>(), args);
        prop_assert!(buffer.is_empty());
    }
}
