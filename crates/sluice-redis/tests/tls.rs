//! `rediss://` against a real redis-server on a TLS port, with certificates this test makes
//! (a CA, Redis's certificate for 127.0.0.1, a client certificate): a CA file, a client
//! certificate for a Redis that verifies its clients, the `#insecure` fragment, and errors
//! that name their cause when verification fails.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{Check, Key, Limit, SlidingLog, SlidingLogVariant, Source, Store, Timestamp};
use sluice_redis::{RedisSettings, RedisStore, TlsFiles};
use sluice_test_support::certificates::Certificates;
use sluice_test_support::redis::RedisServer;
use std::time::Duration;

fn settings(tls: TlsFiles) -> RedisSettings {
    RedisSettings { tls, timeout: Duration::from_secs(2), ..RedisSettings::injected_time() }
}

fn url(server: &RedisServer, fragment: &str) -> String {
    format!("rediss://127.0.0.1:{}/{fragment}", server.tls_port().unwrap())
}

/// A check through `store` is decided by Redis.
async fn decides(store: &RedisStore) {
    let limit = Limit::new("tls", SlidingLog::new(3, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap());
    let now = Timestamp::from_micros(1_763_700_000_000_000);
    let verdict =
        store.check(Check::new(Key::new(b"alice").unwrap(), std::slice::from_ref(&limit), now, 1)).await.unwrap();
    assert_eq!((verdict.source, verdict.decision.remaining), (Source::Store, 2));
}

/// The error's sources, joined.
fn causes(error: &sluice_core::StoreError) -> String {
    std::iter::successors(std::error::Error::source(error), |cause| cause.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

#[tokio::test]
async fn a_ca_file_verifies_redis_and_a_wrong_one_is_refused_naming_the_cause() {
    let certs = Certificates::make();
    let server = RedisServer::start_tls(&certs.dir, "no");
    let trusted = TlsFiles { ca_file: Some(certs.path("ca.pem")), ..TlsFiles::default() };
    decides(&RedisStore::connect(&url(&server, ""), settings(trusted)).await.unwrap()).await;
    let other = TlsFiles { ca_file: Some(certs.path("other-ca.pem")), ..TlsFiles::default() };
    let error = RedisStore::connect(&url(&server, ""), settings(other)).await.unwrap_err();
    assert!(causes(&error).contains("is not signed by a CA Sluice trusts"), "{}", causes(&error));
    assert!(causes(&error).contains("--redis-ca-file"), "the fix names the flag: {}", causes(&error));
    let missing = TlsFiles { ca_file: Some(certs.path("missing.pem")), ..TlsFiles::default() };
    let error = RedisStore::connect(&url(&server, ""), settings(missing)).await.unwrap_err();
    assert!(error.to_string().contains("the Redis CA file") && error.to_string().contains("cannot be read"), "{error}");
}

/// Issue 36.1: a certificate made the usual way (`openssl req -x509`) is a self-signed CA
/// certificate; given as the CA file, it is trusted as `redis-cli --cacert` trusts it.
#[tokio::test]
async fn a_self_signed_certificate_given_as_the_ca_file_is_accepted() {
    let certs = Certificates::self_signed_by_openssl();
    let server = RedisServer::start_tls(&certs.dir, "no");
    let pinned = TlsFiles { ca_file: Some(certs.path("ca.pem")), ..TlsFiles::default() };
    decides(&RedisStore::connect(&url(&server, ""), settings(pinned)).await.unwrap()).await;
    // Not given: refused, saying which certificate to give.
    let other = TlsFiles { ca_file: Some(certs.path("other-ca.pem")), ..TlsFiles::default() };
    let error = RedisStore::connect(&url(&server, ""), settings(other)).await.unwrap_err();
    assert!(causes(&error).contains("self-signed CA certificate that Sluice was not given"), "{}", causes(&error));
    assert!(causes(&error).contains("--redis-ca-file"), "{}", causes(&error));
}

/// A pinned self-signed certificate must still be within its validity period.
#[tokio::test]
async fn an_expired_self_signed_certificate_is_refused_even_when_given() {
    let certs = Certificates::self_signed_expired();
    let server = RedisServer::start_tls(&certs.dir, "no");
    let pinned = TlsFiles { ca_file: Some(certs.path("ca.pem")), ..TlsFiles::default() };
    let error = RedisStore::connect(&url(&server, ""), settings(pinned)).await.unwrap_err();
    assert!(causes(&error).contains("has expired"), "{}", causes(&error));
}

/// A CA file with no certificate in it is an error when the store opens, not a silent
/// trust in nothing (issue 36.1).
#[tokio::test]
async fn a_ca_file_without_a_certificate_is_refused_when_the_store_opens() {
    let certs = Certificates::make();
    std::fs::write(certs.path("empty.pem"), "# no certificate here\n").unwrap();
    let empty = TlsFiles { ca_file: Some(certs.path("empty.pem")), ..TlsFiles::default() };
    let error = RedisStore::open("rediss://127.0.0.1:1/", settings(empty)).await.unwrap_err();
    assert!(error.to_string().contains("holds no certificate"), "{error}");
    assert!(
        sluice_redis::check_certificate_file(&certs.path("empty.pem")).unwrap_err().contains("holds no certificate")
    );
    assert_eq!(sluice_redis::check_certificate_file(&certs.path("ca.pem")), Ok(()));
}

#[tokio::test]
async fn the_insecure_fragment_skips_verification() {
    let certs = Certificates::make();
    let server = RedisServer::start_tls(&certs.dir, "no");
    decides(&RedisStore::connect(&url(&server, "#insecure"), settings(TlsFiles::default())).await.unwrap()).await;
}

#[tokio::test]
async fn a_redis_that_verifies_clients_takes_a_client_certificate() {
    let certs = Certificates::make();
    let server = RedisServer::start_tls(&certs.dir, "yes");
    let without = TlsFiles { ca_file: Some(certs.path("ca.pem")), ..TlsFiles::default() };
    assert!(RedisStore::connect(&url(&server, ""), settings(without)).await.is_err(), "no client certificate");
    let with = TlsFiles {
        ca_file: Some(certs.path("ca.pem")),
        client_cert: Some(certs.path("client.pem")),
        client_key: Some(certs.path("client-key.pem")),
    };
    decides(&RedisStore::connect(&url(&server, ""), settings(with)).await.unwrap()).await;
    let half = TlsFiles { client_cert: Some(certs.path("client.pem")), ..TlsFiles::default() };
    let error = RedisStore::connect(&url(&server, ""), settings(half)).await.unwrap_err();
    assert!(error.to_string().contains("set both"), "{error}");
}

/// Issue 35.6: while a `rediss://` Redis is down (here a port that accepts and closes each
/// connection at once), the store tries one connection per probe interval (100 ms), not
/// several: the 1st and the 6th attempts are at least 500 ms apart.
#[tokio::test]
async fn an_outage_costs_one_connection_attempt_per_probe_interval() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sender, attempts) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
            if sender.send(std::time::Instant::now()).is_err() {
                return;
            }
        }
    });
    let certs = Certificates::make();
    let trusted = TlsFiles { ca_file: Some(certs.path("ca.pem")), ..TlsFiles::default() };
    let store = RedisStore::open(&format!("rediss://127.0.0.1:{port}/"), settings(trusted)).await.unwrap();
    let at: Vec<std::time::Instant> = tokio::task::spawn_blocking(move || {
        (0..6).map(|_| attempts.recv_timeout(Duration::from_secs(10)).unwrap()).collect()
    })
    .await
    .unwrap();
    assert!(!store.health().is_available());
    assert!(at[5] - at[0] >= Duration::from_millis(500), "6 attempts in {:?}", at[5] - at[0]);
}

/// The CA file is read once, when the store opens: connections made later do not read it
/// again (deleting it changes nothing).
#[tokio::test]
async fn trust_roots_are_read_once_when_the_store_opens() {
    let certs = Certificates::make();
    let server = RedisServer::start_tls(&certs.dir, "no");
    let copy = certs.path("ca-copy.pem");
    std::fs::copy(certs.path("ca.pem"), &copy).unwrap();
    let files = TlsFiles { ca_file: Some(copy.clone()), ..TlsFiles::default() };
    let store = RedisStore::open(&url(&server, ""), settings(files)).await.unwrap();
    std::fs::remove_file(&copy).unwrap();
    decides(&store).await;
    // Another connection, made after the file is gone.
    let again = store.connect_again().await.unwrap();
    let limit = Limit::new("tls", SlidingLog::new(3, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap());
    let now = Timestamp::from_micros(1_763_700_000_000_000);
    let verdict =
        again.check(Check::new(Key::new(b"bob").unwrap(), std::slice::from_ref(&limit), now, 1)).await.unwrap();
    assert_eq!(verdict.source, Source::Store);
}
