//! What the service starts from, besides its settings: the configuration it first serves
//! and the listeners it accepts on. The command reads and binds them; a test builds them
//! (a parsed configuration, listeners on port 0) and hands them to [`crate::serve::run`].

use crate::config::service_file::{BUILTIN, ServiceConfig};
use crate::config::settings::Settings;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tokio::net::TcpListener;

/// The configuration the service starts with, and where it came from.
#[derive(Debug)]
pub(crate) struct InitialConfig {
    pub(crate) config: ServiceConfig,
    /// The configuration file, or `None` for the built-in one.
    pub(crate) path: Option<PathBuf>,
    /// The file's bytes as parsed: the file watch compares the file with them, so a change
    /// made while the service starts (a snapshot loading) is reloaded.
    pub(crate) bytes: Option<Vec<u8>>,
}

impl InitialConfig {
    /// The file at `path`, or the built-in example configuration.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or is not a valid configuration.
    pub(crate) fn read(path: Option<&Path>) -> anyhow::Result<InitialConfig> {
        match path {
            Some(path) => {
                let bytes = ServiceConfig::read_file(path)?;
                let config = ServiceConfig::from_file_bytes(path, &bytes)?;
                Ok(InitialConfig { config, path: Some(path.to_owned()), bytes: Some(bytes) })
            }
            None => Ok(InitialConfig::parsed(ServiceConfig::parse(BUILTIN).context("the built-in configuration")?)),
        }
    }

    /// A configuration parsed by the caller, with no file behind it (nothing to watch).
    pub(crate) fn parsed(config: ServiceConfig) -> InitialConfig {
        InitialConfig { config, path: None, bytes: None }
    }
}

/// Where the service accepts connections.
#[derive(Debug)]
pub(crate) struct Listeners {
    /// The HTTP JSON API's.
    pub(crate) http: TcpListener,
    /// The Envoy rate limit gRPC service's.
    pub(crate) grpc: TcpListener,
    /// The Redis-protocol front's, when it is on (`--resp`).
    pub(crate) resp: Option<TcpListener>,
}

impl Listeners {
    /// Listens on the addresses of `settings`.
    ///
    /// # Errors
    ///
    /// An address cannot be listened on (in use, not this host's).
    pub(crate) async fn bind(settings: &Settings) -> anyhow::Result<Listeners> {
        let resp = match settings.resp {
            Some(address) => Some(bind(address, "RESP").await?),
            None => None,
        };
        Ok(Listeners { http: bind(settings.http, "HTTP").await?, grpc: bind(settings.grpc, "gRPC").await?, resp })
    }
}

async fn bind(address: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).await.with_context(|| format!("cannot listen for {what} on {address}"))
}
