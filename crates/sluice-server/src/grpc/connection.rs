//! The gRPC listener's connections: each socket holds its listener's slot, tells the
//! streams' layer ([`crate::grpc::message_deadline`]) what its connection is doing, and
//! has a watchdog ([`crate::runtime::idle`]) that closes it once it has had no stream open
//! for the idle timeout, or when its listener, full, asks it to make room.
//!
//! hyper serves the connection in tasks that may be on the intake runtime or the worker
//! ([`crate::runtime::intake`]): the watchdog closes it through its socket, whose next
//! read ends it (end of file), and hyper drops the connection, with no GOAWAY. A
//! connection is closed so when it has no stream open, or, when the listener is full, when
//! its client holds more than its share ([`crate::runtime::handoff`]); Envoy opens a new
//! one for its next call.

use crate::grpc::frame_cursor::FrameCursor;
use crate::runtime::activity::Activity;
use crate::runtime::handoff::{Connection, Slot};
use crate::runtime::idle::{Timeouts, close_when_idle};
use crate::runtime::intake::{Home, Reading};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// What each request of a gRPC connection carries in its extensions.
///
/// `tonic::Request::remote_addr` is `None`; read [`GrpcConnection::peer`] instead.
#[derive(Clone, Debug)]
pub(crate) struct GrpcConnection {
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// What the connection is doing: its streams count as its requests.
    pub(crate) activity: Arc<Activity>,
    /// Where the connection's tasks run: a task a stream starts is spawned there.
    pub(crate) home: Home,
}

/// The most a young connection's socket reads at a time, into a buffer on the stack.
const YOUNG_READ: usize = 2048;

/// A gRPC connection's socket: holds its slot, reads an end of file once the connection
/// is asked to close, and while the connection is young, settles it at its second stream.
#[derive(Debug)]
pub(crate) struct GrpcSocket {
    stream: TcpStream,
    connection: GrpcConnection,
    /// Where the frames begin, while the connection is young.
    frames: FrameCursor,
    _slot: Slot,
    /// Dropped with the socket: tells the watchdog the connection has ended.
    _ended: oneshot::Sender<()>,
}

impl GrpcSocket {
    /// The socket of `accepted`, whose tasks run at `home`, watched with `timeouts.idle`
    /// (its streams as its requests) on the calling worker's runtime.
    pub(crate) fn watched(accepted: Connection, home: Home, timeouts: Timeouts) -> GrpcSocket {
        let activity = Arc::clone(accepted.slot.activity());
        let connection = GrpcConnection { peer: accepted.peer, activity, home };
        let (ended, watched) = oneshot::channel();
        tokio::spawn(watch(connection.clone(), timeouts, watched));
        let (stream, frames) = (accepted.stream, FrameCursor::new());
        GrpcSocket { stream, connection, frames, _slot: accepted.slot, _ended: ended }
    }

    /// Reads from the stream into `buf`, or an end of file once the connection is asked
    /// to close.
    fn poll_read_stream(&mut self, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.connection.activity.is_closing() {
            return Poll::Ready(Ok(()));
        }
        match Pin::new(&mut self.stream).poll_read(context, buf) {
            // Waiting for bytes: be woken by a close request too.
            Poll::Pending if self.connection.activity.poll_closing(context) => Poll::Ready(Ok(())),
            polled => polled,
        }
    }

    /// Reads a young connection's bytes no further than the end of the current frame
    /// part, and settles the connection once its second HEADERS frame begins
    /// ([`crate::runtime::intake`]).
    fn poll_read_young(&mut self, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut chunk = [0; YOUNG_READ];
        let limit = self.frames.next_read().min(YOUNG_READ).min(buf.remaining());
        let mut young = ReadBuf::new(&mut chunk[..limit]);
        std::task::ready!(self.poll_read_stream(context, &mut young))?;
        if self.frames.advance(young.filled()) >= 2 {
            self.connection.home.settle();
        }
        buf.put_slice(young.filled());
        Poll::Ready(Ok(()))
    }

