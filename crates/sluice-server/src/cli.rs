//! Command-line arguments.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Sluice: exact, fast rate limiting.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Replays a trace from standard input through a store (`--store`) with injected time,
    /// printing one JSON decision per request.
    ///
    /// A trace line is `<time in µs since the Unix epoch> <key> [cost]`; blank lines and
    /// `#` comments are skipped. Bad lines are reported on standard error with their line
    /// number and skipped; the exit status is then 1.
    Simulate(SimulateArgs),

    /// Runs the rate-limit service: HTTP JSON API, Envoy rate limit gRPC service, metrics.
    ///
    /// Settings come from flags, then `SLUICE_…` environment variables, then the
    /// configuration file's `server:` section. SIGHUP (or a change of the file) reloads the
    /// configuration; SIGTERM and SIGINT stop gracefully.
    Serve(Box<crate::cli_serve::ServeArgs>),

    /// Validates a configuration file and prints every problem in it.
    CheckConfig(crate::cli_serve::CheckConfigArgs),
}

/// Arguments of `sluice simulate`.
#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// The configuration file (YAML) defining the policies.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,

    /// A policy to check; give several to check them all at once (all or nothing).
    #[arg(long = "policy", value_name = "NAME", required = true)]
    pub(crate) policies: Vec<String>,

    /// Where states live: `memory` (the embedded store), `redis://HOST:PORT[/DB]`, or
    /// `redis+cluster://HOST:PORT[,HOST:PORT…]`. Redis runs use fresh keys under a unique
    /// prefix, with the trace's times injected.
    #[arg(long, value_name = "STORE", default_value = "memory")]
    pub(crate) store: String,
}
