//! The start-up lines: what the service serves, with what, and where it listens.

use super::snapshot;
use crate::config::leases::never_leased;
use crate::config::policy_text;
use crate::config::service_file::ServiceConfig;
use crate::engine::service_state::ServiceState;
use std::fmt::Write as _;
use std::io::Write as _;
use tokio::net::TcpListener;

/// Prints where the service listens and what it serves (standard output, for people and
/// scripts). A closed standard output (`sluice serve | head -1`) does not stop the service.
pub(super) fn announce(
    service: &ServiceState,
    http: &TcpListener,
    grpc: &TcpListener,
    resp: Option<&TcpListener>,
) -> anyhow::Result<()> {
    let mut lines = served(service);
    if let Some(resp) = resp {
        let _ = writeln!(lines, "RESP listening on {}", resp.local_addr()?);
    }
    let _ = writeln!(lines, "HTTP listening on http://{}", http.local_addr()?);
    let _ = writeln!(lines, "gRPC listening on {}", grpc.local_addr()?);
    let _ = std::io::stdout().lock().write_all(lines.as_bytes());
    Ok(())
}

/// What the service serves, in the start-up lines' words.
fn served(service: &ServiceState) -> String {
    let loaded = service.engine.loaded();
    let source =
        service.config_path.as_ref().map_or_else(|| "built-in example".to_owned(), |p| p.display().to_string());
    let policies = policy_text::policies(loaded.config.policies().len());
    let mut lines = format!("sluice {} serving {policies} from {source}\n", env!("CARGO_PKG_VERSION"));
    for entry in loaded.config.policies() {
        let shadow = if entry.shadow { " (shadow mode)" } else { "" };
        // In check-config's words: `api (token_bucket): capacity 100, 10 per 1 s`.
        let policy = entry.limit.policy();
        let words = policy_text::describe(policy);
        let _ = writeln!(lines, "  policy {} ({}): {words}{shadow}", entry.limit.name(), policy.algorithm_name());
    }
    if let Some(rules) = loaded.config.envoy() {
        let domains = rules.domains().collect::<Vec<_>>().join(", ");
        let _ = writeln!(lines, "Envoy rules: {} in domains {domains}", rules.len());
    }
    let _ = writeln!(lines, "store: {}", service.settings.store);
    lines.push_str(&leases(service, &loaded.config));
    if let (Some(path), Some(_)) = (&service.settings.snapshot, service.engine.backend().memory()) {
        let every = service.settings.snapshot_interval.as_secs_f64();
        let _ = writeln!(lines, "snapshot: {} (every {every} s and at shutdown)", snapshot::absolute(path).display());
    }
    let _ = writeln!(lines, "workers: {}", service.settings.workers);
    lines
}

/// Whether leases are on (on a shared store), their period, and each limit of `config`
/// that never gets one, with why.
fn leases(service: &ServiceState, config: &ServiceConfig) -> String {
    let settings = &service.settings;
    if service.engine.backend().redis().is_none() {
        return String::new();
    }
    if settings.lease_period.is_zero() {
        return "leases off\n".to_owned();
    }
    let mut lines = format!("leases on: period {}\n", policy_text::duration(settings.lease_period));
    for (name, reason) in never_leased(settings, config.limits()) {
        let _ = writeln!(lines, "  policy {name} gets no lease: {reason}");
    }
    lines
}
