//! A log line for gRPC calls Sluice does not serve.
//!
//! tonic answers a call to an unknown service or method with `UNIMPLEMENTED` and logs
//! nothing, so an Envoy pointed at the wrong service (an older API version, or a typo in a
//! proxy's route) fails on every request with no trace here. This layer
//! logs such calls: the first at once, then at most once a minute with their count.

use crate::runtime::rarely::Rarely;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaServiceServer;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use parking_lot::Mutex;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::codegen::http::Request;
use tonic::server::NamedService;
use tower::{Layer, Service};

/// The methods Sluice serves over gRPC, as their paths, joined by `, `.
fn served_paths() -> String {
    let rls = <RateLimitServiceServer<()> as NamedService>::NAME;
    let rlqs = <RateLimitQuotaServiceServer<()> as NamedService>::NAME;
    format!("/{rls}/ShouldRateLimit, /{rlqs}/StreamRateLimitQuotas")
}

/// Wraps the gRPC router so that calls to what it does not serve are logged.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogUnknownCalls {
    log: Arc<Mutex<Rarely>>,
}

impl<S> Layer<S> for LogUnknownCalls {
    type Service = LoggedCalls<S>;

    fn layer(&self, inner: S) -> LoggedCalls<S> {
        LoggedCalls { inner, log: Arc::clone(&self.log), served: served_paths().into() }
    }
}

/// The gRPC router, logging calls it cannot serve.
#[derive(Clone, Debug)]
pub(crate) struct LoggedCalls<S> {
    inner: S,
    log: Arc<Mutex<Rarely>>,
    served: Arc<str>,
}

impl<S, B> Service<Request<B>> for LoggedCalls<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<B>) -> S::Future {
        let path = request.uri().path();
        if !self.served.split(", ").any(|served| served == path)
            && let Some(calls) = self.log.lock().occurred(Instant::now())
        {
            tracing::warn!(
                path,
                calls,
                served = &*self.served,
                "gRPC call to a service or method Sluice does not serve, answered UNIMPLEMENTED \
                 (is Envoy's rate limit filter pointed at Sluice with transport_api_version V3?)"
            );
        }
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_paths_are_the_rate_limit_and_quota_services_methods() {
        assert_eq!(
            served_paths(),
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, \
             /envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"
        );
    }
}
