//! Bounds on what clients may make the service hold: connections, request heads, and the
//! size of Envoy requests (`docs/service.md`, "Limits on requests and connections").
//!
//! Each default leaves a wide margin over what a well-behaved client sends, so that only
//! a broken or hostile one meets it; each is a setting, for the deployment that needs more.

use crate::config::serve_args::ServeArgs;
use crate::config::server_section::ServerSection;
use crate::config::values::{positive, within};
use sluice_config::ConfigError;
use std::time::Duration;

/// Connections each listener serves at once by default: an application's pool of
/// keep-alive connections is tens, a fleet's a few thousand; 4096 idle HTTP connections
/// add about 21 MiB to the process.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// The largest request head by default: 16 KiB, as Node.js allows; the API's heads are a
/// few hundred bytes (keys and policies travel in the body).
pub(crate) const DEFAULT_MAX_REQUEST_HEAD: usize = 16 * 1024;

/// hyper's smallest read buffer, so the smallest head bound it takes.
const MIN_REQUEST_HEAD: usize = 8 * 1024;

/// How long a begun request head may take by default: a head comes in one packet or a
/// few, within a round trip or two.
const DEFAULT_HEADER_TIMEOUT: &str = "5s";

/// Descriptors per Envoy request by default: Envoy sends one per `rate_limits` action set
/// of the route, rarely more than a handful.
pub(crate) const DEFAULT_MAX_DESCRIPTORS: usize = 64;

/// Entries per descriptor by default: one per action of a set, rarely more than four.
pub(crate) const DEFAULT_MAX_DESCRIPTOR_ENTRIES: usize = 32;

/// The largest gRPC message by default. Envoy's requests are a few hundred bytes; 64 KiB is
/// also the HTTP API's body limit. A stream's declared message length is reserved as soon
/// as its 5-byte prefix arrives, so this is also what one stream may make the server hold.
pub(crate) const DEFAULT_MAX_GRPC_MESSAGE: usize = 64 * 1024;

/// The bounds, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
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

impl Bounds {
    /// The bounds from `args` over `file` over the defaults; each bad value goes to
    /// `problems`, at its setting's name.
    pub(crate) fn resolve(args: &ServeArgs, file: &ServerSection, problems: &mut ConfigError) -> Option<Bounds> {
        let count = |flag: Option<usize>, file: Option<usize>, default: usize| flag.or(file).unwrap_or(default);
        let connections = count(args.max_connections, file.max_connections, DEFAULT_MAX_CONNECTIONS);
        let max_connections = problems.take("max_connections", within(connections, 1, 1_000_000));
        let head = count(args.max_request_head, file.max_request_head, DEFAULT_MAX_REQUEST_HEAD);
        let max_request_head = problems.take("max_request_head", within(head, MIN_REQUEST_HEAD, 1024 * 1024));
        let timeout = args.header_timeout.as_ref().or(file.header_timeout.as_ref());
        let timeout = timeout.map_or(DEFAULT_HEADER_TIMEOUT, String::as_str);
        let header_timeout = problems.take("header_timeout", positive(timeout));
        let descriptors = count(args.max_descriptors, file.max_descriptors, DEFAULT_MAX_DESCRIPTORS);
        let max_descriptors = problems.take("max_descriptors", within(descriptors, 1, 1_000_000));
        let entries = count(args.max_descriptor_entries, file.max_descriptor_entries, DEFAULT_MAX_DESCRIPTOR_ENTRIES);
        let max_descriptor_entries = problems.take("max_descriptor_entries", within(entries, 1, 1_000_000));
        let message = count(args.max_grpc_message, file.max_grpc_message, DEFAULT_MAX_GRPC_MESSAGE);
        let max_grpc_message = problems.take("max_grpc_message", within(message, 1024, 64 * 1024 * 1024));
        Some(Bounds {
            max_connections: max_connections?,
            max_request_head: max_request_head?,
            header_timeout: header_timeout?,
            max_descriptors: max_descriptors?,
            max_descriptor_entries: max_descriptor_entries?,
            max_grpc_message: max_grpc_message?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: &ServeArgs, file: &ServerSection) -> Result<Bounds, String> {
        let mut problems = ConfigError::default();
        let bounds = Bounds::resolve(args, file, &mut problems);
        problems.into_result(bounds).map_err(|error| error.to_string()).map(Option::unwrap)
    }

    #[test]
    fn the_defaults_apply_and_the_flag_beats_the_file() {
        let bounds = resolve(&ServeArgs::default(), &ServerSection::default()).unwrap();
        assert_eq!(bounds.max_connections, 4096);
        assert_eq!(bounds.max_request_head, 16 * 1024);
        assert_eq!(bounds.header_timeout, Duration::from_secs(5));
        assert_eq!((bounds.max_descriptors, bounds.max_descriptor_entries), (64, 32));
        assert_eq!(bounds.max_grpc_message, 64 * 1024);
        let file = ServerSection { max_descriptors: Some(8), header_timeout: Some("1s".into()), ..Default::default() };
        let args = ServeArgs { max_descriptors: Some(9), ..ServeArgs::default() };
        let bounds = resolve(&args, &file).unwrap();
        assert_eq!((bounds.max_descriptors, bounds.header_timeout), (9, Duration::from_secs(1)));
    }

    #[test]
    fn every_bound_out_of_range_is_named() {
        let args = ServeArgs {
            max_connections: Some(0),
            max_request_head: Some(100),
            header_timeout: Some("0s".into()),
            max_descriptors: Some(0),
            max_descriptor_entries: Some(0),
            max_grpc_message: Some(10),
            ..ServeArgs::default()
        };
        let text = resolve(&args, &ServerSection::default()).unwrap_err();
        for name in [
            "max_connections: must be between 1 and",
            "max_request_head: must be between 8192 and",
            "header_timeout: must be longer than 0",
            "max_descriptors: must be between 1",
            "max_descriptor_entries: must be between 1",
            "max_grpc_message: must be between 1024",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }
}
