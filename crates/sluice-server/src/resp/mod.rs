//! The Redis-protocol front (`--resp ADDR`): RESP2 and RESP3 on a port of its own, for
//! clients that speak Redis. `CL.THROTTLE` answers as redis-cell does, `SLUICE.CHECK`,
//! `SLUICE.PEEK` and `SLUICE.RESET` check, peek and reset configured policies as the HTTP
//! API does, and the connection commands (`HELLO`, `AUTH`, `CLIENT`, `COMMAND`, `INFO`…)
//! are what client libraries and `redis-cli` need to connect. docs/resp.md is the guide.
//!
//! | file | what |
//! | --- | --- |
//! | `server.rs`, `connection.rs` | connections: caps, idle timeout, shutdown, pipelining |
//! | `frame.rs`, `reply.rs` | commands in (inline ones split as Redis splits them), replies out (RESP2 and RESP3) |
//! | `dispatch.rs`, `table.rs`, `arguments.rs` | names to handlers, arity, unknown commands; the commands' table and their arguments (`COMMAND DOCS`) |
//! | `handshake.rs`, `introspection.rs` | connection commands, `COMMAND`, `INFO` |
//! | `throttle.rs`, `cell.rs` | `CL.THROTTLE`: redis-cell's arithmetic, and its run |
//! | `policies.rs` | `SLUICE.CHECK`, `SLUICE.PEEK`, `SLUICE.RESET` |

mod arguments;
mod cell;
mod connection;
mod dispatch;
mod frame;
mod handshake;
mod introspection;
mod policies;
mod reply;
mod server;
mod session;
mod table;
mod throttle;

pub(crate) use server::serve;
