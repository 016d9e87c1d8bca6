//! Reading the fields of YAML mappings, collecting every problem with its path: the one
//! reader of the policy files, the service's file and envoyproxy/ratelimit files.

use super::{ConfigError, Problem, parse_duration};
use serde_yaml_ng::{Mapping, Value};
use std::time::Duration;

/// Problems found so far, in the order found.
#[derive(Debug, Default)]
pub struct Problems(Vec<Problem>);

impl Problems {
    /// Records that the value at `path` is wrong.
    pub fn push(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(Problem { path: path.to_owned(), message: message.into() });
    }

    /// The value of `result`, or `None` with its error recorded at `path`.
    pub fn take<T>(&mut self, path: &str, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.push(path, message)).ok()
    }

    /// Records every problem of `error`.
    pub fn extend(&mut self, error: ConfigError) {
        self.0.extend(error.problems);
    }

    /// How many problems were found.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no problem was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `value` when no problem was found, else every problem.
    ///
    /// # Errors
    ///
    /// Every problem found, when there is one.
    pub fn into_result<T>(self, value: T) -> Result<T, ConfigError> {
        if self.0.is_empty() { Ok(value) } else { Err(ConfigError { problems: self.0 }) }
    }
}

/// `path.name`, or `name` at the top.
pub fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

/// The fields of one mapping at `path`, read by name.
#[derive(Debug)]
pub struct Fields<'a> {
    mapping: &'a Mapping,
    path: &'a str,
}

impl<'a> Fields<'a> {
    /// The fields of `mapping`, which sits at `path` (empty at the top of the file).
    pub fn new(mapping: &'a Mapping, path: &'a str) -> Self {
        Fields { mapping, path }
    }

    /// The field's value; a YAML null counts as absent, as it does for envoyproxy/ratelimit.
    pub fn value(&self, name: &str) -> Option<&'a Value> {
        self.mapping.get(name).filter(|value| !value.is_null())
    }

    /// The path of the field called `name`.
    pub fn path(&self, name: &str) -> String {
        join(self.path, name)
    }

    /// An optional field, parsed by `parse` when present.
    pub fn read<T>(
        &self,
        name: &str,
        problems: &mut Problems,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.value(name)?;
        parse(value).map_err(|message| problems.push(&self.path(name), message)).ok()
    }

    /// A required field, reported as missing when absent.
    pub fn require<T>(
        &self,
        name: &str,
        problems: &mut Problems,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        if self.value(name).is_none() {
            problems.push(&self.path(name), "is required");
            return None;
        }
        self.read(name, problems, parse)
    }

    /// A text field; an empty text counts as absent, as it does for envoyproxy/ratelimit.
    pub fn text(&self, name: &str, problems: &mut Problems) -> Option<String> {
        self.read(name, problems, text).filter(|text| !text.is_empty())
    }

    /// A boolean field, `false` when absent.
    pub fn flag(&self, name: &str, problems: &mut Problems) -> bool {
        let flag = |value: &Value| value.as_bool().ok_or_else(|| format!("must be true or false, got {}", show(value)));
        self.read(name, problems, flag).unwrap_or(false)
    }

    /// One of the `choices`, each named by `name_of`.
    pub fn choice<T: Copy>(
        &self,
        name: &str,
        choices: &[T],
        name_of: impl Fn(T) -> &'static str,
        problems: &mut Problems,
    ) -> Option<T> {
        self.read(name, problems, |value| {
            let found = value.as_str().and_then(|text| choices.iter().copied().find(|&choice| name_of(choice) == text));
            found.ok_or_else(|| {
                let names: Vec<&str> = choices.iter().map(|&choice| name_of(choice)).collect();
                format!("must be one of {}, got {}", names.join(", "), show(value))
            })
        })
    }

    /// Reports the fields not in `known`; those in `unsupported` get a message of their own.
    pub fn finish(&self, known: &[&str], unsupported: &[&str], problems: &mut Problems) {
        for key in self.mapping.keys() {
            let name = key.as_str();
            if name.is_some_and(|name| known.contains(&name)) {
                continue;
            }
            let message = if name.is_some_and(|name| unsupported.contains(&name)) {
                "is a newer envoyproxy/ratelimit feature that sluice does not support".to_owned()
            } else {
                format!("unknown field, expected one of: {}", known.join(", "))
            };
            problems.push(&self.path(&show(key)), message);
        }
    }
}

/// A whole number of at least `min` (and below 2^64), for [`Fields::read`].
pub fn count(min: u64) -> impl Fn(&Value) -> Result<u64, String> {
    move |value| {
        value
            .as_u64()
            .filter(|&count| count >= min)
            .ok_or_else(|| format!("must be a whole number ≥ {min}, got {}", show(value)))
    }
}

/// A duration with a unit, such as `250ms` or `1h`, for [`Fields::read`].
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
