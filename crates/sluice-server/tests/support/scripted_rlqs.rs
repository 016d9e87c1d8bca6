//! A scripted quota server (RLQS) for tests against a real Envoy: it never answers by itself.
//! The test pushes responses on the current stream, ends streams, and reads the reports
//! received. Envoy reaches it through a link the test can cut, as if the server were
//! killed (every connection reset, the port closed), and restore.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{RateLimitQuotaResponse, RateLimitQuotaUsageReports};
use futures_util::Stream;
use parking_lot::Mutex;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

/// One usage report, as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// Which stream carried it: 1 for the first one Envoy opened, and so on.
    pub stream: u32,
    /// When it arrived.
    pub at: Instant,
    /// Its buckets' usage.
    pub usages: Vec<BucketQuotaUsage>,
}

type Outbox = mpsc::UnboundedSender<Result<RateLimitQuotaResponse, Status>>;

#[derive(Default)]
struct Script {
    reports: Vec<Received>,
    /// When each stream opened, the first at 0.
    opened: Vec<Instant>,
    outbox: Option<Outbox>,
}

/// The server, listening (behind its link) until dropped.
pub struct ScriptedRlqs {
    script: Arc<Mutex<Script>>,
    server: JoinHandle<()>,
    link: Link,
}

impl ScriptedRlqs {
    /// A server on a free loopback port, and its link on another.
    pub async fn start() -> ScriptedRlqs {
        let script = Arc::new(Mutex::new(Script::default()));
        let incoming = TcpIncoming::bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        let target = incoming.local_addr().unwrap();
        let service = RateLimitQuotaServiceServer::new(Scripted(Arc::clone(&script)));
        let server = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming);
        let server = tokio::spawn(async move { server.await.unwrap() });
        ScriptedRlqs { script, server, link: Link::start(target).await }
    }

    /// The address Envoy should connect to (the link's).
    pub fn address(&self) -> SocketAddr {
        self.link.address
    }

    /// Sends a response of `actions` on the current stream.
    pub fn push(&self, actions: Vec<BucketAction>) {
        let script = self.script.lock();
        let outbox = script.outbox.as_ref().expect("an open stream to push on");
        outbox.send(Ok(RateLimitQuotaResponse { bucket_action: actions })).unwrap();
    }

    /// Ends the current stream with `status` (`None`: OK, the stream's end).
    pub fn end_stream(&self, status: Option<Status>) {
        let outbox = self.script.lock().outbox.take().expect("an open stream to end");
        if let Some(status) = status {
            outbox.send(Err(status)).unwrap();
        }
    }

    /// Resets every connection and closes the port, as a killed server's host does.
    pub fn kill(&self) {
        self.link.cut();
        self.script.lock().outbox = None;
    }

    /// Listens again on the same port.
    pub async fn revive(&self) {
        self.link.restore().await;
    }

    /// When stream `stream` (1 for the first) opened.
    pub fn opened(&self, stream: u32) -> Instant {
        self.script.lock().opened[usize::try_from(stream).unwrap() - 1]
    }

    /// Every report received so far.
    pub fn reports(&self) -> Vec<Received> {
        self.script.lock().reports.clone()
    }

    /// Waits (at most 15 s: three of Envoy's reports) for a report, among those received
    /// from the `skip`-th on, that `wanted` accepts.
    pub async fn report_after(&self, skip: usize, wanted: impl Fn(&Received) -> bool) -> Received {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(found) = self.reports().into_iter().skip(skip).find(&wanted) {
                return found;
            }
            assert!(Instant::now() < deadline, "no such report within 15 s; received: {:#?}", self.reports());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for ScriptedRlqs {
    fn drop(&mut self) {
        self.server.abort();
        self.link.cut();
    }
}

/// The service: each new stream becomes the current one.
struct Scripted(Arc<Mutex<Script>>);

type Responses = Pin<Box<dyn Stream<Item = Result<RateLimitQuotaResponse, Status>> + Send>>;

#[tonic::async_trait]
impl RateLimitQuotaService for Scripted {
    type StreamRateLimitQuotasStream = Responses;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Responses>, Status> {
        let (outbox, responses) = mpsc::unbounded_channel();
        let stream = {
            let mut script = self.0.lock();
            script.opened.push(Instant::now());
            script.outbox = Some(outbox);
            u32::try_from(script.opened.len()).unwrap()
        };
        tokio::spawn(record(Arc::clone(&self.0), stream, request.into_inner()));
        let responses = futures_util::stream::unfold(responses, |mut responses| async move {
            responses.recv().await.map(|response| (response, responses))
        });
        Ok(Response::new(Box::pin(responses)))
    }
}

/// Keeps the reports of `stream` until it ends.
async fn record(script: Arc<Mutex<Script>>, stream: u32, mut inbound: Streaming<RateLimitQuotaUsageReports>) {
    while let Ok(Some(reports)) = inbound.message().await {
        let received = Received { stream, at: Instant::now(), usages: reports.bucket_quota_usages };
        script.lock().reports.push(received);
    }
}

/// A TCP proxy to the server whose connections can all be reset at once.
struct Link {
    address: SocketAddr,
    target: SocketAddr,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Link {
    async fn start(target: SocketAddr) -> Link {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let link = Link { address: listener.local_addr().unwrap(), target, tasks: Arc::default() };
        link.accept(listener);
        link
    }

    fn accept(&self, listener: TcpListener) {
        let (target, tasks) = (self.target, Arc::clone(&self.tasks));
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                // Dropped with no linger, the socket is reset, not closed.
                client.set_zero_linger().unwrap();
                let pump = tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(target).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                tasks.lock().push(pump.abort_handle());
            }
        });
        self.tasks.lock().push(accepting.abort_handle());
    }

    /// Closes the port and resets every connection.
    fn cut(&self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }

    async fn restore(&self) {
        self.accept(TcpListener::bind(self.address).await.unwrap());
    }
}
