//! `CL.THROTTLE` on the embedded store and a [`ManualClock`], against a reading of
//! redis-cell 0.5.0's arithmetic written apart from the module's ([`RedisCell`]).

use super::*;
use proptest::prelude::*;
use sluice_core::{Clock, Key, ManualClock, MemoryStore, Timestamp};
use std::collections::HashMap;

/// redis-cell 0.5.0's `CL.THROTTLE` as its source reads: `src/lib.rs` (`run`, the reply's
/// rounding), `src/cell/mod.rs` (`Rate::per_period`, `RateLimiter::new`, `rate_limit`), in
/// nanoseconds, on a map of stored theoretical arrival times (TATs).
///
/// One reading: Redis drops a key after its TTL in whole milliseconds (`set_expire` takes
/// `ttl.whole_milliseconds()`), up to 1 ms before its TAT; here a TAT is kept until it is
/// reached. Either way `max(tat, now)` is then within 1 ms of `now`, the boundary the
/// differential test against the real module counts apart.
#[derive(Debug, Default)]
struct RedisCell {
    tats: HashMap<String, i64>,
}

impl RedisCell {
    fn throttle(&mut self, args: &[&str], now: i64) -> Result<[i64; 5], String> {
        if args.len() != 4 && args.len() != 5 {
            return Err(
                "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]".into()
            );
        }
        let int = |arg: &str| arg.parse::<i64>().map_err(|_| format!("Cell error: Couldn't parse as integer: {arg}"));
        let (max_burst, count, period) = (int(args[1])?, int(args[2])?, int(args[3])?);
        let quantity = args.get(4).map_or(Ok(1), |arg| int(arg))?;
        let ns = i128::from(period) * 1_000_000_000;
        let interval = if count == 0 || ns == 0 { 0 } else { (ns as f64 / count as f64) as i64 };
        let dvt = interval * (max_burst + 1);
        if interval == 0 {
            return Err("Cell error: Zero rates are not supported".into());
        }
        let increment = interval * quantity;
        let tat = self.tats.get(args[0]).copied().filter(|&tat| tat > now).unwrap_or(now);
        let new_tat = if now > tat { now + increment } else { tat + increment };
        let diff = now - (new_tat - dvt);
        let (limited, retry_after, ttl) = if diff < 0 {
            (1, if increment <= dvt { -diff } else { -1_000_000_000 }, tat - now)
        } else {
            self.tats.insert(args[0].to_owned(), new_tat);
            (0, -1_000_000_000, new_tat - now)
        };
        let next = dvt - ttl;
        let remaining = if next > -interval { ((next / 1000) as f64 / (interval / 1000) as f64) as i64 } else { 0 };
        Ok([limited, max_burst + 1, remaining, whole_seconds(retry_after), whole_seconds(ttl)])
    }
}

/// `as_seconds_f64() as i64`, plus one when `subsec_milliseconds() > 0`.
fn whole_seconds(nanos: i64) -> i64 {
    let seconds = (nanos as f64 / 1e9) as i64;
    if (nanos - seconds * 1_000_000_000) / 1_000_000 > 0 { seconds + 1 } else { seconds }
}

/// The front's `CL.THROTTLE` on an embedded store, as `cell.rs` runs it.
#[derive(Debug, Default)]
struct Sluice {
    store: MemoryStore,
}

impl Sluice {
    fn throttle(&self, args: &[&str], now: Timestamp) -> Result<[i64; 5], String> {
        let args: Vec<Bytes> = args.iter().map(|arg| Bytes::copy_from_slice(arg.as_bytes())).collect();
        let text = |reply: Reply| match reply {
            Reply::Error(text) => text,
            other => panic!("not an error: {other:?}"),
        };
        let call = Throttle::parse(&args).map_err(text)?;
        let rate = call.rate().map_err(text)?;
        match call.plan(rate).map_err(text)? {
            Plan::Stateless => Ok(call.stateless_reply(rate)),
            Plan::Store(limit) => {
                let key = Key::new(&call.key).map_err(|error| error.to_string())?;
                let verdict = self.store.check_now(key, &[limit], now, call.quantity.unsigned_abs());
                Ok(call.reply(rate, &verdict.map_err(|error| error.to_string())?.decision))
            }
        }
    }
}

