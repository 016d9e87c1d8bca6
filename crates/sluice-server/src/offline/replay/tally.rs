//! What a replay counts as it goes: the distinct keys once, and per policy its decisions,
//! rejections per key, peak rates and time series. Memory grows with keys, not lines.

use super::series::Series;
use sluice_core::Timestamp;
use std::collections::HashMap;

/// Every distinct key seen, numbered in order of appearance, with its request count.
#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    ids: HashMap<Box<[u8]>, usize, ahash::RandomState>,
    requests: Vec<u64>,
}

impl KeyTable {
    /// The number of `key`, counting one more request for it (a key is copied once, when new).
    pub(crate) fn count(&mut self, key: &[u8]) -> usize {
        let id = match self.ids.get(key) {
            Some(&id) => id,
            None => {
                let id = self.requests.len();
                self.ids.insert(key.into(), id);
                self.requests.push(0);
                id
            }
        };
        self.requests[id] += 1;
        id
    }

    /// How many distinct keys were seen.
    pub(crate) fn len(&self) -> usize {
        self.requests.len()
    }

    /// The requests counted for key `id`.
    pub(crate) fn requests(&self, id: usize) -> u64 {
        self.requests[id]
    }

    /// The keys with the given numbers, in the order asked.
    pub(crate) fn names(&self, ids: &[usize]) -> Vec<Box<[u8]>> {
        let mut names = vec![Box::default(); ids.len()];
        for (key, id) in &self.ids {
            if let Some(slot) = ids.iter().position(|wanted| wanted == id) {
                names[slot] = key.clone();
            }
        }
        names
    }
}

/// The busiest second seen: whole seconds since the epoch, as the log's times fall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Peak {
    second: u64,
    count: u64,
    /// The busiest second so far and its count.
    pub(crate) best: (u64, u64),
}

impl Peak {
    /// Counts one request at `now` (times never go backwards in a replay).
    fn record(&mut self, now: Timestamp) {
        let second = now.as_micros() / 1_000_000;
        if second != self.second {
            (self.second, self.count) = (second, 0);
        }
        self.count += 1;
        if self.count > self.best.1 {
            self.best = (second, self.count);
        }
    }
}

/// One candidate policy's counts.
#[derive(Debug)]
pub(crate) struct PolicyTally {
    pub(crate) requests: u64,
    pub(crate) rejected: u64,
    /// Rejections per key number ([`KeyTable`]); shorter than the table when the last keys
    /// were never rejected.
    rejected_by_key: Vec<u64>,
    pub(crate) peak_requests: Peak,
    pub(crate) peak_allowed: Peak,
    pub(crate) series: Series,
}

impl PolicyTally {
    /// Nothing counted yet.
    pub(crate) fn new() -> PolicyTally {
        PolicyTally {
            requests: 0,
            rejected: 0,
            rejected_by_key: Vec::new(),
            peak_requests: Peak::default(),
            peak_allowed: Peak::default(),
            series: Series::new(),
        }
    }

    /// Counts the decision for key number `key` at `now`.
    pub(crate) fn record(&mut self, key: usize, now: Timestamp, allowed: bool) {
        self.requests += 1;
        self.peak_requests.record(now);
        if allowed {
            self.peak_allowed.record(now);
        } else {
            self.rejected += 1;
            if key >= self.rejected_by_key.len() {
                self.rejected_by_key.resize(key + 1, 0);
            }
            self.rejected_by_key[key] += 1;
        }
        self.series.record(now, allowed);
    }

    /// How many keys were rejected at least once.
    pub(crate) fn limited_keys(&self) -> usize {
        self.rejected_by_key.iter().filter(|&&count| count > 0).count()
    }

    /// The `n` keys with the most rejections (ties: the first seen first), with their counts.
    pub(crate) fn top_limited(&self, n: usize) -> Vec<(usize, u64)> {
        let mut limited: Vec<(usize, u64)> =
            self.rejected_by_key.iter().copied().enumerate().filter(|&(_, count)| count > 0).collect();
        limited.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        limited.truncate(n);
        limited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_numbered_once_and_counted() {
        let mut keys = KeyTable::default();
        assert_eq!([keys.count(b"a"), keys.count(b"b"), keys.count(b"a")], [0, 1, 0]);
        assert_eq!((keys.len(), keys.requests(0), keys.requests(1)), (2, 2, 1));
        assert_eq!(keys.names(&[1, 0]), [Box::from(&b"b"[..]), Box::from(&b"a"[..])]);
    }

    #[test]
    fn top_limited_keys_are_ordered_by_rejections_then_first_seen() {
        let mut tally = PolicyTally::new();
        let now = Timestamp::from_micros(5_000_000);
        for (key, allowed) in [(0, false), (1, false), (2, true), (1, false), (3, false)] {
            tally.record(key, now, allowed);
        }
        assert_eq!(tally.top_limited(2), [(1, 2), (0, 1)]);
        assert_eq!((tally.requests, tally.rejected, tally.limited_keys()), (5, 4, 3));
        assert_eq!(tally.peak_requests.best, (5, 5));
        assert_eq!(tally.peak_allowed.best, (5, 1));
    }
}
