//! The top limited keys' timelines, drawn by a second pass over a log file.
//!
//! Which keys are the top ones is known only at the end of the log, and keeping a time
//! series for every key that might become one would cost memory per key and per bucket.
//! So the report reads the file again and replays only the chosen keys, each on fresh
//! stores: keys never share state, and the out-of-order rule sees every line again, so
//! their decisions are the first pass's, now bucketed like the policy's own series.

use super::filter::LineFilter;
use super::format::Parser;
use super::input::{Input, for_each_line};
use super::series::Series;
use super::timeline::Timeline;
use sluice_core::{Key, Limit, MemoryStore};
use std::collections::HashMap;

/// Per candidate, per chosen key (in the order given), its series.
pub(crate) type Timelines = Vec<Vec<Series>>;

/// Replays `input` again for the keys in `top` (per candidate), bucketed like `layouts`.
///
/// # Errors
///
/// When the log cannot be read again.
pub(crate) fn draw(
    input: &Input,
    parser: &mut Parser,
    filter: &LineFilter,
    limits: &[Limit],
    top: &[Vec<Box<[u8]>>],
    layouts: &[&Series],
) -> anyhow::Result<Timelines> {
    let mut wanted: HashMap<&[u8], Vec<(usize, usize)>> = HashMap::new();
    for (policy, keys) in top.iter().enumerate() {
        for (slot, key) in keys.iter().enumerate() {
            wanted.entry(&**key).or_default().push((policy, slot));
        }
    }
    let stores: Vec<MemoryStore> = limits.iter().map(|_| crate::offline::simulate::memory_store()).collect();
    let mut timelines: Timelines =
        top.iter().zip(layouts).map(|(keys, layout)| vec![Series::aligned_with(layout); keys.len()]).collect();
    let mut timeline = Timeline::default();
    let mut reader = input.open("drawing the top keys")?;
    for_each_line(&mut reader, &input.name(), |_, line| {
        let Ok(Some(record)) = parser.parse(line) else { return Ok(()) };
        if !filter.admits(&record) {
            return Ok(());
        }
        let now = timeline.decide_at(record.time);
        for &(policy, slot) in wanted.get(&*record.key).map_or(&[][..], Vec::as_slice) {
            let key = Key::new(&record.key)?;
            let verdict = stores[policy].check_now(key, std::slice::from_ref(&limits[policy]), now, record.cost)?;
            timelines[policy][slot].record(now, verdict.decision.allowed);
        }
        Ok(())
    })?;
    reader.finish();
    Ok(timelines)
}
