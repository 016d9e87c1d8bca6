//! The service's settings, merged from flags, environment and file, in that order.

use crate::config::admin_token::AdminToken;
use crate::config::bounds::Bounds;
use crate::config::byte_size::parse_size;
use crate::config::serve_args::ServeArgs;
use crate::config::server_section::ServerSection;
pub(crate) use crate::config::store_url::StoreChoice;
use crate::config::values::{positive, positive_or_off, within};
use sluice_config::ConfigError;
use sluice_core::config::parse_duration;
use sluice_redis::{FailureMode, ModuleUse, TlsFiles};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Every setting of a running service, resolved.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) http: SocketAddr,
    pub(crate) grpc: SocketAddr,
    pub(crate) store: StoreChoice,
    pub(crate) snapshot: Option<PathBuf>,
    pub(crate) snapshot_interval: Duration,
    pub(crate) discard_bad_snapshot: bool,
    pub(crate) admin_token: Option<AdminToken>,
    pub(crate) shadow_mode: bool,
    pub(crate) failure_mode: FailureMode,
    pub(crate) redis_timeout: Duration,
    /// Whether checks go to the Sluice Redis module (docs/redis.md, "With the module").
    pub(crate) redis_module: ModuleUse,
    /// Certificates for `rediss://` stores.
    pub(crate) redis_tls: TlsFiles,
    /// How long an HTTP connection may go with no request in flight and no new one before
    /// it is closed (a slow or stalled head, or an idle keep-alive connection), and how
    /// long a request may take to arrive in full (408 after it).
    pub(crate) request_timeout: Duration,
    /// How often an idle gRPC connection is pinged (`None`: never); one that does not
    /// answer within [`Settings::grpc_keepalive_timeout`] is closed.
    pub(crate) grpc_keepalive: Option<Duration>,
    /// Once SIGTERM or SIGINT has come, how long connections may take to finish before
    /// they are dropped (0: at once).
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_keys: usize,
    /// The most bytes the in-memory store holds, keys included.
    pub(crate) max_memory: usize,
    /// Threads serving connections, each with a runtime of its own.
    pub(crate) workers: usize,
    pub(crate) envoy_headers: bool,
    pub(crate) json_logs: bool,
    /// Who may open the dashboard (`/ui`) and its endpoints (`/v1/live`, `/v1/playground`).
    pub(crate) ui: UiAccess,
    /// Bounds on connections, request heads and Envoy requests.
    pub(crate) bounds: Bounds,
}

/// Who may open the dashboard and its endpoints (`docs/service.md`, "The dashboard").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UiAccess {
    /// Clients on the loopback interface only (the default): the live view shows callers' keys.
    Loopback,
    /// Every client that reaches the HTTP port.
    Open,
    /// Nobody: the dashboard's paths answer 404.
    Off,
}

impl UiAccess {
    fn parse(text: &str) -> Result<UiAccess, String> {
        match text {
            "loopback" => Ok(UiAccess::Loopback),
            "open" => Ok(UiAccess::Open),
            "off" => Ok(UiAccess::Off),
            other => Err(format!("unknown dashboard access `{other}` (loopback, open, off)")),
        }
    }
}

impl Settings {
    /// How long a pinged gRPC connection has to answer: 20 s, or the ping interval if shorter.
    pub(crate) fn grpc_keepalive_timeout(&self) -> Option<Duration> {
        self.grpc_keepalive.map(|interval| interval.min(Duration::from_secs(20)))
    }

