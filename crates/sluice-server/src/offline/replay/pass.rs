//! The replay itself: every line of the log through every candidate policy, each on its own
//! embedded store with the log's times injected.

use super::filter::LineFilter;
use super::format::Parser;
use super::input::{Input, for_each_line};
use super::record::Record;
use super::summary::{BAD_LINES_SHOWN, BadLine};
use super::tally::{KeyTable, PolicyTally};
use super::time_text::UtcOffset;
use super::timeline::Timeline;
use anyhow::Context;
use sluice_core::{Key, Limit, MemoryStore};

/// What one pass over the log counted.
#[derive(Debug)]
pub(crate) struct Replayed {
    pub(crate) lines: u64,
    pub(crate) requests: u64,
    pub(crate) bad_lines: u64,
    pub(crate) first_bad_lines: Vec<BadLine>,
    /// Lines whose request the filter did not select.
    pub(crate) filtered_out: u64,
    pub(crate) timeline: Timeline,
    /// The offset from UTC of the first line that wrote one: the report and the summary
    /// show times in it.
    pub(crate) offset: Option<UtcOffset>,
    pub(crate) keys: KeyTable,
    /// One per candidate, in the order given.
    pub(crate) tallies: Vec<PolicyTally>,
}

/// Replays `input` through each of `limits` on a store of its own.
///
/// # Errors
///
/// When the log cannot be read (bad lines are counted, not errors).
pub(crate) fn replay(
    input: &Input,
    parser: &mut Parser,
    filter: &LineFilter,
    limits: &[Limit],
) -> anyhow::Result<Replayed> {
    let stores: Vec<MemoryStore> = limits.iter().map(|_| crate::offline::simulate::memory_store()).collect();
    let mut replayed = Replayed {
        lines: 0,
        requests: 0,
        bad_lines: 0,
        first_bad_lines: Vec::new(),
        filtered_out: 0,
        timeline: Timeline::default(),
        offset: None,
        keys: KeyTable::default(),
        tallies: limits.iter().map(|_| PolicyTally::new()).collect(),
    };
    let mut reader = input.open("replaying")?;
    replayed.lines = for_each_line(&mut reader, &input.name(), |number, line| match parser.parse(line) {
        Ok(None) => Ok(()),
        Ok(Some(record)) => {
            replayed.offset = replayed.offset.or(record.offset);
            if filter.admits(&record) {
                replayed.request(number, &record, limits, &stores)
            } else {
                replayed.filtered_out += 1;
                Ok(())
            }
        }
        Err(error) => {
            replayed.bad_line(number, error);
            Ok(())
        }
    })?;
    reader.finish();
    Ok(replayed)
}

impl Replayed {
    /// Decides one request with every candidate.
    fn request(
        &mut self,
        number: u64,
        record: &Record<'_>,
        limits: &[Limit],
        stores: &[MemoryStore],
    ) -> anyhow::Result<()> {
        let now = self.timeline.decide_at(record.time);
        let id = self.keys.count(&record.key);
        let key = Key::new(&record.key).with_context(|| format!("line {number}"))?;
        self.requests += 1;
        for ((limit, store), tally) in limits.iter().zip(stores).zip(&mut self.tallies) {
            let verdict = store
                .check_now(key, std::slice::from_ref(limit), now, record.cost)
                .with_context(|| format!("line {number}: policy {}", limit.name()))?;
            tally.record(id, now, verdict.decision.allowed);
        }
        Ok(())
    }

    /// Counts a bad line, keeping the first few.
    fn bad_line(&mut self, number: u64, error: String) {
        self.bad_lines += 1;
        if self.first_bad_lines.len() < BAD_LINES_SHOWN {
            self.first_bad_lines.push(BadLine { line: number, error });
        }
    }
}
