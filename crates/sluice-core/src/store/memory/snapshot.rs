//! Snapshots of a [`MemoryStore`]: its states as bytes, so that a restarted process (even
//! one killed with SIGKILL) keeps what it had decided up to the last snapshot. The core only
//! turns states into bytes and back; writing files is the service's part.
//!
//! Timestamps in states are µs since the Unix epoch (the [`SystemClock`](crate::SystemClock)
//! is anchored on the wall clock), so they keep their meaning in the next process.
//!
//! The bytes are described in [`codec`](super::codec).
//!
//! Each shard writes its own tables, so a limit may have one table per shard. A changed
//! limit has another [`LimitId`](crate::LimitId) and starts fresh. A table carries its
//! limit's [`definition`](crate::Limit::definition), so that the states of limits made at
//! run time rather than configured (Envoy's per-descriptor overrides) can be restored too:
//! see [`MemoryStore::restore_adopting`].
//!
//! Version 3 had no anchor in sliding window states (their grids were all clock-aligned);
//! version 2 had no definitions either; version 1 neither, and limit ids of the first identity
//! scheme (a hash of the policy's `Debug` text). All three are still read, matching each table
//! to the limits given (by that scheme for version 1), so the first restart after an
//! upgrade keeps every configured limit's states; a table that matches no limit is skipped
//! and counted in [`RestoreReport::skipped_limits`], never read as another limit's.

use super::codec::SnapshotError;
use super::codec::format::{self, Entry};
use super::codec::states::Restored;
use super::keyed::{Change, KeyedStates};
use super::{MemoryStore, Shard};
use crate::{Limit, Timestamp};
use std::convert::Infallible;
use std::io;

/// What [`MemoryStore::restore`] did with a snapshot's states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestoreReport {
    /// When the snapshot was taken, by the clock of the store that took it.
    pub taken_at: Timestamp,
    /// States inserted.
    pub restored: usize,
    /// States not inserted because they are already fresh by this store's clock.
    pub fresh: usize,
    /// States not inserted because the store already held a state for that key and limit
    /// (the live one is kept).
    pub present: usize,
    /// States dropped to stay within `max_keys` (restored or not), as when keys are added.
    pub evicted: usize,
    /// Limits in the snapshot that are not among those given, or now use another
    /// algorithm: removed or changed limits, which start fresh.
    pub skipped_limits: usize,
    /// The states of those limits, not inserted.
    pub skipped_states: usize,
}

