//! JSON lines: one object per line, with the time and the key in fields named on the
//! command line (`--time-field`, `--key-field`).
//!
//! The time is RFC 3339 text (`"2000-10-10T20:55:36.25Z"`; nginx's `$time_local` text is
//! accepted too) or a number since the Unix epoch whose size tells its unit: below 10^11 it
//! counts seconds (fractions allowed; 10^11 s is the year 5138), below 10^14 milliseconds,
//! otherwise microseconds. A field name `a.b` reads field `b` of object `a` when the line
//! has no field called `a.b` itself.

use super::record::Record;
use super::time_text::{UtcOffset, parse_rfc3339, parse_time_local};
use serde_json::{Map, Value};
use sluice_core::Timestamp;
use std::borrow::Cow;

/// A JSON lines reader.
#[derive(Debug)]
pub(crate) struct JsonParser {
    time_field: String,
    key_field: String,
    /// Where the request's method, path and status are, for the line filters (missing
    /// fields leave them unknown).
    method_field: String,
    path_field: String,
    status_field: String,
}

impl JsonParser {
    /// A reader taking times from `time_field` and keys from `key_field`.
    pub(crate) fn new(time_field: &str, key_field: &str) -> JsonParser {
        JsonParser {
            time_field: time_field.to_owned(),
            key_field: key_field.to_owned(),
            method_field: "method".to_owned(),
            path_field: "path".to_owned(),
            status_field: "status".to_owned(),
        }
    }

    /// The same reader, taking the request's method, path and status from these fields.
    pub(crate) fn with_request_fields(self, method: &str, path: &str, status: &str) -> JsonParser {
        JsonParser {
            method_field: method.to_owned(),
            path_field: path.to_owned(),
            status_field: status.to_owned(),
            ..self
        }
    }

    /// Reads one non-blank line.
    pub(crate) fn parse(&self, line: &[u8]) -> Result<Record<'static>, String> {
        let object: Map<String, Value> =
            serde_json::from_slice(line).map_err(|error| format!("not a JSON object: {error}"))?;
        let time = field(&object, &self.time_field)?;
        let (time, offset) =
            time_of(time).ok_or_else(|| format!("field `{}` is not a time: {time}", self.time_field))?;
        let key = match field(&object, &self.key_field)? {
            Value::String(text) => text.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        };
        let text = |name: &str| match field(&object, name) {
            Ok(Value::String(text)) => text.clone().into_bytes(),
            _ => Vec::new(),
        };
        let status = field(&object, &self.status_field).ok().and_then(|status| match status {
            Value::Number(number) => number.as_u64(),
            Value::String(text) => text.parse().ok(),
            _ => None,
        });
        Ok(Record {
            time,
            key: Cow::Owned(key),
            cost: 1,
            method: Cow::Owned(text(&self.method_field)),
            target: Cow::Owned(text(&self.path_field)),
            status: status.and_then(|status| u16::try_from(status).ok()),
            offset,
        })
    }
}

/// The value of field `name`, or of the nested field its dots name.
fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    if let Some(value) = object.get(name) {
        return Ok(value);
    }
    let mut parts = name.split('.');
    let first = parts.next().and_then(|part| object.get(part));
    parts
        .try_fold(first, |value, part| Some(value.and_then(|value| value.get(part))))
        .flatten()
        .ok_or_else(|| format!("no field `{name}`"))
}

/// The time a JSON value holds (see the module's documentation), with the offset its
/// text wrote (none for a number).
fn time_of(value: &Value) -> Option<(Timestamp, Option<UtcOffset>)> {
    let time = match value {
        Value::String(text) => {
            let (time, offset) = parse_rfc3339(text.as_bytes()).or_else(|| parse_time_local(text.as_bytes()))?;
            return Some((time, Some(offset)));
        }
        Value::Number(number) => match number.as_u64() {
            Some(whole) => whole_time(whole),
            None => number.as_f64().and_then(fractional_time),
        },
        _ => None,
    };
    time.map(|time| (time, None))
}

/// A whole number of seconds, milliseconds or microseconds, told apart by size.
fn whole_time(number: u64) -> Option<Timestamp> {
    let micros = if number < 100_000_000_000 {
        number.checked_mul(1_000_000)?
    } else if number < 100_000_000_000_000 {
        number * 1000
    } else {
        number
    };
    Some(Timestamp::from_micros(micros))
}

