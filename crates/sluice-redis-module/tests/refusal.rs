//! An ACL user that may not run the module's `SLUICE.CHECK` is a configuration Redis
//! refuses (issue 35.5), not an outage: `verify_configuration` names it before a server
//! starts, and one met later is reported until the ACL allows the command again.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::{Check, FixedWindow, Key, Limit, Source, Store, Timestamp};
use sluice_redis::{ModuleUse, RedisSettings, RedisStore};
use sluice_test_support::redis::query;
use std::time::Duration;

/// The minimal ACL of `docs/redis.md`, and `COMMAND INFO` (module detection), without
/// `SLUICE.CHECK`.
const ACL: &str = "ACL SETUSER sluice on >s3cret resetkeys ~sluice:* resetchannels -@all \
    +evalsha +script|load +ping +hello +get +set +getrange +setrange +pexpire +time +del +command|info";

async fn check(store: &RedisStore) -> Source {
    let window = FixedWindow::new(1000, Duration::from_secs(3600), Default::default(), Duration::ZERO).unwrap();
    let now = Timestamp::from_micros(1_763_700_000_000_000);
    store.check(Check::new(Key::new(b"u").unwrap(), &[Limit::new("w", window)], now, 1)).await.unwrap().source
}

#[tokio::test]
async fn an_acl_without_the_module_command_is_refused_at_start_and_later() {
    let server = harness::start();
    assert_eq!(query(server.port(), &[ACL]).unwrap(), ["+OK"]);
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let settings =
        RedisSettings { module: ModuleUse::Detect, timeout: Duration::from_secs(2), ..RedisSettings::injected_time() };
    let store = RedisStore::open(&url, settings.clone()).await.unwrap();
    let refused = store.verify_configuration().await.unwrap_err().to_string();
    assert!(refused.contains("ACL denies") && refused.to_lowercase().contains("sluice.check"), "{refused}");

    assert_eq!(query(server.port(), &["ACL SETUSER sluice +sluice.check"]).unwrap(), ["+OK"]);
    let store = RedisStore::open(&url, settings).await.unwrap();
    assert_eq!(store.verify_configuration().await, Ok(()));
    assert!(store.uses_module());
    assert_eq!(check(&store).await, Source::Store);
    assert_eq!(query(server.port(), &["ACL SETUSER sluice -sluice.check"]).unwrap(), ["+OK"]);
    for _ in 0..500 {
        if store.refusal().is_some() {
            break;
        }
        assert_ne!(check(&store).await, Source::Store);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(store.refusal().is_some_and(|refused| refused.to_string().contains("ACL denies")));
    assert_eq!(query(server.port(), &["ACL SETUSER sluice +sluice.check"]).unwrap(), ["+OK"]);
    for _ in 0..500 {
        if check(&store).await == Source::Store {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!((store.refusal(), check(&store).await), (None, Source::Store));
}
