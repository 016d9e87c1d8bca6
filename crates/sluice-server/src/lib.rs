//! The `sluice` binary's library: the simulator and the rate-limit service.
//!
//! Only [`run`] and the Envoy rule matching are public; everything else is the binary's own.

#![forbid(unsafe_code)]

#[doc(hidden)]
pub mod bench;
mod cli;
mod config;
mod engine;
pub mod envoy;
mod grpc;
mod http;
mod metrics;
mod micros;
mod offline;
mod resp;
mod rlqs;
mod runtime;
mod serve;

use clap::Parser;
use std::process::ExitCode;

/// Parses the command line and runs the command; the process's exit status.
pub fn run() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Simulate(args) => offline::simulate::run(&args),
        cli::Command::Serve(args) => serve::run_command(&args).map(|()| ExitCode::SUCCESS),
        cli::Command::CheckConfig(args) => Ok(cli::check_config::run(&args)),
        cli::Command::Replay(args) => offline::replay::run(&args),
    };
    match result {
        Ok(code) => code,
        // The reader went away (`sluice simulate … | head -1`): nothing is left to say.
        Err(error) if is_closed_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// True when `error` comes from writing to a pipe whose reader has closed.
fn is_closed_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}
