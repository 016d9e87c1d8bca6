//! The sliding log's state: a ring buffer of timestamps, 4 bytes a slot while it can be,
//! with up to four slots kept inside the state itself.

use super::SlidingLogPlan;
use crate::algorithm::Holds;

/// The longest span (newest − oldest, µs) a narrow ring can hold.
pub(super) const NARROW_SPAN: u64 = u32::MAX as u64;

/// The smallest capacity a log on the heap shrinks to: 32 bytes in a narrow ring.
const MIN_SLOTS: usize = 8;

/// Rings of more slots than this (a 4 KiB page of narrow slots) are kept tight: see
/// [`SlidingLogState`]'s capacity notes.
const PAGE_SLOTS: usize = 1024;

/// The narrow slots a log keeps inside its state.
const INLINE_SLOTS: usize = 4;

/// A log on the heap comes back inside its state once it holds at most this many entries
/// (the new ones included): half the inline slots, so that a log whose count wavers around
/// the inline capacity does not move back and forth.
const RETURN_INLINE: usize = INLINE_SLOTS / 2;

/// A key's log: a ring buffer of the timestamps still in the window at the last write,
/// oldest first.
///
/// **Capacity.** It follows what the log holds and never exceeds `limit`. A log of up to four
/// entries keeps them inside the state (no allocation, no pointer to follow: a key with a few
/// requests in its window costs no memory miss beyond its own entry); a fifth moves the log to
/// the heap, where it doubles when full and shrinks to twice its entries when an eighth full
/// (so a log whose count wavers does not reallocate back and forth), and it returns inside the
/// state once it holds two entries or fewer (the new one included). A key with 5 requests in
/// the window holds 8 slots, not `limit`, however many it made before.
///
/// **Tight long logs.** Every check reads the oldest entry and writes after the newest; in a
/// ring with room to spare, the free slots lie between the two, so in a log longer than a
/// page they sit on different pages, and a store with many such keys spends its time on
/// address translation. So a log of more than 1 024 entries (a 4 KiB page of narrow slots)
/// that has settled (its head has gone round the ring since it last grew) is rebuilt with a
/// 1/32 margin over its entries when it has more than twice that margin free, and when it
/// outgrows the margin it first grows by the margin again; only a log that outgrows it
/// again before its head has gone round (a growing log) doubles. A rebuild copies the log.
/// A settled log is tightened at most once, and grows by a margin at most once, per turn of
/// its head (a turn writes about as many entries as it holds): at most two copies per entry
/// written.
///
/// **Slots.** A slot is 4 bytes while the log spans at most 2^32 − 1 µs (about 71 minutes:
/// every window up to that length), holding the low 32 bits of its timestamp; the high bits
/// are those of the newest entry, less one where the low bits wrapped. A log spanning more (a
/// longer window) holds each timestamp whole, in two words, on the heap. Halving the slot
/// halves the memory a busy log streams through on every check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingLogState {
    /// Where the slots live.
    words: Words,
    /// Number of entries held.
    len: u32,
    /// High 32 bits of the newest entry's timestamp.
    epoch: u32,
    /// Units leased out, logged at their deadlines beside the ring (which keeps time order):
    /// one word while nothing is leased.
    holds: Holds,
}

/// Where a log's slots live. Both variants fit in 24 bytes: the inline slots sit beside the
/// ring's pointer, whose non-null niche tells the two apart.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Words {
    /// Up to [`INLINE_SLOTS`] narrow slots, the oldest entry first.
    Inline([u32; INLINE_SLOTS]),
    /// A ring on the heap.
    Heap(Ring),
}

impl Default for Words {
    fn default() -> Self {
        Words::Inline([0; INLINE_SLOTS])
    }
}

/// What [`SlidingLogState::append_rebuilding`] appends: `count` entries stamped `now` to a
/// log whose newest entry was `newest`.
#[derive(Clone, Copy, Debug)]
struct Appended {
    newest: u64,
    now: u64,
    count: usize,
}

