//! Which check times the scripts compute exactly. Lua numbers are doubles, exact below
//! 2^53, and a script computes times up to a policy's *reach* past the time of its check (a
//! window's end, the moment a bucket is full again, a wait). A check whose time plus that
//! reach is 2^53 µs or more would be decided on rounded times (and a sliding window's loop
//! over its buckets would never end, holding Redis), so it is refused instead.

use sluice_core::{EXACT_LIMIT, Limit, StoreError};
use std::time::Duration;

/// The latest Redis `TIME` a policy's reach is checked against when the scripts read Redis's
/// clock: 2^52 µs after the Unix epoch, in the year 2112.
const REDIS_TIME_BOUND: u128 = 1 << 52;

/// Refuses a check of `limits` at `now` (`None`: Redis `TIME`, taken as at most
/// [`REDIS_TIME_BOUND`]) whose time plus a limit's look-ahead ([`sluice_core::Policy::look_ahead`]: how far
/// past a check's time its script computes) is not below 2^53, naming the
/// first such limit.
pub(crate) fn refuse_inexact(now: Option<u64>, limits: &[Limit]) -> Result<(), StoreError> {
    let time = now.map_or(REDIS_TIME_BOUND, u128::from);
    let beyond = limits
        .iter()
        .map(|limit| (limit, limit.policy().look_ahead().as_micros()))
        .find(|(_, reach)| time + reach >= u128::from(EXACT_LIMIT));
    let Some((limit, reach)) = beyond else {
        return Ok(());
    };
    let message = match now {
        Some(now) => format!(
            "time {now} µs plus the {reach} µs that policy `{}` looks ahead is not below 2^53, \
             the most Redis computes exactly",
            limit.name()
        ),
        None => format!(
            "policy `{}` looks {reach} µs ahead: under Redis time that must stay below 2^53 − 2^52 µs \
             (about 142 years), the most Redis computes exactly until the year 2112",
            limit.name()
        ),
    };
    Err(StoreError::Refused(message))
}

/// True when a lease `period` long, asked with a check of `limits` at `now` (`None`: Redis
/// `TIME`, as in [`refuse_inexact`]), keeps every time the scripts compute below 2^53: the
/// lease's deadline plus a limit's look-ahead (a held lease is counted up to that far past
/// its deadline). A check whose lease would not is decided without one.
pub(crate) fn lease_is_exact(now: Option<u64>, period: Duration, limits: &[Limit]) -> bool {
    let time = now.map_or(REDIS_TIME_BOUND, u128::from) + period.as_micros();
    limits.iter().all(|limit| time + limit.policy().look_ahead().as_micros() < u128::from(EXACT_LIMIT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{
        LeakMode, LeakyBucket, Policy, SlidingLog, SlidingLogVariant, SlidingWindow, TokenBucket, TokenBucketSettings,
    };
    use std::time::Duration;

    fn limit(policy: impl Into<Policy>) -> Limit {
        Limit::new("p", policy.into())
    }

    #[test]
    fn each_policy_looks_ahead_as_far_as_its_script_computes() {
        let second = Duration::from_secs(1);
        let log = SlidingLog::new(5, second, SlidingLogVariant::Accepted).unwrap();
        assert_eq!(Policy::from(log).look_ahead().as_micros(), 1_000_000);
        let counter = SlidingWindow::new(5, second, 4).unwrap();
        assert_eq!(Policy::from(counter).look_ahead().as_micros(), 1_250_000);
        let settings = TokenBucketSettings { capacity: 10, refill_amount: 3, refill_interval: second };
        assert_eq!(Policy::from(TokenBucket::new(settings).unwrap()).look_ahead().as_micros(), 4_000_000);
        let gcra = LeakyBucket::new(Duration::from_micros(10), 4, LeakMode::NoDelay).unwrap();
        assert_eq!(Policy::from(gcra).look_ahead().as_micros(), 100);
    }

    #[test]
    fn a_time_within_a_policys_reach_of_2_to_the_53_is_refused() {
        let limits = [limit(SlidingLog::new(5, Duration::from_micros(10), SlidingLogVariant::Accepted).unwrap())];
        assert!(refuse_inexact(Some(EXACT_LIMIT - 11), &limits).is_ok());
        let refused = refuse_inexact(Some(EXACT_LIMIT - 10), &limits).unwrap_err();
        assert!(matches!(&refused, StoreError::Refused(message) if message.contains("policy `p`")), "{refused}");
    }

    #[test]
    fn a_lease_reaching_past_2_to_the_53_is_not_asked() {
        let limits = [limit(SlidingLog::new(5, Duration::from_micros(10), SlidingLogVariant::Accepted).unwrap())];
        let period = Duration::from_micros(100);
        assert!(lease_is_exact(Some(EXACT_LIMIT - 111), period, &limits));
        assert!(!lease_is_exact(Some(EXACT_LIMIT - 110), period, &limits));
        assert!(lease_is_exact(None, Duration::from_secs(3600), &limits));
    }

    #[test]
    fn under_redis_time_a_policy_reaching_past_2112_is_refused() {
        let near = Duration::from_micros((1 << 52) - 1);
        let far = Duration::from_micros(1 << 52);
        let fits = [limit(SlidingLog::new(5, near, SlidingLogVariant::Accepted).unwrap())];
        assert!(refuse_inexact(None, &fits).is_ok());
        let too_far = [limit(SlidingLog::new(5, far, SlidingLogVariant::Accepted).unwrap())];
        assert!(matches!(refuse_inexact(None, &too_far), Err(StoreError::Refused(_))));
    }
}
