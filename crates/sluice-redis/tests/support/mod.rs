//! Helpers shared by the integration tests: `support::redis` starts real Redis servers,
//! `support::compare` drives the same random traces through memory and Redis,
//! `support::proxy` stands for an address that a failover moves, `support::faulty_link` for
//! a slow, silent or refusing network.
#![allow(dead_code, unreachable_pub)]

pub mod certificates;
pub mod compare;
pub mod failover_cluster;
pub mod faulty_link;
pub mod proxy;
pub mod redis;