/// A ring buffer of slots on the heap.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ring {
    /// One word per slot (narrow) or two (wide, low word first). A boxed slice, not a `Vec`:
    /// its length is the capacity, so the state is 8 bytes smaller.
    words: Box<[u32]>,
    /// Physical index (in slots) of the oldest entry in the low 30 bits (a ring never holds
    /// more than [`SlidingLog::MAX_LIMIT`](super::SlidingLog::MAX_LIMIT) slots), and the
    /// flags [`WIDE`] and [`GROWN`] above it.
    head: u32,
    /// Low 32 bits of the newest entry (the high ones are the state's `epoch`): a decision
    /// reads the newest entry here rather than at the ring's tail, a cache line away.
    newest_low: u32,
}

/// [`Ring::head`]'s flag: each slot holds a whole timestamp in two words.
const WIDE: u32 = 1 << 31;
/// [`Ring::head`]'s flag: the ring grew since its head last went round (the next growth
/// doubles).
const GROWN: u32 = 1 << 30;
/// [`Ring::head`]'s bits that hold the head itself.
const HEAD: u32 = GROWN - 1;

impl Ring {
    /// Room for `capacity` slots, each of two words when `wide`.
    fn zeroed(capacity: usize, wide: bool) -> Self {
        let words = vec![0; capacity << usize::from(wide)].into_boxed_slice();
        Ring { words, head: if wide { WIDE } else { 0 }, newest_low: 0 }
    }

    #[inline(always)]
    fn wide(&self) -> bool {
        self.head & WIDE != 0
    }

    #[inline(always)]
    fn head(&self) -> usize {
        (self.head & HEAD) as usize
    }

    fn set_head(&mut self, head: usize) {
        debug_assert!(head <= HEAD as usize, "a head beyond 30 bits");
        self.head = (self.head & !HEAD) | head as u32;
    }

    fn grown(&self) -> bool {
        self.head & GROWN != 0
    }

    fn set_grown(&mut self, grown: bool) {
        self.head = if grown { self.head | GROWN } else { self.head & !GROWN };
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.words.len() >> usize::from(self.wide())
    }

    /// Stamps the `count` physical slots from `first` (not past the end) with `now`, the
    /// newest entry from here on when `count` is not 0 (the state keeps its high 32 bits).
    fn fill(&mut self, first: usize, count: usize, now: u64) {
        if count == 0 {
            return;
        }
        if self.wide() {
            let whole = [now as u32, (now >> 32) as u32];
            self.words[2 * first..2 * (first + count)]
                .chunks_exact_mut(2)
                .for_each(|slot| slot.copy_from_slice(&whole));
        } else {
            self.words[first..first + count].fill(now as u32);
        }
        self.newest_low = now as u32;
    }

    /// Stamps physical slot `slot` with `now`, the newest entry from here on (the state
    /// keeps its high 32 bits).
    #[inline(always)]
    fn write(&mut self, slot: usize, now: u64) {
        if self.wide() {
            self.words[2 * slot] = now as u32;
            self.words[2 * slot + 1] = (now >> 32) as u32;
        } else {
            self.words[slot] = now as u32;
        }
        self.newest_low = now as u32;
    }
}

/// A log's entries as read for one decision: the slots and the ring's position loaded
/// once, rather than on every access (the storage's variant, the width and the capacity).
#[derive(Clone, Copy)]
pub(super) struct Entries<'a> {
    words: &'a [u32],
    head: usize,
    len: usize,
    /// The newest timestamp (0 when empty).
    newest: u64,
    wide: bool,
}

impl Entries<'_> {
    /// Number of entries.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Number of slots.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.words.len() >> usize::from(self.wide)
    }

    /// Physical slot of the logical `index`-th entry (`head + index < 2 × capacity`).
    #[inline(always)]
    fn slot(&self, index: usize) -> usize {
        let capacity = self.capacity();
        let slot = self.head + index;
        if slot >= capacity { slot - capacity } else { slot }
    }

    /// The newest timestamp (0 when empty).
    #[inline(always)]
    pub(super) fn newest(&self) -> u64 {
        self.newest
    }

    /// The logical `index`-th entry, 0 being the oldest, in a log whose newest is `newest`.
    #[inline(always)]
    pub(super) fn at(&self, newest: u64, index: usize) -> u64 {
        let slot = self.slot(index);
        if self.wide {
            u64::from(self.words[2 * slot]) | u64::from(self.words[2 * slot + 1]) << 32
        } else {
            newest - u64::from((newest as u32).wrapping_sub(self.words[slot]))
        }
    }
}

