//! The replay's results: built once from the tallies, printed as text or JSON.

use super::tally::{KeyTable, Peak, PolicyTally};
use super::time_text::{UtcOffset, format_rfc3339};
use serde::Serialize;
use sluice_core::{Limit, Timestamp};
use std::fmt::{self, Write as _};

/// How many top limited keys a summary lists.
pub(crate) const TOP_KEYS: usize = 10;

/// How many bad lines are reported one by one.
pub(crate) const BAD_LINES_SHOWN: usize = 5;

/// The whole replay's results (the `--json` document).
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    pub(crate) input: String,
    pub(crate) format: String,
    pub(crate) key: String,
    /// Lines read, blank ones included.
    pub(crate) lines: u64,
    /// Requests replayed (lines that were neither blank nor bad, and selected).
    pub(crate) requests: u64,
    pub(crate) bad_lines: u64,
    /// The first few bad lines.
    pub(crate) first_bad_lines: Vec<BadLine>,
    /// The line filters in words (`--path`, `--method`…), if any.
    pub(crate) filter: Option<String>,
    /// Lines whose request the filters did not select (not replayed).
    pub(crate) filtered_out: u64,
    /// Lines older than the latest time seen before them, decided at that latest time.
    pub(crate) late_lines: u64,
    /// The offset every time here is written in: the first line's (`+01:00`), or UTC
    /// (`+00:00`) when the log writes none (trace lines, JSON numbers).
    pub(crate) utc_offset: String,
    pub(crate) first_time: Option<String>,
    pub(crate) last_time: Option<String>,
    pub(crate) policies: Vec<PolicySummary>,
}

/// A line that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct BadLine {
    pub(crate) line: u64,
    pub(crate) error: String,
}

/// One candidate policy's results.
#[derive(Debug, Serialize)]
pub(crate) struct PolicySummary {
    pub(crate) name: String,
    pub(crate) algorithm: &'static str,
    /// Its parameters in words (`5 / 15 min, attempts`).
    pub(crate) description: String,
    pub(crate) requests: u64,
    pub(crate) allowed: u64,
    pub(crate) rejected: u64,
    /// `rejected / requests` (0 without requests).
    pub(crate) rejected_share: f64,
    pub(crate) keys: usize,
    /// Keys rejected at least once.
    pub(crate) limited_keys: usize,
    pub(crate) limited_key_share: f64,
    pub(crate) top_limited_keys: Vec<TopKey>,
    /// The most requests in one second of the log, and that second.
    pub(crate) peak_requests: PeakRate,
    /// The most allowed requests in one second, and that second.
    pub(crate) peak_allowed: PeakRate,
}

/// A key among the most rejected.
#[derive(Debug, Serialize)]
pub(crate) struct TopKey {
    pub(crate) key: String,
    pub(crate) requests: u64,
    pub(crate) rejected: u64,
}

/// Requests in the busiest whole second (`second` is its start, RFC 3339 at the log's offset).
#[derive(Debug, Serialize)]
pub(crate) struct PeakRate {
    pub(crate) per_second: u64,
    pub(crate) second: Option<String>,
}

impl PeakRate {
    fn of(peak: &Peak, offset: UtcOffset) -> PeakRate {
        let (second, count) = peak.best;
        let start = Timestamp::from_micros(second.saturating_mul(1_000_000));
        let second = (count > 0).then(|| format_rfc3339(start, offset));
        PeakRate { per_second: count, second }
    }
}

impl PolicySummary {
    /// The results of `limit` from its tally, times written at `offset`.
    pub(crate) fn of(limit: &Limit, tally: &PolicyTally, keys: &KeyTable, offset: UtcOffset) -> PolicySummary {
        let top = tally.top_limited(TOP_KEYS);
        let ids: Vec<usize> = top.iter().map(|&(id, _)| id).collect();
        let top_limited_keys = keys
            .names(&ids)
            .iter()
            .zip(&top)
            .map(|(name, &(id, rejected))| TopKey {
                key: String::from_utf8_lossy(name).into_owned(),
                requests: keys.requests(id),
                rejected,
            })
            .collect();
        let limited_keys = tally.limited_keys();
        PolicySummary {
            name: limit.name().to_owned(),
            algorithm: limit.policy().algorithm_name(),
            description: crate::config::policy_text::describe(limit.policy()),
            requests: tally.requests,
            allowed: tally.requests - tally.rejected,
            rejected: tally.rejected,
            rejected_share: share(tally.rejected, tally.requests),
            keys: keys.len(),
            limited_keys,
            limited_key_share: share(limited_keys as u64, keys.len() as u64),
            top_limited_keys,
            peak_requests: PeakRate::of(&tally.peak_requests, offset),
            peak_allowed: PeakRate::of(&tally.peak_allowed, offset),
        }
    }
}

/// `part / whole`, 0 when `whole` is 0 (counts stay far below 2^52, so exact as doubles).
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

impl fmt::Display for Summary {
    /// The text summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let span = match (&self.first_time, &self.last_time) {
            (Some(first), Some(last)) => format!(", {first} to {last}"),
            _ => String::new(),
        };
        writeln!(
            f,
            "{}: {} lines, {} requests ({}, keyed by {}){span}",
            self.input, self.lines, self.requests, self.format, self.key
        )?;
        if let Some(filter) = &self.filter {
            writeln!(f, "selected: {filter} ({} other requests not replayed)", self.filtered_out)?;
        }
        if self.bad_lines > 0 {
            writeln!(f, "bad lines: {} (skipped)", self.bad_lines)?;
            for bad in &self.first_bad_lines {
                writeln!(f, "  line {}: {}", bad.line, bad.error)?;
            }
        }
        if self.late_lines > 0 {
            writeln!(
                f,
                "late lines: {} (older than a line before them; decided at the latest time seen)",
                self.late_lines
            )?;
        }
        self.policies.iter().try_for_each(|policy| write!(f, "\n{policy}"))
    }
}

impl fmt::Display for PolicySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "policy {} ({}, {})", self.name, self.algorithm, self.description)?;
        writeln!(f, "  requests      {}", self.requests)?;
        writeln!(f, "  allowed       {} ({})", self.allowed, percent(1.0 - self.rejected_share, self.requests))?;
        writeln!(f, "  rejected      {} ({})", self.rejected, percent(self.rejected_share, self.requests))?;
        writeln!(
            f,
            "  keys          {}, {} ever limited ({})",
            self.keys,
            self.limited_keys,
            percent(self.limited_key_share, 1)
        )?;
        writeln!(f, "  peak          {}", peak_text(&self.peak_requests, "requests"))?;
        writeln!(f, "  peak allowed  {}", peak_text(&self.peak_allowed, "allowed requests"))?;
        if !self.top_limited_keys.is_empty() {
            writeln!(f, "  top limited keys (rejected of requests):")?;
            let width = self.top_limited_keys.iter().map(|top| top.key.chars().count()).max().unwrap_or(0);
            for top in &self.top_limited_keys {
                writeln!(f, "    {:<width$}  {} of {}", top.key, top.rejected, top.requests)?;
            }
        }
        Ok(())
    }
}

fn percent(share: f64, whole: u64) -> String {
    if whole == 0 { "-".to_owned() } else { format!("{:.1}%", share * 100.0) }
}

fn peak_text(peak: &PeakRate, what: &str) -> String {
    let mut text = format!("{} {what}/s", peak.per_second);
    if let Some(second) = &peak.second {
        let _ = write!(text, " at {second}");
    }
    text
}
