//! The Envoy rate limit service (`envoy.service.ratelimit.v3.RateLimitService`, gRPC).
//!
//! Each descriptor of a request is resolved to a rule of its domain (see [`crate::envoy`])
//! and checked on its own state key, as envoyproxy/ratelimit does: the response is
//! `OVER_LIMIT` when any descriptor is over its limit, and every descriptor gets its status.
//! Descriptors are not all-or-nothing (their keys differ, and may live on different Redis
//! Cluster slots); a policy list on one key is, through the HTTP API.

use super::descriptor_status::{descriptor_status, override_limit, status};
use super::response_headers::{Checked, response_headers};
use crate::config::bounds::Bounds;
use crate::engine::front::Front;
use crate::engine::{Answer as Outcome, Loaded, RequestError as CheckError};
use crate::envoy::{Resolution, StateKey, Unit};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use futures_util::future::join_all;
use sluice_core::{Key, Source, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};

pub(crate) use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;

/// The gRPC service of one worker, sharing its engine with the worker's HTTP API.
#[derive(Debug)]
pub(crate) struct RateLimitGrpc {
    front: Arc<Front>,
}

impl RateLimitGrpc {
    /// The service, checking with `front`'s engine.
    pub(crate) fn new(front: Arc<Front>) -> RateLimitGrpc {
        RateLimitGrpc { front }
    }
}

#[tonic::async_trait]
impl RateLimitService for RateLimitGrpc {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let request = request.into_inner();
        if request.domain.is_empty() {
            return Err(Status::invalid_argument("rate limit domain must not be empty"));
        }
        if request.descriptors.is_empty() {
            return Err(Status::invalid_argument("rate limit descriptor list must not be empty"));
        }
        within_bounds(&request, &self.front.service.settings.bounds())?;
        let loaded = self.front.engine.loaded();
        // Every descriptor is resolved before any is counted: an invalid request counts nothing.
        let resolutions = resolve_all(&loaded, &request)?;
        let checks = resolutions.into_iter().zip(&request.descriptors).map(|(resolution, descriptor)| {
            self.check_descriptor(&loaded, resolution, hits_of(descriptor, request.hits_addend))
        });
        // Concurrently: on Redis, each descriptor is a round trip of its own.
        let checked = join_all(checks).await.into_iter().collect::<Result<Vec<Checked>, Status>>()?;
        let response_headers_to_add =
            if self.front.service.settings.envoy_headers { response_headers(&checked) } else { Vec::new() };
        let statuses: Vec<DescriptorStatus> = checked.into_iter().map(|(status, _)| status).collect();
        let over = statuses.iter().any(|status| status.code == Code::OverLimit as i32);
        Ok(Response::new(RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            response_headers_to_add,
            ..RateLimitResponse::default()
        }))
    }
}

impl RateLimitGrpc {
    /// The status of one resolved descriptor, and the outcome when a limit was checked.
    /// The engine counts every outcome, as it does for the HTTP API.
    async fn check_descriptor(
        &self,
        loaded: &Loaded,
        resolution: Resolution<'_>,
        hits: u64,
    ) -> Result<Checked, Status> {
        let envoy = self.front.engine.envoy();
        match resolution {
            Resolution::NoRule => Ok((status(Code::Ok, None, 0, None), None)),
            Resolution::Unlimited(rule) => Ok((status(Code::Ok, Some(rule), u32::MAX, None), None)),
            Resolution::Blocked(rule) => {
                let shadow = envoy.refuse_rule(loaded, rule, rule.shadow_mode(), hits);
                let code = if shadow { Code::Ok } else { Code::OverLimit };
                let reset = rule.unit().map(|unit| envoy.until_window_ends(unit));
                Ok((status(code, Some(rule), 0, reset), None))
            }
            Resolution::KeyTooLong { len, .. } => Err(key_too_long(len)),
            Resolution::Overridden { limit, requests_per_unit, unit, key } => {
                let current = override_limit(requests_per_unit, unit);
                let Some(limit) = limit else {
                    let code = if envoy.refuse_override(loaded, hits) { Code::Ok } else { Code::OverLimit };
                    let reset = envoy.until_window_ends(unit);
                    return Ok((descriptor_status(code, Some(current), 0, Some(reset)), None));
                };
                let checked = envoy.check_override(loaded, state_key(&key)?, &limit, hits).await;
                let outcome = as_envoy_reports(checked.map_err(grpc_error)?);
                if outcome.source == Source::FailedOpen {
                    return Ok((failed_open(), Some(outcome)));
                }
                let (code, remaining, reset) = answer(&outcome)?;
                Ok((descriptor_status(code, Some(current), remaining, Some(reset)), Some(outcome)))
            }
            Resolution::Limited { rule, limit, key } => {
                let key = state_key(&key)?;
                let checked = envoy.check_rule(loaded, key, rule, limit, rule.shadow_mode(), hits).await;
                let outcome = as_envoy_reports(checked.map_err(grpc_error)?);
                if outcome.source == Source::FailedOpen {
                    return Ok((failed_open(), Some(outcome)));
                }
                let (code, remaining, reset) = answer(&outcome)?;
                Ok((status(code, Some(rule), remaining, Some(reset)), Some(outcome)))
            }
        }
    }
}

