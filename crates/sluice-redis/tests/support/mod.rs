//! Helpers shared by the integration tests: `support::redis` starts real Redis servers,
//! `support::compare` drives the same random traces through memory and Redis.
#![allow(dead_code, unreachable_pub)]

pub mod compare;
pub mod redis;
