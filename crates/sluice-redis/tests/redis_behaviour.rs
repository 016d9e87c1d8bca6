//! What the Redis store does that the textbook sorted-set script gets wrong, and what only a
//! real Redis can show: TTLs, Redis TIME, memory per logged request.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{
    Alignment, Check, EXACT_LIMIT, FixedWindow, Key, LeakMode, LeakyBucket, Limit, ManualClock, MemoryStore,
    RetryAfter, SlidingLog, SlidingLogVariant, SlidingWindow, Store, StoreError, Timestamp, TokenBucket,
    TokenBucketSettings, Verdict,
};
use sluice_redis::{RedisSettings, RedisStore, TimeSource};
use std::time::{Duration, Instant, SystemTime};
// Injected time with a timeout for tests (5 s), not the request path's 50 ms: on a debug
// build on a loaded machine, a check can take longer, and would fail open by chance.
use sluice_test_support::compare::settings as injected_time;
use sluice_test_support::redis::RedisServer;

const NOW: u64 = 1_763_700_000_000_000;

async fn store(server: &RedisServer, settings: RedisSettings) -> RedisStore {
    RedisStore::connect(&server.url(), settings).await.unwrap()
}

async fn check(store: &RedisStore, limit: &Limit, key: &str, at: u64, cost: u64) -> Verdict {
    let key = Key::new(key.as_bytes()).unwrap();
    store.check(Check::new(key, std::slice::from_ref(limit), Timestamp::from_micros(at), cost)).await.unwrap()
}

async fn raw(server: &RedisServer, args: &[&str]) -> redis::Value {
    let client = redis::Client::open(server.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query_async(&mut connection).await.unwrap()
}

async fn integer(server: &RedisServer, args: &[&str]) -> i64 {
    match raw(server, args).await {
        redis::Value::Int(value) => value,
        other => panic!("{args:?} answered {other:?}"),
    }
}

fn log_limit(n: u64, window: Duration) -> Limit {
    Limit::new("log", SlidingLog::new(n, window, SlidingLogVariant::Accepted).unwrap())
}

/// The Redis key of `limit` for a plain key (no braces to escape).
fn key_name(prefix: &str, key: &str, limit: &Limit) -> String {
    format!("{prefix}{{{key}}}:{}", limit.id())
}

#[tokio::test]
async fn requests_in_the_same_millisecond_all_count() {
    // The textbook's `ZADD key now now` (milliseconds) collapses these into one member.
    let server = RedisServer::start();
    let store = store(&server, injected_time()).await;
    let limit = log_limit(2, Duration::from_secs(1));
    assert!(check(&store, &limit, "k", NOW, 1).await.decision.allowed);
    assert!(check(&store, &limit, "k", NOW + 300, 1).await.decision.allowed);
    let third = check(&store, &limit, "k", NOW + 300, 1).await.decision;
    assert!(!third.allowed, "a third request in the same millisecond must be rejected");
    assert_eq!(third.retry_after_micros(), Some(1_000_000 - 300));
}

/// How many milliseconds a TTL may have counted down while `took` went by: Redis counts
/// on its real clock, in whole milliseconds.
fn counted_down(took: Duration) -> i64 {
    i64::try_from(took.as_millis()).unwrap() + 1
}

#[tokio::test]
async fn a_sub_second_window_keeps_its_key_with_a_ttl() {
    // The textbook's `EXPIRE key window/1000` is `EXPIRE key 0` for 500 ms: the key vanishes.
    let server = RedisServer::start();
    let settings = RedisSettings { min_ttl: Duration::from_millis(1), ..injected_time() };
    let store = store(&server, settings.clone()).await;
    let limit = log_limit(1, Duration::from_millis(500));
    // The key's 500 ms run on Redis's real clock: an attempt that took 400 ms or more (a
    // loaded machine) cannot tell a vanished key from an expired one, and is made again.
    for attempt in 0..20 {
        let key = format!("k{attempt}");
        let started = Instant::now();
        assert!(check(&store, &limit, &key, NOW, 1).await.decision.allowed);
        let ttl = integer(&server, &["PTTL", &key_name(&settings.key_prefix, &key, &limit)]).await;
        let again = check(&store, &limit, &key, NOW + 100_000, 1).await.decision;
        let took = started.elapsed();
        if took < Duration::from_millis(400) {
            let covered = 500 - counted_down(took)..=500;
            assert!(covered.contains(&ttl), "TTL {ttl} ms should cover the 500 ms window ({took:?} later)");
            assert!(!again.allowed);
            return;
        }
    }
    panic!("no attempt took less than 400 ms");
}

#[tokio::test]
async fn ttls_cover_the_window_plus_the_allowed_clock_skew() {
    let server = RedisServer::start();
    let skew = Duration::from_secs(2);
    let settings = RedisSettings {
        time: TimeSource::Application { max_skew: skew },
        min_ttl: Duration::from_millis(1),
        ..injected_time()
    };
    let store = store(&server, settings.clone()).await;
    // Each state is fresh again 4 s after a cost-4 request; its key lives 4 s plus the 2 s
    // of skew. One limit of each algorithm whose script writes its own TTL.
    let second = Duration::from_secs(1);
    let limits = [
        Limit::new(
            "bucket",
            TokenBucket::new(TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: second }).unwrap(),
        ),
        Limit::new("gcra", LeakyBucket::new(second, 9, LeakMode::NoDelay).unwrap()),
        Limit::new("window", FixedWindow::new(10, 4 * second, Alignment::Anchored, Duration::ZERO).unwrap()),
        log_limit(10, 4 * second),
    ];
    for limit in &limits {
        let started = Instant::now();
        check(&store, limit, "k", NOW, 4).await;
        let ttl = integer(&server, &["PTTL", &key_name(&settings.key_prefix, "k", limit)]).await;
        let took = started.elapsed();
        let covered = 6_000 - counted_down(took)..=6_000;
        assert!(covered.contains(&ttl), "{}: TTL {ttl} ms ({took:?} later)", limit.name());
    }
    // Rejections and peeks do not write, so they do not extend the TTL either.
    let peek = check(&store, &limits[0], "k", NOW, 0).await.decision;
    assert_eq!(peek.remaining, 6);
}

