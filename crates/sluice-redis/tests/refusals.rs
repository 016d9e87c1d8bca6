//! A configuration Redis refuses is not an outage (issue 35.5): at start,
//! `verify_configuration` names the cause and the fix; met later (an ACL changed, a
//! password rotated), the store reports it (`refusal`, `health().refused`), counts it, and
//! ends it when Redis takes the configuration again. Checks meanwhile follow the failure
//! mode. Real redis-server, ACL changed at run time.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{Check, Key, Limit, SlidingLog, SlidingLogVariant, Source, Store, Timestamp};
use sluice_redis::{RedisSettings, RedisStore};
use sluice_test_support::redis::{RedisServer, query};
use std::time::Duration;

const ACL: &str = "ACL SETUSER sluice on >s3cret resetkeys ~sluice:* resetchannels -@all \
    +evalsha +script|load +ping +hello +get +set +getrange +setrange +pexpire +time +del";

fn settings() -> RedisSettings {
    RedisSettings { timeout: Duration::from_secs(1), ..RedisSettings::injected_time() }
}

fn server_with_user() -> RedisServer {
    let server = RedisServer::start();
    assert_eq!(query(server.port(), &[ACL]).unwrap(), ["+OK"]);
    server
}

async fn check(store: &RedisStore) -> Source {
    let limit = Limit::new("r", SlidingLog::new(1000, Duration::from_secs(1), SlidingLogVariant::Accepted).unwrap());
    let now = Timestamp::from_micros(1_763_700_000_000_000);
    store.check(Check::new(Key::new(b"alice").unwrap(), std::slice::from_ref(&limit), now, 1)).await.unwrap().source
}

/// Checks until `done` holds (each check also drives the store's probe), for at most 10 s.
async fn until(store: &RedisStore, done: impl Fn(&RedisStore) -> bool) {
    for _ in 0..1000 {
        if done(store) {
            return;
        }
        check(store).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not reached within 10 s: {:?}, {:?}", store.health(), store.refusal());
}

#[tokio::test]
async fn a_wrong_password_or_a_missing_command_is_refused_at_start_with_the_fix() {
    let server = server_with_user();
    let wrong = format!("redis://sluice:wrong@127.0.0.1:{}/", server.port());
    let store = RedisStore::open(&wrong, settings()).await.unwrap();
    let refused = store.verify_configuration().await.unwrap_err().to_string();
    assert!(refused.contains("user or password") && refused.contains("WRONGPASS"), "{refused}");
    assert_eq!(query(server.port(), &["ACL SETUSER sluice -evalsha"]).unwrap(), ["+OK"]);
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let store = RedisStore::open(&url, settings()).await.unwrap();
    let refused = store.verify_configuration().await.unwrap_err().to_string();
    assert!(refused.contains("ACL denies") && refused.contains("evalsha"), "{refused}");
    // An outage is not a refusal: the store starts in it.
    let mut down = RedisServer::start();
    let url = down.url();
    down.kill();
    assert_eq!(RedisStore::open(&url, settings()).await.unwrap().verify_configuration().await, Ok(()));
}

#[tokio::test]
async fn an_acl_changed_at_run_time_is_reported_until_it_is_mended() {
    let server = server_with_user();
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let store = RedisStore::connect(&url, settings()).await.unwrap();
    assert_eq!(check(&store).await, Source::Store);
    assert_eq!(query(server.port(), &["ACL SETUSER sluice -evalsha"]).unwrap(), ["+OK"]);
    until(&store, |store| store.refusal().is_some()).await;
    let health = store.health();
    assert!(health.refused && health.refusals > 0, "{health:?}");
    assert!(store.refusal().unwrap().to_string().contains("evalsha"), "{:?}", store.refusal());
    assert_eq!(check(&store).await, Source::FailedOpen, "the failure mode answers meanwhile");
    assert_eq!(query(server.port(), &["ACL SETUSER sluice +evalsha"]).unwrap(), ["+OK"]);
    until(&store, |store| store.refusal().is_none() && store.health().is_available()).await;
    assert_eq!(check(&store).await, Source::Store);
}

#[tokio::test]
async fn a_password_rotated_at_run_time_is_reported_until_it_is_mended() {
    let server = server_with_user();
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let store = RedisStore::connect(&url, settings()).await.unwrap();
    assert_eq!(check(&store).await, Source::Store);
    // The password changes, and the open connections are closed, as a rotation does.
    let rotate = ["ACL SETUSER sluice resetpass >rotated", "CLIENT KILL USER sluice"];
    assert_eq!(query(server.port(), &rotate).unwrap()[0], "+OK");
    until(&store, |store| store.refusal().is_some()).await;
    assert!(store.refusal().unwrap().to_string().contains("WRONGPASS"), "{:?}", store.refusal());
    assert_eq!(query(server.port(), &["ACL SETUSER sluice >s3cret"]).unwrap(), ["+OK"]);
    until(&store, |store| store.refusal().is_none() && store.health().is_available()).await;
    assert_eq!(check(&store).await, Source::Store);
}

/// A primary name no sentinel monitors is a refusal; a known one, or sentinels that cannot
/// be reached, are not.
#[tokio::test]
async fn a_primary_name_no_sentinel_knows_is_refused() {
    let primary = RedisServer::start();
    let sentinel = RedisServer::start_sentinel(primary.port(), "known");
    let sentinels = [sentinel.url()];
    assert_eq!(sluice_redis::verify_primary_name(&sentinels, "known").await, Ok(()));
    let refused = sluice_redis::verify_primary_name(&sentinels, "mistyped").await.unwrap_err().to_string();
    assert!(refused.contains("know no primary named `mistyped`"), "{refused}");
    let mut gone = RedisServer::start();
    let unreachable = [gone.url()];
    gone.kill();
    assert_eq!(sluice_redis::verify_primary_name(&unreachable, "mistyped").await, Ok(()));
}

/// A command only some scripts run (`GETRANGE`, the long sliding log's) denied at run time:
/// the probe still passes, so only a check Redis decides ends the refusal.
#[tokio::test]
async fn a_command_only_some_checks_run_is_reported_until_a_check_succeeds() {
    let server = server_with_user();
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let store = RedisStore::connect(&url, settings()).await.unwrap();
    assert_eq!(check(&store).await, Source::Store);
    assert_eq!(query(server.port(), &["ACL SETUSER sluice -getrange"]).unwrap(), ["+OK"]);
    until(&store, |store| store.refusal().is_some()).await;
    assert!(store.refusal().unwrap().to_string().contains("ACL denies"), "{:?}", store.refusal());
    assert_eq!(query(server.port(), &["ACL SETUSER sluice +getrange"]).unwrap(), ["+OK"]);
    until(&store, |store| store.refusal().is_none()).await;
    assert_eq!(check(&store).await, Source::Store);
}
