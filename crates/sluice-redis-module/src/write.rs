//! The writes a check makes to a key, as the scripts make them (and as they are replicated).

/// One write to a key, as the script makes it (and as it is replicated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write {
    /// `SET key value PX ttl_ms`.
    Set { value: Vec<u8>, ttl_ms: u64 },
    /// `SETRANGE key offset bytes` (inside the value).
    SetRange { offset: usize, bytes: Vec<u8> },
    /// `PEXPIRE key ttl_ms`.
    Expire { ttl_ms: u64 },
}

/// The writes to one key, in order.
pub(crate) type Writes = Vec<Write>;