/// `outcome` as envoyproxy/ratelimit reports a descriptor over its limit, in shadow mode
/// too: nothing remaining, whatever quota is left (here a rejected request consumes
/// nothing, so a smaller one may still fit). Headers then show 0 as well, and this
/// descriptor is the tightest.
fn as_envoy_reports(mut outcome: Outcome) -> Outcome {
    if !outcome.decision.allowed || outcome.shadow_rejected {
        outcome.decision.remaining = 0;
    }
    outcome
}

/// The status of a descriptor the `open` failure mode let through while the store was down:
/// `OK`, claiming no quota (no `current_limit`, nothing remaining, no reset), since none was
/// read; Envoy then adds no `x-ratelimit-*` header for it, nor does `envoy_headers`.
fn failed_open() -> DescriptorStatus {
    descriptor_status(Code::Ok, None, 0, None)
}

/// A descriptor's state key as the store takes it.
fn state_key(key: &StateKey) -> Result<Key<'_>, Status> {
    Key::new(key.as_bytes()).map_err(|error| Status::invalid_argument(error.to_string()))
}

/// A checked descriptor's status code, remaining and time to reset; `UNAVAILABLE` when the
/// `closed` failure mode decided for an enforced rule, so that Envoy's own failure mode
/// applies (a rule in shadow mode never blocks, whatever decided for it).
fn answer(outcome: &Outcome) -> Result<(Code, u32, Duration), Status> {
    if outcome.source == Source::FailedClosed && !outcome.shadow_rejected {
        return Err(Status::unavailable("the store cannot answer and the failure mode is closed"));
    }
    let code = if outcome.decision.allowed { Code::Ok } else { Code::OverLimit };
    let remaining = u32::try_from(outcome.decision.remaining).unwrap_or(u32::MAX);
    Ok((code, remaining, outcome.decision.reset_after))
}

/// `INVALID_ARGUMENT`, naming the bound and its setting, when `request` has more
/// descriptors, or a descriptor more entries, than `bounds` allow.
fn within_bounds(request: &RateLimitRequest, bounds: &Bounds) -> Result<(), Status> {
    let count = request.descriptors.len();
    if count > bounds.max_descriptors {
        return Err(Status::invalid_argument(format!(
            "the request has {count} descriptors, over the {} allowed (setting `max_descriptors`)",
            bounds.max_descriptors
        )));
    }
    let mut entries = request.descriptors.iter().map(|descriptor| descriptor.entries.len()).enumerate();
    if let Some((index, count)) = entries.find(|&(_, count)| count > bounds.max_descriptor_entries) {
        return Err(Status::invalid_argument(format!(
            "descriptor {index} has {count} entries, over the {} allowed (setting `max_descriptor_entries`)",
            bounds.max_descriptor_entries
        )));
    }
    Ok(())
}

