//! The fields of one YAML mapping, read by name, each problem recorded with its path.

use crate::ConfigError;
use crate::suggest::did_you_mean;
use crate::values::{join, show, text};
use serde_yaml_ng::{Mapping, Value};

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
        problems: &mut ConfigError,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.value(name)?;
        parse(value).map_err(|message| problems.push(&self.path(name), message)).ok()
    }

    /// A required field, reported as missing when absent.
    pub fn require<T>(
        &self,
        name: &str,
        problems: &mut ConfigError,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Option<T> {
        if self.value(name).is_none() {
            problems.push(&self.path(name), "is required");
            return None;
        }
        self.read(name, problems, parse)
    }

    /// A text field; an empty text counts as absent, as it does for envoyproxy/ratelimit.
    pub fn text(&self, name: &str, problems: &mut ConfigError) -> Option<String> {
        self.read(name, problems, text).filter(|text| !text.is_empty())
    }

    /// A boolean field, `false` when absent.
    pub fn flag(&self, name: &str, problems: &mut ConfigError) -> bool {
        let flag = |value: &Value| value.as_bool().ok_or_else(|| format!("must be true or false, got {}", show(value)));
        self.read(name, problems, flag).unwrap_or(false)
    }

    /// One of the `choices`, each named by `name_of`.
    pub fn choice<T: Copy>(
        &self,
        name: &str,
        choices: &[T],
        name_of: impl Fn(T) -> &'static str,
        problems: &mut ConfigError,
    ) -> Option<T> {
        self.read(name, problems, |value| {
            let found = value.as_str().and_then(|text| choices.iter().copied().find(|&choice| name_of(choice) == text));
            found.ok_or_else(|| {
                let names: Vec<&str> = choices.iter().map(|&choice| name_of(choice)).collect();
                let hint = value.as_str().map(|text| did_you_mean(text, names.iter().copied())).unwrap_or_default();
                format!("must be one of {}, got {}{hint}", names.join(", "), show(value))
            })
        })
    }

    /// Reports the fields not in `known`; those in `unsupported` get a message of their own.
    pub fn finish(&self, known: &[&str], unsupported: &[&str], problems: &mut ConfigError) {
        for key in self.mapping.keys() {
            let name = key.as_str();
            if name.is_some_and(|name| known.contains(&name)) {
                continue;
            }
            let message = if name.is_some_and(|name| unsupported.contains(&name)) {
                "is a newer envoyproxy/ratelimit feature that sluice does not support".to_owned()
            } else {
                let hint = name.map(|name| did_you_mean(name, known.iter().copied())).unwrap_or_default();
                format!("unknown field, expected one of: {}{hint}", known.join(", "))
            };
            problems.push(&self.path(&show(key)), message);
        }
    }
}
