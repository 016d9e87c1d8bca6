//! Helpers shared by the service's tests.
#![allow(unreachable_pub)]
pub mod browser;
pub mod envoy;
pub mod quota_fleet;
pub mod rlqs;
pub mod server;
pub mod upstream;