    /// What its requests carry in their extensions.
    pub(crate) fn connection(&self) -> &GrpcConnection {
        &self.connection
    }
}

impl AsyncRead for GrpcSocket {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let socket = self.get_mut();
        match socket.connection.home.reading() {
            Reading::Settled => socket.poll_read_stream(context, buf),
            Reading::Young => socket.poll_read_young(context, buf),
            // Its task moves to the worker at its next poll, and reads there.
            Reading::Moving => {
                context.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

crate::runtime::write_through::write_through!(GrpcSocket);

/// Closes `connection` once it has had no stream open for the idle timeout, or when asked
/// to make room; returns when it has ended (`ended` completes).
async fn watch(connection: GrpcConnection, timeouts: Timeouts, ended: oneshot::Receiver<()>) {
    // No head timeout: HTTP/2 frames between streams (pings, settings) are no head.
    let timeouts = Timeouts { head: timeouts.idle, ..timeouts };
    let ended = async {
        let _ = ended.await;
    };
    let activity = &connection.activity;
    let ending = close_when_idle(activity, timeouts, ended, std::future::pending()).await;
    if ending.closes() {
        activity.close();
        let peer = connection.peer;
        tracing::debug!(%peer, ?ending, "closed a gRPC connection: idle, or to make room");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::handoff::Handoff;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::runtime::Handle;

    /// A frame of `kind` on stream 1 with a payload of `length` bytes.
    fn frame(kind: u8, length: u8) -> Vec<u8> {
        let mut frame = vec![0, 0, length, kind, 0, 0, 0, 0, 1];
        frame.resize(frame.len() + usize::from(length), 0);
        frame
    }

    #[tokio::test]
    async fn a_young_connection_is_read_up_to_its_second_headers_frame_then_on_its_worker_only() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (handoff, mut queues) = Handoff::new(1, 10, "test");
        tokio::spawn(handoff.accept(listener, std::future::pending()));
        let mut client = TcpStream::connect(address).await.unwrap();
        let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        for (kind, length) in [(0x4, 6), (0x1, 7), (0x0, 5)] {
            sent.extend(frame(kind, length));
        }
        let second_headers_end = sent.len() + 9;
        for (kind, length) in [(0x1, 7), (0x0, 5), (0x1, 7)] {
            sent.extend(frame(kind, length));
        }
        client.write_all(&sent).await.unwrap();
        let accepted = queues[0].next().await.unwrap();
        // Young for an hour: settled by its second HEADERS frame only, however loaded the machine.
        let home = Home::young_for(Handle::current(), Handle::current(), Duration::from_secs(3600));
        let patience = Duration::from_secs(10);
        let timeouts = Timeouts { idle: Duration::from_secs(60), head: Duration::from_secs(60) };
        let mut socket = GrpcSocket::watched(accepted, home.clone(), timeouts);
        let mut received = Vec::new();
        while home.reading() == Reading::Young {
            let mut buf = [0; 4096];
            let read = tokio::time::timeout(patience, socket.read(&mut buf)).await.unwrap().unwrap();
            assert!(read > 0, "the client's bytes are all there");
            received.extend_from_slice(&buf[..read]);
        }
        assert_eq!(received, sent[..second_headers_end], "read up to the second HEADERS frame's header");
        assert_eq!(home.reading(), Reading::Moving);
        let mut buf = [0; 4096];
        let waiting = tokio::time::timeout(Duration::from_millis(50), socket.read(&mut buf)).await;
        assert!(waiting.is_err(), "nothing more is read until the connection's task has moved");
        home.spawn_connection(async {});
        assert_eq!(home.reading(), Reading::Settled);
        while received.len() < sent.len() {
            let read = tokio::time::timeout(patience, socket.read(&mut buf)).await.unwrap().unwrap();
            assert!(read > 0);
            received.extend_from_slice(&buf[..read]);
        }
        assert_eq!(received, sent, "then the rest, on the worker");
    }
}
