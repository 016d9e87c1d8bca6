//! One RESP connection: commands are read, run in order and answered in order. Every
//! command already in the buffer runs before the replies are written, so a pipelined batch
//! is answered in as few writes as it came in reads (a batch's replies are written once
//! they pass 64 KiB, so memory stays bounded). Each command counts as a request of the
//! connection's [`Activity`], which its idle watchdog reads.

use crate::engine::front::Front;
use crate::resp::dispatch;
use crate::resp::frame;
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use crate::runtime::activity::Activity;
use crate::runtime::handoff::Client;
use crate::runtime::shutdown::Shutdown;
use bytes::BytesMut;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Replies written at once past this many bytes, within a batch.
const FLUSH_AT: usize = 64 * 1024;

/// How a batch of buffered commands ended.
enum Batch {
    /// Every whole command ran: read more.
    ReadMore,
    /// The connection is to close once the replies are written (`QUIT`, a protocol error).
    Close,
}

/// Serves `stream`, from `peer`, until the client closes it or sends `QUIT` or bytes that
/// are no command, or shutdown begins while no command is being run.
pub(crate) async fn serve(
    front: Arc<Front>,
    mut stream: TcpStream,
    peer: Client,
    activity: Arc<Activity>,
    shutdown: Shutdown,
) {
    let mut session = Session::new(peer);
    let mut buffer = BytesMut::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    loop {
        let batch = run_buffered(&front, &mut session, &activity, &mut buffer, &mut out, &mut stream).await;
        if !out.is_empty() && stream.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
        if matches!(batch, Ok(Batch::Close) | Err(())) {
            return;
        }
        // What is buffered stays under one command's bound: `next_command` refuses the rest.
        buffer.reserve(4096);
        tokio::select! {
            read = stream.read_buf(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            () = shutdown.clone().wait() => return,
        }
    }
}

/// Runs every whole command in `buffer`, appending the replies to `out` (written to
/// `stream` whenever they pass [`FLUSH_AT`]). `Err` when the stream cannot be written.
async fn run_buffered(
    front: &Front,
    session: &mut Session,
    activity: &Arc<Activity>,
    buffer: &mut BytesMut,
    out: &mut Vec<u8>,
    stream: &mut TcpStream,
) -> Result<Batch, ()> {
    loop {
        let command = match frame::next_command(buffer) {
            Ok(Some(command)) if command.is_empty() => continue,
            Ok(Some(command)) => command,
            Ok(None) => return Ok(Batch::ReadMore),
            Err(error) => {
                Reply::error(error).write(session.protocol, out);
                return Ok(Batch::Close);
            }
        };
        let in_flight = activity.begin();
        let reply = dispatch::run(front, session, &command).await;
        drop(in_flight);
        reply.write(session.protocol, out);
        if session.quitting {
            return Ok(Batch::Close);
        }
        if out.len() >= FLUSH_AT {
            stream.write_all(out).await.map_err(drop)?;
            out.clear();
        }
    }
}