/// The rule of each descriptor of `request`; `INVALID_ARGUMENT` when one cannot be checked.
fn resolve_all<'a>(loaded: &'a Loaded, request: &RateLimitRequest) -> Result<Vec<Resolution<'a>>, Status> {
    let rules = loaded.config.envoy();
    let resolve = |descriptor: &RateLimitDescriptor| {
        let Some(rules) = rules else { return Ok(Resolution::NoRule) };
        let entries = descriptor.entries.iter().map(|entry| (entry.key.as_str(), entry.value.as_str()));
        let resolution = match &descriptor.limit {
            None => rules.resolve(&request.domain, entries),
            Some(limit) => {
                rules.resolve_override(&request.domain, entries, limit.requests_per_unit, unit_of(limit.unit)?)
            }
        };
        match resolution {
            Resolution::KeyTooLong { len, .. } => Err(key_too_long(len)),
            resolution => Ok(resolution),
        }
    };
    request.descriptors.iter().map(resolve).collect()
}

/// The unit of a descriptor's `limit` override (`envoy.type.v3.RateLimitUnit`).
fn unit_of(proto: i32) -> Result<Unit, Status> {
    match (RateLimitUnit::try_from(proto), proto) {
        (Ok(RateLimitUnit::Second), _) => Ok(Unit::Second),
        (Ok(RateLimitUnit::Minute), _) => Ok(Unit::Minute),
        (Ok(RateLimitUnit::Hour), _) => Ok(Unit::Hour),
        (Ok(RateLimitUnit::Day), _) => Ok(Unit::Day),
        // WEEK, added to the proto after the version `envoy-types` carries.
        (Err(_), 7) => Ok(Unit::Week),
        (Ok(RateLimitUnit::Month | RateLimitUnit::Year), _) => Err(Status::invalid_argument(
            "a descriptor's limit override in months or years is not supported: they vary in length",
        )),
        _ => Err(Status::invalid_argument(format!("a descriptor's limit override has no known unit ({proto})"))),
    }
}

fn key_too_long(len: usize) -> Status {
    Status::invalid_argument(format!(
        "descriptor too long: its state key would be {len} bytes, over the {} allowed",
        sluice_core::Key::MAX_LEN
    ))
}

/// The hits a descriptor adds: its own `hits_addend` when set, where 0 only looks (checks
/// without counting); else the request's, where 0 (the field left unset) means 1. As
/// envoyproxy/ratelimit reads them.
/// The hits to charge `descriptor`: its own `hits_addend` when set (0 only checks), else the
/// request's, where 0 (unset) means 1. `is_negative_hits` is not read: the hits are charged,
/// as envoyproxy/ratelimit charges them (`docs/envoy.md`, "Hits").
fn hits_of(descriptor: &RateLimitDescriptor, request_hits: u32) -> u64 {
    match &descriptor.hits_addend {
        Some(own) => own.value,
        None => u64::from(request_hits.max(1)),
    }
}

fn grpc_error(error: CheckError) -> Status {
    match error {
        CheckError::Store(StoreError::Unavailable(cause)) => Status::unavailable(format!("store unavailable: {cause}")),
        CheckError::Store(StoreError::Refused(message)) => Status::invalid_argument(message),
        // As for a store that is down: Envoy's `failure_mode_deny` decides.
        CheckError::Store(full @ StoreError::Full { .. }) => Status::unavailable(full.to_string()),
        CheckError::InvalidKey(message) => Status::invalid_argument(message),
        other => Status::internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_are_the_descriptors_own_else_the_requests_and_a_negative_flag_still_charges() {
        let own = |hits: Option<u64>, negative: bool| RateLimitDescriptor {
            hits_addend: hits.map(|value| envoy_types::pb::google::protobuf::UInt64Value { value }),
            is_negative_hits: negative,
            ..RateLimitDescriptor::default()
        };
        assert_eq!(hits_of(&own(Some(5), false), 3), 5);
        assert_eq!(hits_of(&own(Some(0), false), 3), 0, "0 only checks");
        assert_eq!(hits_of(&own(None, false), 3), 3);
        assert_eq!(hits_of(&own(None, false), 0), 1, "an unset request addend means 1");
        assert_eq!(hits_of(&own(Some(5), true), 3), 5, "is_negative_hits is charged, as envoyproxy/ratelimit does");
        assert_eq!(hits_of(&own(None, true), 0), 1);
    }

    /// As for a store that is down: Envoy's `failure_mode_deny` decides.
    #[test]
    fn a_memory_store_full_of_limited_keys_answers_unavailable() {
        let status = grpc_error(CheckError::Store(StoreError::Full { max_keys: 16, max_memory: 1 << 20 }));
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(status.message().contains("full of limited keys"), "{}", status.message());
    }
}
