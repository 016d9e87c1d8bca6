//! The sliding log's state: a ring buffer of timestamps, 4 bytes a slot while it can be,
//! with its first two slots kept inside the state itself.

use super::SlidingLogPlan;

/// The longest span (newest − oldest, µs) a narrow ring can hold.
pub(super) const NARROW_SPAN: u64 = u32::MAX as u64;

/// The smallest capacity a log on the heap shrinks to: 32 bytes in a narrow ring.
const MIN_SLOTS: usize = 8;

/// Rings of more slots than this (a 4 KiB page of narrow slots) are kept tight: see
/// [`SlidingLogState`]'s capacity notes.
const PAGE_SLOTS: usize = 1024;

/// The words a log keeps inside its state: two narrow slots or one wide one.
const INLINE_WORDS: usize = 2;

/// A key's log: a ring buffer of the timestamps still in the window at the last write,
/// oldest first.
///
/// **Capacity.** It follows what the log holds and never exceeds `limit`. A log of up to two
/// entries keeps them inside the state (no allocation, no pointer to follow); a longer one
/// moves to the heap, where it doubles when full and shrinks to twice its entries when an
/// eighth full (so a log whose count wavers does not reallocate back and forth), and it
/// returns inside the state when every entry has expired. A key with 3 requests in the
/// window holds 8 slots, not `limit`, however many it made before.
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
/// longer window) holds each timestamp whole, in two words. Halving the slot halves the
/// memory a busy log streams through on every check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingLogState {
    /// The ring's storage: one word per slot (narrow) or two (wide, low word first).
    words: Words,
    /// Physical index (in slots) of the oldest entry.
    head: u32,
    /// Number of entries held.
    len: u32,
    /// High 32 bits of the newest entry's timestamp (narrow rings only).
    epoch: u32,
    /// Whether each slot holds a whole timestamp in two words.
    wide: bool,
    /// Whether the ring grew since its head last went round (the next growth doubles).
    grown: bool,
}

/// Where the ring's words live. Both variants fit in 16 bytes: the inline words sit beside
/// the heap pointer's non-null niche.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Words {
    Inline([u32; INLINE_WORDS]),
    /// A boxed slice, not a `Vec`: its length is the capacity, so the state is 8 bytes smaller.
    Heap(Box<[u32]>),
}

impl Default for Words {
    fn default() -> Self {
        Words::Inline([0; INLINE_WORDS])
    }
}

impl Words {
    /// Room for `count` words: inside the state when they fit.
    fn zeroed(count: usize) -> Self {
        if count <= INLINE_WORDS { Words::default() } else { Words::Heap(vec![0; count].into_boxed_slice()) }
    }

    #[inline(always)]
    fn as_slice(&self) -> &[u32] {
        match self {
            Words::Inline(words) => words,
            Words::Heap(words) => words,
        }
    }

    #[inline(always)]
    fn as_mut_slice(&mut self) -> &mut [u32] {
        match self {
            Words::Inline(words) => words,
            Words::Heap(words) => words,
        }
    }

    fn on_heap(&self) -> bool {
        matches!(self, Words::Heap(_))
    }
}

/// A log's entries as read for one decision: the slots and the ring's position loaded
/// once, rather than on every access (the storage's variant, the width and the capacity).
#[derive(Clone, Copy)]
pub(super) struct Entries<'a> {
    words: &'a [u32],
    head: usize,
    len: usize,
    epoch: u32,
    wide: bool,
}

