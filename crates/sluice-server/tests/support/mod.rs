//! Helpers shared by the service's tests.
#![allow(unreachable_pub)]
pub mod server;
