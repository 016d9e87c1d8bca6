//! An HTTP connection's socket, telling the idle watchdog ([`crate::runtime::idle`]) when a
//! request head begins: bytes read while no request is in flight.
//!
//! Only HTTP/1 heads are timed this way. An HTTP/2 client (one that opens with the
//! `PRI * HTTP/2.0` preface) sends frames of its own between requests (settings, window
//! updates, pings), which are no head; its connection is held to the idle timeout alone,
//! and hyper bounds its header lists.

use crate::runtime::activity::Activity;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

/// What opens an HTTP/2 connection with prior knowledge; no HTTP/1 method is `PRI`.
const HTTP2_OPENING: &[u8] = b"PRI ";

/// A connection's socket, noting the bytes it reads in the connection's [`Activity`].
#[derive(Debug)]
pub(crate) struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
    protocol: Protocol,
}

/// What the connection speaks, as far as its first bytes tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// Its first bytes so far (this many) are the start of [`HTTP2_OPENING`].
    Unknown(usize),
    Http1,
    Http2,
}

impl Protocol {
    /// What the connection speaks once `bytes` came after what was seen so far.
    fn after(self, bytes: &[u8]) -> Protocol {
        let Protocol::Unknown(seen) = self else { return self };
        let wanted = &HTTP2_OPENING[seen..];
        let compared = wanted.len().min(bytes.len());
        if wanted[..compared] != bytes[..compared] {
            Protocol::Http1
        } else if compared == wanted.len() {
            Protocol::Http2
        } else {
            Protocol::Unknown(seen + compared)
        }
    }
}

impl Watched {
    /// `stream`, its reads noted in `activity`.
    pub(crate) fn new(stream: TcpStream, activity: Arc<Activity>) -> Watched {
        Watched { stream, activity, protocol: Protocol::Unknown(0) }
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(context, buf);
        if buf.filled().len() > before && self.protocol != Protocol::Http2 {
            self.protocol = self.protocol.after(&buf.filled()[before..]);
            if self.protocol != Protocol::Http2 {
                self.activity.bytes_came();
            }
        }
        polled
    }
}

crate::runtime::write_through::write_through!(Watched);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http2_preface_is_told_from_an_http1_head_whatever_the_reads() {
        let after = |reads: &[&[u8]]| reads.iter().fold(Protocol::Unknown(0), |protocol, read| protocol.after(read));
        assert_eq!(after(&[b"PRI * HTTP/2.0\r\n"]), Protocol::Http2);
        assert_eq!(after(&[b"P", b"R", b"I * HTTP/2.0"]), Protocol::Http2);
        assert_eq!(after(&[b"PR"]), Protocol::Unknown(2));
        assert_eq!(after(&[b"POST /v1/check HTTP/1.1\r\n"]), Protocol::Http1);
        assert_eq!(after(&[b"P", b"UT / HTTP/1.1"]), Protocol::Http1);
        assert_eq!(after(&[b"GET / HTTP/1.1\r\n", b"PRI * HTTP/2.0"]), Protocol::Http1);
    }
}
