//! The gRPC front end: Envoy's rate limit service.

pub(crate) mod rls;
