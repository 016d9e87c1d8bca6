//! The replay's clock and its rule for out-of-order lines.
//!
//! Logs are mostly but not strictly ordered: nginx writes a line when the response ends, so
//! a slow request appears after quicker ones that started later. A line older than the
//! latest time already seen is decided, counted and charted at that latest time: the
//! store's time never goes backwards, as with a live server.

use sluice_core::Timestamp;

/// The latest time seen, the first, and how many lines came late.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timeline {
    first: Option<Timestamp>,
    latest: Option<Timestamp>,
    late: u64,
}

impl Timeline {
    /// The time at which to decide a request logged at `time`.
    pub(crate) fn decide_at(&mut self, time: Timestamp) -> Timestamp {
        let now = match self.latest {
            Some(latest) if time < latest => {
                self.late += 1;
                latest
            }
            _ => time,
        };
        self.first.get_or_insert(now);
        self.latest = Some(now);
        now
    }

    /// The first and the latest decision times, when there was a request.
    pub(crate) fn span(&self) -> Option<(Timestamp, Timestamp)> {
        self.first.zip(self.latest)
    }

    /// How many requests were older than one before them.
    pub(crate) fn late(&self) -> u64 {
        self.late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_line_is_decided_at_the_latest_time_seen() {
        let mut timeline = Timeline::default();
        let decided: Vec<u64> =
            [10, 12, 11, 12, 13].iter().map(|&t| timeline.decide_at(Timestamp::from_micros(t)).as_micros()).collect();
        assert_eq!(decided, [10, 12, 12, 12, 13]);
        assert_eq!(timeline.late(), 1);
        assert_eq!(timeline.span(), Some((Timestamp::from_micros(10), Timestamp::from_micros(13))));
    }
}
