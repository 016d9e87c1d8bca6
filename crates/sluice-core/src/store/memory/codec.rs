//! How a [`MemoryStore`](super::MemoryStore)'s snapshot is written in bytes: the file's
//! layout ([`format`]), a cursor over it, and each algorithm's state encoding ([`states`]),
//! which the tables use to take their states out and put them back.
//!
//! # Format, version 5
//!
//! Integers are little-endian and fixed-width.
//!
//! ```text
//! snapshot = magic "SLUICEMS" (8 bytes) | version: u16 = 5 | taken_at: u64 (µs, store clock)
//!            | table* | 0: u8 (end of tables) | crc32: u32 (CRC-32 of every byte before it)
//! table    = tag: u8 | limit id: u64 | definition length: u32 | definition (UTF-8)
//!            | count: u64 | entry{count}
//! entry    = key length: u16 (1..=1024) | key bytes | state (by tag)
//! tag 1  sliding_log     len: u32 | len × timestamp: u64, oldest first | holds
//! tag 2  fixed_window    start: u64 | used: u64
//! tag 3  sliding_window  anchor: u64 | newest bucket: u64 | slots: u32 | slots × count: u64 (by bucket % slots)
//! tag 4  token_bucket    taken: u64 | last refill: u64 | holds
//! tag 5  leaky_bucket    tat: u64 | holds
//! holds  = count: u8 (at most 16) | ended: u8 (0 or 1) | count × (deadline: u64 | units: u64), by deadline
//! ```
//!
//! Versions 1 to 4 have no `holds` (nothing was leased out of these states).

pub(crate) mod format;
mod reader;
pub(crate) mod states;
pub(crate) mod version;

/// A snapshot that cannot be restored. Nothing was restored from it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The bytes do not start like a snapshot.
    #[error("not a Sluice snapshot")]
    NotASnapshot,
    /// A snapshot in a format this version of Sluice does not read.
    #[error(
        "unsupported snapshot format version {found} (this version of Sluice reads versions 1 to {})",
        version::VERSION
    )]
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// The checksum does not match the bytes.
    #[error("snapshot checksum mismatch: the snapshot is corrupted or truncated")]
    Checksum,
    /// The snapshot ends before its structure does.
    #[error("snapshot ends early, at byte {offset}")]
    Truncated {
        /// Where it ends.
        offset: usize,
    },
    /// A value no store could have written (a state impossible for its limit, a bad key).
    #[error("invalid snapshot at byte {offset}: {problem}")]
    Invalid {
        /// Where the value ends.
        offset: usize,
        /// What is wrong, with the limit and key concerned.
        problem: String,
    },
}
