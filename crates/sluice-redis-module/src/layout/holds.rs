//! The leases a state holds, as the Lua twin stores them beside it (`lua/holds.lua`): one
//! '<dd' pair (deadline µs, units) per lease, oldest deadline first.

use super::{Bytes, Malformed, double, number};
use sluice_core::algorithm::{Hold, Holds};

/// The leases stored as `raw` (pairs), with the mark `ended`: exactly what the scripts write
/// (deadlines rising, no lease of 0 units).
///
/// # Errors
///
/// When `raw` is not whole pairs of exact integers, or not in that order.
pub(crate) fn read(raw: &[u8], ended: bool) -> Result<Holds, Malformed> {
    if !raw.len().is_multiple_of(16) {
        return Err(Malformed);
    }
    let mut holds = Vec::with_capacity(raw.len() / 16);
    for pair in raw.chunks_exact(16) {
        let hold = Hold { deadline: number(&pair[..8])?, units: number(&pair[8..])? };
        if hold.units == 0 || holds.last().is_some_and(|last: &Hold| last.deadline >= hold.deadline) {
            return Err(Malformed);
        }
        holds.push(hold);
    }
    Ok(Holds::from_parts(holds, ended))
}

/// Appends the pairs of `holds` to `bytes`.
pub(crate) fn write(holds: &Holds, bytes: &mut Bytes) {
    for hold in holds.iter() {
        bytes.extend_from_slice(&double(hold.deadline));
        bytes.extend_from_slice(&double(hold.units));
    }
}
