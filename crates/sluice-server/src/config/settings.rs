//! The service's settings, each declared once: its flag and variable, its file field, its
//! default, how its value is read, and one line of help. Flags beat variables, which beat
//! the file's `server:` section, which beats the default ([`crate::config::declare`]).
//!
//! A new setting is one more entry here, plus its use.

use crate::config::admin_token::AdminToken;
use crate::config::bounds::{
    Bounds, DEFAULT_GRPC_MAX_STREAMS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_DESCRIPTOR_ENTRIES, DEFAULT_MAX_DESCRIPTORS,
    DEFAULT_MAX_GRPC_MESSAGE, DEFAULT_MAX_REQUEST_HEAD, DEFAULT_MAX_RLQS_BUCKETS, MIN_REQUEST_HEAD,
};
use crate::config::byte_size::RawSize;
use crate::config::declare::declare_settings;
pub(crate) use crate::config::setting_values::{LogFormat, UiAccess};
use crate::config::setting_values::{
    address, at_least_a_mebibyte, at_least_one, failure_mode, lease_period, module_use, optional_address, snapshot_path,
};
pub(crate) use crate::config::store_url::StoreChoice;
use crate::config::values::{positive, positive_or_off, within};
use crate::metrics::{DEFAULT_TOP_KEYS, FigureSettings, MAX_TOP_KEYS};
use crate::runtime::workers;
use sluice_core::config::parse_duration;
use sluice_core::store::memory::DEFAULT_MAX_KEYS;
use sluice_redis::{FailureMode, ModuleUse, TlsFiles, check_certificate_file, check_key_file};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A PEM file that `check` finds usable (`check-config` and `serve` read it alike).
fn pem_file(path: PathBuf, check: fn(&std::path::Path) -> Result<(), String>) -> Result<Option<PathBuf>, String> {
    check(&path).map(|()| Some(path))
}

