//! Accepted connections, handed to the workers ([`crate::workers`]) in turn.
//!
//! The main runtime accepts; each worker serves what it is handed. Connections are spread
//! in turn rather than by the kernel (`SO_REUSEPORT` hashes), so that two connections, as an
//! Envoy with two workers opens, land on two cores.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A connection accepted on the main runtime, on its way to a worker.
type Accepted = (std::net::TcpStream, SocketAddr);

/// Hands the connections accepted on one listener to the workers, in turn.
#[derive(Debug)]
pub(crate) struct Handoff {
    queues: Vec<mpsc::UnboundedSender<Accepted>>,
    next: AtomicUsize,
}

impl Handoff {
    /// A handoff to `count` workers, and each worker's queue of connections.
    pub(crate) fn new(count: usize) -> (Handoff, Vec<Queue>) {
        let (senders, queues) = (0..count.max(1))
            .map(|_| {
                let (sender, receiver) = mpsc::unbounded_channel();
                (sender, Queue { receiver })
            })
            .unzip();
        (Handoff { queues: senders, next: AtomicUsize::new(0) }, queues)
    }

    /// Accepts connections on `listener` and hands them out until `stop` completes; the
    /// workers' queues then end.
    pub(crate) async fn accept(self, listener: TcpListener, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            let accepted = tokio::select! {
                () = &mut stop => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => self.hand_out(stream, peer),
                Err(error) => pause_after(&error).await,
            }
        }
    }

    fn hand_out(&self, stream: TcpStream, peer: SocketAddr) {
        // No Nagle: small replies must not wait for the client's ACKs.
        let _ = stream.set_nodelay(true);
        // Moved as a std socket: each worker registers it with its own runtime.
        let mut accepted = match stream.into_std() {
            Ok(stream) => (stream, peer),
            Err(error) => return tracing::warn!(%error, %peer, "cannot hand a connection to a worker"),
        };
        // A worker that has stopped is skipped, so no connection is handed to nobody.
        for _ in 0..self.queues.len() {
            let index = self.next.fetch_add(1, Ordering::Relaxed) % self.queues.len();
            match self.queues[index].send(accepted) {
                Ok(()) => return,
                Err(returned) => accepted = returned.0,
            }
        }
        tracing::error!(%peer, "no worker is running: connection closed");
    }
}

/// After a failed `accept`: a connection reset before it was accepted is not worth a pause;
/// running out of file descriptors is, so as not to spin.
async fn pause_after(error: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!(%error, "cannot accept a connection; retrying in 1 s");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
}

/// One worker's share of the connections accepted on a listener.
#[derive(Debug)]
pub(crate) struct Queue {
    receiver: mpsc::UnboundedReceiver<Accepted>,
}

impl Queue {
    /// The next connection, registered with the calling worker's runtime; `None` once the
    /// listener has stopped.
    pub(crate) async fn next(&mut self) -> Option<(TcpStream, SocketAddr)> {
        while let Some((stream, peer)) = self.receiver.recv().await {
            match TcpStream::from_std(stream) {
                Ok(stream) => return Some((stream, peer)),
                Err(error) => tracing::warn!(%error, %peer, "cannot serve a connection"),
            }
        }
        None
    }

    /// The connections as a stream, as tonic takes them.
    pub(crate) fn into_stream(self) -> impl futures_util::Stream<Item = io::Result<TcpStream>> {
        futures_util::stream::unfold(self, |mut queue| async move {
            let (stream, _) = queue.next().await?;
            Some((Ok(stream), queue))
        })
    }
}

/// The address of the client of an HTTP connection (axum's `ConnectInfo`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client(pub(crate) SocketAddr);

impl Client {
    /// Whether the client is on the loopback interface, also when a dual-stack listener
    /// (`[::]`) sees an IPv4 client as an IPv4-mapped address (`::ffff:127.0.0.1`).
    pub(crate) fn is_loopback(&self) -> bool {
        self.0.ip().to_canonical().is_loopback()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[test]
    fn loopback_clients_are_recognised_through_a_dual_stack_listener() {
        let client = |address: &str| Client(address.parse().unwrap());
        assert!(client("127.0.0.1:5000").is_loopback());
        assert!(client("[::1]:5000").is_loopback());
        assert!(client("[::ffff:127.0.0.1]:5000").is_loopback(), "IPv4 loopback seen on [::]");
        assert!(!client("[::ffff:192.0.2.1]:5000").is_loopback());
        assert!(!client("192.0.2.1:5000").is_loopback());
    }

    #[tokio::test]
    async fn connections_are_handed_to_the_workers_in_turn_until_the_listener_stops() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (handoff, mut queues) = Handoff::new(3);
        let (stop, stopped) = oneshot::channel::<()>();
        let accepting = tokio::spawn(handoff.accept(listener, async {
            let _ = stopped.await;
        }));
        let mut clients = Vec::new();
        for _ in 0..6 {
            clients.push(TcpStream::connect(address).await.unwrap());
        }
        let sent: HashSet<SocketAddr> = clients.iter().map(|client| client.local_addr().unwrap()).collect();
        let mut received = HashSet::new();
        for queue in &mut queues {
            for _ in 0..2 {
                let next = tokio::time::timeout(Duration::from_secs(5), queue.next()).await;
                let (stream, peer) = next.expect("a connection for each worker in turn").unwrap();
                assert_eq!(stream.peer_addr().unwrap(), peer);
                assert!(stream.nodelay().unwrap());
                received.insert(peer);
            }
        }
        assert_eq!(received, sent);
        // A worker that stopped is skipped: its share goes to the others.
        let stopped_worker = queues.remove(0);
        drop(stopped_worker);
        let _client = TcpStream::connect(address).await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), queues[0].next()).await;
        assert!(next.expect("the next running worker gets the connection").is_some());
        stop.send(()).unwrap();
        accepting.await.unwrap();
        for queue in &mut queues {
            assert!(queue.next().await.is_none(), "a queue ends when its listener stops");
        }
    }
}
