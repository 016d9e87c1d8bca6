//! The gRPC front end: Envoy's rate limit service.

mod descriptor_status;
mod response_headers;
pub(crate) mod rls;
