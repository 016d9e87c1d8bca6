//! Helpers shared by the service's tests.
#![allow(unreachable_pub)]
pub mod browser;
pub mod envoy;
pub mod quota_fleet;
pub mod quota_rig;
pub mod resp;
pub mod rlqs;
pub mod scripted_rlqs;
pub mod server;
pub mod upstream;
