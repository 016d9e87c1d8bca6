//! The suite every store must pass ([`sluice_core::conformance`]), on the Redis store: on a
//! real redis-server and on the 3-master Cluster, under application time (the suite gives
//! each check its time), each part of the suite on keys of its own.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_redis::{RedisSettings, RedisStore};
use sluice_test_support::compare::{case_name, settings};
use sluice_test_support::redis::{RedisCluster, RedisServer};

/// Settings whose keys no other store of the test uses.
fn fresh_settings() -> RedisSettings {
    RedisSettings { key_prefix: format!("conformance:{}:", case_name()), ..settings() }
}

#[tokio::test]
async fn the_redis_store_conforms() {
    let server = RedisServer::start();
    let url = server.url();
    sluice_core::conformance::run(|| async { RedisStore::connect(&url, fresh_settings()).await.unwrap() }).await;
}

#[tokio::test]
async fn the_redis_cluster_store_conforms() {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    sluice_core::conformance::run(|| async { RedisStore::connect_cluster(&urls, fresh_settings()).await.unwrap() })
        .await;
}
