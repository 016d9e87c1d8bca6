//! The room `max_rlqs_buckets` leaves for buckets with a rule, shared among connections.
//!
//! Each connection has a share of the cap: the cap divided by the connections holding
//! buckets, the asking one counted. While the service holds fewer than the cap, any
//! connection adds buckets. Once full, a connection under its share takes room from the
//! connection holding the most, when that one is over its share (the hub ends one of its
//! streams, the one holding the most); a connection at its share is refused. So one
//! stream reporting junk buckets by the thousand never shuts out a later Envoy, as a
//! listener's share per client address keeps one client's connections from shutting out
//! another's. Buckets with no rule hold no room at all: the hub does not keep them.
//!
//! Counts are kept as buckets come and go, so asking costs nothing while there is room,
//! and a look at each connection (not each stream) when full.

use std::collections::HashMap;
use std::net::SocketAddr;

/// The buckets held, in all and by connection, under a cap.
#[derive(Debug)]
pub(super) struct Room {
    max: usize,
    held: usize,
    by_connection: HashMap<SocketAddr, usize>,
}

/// Whether a connection may add a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admission {
    /// There is room.
    Free,
    /// The service is full, the asker is under its share: room is taken from this
    /// connection, over its share.
    TakeFrom(SocketAddr),
    /// The service is full and the asker holds its share (`share` buckets), or nobody is
    /// over theirs.
    Refused { held: usize, share: usize },
}

impl Room {
    /// No bucket held yet, under a cap of `max`.
    pub(super) fn new(max: usize) -> Room {
        Room { max, held: 0, by_connection: HashMap::new() }
    }

    /// The buckets held, over every connection.
    pub(super) fn held(&self) -> usize {
        self.held
    }

    /// Whether `connection` may add a bucket now.
    pub(super) fn admits(&self, connection: SocketAddr) -> Admission {
        if self.held < self.max {
            return Admission::Free;
        }
        let mine = self.by_connection.get(&connection).copied().unwrap_or(0);
        let holders = self.by_connection.len() + usize::from(mine == 0);
        let share = self.max / holders.max(1);
        let largest = self.by_connection.iter().max_by_key(|&(_, &count)| count);
        match largest {
            Some((&largest, &count)) if mine < share && count > share => Admission::TakeFrom(largest),
            _ => Admission::Refused { held: self.held, share },
        }
    }

    /// Counts a bucket added by `connection`.
    pub(super) fn take(&mut self, connection: SocketAddr) {
        self.held += 1;
        *self.by_connection.entry(connection).or_default() += 1;
    }

    /// Counts `count` buckets of `connection` forgotten.
    pub(super) fn give_back(&mut self, connection: SocketAddr, count: usize) {
        let Some(held) = self.by_connection.get_mut(&connection) else { return };
        let count = count.min(*held);
        *held -= count;
        self.held -= count;
        if *held == 0 {
            self.by_connection.remove(&connection);
        }
    }

    /// Counts every bucket forgotten.
    pub(super) fn clear(&mut self) {
        self.held = 0;
        self.by_connection.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connection from loopback's `port`.
    fn connection(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A room of `max` in which each connection (by port) holds its count.
    fn room_with(max: usize, holdings: &[(u16, usize)]) -> Room {
        let mut room = Room::new(max);
        for &(port, count) in holdings {
            (0..count).for_each(|_| room.take(connection(port)));
        }
        room
    }

    #[test]
    fn below_the_cap_every_connection_adds_buckets() {
        let room = room_with(10, &[(1, 9)]);
        assert_eq!(room.admits(connection(1)), Admission::Free);
        assert_eq!(room.admits(connection(2)), Admission::Free);
    }

    #[test]
    fn a_full_service_takes_room_for_a_new_connection_from_the_one_holding_the_most() {
        let room = room_with(10, &[(1, 8), (2, 2)]);
        assert_eq!(room.admits(connection(3)), Admission::TakeFrom(connection(1)), "share 10 / 3 = 3");
        assert_eq!(room.admits(connection(2)), Admission::TakeFrom(connection(1)), "share 10 / 2 = 5");
        assert_eq!(room.admits(connection(1)), Admission::Refused { held: 10, share: 5 });
    }

    #[test]
    fn a_connection_at_its_share_or_nobody_over_theirs_means_a_refusal() {
        let room = room_with(6, &[(1, 2), (2, 2), (3, 2)]);
        assert_eq!(room.admits(connection(1)), Admission::Refused { held: 6, share: 2 });
        let room = room_with(4, &[(1, 1), (2, 1), (3, 1), (4, 1)]);
        assert_eq!(room.admits(connection(5)), Admission::Refused { held: 4, share: 0 });
    }

    #[test]
    fn buckets_given_back_make_room_and_forget_an_empty_connection() {
        let mut room = room_with(4, &[(1, 3), (2, 1)]);
        room.give_back(connection(1), 3);
        room.give_back(connection(2), 5);
        assert_eq!(room.held(), 0);
        assert!(room.by_connection.is_empty());
    }
}
