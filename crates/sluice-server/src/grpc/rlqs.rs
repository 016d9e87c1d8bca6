//! The Envoy rate limit quota service
//! (`envoy.service.rate_limit_quota.v3.RateLimitQuotaService`, gRPC): each stream checks
//! what its Envoy sends and passes it to the hub ([`crate::rlqs::hub`]), which answers
//! on the stream whenever an assignment changes.
//!
//! The first report names the stream's domain; a stream that sends none within
//! [`FIRST_REPORT_WITHIN`], or an empty one, ends with a clear error, as does one whose
//! report breaks a bound (see [`crate::rlqs::report`]) or changes domain.

use crate::grpc::connection::GrpcConnection;
use crate::rlqs::hub::{Event, HubHandle, Outbox};
use crate::rlqs::report;
use crate::rlqs::shares::StreamId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaService;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{RateLimitQuotaResponse, RateLimitQuotaUsageReports};
use futures_util::Stream;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

/// How long a new stream may take to send its first report (Envoy sends it at once).
pub(crate) const FIRST_REPORT_WITHIN: Duration = Duration::from_secs(10);

/// Responses a stream queues for its Envoy.
const RESPONSES_QUEUED: usize = 64;

/// The connection of a stream served with no connect info (not through the gRPC listener).
const UNKNOWN_PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// The responses of one stream, as tonic sends them.
type Responses = Pin<Box<dyn Stream<Item = Result<RateLimitQuotaResponse, Status>> + Send>>;

/// The RLQS of one worker, passing its streams to the process's hub.
#[derive(Debug)]
pub(crate) struct RateLimitQuotaGrpc {
    hub: HubHandle,
}

impl RateLimitQuotaGrpc {
    /// The service, passing streams to `hub`.
    pub(crate) fn new(hub: HubHandle) -> RateLimitQuotaGrpc {
        RateLimitQuotaGrpc { hub }
    }
}

#[tonic::async_trait]
impl RateLimitQuotaService for RateLimitQuotaGrpc {
    type StreamRateLimitQuotasStream = Responses;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Responses>, Status> {
        let connection = request.extensions().get::<GrpcConnection>().cloned();
        let mut inbound = request.into_inner();
        let first = match tokio::time::timeout(FIRST_REPORT_WITHIN, inbound.message()).await {
            Err(_) => return Err(Status::deadline_exceeded("no usage report within 10 s of the stream's start")),
            Ok(Err(status)) => return Err(status),
            Ok(Ok(None)) => return Err(Status::invalid_argument("the stream ended before its first usage report")),
            Ok(Ok(Some(first))) => first,
        };
        if first.domain.is_empty() {
            return Err(Status::invalid_argument("the first usage report must name a domain"));
        }
        let domain = first.domain.clone();
        let buckets = report::read(first, self.hub.bounds)?;
        let (outbox, responses): (Outbox, _) = mpsc::channel(RESPONSES_QUEUED);
        let stream = self.hub.new_stream();
        let peer = connection.as_ref().map_or(UNKNOWN_PEER, |connection| connection.peer);
        let open = Event::Open { stream, connection: peer, domain: domain.clone(), outbox };
        if !self.hub.open(open, Event::Report { stream, buckets }).await {
            return Err(Status::unavailable("the service is shutting down"));
        }
        let forwarding = forward(self.hub.clone(), stream, domain, inbound);
        match connection {
            // Later reports are read on the connection's worker, whatever runs this call.
            Some(connection) => connection.home.spawn_on_worker(forwarding),
            None => drop(tokio::spawn(forwarding)),
        }
        let responses = futures_util::stream::unfold(responses, |mut responses| async move {
            responses.recv().await.map(|response| (response.map_err(|status| *status), responses))
        });
        Ok(Response::new(Box::pin(responses)))
    }
}

/// Passes the stream's later reports to the hub until it ends (or breaks a rule).
async fn forward(hub: HubHandle, stream: StreamId, domain: String, mut inbound: Streaming<RateLimitQuotaUsageReports>) {
    loop {
        let event = match inbound.message().await {
            Ok(Some(reports)) => match check(reports, &domain, &hub) {
                Ok(event) => event(stream),
                Err(status) => Event::Fail { stream, status },
            },
            Ok(None) | Err(_) => Event::Close { stream },
        };
        let last = matches!(event, Event::Fail { .. } | Event::Close { .. });
        if !hub.send(event).await || last {
            return;
        }
    }
}

/// A later report, checked: its domain, when given, must be the stream's.
fn check(
    reports: RateLimitQuotaUsageReports,
    domain: &str,
    hub: &HubHandle,
) -> Result<impl FnOnce(StreamId) -> Event, Status> {
    if !reports.domain.is_empty() && reports.domain != domain {
        return Err(Status::invalid_argument(format!(
            "a stream's domain cannot change: it began in `{domain}`, a report names `{}`",
            reports.domain
        )));
    }
    let buckets = report::read(reports, hub.bounds)?;
    Ok(move |stream| Event::Report { stream, buckets })
}
