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

use crate::runtime::activity::Activity;
use crate::runtime::handoff::{Connection, Slot};
use crate::runtime::idle::{Timeouts, close_when_idle};
use crate::runtime::intake::Home;
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

impl GrpcSocket {
    /// The socket of `accepted`, whose tasks run at `home`, watched with `timeouts.idle`
    /// (its streams as its requests) on the calling worker's runtime.
    pub(crate) fn watched(accepted: Connection, home: Home, timeouts: Timeouts) -> GrpcSocket {
        let activity = Arc::clone(accepted.slot.activity());
        let connection = GrpcConnection { peer: accepted.peer, activity, home };
        let (ended, watched) = oneshot::channel();
        tokio::spawn(watch(connection.clone(), timeouts, watched));
        GrpcSocket { stream: accepted.stream, connection, _slot: accepted.slot, _ended: ended }
    }

    /// What its requests carry in their extensions.
    pub(crate) fn connection(&self) -> &GrpcConnection {
        &self.connection
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
