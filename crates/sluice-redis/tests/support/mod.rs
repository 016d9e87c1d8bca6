//! Helpers shared by the integration tests: `support::redis` starts real Redis servers.
#![allow(dead_code, unreachable_pub)]

pub mod redis;
