//! Parsers of single YAML values for [`Fields::read`](crate::Fields::read), and the text
//! of paths and values in messages.

use crate::parse_duration;
use serde_yaml_ng::Value;
use std::time::Duration;

/// `path.name`, or `name` at the top.
pub fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

/// A whole number of at least `min` (and below 2^64), for [`Fields::read`](crate::Fields::read).
pub fn count(min: u64) -> impl Fn(&Value) -> Result<u64, String> {
    move |value| {
        value
            .as_u64()
            .filter(|&count| count >= min)
            .ok_or_else(|| format!("must be a whole number ≥ {min}, got {}", show(value)))
    }
}

/// A duration with a unit, such as `250ms` or `1h`, for [`Fields::read`](crate::Fields::read).
pub fn duration(value: &Value) -> Result<Duration, String> {
    match value {
        Value::String(text) => parse_duration(text),
        other => {
            Err(format!("must be a duration with a unit (us, ms, s, m, h, d), such as 250ms, got {}", show(other)))
        }
    }
}

/// A scalar as text: strings as written, and integers and booleans in their usual form (as
/// envoyproxy/ratelimit's YAML decoder reads `value: 5`). Floats are refused, since
/// `1.50` would become `1.5`.
pub fn text(value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Number(number) if !number.is_f64() => Ok(number.to_string()),
        Value::Number(_) => Err(format!("must be text: quote it, or it reads as the number {}", show(value))),
        other => Err(format!("must be text, got {}", show(other))),
    }
}

/// A YAML value as it was written, for messages.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => serde_yaml_ng::to_string(other).map_or_else(|_| format!("{other:?}"), |t| t.trim().to_owned()),
    }
}