impl SlidingLogState {
    /// The entries, to read for a decision.
    #[inline(always)]
    pub(super) fn view(&self) -> Entries<'_> {
        let len = self.len as usize;
        let (words, head, wide, newest_low): (&[u32], usize, bool, u32) = match &self.words {
            // The newest inline slot (the last one when empty, then unused).
            Words::Inline(words) => (words, 0, false, words[(len + INLINE_SLOTS - 1) % INLINE_SLOTS]),
            Words::Heap(ring) => (&ring.words, ring.head(), ring.wide(), ring.newest_low),
        };
        let newest = if len == 0 { 0 } else { u64::from(self.epoch) << 32 | u64::from(newest_low) };
        Entries { words, head, len, newest, wide }
    }

    /// Units leased out, logged at their deadlines.
    pub fn holds(&self) -> &Holds {
        &self.holds
    }

    /// [`holds`](Self::holds), to change.
    pub(crate) fn holds_mut(&mut self) -> &mut Holds {
        &mut self.holds
    }

    /// A log holding `entries` (as [`from_entries`](Self::from_entries)) and the leases
    /// `holds`.
    pub(crate) fn with_holds(entries: &[u64], holds: Holds) -> Self {
        SlidingLogState { holds, ..SlidingLogState::from_entries(entries) }
    }

    /// Number of timestamps held in the ring (leased units apart).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes this state holds on the heap (none while its entries fit inside it and
    /// nothing is leased).
    pub fn heap_bytes(&self) -> usize {
        let ring = match &self.words {
            Words::Inline(_) => 0,
            Words::Heap(ring) => ring.words.len() * size_of::<u32>(),
        };
        ring + self.holds.heap_bytes()
    }

    /// Number of slots.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.view().capacity()
    }

    /// Whether each slot holds a whole timestamp.
    fn wide(&self) -> bool {
        matches!(&self.words, Words::Heap(ring) if ring.wide())
    }

    /// Whether the ring grew since its head last went round.
    fn grown(&self) -> bool {
        matches!(&self.words, Words::Heap(ring) if ring.grown())
    }

    /// Physical index of the logical `index`-th entry (`head + index < 2 × capacity`).
    #[inline(always)]
    fn physical(&self, index: usize) -> usize {
        self.view().slot(index)
    }

    /// The logical `index`-th entry, 0 being the oldest, in a log whose newest is `newest`.
    #[inline(always)]
    pub(super) fn entry_below(&self, newest: u64, index: usize) -> u64 {
        self.view().at(newest, index)
    }

    /// The logical `index`-th entry, 0 being the oldest (`index < len`).
    pub(super) fn entry(&self, index: usize) -> u64 {
        self.entry_below(self.newest().unwrap_or(0), index)
    }

    /// The timestamps held, oldest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = u64> + '_ {
        let newest = self.newest().unwrap_or(0);
        (0..self.len()).map(move |index| self.entry_below(newest, index))
    }

    /// A log holding `entries` (oldest first, at most its limit, so fewer than 2^30) in a
    /// ring of exactly that many slots (or inside the state): the next write grows it.
    pub(crate) fn from_entries(entries: &[u64]) -> Self {
        let mut state = SlidingLogState::default();
        state.fill(entries, entries.len(), entries.last().copied().unwrap_or(0));
        state
    }

    /// The newest timestamp held.
    #[inline(always)]
    pub(super) fn newest(&self) -> Option<u64> {
        (self.len > 0).then(|| self.view().newest())
    }

    /// Whether a narrow ring could not hold both its oldest entry and one stamped `now`.
    #[inline(always)]
    fn needs_wide(&self, newest: u64, now: u64) -> bool {
        self.len > 0 && now - self.entry_below(newest, 0) > NARROW_SPAN
    }

    /// Logs `plan.cost` entries stamped `plan.now`, after dropping the `plan.first_live`
    /// oldest ones, which have expired (they can never count again: every later decision is
    /// at `plan.now` or later), keeping only the newest `limit`. Returns how many bytes the
    /// log's heap grew by (negative when it shrank): zero unless its storage was rebuilt, so
    /// that a store counts bytes only then.
    #[inline(always)]
    pub(super) fn append(&mut self, plan: &SlidingLogPlan, limit: usize) -> isize {
        let SlidingLogPlan { newest, now, cost, first_live, narrow_window, .. } = *plan;
        let count = cost.min(limit as u64) as usize;
        if count == 0 {
            return 0;
        }
        let tighten = self.drop_oldest(first_live) && self.went_round();
        if count == 1 && !tighten && self.push_one_in_place(now, limit, narrow_window || !self.needs_wide(newest, now))
        {
            return 0;
        }
        self.append_rebuilding(Appended { newest, now, count }, limit, tighten)
    }

    /// [`append`](Self::append) when the log may have to be rebuilt (grown, shrunk,
    /// tightened, widened or moved); returns how many bytes its heap grew by. Out of line,
    /// and given its inputs by value, so that the common case keeps them in registers.
    #[cold]
    #[inline(never)]
    fn append_rebuilding(&mut self, appended: Appended, limit: usize, tighten: bool) -> isize {
        let Appended { newest, now, count } = appended;
        let (len, capacity) = (self.len(), self.capacity());
        let wide = self.needs_wide(newest, now);
        let target =
            if tighten { tight(len + count).min(limit) } else { self.target_capacity(len + count, limit, wide) };
        let mut grown = 0;
        if target != capacity || self.wide() != wide {
            let held = self.heap_bytes();
            let entries: Vec<u64> = (0..len).map(|index| self.entry_below(newest, index)).collect();
            self.fill(&entries, target, now);
            if let Words::Heap(ring) = &mut self.words {
                ring.set_grown(target > capacity);
            }
            grown = self.heap_bytes() as isize - held as isize;
        }
        self.push(now, count, limit);
        grown
    }

    /// The common case: one entry stamped `now` into a log that has room for it and need not
    /// change (neither grow, shrink, widen nor move: `fits_narrow` says a narrow slot can
    /// hold it). The storage is read once. Returns false, having changed nothing, otherwise.
    #[inline(always)]
    fn push_one_in_place(&mut self, now: u64, limit: usize, fits_narrow: bool) -> bool {
        let len = self.len();
        match &mut self.words {
            Words::Inline(words) => {
                if len >= INLINE_SLOTS.min(limit) || !fits_narrow {
                    return false;
                }
                words[len] = now as u32;
            }
            Words::Heap(ring) => {
                let capacity = ring.capacity();
                // Neither full, nor so empty that it shrinks or comes back inside the state.
                let roomy = len < capacity.min(limit) && (len + 1) * 8 > capacity && len >= RETURN_INLINE;
                if !(roomy && (ring.wide() || fits_narrow)) {
                    return false;
                }
                let slot = ring.head() + len;
                ring.write(if slot >= capacity { slot - capacity } else { slot }, now);
            }
        }
        self.epoch = (now >> 32) as u32;
        self.len += 1;
        true
    }

    /// The capacity for `needed` entries in slots that are `wide` or not: inside the state
    /// when narrow and few enough (see [`RETURN_INLINE`]), a short wide log in exactly as many
    /// slots; when they do not fit, doubled (or, for a long log that has not grown since its
    /// head last went round, a 1/32 margin over them); down to twice them when they fill an
    /// eighth or less; at most `limit`.
    fn target_capacity(&self, needed: usize, limit: usize, wide: bool) -> usize {
        let capacity = self.capacity();
        let on_heap = matches!(self.words, Words::Heap(_));
        if needed <= INLINE_SLOTS && (!on_heap || needed <= RETURN_INLINE) {
            if wide { needed } else { INLINE_SLOTS }
        } else if needed > capacity && capacity < limit {
            let grown = if needed > PAGE_SLOTS && !self.grown() { tight(needed) } else { needed.max(capacity * 2) };
            grown.max(MIN_SLOTS).min(limit)
        } else if needed * 8 <= capacity && capacity > MIN_SLOTS {
            (needed * 2).max(MIN_SLOTS)
        } else {
            capacity
        }
    }

    /// Stamps physical slot `slot` with `now`, the newest entry from here on.
    #[inline(always)]
    fn write(&mut self, slot: usize, now: u64) {
        match &mut self.words {
            Words::Heap(ring) => ring.write(slot, now),
            Words::Inline(words) => words[slot] = now as u32,
        }
        self.epoch = (now >> 32) as u32;
    }

    /// Drops the `count` oldest entries; returns whether the head went past the ring's end.
    fn drop_oldest(&mut self, count: usize) -> bool {
        let len = self.len();
        if count >= len {
            self.len = 0;
            if let Words::Heap(ring) = &mut self.words {
                ring.set_head(0);
            }
            return false;
        }
        if count == 0 {
            return false;
        }
        self.len -= count as u32;
        match &mut self.words {
            // Inside the state the oldest entry is always in the first slot.
            Words::Inline(words) => {
                words.copy_within(count..len, 0);
                false
            }
            Words::Heap(ring) => {
                let (next, capacity) = (ring.head() + count, ring.capacity());
                let went_round = next >= capacity;
                ring.set_head(if went_round { next - capacity } else { next });
                went_round
            }
        }
    }

    /// The head has gone round the ring: the next growth may be tight again. Returns whether
    /// the ring is long and has more than twice its margin free, to be rebuilt tight.
    #[cold]
    fn went_round(&mut self) -> bool {
        let len = self.len();
        let Words::Heap(ring) = &mut self.words else { return false };
        ring.set_grown(false);
        len > PAGE_SLOTS && ring.capacity() > tight(len) + margin(len)
    }

    /// Rebuilds the log with `capacity` slots (at least `entries.len()`; inside the state if
    /// they are narrow and fit there) holding `entries`, oldest first, narrow unless they and
    /// an entry stamped `next` span more than 2^32 − 1 µs.
    fn fill(&mut self, entries: &[u64], capacity: usize, next: u64) {
        let newest = next.max(entries.last().copied().unwrap_or(0));
        let wide = entries.first().is_some_and(|&oldest| newest - oldest > NARROW_SPAN);
        self.words = if !wide && capacity <= INLINE_SLOTS {
            Words::default()
        } else {
            Words::Heap(Ring::zeroed(capacity, wide))
        };
        self.len = entries.len() as u32;
        for (slot, &entry) in entries.iter().enumerate() {
            self.write(slot, entry);
        }
    }

    /// Writes `count` entries after the newest; in a full log (or one holding `limit`
    /// entries) each replaces the oldest. The oldest are dropped at once and the slots
    /// filled as one or two runs, so a request of a large cost costs a `memset`, not a
    /// loop over its entries.
    fn push(&mut self, now: u64, count: usize, limit: usize) {
        let room = self.capacity().min(limit);
        let count = count.min(room);
        self.drop_oldest((self.len() + count).saturating_sub(room));
        let first = self.physical(self.len());
        match &mut self.words {
            Words::Inline(words) => words[first..first + count].fill(now as u32),
            Words::Heap(ring) => {
                let before_end = count.min(ring.capacity() - first);
                ring.fill(first, before_end, now);
                ring.fill(0, count - before_end, now);
            }
        }
        self.epoch = (now >> 32) as u32;
        self.len += count as u32;
    }
}

/// The room a tight long log keeps beyond its `needed` entries.
fn margin(needed: usize) -> usize {
    needed / 32
}

/// A tight capacity for `needed` entries.
fn tight(needed: usize) -> usize {
    needed + margin(needed)
}

// The inline slots share the ring's 24 bytes: a log costs a key 40 bytes, 8 of them for the
// leases it holds (one word while it holds none).
const _: () = assert!(size_of::<SlidingLogState>() == 40);