    /// Merges `args` (flags, then environment, as clap resolved them) over the file's
    /// `server:` section over the defaults. Every bad value is reported, by name.
    ///
    /// # Errors
    ///
    /// Every bad value, each at the setting's name (`http`, `redis_timeout`, …).
    pub(crate) fn resolve(args: &ServeArgs, file: &ServerSection) -> Result<Settings, ConfigError> {
        let mut problems = ConfigError::default();
        let pick = |flag: &Option<String>, file: &Option<String>, default: &str| {
            flag.clone().or_else(|| file.clone()).unwrap_or_else(|| default.to_owned())
        };
        let flag = |arg: Option<bool>, file: Option<bool>| arg.or(file).unwrap_or(false);
        let http = problems.take("http", address(&pick(&args.http, &file.http, "127.0.0.1:8080")));
        let grpc = problems.take("grpc", address(&pick(&args.grpc, &file.grpc, "127.0.0.1:8081")));
        let store = problems.take("store", StoreChoice::parse(&pick(&args.store, &file.store, "memory")));
        let interval = pick(&args.snapshot_interval, &file.snapshot_interval, "5s");
        let snapshot_interval = problems.take("snapshot_interval", positive(&interval));
        let mode = pick(&args.failure_mode, &file.failure_mode, "open");
        let failure_mode = problems.take("failure_mode", failure_mode(&mode));
        let timeout = pick(&args.redis_timeout, &file.redis_timeout, "50ms");
        let redis_timeout = problems.take("redis_timeout", positive(&timeout));
        let module = pick(&args.redis_module, &file.redis_module, "detect");
        let redis_module = problems.take("redis_module", module_use(&module));
        let timeout = pick(&args.request_timeout, &file.request_timeout, "75s");
        let request_timeout = problems.take("request_timeout", positive(&timeout));
        let keepalive = pick(&args.grpc_keepalive, &file.grpc_keepalive, "60s");
        let grpc_keepalive = problems.take("grpc_keepalive", positive_or_off(&keepalive));
        let grace = pick(&args.shutdown_grace, &file.shutdown_grace, "5s");
        let shutdown_grace = problems.take("shutdown_grace", parse_duration(&grace));
        let json_logs = problems.take("log_format", log_format(&pick(&args.log_format, &file.log_format, "text")));
        let max_keys = args.max_keys.or(file.max_keys).unwrap_or(sluice_core::store::memory::DEFAULT_MAX_KEYS);
        let max_keys = problems.take("max_keys", at_least_one(max_keys));
        let max_memory = match (&args.max_memory, &file.max_memory) {
            (Some(flag), _) => parse_size(flag),
            (None, Some(file)) => file.bytes(),
            (None, None) => Ok(sluice_core::store::memory::DEFAULT_MAX_MEMORY),
        };
        let max_memory = problems.take("max_memory", max_memory.and_then(at_least_a_mebibyte));
        let workers = args.workers.or(file.workers).unwrap_or_else(crate::runtime::workers::default_count);
        let workers = problems.take("workers", within(workers, 1, crate::runtime::workers::MAX_COUNT));
        let ui = problems.take("ui", UiAccess::parse(&pick(&args.ui, &file.ui, "loopback")));
        let bounds = Bounds::resolve(args, file, &mut problems);
        let settings = (|| {
            Some(Settings {
                http: http?,
                grpc: grpc?,
                store: store?,
                snapshot: snapshot_path(&pick(&args.snapshot, &file.snapshot, "sluice.snapshot")),
                snapshot_interval: snapshot_interval?,
                discard_bad_snapshot: flag(args.discard_bad_snapshot, file.discard_bad_snapshot),
                admin_token: args
                    .admin_token
                    .as_ref()
                    .or(file.admin_token.as_ref())
                    .filter(|token| !token.is_empty())
                    .map(|token| AdminToken::new(token)),
                shadow_mode: flag(args.shadow_mode, file.shadow_mode),
                failure_mode: failure_mode?,
                redis_timeout: redis_timeout?,
                redis_module: redis_module?,
                redis_tls: TlsFiles {
                    ca_file: args.redis_ca_file.clone().or_else(|| file.redis_ca_file.clone()),
                    client_cert: args.redis_client_cert.clone().or_else(|| file.redis_client_cert.clone()),
                    client_key: args.redis_client_key.clone().or_else(|| file.redis_client_key.clone()),
                },
                request_timeout: request_timeout?,
                grpc_keepalive: grpc_keepalive?,
                shutdown_grace: shutdown_grace?,
                max_keys: max_keys?,
                max_memory: max_memory?,
                workers: workers?,
                envoy_headers: flag(args.envoy_headers, file.envoy_headers),
                json_logs: json_logs?,
                ui: ui?,
                bounds: bounds?,
            })
        })();
        let settings = problems.into_result(settings)?;
        // Every field is `Some` once no problem was found.
        settings.ok_or_else(|| ConfigError::single("", "incomplete settings"))
    }
}

fn at_least_one(count: usize) -> Result<usize, String> {
    if count == 0 { Err("must be at least 1".to_owned()) } else { Ok(count) }
}

/// A memory cap below 1 MiB would leave room for a few thousand short keys at most.
fn at_least_a_mebibyte(bytes: usize) -> Result<usize, String> {
    if bytes < 1 << 20 { Err(format!("must be at least 1MiB, got {bytes} bytes")) } else { Ok(bytes) }
}

fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("`{text}` is not an address such as 127.0.0.1:8080"))
}

fn snapshot_path(text: &str) -> Option<PathBuf> {
    (text != "off" && !text.is_empty()).then(|| PathBuf::from(text))
}

fn failure_mode(text: &str) -> Result<FailureMode, String> {
    match text {
        "open" => Ok(FailureMode::Open),
        "closed" => Ok(FailureMode::Closed),
        "fallback" => Ok(FailureMode::Fallback),
        other => Err(format!("unknown failure mode `{other}` (open, closed, fallback)")),
    }
}

fn module_use(text: &str) -> Result<ModuleUse, String> {
    match text {
        "detect" => Ok(ModuleUse::Detect),
        "always" => Ok(ModuleUse::Always),
        "never" => Ok(ModuleUse::Never),
        other => Err(format!("unknown module use `{other}` (detect, always, never)")),
    }
}

