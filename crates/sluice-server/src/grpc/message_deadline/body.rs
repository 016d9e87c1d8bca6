//! A stream's request body as tonic reads it: whole messages only, each within the
//! message timeout ([`super`]).

use super::{MAX_WAITING_STREAMS, MessageLimits, Waiting, WaitingStream};
use crate::grpc::framing::Framing;
use crate::runtime::activity::InFlight;
use bytes::{Bytes, BytesMut};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::time::Sleep;
use tonic::Status;
use tonic::body::Body;

/// A stream's request body, handed on one whole message at a time, each within the timeout.
#[derive(Debug)]
pub(crate) struct MessageDeadline {
    inner: Body,
    limits: MessageLimits,
    framing: Framing,
    /// The bytes of the message in progress.
    held: BytesMut,
    /// A frame to hand on after `held`.
    queued: Option<Frame<Bytes>>,
    /// Whether a message has come in full.
    any_message: bool,
    /// When the message in progress times out, and its place among the waiting streams;
    /// taken once it is waited for.
    deadline: Option<(Pin<Box<Sleep>>, WaitingStream)>,
    waiting: Arc<Waiting>,
    /// Messages too large are handed on as they come, for tonic to refuse.
    oversized: bool,
    /// The stream, counted in flight on its connection while its request is open.
    _stream: Option<InFlight>,
}

impl MessageDeadline {
    /// `inner`, read within `limits`, waiting among `waiting`; `stream` is dropped with it.
    pub(crate) fn new(
        inner: Body,
        limits: MessageLimits,
        waiting: Arc<Waiting>,
        stream: Option<InFlight>,
    ) -> MessageDeadline {
        MessageDeadline {
            waiting,
            inner,
            limits,
            framing: Framing::default(),
            held: BytesMut::new(),
            queued: None,
            any_message: false,
            deadline: None,
            oversized: false,
            _stream: stream,
        }
    }

    /// Whether a message is awaited against the clock: one has begun, or none came yet.
    fn awaiting_message(&self) -> bool {
        !self.oversized && (self.framing.mid_message() || !self.any_message)
    }

    /// Reads `data`: what of it (and of the bytes held) is whole messages, to hand on now.
    fn read(&mut self, data: &Bytes) -> Option<Bytes> {
        let boundary = self.framing.read(data);
        if self.framing.longest_declared > self.limits.max_message {
            self.oversized = true;
            self.held.extend_from_slice(data);
            return Some(self.held.split().freeze());
        }
        if boundary == 0 {
            self.held.extend_from_slice(data);
            return None;
        }
        (self.any_message, self.deadline) = (true, None);
        let whole = if self.held.is_empty() {
            data.slice(..boundary)
        } else {
            self.held.extend_from_slice(&data[..boundary]);
            self.held.split().freeze()
        };
        self.held.extend_from_slice(&data[boundary..]);
        Some(whole)
    }

    /// `Pending`, or the error that ends a message that did not come in time, or that
    /// finds no place to wait.
    fn wait(&mut self, context: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if !self.awaiting_message() {
            return Poll::Pending;
        }
        let timeout = self.limits.timeout;
        if self.deadline.is_none() {
            let Some(place) = self.waiting.enter() else {
                let message = format!("{MAX_WAITING_STREAMS} streams of this worker wait for their message already");
                return self.end(Status::resource_exhausted(message));
            };
            self.deadline = Some((Box::pin(tokio::time::sleep(timeout)), place));
        }
        if let Some((deadline, _)) = &mut self.deadline {
            ready!(deadline.as_mut().poll(context));
        }
        let message = format!("the request message did not come in full within {timeout:?} (grpc_message_timeout)");
        self.end(Status::deadline_exceeded(message))
    }

    /// Ends the body with `status`, letting go of what it holds.
    fn end(&mut self, status: Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        (self.held, self.deadline) = (BytesMut::new(), None);
        self.oversized = true; // nothing more is awaited
        Poll::Ready(Some(Err(status)))
    }
}

