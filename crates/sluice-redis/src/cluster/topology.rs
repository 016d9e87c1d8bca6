//! Which master serves which slots, as a node's `CLUSTER SLOTS` says.

use redis::Value;
use std::ops::RangeInclusive;

/// The masters of a Cluster and the slot ranges each serves, in the order `CLUSTER SLOTS`
/// lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Topology {
    /// Each master's address (`host:port`) and its slot ranges.
    pub(crate) masters: Vec<(String, Vec<RangeInclusive<u16>>)>,
}

impl Topology {
    /// Reads a `CLUSTER SLOTS` reply: one entry per range, `[start, end, [host, port, id,
    /// …], replicas…]`; the master is the first node. `None` when the reply has another
    /// shape, or names no master.
    pub(crate) fn from_cluster_slots(reply: &Value) -> Option<Topology> {
        let Value::Array(entries) = reply else { return None };
        let mut topology = Topology::default();
        for entry in entries {
            let (range, address) = range_and_master(entry)?;
            match topology.masters.iter_mut().find(|(known, _)| *known == address) {
                Some((_, ranges)) => ranges.push(range),
                None => topology.masters.push((address, vec![range])),
            }
        }
        for (_, ranges) in &mut topology.masters {
            ranges.sort_by_key(|range| *range.start());
        }
        (!topology.masters.is_empty()).then_some(topology)
    }

    /// The address of the master that serves `slot`.
    pub(crate) fn master_of(&self, slot: u16) -> Option<&str> {
        let serves = |ranges: &Vec<RangeInclusive<u16>>| ranges.iter().any(|range| range.contains(&slot));
        self.masters.iter().find(|(_, ranges)| serves(ranges)).map(|(address, _)| address.as_str())
    }
}

fn range_and_master(entry: &Value) -> Option<(RangeInclusive<u16>, String)> {
    let Value::Array(fields) = entry else { return None };
    let [start, end, master, ..] = fields.as_slice() else { return None };
    let (start, end) = (integer(start)?, integer(end)?);
    let Value::Array(node) = master else { return None };
    let [host, port, ..] = node.as_slice() else { return None };
    let host: String = redis::from_redis_value_ref(host).ok()?;
    Some((start..=end, format!("{host}:{}", integer(port)?)))
}

fn integer(value: &Value) -> Option<u16> {
    match value {
        Value::Int(number) => u16::try_from(*number).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![Value::BulkString(host.into()), Value::Int(port), Value::BulkString(b"id".to_vec())])
    }

    fn entry(start: i64, end: i64, nodes: Vec<Value>) -> Value {
        Value::Array([vec![Value::Int(start), Value::Int(end)], nodes].concat())
    }

    #[test]
    fn masters_are_grouped_with_their_ranges() {
        let reply = Value::Array(vec![
            entry(5461, 10922, vec![node("127.0.0.1", 7001), node("127.0.0.1", 7004)]),
            entry(0, 5460, vec![node("127.0.0.1", 7000)]),
            entry(10923, 16383, vec![node("127.0.0.1", 7000)]),
        ]);
        let topology = Topology::from_cluster_slots(&reply).unwrap();
        let expected = vec![
            ("127.0.0.1:7001".to_owned(), vec![5461..=10922]),
            ("127.0.0.1:7000".to_owned(), vec![0..=5460, 10923..=16383]),
        ];
        assert_eq!(topology.masters, expected);
        assert_eq!(topology.master_of(12000), Some("127.0.0.1:7000"));
        assert_eq!(topology.master_of(5461), Some("127.0.0.1:7001"));
    }

    #[test]
    fn another_shape_is_not_a_topology() {
        assert_eq!(Topology::from_cluster_slots(&Value::Array(Vec::new())), None);
        assert_eq!(Topology::from_cluster_slots(&Value::Okay), None);
        let no_port = Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(1), Value::Array(Vec::new())])]);
        assert_eq!(Topology::from_cluster_slots(&no_port), None);
    }
}
