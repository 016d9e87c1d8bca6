//! `sluice`: the rate limiter's command-line entry point.

mod cli;
mod simulate;
mod trace;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Simulate(args) => simulate::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            ExitCode::from(2)
        }
    }
}