/// A fractional number, with the same units as [`whole_time`], rounded down to the µs.
fn fractional_time(number: f64) -> Option<Timestamp> {
    if !number.is_finite() || number < 0.0 {
        return None;
    }
    let micros = if number < 1e11 {
        number * 1e6
    } else if number < 1e14 {
        number * 1e3
    } else {
        number
    };
    // In range: at most 1e17 here, and `as` saturates anyway.
    let micros = micros as u64;
    Some(Timestamp::from_micros(micros))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(line: &str) -> Result<(u64, String), String> {
        let record = JsonParser::new("ts", "req.user").parse(line.as_bytes())?;
        Ok((record.time.as_micros(), String::from_utf8(record.key.into_owned()).unwrap()))
    }

    #[test]
    fn reads_times_in_each_unit() {
        let expected = Ok((971_211_336_000_000, "ann".to_owned()));
        assert_eq!(parse(r#"{"ts": "2000-10-10T20:55:36Z", "req": {"user": "ann"}}"#), expected);
        assert_eq!(parse(r#"{"ts": 971211336, "req.user": "ann"}"#), expected);
        assert_eq!(parse(r#"{"ts": 971211336000, "req.user": "ann"}"#), expected);
        assert_eq!(parse(r#"{"ts": 971211336000000, "req.user": "ann"}"#), expected);
        assert_eq!(parse(r#"{"ts": "10/Oct/2000:13:55:36 -0700", "req.user": "ann"}"#), expected);
        assert_eq!(parse(r#"{"ts": 971211336.5, "req.user": "ann"}"#).unwrap().0, 971_211_336_500_000);
    }

    #[test]
    fn keeps_the_offset_of_times_written_as_text() {
        let parser = JsonParser::new("t", "k");
        let offset = |line: &str| parser.parse(line.as_bytes()).unwrap().offset.map(|offset| offset.to_string());
        assert_eq!(offset(r#"{"t": "2000-10-10T22:55:36+02:00", "k": "a"}"#).as_deref(), Some("+02:00"));
        assert_eq!(offset(r#"{"t": "10/Oct/2000:13:55:36 -0700", "k": "a"}"#).as_deref(), Some("-07:00"));
        assert_eq!(offset(r#"{"t": 971211336, "k": "a"}"#), None);
    }

    #[test]
    fn reads_the_request_fields_it_is_told() {
        let parser = JsonParser::new("t", "k").with_request_fields("m", "http.path", "code");
        let record =
            parser.parse(br#"{"t": 1, "k": "a", "m": "POST", "http": {"path": "/login"}, "code": "401"}"#).unwrap();
        assert_eq!((&*record.method, &*record.target, record.status), (&b"POST"[..], &b"/login"[..], Some(401)));
        let bare = parser.parse(br#"{"t": 1, "k": "a", "code": 70000}"#).unwrap();
        assert_eq!((&*bare.method, &*bare.target, bare.status), (&b""[..], &b""[..], None));
    }

    #[test]
    fn keys_other_than_text_are_their_json() {
        assert_eq!(parse(r#"{"ts": 1, "req.user": 42}"#).unwrap().1, "42");
        assert_eq!(parse(r#"{"ts": 1, "req.user": {"a": [1]}}"#).unwrap().1, r#"{"a":[1]}"#);
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        assert!(parse("nope").unwrap_err().contains("not a JSON object"));
        assert!(parse("[1]").unwrap_err().contains("not a JSON object"));
        assert!(parse(r#"{"req.user": "a"}"#).unwrap_err().contains("no field `ts`"));
        assert!(parse(r#"{"ts": 1}"#).unwrap_err().contains("no field `req.user`"));
        assert!(parse(r#"{"ts": "soon", "req.user": "a"}"#).unwrap_err().contains("not a time"));
        assert!(parse(r#"{"ts": -1, "req.user": "a"}"#).unwrap_err().contains("not a time"));
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC{0,80}") {
            let _ = JsonParser::new("t", "k").parse(line.as_bytes());
        }

        #[test]
        fn never_panics_on_objects(t in prop_oneof![any::<f64>().prop_map(|x| x.to_string()), "\"\\PC{0,30}\"", any::<i64>().prop_map(|x| x.to_string())]) {
            let _ = JsonParser::new("t", "k").parse(format!(r#"{{"t": {t}, "k": "x"}}"#).as_bytes());
        }
    }
}
