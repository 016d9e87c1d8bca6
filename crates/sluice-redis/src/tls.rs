//! TLS connections to Redis (`rediss://`): a CA to trust instead of the system's, and a
//! client certificate for Redis servers that ask for one (`tls-auth-clients yes`). The URL's
//! `#insecure` fragment skips verification, for tests, and says so in a warning.
//!
//! The client configuration is built once, when a store opens ([`TlsFiles::client_config`]):
//! trust roots are read then, not at each connection, so reconnecting during an outage
//! costs a TCP connection attempt, not a reading of the system's CA files.

mod connector;
mod handshake_error;
mod trust;

pub(crate) use connector::TlsConnector;
pub use handshake_error::HandshakeError;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use sluice_core::StoreError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// PEM files for TLS connections, each optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate(s) Redis's certificate must chain to, instead of the system's
    /// trusted roots (a managed service's or your own CA); or Redis's own certificate, if
    /// it is self-signed (as `openssl req -x509` makes).
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

    /// The files' contents, as redis-rs takes them (Redis Cluster, Sentinel).
    pub(crate) fn read(&self) -> Result<redis::TlsCertificates, StoreError> {
        let client_tls = match self.client_pair()? {
            None => None,
            Some((cert, key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert, "client certificate")?,
                client_key: read(key, "client key")?,
            }),
        };
        let root_cert = self.ca_file.as_deref().map(|ca| read(ca, "CA file")).transpose()?;
        Ok(redis::TlsCertificates { client_tls, root_cert })
    }

    /// The TLS client configuration: roots, client certificate, and the verifier (none
    /// when `insecure`, with a warning).
    ///
    /// # Errors
    ///
    /// A file cannot be read or holds nothing usable, or no trusted root was found.
    pub(crate) fn client_config(&self, insecure: bool) -> Result<Arc<ClientConfig>, StoreError> {
        // The process's crypto provider, as rustls asks of a library: the one the application
        // installed (`CryptoProvider::install_default`), else the one rustls's features name
        // (ring: Sluice enables no other). With two enabled and none installed, rustls
        // panics here, as it does in redis-rs's own TLS connections (docs/redis.md).
        let builder = ClientConfig::builder();
        let provider = Arc::clone(builder.crypto_provider());
        let builder = if insecure {
            tracing::warn!(
                "the Redis URL ends in #insecure: Redis's certificate is not verified, so anyone on the \
                 path can pose as Redis; give its CA with the CA file instead"
            );
            builder.dangerous().with_custom_certificate_verifier(Arc::new(trust::NoVerification(provider)))
        } else {
            let (roots, pinned) = self.roots()?;
            let verifier =
                trust::PinningVerifier::new(roots, pinned, provider).map_err(|error| refused(error.to_string()))?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier))
        };
        let config = match self.client_pair()? {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certificates(cert).map_err(|why| refused(format!("the Redis client certificate {why}")))?;
                let key = private_key(key).map_err(|why| refused(format!("the Redis client key {why}")))?;
                builder.with_client_auth_cert(chain, key).map_err(|error| {
                    refused(format!("the Redis client certificate and key do not go together: {error}"))
                })?
            }
        };
        Ok(Arc::new(config))
    }

    /// The client certificate and its key, both or neither.
    fn client_pair(&self) -> Result<Option<(&Path, &Path)>, StoreError> {
        match (&self.client_cert, &self.client_key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => Ok(Some((cert, key))),
            _ => {
                Err(refused("a Redis client certificate needs its key, and a key its certificate: set both".to_owned()))
            }
        }
    }

    /// The trust roots, and the certificates a self-signed Redis may show as they are: the
    /// CA file's, else the system's (none pinned).
    fn roots(&self) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), StoreError> {
        let mut roots = RootCertStore::empty();
        let Some(ca_file) = &self.ca_file else {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
                return Err(refused(format!(
                    "no trusted root certificate found on this system ({}): give Redis's CA as the CA file",
                    errors.join("; ")
                )));
            }
            return Ok((roots, Vec::new()));
        };
        let pinned = certificates(ca_file).map_err(|why| refused(format!("the Redis CA file {why}")))?;
        for certificate in &pinned {
            roots.add(certificate.clone()).map_err(|error| {
                refused(format!(
                    "the Redis CA file {} holds a certificate that cannot be used: {error}",
                    ca_file.display()
                ))
            })?;
        }
        Ok((roots, pinned))
    }
}

/// Checks that `path` holds at least one PEM certificate (a CA file, a client certificate).
///
/// # Errors
///
/// What is wrong, in a few words starting with the path.
pub fn check_certificate_file(path: &Path) -> Result<(), String> {
    certificates(path).map(drop)
}

/// Checks that `path` holds a PEM private key.
///
/// # Errors
///
/// What is wrong, in a few words starting with the path.
pub fn check_key_file(path: &Path) -> Result<(), String> {
    private_key(path).map(drop)
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("{}: cannot be read: {error}", path.display()))?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{}: not a PEM file: {error}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{}: holds no certificate (no `-----BEGIN CERTIFICATE-----` block)", path.display()));
    }
    Ok(certificates)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("{}: cannot be read: {error}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|error| format!("{}: holds no PEM private key ({error})", path.display()))
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|error| refused(format!("cannot read the Redis {what} {}: {error}", path.display())))
}

fn refused(message: String) -> StoreError {
    StoreError::Refused(message)
}
