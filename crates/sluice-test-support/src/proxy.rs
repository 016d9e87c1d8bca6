//! A TCP proxy on a free loopback port whose target can be moved, as a failover moves a DNS
//! name or a virtual IP: connections made after the move reach the new target, those made
//! before stay with the old one.

use parking_lot::Mutex;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The proxy; it stops accepting when dropped.
#[derive(Debug)]
pub struct MovableProxy {
    address: SocketAddr,
    target: Arc<Mutex<u16>>,
    accepting: JoinHandle<()>,
}

impl MovableProxy {
    /// A proxy to `127.0.0.1:target_port`, accepting on the runtime it is started from.
    pub async fn start(target_port: u16) -> MovableProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a loopback port for the proxy");
        let address = listener.local_addr().expect("the proxy's address");
        let target = Arc::new(Mutex::new(target_port));
        let accepting = tokio::spawn(accept(listener, Arc::clone(&target)));
        MovableProxy { address, target, accepting }
    }

    /// The `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.address)
    }

    /// Sends the connections made from now on to `127.0.0.1:port`.
    pub fn move_to(&self, port: u16) {
        *self.target.lock() = port;
    }
}

impl Drop for MovableProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept(listener: TcpListener, target: Arc<Mutex<u16>>) {
    while let Ok((mut client, _)) = listener.accept().await {
        let port = *target.lock();
        tokio::spawn(async move {
            if let Ok(mut server) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await {
                // Ends when either side closes; an error only ends this connection.
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
    }
}
