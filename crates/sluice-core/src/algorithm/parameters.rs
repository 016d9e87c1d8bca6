//! The checks every algorithm's constructor applies to its parameters, collecting every
//! problem instead of stopping at the first one.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The bound below which every store computes exactly: Lua numbers are doubles.
pub const EXACT_LIMIT: u64 = 1 << 53;

/// The parameters an algorithm's constructor refused: every problem, each naming its field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// Each refused parameter, in the order of the constructor's arguments.
    pub problems: Vec<ParameterProblem>,
}

/// One refused parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParameterProblem {
    /// The configuration name of the field (`limit`, `window`, …).
    pub field: &'static str,
    /// What is wrong with it, lowercase.
    pub message: Cow<'static, str>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self.problems.iter().map(|p| format!("{}: {}", p.field, p.message)).collect();
        f.write_str(&shown.join("; "))
    }
}

/// The problems found so far in one constructor's parameters.
#[derive(Debug, Default)]
pub(crate) struct Validation(Vec<ParameterProblem>);

impl Validation {
    /// Records a problem with `field`.
    pub(crate) fn fail(&mut self, field: &'static str, message: impl Into<Cow<'static, str>>) {
        self.0.push(ParameterProblem { field, message: message.into() });
    }

    /// Records `message` against `field` unless `holds`.
    pub(crate) fn require(&mut self, holds: bool, field: &'static str, message: impl Into<Cow<'static, str>>) {
        if !holds {
            self.fail(field, message);
        }
    }

    /// Whether a problem was found with `field`.
    pub(crate) fn failed(&self, field: &str) -> bool {
        self.0.iter().any(|problem| problem.field == field)
    }

    /// Refuses `value` unless every store can compute it exactly.
    pub(crate) fn exact(&mut self, field: &'static str, value: u128) {
        self.exact_with(field, value, "must be below 2^53 to be computed exactly");
    }

    /// Refuses `value`, a product of parameters, unless every store can compute it exactly.
    pub(crate) fn exact_with(&mut self, field: &'static str, value: u128, message: &'static str) {
        self.require(value < u128::from(EXACT_LIMIT), field, message);
    }

    /// A count of at least one, and below 2^53.
    pub(crate) fn positive(&mut self, field: &'static str, value: u64) {
        if value == 0 {
            self.fail(field, "must be at least 1");
        } else {
            self.exact(field, u128::from(value));
        }
    }

    /// `duration` in whole microseconds, at least one and below 2^53 (0 when refused).
    pub(crate) fn micros(&mut self, field: &'static str, duration: Duration) -> u64 {
        if !duration.subsec_nanos().is_multiple_of(1_000) {
            self.fail(field, "must be a whole number of microseconds");
            return 0;
        }
        match u64::try_from(duration.as_micros()) {
            Ok(0) => self.fail(field, "must be at least 1us"),
            Ok(micros) if micros < EXACT_LIMIT => return micros,
            _ => self.fail(field, "must be below 2^53 µs (about 285 years) to be computed exactly"),
        }
        0
    }

    /// The value built by `build` when no problem was found.
    pub(crate) fn finish<T>(self, build: impl FnOnce() -> T) -> Result<T, PolicyError> {
        if self.0.is_empty() { Ok(build()) } else { Err(PolicyError { problems: self.0 }) }
    }
}
