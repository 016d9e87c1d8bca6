//! The cap on the connections one listener serves at once (`max_connections`), and how a
//! full listener makes room.
//!
//! Each accepted connection takes a slot and keeps it until it closes. When none is left,
//! a connection is asked to close, and the new connection takes its slot: an idle one
//! first, and a busy one of a client over its share of the listener
//! ([`super::room`]). So a flood of idle connections (HTTP/2 prefaces, unfinished heads,
//! connections that never send anything), or one client's requests that never finish,
//! never shut out a client that sends requests. Only when no connection may go is a new
//! one closed as soon as it is accepted, rather than left waiting in the listen backlog:
//! the client learns at once (a closed connection, so Envoy applies its failure mode),
//! and the backlog never fills up.

use super::room::{Connections, Held};
use crate::runtime::activity::Activity;
use parking_lot::Mutex;
use std::net::IpAddr;
use std::sync::Arc;

/// The slots of one listener.
#[derive(Clone, Debug)]
pub(crate) struct Slots(Arc<Mutex<Table>>);

/// The connections holding a slot.
#[derive(Debug)]
struct Table {
    capacity: usize,
    open: Connections,
    /// The next slot's number: numbers grow with accept order.
    next: u64,
}

/// One connection's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    id: u64,
    activity: Arc<Activity>,
    slots: Slots,
}

impl Slot {
    /// What the connection holding this slot is doing.
    pub(crate) fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.0.lock().open.remove(self.id);
    }
}

/// What taking a slot did.
#[derive(Debug)]
pub(crate) enum Taken {
    /// A slot was free.
    Free(Slot),
    /// The listener was full: a connection was asked to close, and its slot is this one.
    MadeRoom(Slot),
    /// The listener is full and no connection may go for this one: no slot.
    Full,
}

impl Slots {
    /// `count` slots.
    pub(crate) fn new(count: usize) -> Slots {
        Slots(Arc::new(Mutex::new(Table { capacity: count.max(1), open: Connections::default(), next: 0 })))
    }

    /// A slot for a connection from `client` accepted now: a free one, or the slot of a
    /// connection asked to close ([`Activity::close`]) to make room ([`super::room`]).
    pub(crate) fn take(&self, client: IpAddr) -> Taken {
        let client = client.to_canonical();
        let mut table = self.0.lock();
        let made_room = table.open.len() >= table.capacity;
        if made_room {
            let Some(closed) = table.open.to_close(client) else { return Taken::Full };
            if let Some(held) = table.open.remove(closed) {
                held.activity.close();
            }
        }
        let (id, activity) = (table.next, Arc::new(Activity::default()));
        table.next += 1;
        table.open.insert(id, Held { activity: Arc::clone(&activity), client });
        let slot = Slot { id, activity, slots: self.clone() };
        if made_room { Taken::MadeRoom(slot) } else { Taken::Free(slot) }
    }

    /// Connections holding a slot.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.0.lock().open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Waker};

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn slot(taken: Taken) -> Slot {
        match taken {
            Taken::Free(slot) | Taken::MadeRoom(slot) => slot,
            Taken::Full => panic!("no slot"),
        }
    }

    #[test]
    fn a_slot_comes_back_when_dropped() {
        let slots = Slots::new(2);
        let (first, second) = (slot(slots.take(LOOPBACK)), slot(slots.take(LOOPBACK)));
        let (_busy_first, _busy_second) = (first.activity().begin(), second.activity().begin());
        assert!(matches!(slots.take(LOOPBACK), Taken::Full), "no third slot while both are busy");
        drop(first);
        assert!(matches!(slots.take(LOOPBACK), Taken::Free(_)), "the first slot is free again");
    }

    #[test]
    fn a_full_listener_closes_the_connection_idle_the_longest_and_never_a_busy_one() {
        let slots = Slots::new(3);
        let [oldest, busy, newest] = [(); 3].map(|()| slot(slots.take(LOOPBACK)));
        let request = busy.activity().begin();
        drop(newest.activity().begin()); // it sent a request; `oldest` never did
        let Taken::MadeRoom(first) = slots.take(LOOPBACK) else { panic!("room is made") };
        let closing = |slot: &Slot| slot.activity().poll_closing(&Context::from_waker(Waker::noop()));
        assert!(closing(&oldest) && !closing(&newest), "one that never sent a request goes first");
        drop(first.activity().begin());
        let Taken::MadeRoom(second) = slots.take(LOOPBACK) else { panic!("room is made again") };
        assert!(closing(&newest) && !closing(&busy), "then the one idle the longest; never the busy one");
        let Taken::MadeRoom(_third) = slots.take(LOOPBACK) else { panic!("room is made once more") };
        assert!(closing(&second) && !closing(&first), "a new connection that sent nothing before an older used one");
        assert_eq!(slots.open(), 3);
        drop((first, request));
        assert_eq!(slots.open(), 2);
        drop(oldest); // a connection asked to close gave its slot away already
        assert_eq!(slots.open(), 2);
    }
}
