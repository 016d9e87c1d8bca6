//! `sluice check-config FILE`: validates a configuration and prints every problem.

use crate::cli::CheckConfigArgs;
use crate::config::service_file::ServiceConfig;
use crate::envoy::{Quota, Rule, Rules};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

/// Prints what the file defines, or every problem in it; exit status 0 when valid, 2 when
/// not: the status `sluice serve` exits with on the same file, since both read it with the
/// same validation (the store URL and TLS files included).
pub(crate) fn run(args: &CheckConfigArgs) -> ExitCode {
    let config = match ServiceConfig::load(&args.file) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            return ExitCode::from(2);
        }
    };
    let mut listing = String::new();
    let policies = crate::config::policy_text::policies(config.policies().len());
    let _ = writeln!(listing, "{}: valid, {policies}", args.file.display());
    for entry in config.policies() {
        let policy = entry.limit.policy();
        let words = crate::config::policy_text::describe(policy);
        let _ = writeln!(listing, "  {} ({}): {words}", entry.limit.name(), policy.algorithm_name());
    }
    if let Some(rules) = config.envoy() {
        list_rules(&mut listing, rules);
    }
    match std::io::stdout().lock().write_all(listing.as_bytes()) {
        // A reader that went away (`| head -1`) read what it wanted.
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("sluice: cannot write the listing: {error}");
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Lists the Envoy domains and, under each, its rules in file order.
fn list_rules(listing: &mut String, rules: &Rules) {
    let mut domains: Vec<&str> = rules.domains().collect();
    domains.sort_unstable();
    let _ = writeln!(listing, "{} Envoy rules in {} domains", rules.len(), domains.len());
    for domain in domains {
        let _ = writeln!(listing, "  domain {domain}");
        for rule in rules.rules().filter(|rule| rule.domain() == domain) {
            let _ = writeln!(listing, "    {}: {}", rule.path(), describe(rule));
        }
    }
}

/// What a rule does, in a few words: `10 per minute`, `policy api`, `unlimited`, `blocked`.
fn describe(rule: &Rule) -> String {
    let quota = match (rule.quota(), rule.unit()) {
        (Quota::Unlimited, _) => "unlimited".to_owned(),
        (Quota::Blocked, _) => "blocked (requests_per_unit: 0)".to_owned(),
        (Quota::Limit(limit), Some(unit)) => format!("{} per {}", limit.policy().limit(), unit.as_str()),
        (Quota::Limit(limit), None) => format!("policy {}", limit.name()),
    };
    let shadow = if rule.shadow_mode() { ", shadow mode" } else { "" };
    format!("{quota}{shadow}")
}
