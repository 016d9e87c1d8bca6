//! [`give_back`]: a lease's unspent units taken back (`lua/give_back.lua`).

use super::channel::{Channel, Request};
use sluice_core::{GiveBack, StoreError};
use std::sync::Arc;

/// The script: rare (a key gone quiet, a shutdown), so sent with `EVAL`.
const GIVE_BACK: &str = include_str!("../../lua/give_back.lua");

/// Takes `back.units` from the key's state under each limit, in the window or bucket that
/// starts at `back.receipts[i].debited_in`, in one script (the keys share a hash tag), and forgets
/// the key's cached rejections.
///
/// The script reads each limit in its wire form ([`Policy::wire`](sluice_core::Policy::wire):
/// the algorithm's number and `p1..p4`, as the checks send it), after the start.
pub(super) async fn give_back(channel: &Arc<Channel>, back: GiveBack<'_>) -> Result<(), StoreError> {
    if back.limits.is_empty() || back.units == 0 {
        return Ok(());
    }
    let common = &channel.common;
    let keys = common.state_keys(back.key, back.limits);
    let mut command = redis::cmd("EVAL");
    command.arg(GIVE_BACK).arg(keys.len()).arg(&keys).arg(back.units);
    for (limit, receipt) in back.limits.iter().zip(back.receipts) {
        let wire = limit.policy().wire();
        command.arg(receipt.debited_in).arg(wire.algorithm).arg(&wire.params[..]);
    }
    let given = channel.send::<()>(common.settings.timeout, Request::Command(&command)).await;
    // A rejection this process cached may no longer hold.
    common.blocked.forget(&keys);
    given
}

#[cfg(test)]
mod tests {
    use super::GIVE_BACK;
    use sluice_core::Policy;

    /// The script names the algorithms it takes units back from by their wire numbers.
    #[test]
    fn the_script_reads_the_wire_numbers() {
        let line = GIVE_BACK.lines().find(|line| line.starts_with("local FIXED_WINDOW, SLIDING_WINDOW = "));
        let numbers: Vec<usize> = line
            .and_then(|line| line.split(" = ").nth(1))
            .map(|list| list.split(", ").filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_default();
        let wire = |word: &str| Policy::WIRE_ALGORITHMS.iter().position(|listed| *listed == word).map(|i| i + 1);
        assert_eq!(numbers, [wire("fixed_window"), wire("sliding_window")].map(Option::unwrap_or_default));
    }
}
