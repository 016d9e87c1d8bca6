//! Bounds on what clients may make the service hold: connections, request heads, and the
//! size of Envoy requests (`docs/service.md`, "Limits on requests and connections").
//!
//! Each default leaves a wide margin over what a well-behaved client sends, so that only
//! a broken or hostile one meets it; each is a setting ([`crate::config::settings`]), for
//! the deployment that needs more. The header timeout's default, 5 s, is the same kind of
//! margin: a head comes in one packet or a few, within a round trip or two.

use std::time::Duration;

/// Connections each listener serves at once by default: an application's pool of
/// keep-alive connections is tens, a fleet's a few thousand; 4096 idle HTTP connections
/// add about 21 MiB to the process.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// The largest request head by default: 16 KiB, as Node.js allows; the API's heads are a
/// few hundred bytes (keys and policies travel in the body).
pub(crate) const DEFAULT_MAX_REQUEST_HEAD: usize = 16 * 1024;

/// hyper's smallest read buffer, so the smallest head bound it takes.
pub(crate) const MIN_REQUEST_HEAD: usize = 8 * 1024;

/// Descriptors per Envoy request by default: Envoy sends one per `rate_limits` action set
/// of the route, rarely more than a handful.
pub(crate) const DEFAULT_MAX_DESCRIPTORS: usize = 64;

/// Entries per descriptor by default: one per action of a set, rarely more than four.
pub(crate) const DEFAULT_MAX_DESCRIPTOR_ENTRIES: usize = 32;

/// The largest gRPC message by default. Envoy's requests are a few hundred bytes; 64 KiB is
/// also the HTTP API's body limit. A stream's declared message length is reserved as soon
/// as its 5-byte prefix arrives, so this is also what one stream may make the server hold.
pub(crate) const DEFAULT_MAX_GRPC_MESSAGE: usize = 64 * 1024;

/// Streams a gRPC connection may have open at once by default, as Apache httpd allows: an
/// Envoy worker's calls take a millisecond or so, so 100 at once is 100 000 calls a second
/// on one connection; past it, Envoy opens another connection.
pub(crate) const DEFAULT_GRPC_MAX_STREAMS: usize = 100;
/// RLQS buckets with a rule held at once by default, over every stream, each connection
/// having a share (`rlqs::hub::room`): an Envoy holds one per
/// distinct bucket id its matchers build (a few per route, or one per client when the id
/// names the client); each costs the hub a few hundred bytes.
pub(crate) const DEFAULT_MAX_RLQS_BUCKETS: usize = 100_000;

/// The bounds, resolved ([`crate::config::settings::Settings::bounds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Connections each listener (HTTP, gRPC) serves at once; more are closed once accepted.
    pub(crate) max_connections: usize,
    /// The largest request head in bytes: an HTTP/1 head, or an HTTP/2 header list (both
    /// listeners).
    pub(crate) max_request_head: usize,
    /// How long an HTTP/1 request head may take to come in full once its first bytes came.
    pub(crate) header_timeout: Duration,
    /// Descriptors per Envoy request.
    pub(crate) max_descriptors: usize,
    /// Entries per Envoy descriptor.
    pub(crate) max_descriptor_entries: usize,
    /// The largest gRPC message a client may send, in bytes.
    pub(crate) max_grpc_message: usize,
}
