//! The hottest keys, for the dashboard: a space-saving top-K over a sample of the checks.
//!
//! Space-saving (Metwally, Agrawal and El Abbadi, 2005) keeps [`SLOTS`] counters; a key
//! not among them takes the place of the smallest, inheriting its count as the possible
//! overestimate. Memory is bounded whatever the traffic. The check path stays cheap: each
//! thread records one check in [`SAMPLE_EVERY`], and gives up rather than wait when another
//! thread holds the lock. Counts are halved every [`HALVE_AFTER`] samples, so the list
//! follows what is hot now rather than what was hot an hour ago.

use parking_lot::Mutex;
use std::cell::Cell;

/// How many keys are tracked.
pub(crate) const SLOTS: usize = 32;

/// One check in this many (per thread) is recorded; counts are in samples.
pub(crate) const SAMPLE_EVERY: u32 = 8;

/// Samples between two halvings of every count.
const HALVE_AFTER: u32 = 4096;

thread_local! {
    /// Checks this thread has seen, modulo [`SAMPLE_EVERY`].
    static TICK: Cell<u32> = const { Cell::new(0) };
}

/// The hottest keys, by sampled checks.
#[derive(Debug, Default)]
pub(crate) struct HotKeys {
    table: Mutex<HotKeyTable>,
}

/// A tracked key and its counts, in samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HotKey {
    /// The key (bytes that are not UTF-8 are replaced).
    pub(crate) key: String,
    /// Sampled checks of this key (an overestimate by at most `error`).
    pub(crate) checks: u64,
    /// Sampled checks of this key that were rejected.
    pub(crate) rejected: u64,
    /// The policy that rejected its latest sampled rejection (empty: none sampled).
    pub(crate) limited_by: String,
    /// How much `checks` may overstate (the count of the key it replaced).
    pub(crate) error: u64,
}

#[derive(Debug, Default)]
struct HotKeyTable {
    slots: Vec<HotKey>,
    samples: u32,
}

impl HotKeys {
    /// Counts a check of `key`, rejected by the policy `rejected_by` if any, when this
    /// thread's turn to sample has come.
    pub(crate) fn record(&self, key: &[u8], rejected_by: Option<&str>) {
        let sampled = TICK.with(|tick| {
            let now = tick.get();
            tick.set((now + 1) % SAMPLE_EVERY);
            now == 0
        });
        if sampled && let Some(mut table) = self.table.try_lock() {
            table.count(key, rejected_by);
        }
    }

    /// The tracked keys, hottest first.
    pub(crate) fn top(&self) -> Vec<HotKey> {
        let mut slots = self.table.lock().slots.clone();
        slots.sort_by(|a, b| b.checks.cmp(&a.checks).then_with(|| a.key.cmp(&b.key)));
        slots
    }
}

impl HotKeyTable {
    fn count(&mut self, key: &[u8], rejected_by: Option<&str>) {
        self.samples += 1;
        if self.samples >= HALVE_AFTER {
            self.halve();
        }
        let rejected = u64::from(rejected_by.is_some());
        if let Some(slot) = self.slots.iter_mut().find(|slot| slot.key.as_bytes() == key) {
            slot.checks += 1;
            slot.rejected += rejected;
            slot.limit_by(rejected_by);
            return;
        }
        let text = String::from_utf8_lossy(key);
        if self.slots.len() < SLOTS {
            let limited_by = rejected_by.unwrap_or_default().to_owned();
            self.slots.push(HotKey { key: text.into_owned(), checks: 1, rejected, limited_by, error: 0 });
        } else if let Some(coldest) = self.slots.iter_mut().min_by_key(|slot| slot.checks) {
            // The evicted key's buffers are reused: once the table is full, a new key in the
            // sample allocates only if it is longer than every key before it in that slot.
            coldest.key.clear();
            coldest.key.push_str(&text);
            coldest.limited_by.clear();
            coldest.limit_by(rejected_by);
            let error = coldest.checks;
            (coldest.checks, coldest.rejected, coldest.error) = (error + 1, rejected, error);
        }
    }

    fn halve(&mut self) {
        self.samples = 0;
        for slot in &mut self.slots {
            slot.checks /= 2;
            slot.rejected /= 2;
            slot.error /= 2;
        }
        self.slots.retain(|slot| slot.checks > 0);
    }
}

impl HotKey {
    /// Notes the policy that rejected this key's latest sampled check, if one did.
    fn limit_by(&mut self, rejected_by: Option<&str>) {
        if let Some(policy) = rejected_by {
            self.limited_by.clear();
            self.limited_by.push_str(policy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(keys: &[&str]) -> HotKeyTable {
        let mut table = HotKeyTable::default();
        for key in keys {
            table.count(key.as_bytes(), key.starts_with('r').then_some("strict"));
        }
        table
    }

    #[test]
    fn the_hottest_key_comes_first_with_its_rejections() {
        let hot = HotKeys { table: Mutex::new(table_of(&["a", "rb", "rb", "a", "rb"])) };
        let top = hot.top();
        assert_eq!((top[0].key.as_str(), top[0].checks, top[0].rejected), ("rb", 3, 3));
        assert_eq!((top[1].key.as_str(), top[1].checks, top[1].rejected), ("a", 2, 0));
        assert_eq!((top[0].limited_by.as_str(), top[1].limited_by.as_str()), ("strict", ""));
    }

    #[test]
    fn a_key_names_the_policy_of_its_latest_rejection() {
        let mut table = HotKeyTable::default();
        for rejected_by in [Some("burst2"), None, Some("login"), None] {
            table.count(b"k", rejected_by);
        }
        assert_eq!((table.slots[0].rejected, table.slots[0].limited_by.as_str()), (2, "login"));
    }

    #[test]
    fn memory_stays_bounded_and_a_heavy_key_survives_many_light_ones() {
        let mut table = HotKeyTable::default();
        for round in 0..10_000u32 {
            table.count(b"heavy", None);
            table.count(format!("light-{round}").as_bytes(), None);
        }
        assert_eq!(table.slots.len(), SLOTS);
        let heavy = table.slots.iter().find(|slot| slot.key == "heavy").unwrap();
        assert!(heavy.checks >= heavy.error, "{heavy:?}");
    }

    #[test]
    fn the_first_check_of_a_thread_is_sampled() {
        std::thread::spawn(|| {
            let hot = HotKeys::default();
            for _ in 0..SAMPLE_EVERY {
                hot.record(b"k", Some("p"));
            }
            let expected = HotKey { key: "k".into(), checks: 1, rejected: 1, limited_by: "p".into(), error: 0 };
            assert_eq!(hot.top(), vec![expected]);
        })
        .join()
        .unwrap();
    }
}