#[tokio::test]
async fn redis_time_is_one_clock_for_every_server() {
    // Two application servers whose clocks disagree by an hour share Redis's timeline.
    let server = RedisServer::start();
    let settings = RedisSettings { timeout: Duration::from_secs(1), ..RedisSettings::default() };
    let store = store(&server, settings).await;
    let limit = log_limit(1, Duration::from_secs(60));
    let wall = Timestamp::from_system_time(SystemTime::now()).as_micros();
    assert!(check(&store, &limit, "k", wall, 1).await.decision.allowed);
    let skewed = check(&store, &limit, "k", wall - 3_600_000_000, 1).await.decision;
    assert!(!skewed.allowed);
    let retry = skewed.retry_after_micros().unwrap();
    assert!((59_000_000..=60_000_000).contains(&retry), "retry {retry} µs from Redis's own clock");
}

#[tokio::test]
async fn a_full_log_costs_about_8_bytes_per_request() {
    let server = RedisServer::start();
    let settings = injected_time();
    let store = store(&server, settings.clone()).await;
    let n = 1_000;
    let limit = log_limit(n, Duration::from_secs(3600));
    for i in 0..n {
        assert!(check(&store, &limit, "k", NOW + i, 1).await.decision.allowed);
    }
    let name = key_name(&settings.key_prefix, "k", &limit);
    let bytes = integer(&server, &["MEMORY", "USAGE", &name, "SAMPLES", "0"]).await;
    let per_request = bytes as f64 / n as f64;
    // The textbook sorted set costs about 104 bytes per logged request.
    assert!(per_request <= 10.4, "{bytes} bytes for {n} requests: {per_request:.1} per request");
    // Once full, the ring overwrites in place: the string does not grow.
    for i in 0..n {
        check(&store, &limit, "k", NOW + 3_600_000_000 + i, 1).await;
    }
    assert_eq!(integer(&server, &["MEMORY", "USAGE", &name, "SAMPLES", "0"]).await, bytes);
}

/// Script calls Redis has run since the last `CONFIG RESETSTAT`.
async fn script_calls(server: &RedisServer) -> u64 {
    let redis::Value::BulkString(info) = raw(server, &["INFO", "commandstats"]).await else {
        panic!("INFO did not answer a string");
    };
    let info = String::from_utf8(info).unwrap();
    let calls = |command: &str| -> u64 {
        let line = info.lines().find(|line| line.starts_with(&format!("cmdstat_{command}:")));
        line.and_then(|line| line.split("calls=").nth(1)?.split(',').next()?.parse().ok()).unwrap_or(0)
    };
    calls("evalsha") + calls("eval")
}

