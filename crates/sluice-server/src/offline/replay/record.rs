//! One request as `sluice replay` reads it from a log line, whatever the format.

use super::time_text::UtcOffset;
use sluice_core::Timestamp;
use std::borrow::Cow;

/// One request read from a log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) time: Timestamp,
    pub(crate) key: Cow<'a, [u8]>,
    pub(crate) cost: u64,
    /// The request's method (empty when the line has none), for `--method`.
    pub(crate) method: Cow<'a, [u8]>,
    /// The request target, path and query (empty when the line has none), for `--path`.
    pub(crate) target: Cow<'a, [u8]>,
    /// The response's status, for `--status`.
    pub(crate) status: Option<u16>,
    /// The offset from UTC the line wrote its time in, when it wrote one.
    pub(crate) offset: Option<UtcOffset>,
}

impl<'a> Record<'a> {
    /// A request of `cost` for `key` at `time`, with nothing known of its HTTP request.
    pub(crate) fn keyed(time: Timestamp, key: Cow<'a, [u8]>, cost: u64) -> Self {
        Record { time, key, cost, method: Cow::Borrowed(b""), target: Cow::Borrowed(b""), status: None, offset: None }
    }
}
