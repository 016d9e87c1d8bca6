//! `sluice check-config FILE`: validates a configuration and prints every problem.

use crate::cli_serve::CheckConfigArgs;
use crate::service_config::ServiceConfig;
use crate::settings::Settings;
use std::process::ExitCode;

/// Prints what the file defines, or every problem in it; exit status 0 when valid, 1 when not.
pub(crate) fn run(args: &CheckConfigArgs) -> ExitCode {
    let config = match ServiceConfig::load(&args.file) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            return ExitCode::from(1);
        }
    };
    if let Err(problems) = Settings::resolve(&crate::cli_serve::ServeArgs::default(), &config.server) {
        eprintln!("sluice: {}: invalid `server:` section:\n  {}", args.file.display(), problems.join("\n  "));
        return ExitCode::from(1);
    }
    println!("{}: valid, {} policies", args.file.display(), config.policies().len());
    for entry in config.policies() {
        println!("  {} ({})", entry.limit.name(), entry.limit.policy().algorithm_name());
    }
    ExitCode::SUCCESS
}
