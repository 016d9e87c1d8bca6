//! Whether a configuration may run with quota leases (`--lease-period`, docs/leases.md).

use crate::config::settings::Settings;
use crate::config::store_url::StoreChoice;
use sluice_core::Limit;
use sluice_core::lease::NoLease;

/// Refuses leases that cannot work as asked: on the embedded store (every check is
/// already local), or with a limit a lease could take over its definition. Nothing to
/// check when leases are off. `limits`: every limit of the configuration.
///
/// # Errors
///
/// What is wrong and what to do, naming every policy (or Envoy rule) that cannot be leased
/// and the reason for each.
pub(crate) fn check_leases<'a>(settings: &Settings, limits: impl IntoIterator<Item = &'a Limit>) -> Result<(), String> {
    if settings.lease_period.is_zero() {
        return Ok(());
    }
    if settings.store == StoreChoice::Memory {
        return Err("--lease-period (server.lease_period) needs a shared store (--store redis://…): \
                    on the embedded store every check is already local"
            .to_owned());
    }
    let refused: Vec<String> = limits
        .into_iter()
        .filter_map(|limit| sluice_core::lease::check_leasable(std::slice::from_ref(limit)).err())
        .map(|refusal| refusal.to_string())
        .collect();
    match refused.as_slice() {
        [] => Ok(()),
        [one] => Err(format!("--lease-period (server.lease_period) is on, but {one}")),
        several => Err(format!(
            "--lease-period (server.lease_period) is on, but {} limits cannot be leased exactly:\n  {}",
            several.len(),
            several.join("\n  ")
        )),
    }
}

/// The limits that never get a lease, each with why (docs/leases.md, "No lease, by size"):
/// by name, the first limit of each name in `limits`; none when leases are off.
pub(crate) fn never_leased<'a>(
    settings: &Settings,
    limits: impl IntoIterator<Item = &'a Limit>,
) -> Vec<(&'a str, NoLease)> {
    if settings.lease_period.is_zero() {
        return Vec::new();
    }
    let mut named: Vec<(&str, NoLease)> = Vec::new();
    for limit in limits {
        let seen = named.iter().any(|(name, _)| *name == limit.name());
        if let Some(reason) = sluice_core::lease::never_leased(limit).filter(|_| !seen) {
            named.push((limit.name(), reason));
        }
    }
    named
}
