//! A TLS handshake with Redis that failed, in Sluice's words: what is wrong, and what to do.
//! Each is a configuration that will never work (a refusal, not an outage).

use rustls::{AlertDescription, CertificateError, Error};
use std::fmt;

/// Redis and Sluice could not agree on TLS: Redis's certificate is not trusted, or Redis
/// refused Sluice's. Retrying does not mend it; a change of configuration does.
#[derive(Debug)]
pub struct HandshakeError {
    /// The host the URL names.
    host: String,
    error: Error,
}

impl HandshakeError {
    pub(crate) fn new(host: &str, error: Error) -> Self {
        HandshakeError { host: host.to_owned(), error }
    }

    /// The TLS error inside `error` (an I/O error from the TLS stream, or one of its sources).
    pub(crate) fn find(host: &str, error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        let mut cause = Some(error);
        while let Some(current) = cause {
            if let Some(tls) = current.downcast_ref::<Error>() {
                return Some(HandshakeError::new(host, tls.clone()));
            }
            let inner = current.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
            if let Some(tls) = inner.and_then(|inner| inner.downcast_ref::<Error>()) {
                return Some(HandshakeError::new(host, tls.clone()));
            }
            cause = current.source();
        }
        None
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = &self.host;
        let ca_file = "as the CA file (`--redis-ca-file`, `server.redis_ca_file`)";
        match &self.error {
            Error::InvalidCertificate(CertificateError::UnknownIssuer) => write!(
                f,
                "Redis's certificate ({host}) is not signed by a CA Sluice trusts: give the CA that signed it, \
                 or Redis's own certificate if it is self-signed, {ca_file}"
            ),
            error if super::trust::is_ca_used_as_end_entity(error) => write!(
                f,
                "Redis's certificate ({host}) is a self-signed CA certificate that Sluice was not given: \
                 give that certificate {ca_file}"
            ),
            Error::InvalidCertificate(CertificateError::NotValidForName)
            | Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => write!(
                f,
                "Redis's certificate does not name `{host}`: connect by a name its subjectAltName holds, \
                 or reissue it for `{host}`"
            ),
            Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => {
                write!(f, "Redis's certificate ({host}) has expired: renew it")
            }
            Error::InvalidCertificate(CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. }) => {
                write!(f, "Redis's certificate ({host}) is not valid yet: check this host's clock")
            }
            Error::AlertReceived(AlertDescription::CertificateRequired) => write!(
                f,
                "Redis ({host}) asks for a client certificate: set `--redis-client-cert` and `--redis-client-key`"
            ),
            Error::AlertReceived(alert) => write!(
                f,
                "Redis ({host}) refused the TLS handshake ({alert:?}): it may not trust Sluice's client \
                 certificate (give one its `tls-ca-cert-file` signed) or need one (`--redis-client-cert`)"
            ),
            Error::InvalidMessage(_) => write!(
                f,
                "Redis ({host}) did not answer in TLS: is the port its `tls-port`, or should the URL be redis://?"
            ),
            other => write!(f, "the TLS handshake with Redis ({host}) failed: {other}"),
        }
    }
}

impl std::error::Error for HandshakeError {}
