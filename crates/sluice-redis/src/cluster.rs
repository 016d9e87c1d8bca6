//! Redis Cluster: hash slots, the topology a node reports, and the health of each master.

pub(crate) mod shards;
pub(crate) mod slot;
pub(crate) mod topology;
