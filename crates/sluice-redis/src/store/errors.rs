//! What a failed call to Redis is: unavailable for now (the failure mode answers), or a
//! fault of the script or of this client, which retrying would not mend.

use crate::health::Cause;
use sluice_core::StoreError;
use std::future::Future;
use std::time::Duration;

/// A check answered without asking Redis: an outage is under way.
#[derive(Debug, thiserror::Error)]
#[error("Redis is unavailable (an outage is under way)")]
pub(super) struct InOutage;

/// Redis ran a check after its deadline, and wrote nothing (`deadline` module).
#[derive(Debug, thiserror::Error)]
#[error("Redis ran the check after its deadline, and wrote nothing")]
pub(crate) struct Expired;

/// Redis did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer from Redis within {0:?}")]
pub(crate) struct TimedOut(pub(crate) Duration);

/// Awaits `future` for at most `limit`; a timeout or a Redis error makes Redis unavailable.
pub(super) async fn within<T>(
    limit: Duration,
    future: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, future).await {
        Err(_) => Err(unavailable(TimedOut(limit))),
        Ok(result) => result.map_err(unavailable),
    }
}

pub(super) fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

/// Error codes of a Redis that cannot serve for now, also when a script's `redis.call`
/// meets them: out of memory under `noeviction`, a primary demoted to a replica by a
/// failover, a server still loading its data set or busy with a long script, a cluster or
/// replication that is down, a failing save that stops writes.
const UNAVAILABLE_CODES: [&str; 9] =
    ["OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "MISCONF"];

/// Whether `error` is Redis answering that it cannot serve for now (one of
/// [`UNAVAILABLE_CODES`]), rather than refusing this client (authentication, permissions).
pub(super) fn is_unavailable_for_now(error: &(dyn std::error::Error + 'static)) -> bool {
    let code = error.downcast_ref::<redis::RedisError>().and_then(redis::RedisError::code);
    code.is_some_and(|code| UNAVAILABLE_CODES.contains(&code))
}

/// An error raised by the script itself (a bug, or a foreign value at a Sluice key), not
/// by the connection, by a Redis that cannot serve for now, nor by an ACL: retrying or
/// failing open would hide it.
pub(super) fn is_script_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let code = error.downcast_ref::<redis::RedisError>().and_then(redis::RedisError::code);
    if code.is_some_and(|code| UNAVAILABLE_CODES.contains(&code)) {
        return false;
    }
    let message = error.to_string();
    // An ACL denying a command a script runs is a refusal of the configuration (the
    // `refusal` module), not a fault of the script.
    if message.contains("can't run this command") || message.contains("NOPERM") {
        return false;
    }
    message.contains("user_script") || message.contains("sluice:")
}

/// Why Redis failed, for counting.
pub(super) fn cause_of(error: &StoreError) -> Cause {
    let StoreError::Unavailable(source) = error else { return Cause::Server };
    let redis_error = source.downcast_ref::<redis::RedisError>();
    if source.is::<TimedOut>() || source.is::<Expired>() || redis_error.is_some_and(redis::RedisError::is_timeout) {
        Cause::Timeout
    } else if redis_error.is_some_and(is_cluster_down) {
        Cause::ClusterDown
    } else if redis_error.is_some_and(|error| error.code().is_some()) {
        Cause::Server
    } else {
        Cause::Connection
    }
}

/// What failed, in words, with the error itself: for the log line that starts an outage.
pub(super) fn describe(error: &StoreError) -> String {
    let StoreError::Unavailable(source) = error else { return error.to_string() };
    let redis_error = source.downcast_ref::<redis::RedisError>();
    match cause_of(error) {
        Cause::ClusterDown => {
            let detail = redis_error.and_then(redis::RedisError::detail).unwrap_or_default();
            format!("the Cluster refuses keys: CLUSTERDOWN {detail}").trim_end().to_owned()
        }
        Cause::Connection if redis_error.is_some_and(redis::RedisError::is_connection_refusal) => {
            format!("connection refused: {source}")
        }
        cause => format!("{cause}: {source}"),
    }
}

/// Whether `error` is a Redis Cluster refusing keys: a slot no master serves, or every
/// slot while the Cluster is down (`cluster-require-full-coverage yes`).
fn is_cluster_down(error: &redis::RedisError) -> bool {
    error.code() == Some("CLUSTERDOWN")
}
