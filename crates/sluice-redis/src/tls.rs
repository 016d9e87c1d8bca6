//! Certificates for TLS connections to Redis (`rediss://`): a CA to trust instead of the
//! system's, and a client certificate for Redis servers that ask for one
//! (`tls-auth-clients yes`). The URL's `#insecure` fragment skips verification, for tests.

use sluice_core::StoreError;
use std::path::{Path, PathBuf};

/// PEM files for TLS connections, each optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate(s) Redis's certificate must chain to, instead of the system's
    /// trusted roots (a managed service's or your own CA).
    pub ca_file: Option<PathBuf>,
    /// The client certificate, for a Redis that verifies its clients; with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key.
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    /// True when no file is set.
    pub fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.client_cert.is_none() && self.client_key.is_none()
    }

    /// The files' contents, as redis-rs takes them.
    pub(crate) fn read(&self) -> Result<redis::TlsCertificates, StoreError> {
        let client_tls = match (&self.client_cert, &self.client_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert, "client certificate")?,
                client_key: read(key, "client key")?,
            }),
            _ => {
                let message = "a Redis client certificate needs its key, and a key its certificate: set both";
                return Err(StoreError::Refused(message.to_owned()));
            }
        };
        let root_cert = self.ca_file.as_deref().map(|ca| read(ca, "CA file")).transpose()?;
        Ok(redis::TlsCertificates { client_tls, root_cert })
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path)
        .map_err(|error| StoreError::Refused(format!("cannot read the Redis {what} {}: {error}", path.display())))
}
