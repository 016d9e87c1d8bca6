//! Trace lines: `<time in µs since the Unix epoch> <key> [cost]`.

use sluice_core::{Key, Timestamp};

/// One request of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TraceRequest<'a> {
    pub(crate) time: Timestamp,
    pub(crate) key: &'a str,
    pub(crate) cost: u64,
}

/// Parses one line: `Ok(None)` for a blank line or a `#` comment.
pub(crate) fn parse_line(line: &str) -> Result<Option<TraceRequest<'_>>, String> {
    let content = line.trim();
    if content.is_empty() || content.starts_with('#') {
        return Ok(None);
    }
    let mut words = content.split_whitespace();
    let (Some(time), Some(key)) = (words.next(), words.next()) else {
        return Err("expected `<time in µs> <key> [cost]`".to_owned());
    };
    let time = time
        .parse::<u64>()
        .map_err(|_| format!("time `{time}` is not a whole number of microseconds since the Unix epoch"))?;
    Key::new(key.as_bytes()).map_err(|error| error.to_string())?;
    let cost = match words.next() {
        None => 1,
        Some(cost) => cost.parse::<u64>().map_err(|_| format!("cost `{cost}` is not a whole number ≥ 0"))?,
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected `{extra}` after the cost"));
    }
    Ok(Some(TraceRequest { time: Timestamp::from_micros(time), key, cost }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_time_key_and_optional_cost() {
        let request = parse_line("1700000000000000 alice 3").unwrap().unwrap();
        assert_eq!(
            request,
            TraceRequest { time: Timestamp::from_micros(1_700_000_000_000_000), key: "alice", cost: 3 }
        );
        assert_eq!(parse_line("  5\tbob  ").unwrap().unwrap().cost, 1);
        assert_eq!(parse_line("5 bob 0").unwrap().unwrap().cost, 0);
    }

    #[test]
    fn skips_blank_lines_and_comments() {
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line("   "), Ok(None));
        assert_eq!(parse_line("# 5 alice"), Ok(None));
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        assert!(parse_line("alice").unwrap_err().contains("expected"));
        assert!(parse_line("-5 alice").unwrap_err().contains("time `-5`"));
        assert!(parse_line("5 alice x").unwrap_err().contains("cost `x`"));
        assert!(parse_line("5 alice -1").unwrap_err().contains("cost `-1`"));
        assert!(parse_line("5 alice 1 2").unwrap_err().contains("unexpected `2`"));
        assert!(parse_line("99999999999999999999 alice").unwrap_err().contains("time"));
        let long_key = format!("5 {}", "k".repeat(1025));
        assert!(parse_line(&long_key).unwrap_err().contains("1 to 1024 bytes"));
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC*") {
            let _ = parse_line(&line);
        }

        #[test]
        fn well_formed_lines_round_trip(time: u64, key in "[a-zA-Z0-9:._-]{1,64}", cost: u64) {
            let line = format!("{time} {key} {cost}");
            let request = parse_line(&line).unwrap().unwrap();
            prop_assert_eq!(request, TraceRequest { time: Timestamp::from_micros(time), key: &key, cost });
        }
    }
}
