//! One connection to a standalone Redis, of either kind the store makes: redis-rs's
//! reconnecting one, or one over Sluice's own TLS.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One connection to a standalone Redis: redis-rs's, which makes itself again when it
/// breaks (`redis://`), or one over Sluice's own TLS (`rediss://`, the `tls` module), which
/// the probe makes again once it has closed.
#[derive(Clone)]
pub(super) enum StandaloneConnection {
    Manager(ConnectionManager),
    Tls {
        connection: MultiplexedConnection,
        /// Set when the connection has ended.
        closed: Arc<AtomicBool>,
    },
}

impl StandaloneConnection {
    /// True once a TLS connection has ended (it is not made again by itself).
    pub(super) fn is_closed(&self) -> bool {
        match self {
            StandaloneConnection::Manager(_) => false,
            StandaloneConnection::Tls { closed, .. } => closed.load(Ordering::Acquire),
        }
    }
}

impl ConnectionLike for StandaloneConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            StandaloneConnection::Manager(manager) => manager.req_packed_command(cmd),
            StandaloneConnection::Tls { connection, .. } => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            StandaloneConnection::Manager(manager) => manager.req_packed_commands(pipeline, offset, count),
            StandaloneConnection::Tls { connection, .. } => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            StandaloneConnection::Manager(manager) => manager.get_db(),
            StandaloneConnection::Tls { connection, .. } => connection.get_db(),
        }
    }
}
