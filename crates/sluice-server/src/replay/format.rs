//! The log formats `sluice replay` reads, behind one parser.

use super::combined::{CombinedKey, CombinedParser};
use super::json_lines::JsonParser;
use super::time_text::UtcOffset;
use crate::cli::ReplayArgs;
use crate::trace::parse_line;
use sluice_core::{Key, Timestamp};
use std::borrow::Cow;
use std::fmt;

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatName {
    /// nginx's and Apache's combined log format (the common format too).
    Combined,
    /// One JSON object per line (`--time-field`, `--key-field`).
    Json,
    /// `sluice simulate`'s trace: `<time in µs since the Unix epoch> <key> [cost]`.
    Trace,
}

impl fmt::Display for FormatName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FormatName::Combined => "combined",
            FormatName::Json => "json",
            FormatName::Trace => "trace",
        })
    }
}

/// One request read from a log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) time: Timestamp,
    pub(crate) key: Cow<'a, [u8]>,
    pub(crate) cost: u64,
    /// The request's method (empty when the line has none), for `--method`.
    pub(crate) method: Cow<'a, [u8]>,
    /// The request target, path and query (empty when the line has none), for `--path`.
    pub(crate) target: Cow<'a, [u8]>,
    /// The response's status, for `--status`.
    pub(crate) status: Option<u16>,
    /// The offset from UTC the line wrote its time in, when it wrote one.
    pub(crate) offset: Option<UtcOffset>,
}

impl<'a> Record<'a> {
    /// A request of `cost` for `key` at `time`, with nothing known of its HTTP request.
    pub(crate) fn keyed(time: Timestamp, key: Cow<'a, [u8]>, cost: u64) -> Self {
        Record { time, key, cost, method: Cow::Borrowed(b""), target: Cow::Borrowed(b""), status: None, offset: None }
    }
}

/// A parser of the chosen format, with its key choice.
#[derive(Debug)]
pub(crate) enum Parser {
    Combined(CombinedParser),
    Json(JsonParser),
    Trace,
}

impl Parser {
    /// The parser `args` ask for.
    ///
    /// # Errors
    ///
    /// When the key option does not fit the format.
    pub(crate) fn from_args(args: &ReplayArgs) -> Result<Parser, String> {
        match (args.format, &args.key) {
            (FormatName::Combined, key) => {
                Ok(Parser::Combined(CombinedParser::new(CombinedKey::parse(key.as_deref().unwrap_or("ip"))?)))
            }
            (FormatName::Json, None) => {
                Ok(Parser::Json(JsonParser::new(&args.time_field, &args.key_field).with_request_fields(
                    &args.method_field,
                    &args.path_field,
                    &args.status_field,
                )))
            }
            (FormatName::Json, Some(_)) => Err("--key is for combined logs; JSON lines take --key-field".to_owned()),
            (FormatName::Trace, None) => Ok(Parser::Trace),
            (FormatName::Trace, Some(_)) => Err("--key is for combined logs; a trace line names its key".to_owned()),
        }
    }

    /// What `--key`/`--key-field` chose, for the summary.
    pub(crate) fn key_name(&self, args: &ReplayArgs) -> String {
        match self {
            Parser::Combined(_) => args.key.clone().unwrap_or_else(|| "ip".to_owned()),
            Parser::Json(_) => args.key_field.clone(),
            Parser::Trace => "key".to_owned(),
        }
    }

    /// Reads one line (without its line break): `Ok(None)` for a line with no request
    /// (blank, or a trace comment).
    pub(crate) fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Option<Record<'a>>, String> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let record = match self {
            Parser::Combined(parser) => parser.parse(line)?,
            Parser::Json(parser) => parser.parse(line)?,
            Parser::Trace => return parse_trace(line),
        };
        Key::new(&record.key).map_err(|error| error.to_string())?;
        Ok(Some(record))
    }
}

/// A trace line, read by the simulator's own parser.
fn parse_trace(line: &[u8]) -> Result<Option<Record<'_>>, String> {
    let text = std::str::from_utf8(line).map_err(|_| "a trace line must be UTF-8 text".to_owned())?;
    Ok(parse_line(text)?
        .map(|request| Record::keyed(request.time, Cow::Borrowed(request.key.as_bytes()), request.cost)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn blank_lines_have_no_request() {
        assert_eq!(Parser::Trace.parse(b"  \t"), Ok(None));
        assert_eq!(Parser::Combined(CombinedParser::new(CombinedKey::Ip)).parse(b""), Ok(None));
        assert_eq!(Parser::Trace.parse(b"# comment"), Ok(None));
    }

    #[test]
    fn trace_lines_keep_their_cost() {
        let record = Parser::Trace.parse(b"1500000 alice 3").unwrap().unwrap();
        assert_eq!(record, Record::keyed(Timestamp::from_micros(1_500_000), Cow::Borrowed(b"alice"), 3));
        assert!(Parser::Trace.parse(b"\xff 1").unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn empty_keys_are_bad_lines() {
        let mut parser = Parser::Combined(CombinedParser::new(CombinedKey::Quoted(2)));
        let line = br#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 1 "" "curl""#;
        assert!(parser.parse(line).unwrap_err().contains("1 to 1024 bytes"));
    }

    proptest! {
        /// Arbitrary bytes never panic any parser.
        #[test]
        fn arbitrary_lines_never_panic(line in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut parsers = [
                Parser::Combined(CombinedParser::new(CombinedKey::Quoted(4))),
                Parser::Json(JsonParser::new("time", "key")),
                Parser::Trace,
            ];
            for parser in &mut parsers {
                let _ = parser.parse(&line);
            }
        }
    }
}