impl MemoryStore {
    /// The store's states as a snapshot, without those already fresh by its clock.
    ///
    /// Locks one shard at a time: each key's states (all its limits) are taken together,
    /// while other shards keep deciding.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::{Key, Limit, MemoryStore, Timestamp, TokenBucket, TokenBucketSettings};
    /// use std::time::Duration;
    ///
    /// let bucket = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    /// let api = [Limit::new("api", TokenBucket::new(bucket)?)];
    /// let store = MemoryStore::new();
    /// let now = Timestamp::from_system_time(std::time::SystemTime::now());
    /// store.check_now(Key::new(b"user-1")?, &api, now, 2)?;
    ///
    /// let restarted = MemoryStore::new();
    /// let report = restarted.restore(&store.snapshot(), &api)?;
    /// assert_eq!(report.restored, 1);
    /// assert!(!restarted.check_now(Key::new(b"user-1")?, &api, now, 1)?.decision.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> Vec<u8> {
        let mut snapshot = Vec::new();
        let Ok(()) = self.emit_snapshot(|bytes| {
            snapshot.extend_from_slice(bytes);
            Ok::<_, Infallible>(())
        });
        snapshot
    }

    /// Writes [`snapshot`](Self::snapshot) to `out` shard by shard, holding at most one
    /// shard's encoding in memory.
    ///
    /// # Errors
    ///
    /// When `out` fails.
    pub fn write_snapshot(&self, mut out: impl io::Write) -> io::Result<()> {
        self.emit_snapshot(|bytes| out.write_all(bytes))
    }

    /// Inserts the states of a snapshot that belong to `limits` (same name, same
    /// parameters), except those already fresh by this store's clock, within `max_keys`.
    ///
    /// # Errors
    ///
    /// When the snapshot is not one, is of an unsupported version, is corrupted or
    /// truncated, or holds a state its limit could not have produced. Everything is
    /// checked before anything is inserted: on error the store is unchanged.
    pub fn restore(&self, bytes: &[u8], limits: &[Limit]) -> Result<RestoreReport, SnapshotError> {
        self.restore_adopting(bytes, limits, |_| false)
    }

    /// [`restore`](Self::restore), and also the states of limits not given that `adopt`
    /// accepts: limits made at run time, such as the service's Envoy overrides, which no
    /// configuration lists. The snapshot's definition of such a limit is read back
    /// ([`Limit::from_definition`]) and its states are checked against it like any other.
    /// Snapshots of versions 1 and 2 carry no definitions: only `limits` are restored.
    ///
    /// # Errors
    ///
    /// As [`restore`](Self::restore).
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::{Alignment, FixedWindow, Key, Limit, MemoryStore, Timestamp};
    /// use std::time::Duration;
    ///
    /// let made_at_run_time = FixedWindow::new(1, Duration::from_secs(60), Alignment::Anchored, Duration::ZERO)?;
    /// let override_limit = Limit::new("override", made_at_run_time);
    /// let store = MemoryStore::new();
    /// let now = Timestamp::from_system_time(std::time::SystemTime::now());
    /// store.check_now(Key::new(b"user-1")?, std::slice::from_ref(&override_limit), now, 1)?;
    ///
    /// let restarted = MemoryStore::new();
    /// let report = restarted.restore_adopting(&store.snapshot(), &[], |limit| limit.name() == "override")?;
    /// assert_eq!(report.restored, 1);
    /// assert!(!restarted.check_one(Key::new(b"user-1")?, &override_limit, now, 1)?.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore_adopting(
        &self,
        bytes: &[u8],
        limits: &[Limit],
        adopt: impl Fn(&Limit) -> bool,
    ) -> Result<RestoreReport, SnapshotError> {
        let parsed = format::parse(bytes, limits, &adopt)?;
        let limits: Vec<Limit> = limits.iter().cloned().chain(parsed.adopted.iter().cloned()).collect();
        let now = (self.inner.clock)();
        let mut report = RestoreReport {
            taken_at: parsed.taken_at,
            skipped_limits: parsed.skipped_limits,
            skipped_states: parsed.skipped_states,
            ..RestoreReport::default()
        };
        let mut routed: Vec<(usize, u64, Entry<'_>)> = parsed
            .entries
            .into_iter()
            .map(|entry| {
                let hash = self.inner.hasher.hash_one(entry.key);
                (self.shard_index(hash), hash, entry)
            })
            .collect();
        routed.sort_by_key(|(shard, ..)| *shard);
        let mut routed = routed.into_iter().peekable();
        while let Some(&(index, ..)) = routed.peek() {
            let mut shard = self.inner.shards[index].0.lock();
            while let Some((_, hash, entry)) = routed.next_if(|(shard, ..)| *shard == index) {
                self.insert_restored(&mut shard, &limits[entry.limit], hash, entry, now, &mut report);
            }
        }
        Ok(report)
    }

    fn emit_snapshot<E>(&self, mut write: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        let now = (self.inner.clock)();
        let mut checksum = crc32fast::Hasher::new();
        let mut chunk = format::header(now);
        for shard in self.inner.shards.iter() {
            shard.0.lock().encode(now, &mut chunk);
            if !chunk.is_empty() {
                checksum.update(&chunk);
                write(&chunk)?;
                chunk.clear();
            }
        }
        chunk.push(format::END);
        checksum.update(&chunk);
        chunk.extend_from_slice(&checksum.finalize().to_le_bytes());
        write(&chunk)
    }

    fn insert_restored(
        &self,
        shard: &mut Shard,
        limit: &Limit,
        hash: u64,
        entry: Entry<'_>,
        now: Timestamp,
        report: &mut RestoreReport,
    ) {
        let position = shard.table_of(limit);
        let probe = super::stored_key::Probe::of(entry.key);
        match shard.tables.at(position).restore(hash, probe, entry.state, now, &self.inner.hasher) {
            Restored::Present => report.present += 1,
            Restored::Fresh => report.fresh += 1,
            Restored::New { bytes } => {
                report.restored += 1;
                let (bound, hasher) = (self.inner.bound, &self.inner.hasher);
                let before = shard.states + 1;
                shard.count(Change { inserted: true, bytes: bytes as isize }, &|| now, hasher);
                shard.keep_within(bound, now, hasher);
                // With only limited states left, the restored state is the one refused.
                if !shard.is_within(bound) {
                    shard.forget(limit, hash, probe, hasher);
                }
                report.evicted += before - shard.states;
            }
        }
        shard.drop_table_if_empty(limit.id());
    }
}

impl Shard {
    /// Appends the shard's tables, without the states fresh by `now` nor empty tables.
    fn encode(&self, now: Timestamp, out: &mut Vec<u8>) {
        for (owner, table) in self.tables.iter() {
            let limit = owner.limit(table);
            let start = out.len();
            out.push(table.tag());
            out.extend_from_slice(&limit.id().0.to_le_bytes());
            let definition = limit.definition();
            out.extend_from_slice(&(definition.len() as u32).to_le_bytes());
            out.extend_from_slice(definition.as_bytes());
            let count_at = out.len();
            out.extend_from_slice(&0u64.to_le_bytes());
            match table.encode(now, out) {
                0 => out.truncate(start),
                count => out[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes()),
            }
        }
    }
}