declare_settings! {
    "Where the HTTP JSON API listens."
    http: SocketAddr, from String, env "SLUICE_HTTP", default("127.0.0.1:8080"),
        parse |text: String| address(&text), #[arg(value_name = "ADDR")];
    "Where the Envoy rate limit gRPC service listens."
    grpc: SocketAddr, from String, env "SLUICE_GRPC", default("127.0.0.1:8081"),
        parse |text: String| address(&text), #[arg(value_name = "ADDR")];
    "Where the Redis-protocol (RESP2/RESP3) front listens, serving `CL.THROTTLE` and \
     `SLUICE.CHECK` (docs/resp.md), or `off`."
    resp: Option<SocketAddr>, from String, env "SLUICE_RESP", default("off"),
        parse |text: String| optional_address(&text), #[arg(value_name = "ADDR")];
    "Where states live: `memory`, `redis://HOST:PORT[/DB]` (`rediss://` for TLS), \
     `redis+cluster://HOST:PORT[,HOST:PORT…]` or \
     `redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/PRIMARY_NAME`."
    store: StoreChoice, from String, env "SLUICE_STORE", default("memory"),
        parse |text: String| StoreChoice::parse(&text), #[arg(value_name = "STORE")];
    "The in-memory store's snapshot file, or `off`."
    snapshot: Option<PathBuf>, from String, env "SLUICE_SNAPSHOT", default("sluice.snapshot"),
        parse |text: String| Ok(snapshot_path(&text)), #[arg(value_name = "PATH")];
    "How often the snapshot is written, such as `5s`."
    snapshot_interval: Duration, from String, env "SLUICE_SNAPSHOT_INTERVAL", default("5s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "Start empty when the snapshot file cannot be loaded, instead of refusing to start."
    discard_bad_snapshot: bool, from bool, env "SLUICE_DISCARD_BAD_SNAPSHOT", default(false), parse Ok,
        #[arg(num_args = 0..=1, default_missing_value = "true")];
    "The token admin endpoints (reset, reload) require as `Authorization: Bearer TOKEN`. \
     Without one, they answer loopback clients only."
    admin_token: Option<AdminToken>, from String, env "SLUICE_ADMIN_TOKEN", optional("none"),
        parse |token: String| Ok((!token.is_empty()).then(|| AdminToken::new(&token))),
        #[arg(value_name = "TOKEN", hide_env_values = true)];
    "Report every request allowed, while still counting and recording what would have \
     been rejected (roll-out of new limits)."
    shadow_mode: bool, from bool, env "SLUICE_SHADOW_MODE", default(false), parse Ok,
        #[arg(num_args = 0..=1, default_missing_value = "true")];
    "What Redis-backed checks decide while Redis cannot answer: `open`, `closed` or `fallback`."
    failure_mode: FailureMode, from String, env "SLUICE_FAILURE_MODE", default("open"),
        parse |text: String| failure_mode(&text), #[arg(value_name = "MODE")];
    "`rediss://` stores: the CA certificate(s) (PEM) Redis's certificate must chain to, \
     instead of the system's trusted roots, or Redis's own self-signed certificate."
    redis_ca_file: Option<PathBuf>, from PathBuf, env "SLUICE_REDIS_CA_FILE", optional("system roots"),
        parse |path: PathBuf| pem_file(path, check_certificate_file), #[arg(value_name = "FILE")];
    "`rediss://` stores: a client certificate (PEM) for a Redis that verifies its clients; \
     with `--redis-client-key`."
    redis_client_cert: Option<PathBuf>, from PathBuf, env "SLUICE_REDIS_CLIENT_CERT", optional("none"),
        parse |path: PathBuf| pem_file(path, check_certificate_file), #[arg(value_name = "FILE")];
    "The client certificate's private key (PEM)."
    redis_client_key: Option<PathBuf>, from PathBuf, env "SLUICE_REDIS_CLIENT_KEY", optional("none"),
        parse |path: PathBuf| pem_file(path, check_key_file), #[arg(value_name = "FILE")];
    "How long one Redis call may take, such as `50ms`."
    redis_timeout: Duration, from String, env "SLUICE_REDIS_TIMEOUT", default("50ms"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "Whether Redis-backed checks use the Sluice Redis module's `SLUICE.CHECK`: `detect` \
     (when Redis has it), `always` or `never` (the Lua scripts)."
    redis_module: ModuleUse, from String, env "SLUICE_REDIS_MODULE", default("detect"),
        parse |text: String| module_use(&text), #[arg(value_name = "USE")];
    "Quota leases on a shared store (docs/leases.md): the most of this server's own traffic \
     for a key one lease may cover, such as `100ms`, or `0` (off). Every policy must then be \
     one that can be leased exactly (every algorithm but the `attempts` variants)."
    lease_period: Duration, from String, env "SLUICE_LEASE_PERIOD", default("0"),
        parse |text: String| lease_period(&text), #[arg(value_name = "DURATION")];
    "How long an HTTP request may take once its head came, its body and its answer (408 \
     after it), such as `30s`."
    request_timeout: Duration, from String, env "SLUICE_REQUEST_TIMEOUT", default("75s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "How long an HTTP request body may take to come in full once its head came (or the \
     request timeout, if shorter); past it the request is answered 408 and an HTTP/1 \
     connection closed, such as `5s`."
    body_timeout: Duration, from String, env "SLUICE_BODY_TIMEOUT", default("5s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "How long an HTTP/1 request head may take to come in full once it has begun; the \
     connection is closed past it (slowloris), such as `5s`."
    header_timeout: Duration, from String, env "SLUICE_HEADER_TIMEOUT", default("5s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "How often an idle gRPC connection is pinged, such as `60s`, or `off`; one that does not \
     answer within 20 s (or the interval, if shorter) is closed, so a dead peer's connection \
     does not linger."
    grpc_keepalive: Option<Duration>, from String, env "SLUICE_GRPC_KEEPALIVE", default("60s"),
        parse |text: String| positive_or_off(&text), #[arg(value_name = "DURATION")];
    "After SIGTERM or SIGINT, how long requests in flight and open connections may take to \
     finish before they are dropped and the service exits, such as `5s` (`0s`: at once); a \
     second signal exits at once."
    shutdown_grace: Duration, from String, env "SLUICE_SHUTDOWN_GRACE", default("5s"),
        parse |text: String| parse_duration(&text), #[arg(value_name = "DURATION")];
    "The most states the in-memory store holds."
    max_keys: usize, from usize, env "SLUICE_MAX_KEYS", default(DEFAULT_MAX_KEYS, "10000000"),
        parse at_least_one, #[arg(value_name = "COUNT")];
    "The most bytes the in-memory store holds, keys included, such as `512MiB` or `4GiB`. \
     When full of keys that are being rejected, it refuses new keys (HTTP 503, gRPC \
     UNAVAILABLE) rather than forget a block."
    max_memory: usize, from RawSize, env "SLUICE_MAX_MEMORY", default("1GiB"),
        parse |size: RawSize| size.bytes().and_then(at_least_a_mebibyte),
        #[arg(value_name = "SIZE", value_parser = RawSize::from_flag)];
    "Threads serving HTTP and gRPC connections, each with a runtime of its own, 1 to 256."
    workers: usize, from usize, env "SLUICE_WORKERS",
        default(workers::default_count(), "the cores this process may use"),
        parse |count| within(count, 1, workers::MAX_COUNT), #[arg(value_name = "COUNT")];
    "Connections each listener (HTTP, gRPC, RESP) serves at once; a connection past it is \
     closed as soon as it is accepted."
    max_connections: usize, from usize, env "SLUICE_MAX_CONNECTIONS", default(DEFAULT_MAX_CONNECTIONS, "4096"),
        parse |count| within(count, 1, 1_000_000), #[arg(value_name = "COUNT")];
    "The largest request head in bytes, at least 8192: an HTTP/1 head (431 past it) or an \
     HTTP/2 header list, on both listeners."
    max_request_head: usize, from usize, env "SLUICE_MAX_REQUEST_HEAD", default(DEFAULT_MAX_REQUEST_HEAD, "16384"),
        parse |bytes| within(bytes, MIN_REQUEST_HEAD, 1024 * 1024), #[arg(value_name = "BYTES")];
    "Descriptors an Envoy request may carry; more answer INVALID_ARGUMENT."
    max_descriptors: usize, from usize, env "SLUICE_MAX_DESCRIPTORS", default(DEFAULT_MAX_DESCRIPTORS, "64"),
        parse |count| within(count, 1, 1_000_000), #[arg(value_name = "COUNT")];
    "Entries an Envoy descriptor may have; more answer INVALID_ARGUMENT."
    max_descriptor_entries: usize, from usize, env "SLUICE_MAX_DESCRIPTOR_ENTRIES",
        default(DEFAULT_MAX_DESCRIPTOR_ENTRIES, "32"),
        parse |count| within(count, 1, 1_000_000), #[arg(value_name = "COUNT")];
    "The largest gRPC message a client may send, in bytes; a larger one answers OUT_OF_RANGE."
    max_grpc_message: usize, from usize, env "SLUICE_MAX_GRPC_MESSAGE", default(DEFAULT_MAX_GRPC_MESSAGE, "65536"),
        parse |bytes| within(bytes, 1024, 64 * 1024 * 1024), #[arg(value_name = "BYTES")];
    "How long a connection may stay idle before it is closed: an HTTP connection with no \
     request in flight (keep-alive, or a head that never began), a gRPC connection with no \
     stream open, a RESP connection with no command, such as `60s`."
    idle_timeout: Duration, from String, env "SLUICE_IDLE_TIMEOUT", default("60s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "Streams a gRPC connection may have open at once (its HTTP/2 SETTINGS say so); more \
     are refused."
    grpc_max_streams: usize, from usize, env "SLUICE_GRPC_MAX_STREAMS", default(DEFAULT_GRPC_MAX_STREAMS, "100"),
        parse |count| within(count, 1, 1_000_000), #[arg(value_name = "COUNT")];
    "How long a gRPC request message may take to come in full (the first from its \
     stream's opening); past it the stream is answered DEADLINE_EXCEEDED and reset, such as \
     `10s`. The time between two messages of a stream is not bounded."
    grpc_message_timeout: Duration, from String, env "SLUICE_GRPC_MESSAGE_TIMEOUT", default("10s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "How often Envoys report RLQS usage, such as `5s` (Envoy 1.40 reports every 5 s): \
     assignments live three intervals, and a bucket not reported for three is abandoned."
    rlqs_report_interval: Duration, from String, env "SLUICE_RLQS_REPORT_INTERVAL", default("5s"),
        parse |text: String| positive(&text), #[arg(value_name = "DURATION")];
    "When Sluice stops, tell every Envoy to abandon its RLQS buckets, so that it falls back \
     to its `no_assignment_behavior` at once (fail-open under `ALLOW_ALL`). Off by default: \
     the assignments in force run out on their own (within three report intervals), then \
     Envoy applies its `expired_assignment_behavior`."
    rlqs_abandon_on_shutdown: bool, from bool, env "SLUICE_RLQS_ABANDON_ON_SHUTDOWN", default(false), parse Ok,
        #[arg(num_args = 0..=1, default_missing_value = "true")];
    "RLQS buckets with a rule the service holds at once, over every stream, and the most \
     one report may carry. Once full, a connection under its share (the cap over the \
     connections holding buckets) takes room from the one holding the most; a stream of a \
     connection at its share that would add more ends with RESOURCE_EXHAUSTED."
    max_rlqs_buckets: usize, from usize, env "SLUICE_MAX_RLQS_BUCKETS", default(DEFAULT_MAX_RLQS_BUCKETS, "100000"),
        parse |count| within(count, 1, 10_000_000), #[arg(value_name = "COUNT")];
    "Add RateLimit-Policy, RateLimit and Retry-After to Envoy's responses."
    envoy_headers: bool, from bool, env "SLUICE_ENVOY_HEADERS", default(false), parse Ok,
        #[arg(num_args = 0..=1, default_missing_value = "true")];
    "Add X-RateLimit-Limit, -Remaining and -Reset to /v1/check and /v1/peek answers, \
     beside the RateLimit fields every answer has."
    x_ratelimit_headers: bool, from bool, env "SLUICE_X_RATELIMIT_HEADERS", default(false), parse Ok,
        #[arg(num_args = 0..=1, default_missing_value = "true")];
    "Log format: `text` or `json`. Levels follow `RUST_LOG`."
    log_format: LogFormat, from String, env "SLUICE_LOG_FORMAT", default("text"),
        parse |text: String| LogFormat::parse(&text), #[arg(value_name = "FORMAT")];
    "Who may open the dashboard at `/ui` (and `/v1/live`, `/v1/playground`): `loopback` \
     clients only, every client (`open`), or nobody (`off`)."
    ui: UiAccess, from String, env "SLUICE_UI", default("loopback"),
        parse |text: String| UiAccess::parse(&text), #[arg(value_name = "ACCESS")];
    "Counters of each policy's top-keys tables (denied checks, consumed units; this minute \
     and the last), 0 to 1024: every key above 1/k of an epoch's total is listed, each count \
     at most that much too high. 0 keeps no tables and no distinct-key estimate."
    top_keys: usize, from usize, env "SLUICE_TOP_KEYS", default(DEFAULT_TOP_KEYS, "64"),
        parse |count| within(count, 0, MAX_TOP_KEYS), #[arg(value_name = "COUNT")];
    "Ranks of each policy's top keys exported to /metrics (`sluice_top_key_count`), 0 \
     (none) up to `top_keys`."
    top_key_series: usize, from usize, env "SLUICE_TOP_KEY_SERIES", default(0_usize, "0"),
        parse |count| within(count, 0, MAX_TOP_KEYS), #[arg(value_name = "COUNT")];
    "Export top keys to /metrics as they are, instead of the first 16 hex digits of their \
     SHA-256."
    raw_key_labels: bool, from bool, env "SLUICE_RAW_KEY_LABELS", default(false), parse Ok,
        #[arg(num_args = 0..=1, default_missing_value = "true")];
}

impl Settings {
    /// How long a pinged gRPC connection has to answer: 20 s, or the ping interval if shorter.
    pub(crate) fn grpc_keepalive_timeout(&self) -> Option<Duration> {
        self.grpc_keepalive.map(|interval| interval.min(Duration::from_secs(20)))
    }

    /// Bounds on connections, request heads and Envoy requests.
    pub(crate) fn bounds(&self) -> Bounds {
        Bounds {
            max_connections: self.max_connections,
            max_request_head: self.max_request_head,
            header_timeout: self.header_timeout,
            max_descriptors: self.max_descriptors,
            max_descriptor_entries: self.max_descriptor_entries,
            max_grpc_message: self.max_grpc_message,
        }
    }

    /// A problem between settings, as `(setting, problem)`: more top-key series than top
    /// keys, or TLS files for a store that is not `rediss://` (read by `check-config` and
    /// `serve` alike).
    pub(crate) fn problem_between(&self) -> Option<(&'static str, String)> {
        if self.top_key_series > self.top_keys {
            let problem = format!("must be at most `top_keys` ({}), got {}", self.top_keys, self.top_key_series);
            return Some(("top_key_series", problem));
        }
        let StoreChoice::Redis(url) = &self.store else { return None };
        let tls = self.redis_tls();
        if url.starts_with("rediss://") || tls.is_empty() {
            return None;
        }
        let setting = if tls.ca_file.is_some() { "redis_ca_file" } else { "redis_client_cert" };
        Some((
            setting,
            format!(
                "TLS files are for rediss:// stores, and the store is `{}`: use rediss://, or unset them",
                self.store
            ),
        ))
    }

    /// How the per-policy figures are set up.
    pub(crate) fn figures(&self) -> FigureSettings {
        FigureSettings {
            top_keys: self.top_keys,
            top_key_series: self.top_key_series,
            raw_key_labels: self.raw_key_labels,
        }
    }

    /// Certificates for `rediss://` stores.
    pub(crate) fn redis_tls(&self) -> TlsFiles {
        TlsFiles {
            ca_file: self.redis_ca_file.clone(),
            client_cert: self.redis_client_cert.clone(),
            client_key: self.redis_client_key.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::byte_size::RawSize;

    #[test]
    fn flags_beat_the_file_which_beats_the_defaults() {
        let args = SettingFlags { http: Some("127.0.0.1:9000".into()), ..SettingFlags::default() };
        let file = ServerSection {
            http: Some("127.0.0.1:7000".into()),
            grpc: Some("127.0.0.1:7001".into()),
            ..ServerSection::default()
        };
        let settings = Settings::resolve(&args, &file).unwrap();
        assert_eq!(settings.http.port(), 9000);
        assert_eq!(settings.grpc.port(), 7001);
        assert_eq!(settings.snapshot_interval, Duration::from_secs(5));
        assert_eq!(settings.store, StoreChoice::Memory);
        assert_eq!(settings.request_timeout, Duration::from_secs(75));
        assert_eq!(settings.body_timeout, Duration::from_secs(5));
        assert_eq!(settings.grpc_keepalive, Some(Duration::from_secs(60)));
        assert_eq!(settings.grpc_keepalive_timeout(), Some(Duration::from_secs(20)));
        assert_eq!(settings.shutdown_grace, Duration::from_secs(5));
        assert_eq!(settings.max_memory, sluice_core::store::memory::DEFAULT_MAX_MEMORY);
        assert_eq!(settings.redis_module, ModuleUse::Detect);
    }

    #[test]
    fn the_redis_module_use_comes_from_the_flag_or_the_file() {
        let file = ServerSection { redis_module: Some("never".into()), ..ServerSection::default() };
        assert_eq!(Settings::resolve(&SettingFlags::default(), &file).unwrap().redis_module, ModuleUse::Never);
        let args = SettingFlags { redis_module: Some("always".into()), ..SettingFlags::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().redis_module, ModuleUse::Always);
        let bad = SettingFlags { redis_module: Some("sometimes".into()), ..SettingFlags::default() };
        let problems = Settings::resolve(&bad, &file).unwrap_err().to_string();
        assert!(
            problems.contains("--redis-module: unknown module use `sometimes` (detect, always, never)"),
            "{problems}"
        );
    }

    #[test]
    fn top_keys_settings_out_of_bounds_are_refused_by_name() {
        let args = SettingFlags { top_keys: Some(2000), ..SettingFlags::default() };
        let problems = Settings::resolve(&args, &ServerSection::default()).unwrap_err().to_string();
        assert!(problems.contains("--top-keys: must be between 0 and 1024"), "{problems}");
        let file = ServerSection { top_keys: Some(8), top_key_series: Some(9), ..ServerSection::default() };
        let settings = Settings::resolve(&SettingFlags::default(), &file).unwrap();
        let (setting, problem) = settings.problem_between().unwrap();
        assert_eq!((setting, problem.as_str()), ("top_key_series", "must be at most `top_keys` (8), got 9"));
        let defaults = Settings::resolve(&SettingFlags::default(), &ServerSection::default()).unwrap();
        assert_eq!(defaults.figures(), FigureSettings::default());
    }

    #[test]
    fn max_memory_is_read_as_a_size_from_the_flag_or_the_file() {
        let file = ServerSection { max_memory: Some(RawSize::Text("512MiB".into())), ..ServerSection::default() };
        assert_eq!(Settings::resolve(&SettingFlags::default(), &file).unwrap().max_memory, 512 << 20);
        let file = ServerSection { max_memory: Some(RawSize::Bytes(1 << 30)), ..ServerSection::default() };
        assert_eq!(Settings::resolve(&SettingFlags::default(), &file).unwrap().max_memory, 1 << 30);
        let args = SettingFlags { max_memory: Some("2GiB".into()), ..SettingFlags::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().max_memory, 2 << 30);
        for bad in ["lots", "1KiB"] {
            let args = SettingFlags { max_memory: Some(bad.into()), ..SettingFlags::default() };
            let problems = Settings::resolve(&args, &file).unwrap_err().to_string();
            assert!(problems.contains("--max-memory:"), "{problems}");
        }
    }

    #[test]
    fn the_body_timeout_comes_from_the_flag_or_the_file() {
        let file = ServerSection { body_timeout: Some("200ms".into()), ..ServerSection::default() };
        let from_file = Settings::resolve(&SettingFlags::default(), &file).unwrap();
        assert_eq!(from_file.body_timeout, Duration::from_millis(200));
        let args = SettingFlags { body_timeout: Some("1s".into()), ..SettingFlags::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().body_timeout, Duration::from_secs(1));
        let bad = SettingFlags { body_timeout: Some("0s".into()), ..SettingFlags::default() };
        let problems = Settings::resolve(&bad, &file).unwrap_err().to_string();
        assert!(problems.contains("--body-timeout:"), "{problems}");
    }

    #[test]
    fn the_shutdown_grace_comes_from_the_flag_or_the_file_and_may_be_zero() {
        let file = ServerSection { shutdown_grace: Some("2s".into()), ..ServerSection::default() };
        let from_file = Settings::resolve(&SettingFlags::default(), &file).unwrap();
        assert_eq!(from_file.shutdown_grace, Duration::from_secs(2));
        let args = SettingFlags { shutdown_grace: Some("0s".into()), ..SettingFlags::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().shutdown_grace, Duration::ZERO);
        let bad = SettingFlags { shutdown_grace: Some("soon".into()), ..SettingFlags::default() };
        let problems = Settings::resolve(&bad, &file).unwrap_err().to_string();
        assert!(problems.contains("--shutdown-grace:"), "{problems}");
    }

    #[test]
    fn every_bad_setting_is_named_as_the_flag_typed() {
        let args = SettingFlags {
            http: Some("nowhere".into()),
            store: Some("mysql://x".into()),
            snapshot_interval: Some("0s".into()),
            failure_mode: Some("sometimes".into()),
            request_timeout: Some("soon".into()),
            grpc_keepalive: Some("0s".into()),
            workers: Some(0),
            ui: Some("public".into()),
            ..SettingFlags::default()
        };
        let text = Settings::resolve(&args, &ServerSection::default()).unwrap_err().to_string();
        for name in [
            "--http:",
            "--store:",
            "--snapshot-interval:",
            "--failure-mode:",
            "--request-timeout:",
            "--workers: must be between 1 and 256",
            "--ui: unknown dashboard access `public`",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }

    #[test]
    fn grpc_keepalive_off_disables_it() {
        let args = SettingFlags { grpc_keepalive: Some("off".into()), ..SettingFlags::default() };
        let settings = Settings::resolve(&args, &ServerSection::default()).unwrap();
        assert_eq!((settings.grpc_keepalive, settings.grpc_keepalive_timeout()), (None, None));
    }

    #[test]
    fn the_dashboard_is_for_loopback_clients_unless_opened_or_turned_off() {
        let settings = |ui: Option<&str>| {
            let args = SettingFlags { ui: ui.map(str::to_owned), ..SettingFlags::default() };
            Settings::resolve(&args, &ServerSection::default()).unwrap().ui
        };
        assert_eq!(settings(None), UiAccess::Loopback);
        assert_eq!(settings(Some("open")), UiAccess::Open);
        assert_eq!(settings(Some("off")), UiAccess::Off);
    }

    #[test]
    fn snapshot_off_disables_it() {
        let args = SettingFlags { snapshot: Some("off".into()), ..SettingFlags::default() };
        assert_eq!(Settings::resolve(&args, &ServerSection::default()).unwrap().snapshot, None);
    }

    #[test]
    fn the_bounds_default_and_the_flag_beats_the_file() {
        let bounds = Settings::resolve(&SettingFlags::default(), &ServerSection::default()).unwrap().bounds();
        assert_eq!(bounds.max_connections, 4096);
        assert_eq!(bounds.max_request_head, 16 * 1024);
        assert_eq!(bounds.header_timeout, Duration::from_secs(5));
        assert_eq!((bounds.max_descriptors, bounds.max_descriptor_entries), (64, 32));
        assert_eq!(bounds.max_grpc_message, 64 * 1024);
        let file = ServerSection { max_descriptors: Some(8), header_timeout: Some("1s".into()), ..Default::default() };
        let args = SettingFlags { max_descriptors: Some(9), ..SettingFlags::default() };
        let bounds = Settings::resolve(&args, &file).unwrap().bounds();
        assert_eq!((bounds.max_descriptors, bounds.header_timeout), (9, Duration::from_secs(1)));
    }

    #[test]
    fn every_bound_out_of_range_is_named() {
        let args = SettingFlags {
            max_connections: Some(0),
            max_request_head: Some(100),
            header_timeout: Some("0s".into()),
            max_descriptors: Some(0),
            max_descriptor_entries: Some(0),
            max_grpc_message: Some(10),
            ..SettingFlags::default()
        };
        let text = Settings::resolve(&args, &ServerSection::default()).unwrap_err().to_string();
        for name in [
            "--max-connections: must be between 1 and",
            "--max-request-head: must be between 8192 and",
            "--header-timeout: must be longer than 0",
            "--max-descriptors: must be between 1",
            "--max-descriptor-entries: must be between 1",
            "--max-grpc-message: must be between 1024",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }

    #[test]
    fn the_defaults_shown_are_the_defaults_used() {
        let settings = Settings::resolve(&SettingFlags::default(), &ServerSection::default()).unwrap();
        let shown = |name: &str| DECLARED.iter().find(|(declared, ..)| *declared == name).unwrap().2;
        for (name, value) in [
            ("max_keys", settings.max_keys),
            ("max_connections", settings.max_connections),
            ("max_request_head", settings.max_request_head),
            ("max_descriptors", settings.max_descriptors),
            ("max_descriptor_entries", settings.max_descriptor_entries),
            ("max_grpc_message", settings.max_grpc_message),
            ("grpc_max_streams", settings.grpc_max_streams),
        ] {
            assert_eq!(shown(name), value.to_string(), "{name}");
        }
        assert_eq!(settings.max_memory, sluice_core::store::memory::DEFAULT_MAX_MEMORY);
        assert_eq!(settings.log_format, LogFormat::Text);
    }
}
