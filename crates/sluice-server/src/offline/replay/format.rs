//! The log formats `sluice replay` reads, behind one parser.

use super::combined::{CombinedKey, CombinedParser};
use super::json_lines::JsonParser;
use super::record::Record;
use crate::cli::{FormatName, ReplayArgs};
use crate::offline::trace::parse_line;
use sluice_core::Key;
use std::borrow::Cow;

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
    use sluice_core::Timestamp;

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
