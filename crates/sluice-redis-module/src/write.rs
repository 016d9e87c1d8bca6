//! The writes a check makes to a key, as the scripts make them (and as they are replicated).

use crate::layout::Bytes;
use smallvec::SmallVec;

/// One write to a key, as the script makes it (and as it is replicated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write {
    /// `SET key value PX ttl_ms`.
    Set { value: Bytes, ttl_ms: u64 },
    /// `SETRANGE key offset bytes` (inside the value).
    SetRange { offset: usize, bytes: Bytes },
    /// `PEXPIRE key ttl_ms`.
    Expire { ttl_ms: u64 },
}

/// A check's writes, each with the index of its limit (the first of a key listed twice),
/// in order.
pub(crate) type Writes = SmallVec<[(usize, Write); 4]>;
