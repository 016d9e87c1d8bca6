//! `AsyncWrite` for a stream wrapper that watches or counts its reads and writes through to
//! the stream it wraps, unchanged: one definition for every such wrapper.

/// Implements `tokio::io::AsyncWrite` for `$wrapper` by passing every call to its `stream`
/// field (a `TcpStream`, which is `Unpin`).
macro_rules! write_through {
    ($wrapper:ty) => {
        impl tokio::io::AsyncWrite for $wrapper {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                context: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.stream).poll_write(context, buf)
            }

            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                context: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.stream).poll_write_vectored(context, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.stream.is_write_vectored()
            }

            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                context: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.stream).poll_flush(context)
            }

            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                context: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.stream).poll_shutdown(context)
            }
        }
    };
}

pub(crate) use write_through;
