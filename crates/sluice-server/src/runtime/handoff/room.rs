//! Which connection a full listener closes to make room for a new one.
//!
//! Each client has a share of the listener: the cap divided by the clients holding
//! connections, the new one counted. A client that holds its share already makes room
//! only among its own idle connections (no request in flight, no gRPC stream open). A
//! client under its share takes, in this order: an idle connection of a client over its
//! share; else the oldest connection, busy or not, of the client holding the most, when
//! that is over its share; else any idle connection. Among idle connections, one that
//! never sent a request goes before one that did, then the one idle the longest, then the
//! one accepted first. So one client's flood, of idle connections or of requests that never
//! finish (slow bodies, stalled streams), never shuts another client out; with one client
//! (all behind one proxy), idle connections make room for busy ones.

use crate::runtime::activity::Activity;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// A connection holding a slot, as the choice sees it.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) activity: Arc<Activity>,
    pub(super) client: IpAddr,
}

/// The connection of `open` (numbered in accept order) to close for a new one from
/// `client`, if any may be.
pub(super) fn to_close(open: &HashMap<u64, Held>, client: IpAddr) -> Option<u64> {
    let mut per_client: HashMap<IpAddr, usize> = HashMap::new();
    for held in open.values() {
        *per_client.entry(held.client).or_default() += 1;
    }
    let clients = per_client.len() + usize::from(!per_client.contains_key(&client));
    let share = (open.len() / clients).max(1);
    let count = |of: IpAddr| per_client.get(&of).copied().unwrap_or(0);
    if count(client) >= share {
        return idlest(open, |held| held.client == client);
    }
    if let Some(id) = idlest(open, |held| count(held.client) > share) {
        return Some(id);
    }
    let heaviest = per_client.iter().max_by_key(|&(_, count)| *count).map(|(&heaviest, _)| heaviest);
    if let Some(heaviest) = heaviest.filter(|&heaviest| count(heaviest) > share) {
        return open.iter().filter(|(_, held)| held.client == heaviest).map(|(id, _)| *id).min();
    }
    idlest(open, |_| true)
}

/// The idle connection of `open` that `eligible` lets go first, if any.
fn idlest(open: &HashMap<u64, Held>, eligible: impl Fn(&Held) -> bool) -> Option<u64> {
    let idle = open.iter().filter(|(_, held)| eligible(held)).filter_map(|(id, held)| {
        let used = held.activity.requests() > 0;
        Some((used, held.activity.idle_since()?, *id))
    });
    idle.min().map(|(.., id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const FLOODER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    /// What a connection is doing.
    #[derive(Clone, Copy)]
    enum Doing {
        /// A request in flight.
        Busy,
        /// Nothing, and it never sent a request.
        Nothing,
        /// Nothing, after a request.
        Used,
    }
    use Doing::{Busy, Nothing, Used};

    /// Connections from `clients`, in accept order, each doing what it says; the guards
    /// of the requests in flight.
    fn open(clients: &[(IpAddr, Doing)]) -> (HashMap<u64, Held>, Vec<crate::runtime::activity::InFlight>) {
        let opened = Instant::now();
        let (mut open, mut requests) = (HashMap::new(), Vec::new());
        for (id, &(client, doing)) in (0..).zip(clients) {
            let activity = Arc::new(Activity::new(opened));
            match doing {
                Busy => requests.push(activity.begin()),
                Used => drop(activity.begin()),
                Nothing => {}
            }
            open.insert(id, Held { activity, client });
        }
        (open, requests)
    }

    #[test]
    fn an_idle_connection_goes_first_and_a_busy_one_of_a_single_client_never() {
        let (held, _requests) = open(&[(FLOODER, Busy), (FLOODER, Used), (FLOODER, Busy)]);
        assert_eq!(to_close(&held, FLOODER), Some(1));
        let (held, _requests) = open(&[(FLOODER, Busy), (FLOODER, Busy)]);
        assert_eq!(to_close(&held, FLOODER), None, "one client's busy connections stay");
    }

    #[test]
    fn a_client_over_its_share_loses_its_oldest_connection_to_a_client_under_it() {
        let (held, _requests) = open(&[(FLOODER, Busy), (FLOODER, Busy), (FLOODER, Busy), (CLIENT, Used)]);
        assert_eq!(to_close(&held, CLIENT), Some(0), "the flooder holds 3 of 4, over its share of 2");
        assert_eq!(to_close(&held, FLOODER), None, "the flooder does not take the client's slot");
    }

    #[test]
    fn a_client_at_its_share_makes_room_among_its_own_connections_only() {
        let (held, _requests) = open(&[(CLIENT, Nothing), (FLOODER, Busy), (FLOODER, Used), (FLOODER, Busy)]);
        assert_eq!(to_close(&held, FLOODER), Some(2), "the client's idle connection stays");
        let (held, _requests) = open(&[(CLIENT, Nothing), (FLOODER, Busy), (FLOODER, Used), (FLOODER, Busy)]);
        assert_eq!(to_close(&held, CLIENT), Some(2), "a client under its share takes the flooder's idle one first");
        let (held, _requests) = open(&[(CLIENT, Nothing), (FLOODER, Busy), (CLIENT, Used), (FLOODER, Busy)]);
        assert_eq!(to_close(&held, CLIENT), Some(0), "at its share, its own idle one");
    }
}
