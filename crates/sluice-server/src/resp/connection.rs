//! One RESP connection: commands are read, run in order and answered in order. Every
//! command already in the buffer runs before the replies are written, so a pipelined batch
//! is answered in as few writes as it came in reads (a batch's replies are written once
//! they pass 64 KiB, so memory stays bounded), and its `CL.THROTTLE` calls on distinct keys
//! wait for the store together. Each slice of commands run counts as a request of the
//! connection's [`Activity`], which its idle watchdog reads.

use crate::engine::front::Front;
use crate::resp::frame::{self, Command, ProtocolError};
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use crate::resp::{cell, dispatch};
use crate::runtime::activity::Activity;
use crate::runtime::handoff::Client;
use crate::runtime::shutdown::Shutdown;
use bytes::BytesMut;
use futures_util::future::join_all;
use std::collections::HashSet;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Replies written at once past this many bytes, within a batch.
const FLUSH_AT: usize = 64 * 1024;

/// Commands taken from the buffer at once: a pipeline is run in slices of this many.
const MAX_BATCH: usize = 128;

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
    let mut session = Session::new(peer, stream.local_addr().map_or(0, |address| address.port()));
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
        let (commands, refused) = whole_commands(buffer);
        if commands.is_empty() && refused.is_none() {
            return Ok(Batch::ReadMore);
        }
        let in_flight = activity.begin();
        run(front, session, &commands, out).await;
        drop(in_flight);
        if session.quitting {
            return Ok(Batch::Close);
        }
        if let Some(error) = refused {
            Reply::error(error).write(session.protocol, out);
            return Ok(Batch::Close);
        }
        if out.len() >= FLUSH_AT {
            stream.write_all(out).await.map_err(drop)?;
            out.clear();
        }
    }
}

/// The whole commands at the front of `buffer`, at most [`MAX_BATCH`], and the protocol
/// error that ends them, if any.
fn whole_commands(buffer: &mut BytesMut) -> (Vec<Command>, Option<ProtocolError>) {
    let mut commands = Vec::new();
    while commands.len() < MAX_BATCH {
        match frame::next_command(buffer) {
            Ok(Some(command)) if command.is_empty() => {}
            Ok(Some(command)) => commands.push(command),
            Ok(None) => break,
            Err(error) => return (commands, Some(error)),
        }
    }
    (commands, None)
}

/// Runs `commands` in order, appending their replies to `out`, until one is `QUIT`. The
/// `CL.THROTTLE` calls of a run on distinct keys wait for the store together: on Redis they
/// go out as one pipeline, as they came; a key seen twice ends the run, so every key's
/// calls are decided in the order they came.
async fn run(front: &Front, session: &mut Session, commands: &[Command], out: &mut Vec<u8>) {
    let mut rest = commands;
    while let Some(first) = rest.first() {
        if session.quitting {
            return;
        }
        if !is_throttle(first) {
            dispatch::run(front, session, first).await.write(session.protocol, out);
            rest = &rest[1..];
            continue;
        }
        let mut keys = HashSet::new();
        let length = rest.iter().take_while(|command| is_throttle(command) && keys.insert(command.get(1))).count();
        let prepared: Vec<_> =
            rest[..length].iter().map(|command| cell::prepare(front, session, &command[1..])).collect();
        for reply in join_all(prepared.into_iter().map(|call| cell::decide(front, call))).await {
            reply.write(session.protocol, out);
        }
        rest = &rest[length..];
    }
}

fn is_throttle(command: &Command) -> bool {
    command[0].eq_ignore_ascii_case(b"cl.throttle")
}
