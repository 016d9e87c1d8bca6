//! What the service runs on, below the front ends: the worker threads, the handoff of
//! accepted connections to them, the intake runtime new gRPC connections start on, what
//! each connection is doing and the watchdog that closes it when idle, the shutdown signal
//! every task waits on, and the write-through forwarding a wrapped stream needs.

pub(crate) mod activity;
pub(crate) mod handoff;
pub(crate) mod idle;
pub(crate) mod intake;
pub(crate) mod rarely;
pub(crate) mod shutdown;
pub(crate) mod workers;
pub(crate) mod write_through;
