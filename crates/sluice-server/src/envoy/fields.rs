//! Reading the fields of one YAML mapping, collecting every problem with its path.

use serde_yaml_ng::{Mapping, Value};
use sluice::ConfigError;
use sluice::config::Problem;

/// Problems found so far, in the order found.
#[derive(Debug, Default)]
pub(super) struct Problems(Vec<Problem>);

impl Problems {
    pub(super) fn push(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(Problem { path: path.to_owned(), message: message.into() });
    }

    pub(super) fn into_result<T>(self, value: T) -> Result<T, ConfigError> {
        if self.0.is_empty() { Ok(value) } else { Err(ConfigError { problems: self.0 }) }
    }
}

/// `path.name`, or `name` at the top.
pub(super) fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

/// The fields of one mapping at `path`, read by name.
pub(super) struct Fields<'a> {
    mapping: &'a Mapping,
    path: &'a str,
}

impl<'a> Fields<'a> {
    pub(super) fn new(mapping: &'a Mapping, path: &'a str) -> Self {
        Fields { mapping, path }
    }

    /// The field's value; a YAML null counts as absent, as it does for envoyproxy/ratelimit.
    pub(super) fn value(&self, name: &str) -> Option<&'a Value> {
        self.mapping.get(name).filter(|value| !value.is_null())
    }

    /// The path of the field called `name`.
    pub(super) fn path(&self, name: &str) -> String {
        join(self.path, name)
    }

    fn read<T>(
        &self,
        name: &str,
        problems: &mut Problems,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.value(name)?;
        parse(value).map_err(|message| problems.push(&self.path(name), message)).ok()
    }

    /// A required field, reported as missing when absent.
    pub(super) fn require<T>(
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
    pub(super) fn text(&self, name: &str, problems: &mut Problems) -> Option<String> {
        self.read(name, problems, text).filter(|text| !text.is_empty())
    }

    /// A boolean field, `false` when absent.
    pub(super) fn flag(&self, name: &str, problems: &mut Problems) -> bool {
        let flag = |value: &Value| value.as_bool().ok_or_else(|| format!("must be true or false, got {}", show(value)));
        self.read(name, problems, flag).unwrap_or(false)
    }

    /// Reports the fields not in `known`; those in `unsupported` get a message of their own.
    pub(super) fn finish(&self, known: &[&str], unsupported: &[&str], problems: &mut Problems) {
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

/// A scalar as text: strings as written, and integers and booleans in their usual form (as
/// envoyproxy/ratelimit's YAML decoder reads `value: 5`). Floats are refused, since
/// `1.50` would become `1.5`.
pub(super) fn text(value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Number(number) if !number.is_f64() => Ok(number.to_string()),
        Value::Number(_) => Err(format!("must be text: quote it, or it reads as the number {}", show(value))),
        other => Err(format!("must be text, got {}", show(other))),
    }
}

/// A YAML value as it was written, for messages.
pub(super) fn show(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => serde_yaml_ng::to_string(other).map_or_else(|_| format!("{other:?}"), |t| t.trim().to_owned()),
    }
}
