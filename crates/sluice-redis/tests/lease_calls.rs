//! What a `LeasedStore` in front of the Redis store counts as a store call: the checks Redis
//! ran, not the answers of the store's blocked-key cache, which are counted apart
//! (issue 42: `sluice_lease_store_calls_total` read 388 587 on a server while Redis saw 86).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::lease::LeasedStore;
use sluice_core::{Alignment, Check, FixedWindow, Key, Limit, Source, Store, Timestamp};
use sluice_redis::RedisStore;
use sluice_test_support::compare::settings as injected_time;
use sluice_test_support::redis::RedisServer;
use std::time::Duration;

/// A whole minute (µs), so that an aligned window of a minute starts here.
const NOW: u64 = 1_763_700_000_000_000;

async fn command(server: &RedisServer, args: &[&str]) -> redis::Value {
    let client = redis::Client::open(server.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd(args[0]).arg(&args[1..]).query_async(&mut connection).await.unwrap()
}

/// The checks Redis has run since the last `CONFIG RESETSTAT`: calls of the scripts (or of
/// the module's command) that did not fail (a script Redis did not hold yet fails once with
/// `NOSCRIPT`, then is loaded and run).
async fn checks_run_by_redis(server: &RedisServer) -> u64 {
    let redis::Value::BulkString(info) = command(server, &["INFO", "commandstats"]).await else {
        panic!("INFO did not answer a string");
    };
    let info = String::from_utf8(info).unwrap();
    let field = |command: &str, name: &str| -> u64 {
        let line = info.lines().find(|line| line.starts_with(&format!("cmdstat_{command}:")));
        let value = line.and_then(|line| line.split(&format!("{name}=")).nth(1)?.split(',').next()?.parse().ok());
        value.unwrap_or(0)
    };
    ["evalsha", "eval", "sluice.check"]
        .iter()
        .map(|command| field(command, "calls") - field(command, "failed_calls"))
        .sum()
}

#[tokio::test]
async fn store_calls_count_what_redis_ran_and_cache_answers_apart() {
    let server = RedisServer::start();
    let redis = RedisStore::connect(&server.url(), injected_time()).await.unwrap();
    let leased = LeasedStore::new(redis, Duration::from_millis(100));
    let window = FixedWindow::new(1, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO).unwrap();
    let limits = [Limit::new("once_a_minute", window)];
    let key = Key::new(b"tenant").unwrap();
    command(&server, &["CONFIG", "RESETSTAT"]).await;
    let mut sources = Vec::new();
    // One request a second for a minute and one more: the first is allowed, the second
    // rejected until the window ends, the next 58 answered by the blocked-key cache, and
    // the one at the window's end allowed by Redis again.
    for second in 0..=60 {
        let check = Check::new(key, &limits, Timestamp::from_micros(NOW + second * 1_000_000), 1);
        sources.push(leased.check(check).await.unwrap().source);
    }
    let cached = sources.iter().filter(|source| **source == Source::Cache).count();
    assert_eq!(cached, 58, "{sources:?}");
    let figures = leased.figures();
    assert_eq!(figures.store_calls, checks_run_by_redis(&server).await, "{figures:?}");
    assert_eq!(figures.store_calls, 3, "{figures:?}");
    assert_eq!(figures.cache_answers, 58, "{figures:?}");
    assert_eq!(figures.leased_checks, 0, "a limit of 1 is never leased: {figures:?}");
}