#[tokio::test]
async fn a_blocked_key_is_answered_locally_until_its_retry_time() {
    let server = RedisServer::start();
    let store = store(&server, injected_time()).await;
    let limit = log_limit(1, Duration::from_secs(60));
    assert!(check(&store, &limit, "k", NOW, 1).await.decision.allowed);
    let rejected = check(&store, &limit, "k", NOW + 1_000_000, 1).await;
    assert_eq!(rejected.source, sluice_core::Source::Store);
    raw(&server, &["CONFIG", "RESETSTAT"]).await;
    for second in 2..60 {
        let verdict = check(&store, &limit, "k", NOW + second * 1_000_000, 1).await;
        assert_eq!(verdict.source, sluice_core::Source::Cache);
        assert_eq!(verdict.decision.retry_after_micros(), Some((60 - second) * 1_000_000));
    }
    assert_eq!(script_calls(&server).await, 0, "no round trip while the key is blocked");
    // At the retry time Redis is asked again, and allows.
    let allowed = check(&store, &limit, "k", NOW + 60_000_000, 1).await;
    assert_eq!((allowed.source, allowed.decision.allowed), (sluice_core::Source::Store, true));
    assert_eq!(script_calls(&server).await, 1);
}

#[tokio::test]
async fn attempts_are_never_answered_from_the_cache() {
    // Every attempt changes an `attempts` log, so each one must reach Redis.
    let server = RedisServer::start();
    let store = store(&server, injected_time()).await;
    let limit = Limit::new("login", SlidingLog::new(1, Duration::from_secs(60), SlidingLogVariant::Attempts).unwrap());
    for second in 0..5 {
        let verdict = check(&store, &limit, "k", NOW + second * 1_000_000, 1).await;
        assert_eq!(verdict.source, sluice_core::Source::Store);
    }
    let last = check(&store, &limit, "k", NOW + 5_000_000, 0).await.decision;
    assert_eq!(last.retry_after_micros(), Some(59_000_000), "the attempt at 4 s is in the log");
}

#[tokio::test]
async fn a_large_log_holds_memory_for_its_window_not_for_its_history() {
    // 1 000 per second allowed (a log read slot by slot), requests every 10 ms: about 100
    // are ever in the window, so the ring stays near 128 slots instead of growing to 1 000.
    let server = RedisServer::start();
    let settings = injected_time();
    let store = store(&server, settings.clone()).await;
    let limit = log_limit(1_000, Duration::from_secs(1));
    for i in 0..3_000 {
        assert!(check(&store, &limit, "k", NOW + i * 10_000, 1).await.decision.allowed);
    }
    let name = key_name(&settings.key_prefix, "k", &limit);
    let length = integer(&server, &["STRLEN", &name]).await;
    assert!(length <= 16 + 8 * 256, "{length} bytes of log for about 100 entries in the window");
}

#[tokio::test]
async fn under_redis_time_the_cache_ages_its_answer_by_the_callers_clock() {
    let server = RedisServer::start();
    let settings = RedisSettings { timeout: Duration::from_secs(1), ..RedisSettings::default() };
    let store = store(&server, settings).await;
    let limit = log_limit(1, Duration::from_secs(60));
    // Redis TIME decides; the `now` passed (the limiter's clock) counts the time since.
    assert!(check(&store, &limit, "k", NOW, 1).await.decision.allowed);
    let rejected = check(&store, &limit, "k", NOW, 1).await;
    assert_eq!(rejected.source, sluice_core::Source::Store);
    let first_wait = rejected.decision.retry_after_micros().unwrap();
    let cached = check(&store, &limit, "k", NOW + 20_000, 1).await;
    assert_eq!(cached.source, sluice_core::Source::Cache);
    assert_eq!(cached.decision.retry_after_micros(), Some(first_wait - 20_000), "aged by the 20 ms passed");
    let later = check(&store, &limit, "k", NOW + first_wait, 1).await;
    assert_eq!(later.source, sluice_core::Source::Store, "the caller's clock says the wait is over: Redis decides");
}

async fn reset(store: &RedisStore, limits: &[Limit], key: &str) {
    store.reset(Key::new(key.as_bytes()).unwrap(), limits).await.unwrap();
}

