//! A TCP proxy on a free loopback port in front of a Redis, whose link can be made slow,
//! silent or refusing, as a congested or partitioned network is.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the link does to the bytes sent from now on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Bytes pass at once.
    None,
    /// Each chunk read from either side is held this long before it is passed on.
    Delay(Duration),
    /// Bytes are held, in order, until the fault changes: a partition that heals.
    Silent,
    /// New connections are closed as soon as they are accepted; open ones are closed at
    /// their next byte.
    Refuse,
}

/// The proxy; it stops accepting when dropped (open connections end with their peers).
#[derive(Debug)]
pub struct FaultyLink {
    address: SocketAddr,
    fault: watch::Sender<Fault>,
    accepting: JoinHandle<()>,
}

impl FaultyLink {
    /// A proxy to `127.0.0.1:target_port`, passing bytes at once, on the runtime it is
    /// started from.
    pub async fn start(target_port: u16) -> FaultyLink {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a loopback port for the proxy");
        let address = listener.local_addr().expect("the proxy's address");
        let (fault, watching) = watch::channel(Fault::None);
        let accepting = tokio::spawn(accept(listener, target_port, watching));
        FaultyLink { address, fault, accepting }
    }

    /// The `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.address)
    }

    /// Sets what the link does from now on.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

impl Drop for FaultyLink {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept(listener: TcpListener, target_port: u16, fault: watch::Receiver<Fault>) {
    while let Ok((client, _)) = listener.accept().await {
        if *fault.borrow() == Fault::Refuse {
            drop(client);
            continue;
        }
        let fault = fault.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, target_port)).await else { return };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            // Ends when either direction ends: the other is dropped with its sockets.
            tokio::select! {
                () = pump(client_read, server_write, fault.clone()) => {}
                () = pump(server_read, client_write, fault) => {}
            }
        });
    }
}

/// Passes bytes from `from` to `to`, as the fault of the moment says.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut fault: watch::Receiver<Fault>) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        loop {
            let now = *fault.borrow_and_update();
            match now {
                Fault::None => break,
                Fault::Delay(delay) => {
                    tokio::time::sleep(delay).await;
                    break;
                }
                Fault::Silent => {
                    if fault.changed().await.is_err() {
                        return;
                    }
                }
                Fault::Refuse => return,
            }
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
