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
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

/// A connection holding a slot, as the choice sees it.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) activity: Arc<Activity>,
    pub(super) client: IpAddr,
}

/// The connections holding a listener's slots, in accept order, and each client's (kept
/// as they come and go). A full listener's accept looks at one client's connections at a
/// time, from the oldest, and stops at the first that never sent a request, the one a
/// flood of idle connections offers: it stays cheap under that flood.
#[derive(Debug, Default)]
pub(super) struct Connections {
    open: BTreeMap<u64, Held>,
    per_client: HashMap<IpAddr, BTreeSet<u64>>,
}

/// How soon an idle connection goes: one that never sent a request first, then the one
/// idle the longest, then the one accepted first.
type Rank = (bool, Instant, u64);

impl Connections {
    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.open.len()
    }

    /// Adds `held`, numbered `id` (numbers grow with accept order).
    pub(super) fn insert(&mut self, id: u64, held: Held) {
        self.per_client.entry(held.client).or_default().insert(id);
        self.open.insert(id, held);
    }

    /// Removes the connection numbered `id`, if it is there.
    pub(super) fn remove(&mut self, id: u64) -> Option<Held> {
        let held = self.open.remove(&id)?;
        if let Some(ids) = self.per_client.get_mut(&held.client) {
            ids.remove(&id);
            if ids.is_empty() {
                self.per_client.remove(&held.client);
            }
        }
        Some(held)
    }

    fn count(&self, client: IpAddr) -> usize {
        self.per_client.get(&client).map_or(0, BTreeSet::len)
    }

    /// The connection to close for a new one from `client`, if any may be.
    pub(super) fn to_close(&self, client: IpAddr) -> Option<u64> {
        let clients = self.per_client.len() + usize::from(!self.per_client.contains_key(&client));
        let share = (self.len() / clients).max(1);
        if self.count(client) >= share {
            return self.idlest_of(client).map(|(.., id)| id);
        }
        let over: Vec<IpAddr> = self.per_client.keys().copied().filter(|&other| self.count(other) > share).collect();
        if let Some((.., id)) = over.iter().filter_map(|&other| self.idlest_of(other)).min() {
            return Some(id);
        }
        if let Some(heaviest) = over.into_iter().max_by_key(|&other| self.count(other)) {
            return self.per_client.get(&heaviest)?.first().copied();
        }
        self.per_client.keys().filter_map(|&other| self.idlest_of(other)).min().map(|(.., id)| id)
    }

    /// `client`'s idle connection to go first, if any, with its rank.
    fn idlest_of(&self, client: IpAddr) -> Option<Rank> {
        let mut longest: Option<Rank> = None;
        for &id in self.per_client.get(&client)? {
            let Some(activity) = self.open.get(&id).map(|held| &held.activity) else { continue };
            let Some(since) = activity.idle_since() else { continue };
            let rank = (activity.requests() > 0, since, id);
            if !rank.0 {
                return Some(rank); // the oldest that never sent a request
            }
            longest = Some(longest.map_or(rank, |best| best.min(rank)));
        }
        longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn open(clients: &[(IpAddr, Doing)]) -> (Connections, Vec<crate::runtime::activity::InFlight>) {
        let opened = Instant::now();
        let (mut open, mut requests) = (Connections::default(), Vec::new());
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
        assert_eq!(held.to_close(FLOODER), Some(1));
        let (held, _requests) = open(&[(FLOODER, Busy), (FLOODER, Busy)]);
        assert_eq!(held.to_close(FLOODER), None, "one client's busy connections stay");
    }

    #[test]
    fn a_client_over_its_share_loses_its_oldest_connection_to_a_client_under_it() {
        let (held, _requests) = open(&[(FLOODER, Busy), (FLOODER, Busy), (FLOODER, Busy), (CLIENT, Used)]);
        assert_eq!(held.to_close(CLIENT), Some(0), "the flooder holds 3 of 4, over its share of 2");
        assert_eq!(held.to_close(FLOODER), None, "the flooder does not take the client's slot");
    }

    #[test]
    fn a_client_at_its_share_makes_room_among_its_own_connections_only() {
        let (held, _requests) = open(&[(CLIENT, Nothing), (FLOODER, Busy), (FLOODER, Used), (FLOODER, Busy)]);
        assert_eq!(held.to_close(FLOODER), Some(2), "the client's idle connection stays");
        let (held, _requests) = open(&[(CLIENT, Nothing), (FLOODER, Busy), (FLOODER, Used), (FLOODER, Busy)]);
        assert_eq!(held.to_close(CLIENT), Some(2), "a client under its share takes the flooder's idle one first");
        let (held, _requests) = open(&[(CLIENT, Nothing), (FLOODER, Busy), (CLIENT, Used), (FLOODER, Busy)]);
        assert_eq!(held.to_close(CLIENT), Some(0), "at its share, its own idle one");
    }
}
