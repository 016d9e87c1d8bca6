//! The buckets' layouts: their core state, then the leases they hold
//! (`lua/token_bucket.lua`, `lua/leaky_bucket.lua`).

use super::{Bytes, JudgedAt, Layout, Malformed, Stored, double, doubles, holds, number, pack, possible};
use sluice_core::algorithm::leaky_bucket::Tat;
use sluice_core::algorithm::token_bucket::Tokens;
use sluice_core::{Algorithm, LeakyBucket, TokenBucket};

/// Tokens taken and the last refill; then, while leases are held or ended since the bucket
/// was last full, 1 when ended (0 otherwise) and the leases: `lua/token_bucket.lua`'s layout.
impl Layout for TokenBucket {
    fn read(&self, raw: Option<&[u8]>) -> Result<Stored<Tokens>, Malformed> {
        let Some(raw) = raw else { return Ok(Stored::default()) };
        let (bucket, rest) = raw.split_at_checked(16).ok_or(Malformed)?;
        let [taken, last] = doubles(bucket)?;
        let holds = match rest.split_at_checked(8) {
            None if rest.is_empty() => Default::default(),
            None => return Err(Malformed),
            Some((ended, pairs)) => {
                let ended = match number(ended)? {
                    0 => false,
                    1 => true,
                    _ => return Err(Malformed),
                };
                // The scripts write this part only while it holds something.
                Some(holds::read(pairs, ended)?).filter(|holds| !holds.is_clear()).ok_or(Malformed)?
            }
        };
        Ok(Stored { state: possible(self, Tokens { taken, last, holds })?, stamp: 0 })
    }

    fn write(&self, stored: &Stored<Tokens>) -> Bytes {
        let state = &stored.state;
        let mut bytes = pack(&[state.taken, state.last]);
        if !state.holds.is_clear() {
            bytes.extend_from_slice(&double(u64::from(state.holds.ended())));
            holds::write(&state.holds, &mut bytes);
        }
        bytes
    }

    fn judged_at(&self, state: &Tokens, now: u64) -> JudgedAt {
        // A full bucket has no refill phase: it starts at the request that empties it.
        match (state.holds.is_clear(), state.taken) {
            (true, 0) => JudgedAt::at(now),
            (true, _) => JudgedAt::at(now.max(state.last)),
            (false, _) => JudgedAt { at: now.max(state.last), ages: false },
        }
    }

    /// Until the bucket is full again and every lease held has ended and refilled.
    fn expires_in(&self, state: &Tokens, _: u64, at: u64) -> u64 {
        self.expires_at(state).as_micros().saturating_sub(at)
    }
}

/// The arrival time, then the leases held: `lua/leaky_bucket.lua`'s layout.
impl Layout for LeakyBucket {
    fn read(&self, raw: Option<&[u8]>) -> Result<Stored<Tat>, Malformed> {
        let Some(raw) = raw else { return Ok(Stored::default()) };
        let (arrival, pairs) = raw.split_at_checked(8).ok_or(Malformed)?;
        let [arrival] = doubles(arrival)?;
        let state = Tat { arrival, holds: holds::read(pairs, false)? };
        Ok(Stored { state: possible(self, state)?, stamp: 0 })
    }

    fn write(&self, stored: &Stored<Tat>) -> Bytes {
        let mut bytes = pack(&[stored.state.arrival]);
        holds::write(&stored.state.holds, &mut bytes);
        bytes
    }

    fn judged_at(&self, state: &Tat, now: u64) -> JudgedAt {
        JudgedAt { at: now, ages: state.holds.is_clear() }
    }

    /// Until every lease held has ended and been folded in.
    fn expires_in(&self, state: &Tat, _: u64, at: u64) -> u64 {
        self.expires_at(state).as_micros().saturating_sub(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{EXACT_LIMIT, LeakMode, TokenBucketSettings};
    use std::time::Duration;

    fn bucket() -> TokenBucket {
        let settings = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(1) };
        TokenBucket::new(settings).unwrap()
    }

    #[test]
    fn states_the_algorithm_never_stores_are_malformed() {
        let bucket = bucket();
        assert!(bucket.read(Some(&pack(&[2, 7]))).is_ok());
        assert!(bucket.read(Some(&pack(&[3, 7]))).is_err());
        let gcra = LeakyBucket::new(Duration::from_micros(5), 1, LeakMode::Delay).unwrap();
        assert!(gcra.read(Some(&[0xff; 8])).is_err());
        assert!(gcra.read(Some(&pack(&[EXACT_LIMIT]))).is_err());
    }

    #[test]
    fn leases_are_read_as_the_scripts_write_them() {
        let bucket = bucket();
        let held = bucket.read(Some(&pack(&[2, 7, 0, 50, 1, 60, 1]))).unwrap();
        assert_eq!(held.state.holds.live_units(0), 2);
        assert_eq!(bucket.write(&held), pack(&[2, 7, 0, 50, 1, 60, 1]));
        assert!(bucket.read(Some(&pack(&[2, 7, 1]))).unwrap().state.holds.ended());
        assert!(bucket.read(Some(&pack(&[2, 7, 0]))).is_err(), "nothing held nor ended: the short form");
        assert!(bucket.read(Some(&pack(&[2, 7, 2]))).is_err(), "a mark of 2");
        assert!(bucket.read(Some(&pack(&[2, 7, 0, 60, 1, 50, 1]))).is_err(), "deadlines out of order");
        assert!(bucket.read(Some(&pack(&[2, 7, 0, 50, 0]))).is_err(), "a lease of nothing");
        let gcra = LeakyBucket::new(Duration::from_micros(5), 1, LeakMode::NoDelay).unwrap();
        assert_eq!(gcra.read(Some(&pack(&[9, 50, 2]))).unwrap().state.holds.live_units(49), 2);
        assert!(gcra.read(Some(&pack(&[9, 50]))).is_err());
    }
}
