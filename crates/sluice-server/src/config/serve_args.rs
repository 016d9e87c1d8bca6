//! Arguments of `sluice serve`.
//!
//! Every setting of `serve` can also come from an environment variable (`SLUICE_…`) or from
//! the configuration file's `server:` section; a flag beats the variable, which beats the
//! file, which beats the default.

use clap::Args;
use std::path::PathBuf;

/// Arguments of `sluice serve`. `None` means "not given here": the file or the default decides.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct ServeArgs {
    /// The configuration file (YAML): Sluice policies and Envoy domains, or an
    /// envoyproxy/ratelimit file. Without it, a built-in example configuration is served.
    #[arg(long, env = "SLUICE_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Where the HTTP JSON API listens [default: 127.0.0.1:8080].
    #[arg(long, env = "SLUICE_HTTP", value_name = "ADDR")]
    pub(crate) http: Option<String>,

    /// Where the Envoy rate limit gRPC service listens [default: 127.0.0.1:8081].
    #[arg(long, env = "SLUICE_GRPC", value_name = "ADDR")]
    pub(crate) grpc: Option<String>,

    /// Where states live: `memory`, `redis://HOST:PORT[/DB]` (`rediss://` for TLS),
    /// `redis+cluster://HOST:PORT[,HOST:PORT…]` or
    /// `redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/PRIMARY_NAME` [default: memory].
    #[arg(long, env = "SLUICE_STORE", value_name = "STORE")]
    pub(crate) store: Option<String>,

    /// The in-memory store's snapshot file, or `off` [default: sluice.snapshot].
    #[arg(long, env = "SLUICE_SNAPSHOT", value_name = "PATH")]
    pub(crate) snapshot: Option<String>,

    /// How often the snapshot is written, such as `5s` [default: 5s].
    #[arg(long, env = "SLUICE_SNAPSHOT_INTERVAL", value_name = "DURATION")]
    pub(crate) snapshot_interval: Option<String>,

    /// Start empty when the snapshot file cannot be loaded, instead of refusing to start.
    #[arg(long, env = "SLUICE_DISCARD_BAD_SNAPSHOT", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) discard_bad_snapshot: Option<bool>,

    /// The token admin endpoints (reset, reload) require as `Authorization: Bearer TOKEN`.
    /// Without one, they answer loopback clients only.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub(crate) admin_token: Option<String>,

    /// Report every request allowed, while still counting and recording what would have
    /// been rejected (roll-out of new limits).
    #[arg(long, env = "SLUICE_SHADOW_MODE", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) shadow_mode: Option<bool>,

    /// What Redis-backed checks decide while Redis cannot answer: `open`, `closed` or
    /// `fallback` [default: open].
    #[arg(long, env = "SLUICE_FAILURE_MODE", value_name = "MODE")]
    pub(crate) failure_mode: Option<String>,

    /// Whether Redis-backed checks use the Sluice Redis module's `SLUICE.CHECK`: `detect`
    /// (when Redis has it), `always` or `never` (the Lua scripts) [default: detect].
    #[arg(long, env = "SLUICE_REDIS_MODULE", value_name = "USE")]
    pub(crate) redis_module: Option<String>,

    /// How long one Redis call may take, such as `50ms` [default: 50ms].
    #[arg(long, env = "SLUICE_REDIS_TIMEOUT", value_name = "DURATION")]
    pub(crate) redis_timeout: Option<String>,

    /// `rediss://` stores: the CA certificate(s) (PEM) Redis's certificate must chain to,
    /// instead of the system's trusted roots.
    #[arg(long, env = "SLUICE_REDIS_CA_FILE", value_name = "FILE")]
    pub(crate) redis_ca_file: Option<PathBuf>,

    /// `rediss://` stores: a client certificate (PEM) for a Redis that verifies its
    /// clients; with `--redis-client-key`.
    #[arg(long, env = "SLUICE_REDIS_CLIENT_CERT", value_name = "FILE")]
    pub(crate) redis_client_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, env = "SLUICE_REDIS_CLIENT_KEY", value_name = "FILE")]
    pub(crate) redis_client_key: Option<PathBuf>,

    /// How long an HTTP connection may go without a request in flight or a new one (a slow
    /// head, or an idle keep-alive connection) before it is closed, and a request's body
    /// may take, such as `30s` [default: 75s].
    #[arg(long, env = "SLUICE_REQUEST_TIMEOUT", value_name = "DURATION")]
    pub(crate) request_timeout: Option<String>,

    /// How often an idle gRPC connection is pinged, such as `60s`, or `off`; one that does
    /// not answer within 20 s (or the interval, if shorter) is closed, so a dead peer's
    /// connection does not linger [default: 60s].
    #[arg(long, env = "SLUICE_GRPC_KEEPALIVE", value_name = "DURATION")]
    pub(crate) grpc_keepalive: Option<String>,

    /// After SIGTERM or SIGINT, how long requests in flight and open connections may take
    /// to finish before they are dropped and the service exits, such as `5s`; a second
    /// signal exits at once [default: 5s].
    #[arg(long, env = "SLUICE_SHUTDOWN_GRACE", value_name = "DURATION")]
    pub(crate) shutdown_grace: Option<String>,

    /// The most states the in-memory store holds [default: 10000000].
    #[arg(long, env = "SLUICE_MAX_KEYS", value_name = "COUNT")]
    pub(crate) max_keys: Option<usize>,

    /// The most bytes the in-memory store holds, keys included, such as `512MiB` or `4GiB`
    /// [default: 1GiB]. When full of keys that are being rejected, it refuses new keys
    /// (HTTP 503, gRPC UNAVAILABLE) rather than forget a block.
    #[arg(long, env = "SLUICE_MAX_MEMORY", value_name = "SIZE")]
    pub(crate) max_memory: Option<String>,

    /// Threads serving HTTP and gRPC connections, each with a runtime of its own, 1 to 256
    /// [default: the cores this process may use].
    #[arg(long, env = "SLUICE_WORKERS", value_name = "COUNT")]
    pub(crate) workers: Option<usize>,

    /// Connections each listener (HTTP, gRPC) serves at once; a connection past it is
    /// closed as soon as it is accepted [default: 4096].
    #[arg(long, env = "SLUICE_MAX_CONNECTIONS", value_name = "COUNT")]
    pub(crate) max_connections: Option<usize>,

    /// The largest request head in bytes, at least 8192: an HTTP/1 head (431 past it) or an
    /// HTTP/2 header list, on both listeners [default: 16384].
    #[arg(long, env = "SLUICE_MAX_REQUEST_HEAD", value_name = "BYTES")]
    pub(crate) max_request_head: Option<usize>,

    /// How long an HTTP/1 request head may take to come in full once it has begun; the
    /// connection is closed past it (slowloris), such as `5s` [default: 5s].
    #[arg(long, env = "SLUICE_HEADER_TIMEOUT", value_name = "DURATION")]
    pub(crate) header_timeout: Option<String>,

    /// Descriptors an Envoy request may carry; more answer INVALID_ARGUMENT [default: 64].
    #[arg(long, env = "SLUICE_MAX_DESCRIPTORS", value_name = "COUNT")]
    pub(crate) max_descriptors: Option<usize>,

    /// Entries an Envoy descriptor may have; more answer INVALID_ARGUMENT [default: 32].
    #[arg(long, env = "SLUICE_MAX_DESCRIPTOR_ENTRIES", value_name = "COUNT")]
    pub(crate) max_descriptor_entries: Option<usize>,

    /// The largest gRPC message a client may send, in bytes; a larger one answers
    /// OUT_OF_RANGE [default: 65536].
    #[arg(long, env = "SLUICE_MAX_GRPC_MESSAGE", value_name = "BYTES")]
    pub(crate) max_grpc_message: Option<usize>,

    /// Add RateLimit-Policy, RateLimit and Retry-After to Envoy's responses [default: false].
    #[arg(long, env = "SLUICE_ENVOY_HEADERS", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) envoy_headers: Option<bool>,

    /// Log format: `text` or `json` [default: text]. Levels follow `RUST_LOG`.
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_name = "FORMAT")]
    pub(crate) log_format: Option<String>,

    /// Who may open the dashboard at `/ui` (and `/v1/live`, `/v1/playground`): `loopback`
    /// clients only, every client (`open`), or nobody (`off`) [default: loopback].
    #[arg(long, env = "SLUICE_UI", value_name = "ACCESS")]
    pub(crate) ui: Option<String>,
}
