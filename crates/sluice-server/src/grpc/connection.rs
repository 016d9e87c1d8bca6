//! The gRPC listener's connections, as tonic takes them: each socket holds its listener's
//! slot, tells the streams' layer ([`crate::grpc::message_deadline`]) what its connection
//! is doing, and has a watchdog ([`crate::runtime::idle`]) that closes it once it has had
//! no stream open for the idle timeout, or when its listener, full, asks it to make room.
//!
//! tonic serves the connection in a task of its own, out of reach: the watchdog closes it
//! through its socket, whose next read ends it (end of file), and hyper drops the
//! connection, with no GOAWAY. A connection is closed so when it has no stream open, or,
//! when the listener is full, when its client holds more than its share
//! ([`crate::runtime::handoff`]); Envoy opens a new one for its next call.

use crate::runtime::activity::Activity;
use crate::runtime::handoff::{Queue, Slot};
use crate::runtime::idle::{Timeouts, close_when_idle};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tonic::transport::server::Connected;

/// What each request of a gRPC connection carries in its extensions (tonic's connect info).
///
/// In place of tonic's `TcpConnectInfo`: `Request::remote_addr` is `None`; read
/// [`GrpcConnection::peer`] instead.
#[derive(Clone, Debug)]
pub(crate) struct GrpcConnection {
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// What the connection is doing: its streams count as its requests.
    pub(crate) activity: Arc<Activity>,
}

/// A gRPC connection's socket: holds its slot, and reads an end of file once the
/// connection is asked to close.
#[derive(Debug)]
pub(crate) struct GrpcSocket {
    stream: TcpStream,
    connection: GrpcConnection,
    _slot: Slot,
    /// Dropped with the socket: tells the watchdog the connection has ended.
    _ended: oneshot::Sender<()>,
}

impl Connected for GrpcSocket {
    type ConnectInfo = GrpcConnection;

    fn connect_info(&self) -> GrpcConnection {
        self.connection.clone()
    }
}

impl AsyncRead for GrpcSocket {
    fn poll_read(mut self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.connection.activity.is_closing() {
            return Poll::Ready(Ok(()));
        }
        match Pin::new(&mut self.stream).poll_read(context, buf) {
            // Waiting for bytes: be woken by a close request too.
            Poll::Pending if self.connection.activity.poll_closing(context) => Poll::Ready(Ok(())),
            polled => polled,
        }
    }
}

crate::runtime::write_through::write_through!(GrpcSocket);

/// The connections of `queue` as a stream, as tonic takes them, each watched with
/// `timeouts.idle` (its streams as its requests) on the calling worker's runtime.
pub(crate) fn connections(
    queue: Queue,
    timeouts: Timeouts,
) -> impl futures_util::Stream<Item = io::Result<GrpcSocket>> {
    futures_util::stream::unfold(queue, move |mut queue| async move {
        let accepted = queue.next().await?;
        let activity = Arc::clone(accepted.slot.activity());
        let connection = GrpcConnection { peer: accepted.peer, activity };
        let (ended, watched) = oneshot::channel();
        tokio::spawn(watch(connection.clone(), timeouts, watched));
        let socket = GrpcSocket { stream: accepted.stream, connection, _slot: accepted.slot, _ended: ended };
        Some((Ok(socket), queue))
    })
}

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
