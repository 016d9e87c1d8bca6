//! The cap on the connections one listener serves at once (`max_connections`).
//!
//! Each accepted connection takes a slot and keeps it until it closes. When none is left,
//! a new connection is closed as soon as it is accepted, rather than left waiting in the
//! listen backlog: the client learns at once (a closed connection, so Envoy applies its
//! failure mode) instead of after its own timeout, and the backlog never fills up.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The slots of one listener.
#[derive(Clone, Debug)]
pub(crate) struct Slots(Arc<Semaphore>);

/// One connection's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Slots {
    /// `count` slots.
    pub(crate) fn new(count: usize) -> Slots {
        Slots(Arc::new(Semaphore::new(count.min(Semaphore::MAX_PERMITS))))
    }

    /// A free slot, if any.
    pub(crate) fn take(&self) -> Option<Slot> {
        Arc::clone(&self.0).try_acquire_owned().ok().map(|permit| Slot { _permit: permit })
    }
}

/// A gRPC connection's socket with its slot: tonic drops it when the connection ends.
#[derive(Debug)]
pub(crate) struct SlottedStream {
    stream: TcpStream,
    _slot: Slot,
}

impl SlottedStream {
    /// `stream`, holding `slot` for as long as it is open.
    pub(crate) fn new(stream: TcpStream, slot: Slot) -> SlottedStream {
        SlottedStream { stream, _slot: slot }
    }
}

impl Connected for SlottedStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for SlottedStream {
    fn poll_read(mut self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(context, buf)
    }
}

crate::runtime::write_through::write_through!(SlottedStream);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_comes_back_when_dropped() {
        let slots = Slots::new(2);
        let (first, second) = (slots.take(), slots.take());
        assert!(first.is_some() && second.is_some());
        assert!(slots.take().is_none(), "no third slot");
        drop(first);
        assert!(slots.take().is_some(), "the first slot is free again");
    }
}
