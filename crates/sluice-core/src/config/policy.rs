//! Reading one policy's fields from YAML, reporting every problem with its path. Which
//! fields an algorithm has, and their order, is the algorithm's own (`ReadParameters`).

use crate::algorithm::source::ParameterSource;
use crate::{Policy, PolicyError};
use serde_yaml_ng::{Mapping, Value};
use sluice_config::{ConfigError, Fields, count, did_you_mean, duration, show};
use std::time::Duration;

/// Parses one policy body at `path`; `None` (with every problem recorded) when it is invalid.
pub(super) fn parse_policy(body: &Mapping, path: &str, problems: &mut ConfigError) -> Option<Policy> {
    let fields = Fields::new(body, path);
    let algorithm = fields.require("algorithm", problems, |value| {
        let found = value.as_str().and_then(|name| Policy::ALGORITHMS.iter().position(|known| *known == name));
        found.ok_or_else(|| {
            let hint = value.as_str().map(|name| did_you_mean(name, Policy::ALGORITHMS.iter().copied()));
            format!("must be one of {}, got {}{}", Policy::ALGORITHMS.join(", "), show(value), hint.unwrap_or_default())
        })
    })?;
    let before = problems.len();
    let mut known = vec!["algorithm"];
    known.extend(Policy::fields(algorithm));
    fields.finish(&known, &[], problems);
    let mut source = PolicyFields { fields: &fields, problems, substituted: Vec::new() };
    let policy = Policy::read(algorithm, &mut source).and_then(|built| source.built(built));
    policy.filter(|_| problems.len() == before)
}

/// The fields of one policy and where its problems go.
struct PolicyFields<'f, 'p> {
    fields: &'f Fields<'f>,
    problems: &'p mut ConfigError,
    /// Counts that were missing or invalid (already reported), replaced by their least
    /// value so that the constructor still reports the other fields' problems.
    substituted: Vec<&'static str>,
}

impl PolicyFields<'_, '_> {
    /// Reports what the constructor refused, each problem at its field's path.
    fn built(&mut self, built: Result<Policy, PolicyError>) -> Option<Policy> {
        match built {
            Ok(policy) => Some(policy),
            Err(error) => {
                let reported = error.problems.into_iter().filter(|p| !self.substituted.contains(&p.field));
                for problem in reported {
                    self.problems.push(&self.fields.path(problem.field), problem.message);
                }
                None
            }
        }
    }
}

impl ParameterSource for PolicyFields<'_, '_> {
    fn count(&mut self, name: &'static str, min: u64, default: Option<u64>) -> Option<u64> {
        let read = match (self.fields.value(name), default) {
            (None, Some(default)) => return Some(default),
            (None, None) => self.fields.require(name, self.problems, count(min)),
            (Some(_), _) => self.fields.read(name, self.problems, count(min)),
        };
        Some(read.unwrap_or_else(|| {
            self.substituted.push(name);
            min
        }))
    }

    fn duration(&mut self, name: &'static str) -> Option<Duration> {
        self.fields.require(name, self.problems, duration)
    }

    fn offset(&mut self, name: &'static str) -> Option<Duration> {
        match self.fields.value(name) {
            None => Some(Duration::ZERO),
            Some(_) => self.fields.read(name, self.problems, offset),
        }
    }

    fn word(&mut self, name: &'static str, words: &[&'static str], default: Option<usize>) -> Option<usize> {
        match (self.fields.value(name), default) {
            (None, Some(default)) => Some(default),
            (None, None) => {
                self.problems.push(&self.fields.path(name), "is required");
                None
            }
            (Some(_), _) => {
                self.fields.choice(name, &(0..words.len()).collect::<Vec<_>>(), |index| words[index], self.problems)
            }
        }
    }
}

/// An aligned window's offset: a duration, or a whole number of microseconds.
fn offset(value: &Value) -> Result<Duration, String> {
    match value {
        Value::Number(_) => value.as_u64().map(Duration::from_micros).ok_or_else(|| {
            format!("must be a duration such as 5h, or a whole number of microseconds ≥ 0, got {}", show(value))
        }),
        Value::String(_) => duration(value),
        other => Err(format!("must be a duration such as 5h, or a whole number of microseconds, got {}", show(other))),
    }
}
