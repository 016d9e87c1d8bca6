//! What one RESP connection remembers between its commands.

use crate::metrics::PolicyCounters;
use crate::resp::reply::Protocol;
use crate::resp::throttle::Plan;
use crate::runtime::handoff::Client;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};

/// Connection ids, as `CLIENT ID` and `HELLO` report them: one counter for the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One connection's state.
#[derive(Debug)]
pub(crate) struct Session {
    /// The protocol it speaks (`HELLO` changes it).
    pub(crate) protocol: Protocol,
    /// Its id (`CLIENT ID`).
    pub(crate) id: u64,
    /// Its client's address.
    pub(crate) peer: Client,
    /// The port it was accepted on (`INFO`'s `tcp_port`).
    pub(crate) port: u16,
    /// The name `CLIENT SETNAME` (or `HELLO … SETNAME`) gave it.
    pub(crate) name: Option<Bytes>,
    /// Whether it presented the admin token (`AUTH`, `HELLO … AUTH`).
    pub(crate) authenticated: bool,
    /// `QUIT` was sent: the connection closes once the reply is written.
    pub(crate) quitting: bool,
    /// The last `CL.THROTTLE` parameters seen, with their plan and counters.
    pub(crate) planned: Option<Planned>,
}

impl Session {
    /// A new connection from `peer` on `port`: RESP2, no name, not authenticated.
    pub(crate) fn new(peer: Client, port: u16) -> Session {
        Session {
            protocol: Protocol::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            peer,
            port,
            name: None,
            authenticated: false,
            quitting: false,
            planned: None,
        }
    }
}

/// How a connection decides `CL.THROTTLE` calls with one set of parameters.
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    /// `max_burst`, `count`, `period`.
    pub(crate) parameters: (i64, i64, i64),
    /// The limit built from them (or none).
    pub(crate) plan: Plan,
    /// Their counters in `sluice_checks_total`.
    pub(crate) counters: PolicyCounters,
}
