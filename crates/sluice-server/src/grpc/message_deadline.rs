//! Bounds on what a gRPC stream may make the server hold while its request trickles in.
//!
//! tonic reserves a message's declared length as soon as its 5-byte prefix arrives, and
//! waits for the rest for as long as the client answers pings: 5 000 streams each sending a
//! prefix and nothing more held 92 KB apiece. Here each stream's request body is read
//! through [`MessageDeadline`], which
//! - holds the bytes of a message until it has come in full, and only then hands them to
//!   tonic, so a stalled stream holds the bytes its client sent, not what it declared;
//! - ends a message that has not come in full within `grpc_message_timeout` (counted from
//!   the stream's opening for the first message, from its first byte for the next ones)
//!   with `DEADLINE_EXCEEDED`: tonic answers the call so, and the stream is reset;
//! - lets at most [`MAX_WAITING_STREAMS`] streams of a worker wait for the rest of a
//!   message at once: one more is answered `RESOURCE_EXHAUSTED` at once. So a flood of
//!   stalled streams holds at most that many per worker, whatever the connections and
//!   streams it opens.
//!
//! The time between two messages is not bounded: a long-lived bidirectional stream that
//! sends a message now and then is healthy. A message in one DATA frame (every Envoy
//! check) passes through untouched, with no timer.
//!
//! Each stream also counts as a request of its connection while its request is open, so
//! the idle watchdog ([`crate::runtime::idle`]) closes only connections with no stream.

mod body;

pub(crate) use body::MessageDeadline;

use crate::grpc::connection::GrpcConnection;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::codegen::http::Request;
use tower::{Layer, Service};

/// The most streams of one worker that may wait for the rest of a message at once. A
/// message in one DATA frame never waits; 1 024 stalled streams hold about 14 MiB.
pub(crate) const MAX_WAITING_STREAMS: usize = 1024;

/// The bounds on one stream's messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MessageLimits {
    /// How long a message may take to come in full.
    pub(crate) timeout: Duration,
    /// The largest message tonic accepts: a larger one's bytes are handed on at once, for
    /// tonic to refuse.
    pub(crate) max_message: usize,
}

/// Reads every stream's request body through [`MessageDeadline`]; one per worker, whose
/// streams share its count of streams waiting.
#[derive(Clone, Debug)]
pub(crate) struct MessageDeadlineLayer {
    limits: MessageLimits,
    waiting: Arc<Waiting>,
}

impl MessageDeadlineLayer {
    /// Streams read within `limits`, at most [`MAX_WAITING_STREAMS`] waiting at once.
    pub(crate) fn new(limits: MessageLimits) -> MessageDeadlineLayer {
        MessageDeadlineLayer { limits, waiting: Arc::new(Waiting::new(MAX_WAITING_STREAMS)) }
    }
}

impl<S> Layer<S> for MessageDeadlineLayer {
    type Service = MessageDeadlines<S>;

    fn layer(&self, inner: S) -> MessageDeadlines<S> {
        MessageDeadlines { inner, limits: self.limits, waiting: Arc::clone(&self.waiting) }
    }
}

/// The streams waiting for the rest of a message, and how many may.
#[derive(Debug)]
pub(crate) struct Waiting {
    count: AtomicUsize,
    max: usize,
}

impl Waiting {
    /// Room for `max` waiting streams.
    pub(crate) fn new(max: usize) -> Waiting {
        Waiting { count: AtomicUsize::new(0), max }
    }

    /// A place among the waiting streams, if one is left.
    fn enter(self: &Arc<Self>) -> Option<WaitingStream> {
        let entered = self
            .count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| (count < self.max).then_some(count + 1));
        entered.ok().map(|_| WaitingStream(Arc::clone(self)))
    }
}

/// A stream's place among the waiting ones; left when dropped.
#[derive(Debug)]
struct WaitingStream(Arc<Waiting>);

impl Drop for WaitingStream {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The gRPC router, each stream's request body read through [`MessageDeadline`].
#[derive(Clone, Debug)]
pub(crate) struct MessageDeadlines<S> {
    inner: S,
    limits: MessageLimits,
    waiting: Arc<Waiting>,
}

impl<S: Service<Request<Body>>> Service<Request<Body>> for MessageDeadlines<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<Body>) -> S::Future {
        let stream = request.extensions().get::<GrpcConnection>().map(|connection| connection.activity.begin());
        let (limits, waiting) = (self.limits, Arc::clone(&self.waiting));
        self.inner.call(request.map(|body| Body::new(MessageDeadline::new(body, limits, waiting, stream))))
    }
}