impl HttpBody for MessageDeadline {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if let Some(frame) = this.queued.take() {
            return Poll::Ready(Some(Ok(frame)));
        }
        loop {
            let frame = match Pin::new(&mut this.inner).poll_frame(context) {
                Poll::Pending => return this.wait(context),
                Poll::Ready(None) if this.held.is_empty() => return Poll::Ready(None),
                // The body ended mid-message: tonic says so.
                Poll::Ready(None) => return Poll::Ready(Some(Ok(Frame::data(this.held.split().freeze())))),
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            match frame.into_data() {
                Ok(data) => {
                    if let Some(whole) = this.read(&data) {
                        return Poll::Ready(Some(Ok(Frame::data(whole))));
                    }
                }
                Err(frame) if this.held.is_empty() => return Poll::Ready(Some(Ok(frame))),
                Err(frame) => {
                    this.queued = Some(frame);
                    return Poll::Ready(Some(Ok(Frame::data(this.held.split().freeze()))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream() && self.held.is_empty() && self.queued.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use std::convert::Infallible;
    use std::time::Duration;
    use tokio::sync::mpsc;

    const LIMITS: MessageLimits = MessageLimits { timeout: Duration::from_secs(1), max_message: 1024 };

    /// A body fed chunk by chunk through the returned sender, read through [`MessageDeadline`].
    fn fed_among(waiting: &Arc<Waiting>) -> (mpsc::UnboundedSender<Bytes>, MessageDeadline) {
        let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
        let frames = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let chunk = receiver.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(chunk)), receiver))
        });
        let body = StreamBody::new(frames);
        (sender, MessageDeadline::new(Body::new(body), LIMITS, Arc::clone(waiting), None))
    }

    fn fed() -> (mpsc::UnboundedSender<Bytes>, MessageDeadline) {
        fed_among(&Arc::new(Waiting::new(MAX_WAITING_STREAMS)))
    }

    fn message(body: &[u8]) -> Bytes {
        let mut framed = vec![0];
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(body);
        framed.into()
    }

    /// The next frame's data, or the error that ended the body.
    async fn next(body: &mut MessageDeadline) -> Result<Bytes, Status> {
        let frame = body.frame().await.expect("a frame")?;
        Ok(frame.into_data().expect("data"))
    }

    // Time is paused: the timeout is exact, whatever else the machine runs.
    #[tokio::test(start_paused = true)]
    async fn a_message_in_one_chunk_passes_as_is_and_the_gap_before_the_next_is_not_bounded() {
        let (sender, mut body) = fed();
        sender.send(message(b"first")).unwrap();
        assert_eq!(next(&mut body).await.unwrap(), message(b"first"));
        let later = {
            let sender = sender.clone();
            async move {
                tokio::time::sleep(LIMITS.timeout * 30).await;
                sender.send(message(b"second")).unwrap();
            }
        };
        let (second, ()) = tokio::join!(next(&mut body), later);
        assert_eq!(second.unwrap(), message(b"second"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_in_pieces_is_handed_on_whole_once_it_came_in_time() {
        let (sender, mut body) = fed();
        let whole = message(b"split across frames");
        let feed = async {
            for piece in whole.chunks(4) {
                tokio::time::sleep(LIMITS.timeout / 10).await;
                sender.send(Bytes::copy_from_slice(piece)).unwrap();
            }
        };
        let (read, ()) = tokio::join!(next(&mut body), feed);
        assert_eq!(read.unwrap(), whole);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_that_stalls_after_its_prefix_ends_the_body_after_the_timeout() {
        let (sender, mut body) = fed();
        sender.send(message(b"first")).unwrap();
        assert!(next(&mut body).await.is_ok());
        tokio::time::sleep(LIMITS.timeout * 5).await; // between messages: not timed
        let prefix = message(&[0; 1000]).slice(..5);
        sender.send(prefix).unwrap();
        let started = tokio::time::Instant::now();
        let error = next(&mut body).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::DeadlineExceeded, "{error}");
        assert_eq!(started.elapsed(), LIMITS.timeout);
        assert!(body.held.capacity() == 0, "the bytes held are let go");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_whose_first_message_never_comes_ends_after_the_timeout() {
        let (_sender, mut body) = fed();
        let started = tokio::time::Instant::now();
        assert_eq!(next(&mut body).await.unwrap_err().code(), tonic::Code::DeadlineExceeded);
        assert_eq!(started.elapsed(), LIMITS.timeout);
    }

    #[tokio::test]
    async fn an_oversized_message_is_handed_on_at_once_for_tonic_to_refuse() {
        let (sender, mut body) = fed();
        let prefix = message(&[0; 2000]).slice(..5);
        sender.send(prefix.clone()).unwrap();
        assert_eq!(next(&mut body).await.unwrap(), prefix);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_past_the_waiting_ones_is_refused_at_once_until_one_leaves() {
        let waiting = Arc::new(Waiting::new(1));
        let (first_sender, mut first) = fed_among(&waiting);
        let (_second_sender, mut second) = fed_among(&waiting);
        let (third_sender, mut third) = fed_among(&waiting);
        let stalled = tokio::time::timeout(LIMITS.timeout / 2, next(&mut first)).await;
        assert!(stalled.is_err(), "the first waits");
        assert_eq!(next(&mut second).await.unwrap_err().code(), tonic::Code::ResourceExhausted, "no place left");
        first_sender.send(message(b"at last")).unwrap();
        assert_eq!(next(&mut first).await.unwrap(), message(b"at last"), "it leaves once its message came");
        third_sender.send(message(b"")).unwrap();
        assert!(next(&mut third).await.is_ok());
        drop(first);
        let (_fourth_sender, mut fourth) = fed_among(&waiting);
        assert_eq!(next(&mut fourth).await.unwrap_err().code(), tonic::Code::DeadlineExceeded, "a place was free");
    }
}
