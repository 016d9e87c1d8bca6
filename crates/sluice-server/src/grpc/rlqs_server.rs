//! The RLQS method as the gRPC listener serves it: tonic's generated server, with message
//! buffers sized for a stream that holds a few buckets.
//!
//! The generated `RateLimitQuotaServiceServer` decodes and encodes with tonic's default
//! buffers, 8 KiB each, reserved when a stream opens and kept while it lives: 16 KiB per
//! idle stream, most of what an Envoy's stream costs the service. Here each starts at
//! [`BUFFER`] bytes and grows as a message needs (a report of many buckets), so a stream
//! holding one bucket costs a fraction of that.

use crate::grpc::rlqs::RateLimitQuotaGrpc;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{RateLimitQuotaResponse, RateLimitQuotaUsageReports};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codec::{BufferSettings, Codec};
use tonic::codegen::{Body, BoxFuture, Service, StdError, http};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

/// The bytes each stream's message buffers start with (tonic's default: 8 KiB): a report
/// or a response of one bucket is about 100 bytes.
const BUFFER: usize = 256;

/// How many encoded bytes a response stream gathers before it hands them on (tonic's).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// The protobuf codec of the RLQS method.
type Prost = ProstCodec<RateLimitQuotaResponse, RateLimitQuotaUsageReports>;

/// The RLQS service, as the gRPC router takes it.
#[derive(Clone, Debug)]
pub(crate) struct RlqsServer {
    service: Arc<RateLimitQuotaGrpc>,
    /// The largest message a client may send (setting `max_grpc_message`).
    max_message: usize,
}

impl RlqsServer {
    /// Serves `service`, decoding messages of at most `max_message` bytes.
    pub(crate) fn new(service: RateLimitQuotaGrpc, max_message: usize) -> RlqsServer {
        RlqsServer { service: Arc::new(service), max_message }
    }
}

impl NamedService for RlqsServer {
    const NAME: &'static str = <RateLimitQuotaServiceServer<RateLimitQuotaGrpc> as NamedService>::NAME;
}

/// Prost's codec, with small buffers.
#[derive(Debug, Default)]
struct SmallBuffers;

impl Codec for SmallBuffers {
    type Encode = RateLimitQuotaResponse;
    type Decode = RateLimitQuotaUsageReports;
    type Encoder = <Prost as Codec>::Encoder;
    type Decoder = <Prost as Codec>::Decoder;

    fn encoder(&mut self) -> Self::Encoder {
        Prost::raw_encoder(BufferSettings::new(BUFFER, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        Prost::raw_decoder(BufferSettings::new(BUFFER, YIELD_THRESHOLD))
    }
}

/// The one method, as tonic's server calls it.
struct Method(Arc<RateLimitQuotaGrpc>);

impl StreamingService<RateLimitQuotaUsageReports> for Method {
    type Response = RateLimitQuotaResponse;
    type ResponseStream = <RateLimitQuotaGrpc as RateLimitQuotaService>::StreamRateLimitQuotasStream;
    type Future = BoxFuture<Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: Request<Streaming<RateLimitQuotaUsageReports>>) -> Self::Future {
        let service = Arc::clone(&self.0);
        Box::pin(async move { service.stream_rate_limit_quotas(request).await })
    }
}

impl<B> Service<http::Request<B>> for RlqsServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != format!("/{}/StreamRateLimitQuotas", Self::NAME) {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        let method = Method(Arc::clone(&self.service));
        let max_message = self.max_message;
        Box::pin(async move {
            let mut grpc = Grpc::new(SmallBuffers).apply_max_message_size_config(Some(max_message), None);
            Ok(grpc.streaming(method, request).await)
        })
    }
}
