//! [`give_back`]: a lease's unspent units taken back: the module's `SLUICE.GIVEBACK` where
//! Redis has it loaded, else the give-back script (`lua/give_back.lua`).

use super::channel::{Channel, Request};
use super::common::Common;
use crate::script::{double, push_limits};
use sluice_core::{GiveBack, StoreError};
use std::sync::Arc;

/// Takes `back.units` back into the key's state under each limit, where the state still
/// holds the lease (`back.receipts[i]`: the window or bucket the units were debited in and
/// the state's stamp, or the lease's deadline), in one call (the keys share a hash tag), and
/// forgets the key's cached rejections.
///
/// The script and the module read each limit in its wire form
/// ([`Policy::wire`](sluice_core::Policy::wire): the algorithm's number and `p1..p4`, as the
/// checks send it), after its receipt.
pub(super) async fn give_back(channel: &Arc<Channel>, back: GiveBack<'_>) -> Result<(), StoreError> {
    // A give-back of no units still ends a held lease (its units are spent): it is sent.
    if back.limits.is_empty() {
        return Ok(());
    }
    let common = &channel.common;
    let keys = common.state_keys(back.key, back.limits);
    let packed = packed(common, &back)?;
    let timeout = common.settings.timeout;
    let given = if common.uses_module() {
        let mut command = redis::cmd("SLUICE.GIVEBACK");
        command.arg(&keys).arg(&packed);
        channel.send::<()>(timeout, Request::Command(&command)).await
    } else {
        let invocation = common.scripts.give_back(&keys, &packed);
        channel.send::<()>(timeout, Request::Script(&invocation)).await
    };
    // A rejection this process cached may no longer hold.
    common.blocked.forget(&keys);
    given
}

/// The give-back's one argument (lua/give_back_args.lua): little-endian doubles `now` (-1:
/// Redis `TIME`), the units leased and those given back, the TTL settings, then per limit
/// its receipt (where the units were debited, the state's stamp) and its wire form.
fn packed(common: &Common, back: &GiveBack<'_>) -> Result<Vec<u8>, StoreError> {
    let now = common.script_now(back.now, back.limits)?;
    let mut packed = Vec::with_capacity(40 + 56 * back.limits.len());
    packed.extend_from_slice(&(now as f64).to_le_bytes());
    let mut push = |value: u64| packed.extend_from_slice(&double(value));
    push(back.leased);
    push(back.units);
    push(common.settings.extra_ttl_ms());
    push(common.settings.min_ttl_ms());
    for (limit, receipt) in back.limits.iter().zip(back.receipts) {
        push(receipt.debited_in);
        push(receipt.stamp);
        push_limits(&mut push, std::slice::from_ref(limit));
    }
    Ok(packed)
}

#[cfg(test)]
mod tests {
    use crate::script::GIVE_BACK;
    use sluice_core::Policy;

    /// The script names the algorithms it takes units back from by their wire numbers.
    #[test]
    fn the_script_reads_the_wire_numbers() {
        let line = GIVE_BACK.lines().find(|line| line.starts_with("local SLIDING_LOG, FIXED_WINDOW, "));
        let numbers: Vec<usize> = line
            .and_then(|line| line.split(" = ").nth(1))
            .map(|list| list.split(", ").filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_default();
        let wire = |word: &str| Policy::WIRE_ALGORITHMS.iter().position(|listed| *listed == word).map(|i| i + 1);
        let words = ["sliding_log", "fixed_window", "sliding_window", "token_bucket", "leaky_bucket"];
        assert_eq!(numbers, words.map(|word| wire(word).unwrap_or_default()));
    }
}