/// 2026-12-01, a whole second.
const START: u64 = 1_796_083_200_000_000;

/// A reply's five fields, or its error's text.
type Answer = Result<[i64; 5], String>;

/// Each call, after its gap in µs, on both: `(redis-cell's answer, Sluice's)`.
fn both(calls: &[(&[&str], u64)]) -> Vec<(Answer, Answer)> {
    let (mut cell, sluice, clock) =
        (RedisCell::default(), Sluice::default(), ManualClock::at(Timestamp::from_micros(START)));
    calls
        .iter()
        .map(|(args, gap_us)| {
            clock.advance(Duration::from_micros(*gap_us));
            let now = clock.now();
            (cell.throttle(args, i64::try_from(now.as_micros() * 1000).unwrap()), sluice.throttle(args, now))
        })
        .collect()
}

/// redis-cell's README: `CL.THROTTLE user123 15 30 60 1` on a fresh key.
#[test]
fn the_readme_example_answers_as_redis_cell() {
    let answers = both(&[(&["user123", "15", "30", "60", "1"], 0)]);
    assert_eq!(answers[0].0, Ok([0, 16, 15, -1, 2]));
    assert_eq!(answers[0].1, Ok([0, 16, 15, -1, 2]));
}

/// The edges the issue names, each as redis-cell answers it.
#[test]
fn edge_cases_answer_as_redis_cell() {
    let calls: &[(&[&str], u64)] = &[
        (&["q0", "2", "1", "1", "0"], 0),  // quantity 0 on a fresh key: allowed, nothing spent
        (&["q0", "2", "1", "1", "3"], 0),  // the whole burst at once
        (&["q0", "2", "1", "1", "0"], 0),  // quantity 0 on a full key: still allowed, remaining 0
        (&["q0", "2", "1", "1"], 500_000), // limited, half a second to wait (rounded up)
        (&["big", "2", "1", "1", "4"], 0), // above the burst: limited, never passes (-1)
        (&["big", "2", "1", "1", "3"], 0), // exactly the burst: allowed
        (&["big", "2", "1", "1", "4"], 0), // above it again, with the state full
        (&["huge", "0", "1", "1000000000"], 0), // a 31-year interval
        (&["huge", "0", "1", "1000000000"], 999_999_000),
        (&["neg", "-1", "1", "1", "0"], 0), // max_burst -1: limit 0, only quantity 0 passes
        (&["neg", "-1", "1", "1"], 0),
        (&["neg", "-5", "1", "1"], 0),
        (&["neg", "-5", "1", "1", "0"], 0),
        (&["ms", "9", "1000", "1"], 1),    // 1 ms intervals
        (&["us", "9", "1000000", "1"], 1), // 1 µs intervals (redis-cell #80)
        (&["us2", "0", "1000000", "1", "2"], 0),
        (&["plus", "+3", "+1", "+2"], 0), // Rust's `parse` takes a leading `+`
    ];
    for ((cell, sluice), (args, _)) in both(calls).into_iter().zip(calls) {
        assert_eq!(sluice, cell, "CL.THROTTLE {}", args.join(" "));
    }
}

#[test]
fn errors_are_redis_cell_s_words() {
    let calls: &[(&[&str], u64)] = &[
        (&["k", "1", "0", "1"], 0),
        (&["k", "1", "1", "0"], 0),
        (&["k", "1", "3000000000", "1"], 0), // 0.33 ns: a zero interval
        (&["k", "x", "1", "1"], 0),
        (&["k", "1", "1", "1", "1.5"], 0),
        (&["k", "1", "1"], 0),
        (&["k", "1", "1", "1", "1", "1"], 0),
        (&["k", "99999999999999999999", "1", "1"], 0),
    ];
    for ((cell, sluice), (args, _)) in both(calls).into_iter().zip(calls) {
        assert!(cell.is_err(), "{args:?}: {cell:?}");
        assert_eq!(sluice, cell, "CL.THROTTLE {}", args.join(" "));
    }
}

