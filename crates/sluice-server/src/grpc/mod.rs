//! The gRPC front end: Envoy's rate limit service (RLS) and rate limit quota service (RLQS).

mod call_deadline;
pub(crate) mod connection;
mod descriptor_status;
pub(crate) mod frame_cursor;
mod framing;
pub(crate) mod message_deadline;
mod response_headers;
pub(crate) mod rlqs;
pub(crate) mod rlqs_server;
pub(crate) mod rls;
pub(crate) mod server;
mod unknown_service;

pub(crate) use call_deadline::CallDeadlineLayer;
pub(crate) use unknown_service::LogUnknownCalls;
