//! A request's `cost` as JSON gives it: a whole number from 0, or an error that says so (not
//! serde's "expected u64").

use serde::Deserializer;
use serde::de::{Error, Visitor};
use std::fmt;

/// What the error says a cost must be.
const EXPECTED: &str = "a whole number from 0 to 18446744073709551615";

/// Reads a cost: any whole number from 0 to `u64::MAX`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(CostVisitor)
}

struct CostVisitor;

impl Visitor<'_> for CostVisitor {
    type Value = u64;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(EXPECTED)
    }

    fn visit_u64<E: Error>(self, cost: u64) -> Result<u64, E> {
        Ok(cost)
    }

    fn visit_i64<E: Error>(self, cost: i64) -> Result<u64, E> {
        u64::try_from(cost).map_err(|_| E::custom(format!("cost must be {EXPECTED}, got {cost}")))
    }

    fn visit_f64<E: Error>(self, cost: f64) -> Result<u64, E> {
        Err(E::custom(format!("cost must be {EXPECTED}, got {cost}")))
    }
}
