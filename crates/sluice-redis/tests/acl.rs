//! An ACL user allowed only what Sluice needs (the minimal ACL of `docs/redis.md`): every
//! algorithm, several limits at once, a reset and the outage probe work through it, on a
//! real redis-server; a wrong password, or an ACL that denies what Sluice needs, is an
//! error at connect that says so.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{
    Alignment, Check, FixedWindow, Key, LeakMode, LeakyBucket, Limit, SlidingLog, SlidingLogVariant, SlidingWindow,
    Source, Store, Timestamp, TokenBucket, TokenBucketSettings,
};
use sluice_redis::{RedisSettings, RedisStore};
use sluice_test_support::redis::{RedisServer, query};
use std::time::Duration;

/// The ACL `docs/redis.md` gives, for the default `sluice:` prefix.
const MINIMAL_ACL: &str = "ACL SETUSER sluice on >s3cret resetkeys ~sluice:* resetchannels -@all \
    +evalsha +script|load +ping +hello \
    +get +set +getrange +setrange +pexpire +time +del";

fn every_algorithm() -> Vec<Limit> {
    let second = Duration::from_secs(1);
    let bucket = TokenBucketSettings { capacity: 3, refill_amount: 1, refill_interval: second };
    vec![
        Limit::new("log", SlidingLog::new(3, second, SlidingLogVariant::Accepted).unwrap()),
        Limit::new("big_log", SlidingLog::new(100, second, SlidingLogVariant::Attempts).unwrap()),
        Limit::new("window", FixedWindow::new(3, second, Alignment::Aligned, Duration::ZERO).unwrap()),
        Limit::new("counter", SlidingWindow::new(3, second, 4).unwrap()),
        Limit::new("bucket", TokenBucket::new(bucket).unwrap()),
        Limit::new("gcra", LeakyBucket::new(Duration::from_millis(100), 2, LeakMode::NoDelay).unwrap()),
    ]
}

#[tokio::test]
async fn a_user_with_the_minimal_acl_can_do_everything_sluice_does() {
    let server = RedisServer::start();
    assert_eq!(query(server.port(), &[MINIMAL_ACL]).unwrap(), ["+OK"]);
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let store = RedisStore::connect(&url, RedisSettings::injected_time()).await.unwrap();
    assert!(store.probe().await, "the outage probe (SET of sluice:probe, TIME)");
    let limits = every_algorithm();
    let key = Key::new(b"alice").unwrap();
    let now = Timestamp::from_micros(1_763_700_000_000_000);
    for limit in &limits {
        let verdict = store.check(Check::new(key, std::slice::from_ref(limit), now, 1)).await.unwrap();
        assert_eq!((verdict.source, verdict.decision.allowed), (Source::Store, true), "{}", limit.name());
    }
    let together = store.check(Check::new(key, &limits, now, 1)).await.unwrap();
    assert_eq!(together.source, Source::Store);
    store.reset(key, &limits).await.unwrap();
    let keys = query(server.port(), &["DBSIZE"]).unwrap();
    assert_eq!(keys, [":1"], "after the reset only the probe's key is left");
}

#[tokio::test]
async fn a_user_denied_what_sluice_needs_is_refused_at_connect_with_the_reason() {
    let server = RedisServer::start();
    let without_time = MINIMAL_ACL.replace(" +time", "");
    assert_eq!(query(server.port(), &[&without_time]).unwrap(), ["+OK"]);
    let url = format!("redis://sluice:s3cret@127.0.0.1:{}/", server.port());
    let causes = |error: &sluice_core::StoreError| {
        std::iter::successors(std::error::Error::source(error), |cause| cause.source())
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(": ")
    };
    let denied = RedisStore::connect(&url, RedisSettings::injected_time()).await.unwrap_err();
    assert!(causes(&denied).contains("can't run this command"), "{}", causes(&denied));
    let wrong = format!("redis://sluice:wrong@127.0.0.1:{}/", server.port());
    let error = RedisStore::connect(&wrong, RedisSettings::injected_time()).await.unwrap_err();
    assert!(causes(&error).contains("WRONGPASS"), "{}", causes(&error));
}