fn log_format(text: &str) -> Result<bool, String> {
    match text {
        "text" => Ok(false),
        "json" => Ok(true),
        other => Err(format!("unknown log format `{other}` (text, json)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::byte_size::RawSize;

    #[test]
    fn flags_beat_the_file_which_beats_the_defaults() {
        let args = ServeArgs { http: Some("127.0.0.1:9000".into()), ..ServeArgs::default() };
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
        assert_eq!(settings.grpc_keepalive, Some(Duration::from_secs(60)));
        assert_eq!(settings.grpc_keepalive_timeout(), Some(Duration::from_secs(20)));
        assert_eq!(settings.shutdown_grace, Duration::from_secs(5));
        assert_eq!(settings.max_memory, sluice_core::store::memory::DEFAULT_MAX_MEMORY);
        assert_eq!(settings.redis_module, ModuleUse::Detect);
    }

    #[test]
    fn the_redis_module_use_comes_from_the_flag_or_the_file() {
        let file = ServerSection { redis_module: Some("never".into()), ..ServerSection::default() };
        assert_eq!(Settings::resolve(&ServeArgs::default(), &file).unwrap().redis_module, ModuleUse::Never);
        let args = ServeArgs { redis_module: Some("always".into()), ..ServeArgs::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().redis_module, ModuleUse::Always);
        let bad = ServeArgs { redis_module: Some("sometimes".into()), ..ServeArgs::default() };
        let problems = Settings::resolve(&bad, &file).unwrap_err().to_string();
        assert!(
            problems.contains("redis_module: unknown module use `sometimes` (detect, always, never)"),
            "{problems}"
        );
    }

    #[test]
    fn max_memory_is_read_as_a_size_from_the_flag_or_the_file() {
        let file = ServerSection { max_memory: Some(RawSize::Text("512MiB".into())), ..ServerSection::default() };
        assert_eq!(Settings::resolve(&ServeArgs::default(), &file).unwrap().max_memory, 512 << 20);
        let file = ServerSection { max_memory: Some(RawSize::Bytes(1 << 30)), ..ServerSection::default() };
        assert_eq!(Settings::resolve(&ServeArgs::default(), &file).unwrap().max_memory, 1 << 30);
        let args = ServeArgs { max_memory: Some("2GiB".into()), ..ServeArgs::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().max_memory, 2 << 30);
        for bad in ["lots", "1KiB"] {
            let args = ServeArgs { max_memory: Some(bad.into()), ..ServeArgs::default() };
            let problems = Settings::resolve(&args, &file).unwrap_err().to_string();
            assert!(problems.contains("max_memory:"), "{problems}");
        }
    }

    #[test]
    fn the_shutdown_grace_comes_from_the_flag_or_the_file_and_may_be_zero() {
        let file = ServerSection { shutdown_grace: Some("2s".into()), ..ServerSection::default() };
        let from_file = Settings::resolve(&ServeArgs::default(), &file).unwrap();
        assert_eq!(from_file.shutdown_grace, Duration::from_secs(2));
        let args = ServeArgs { shutdown_grace: Some("0s".into()), ..ServeArgs::default() };
        assert_eq!(Settings::resolve(&args, &file).unwrap().shutdown_grace, Duration::ZERO);
        let bad = ServeArgs { shutdown_grace: Some("soon".into()), ..ServeArgs::default() };
        let problems = Settings::resolve(&bad, &file).unwrap_err().to_string();
        assert!(problems.contains("shutdown_grace:"), "{problems}");
    }

    #[test]
    fn every_bad_setting_is_named() {
        let args = ServeArgs {
            http: Some("nowhere".into()),
            store: Some("mysql://x".into()),
            snapshot_interval: Some("0s".into()),
            failure_mode: Some("sometimes".into()),
            request_timeout: Some("soon".into()),
            grpc_keepalive: Some("0s".into()),
            workers: Some(0),
            ui: Some("public".into()),
            ..ServeArgs::default()
        };
        let text = Settings::resolve(&args, &ServerSection::default()).unwrap_err().to_string();
        for name in [
            "http:",
            "store:",
            "snapshot_interval:",
            "failure_mode:",
            "request_timeout:",
            "workers: must be between 1 and 256",
            "ui: unknown dashboard access `public`",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }

    #[test]
    fn grpc_keepalive_off_disables_it() {
        let args = ServeArgs { grpc_keepalive: Some("off".into()), ..ServeArgs::default() };
        let settings = Settings::resolve(&args, &ServerSection::default()).unwrap();
        assert_eq!((settings.grpc_keepalive, settings.grpc_keepalive_timeout()), (None, None));
    }

    #[test]
    fn the_dashboard_is_for_loopback_clients_unless_opened_or_turned_off() {
        let settings = |ui: Option<&str>| {
            let args = ServeArgs { ui: ui.map(str::to_owned), ..ServeArgs::default() };
            Settings::resolve(&args, &ServerSection::default()).unwrap().ui
        };
        assert_eq!(settings(None), UiAccess::Loopback);
        assert_eq!(settings(Some("open")), UiAccess::Open);
        assert_eq!(settings(Some("off")), UiAccess::Off);
    }

    #[test]
    fn snapshot_off_disables_it() {
        let args = ServeArgs { snapshot: Some("off".into()), ..ServeArgs::default() };
        assert_eq!(Settings::resolve(&args, &ServerSection::default()).unwrap().snapshot, None);
    }
}
