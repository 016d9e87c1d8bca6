//! The configuration file's `server:` section, as written: every field optional, each one
//! a flag's twin ([`crate::config::settings`] merges them).

use crate::config::byte_size::RawSize;
use serde::Deserialize;
use std::path::PathBuf;

/// The configuration file's optional `server:` section: the same settings as the flags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerSection {
    pub(crate) http: Option<String>,
    pub(crate) grpc: Option<String>,
    pub(crate) store: Option<String>,
    pub(crate) snapshot: Option<String>,
    pub(crate) snapshot_interval: Option<String>,
    pub(crate) discard_bad_snapshot: Option<bool>,
    pub(crate) admin_token: Option<String>,
    pub(crate) shadow_mode: Option<bool>,
    pub(crate) failure_mode: Option<String>,
    pub(crate) redis_timeout: Option<String>,
    pub(crate) redis_module: Option<String>,
    pub(crate) redis_ca_file: Option<PathBuf>,
    pub(crate) redis_client_cert: Option<PathBuf>,
    pub(crate) redis_client_key: Option<PathBuf>,
    pub(crate) request_timeout: Option<String>,
    pub(crate) grpc_keepalive: Option<String>,
    pub(crate) shutdown_grace: Option<String>,
    pub(crate) max_keys: Option<usize>,
    pub(crate) max_memory: Option<RawSize>,
    pub(crate) workers: Option<usize>,
    pub(crate) envoy_headers: Option<bool>,
    pub(crate) log_format: Option<String>,
    pub(crate) ui: Option<String>,
    pub(crate) max_connections: Option<usize>,
    pub(crate) max_request_head: Option<usize>,
    pub(crate) header_timeout: Option<String>,
    pub(crate) max_descriptors: Option<usize>,
    pub(crate) max_descriptor_entries: Option<usize>,
    pub(crate) max_grpc_message: Option<usize>,
}
