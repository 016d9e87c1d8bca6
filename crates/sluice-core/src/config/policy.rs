//! Reading one policy's fields from YAML, reporting every problem with its path.

use super::reader::{Fields, Problems, count, duration, show};
use crate::{
    Alignment, FixedWindow, LeakMode, LeakyBucket, Policy, PolicyError, SlidingLog, SlidingLogVariant, SlidingWindow,
    TokenBucket, TokenBucketSettings,
};
use serde_yaml_ng::{Mapping, Value};
use std::time::Duration;

/// Each algorithm's name and the fields its policies may have.
const ALGORITHMS: &[(&str, &[&str])] = &[
    ("sliding_log", &["algorithm", "limit", "window", "variant"]),
    ("fixed_window", &["algorithm", "limit", "window", "alignment", "offset"]),
    ("sliding_window", &["algorithm", "limit", "window", "buckets"]),
    ("token_bucket", &["algorithm", "capacity", "refill_amount", "refill_interval"]),
    ("leaky_bucket", &["algorithm", "interval", "burst", "mode"]),
];

/// Parses one policy body at `path`; `None` (with every problem recorded) when it is invalid.
pub(super) fn parse_policy(body: &Mapping, path: &str, problems: &mut Problems) -> Option<Policy> {
    let fields = Fields::new(body, path);
    let (algorithm, known) = fields.require("algorithm", problems, |value| {
        let found = value.as_str().and_then(|name| ALGORITHMS.iter().find(|(known, _)| *known == name));
        found.copied().ok_or_else(|| {
            let names: Vec<&str> = ALGORITHMS.iter().map(|(name, _)| *name).collect();
            format!("must be one of {}, got {}", names.join(", "), show(value))
        })
    })?;
    let before = problems.len();
    fields.finish(known, &[], problems);
    let read = Reading { fields: &fields, problems, substituted: Vec::new() };
    let policy = match algorithm {
        "sliding_log" => read.sliding_log(),
        "fixed_window" => read.fixed_window(),
        "sliding_window" => read.sliding_window(),
        "token_bucket" => read.token_bucket(),
        _ => read.leaky_bucket(),
    };
    policy.filter(|_| problems.len() == before)
}

/// The fields of one policy and where its problems go.
struct Reading<'f, 'p> {
    fields: &'f Fields<'f>,
    problems: &'p mut Problems,
    /// Counts that were missing or invalid (already reported), replaced by their least
    /// value so that the constructor still reports the other fields' problems.
    substituted: Vec<&'static str>,
}

impl Reading<'_, '_> {
    /// A required count of at least `min`.
    fn count(&mut self, name: &'static str, min: u64) -> u64 {
        let read = self.fields.require(name, self.problems, count(min));
        self.or_substitute(name, read, min)
    }

    /// An optional count of at least `min`, `default` when absent.
    fn count_or(&mut self, name: &'static str, min: u64, default: u64) -> u64 {
        if self.fields.value(name).is_none() {
            return default;
        }
        let read = self.fields.read(name, self.problems, count(min));
        self.or_substitute(name, read, min)
    }

    fn or_substitute(&mut self, name: &'static str, read: Option<u64>, min: u64) -> u64 {
        read.unwrap_or_else(|| {
            self.substituted.push(name);
            min
        })
    }

    fn duration(&mut self, name: &str) -> Option<Duration> {
        self.fields.require(name, self.problems, duration)
    }

    fn choice<T: Copy + Default>(&mut self, name: &str, choices: &[T], name_of: fn(T) -> &'static str) -> Option<T> {
        match self.fields.value(name) {
            None => Some(T::default()),
            Some(_) => self.fields.choice(name, choices, name_of, self.problems),
        }
    }

    /// Reports what the constructor refused, each problem at its field's path.
    fn built(self, built: Result<impl Into<Policy>, PolicyError>) -> Option<Policy> {
        match built {
            Ok(policy) => Some(policy.into()),
            Err(error) => {
                let reported = error.problems.into_iter().filter(|p| !self.substituted.contains(&p.field));
                for problem in reported {
                    self.problems.push(&self.fields.path(problem.field), problem.message);
                }
                None
            }
        }
    }

    fn sliding_log(mut self) -> Option<Policy> {
        let limit = self.count("limit", 1);
        let window = self.duration("window");
        let variant = self.choice("variant", &SlidingLogVariant::ALL, SlidingLogVariant::name);
        let (window, variant) = (window?, variant?);
        self.built(SlidingLog::new(limit, window, variant))
    }

    fn fixed_window(mut self) -> Option<Policy> {
        let limit = self.count("limit", 1);
        let window = self.duration("window");
        let alignment = self.choice("alignment", &Alignment::ALL, Alignment::name);
        let offset = match self.fields.value("offset") {
            None => Some(Duration::ZERO),
            Some(_) => self.fields.read("offset", self.problems, offset),
        };
        let (window, alignment, offset) = (window?, alignment?, offset?);
        self.built(FixedWindow::new(limit, window, alignment, offset))
    }

    fn sliding_window(mut self) -> Option<Policy> {
        let limit = self.count("limit", 1);
        let window = self.duration("window");
        let buckets = self.count_or("buckets", 1, 1);
        let window = window?;
        self.built(SlidingWindow::new(limit, window, buckets))
    }

    fn token_bucket(mut self) -> Option<Policy> {
        let capacity = self.count("capacity", 1);
        let refill_amount = self.count_or("refill_amount", 1, 1);
        let refill_interval = self.duration("refill_interval");
        let refill_interval = refill_interval?;
        self.built(TokenBucket::new(TokenBucketSettings { capacity, refill_amount, refill_interval }))
    }

    fn leaky_bucket(mut self) -> Option<Policy> {
        let interval = self.duration("interval");
        let burst = self.count_or("burst", 0, 0);
        let mode = self.choice("mode", &LeakMode::ALL, LeakMode::name);
        let (interval, mode) = (interval?, mode?);
        self.built(LeakyBucket::new(interval, burst, mode))
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
