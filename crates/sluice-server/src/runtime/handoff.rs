//! Accepted connections, handed to the workers ([`crate::runtime::workers`]) in turn.
//!
//! The main runtime accepts; each worker serves what it is handed. Connections are spread
//! in turn rather than by the kernel (`SO_REUSEPORT` hashes), so that two connections, as an
//! Envoy with two workers opens, land on two cores. Each connection holds one of its
//! listener's slots ([`Slots`]) until it closes; a full listener makes room by closing
//! one of its connections, an idle one first (see `handoff/room.rs`).

mod refusals;
mod room;
mod slots;

pub(crate) use slots::{Slot, Slots, Taken};

use crate::runtime::rarely::Rarely;
use refusals::AcceptErrors;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A connection accepted on the main runtime, on its way to a worker.
type Accepted = (std::net::TcpStream, SocketAddr, Slot);

/// Hands the connections accepted on one listener to the workers, in turn.
#[derive(Debug)]
pub(crate) struct Handoff {
    queues: Vec<mpsc::UnboundedSender<Accepted>>,
    next: AtomicUsize,
    slots: Slots,
    /// The listener, as logs name it (`HTTP`, `gRPC`).
    listener: &'static str,
}

impl Handoff {
    /// A handoff to `count` workers of the connections of `listener` (named so in logs),
    /// at most `max_connections` at once, and each worker's queue of connections.
    pub(crate) fn new(count: usize, max_connections: usize, listener: &'static str) -> (Handoff, Vec<Queue>) {
        let (senders, queues) = (0..count.max(1))
            .map(|_| {
                let (sender, receiver) = mpsc::unbounded_channel();
                (sender, Queue { receiver })
            })
            .unzip();
        let slots = Slots::new(max_connections);
        (Handoff { queues: senders, next: AtomicUsize::new(0), slots, listener }, queues)
    }

    /// Accepts connections on `listener` and hands them out until `stop` completes; the
    /// workers' queues then end. When the listener is full, a connection is closed to make
    /// room ([`room`]); when none may be, the new one is closed at once.
    pub(crate) async fn accept(self, listener: TcpListener, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let mut errors = AcceptErrors::new(self.listener);
        let mut refusals = Rarely::default();
        loop {
            let accepted = tokio::select! {
                () = &mut stop => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    let pause = errors.failed(&error);
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(pause) => continue,
                    }
                }
            };
            errors.succeeded();
            match self.slots.take(peer.ip()) {
                Taken::Free(slot) => self.hand_out(stream, peer, slot),
                Taken::MadeRoom(slot) => {
                    tracing::debug!(%peer, listener = self.listener, "full: closed a connection to make room");
                    self.hand_out(stream, peer, slot);
                }
                Taken::Full => self.refuse(stream, peer, &mut refusals),
            }
        }
    }

    /// Closes a connection that found no free slot, logging it rarely.
    fn refuse(&self, stream: TcpStream, peer: SocketAddr, refusals: &mut Rarely) {
        drop(stream);
        if let Some(refused) = refusals.occurred(Instant::now()) {
            tracing::warn!(
                %peer,
                listener = self.listener,
                refused,
                "connection closed: the listener serves `max_connections` connections, each with a request in flight or of a client within its share"
            );
        }
    }

    fn hand_out(&self, stream: TcpStream, peer: SocketAddr, slot: Slot) {
        // No Nagle: small replies must not wait for the client's ACKs.
        let _ = stream.set_nodelay(true);
        // Moved as a std socket: each worker registers it with its own runtime.
        let mut accepted = match stream.into_std() {
            Ok(stream) => (stream, peer, slot),
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

/// A connection handed to a worker, with its listener's slot.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    /// Given back to the listener when dropped: keep it as long as the connection is open.
    pub(crate) slot: Slot,
}

/// One worker's share of the connections accepted on a listener.
#[derive(Debug)]
pub(crate) struct Queue {
    receiver: mpsc::UnboundedReceiver<Accepted>,
}

impl Queue {
    /// The next connection, registered with the calling worker's runtime; `None` once the
    /// listener has stopped.
    pub(crate) async fn next(&mut self) -> Option<Connection> {
        while let Some((stream, peer, slot)) = self.receiver.recv().await {
            match TcpStream::from_std(stream) {
                Ok(stream) => return Some(Connection { stream, peer, slot }),
                Err(error) => tracing::warn!(%error, %peer, "cannot serve a connection"),
            }
        }
        None
    }

    /// [`next`](Self::next), or `None` once `stop` has completed (shutdown has begun).
    pub(crate) async fn next_before(&mut self, stop: impl Future<Output = ()>) -> Option<Connection> {
        tokio::select! {
            () = stop => None,
            next = self.next() => next,
        }
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
        let (handoff, mut queues) = Handoff::new(3, 100, "test");
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
                let connection = next.expect("a connection for each worker in turn").unwrap();
                assert_eq!(connection.stream.peer_addr().unwrap(), connection.peer);
                assert!(connection.stream.nodelay().unwrap());
                received.insert(connection.peer);
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

    #[tokio::test]
    async fn a_connection_past_the_cap_is_closed_while_every_connection_is_busy() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (handoff, mut queues) = Handoff::new(1, 2, "test");
        tokio::spawn(handoff.accept(listener, std::future::pending()));
        let _clients = [TcpStream::connect(address).await.unwrap(), TcpStream::connect(address).await.unwrap()];
        let first = tokio::time::timeout(Duration::from_secs(5), queues[0].next()).await.unwrap().unwrap();
        let second = tokio::time::timeout(Duration::from_secs(5), queues[0].next()).await.unwrap().unwrap();
        let _requests = (first.slot.activity().begin(), second.slot.activity().begin());
        let mut extra = TcpStream::connect(address).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut [0; 16])).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "the third connection is closed: {read:?}");
        drop(first);
        let _later = TcpStream::connect(address).await.unwrap();
        let handed = tokio::time::timeout(Duration::from_secs(5), queues[0].next()).await;
        assert!(handed.expect("a freed slot takes the next connection").is_some());
    }
}
