//! The `sluice` binary's library: the simulator and the rate-limit service.
//!
//! Only [`run`] and the Envoy rule matching are public; everything else is the binary's own.

mod admin_token;
mod backend;
mod bounds;
mod byte_size;
mod check_config;
mod cli;
mod cli_serve;
mod engine;
pub mod envoy;
mod front;
mod handoff;
mod http;
mod metrics;
mod playground;
mod policy_text;
mod reload;
mod replay;
mod rls;
mod serve;
mod service;
mod service_config;
mod settings;
mod shutdown;
mod simulate;
mod snapshot;
mod store_choice;
mod trace;
mod workers;
mod write_through;

use clap::Parser;
use std::process::ExitCode;

/// Parses the command line and runs the command; the process's exit status.
pub fn run() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Simulate(args) => simulate::run(&args),
        cli::Command::Serve(args) => serve::run(&args).map(|()| ExitCode::SUCCESS),
        cli::Command::CheckConfig(args) => Ok(check_config::run(&args)),
        cli::Command::Replay(args) => replay::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            ExitCode::from(2)
        }
    }
}
