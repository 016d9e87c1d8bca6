//! The masters of a Cluster, each with the slots it serves and its own health, shared by
//! every connection of a store: an outage of one master is an outage of its slots only.
//!
//! A check finds the master of its key's slot here before it asks Redis. While that master
//! is down, the check is answered by the failure mode at once; the keys of every other
//! master still go to Redis. A probe per master that is down asks a master that answers
//! for the topology, and writes a key in the master's slots every 100 ms: it ends the
//! outage when the master answers, or when its slots are served by another node (a
//! replica promoted in its place). Each master's outage has one log line at its start and
//! one at its end.

use super::slot::{key_in_slot, slot_of};
use super::topology::Topology;
use crate::FailureMode;
use crate::health::{Link, NodeHealth, Outages, RedisHealth, describe_slots};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One master: its address, its slots, the key its probe writes, and its health.
#[derive(Debug)]
pub(crate) struct Shard {
    /// `host:port`, as the Cluster names it.
    pub(crate) address: String,
    pub(crate) slots: Vec<RangeInclusive<u16>>,
    /// A key in the master's first slot.
    pub(crate) probe_key: String,
    pub(crate) link: Link,
    /// This master's outages, and the checks of its keys the failure mode answered.
    pub(crate) outages: Outages,
}

impl Shard {
    fn new(address: &str, slots: &[RangeInclusive<u16>], prefix: &str, mode: FailureMode) -> Shard {
        let first = slots.first().map_or(0, |range| *range.start());
        let target = format!("node {address} (slots {})", describe_slots(slots));
        Shard {
            address: address.to_owned(),
            slots: slots.to_vec(),
            probe_key: key_in_slot(prefix, first),
            link: Link::default(),
            outages: Outages::new(target, mode),
        }
    }

    fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| range.contains(&slot))
    }

    /// The address as `(host, port)`, for routing a command to this master.
    pub(crate) fn host_and_port(&self) -> Option<(String, u16)> {
        let (host, port) = self.address.rsplit_once(':')?;
        Some((host.to_owned(), port.parse().ok()?))
    }
}

/// The masters a store knows: empty until a probe read the topology.
#[derive(Debug)]
pub(crate) struct Shards {
    current: ArcSwap<Vec<Arc<Shard>>>,
    /// The key prefix, for probe keys.
    prefix: String,
    mode: FailureMode,
    /// Outages of masters no longer known, so that the store's total never drops.
    retired_outages: AtomicU64,
    /// Serialises updates (probes of several masters may read the topology at once).
    updating: Mutex<()>,
}

impl Shards {
    pub(crate) fn new(prefix: &str, mode: FailureMode) -> Shards {
        Shards {
            current: ArcSwap::default(),
            prefix: prefix.to_owned(),
            mode,
            retired_outages: AtomicU64::new(0),
            updating: Mutex::new(()),
        }
    }

    /// The master that serves `key`'s slot, if the topology is known.
    pub(crate) fn for_key(&self, key: &[u8]) -> Option<Arc<Shard>> {
        let slot = slot_of(key);
        self.current.load().iter().find(|shard| shard.serves(slot)).cloned()
    }

    /// Every master known.
    pub(crate) fn all(&self) -> Arc<Vec<Arc<Shard>>> {
        self.current.load_full()
    }

    /// Whether `shard` is still one of the masters.
    pub(crate) fn knows(&self, shard: &Arc<Shard>) -> bool {
        self.current.load().iter().any(|known| Arc::ptr_eq(known, shard))
    }

    /// Puts `topology` in force. A master with the same address and slots keeps its health;
    /// one whose slots went elsewhere is dropped, and its outage, if any, ends there (its
    /// slots are served by another node now).
    pub(crate) fn update(&self, topology: &Topology) {
        let _one_at_a_time = self.updating.lock();
        let old = self.current.load_full();
        let next: Vec<Arc<Shard>> = topology
            .masters
            .iter()
            .map(|(address, slots)| {
                let same = old.iter().find(|shard| shard.address == *address && shard.slots == *slots);
                same.cloned().unwrap_or_else(|| Arc::new(Shard::new(address, slots, &self.prefix, self.mode)))
            })
            .collect();
        for gone in old.iter().filter(|shard| !next.iter().any(|kept| Arc::ptr_eq(kept, shard))) {
            let first = gone.slots.first().map_or(0, |range| *range.start());
            let served_by = topology.master_of(first).unwrap_or("no node");
            gone.link.retire(&gone.outages, served_by);
            self.retired_outages.fetch_add(gone.outages.health().outages, Ordering::Relaxed);
        }
        self.current.store(Arc::new(next));
    }