#[tokio::test]
async fn a_reset_key_starts_fresh_and_other_keys_keep_their_state() {
    let server = RedisServer::start();
    let settings = injected_time();
    let store = store(&server, settings.clone()).await;
    let log = log_limit(1, Duration::from_secs(60));
    let bucket = TokenBucketSettings { capacity: 1, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap());
    for key in ["k", "other"] {
        for limit in [&log, &bucket] {
            assert!(check(&store, limit, key, NOW, 1).await.decision.allowed);
        }
    }
    reset(&store, std::slice::from_ref(&log), "k").await;
    assert_eq!(integer(&server, &["EXISTS", &key_name(&settings.key_prefix, "k", &log)]).await, 0);
    assert!(check(&store, &log, "k", NOW + 1, 1).await.decision.allowed, "the reset limit starts fresh");
    assert!(!check(&store, &bucket, "k", NOW + 1, 1).await.decision.allowed, "a limit not named is kept");
    assert!(!check(&store, &log, "other", NOW + 1, 1).await.decision.allowed, "another key is kept");
    // Both limits in one DEL; a key holding nothing is no error.
    reset(&store, &[log.clone(), bucket.clone()], "k").await;
    assert!(check(&store, &bucket, "k", NOW + 2, 1).await.decision.allowed);
    reset(&store, &[log, bucket], "never-seen").await;
}

#[tokio::test]
async fn a_reset_key_is_asked_of_redis_again_not_of_the_blocked_cache() {
    let server = RedisServer::start();
    let store = store(&server, injected_time()).await;
    let log = log_limit(1, Duration::from_secs(60));
    let bucket = TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval: Duration::from_secs(60) };
    let bucket = Limit::new("bucket", TokenBucket::new(bucket).unwrap());
    let both = [log.clone(), bucket];
    let key = Key::new(b"k").unwrap();
    let at = |offset: u64| Timestamp::from_micros(NOW + offset);
    assert!(check(&store, &log, "k", NOW, 1).await.decision.allowed);
    // Cached twice: for the log alone and for both limits together.
    for limits in [std::slice::from_ref(&log), &both[..]] {
        store.check(Check::new(key, limits, at(1), 1)).await.unwrap();
        assert_eq!(store.check(Check::new(key, limits, at(2), 1)).await.unwrap().source, sluice_core::Source::Cache);
    }
    reset(&store, std::slice::from_ref(&log), "k").await;
    for limits in [std::slice::from_ref(&log), &both[..]] {
        let verdict = store.check(Check::new(key, limits, at(3), 0)).await.unwrap();
        assert_eq!((verdict.source, verdict.decision.allowed), (sluice_core::Source::Store, true), "{limits:?}");
    }
}

#[test]
fn a_store_connected_again_on_another_runtime_shares_state_and_blocked_cache() {
    let server = RedisServer::start();
    let limit = log_limit(2, Duration::from_secs(60));
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let main = runtime();
    let first = main.block_on(store(&server, injected_time()));
    let verdict = main.block_on(check(&first, &limit, "k", NOW, 1));
    assert_eq!((verdict.decision.allowed, verdict.source), (true, sluice_core::Source::Store));
    // The second connection is opened and used on another thread's runtime, as each
    // `sluice serve` worker does.
    let (again, limit_again) = (first.clone(), limit.clone());
    let on_another_thread = std::thread::spawn(move || {
        runtime().block_on(async {
            let again = again.connect_again().await.unwrap();
            let second = check(&again, &limit_again, "k", NOW + 1, 1).await;
            let third = check(&again, &limit_again, "k", NOW + 2, 1).await;
            [second, third].map(|verdict| (verdict.decision.allowed, verdict.source))
        })
    });
    let [second, third] = on_another_thread.join().unwrap();
    assert_eq!(second, (true, sluice_core::Source::Store), "the second request passes, on the shared state");
    assert_eq!(third, (false, sluice_core::Source::Store), "the third is over the shared limit");
    // The rejection learnt through the second connection is in the first one's cache.
    main.block_on(raw(&server, &["CONFIG", "RESETSTAT"]));
    let cached = main.block_on(check(&first, &limit, "k", NOW + 3, 1));
    assert_eq!((cached.decision.allowed, cached.source), (false, sluice_core::Source::Cache));
    assert_eq!(main.block_on(script_calls(&server)), 0);
}

