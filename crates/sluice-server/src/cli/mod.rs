//! Command-line arguments.

pub(crate) mod check_config;

use clap::{Args, Parser, Subcommand};
use std::fmt;
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
    Serve(Box<crate::config::serve_args::ServeArgs>),

    /// Validates a configuration file and prints every problem in it.
    CheckConfig(CheckConfigArgs),

    /// Replays a real access log through candidate policies, each on its own embedded
    /// store, with the log's own times, and prints what each policy would have done.
    ///
    /// Lines that cannot be read are counted and the first few reported with their line
    /// numbers; they never stop the replay (exit status 0). A line older than the latest
    /// time already seen is decided at that latest time: the store's clock never goes back.
    Replay(Box<ReplayArgs>),
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

    /// Where states live: `memory` (the embedded store), `redis://HOST:PORT[/DB]`,
    /// `redis+cluster://HOST:PORT[,HOST:PORT…]`, or
    /// `redis+sentinel://HOST:PORT[,HOST:PORT…]/PRIMARY_NAME`. Redis runs use fresh keys under a unique
    /// prefix, with the trace's times injected; a request Redis does not decide (unreachable,
    /// out of memory, slower than 5 s) stops the run with an error.
    #[arg(long, value_name = "STORE", default_value = "memory")]
    pub(crate) store: String,
}

/// Arguments of `sluice replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The log to replay; `-` or nothing reads standard input.
    #[arg(value_name = "LOG")]
    pub(crate) log: Option<PathBuf>,

    /// The configuration file (policy file or service file) defining the policies.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,

    /// A candidate policy; give several to compare them (each is replayed on its own store).
    #[arg(long = "policy", value_name = "NAME", required = true)]
    pub(crate) policies: Vec<String>,

    /// The log's format.
    #[arg(long, value_enum, default_value_t = FormatName::Combined)]
    pub(crate) format: FormatName,

    /// Combined and common logs: the field that keys requests: `ip`, `user`, `request`,
    /// `referer`, `user_agent`, or `quoted:N`, the Nth double-quoted field of the line
    /// (1 = request, 2 = referer, 3 = user agent, 4 and up = fields appended to the format,
    /// such as a captured `"$http_x_api_key"`). Default: `ip`.
    #[arg(long, value_name = "FIELD")]
    pub(crate) key: Option<String>,

    /// JSON lines: the field holding the request's time: RFC 3339 text, or a number of
    /// seconds (below 10^11), milliseconds (below 10^14) or microseconds since the epoch.
    /// `a.b` reads field `b` of object `a`.
    #[arg(long, value_name = "FIELD", default_value = "time")]
    pub(crate) time_field: String,

    /// JSON lines: the field that keys requests (text as it is, other values as JSON).
    /// `a.b` reads field `b` of object `a`.
    #[arg(long, value_name = "FIELD", default_value = "key")]
    pub(crate) key_field: String,

    /// JSON lines: the field holding the request's method (for `--method`).
    #[arg(long, value_name = "FIELD", default_value = "method")]
    pub(crate) method_field: String,

    /// JSON lines: the field holding the request's path (for `--path`, `--path-regex`).
    #[arg(long, value_name = "FIELD", default_value = "path")]
    pub(crate) path_field: String,

    /// JSON lines: the field holding the response's status (for `--status`).
    #[arg(long, value_name = "FIELD", default_value = "status")]
    pub(crate) status_field: String,

    /// Replays only requests whose path (before any `?`) starts with PREFIX; give several
    /// to take any of them.
    #[arg(long = "path", value_name = "PREFIX")]
    pub(crate) paths: Vec<String>,

    /// Replays only requests whose target (path and query) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub(crate) path_regex: Option<String>,

    /// Replays only requests of METHOD (any case); give several to take any of them.
    #[arg(long = "method", value_name = "METHOD")]
    pub(crate) methods: Vec<String>,

    /// Replays only requests answered with STATUS (`401`) or of a class (`4xx`); give
    /// several to take any of them.
    #[arg(long = "status", value_name = "STATUS")]
    pub(crate) statuses: Vec<String>,

    /// Prints the summary as one JSON document instead of text.
    #[arg(long)]
    pub(crate) json: bool,

    /// Writes a self-contained HTML report with charts to FILE (a file input is read
    /// twice: the second pass draws the top limited keys' timelines).
    #[arg(long, value_name = "FILE.html")]
    pub(crate) report: Option<PathBuf>,
}

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatName {
    /// nginx's and Apache's combined log format (the common format too).
    Combined,
    /// One JSON object per line (`--time-field`, `--key-field`).
    Json,
    /// `sluice simulate`'s trace: `<time in µs since the Unix epoch> <key> [cost]`.
    Trace,
}

impl fmt::Display for FormatName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FormatName::Combined => "combined",
            FormatName::Json => "json",
            FormatName::Trace => "trace",
        })
    }
}

/// Arguments of `sluice check-config`.
#[derive(Debug, Args)]
pub(crate) struct CheckConfigArgs {
    /// The configuration file to validate.
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
}