    /// Whether every master known answered its last check or probe.
    pub(crate) fn all_up(&self) -> bool {
        self.current.load().iter().all(|shard| !shard.link.is_down())
    }

    /// Adds the masters' health to the store's: each master's own, the longest outage
    /// under way, and every master's outages to the count. While the store's own
    /// connection is down (`health.outage` on entry), every master's keys follow the
    /// failure mode, so each master is shown down at least that long.
    pub(crate) fn add_to(&self, health: &mut RedisHealth) {
        let everywhere = health.outage;
        health.outages += self.retired_outages.load(Ordering::Relaxed);
        for shard in self.current.load().iter() {
            let own = shard.outages.health();
            health.outage = health.outage.max(own.outage);
            health.outages += own.outages;
            health.nodes.push(NodeHealth {
                address: shard.address.clone(),
                slots: shard.slots.clone(),
                outage: own.outage.max(everywhere),
                outages: own.outages,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(masters: &[(&str, RangeInclusive<u16>)]) -> Topology {
        Topology {
            masters: masters.iter().map(|(address, slots)| ((*address).to_owned(), vec![slots.clone()])).collect(),
        }
    }

    #[test]
    fn a_key_finds_the_master_of_its_slot() {
        let shards = Shards::new("sluice:", FailureMode::Open);
        assert!(shards.for_key(b"foo").is_none(), "no topology yet");
        shards.update(&topology(&[("a:1", 0..=9999), ("b:2", 10000..=16383)]));
        assert_eq!(shards.for_key(b"foo").unwrap().address, "b:2", "foo is in slot 12182");
        assert_eq!(shards.for_key(b"somekey").unwrap().address, "b:2");
        assert_eq!(shards.for_key(b"sluice:{bar}:1").unwrap().address, "a:1", "bar is in slot 5061");
    }

    #[test]
    fn a_master_down_holds_only_its_own_outage_until_its_slots_move() {
        let shards = Shards::new("sluice:", FailureMode::Closed);
        shards.update(&topology(&[("a:1", 0..=9999), ("b:2", 10000..=16383)]));
        let a = shards.for_key(b"bar").unwrap();
        a.link.fail(&a.outages, "refused");
        assert!(!shards.all_up());
        let mut health = RedisHealth::default();
        shards.add_to(&mut health);
        assert_eq!((health.outages, health.nodes.len()), (1, 2));
        assert!(health.nodes[0].outage.is_some() && health.nodes[1].outage.is_none(), "{health:?}");
        // A replica is promoted in a's place: a's outage ends, its count stays.
        shards.update(&topology(&[("c:3", 0..=9999), ("b:2", 10000..=16383)]));
        assert!(!shards.knows(&a) && shards.all_up());
        let mut health = RedisHealth::default();
        shards.add_to(&mut health);
        assert_eq!((health.outages, health.outage), (1, None));
        assert_eq!(shards.for_key(b"bar").unwrap().address, "c:3");
    }

    #[test]
    fn every_master_is_down_while_the_connection_is() {
        let shards = Shards::new("sluice:", FailureMode::Open);
        shards.update(&topology(&[("a:1", 0..=9999), ("b:2", 10000..=16383)]));
        let mut health = RedisHealth { outage: Some(std::time::Duration::from_secs(1)), ..RedisHealth::default() };
        shards.add_to(&mut health);
        assert!(health.is_down_everywhere(), "{health:?}");
        let mut health = RedisHealth::default();
        shards.add_to(&mut health);
        assert!(!health.is_down_everywhere() && health.is_available());
    }
}
