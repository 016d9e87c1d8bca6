//! Reading a policy's fields from YAML, collecting every problem with its path.

use super::{ConfigError, Problem, parse_duration};
use crate::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, Policy, PolicyError, SlidingLog, SlidingLogVariant, SlidingWindow,
    TokenBucket,
};
use serde_yaml_ng::{Mapping, Value};
use std::time::Duration;

/// Problems found so far.
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

/// The fields of one mapping, read by name; whatever is not read is reported as unknown.
pub(super) struct Fields<'a> {
    mapping: &'a Mapping,
    path: &'a str,
    problems: &'a mut Problems,
    ok: bool,
}

impl<'a> Fields<'a> {
    pub(super) fn new(mapping: &'a Mapping, path: &'a str, problems: &'a mut Problems) -> Self {
        Fields { mapping, path, problems, ok: true }
    }

    fn field_path(&self, name: &str) -> String {
        if self.path.is_empty() { name.to_owned() } else { format!("{}.{name}", self.path) }
    }

    fn fail(&mut self, name: &str, message: impl Into<String>) {
        let path = self.field_path(name);
        self.problems.push(&path, message);
        self.ok = false;
    }

    /// Reports what `constructor` refused, if anything.
    fn built<T>(&mut self, built: Result<T, PolicyError>) -> Option<T> {
        built.map_err(|error| self.fail(error.field, error.message)).ok()
    }

    fn read<T>(&mut self, name: &str, required: bool, parse: impl FnOnce(&Value) -> Result<T, String>) -> Option<T> {
        match self.mapping.get(name) {
            None if required => {
                self.fail(name, "is required");
                None
            }
            None => None,
            Some(value) => parse(value).map_err(|message| self.fail(name, message)).ok(),
        }
    }

    pub(super) fn required_mapping(&mut self, name: &str) -> Option<Mapping> {
        self.read(name, true, |value| value.as_mapping().cloned().ok_or_else(|| "must be a mapping".to_owned()))
    }

    fn count(&mut self, name: &str, required: bool) -> Option<u64> {
        self.read(name, required, |value| {
            value.as_u64().ok_or_else(|| format!("must be a whole number ≥ 0, got {}", show(value)))
        })
    }

    fn duration(&mut self, name: &str, required: bool) -> Option<Duration> {
        self.read(name, required, |value| match value {
            Value::String(text) => parse_duration(text),
            other => {
                Err(format!("must be a duration with a unit (us, ms, s, m, h, d), such as 250ms, got {}", show(other)))
            }
        })
    }

    fn choice<T: Copy>(&mut self, name: &str, choices: &[(&str, T)]) -> Option<T> {
        self.read(name, false, |value| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            let found = value.as_str().and_then(|text| choices.iter().find(|(name, _)| *name == text));
            found
                .map(|(_, choice)| *choice)
                .ok_or_else(|| format!("must be one of {}, got {}", names.join(", "), show(value)))
        })
    }

    /// Reports every field not in `known`; returns whether everything read was valid.
    pub(super) fn finish(mut self, known: &[&str]) -> bool {
        for key in self.mapping.keys() {
            if !key.as_str().is_some_and(|key| known.contains(&key)) {
                let message = format!("unknown field, expected one of: {}", known.join(", "));
                self.fail(&show(key), message);
            }
        }
        self.ok
    }
}

/// A YAML value as it was written, for messages.
pub(super) fn show(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => serde_yaml_ng::to_string(other).map_or_else(|_| format!("{other:?}"), |t| t.trim().to_owned()),
    }
}

const ALGORITHMS: &[&str] = &["sliding_log", "fixed_window", "sliding_window", "token_bucket", "leaky_bucket"];

/// Parses one policy body at `path`; `None` (with problems recorded) when it is invalid.
pub(super) fn parse_policy(body: &Mapping, path: &str, problems: &mut Problems) -> Option<Policy> {
    let mut fields = Fields::new(body, path, problems);
    let algorithm = fields.read("algorithm", true, |value| {
        let name = value.as_str().filter(|name| ALGORITHMS.contains(name));
        name.map(str::to_owned).ok_or_else(|| format!("must be one of {}, got {}", ALGORITHMS.join(", "), show(value)))
    })?;
    let (policy, known): (Option<Policy>, &[&str]) = match algorithm.as_str() {
        "sliding_log" => (sliding_log(&mut fields), &["algorithm", "limit", "window", "variant"]),
        "fixed_window" => (fixed_window(&mut fields), &["algorithm", "limit", "window", "alignment", "offset"]),
        "sliding_window" => (sliding_window(&mut fields), &["algorithm", "limit", "window", "buckets"]),
        "token_bucket" => (token_bucket(&mut fields), &["algorithm", "capacity", "refill_amount", "refill_interval"]),
        _ => (leaky_bucket(&mut fields), &["algorithm", "interval", "burst", "mode"]),
    };
    let valid = fields.finish(known);
    policy.filter(|_| valid)
}

fn sliding_log(fields: &mut Fields<'_>) -> Option<Policy> {
    let limit = fields.count("limit", true);
    let window = fields.duration("window", true);
    let variants = [("accepted", SlidingLogVariant::Accepted), ("attempts", SlidingLogVariant::Attempts)];
    let variant = fields.choice("variant", &variants).unwrap_or_default();
    let built = SlidingLog::new(limit?, window?, variant);
    fields.built(built).map(Policy::from)
}

fn fixed_window(fields: &mut Fields<'_>) -> Option<Policy> {
    let limit = fields.count("limit", true);
    let window = fields.duration("window", true);
    let alignment = fields.choice("alignment", &[("aligned", Alignment::Aligned), ("anchored", Alignment::Anchored)]);
    let offset = fields.read("offset", false, |value| match value {
        Value::Number(_) => value.as_u64().map(Duration::from_micros).ok_or_else(|| "must be ≥ 0".to_owned()),
        Value::String(text) => parse_duration(text),
        other => Err(format!("must be a duration such as 5h, got {}", show(other))),
    });
    let built = FixedWindow::new(limit?, window?, alignment.unwrap_or_default(), offset.unwrap_or_default());
    fields.built(built).map(Policy::from)
}

fn sliding_window(fields: &mut Fields<'_>) -> Option<Policy> {
    let limit = fields.count("limit", true);
    let window = fields.duration("window", true);
    let buckets = fields.count("buckets", false).unwrap_or(1);
    let built = SlidingWindow::new(limit?, window?, buckets);
    fields.built(built).map(Policy::from)
}

fn token_bucket(fields: &mut Fields<'_>) -> Option<Policy> {
    let capacity = fields.count("capacity", true);
    let refill_amount = fields.count("refill_amount", false).unwrap_or(1);
    let refill_interval = fields.duration("refill_interval", true);
    let built = TokenBucket::new(capacity?, refill_amount, refill_interval?);
    fields.built(built).map(Policy::from)
}

fn leaky_bucket(fields: &mut Fields<'_>) -> Option<Policy> {
    let interval = fields.duration("interval", true);
    let burst = fields.count("burst", false).unwrap_or(0);
    let mode = fields.choice("mode", &[("nodelay", LeakMode::NoDelay), ("delay", LeakMode::Delay)]);
    let built = LeakyBucket::new(interval?, burst, mode.unwrap_or_default());
    fields.built(built).map(Policy::from)
}
