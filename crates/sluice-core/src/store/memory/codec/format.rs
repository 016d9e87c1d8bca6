//! The snapshot's bytes: the envelope (magic, version, checksum) and the tables inside,
//! read without trusting a single byte (see the layout in the parent module).

use super::SnapshotError;
use super::reader::Reader;
use super::states::{AnyState, impossible, tag_of};
use super::version::{READ, VERSION, VERSION_LEGACY_IDS, VERSION_WITHOUT_DEFINITIONS};
use crate::{Key, Limit, LimitId, Timestamp};
use std::collections::BTreeSet;

/// The first bytes of every snapshot.
pub(crate) const MAGIC: [u8; 8] = *b"SLUICEMS";
/// The tag that ends the tables.
pub(crate) const END: u8 = 0;
/// Magic, version and the time the snapshot was taken.
const HEADER: usize = MAGIC.len() + 2 + 8;
/// The CRC-32 of everything before it.
const TRAILER: usize = 4;

/// The header of a snapshot taken at `now`.
pub(crate) fn header(now: Timestamp) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&now.as_micros().to_le_bytes());
    header
}

/// A validated snapshot: every state of a limit asked for, checked against its policy.
#[derive(Debug)]
pub(crate) struct Parsed<'a> {
    pub(crate) taken_at: Timestamp,
    pub(crate) entries: Vec<Entry<'a>>,
    /// Limits not given but adopted from their definitions; an entry's limit index past the
    /// limits given points here.
    pub(crate) adopted: Vec<Limit>,
    pub(crate) skipped_limits: usize,
    pub(crate) skipped_states: usize,
}

/// One state to restore.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    /// Index of its limit in the limits given.
    pub(crate) limit: usize,
    pub(crate) key: &'a [u8],
    pub(crate) state: AnyState,
}

/// Reads and checks the whole snapshot, keeping the states of `limits` (same id, same
/// algorithm) and of the limits its definitions describe that `adopt` accepts. Nothing is
/// returned unless everything is valid.
pub(crate) fn parse<'a>(
    bytes: &'a [u8],
    limits: &[Limit],
    adopt: &dyn Fn(&Limit) -> bool,
) -> Result<Parsed<'a>, SnapshotError> {
    let (version, taken_at, mut input) = open(bytes)?;
    let id_of = |limit: &Limit| match version {
        VERSION_LEGACY_IDS => LimitId::legacy(limit.name(), limit.policy()),
        _ => limit.id(),
    };
    let mut parsed =
        Parsed { taken_at, entries: Vec::new(), adopted: Vec::new(), skipped_limits: 0, skipped_states: 0 };
    let mut skipped = BTreeSet::new();
    loop {
        let tag = input.u8()?;
        if tag == END {
            break;
        }
        let id = LimitId(input.u64()?);
        let definition =
            if version > VERSION_WITHOUT_DEFINITIONS { Some(read_definition(&mut input, id)?) } else { None };
        let count = input.u64()?;
        let limit = match limits.iter().position(|limit| id_of(limit) == id && tag_of(limit.policy()) == tag) {
            Some(index) => Some(index),
            None => definition
                .and_then(|text| adopted(&mut parsed.adopted, text, id, tag, adopt))
                .map(|index| limits.len() + index),
        };
        let of =
            |index: usize| if index < limits.len() { &limits[index] } else { &parsed.adopted[index - limits.len()] };
        for _ in 0..count {
            let entry = read_entry(&mut input, tag, id, limit.map(of))?;
            match limit {
                Some(limit) => parsed.entries.push(Entry { limit, ..entry }),
                None => parsed.skipped_states += 1,
            }
        }
        if limit.is_none() {
            skipped.insert(id);
        }
    }
    if input.remaining() > 0 {
        return Err(input.invalid("bytes after the end of the tables"));
    }
    parsed.skipped_limits = skipped.len();
    Ok(parsed)
}

/// A table's definition: UTF-8 text, as long as the limit's name makes it (read in place:
/// a length past the snapshot's end is a truncation, nothing is allocated for it).
fn read_definition<'a>(input: &mut Reader<'a>, id: LimitId) -> Result<&'a str, SnapshotError> {
    let len = input.u32()? as usize;
    let bytes = input.take(len)?;
    std::str::from_utf8(bytes).map_err(|_| input.invalid(format!("limit {id}: a definition that is not UTF-8")))
}

/// The index in `adopted` of the limit `definition` describes, if it is one (with this
/// id and algorithm) that `adopt` accepts; added on its first table.
fn adopted(
    adopted: &mut Vec<Limit>,
    definition: &str,
    id: LimitId,
    tag: u8,
    adopt: &dyn Fn(&Limit) -> bool,
) -> Option<usize> {
    if let Some(index) = adopted.iter().position(|limit| limit.id() == id && tag_of(limit.policy()) == tag) {
        return Some(index);
    }
    let limit = Limit::from_definition(definition).ok()?;
    if limit.id() != id || tag_of(limit.policy()) != tag || !adopt(&limit) {
        return None;
    }
    adopted.push(limit);
    Some(adopted.len() - 1)
}

/// Checks the magic, the version and the checksum; returns the version, the time the
/// snapshot was taken and a reader at the first table.
fn open(bytes: &[u8]) -> Result<(u16, Timestamp, Reader<'_>), SnapshotError> {
    if !bytes.starts_with(&MAGIC) {
        if MAGIC.starts_with(bytes) {
            return Err(SnapshotError::Truncated { offset: bytes.len() });
        }
        return Err(SnapshotError::NotASnapshot);
    }
    let mut input = Reader::new(bytes, MAGIC.len());
    let found = input.u16()?;
    if !READ.contains(&found) {
        return Err(SnapshotError::UnsupportedVersion { found });
    }
    let Some(body) = bytes.len().checked_sub(TRAILER).filter(|&body| body >= HEADER) else {
        return Err(SnapshotError::Truncated { offset: bytes.len() });
    };
    let (body, trailer) = bytes.split_at(body);
    if crc32fast::hash(body).to_le_bytes() != trailer {
        return Err(SnapshotError::Checksum);
    }
    let mut input = Reader::new(body, input.offset()).of_version(found);
    let taken_at = Timestamp::from_micros(input.u64()?);
    Ok((found, taken_at, input))
}

/// Reads one key and its state, checked against `limit` when it is restored.
fn read_entry<'a>(
    input: &mut Reader<'a>,
    tag: u8,
    id: LimitId,
    limit: Option<&Limit>,
) -> Result<Entry<'a>, SnapshotError> {
    let at = input.offset();
    let len = usize::from(input.u16()?);
    if len == 0 || len > Key::MAX_LEN {
        return Err(input.invalid(format!("limit {id}: a key of {len} bytes (keys have 1 to 1024)")));
    }
    let key = input.take(len)?;
    let name = limit.map_or(String::new(), |limit| format!(" \"{}\"", limit.name()));
    let in_entry = |problem: &str| format!("limit{name} {id}, key \"{}\": {problem}", key.escape_ascii());
    let state = AnyState::decode(tag, input).map_err(|error| match error {
        SnapshotError::Invalid { offset, problem } => SnapshotError::Invalid { offset, problem: in_entry(&problem) },
        other => other,
    })?;
    if let Some(problem) = limit.and_then(|limit| impossible(limit.policy(), &state)) {
        return Err(SnapshotError::Invalid { offset: at, problem: in_entry(&problem) });
    }
    Ok(Entry { limit: 0, key, state })
}