/// The one TTL formula every script uses (`ttl_ms` in `lua/ttl.lua`), evaluated by the
/// real Redis with the arguments' layout the store sends: whole milliseconds rounded up,
/// plus the clock skew allowed, never below the floor. Exact, with no clock involved (the
/// tests above read TTLs that count down while they look).
#[tokio::test]
async fn ttls_are_rounded_up_to_whole_milliseconds_plus_the_skew() {
    let server = RedisServer::start();
    let script = concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/ttl.lua"),
        "return ttl_ms(tonumber(ARGV[3]))\n"
    );
    // (µs until the state is fresh, skew ms, floor ms) → TTL ms
    let cases: [((u64, u32, u32), i64); 13] = [
        ((1, 0, 1), 1),
        ((999, 0, 1), 1),
        ((1_000, 0, 1), 1),
        ((1_001, 0, 1), 2),
        ((1_999, 0, 1), 2),
        ((2_000, 0, 1), 2),
        ((1_500, 250, 1), 252),
        ((0, 250, 1), 250),
        ((0, 0, 1), 1),
        ((1_001, 0, 5), 5),
        ((86_400_000_000, 100, 1), 86_400_100),
        ((9_007_199_254_740_000, 0, 1), 9_007_199_254_740),
        ((9_007_199_254_740_991, 0, 1), 9_007_199_254_741),
    ];
    let client = redis::Client::open(server.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    for ((expires_in, skew, floor), expected) in cases {
        // ARGV[1]: now (any: the formula does not read it), cost, extra_ms, min_ttl_ms.
        let mut packed = Vec::new();
        for value in [NOW as f64, 1.0, f64::from(skew), f64::from(floor)] {
            packed.extend_from_slice(&value.to_le_bytes());
        }
        let ttl: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .arg(packed)
            // ARGV[2], the deadline: far ahead, so the script goes on.
            .arg(f64::MAX.to_le_bytes().as_slice())
            .arg(expires_in.to_string())
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(ttl, expected, "ttl_ms({expires_in} µs) with a skew of {skew} ms and a floor of {floor} ms");
    }
}

/// Lua numbers are doubles, exact below 2^53: a check whose time is within its policy's
/// reach of 2^53 µs is refused. With 1 µs buckets a sliding window's bucket index is the
/// time, and its script's loop over the next buckets counted up to an index that no longer
/// increments there: Redis ran the script until it was killed, and answered nobody else.
#[tokio::test]
async fn a_time_within_a_policys_reach_of_2_to_the_53_is_refused_and_redis_keeps_answering() {
    let server = RedisServer::start();
    // Every check reaches the script (no rejection answered from the blocked-key cache).
    let store = store(&server, RedisSettings { blocked_cache: false, ..injected_time() }).await;
    let counter = Limit::new("counter", SlidingWindow::new(4, Duration::from_micros(3), 3).unwrap());
    // Its reach: the window and one bucket, 4 µs.
    let last_decided = EXACT_LIMIT - 5;
    let key = Key::new(b"near-the-end").unwrap();
    let limits = std::slice::from_ref(&counter);
    let at = |micros| Timestamp::from_micros(micros);
    // Just outside its reach, decided exactly as the memory store decides: 4 admitted, then
    // a rejection whose wait ends 4 µs later (the script's loop over the next buckets).
    let memory = MemoryStore::builder().clock(ManualClock::default()).build();
    for cost in [4, 1] {
        let expected = memory.check_now(key, limits, at(last_decided), cost).unwrap().decision;
        assert_eq!(store.check(Check::new(key, limits, at(last_decided), cost)).await.unwrap().decision, expected);
    }
    let rejected = memory.check_now(key, limits, at(last_decided), 1).unwrap().decision;
    assert_eq!(rejected.retry_after, Some(RetryAfter::After(Duration::from_micros(4))));
    // Within it: refused. (Before, the rejection at 2^53 − 1 below never returned.)
    for (time, cost) in [(EXACT_LIMIT - 4, 1), (EXACT_LIMIT - 1, 4), (EXACT_LIMIT - 1, 1)] {
        let refused = store.check(Check::new(key, limits, at(time), cost)).await.unwrap_err();
        assert!(matches!(&refused, StoreError::Refused(message) if message.contains("`counter`")), "{refused}");
    }
    assert_eq!(raw(&server, &["PING"]).await, redis::Value::SimpleString("PONG".into()));
}
