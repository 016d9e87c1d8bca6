//! A Cluster connection's part in each master's health (`cluster::shards`): reading the
//! topology, probing the masters, and the probe that runs while one is down.

use super::channel::{Channel, Connection, NotConnected, PROBE_INTERVAL, PROBE_TIMEOUT};
use super::common::PROBE;
use super::errors::{cause_of, describe, unavailable, within};
use crate::cluster::shards::{Shard, Shards};
use crate::cluster::topology::Topology;
use crate::deadline::wall_clock;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use sluice_core::StoreError;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// A `CLUSTER SLOTS` reply that is not a topology.
#[derive(Debug, thiserror::Error)]
#[error("CLUSTER SLOTS answered something other than a topology")]
struct NoTopology;

impl Channel {
    /// The masters of this store's Cluster; `None` for another origin.
    pub(super) fn shards(&self) -> Option<&Shards> {
        self.common.shards.as_ref()
    }

    /// Reads the topology (bounded by `limit` per node asked) from a master that answers,
    /// those up first, then any node, and puts it in force.
    pub(super) async fn refresh_topology(&self, limit: Duration) -> Result<(), StoreError> {
        let (Connection::Cluster(current), Some(shards)) = (&self.connection, self.shards()) else { return Ok(()) };
        let connection = current.load_full().ok_or_else(|| unavailable(NotConnected))?;
        let masters = shards.all();
        let up = masters.iter().filter(|shard| !shard.link.is_down()).filter_map(|shard| shard.host_and_port());
        let mut routes: Vec<SingleNodeRoutingInfo> =
            up.map(|(host, port)| SingleNodeRoutingInfo::ByAddress { host, port }).collect();
        routes.push(SingleNodeRoutingInfo::Random);
        let mut last = unavailable(NoTopology);
        for route in routes {
            let mut command = redis::cmd("CLUSTER");
            command.arg("SLOTS");
            let mut asking = ClusterConnection::clone(&connection);
            let asked = asking.route_command(command, RoutingInfo::SingleNode(route));
            match within(limit, asked).await.map(|reply| Topology::from_cluster_slots(&reply)) {
                Ok(Some(topology)) => {
                    shards.update(&topology);
                    return Ok(());
                }
                Ok(None) => last = unavailable(NoTopology),
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    /// Writes a probe key in each master's slots, all at once (each bounded by `limit`); a
    /// master that fails is marked down and probed until it answers. Masters down already
    /// are left to their own probe.
    pub(super) async fn probe_masters(self: &Arc<Self>, limit: Duration) {
        let Some(shards) = self.shards() else { return };
        let mut probes = tokio::task::JoinSet::new();
        for shard in shards.all().iter().filter(|shard| !shard.link.is_down()) {
            let (channel, shard) = (Arc::clone(self), Arc::clone(shard));
            probes.spawn(async move {
                if let Err(error) = channel.write_probe(&shard.probe_key, limit).await {
                    channel.fail_master(&error, &shard);
                }
            });
        }
        while probes.join_next().await.is_some() {}
    }

    /// Records that `shard` failed a check or probe: counted by cause, the master down for
    /// every connection of the store, its probe started. A master no longer known (its
    /// slots went elsewhere while the check ran) is left as it is.
    pub(super) fn fail_master(self: &Arc<Self>, error: &StoreError, shard: &Arc<Shard>) {
        self.common.outages.count_error(cause_of(error));
        if !self.shards().is_some_and(|shards| shards.knows(shard)) {
            return;
        }
        shard.link.fail(&shard.outages, &describe(error));
        self.start_master_probe(shard);
    }

    /// Starts `shard`'s probe on this connection, unless one runs (on any connection).
    pub(super) fn start_master_probe(self: &Arc<Self>, shard: &Arc<Shard>) {
        if shard.link.claim_probe() {
            tokio::spawn(probe_master(Arc::downgrade(self), Arc::clone(shard)));
        }
    }

    /// Runs the probe script on `shard`'s own node (bounded by `limit`), not wherever the
    /// slot map routes its key: a replica promoted in the master's place must not make a
    /// master that is gone look up. Samples Redis's clock.
    async fn probe_node(&self, shard: &Shard, limit: Duration) -> Result<(), StoreError> {
        let (Connection::Cluster(current), Some((host, port))) = (&self.connection, shard.host_and_port()) else {
            return Err(unavailable(NotConnected));
        };
        let connection = current.load_full().ok_or_else(|| unavailable(NotConnected))?;
        let mut command = redis::cmd("EVAL");
        command.arg(PROBE).arg(1).arg(&shard.probe_key);
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
        let mut asking = ClusterConnection::clone(&connection);
        let reply = within(limit, asking.route_command(command, route)).await?;
        let redis_time: u64 =
            redis::from_redis_value(reply).map_err(|error| StoreError::Malformed(error.to_string()))?;
        self.common.lead.observe(redis_time, wall_clock());
        Ok(())
    }

    /// Reads the topology every [`PROBE_INTERVAL`] until `shard` is no longer a master
    /// (its slots went to another node).
    async fn until_replaced(&self, shard: &Arc<Shard>) {
        let Some(shards) = self.shards() else { return };
        loop {
            let _ = self.refresh_topology(PROBE_TIMEOUT).await;
            if !shards.knows(shard) {
                return;
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }
}

/// What one probe of a master that is down found.
enum Probed {
    /// It answered.
    Up,
    /// Its slots are another node's now (its outage ended as the topology changed).
    Replaced,
    Down(StoreError),
}

/// Probes `shard`, a master that is down, until it answers or its slots are served by
/// another node (or the store is dropped). The topology is read every 100 ms meanwhile, so
/// a replica promoted in its place takes its keys within one interval of the promotion
/// being known to the masters that answer.
async fn probe_master(channel: Weak<Channel>, shard: Arc<Shard>) {
    loop {
        let Some(owner) = channel.upgrade() else { return shard.link.release_probe() };
        let probed = tokio::select! {
            written = owner.probe_node(&shard, PROBE_TIMEOUT) => match written {
                Ok(()) => Probed::Up,
                Err(error) => Probed::Down(error),
            },
            () = owner.until_replaced(&shard) => Probed::Replaced,
        };
        match probed {
            Probed::Up => {
                // The topology first: a node that answers may serve other slots now (a
                // master restarted as a replica, its write redirected), and then its
                // outage ended as the topology changed.
                let _ = owner.refresh_topology(PROBE_TIMEOUT).await;
                // Released first: a check failing in between starts a new probe.
                shard.link.release_probe();
                shard.link.recover(&shard.outages);
                return;
            }
            Probed::Replaced => return shard.link.release_probe(),
            Probed::Down(error) => {
                owner.common.outages.count_error(cause_of(&error));
                shard.link.fail(&shard.outages, &describe(&error));
            }
        }
        drop(owner);
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}
