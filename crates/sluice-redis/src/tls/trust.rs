//! How a store verifies Redis's certificate, decided once when the store opens: the trust
//! roots (the CA file's certificates, else the system's, read once and not at each
//! connection), and a verifier that also accepts a self-signed certificate that the CA file
//! holds byte for byte.
//!
//! `openssl req -x509` (Redis's TLS docs, most how-tos) makes a self-signed certificate
//! marked as a CA (`basicConstraints CA:TRUE`). WebPKI refuses a CA certificate as a
//! server's (`CaUsedAsEndEntity`); OpenSSL, and so `redis-cli --cacert`, accepts it when it
//! is in the CA file. Accepting exactly that certificate is safe: it is pinned, so only the
//! holder of its private key can present it. Its validity period is still checked (webpki
//! checks it before the CA flag, so `CaUsedAsEndEntity` means the dates are good); its names
//! are not, as `redis-cli` does not check names either.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Redis's certificate must chain to a root; or be, byte for byte, one of the CA file's
/// certificates (a self-signed server certificate given as its own CA).
#[derive(Debug)]
pub(super) struct PinningVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl PinningVerifier {
    /// Verifies against `roots` with `provider`'s signature algorithms; `pinned` are the CA
    /// file's certificates (none for the system's roots).
    pub(super) fn new(
        roots: RootCertStore,
        pinned: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, Error> {
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|error| Error::General(format!("cannot build the certificate verifier: {error}")))?;
        Ok(PinningVerifier { webpki, pinned })
    }
}

impl ServerCertVerifier for PinningVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(error)
                if is_ca_used_as_end_entity(&error)
                    && self.pinned.iter().any(|pinned| pinned.as_ref() == end_entity.as_ref()) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether `error` is webpki's `CaUsedAsEndEntity`, which rustls passes on inside
/// `CertificateError::Other` (webpki's error type is not rustls's to name, so it is
/// recognised by its name).
pub(super) fn is_ca_used_as_end_entity(error: &Error) -> bool {
    matches!(error, Error::InvalidCertificate(CertificateError::Other(other))
        if format!("{other:?}").contains("CaUsedAsEndEntity"))
}

/// Accepts any certificate: the URL's `#insecure` fragment (tests). The handshake's
/// signatures are still checked, so the peer holds the key of the certificate it showed.
#[derive(Debug)]
pub(super) struct NoVerification(pub(super) Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