/// Where redis-cell's arithmetic leaves Sluice's (docs/resp.md, "What differs").
#[test]
fn what_sluice_cannot_decide_is_refused_with_a_reason() {
    let sluice = Sluice::default();
    let now = Timestamp::from_micros(START);
    for (args, reason) in [
        (&["k", "1", "-1", "1"][..], "negative rate"),
        (&["k", "1", "1", "-1"][..], "negative rate"),
        (&["k", "1", "1", "1", "-1"][..], "quantity must not be negative"),
        (&["k", "1", "2000000", "1"][..], "under 1 µs"),
        (&["k", "0", "1", "10000000000"][..], "below 2^53 µs"),
    ] {
        let refused = sluice.throttle(args, now).unwrap_err();
        assert!(refused.starts_with("ERR CL.THROTTLE: ") && refused.contains(reason), "{args:?}: {refused}");
    }
}

/// One difference kept on purpose (docs/resp.md): redis-cell stores one TAT per key,
/// whatever the parameters; Sluice one per key and parameter set, as for any two policies.
#[test]
fn a_key_called_with_other_parameters_has_a_state_of_its_own() {
    let calls: &[(&[&str], u64)] = &[(&["k", "0", "1", "10"], 0), (&["k", "0", "1", "20"], 0)];
    let answers = both(calls);
    assert_eq!(answers[1].0, Ok([1, 1, 0, 10, 10]), "redis-cell: the first call's TAT");
    assert_eq!(answers[1].1, Ok([0, 1, 0, -1, 20]), "Sluice: a fresh state");
}

/// Parameters whose interval `period / count` is a whole number of microseconds.
fn whole_micro_parameters() -> impl Strategy<Value = (i64, i64, i64)> {
    let counts = prop::sample::select(vec![1_i64, 2, 4, 5, 8, 10, 16, 20, 25, 40, 50, 100, 1_000, 1_000_000]);
    (0_i64..20, counts, 1_i64..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A random corpus on three keys: every reply equal, field for field.
    #[test]
    fn random_calls_answer_as_redis_cell(
        parameters in proptest::collection::vec(whole_micro_parameters(), 3),
        calls in proptest::collection::vec((0_usize..3, 0_i64..4, 0_u64..3_000_000), 1..60),
    ) {
        let (mut cell, sluice, clock) = (RedisCell::default(), Sluice::default(), ManualClock::at(Timestamp::from_micros(START)));
        for (key, quantity, gap) in calls {
            let (burst, count, period) = parameters[key];
            // Scaled to the key's interval, so that gaps land on both sides of its boundaries.
            clock.advance(Duration::from_micros(gap * u64::try_from(period).unwrap() / u64::try_from(count).unwrap() / 100_000));
            let now = clock.now();
            let args = [format!("key{key}"), burst.to_string(), count.to_string(), period.to_string(), quantity.to_string()];
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let expected = cell.throttle(&args, i64::try_from(now.as_micros() * 1000).unwrap());
            prop_assert_eq!(sluice.throttle(&args, now), expected, "CL.THROTTLE {} at {}", args.join(" "), now.as_micros());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any interval, whole microseconds or not: a burst at one instant, and what a quantity
    /// of 0 reads after it, answer as redis-cell (the interval's truncation to whole
    /// microseconds drifts only across refills).
    #[test]
    fn a_burst_answers_as_redis_cell_for_any_interval(burst in 0_i64..30, count in 1_i64..1_000, period in 1_i64..100, quantities in proptest::collection::vec(0_i64..4, 1..40)) {
        let (mut cell, sluice) = (RedisCell::default(), Sluice::default());
        let now = Timestamp::from_micros(START);
        for quantity in quantities {
            let args = ["k".to_owned(), burst.to_string(), count.to_string(), period.to_string(), quantity.to_string()];
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let expected = cell.throttle(&args, i64::try_from(START * 1000).unwrap());
            prop_assert_eq!(sluice.throttle(&args, now), expected, "CL.THROTTLE {}", args.join(" "));
        }
    }
}
