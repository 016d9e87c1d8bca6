//! Test support shared by Sluice's crates, as `tower-test` is for tower: their tests and
//! benches take it as a dev-dependency (never a dependency; it is not published).
//!
//! - [`redis`] starts real Redis (or Valkey) servers and Redis Clusters on free loopback
//!   ports, and talks to them without a client library;
//! - [`failover_cluster`] is a Cluster whose masters have replicas, for failover tests;
//! - [`certificates`] makes a CA and Redis's and a client's certificates for TLS tests;
//! - [`compare`] drives the same random policies and traces through the memory store and a
//!   Redis store (the differential tests of the store and of the module), and [`leases`]
//!   the same lease traces and give-backs;
//! - [`envoy_quota_client`] is a model of how Envoy 1.40 applies the assignments of its
//!   quota server (RLQS) to a bucket, measured against the real Envoy;
//! - [`proxy`] stands for an address that a failover moves, [`faulty_link`] for a slow,
//!   silent or refusing network.

pub mod certificates;
pub mod compare;
pub mod envoy_quota_client;
pub mod failover_cluster;
pub mod faulty_link;
pub mod leases;
pub mod proxy;
pub mod redis;
