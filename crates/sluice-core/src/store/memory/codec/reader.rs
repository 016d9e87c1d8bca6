//! A cursor over a snapshot's bytes, for the file's format and every state's encoding.

use super::SnapshotError;

/// A cursor over a snapshot that fails instead of reading past the end.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    /// Offset of the next byte, from the start of the snapshot.
    at: usize,
    /// The snapshot's format version (the current one until told).
    version: u16,
}

impl<'a> Reader<'a> {
    /// A cursor at `offset` of `bytes`.
    pub(crate) fn new(bytes: &'a [u8], offset: usize) -> Self {
        Reader { bytes, at: offset, version: super::version::VERSION }
    }

    /// The same cursor, reading a snapshot of format `version`.
    pub(crate) fn of_version(self, version: u16) -> Self {
        Reader { version, ..self }
    }

    /// The snapshot's format version.
    pub(crate) fn version(&self) -> u16 {
        self.version
    }

    /// The offset of the next byte.
    pub(crate) fn offset(&self) -> usize {
        self.at
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], SnapshotError> {
        self.ensure(len)?;
        let taken = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(taken)
    }

    /// Fails unless `len` more bytes are there.
    pub(crate) fn ensure(&self, len: usize) -> Result<(), SnapshotError> {
        if len > self.remaining() {
            return Err(SnapshotError::Truncated { offset: self.bytes.len() });
        }
        Ok(())
    }

    /// How many bytes are left to read.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, SnapshotError> {
        self.array().map(u8::from_le_bytes)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, SnapshotError> {
        self.array().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, SnapshotError> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, SnapshotError> {
        self.array().map(u64::from_le_bytes)
    }

    /// An error about the bytes just read.
    pub(crate) fn invalid(&self, problem: impl Into<String>) -> SnapshotError {
        SnapshotError::Invalid { offset: self.at, problem: problem.into() }
    }
}
