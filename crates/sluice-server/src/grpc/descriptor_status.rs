//! A descriptor's status in an Envoy rate-limit response, as envoyproxy/ratelimit fills it.

use crate::envoy::{Quota, Rule, Unit};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as ProtoUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus, RateLimit};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use sluice_tower::headers::whole_seconds;
use std::time::Duration;

/// The status of a descriptor that matched `rule` (or none), reported with the rule's limit.
pub(super) fn status(code: Code, rule: Option<&Rule>, remaining: u32, reset: Option<Duration>) -> DescriptorStatus {
    descriptor_status(code, rule.and_then(current_limit), remaining, reset)
}

/// A status with `current_limit` as given; `reset` in whole seconds (see [`until_reset`]).
pub(super) fn descriptor_status(
    code: Code,
    current_limit: Option<RateLimit>,
    remaining: u32,
    reset: Option<Duration>,
) -> DescriptorStatus {
    DescriptorStatus {
        code: code as i32,
        current_limit,
        limit_remaining: remaining,
        duration_until_reset: reset.map(until_reset),
        ..DescriptorStatus::default()
    }
}

/// The limit of a descriptor's own `limit` override: no name, as in envoyproxy/ratelimit.
pub(super) fn override_limit(requests_per_unit: u32, unit: Unit) -> RateLimit {
    RateLimit { name: String::new(), requests_per_unit, unit: proto_unit(unit) as i32 }
}

/// The rule's limit as Envoy understands it: requests per unit, 0 for a rule that blocks
/// (reported as envoyproxy/ratelimit does); none for an unlimited rule. A rule backed by a
/// Sluice policy has no unit, and is reported with `UNKNOWN`.
///
/// The name is the rule's own `rate_limit.name`, and empty without one, as
/// envoyproxy/ratelimit sends it: Envoy prints it in the `x-ratelimit-limit` header its
/// clients see, where a rule's path (`edge.remote_address`) has no business.
fn current_limit(rule: &Rule) -> Option<RateLimit> {
    let requests_per_unit = match rule.quota() {
        Quota::Limit(limit) => u32::try_from(limit.policy().limit()).unwrap_or(u32::MAX),
        Quota::Blocked => 0,
        Quota::Unlimited => return None,
    };
    let unit = rule.unit().map_or(ProtoUnit::Unknown, proto_unit);
    let name = rule.given_name().unwrap_or_default().to_owned();
    Some(RateLimit { name, requests_per_unit, unit: unit as i32 })
}

fn proto_unit(unit: Unit) -> ProtoUnit {
    match unit {
        Unit::Second => ProtoUnit::Second,
        Unit::Minute => ProtoUnit::Minute,
        Unit::Hour => ProtoUnit::Hour,
        Unit::Day => ProtoUnit::Day,
        Unit::Week => ProtoUnit::Week,
    }
}

/// A time to reset in whole seconds, rounded up: envoyproxy/ratelimit sends whole seconds
/// (1 to the unit's length for a window), and Envoy's `x-ratelimit-reset` header reads only
/// the `seconds` field, so a fraction would show a wait of 0.3 s as 0.
fn until_reset(duration: Duration) -> ProtoDuration {
    ProtoDuration { seconds: i64::try_from(whole_seconds(duration)).unwrap_or(i64::MAX), nanos: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_is_whole_seconds_rounded_up_so_a_real_wait_is_never_0() {
        let seconds = |micros| until_reset(Duration::from_micros(micros));
        assert_eq!(seconds(1), ProtoDuration { seconds: 1, nanos: 0 });
        assert_eq!(seconds(999_999), ProtoDuration { seconds: 1, nanos: 0 });
        assert_eq!(seconds(1_000_000), ProtoDuration { seconds: 1, nanos: 0 });
        assert_eq!(seconds(59_000_001), ProtoDuration { seconds: 60, nanos: 0 });
        assert_eq!(seconds(0), ProtoDuration { seconds: 0, nanos: 0 });
    }
}