impl Entries<'_> {
    /// Number of entries.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Physical slot of the logical `index`-th entry.
    #[inline(always)]
    fn slot(&self, index: usize) -> usize {
        let capacity = self.words.len() >> usize::from(self.wide);
        let slot = self.head + index;
        if slot >= capacity { slot - capacity } else { slot }
    }

    /// The newest timestamp (0 when empty).
    #[inline(always)]
    pub(super) fn newest(&self) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let slot = self.slot(self.len - 1);
        if self.wide {
            u64::from(self.words[2 * slot]) | u64::from(self.words[2 * slot + 1]) << 32
        } else {
            u64::from(self.epoch) << 32 | u64::from(self.words[slot])
        }
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
        Entries {
            words: self.words.as_slice(),
            head: self.head as usize,
            len: self.len as usize,
            epoch: self.epoch,
            wide: self.wide,
        }
    }

    /// Number of timestamps held.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes this state holds on the heap (none while its entries fit inside it).
    pub fn heap_bytes(&self) -> usize {
        match &self.words {
            Words::Inline(_) => 0,
            Words::Heap(words) => words.len() * size_of::<u32>(),
        }
    }

    /// Number of slots.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.words.as_slice().len() >> usize::from(self.wide)
    }

    /// Physical index of the logical `index`-th entry (`head + index < 2 × capacity`).
    #[inline(always)]
    fn physical(&self, index: usize) -> usize {
        let physical = self.head as usize + index;
        let capacity = self.capacity();
        if physical >= capacity { physical - capacity } else { physical }
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

    /// A log holding `entries` (oldest first, at most its limit, so fewer than 2^32) in a
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
    /// at `plan.now` or later), keeping only the newest `limit`.
    #[inline(always)]
    pub(super) fn append(&mut self, plan: &SlidingLogPlan, limit: usize) {
        let SlidingLogPlan { newest, now, cost, first_live, narrow_window } = *plan;
        let count = cost.min(limit as u64) as usize;
        if count == 0 {
            return;
        }
        let tighten = self.drop_oldest(first_live) && self.went_round();
        if count == 1 && !tighten && self.push_one_in_place(now, limit, narrow_window || !self.needs_wide(newest, now))
        {
            return;
        }
        let (len, capacity) = (self.len(), self.capacity());
        let target = if tighten { tight(len + count).min(limit) } else { self.target_capacity(len + count, limit) };
        if target != capacity || self.wide != self.needs_wide(newest, now) {
            let entries: Vec<u64> = (0..len).map(|index| self.entry_below(newest, index)).collect();
            self.fill(&entries, target, now);
            self.grown = target > capacity;
        }
        self.push(now, count, limit);
    }

    /// The common case: one entry stamped `now` into a ring that has room for it and need
    /// not change (neither grow, shrink nor widen: `fits_narrow` says a narrow ring can hold
    /// it). The storage is read once. Returns false, having changed nothing, otherwise.
    #[inline(always)]
    fn push_one_in_place(&mut self, now: u64, limit: usize, fits_narrow: bool) -> bool {
        let (len, wide, on_heap) = (self.len(), self.wide, self.words.on_heap());
        let words = self.words.as_mut_slice();
        let capacity = words.len() >> usize::from(wide);
        // The inline words may be more slots than the limit allows.
        let roomy = len < capacity.min(limit) && ((len + 1) * 8 > capacity || capacity <= MIN_SLOTS);
        if !(roomy && (wide || fits_narrow) && (len > 0 || !on_heap)) {
            return false;
        }
        let slot = self.head as usize + len;
        let slot = if slot >= capacity { slot - capacity } else { slot };
        if wide {
            words[2 * slot] = now as u32;
            words[2 * slot + 1] = (now >> 32) as u32;
        } else {
            words[slot] = now as u32;
            self.epoch = (now >> 32) as u32;
        }
        self.len += 1;
        true
    }

    /// The capacity for `needed` entries: when they do not fit, doubled (or, for a long log
    /// that has not grown since its head last went round, a 1/32 margin over them); down to
    /// twice them when they fill an eighth or less; inside the state when all have expired
    /// and the new ones fit there; at most `limit`.
    fn target_capacity(&self, needed: usize, limit: usize) -> usize {
        let (len, capacity) = (self.len(), self.capacity());
        let inline = INLINE_WORDS >> usize::from(self.wide);
        if len == 0 && needed <= inline {
            inline
        } else if needed > capacity && capacity < limit {
            let grown = if needed > PAGE_SLOTS && !self.grown { tight(needed) } else { needed.max(capacity * 2) };
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
        let words = self.words.as_mut_slice();
        if self.wide {
            words[2 * slot] = now as u32;
            words[2 * slot + 1] = (now >> 32) as u32;
        } else {
            words[slot] = now as u32;
            self.epoch = (now >> 32) as u32;
        }
    }

    /// Drops the `count` oldest entries; returns whether the head went past the ring's end.
    fn drop_oldest(&mut self, count: usize) -> bool {
        if count >= self.len() {
            self.head = 0;
            self.len = 0;
            return false;
        }
        let (next, capacity) = (self.head as usize + count, self.capacity());
        let went_round = next >= capacity;
        self.head = (if went_round { next - capacity } else { next }) as u32;
        self.len -= count as u32;
        went_round
    }

    /// The head has gone round the ring: the next growth may be tight again. Returns whether
    /// the ring is long and has more than twice its margin free, to be rebuilt tight.
    #[cold]
    fn went_round(&mut self) -> bool {
        self.grown = false;
        let len = self.len();
        len > PAGE_SLOTS && self.capacity() > tight(len) + margin(len)
    }

    /// Rebuilds the ring with `capacity` slots (at least `entries.len()`; inside the state if
    /// they fit there) holding `entries`, oldest first, narrow unless they and an entry
    /// stamped `next` span more than 2^32 − 1 µs.
    fn fill(&mut self, entries: &[u64], capacity: usize, next: u64) {
        let newest = next.max(entries.last().copied().unwrap_or(0));
        self.wide = entries.first().is_some_and(|&oldest| newest - oldest > NARROW_SPAN);
        let width = if self.wide { 2 } else { 1 };
        self.words = Words::zeroed(capacity * width);
        self.head = 0;
        self.len = entries.len() as u32;
        for (slot, &entry) in entries.iter().enumerate() {
            self.write(slot, entry);
        }
    }

    /// Writes `count` entries after the newest; in a full ring (or one holding `limit`
    /// entries) they replace the oldest.
    fn push(&mut self, now: u64, count: usize, limit: usize) {
        let room = self.capacity().min(limit);
        for _ in 0..count.min(room) {
            let slot = self.physical(self.len());
            self.write(slot, now);
            if self.len() < room {
                self.len += 1;
            } else {
                // Written over the oldest: the head moves past it.
                self.head = self.physical(1) as u32;
            }
        }
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

// The inline words share the heap pointer's 16 bytes: a log costs a key no more than before.
const _: () = assert!(size_of::<SlidingLogState>() == 32);
