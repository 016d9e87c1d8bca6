//! Certificates for TLS tests, made by the test: a CA, Redis's certificate for 127.0.0.1 and
//! a client certificate, as PEM files in a temporary directory.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::path::{Path, PathBuf};

/// A directory with `ca.pem`, `cert.pem` and `key.pem` (Redis's, for 127.0.0.1),
/// `client.pem` and `client-key.pem`, and `other-ca.pem` (a CA that signed none of them).
#[derive(Debug)]
pub struct Certificates {
    /// The directory holding the files, removed on drop.
    pub dir: PathBuf,
}

impl Certificates {
    /// Makes a CA and the certificates it signs, in a new temporary directory.
    pub fn make() -> Certificates {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let dir = std::env::temp_dir().join(format!("sluice-tls-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let ca = authority("Sluice test CA");
        write_signed(&dir, "cert.pem", "key.pem", vec!["127.0.0.1".into(), "localhost".into()], &ca);
        write_signed(&dir, "client.pem", "client-key.pem", vec!["sluice-client".into()], &ca);
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("ca.pem written");
        std::fs::write(dir.join("other-ca.pem"), authority("Another CA").pem()).expect("other-ca.pem written");
        Certificates { dir }
    }

    /// A directory where Redis's certificate is self-signed as Redis's TLS docs and most
    /// how-tos make it, `openssl req -x509` (a CA certificate, `CN=localhost`, no
    /// subjectAltName), `ca.pem` is that same certificate, and `other-ca.pem` a CA that
    /// signed nothing.
    pub fn self_signed_by_openssl() -> Certificates {
        let certificates = Certificates::empty("openssl");
        let status = std::process::Command::new("openssl")
            .current_dir(&certificates.dir)
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.pem"])
            .args(["-days", "2", "-subj", "/CN=localhost"])
            .output()
            .expect("the openssl command (apt-get install openssl)");
        assert!(status.status.success(), "openssl req -x509: {}", String::from_utf8_lossy(&status.stderr));
        std::fs::copy(certificates.path("cert.pem"), certificates.path("ca.pem")).expect("ca.pem written");
        std::fs::write(certificates.path("other-ca.pem"), authority("Another CA").pem()).expect("other-ca.pem");
        certificates
    }

    /// As [`self_signed_by_openssl`](Self::self_signed_by_openssl), but the certificate (for
    /// 127.0.0.1, made by rcgen) expired in 2021.
    pub fn self_signed_expired() -> Certificates {
        let certificates = Certificates::empty("expired");
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let key = KeyPair::generate().expect("a key");
        let certificate = params.self_signed(&key).expect("a certificate");
        for name in ["cert.pem", "ca.pem"] {
            std::fs::write(certificates.path(name), certificate.pem()).expect("a certificate written");
        }
        std::fs::write(certificates.path("key.pem"), key.serialize_pem()).expect("a key written");
        certificates
    }

    fn empty(kind: &str) -> Certificates {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let dir = std::env::temp_dir().join(format!("sluice-tls-{kind}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Certificates { dir }
    }

    /// The path of the file `name` (`ca.pem`, `cert.pem`…) in [`dir`](Self::dir).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA certificate")
}

fn write_signed(dir: &Path, cert: &str, key: &str, names: Vec<String>, ca: &CertifiedIssuer<'_, KeyPair>) {
    let key_pair = KeyPair::generate().expect("a key");
    let certificate =
        CertificateParams::new(names).expect("parameters").signed_by(&key_pair, ca).expect("a certificate");
    std::fs::write(dir.join(cert), certificate.pem()).expect("a certificate written");
    std::fs::write(dir.join(key), key_pair.serialize_pem()).expect("a key written");
}
