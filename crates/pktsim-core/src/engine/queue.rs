//! The event queue and keyed, cancellable timers.
//!
//! The queue is a binary heap ordered by (time, insertion number), so events at the same
//! picosecond run in the order they were scheduled; it knows no component. Components keep
//! their own state; an event only says whose it is ([`Key`]). A component that may have to
//! take back an event it scheduled owns a [`Timer`] for it: setting the timer earlier or
//! cancelling it makes the event already in the heap stale, and its owner ignores it when
//! it pops (the heap is never searched). Setting it later leaves its event where it is:
//! when that pops, too early, the timer puts it back at its time, with the insertion number
//! it was given when it was set, so events run in the same order as if it had been
//! scheduled anew (a deferral timer pushed back at every poll would otherwise fill the heap
//! with stale events, one per poll).

use super::time::Instant;

/// Whose an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// An interrupt of NIC vector `.0` fires.
    Irq(u32),
    /// A transmitted descriptor of the tx ring on vector `.0` completes: a cause.
    TxCause(u32),
    /// The work unit core `.0` is running ends.
    Step(u32),
    /// The sleeping thread of core `.0` starts to run.
    Wake(u32),
    /// The deferral timer (`gro_flush_timeout`) of the NAPI of vector `.0` expires.
    Defer(u32),
    /// The blocked application thread `.0` runs again (`sk_data_ready` woke it).
    App(u32),
    /// Interference (the tick, a preemption) begins on core `.0`.
    Interfere(u32),
}

/// What an event is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The next frame reaches the NIC while some ring wants to hear of it.
    Arrival,
    /// A timer's event: valid only while the timer has not been set again or cancelled.
    Timer(Key, u32),
    /// End of the measurement.
    End,
}

/// An event in a heap: its time, and its insertion number with what it is packed into two
/// words (`kind`'s variant in the low 4 bits of `seq`, its key's index and generation in
/// `arg`). Three plain words: the heap moves them in registers (a 32-byte entry with an
/// enum inside was written in parts and read back whole, a store-forwarding stall on
/// every pop).
#[derive(Debug, Clone, Copy)]
struct Entry {
    time: u64,
    seq: u64,
    arg: u64,
}

impl Entry {
    #[inline]
    fn new(time: Instant, seq: u64, kind: EventKind) -> Self {
        let (tag, index, gen) = match kind {
            EventKind::Arrival => (0, 0, 0),
            EventKind::End => (1, 0, 0),
            EventKind::Timer(key, gen) => match key {
                Key::Irq(i) => (2, i, gen),
                Key::TxCause(i) => (3, i, gen),
                Key::Step(i) => (4, i, gen),
                Key::Wake(i) => (5, i, gen),
                Key::Defer(i) => (6, i, gen),
                Key::App(i) => (7, i, gen),
                Key::Interfere(i) => (8, i, gen),
            },
        };
        Entry { time: time.ps(), seq: seq << 4 | tag, arg: (index as u64) << 32 | gen as u64 }
    }

    #[inline]
    fn kind(&self) -> EventKind {
        let (index, gen) = ((self.arg >> 32) as u32, self.arg as u32);
        let key = match self.seq & 15 {
            0 => return EventKind::Arrival,
            1 => return EventKind::End,
            2 => Key::Irq(index),
            3 => Key::TxCause(index),
            4 => Key::Step(index),
            5 => Key::Wake(index),
            6 => Key::Defer(index),
            7 => Key::App(index),
            _ => Key::Interfere(index),
        };
        EventKind::Timer(key, gen)
    }

    /// Whether this event runs before `other`: earlier, or at the same time and scheduled
    /// first (insertion numbers are unique, so this is a total order).
    #[inline(always)]
    fn before(&self, other: &Entry) -> bool {
        ((self.time as u128) << 64 | self.seq as u128) < ((other.time as u128) << 64 | other.seq as u128)
    }
}

/// A binary min-heap of entries by [`Entry::before`]. Which event pops next depends only
/// on that total order, never on how the heap is laid out.
#[derive(Debug, Default)]
struct Heap {
    v: Vec<Entry>,
}

impl Heap {
    #[inline]
    fn peek(&self) -> Option<&Entry> {
        self.v.first()
    }

    #[inline]
    fn len(&self) -> usize {
        self.v.len()
    }

    /// Add the entry (`time`, `seq`, `arg`): its words come in registers (an entry passed
    /// by reference was written in parts by the caller and read whole here, a stall).
    #[inline(never)]
    fn push(&mut self, time: u64, seq: u64, arg: u64) {
        let e = Entry { time, seq, arg };
        let mut pos = self.v.len();
        self.v.push(e);
        let v = &mut self.v[..];
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !e.before(&v[parent]) {
                break;
            }
            v[pos] = v[parent];
            pos = parent;
        }
        v[pos] = e;
    }

    #[inline]
    fn pop(&mut self) -> Option<Entry> {
        let last = self.v.pop()?;
        let v = &mut self.v[..];
        let Some(&top) = v.first() else { return Some(last) };
        // Move the earlier child up into the hole down to the bottom, then put the last
        // entry there and sift it up (it usually belongs near the bottom).
        let end = v.len();
        let mut pos = 0;
        let mut child = 1;
        while child + 1 < end {
            child += v[child + 1].before(&v[child]) as usize;
            v[pos] = v[child];
            pos = child;
            child = 2 * pos + 1;
        }
        if child + 1 == end {
            v[pos] = v[child];
            pos = child;
        }
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !last.before(&v[parent]) {
                break;
            }
            v[pos] = v[parent];
            pos = parent;
        }
        v[pos] = last;
        Some(top)
    }
}

/// The core of each index of the keys that name a core's own timers, by the mode's
/// numbering: NIC vectors (interrupts, completion causes), wake-up and deferral timers.
#[derive(Debug, Clone, Default)]
pub struct TimerCores {
    pub vector: Vec<u32>,
    pub wake: Vec<u32>,
    pub defer: Vec<u32>,
}

/// The events, in two heaps: those of one core (its units' ends, its vectors' interrupts
/// and completion causes, its thread's wake-up, its NAPIs' deferral timers) with the
/// arrivals, and the barriers (the end, interference, application threads). Popping takes
/// the earlier of the two tops, so the order is that of one heap. Where cores share nothing
/// but the ingress, each core's own events are also kept in a heap of its own
/// ([`EventQueue::track_cores`]): a core may then run ahead of every other core's events,
/// up to its own next one ([`EventQueue::own_time`]) and the next barrier
/// ([`EventQueue::barrier_time`]).
#[derive(Debug, Default)]
pub struct EventQueue {
    local: Heap,
    other: Heap,
    /// Each core's own events (none until [`EventQueue::track_cores`]).
    own: Vec<Heap>,
    /// Whose events are whose (see [`TimerCores`]).
    cores: TimerCores,
    seq: u64,
    /// Events put into the heap so far (stale ones included, a timer's event put back
    /// counted again).
    pub scheduled: u64,
    /// The time of the last event popped.
    now: Instant,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn schedule(&mut self, time: Instant, kind: EventKind) {
        let seq = self.next_seq();
        self.put(time, seq, kind);
    }

    /// A new insertion number: the one the next event scheduled would get.
    #[inline]
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Keep each of `cores` cores' own events in a heap of its own too. Only where no
    /// core's events touch another core's state; an event whose core `owners` does not
    /// name is a barrier for every core.
    pub fn track_cores(&mut self, cores: usize, owners: TimerCores) {
        debug_assert!(self.is_empty(), "before anything is scheduled");
        self.own = (0..cores).map(|_| Heap::default()).collect();
        self.cores = owners;
    }

    /// The core whose own event `kind` is, where cores are tracked.
    #[inline]
    fn owner(&self, kind: EventKind) -> Option<usize> {
        let EventKind::Timer(key, _) = kind else { return None };
        let c = match key {
            Key::Step(c) => c,
            Key::Irq(v) | Key::TxCause(v) => *self.cores.vector.get(v as usize)?,
            Key::Wake(i) => *self.cores.wake.get(i as usize)?,
            Key::Defer(i) => *self.cores.defer.get(i as usize)?,
            Key::App(_) | Key::Interfere(_) => return None,
        };
        ((c as usize) < self.own.len()).then_some(c as usize)
    }

    /// Put an event into the heap with insertion number `seq`.
    #[inline]
    fn put(&mut self, time: Instant, seq: u64, kind: EventKind) {
        self.scheduled += 1;
        let e = Entry::new(time, seq, kind);
        if !self.own.is_empty() {
            match self.owner(kind) {
                Some(c) => {
                    self.local.push(e.time, e.seq, e.arg);
                    self.own[c].push(e.time, e.seq, e.arg);
                }
                None if kind == EventKind::Arrival => self.local.push(e.time, e.seq, e.arg),
                None => self.other.push(e.time, e.seq, e.arg),
            }
            return;
        }
        match kind {
            EventKind::Arrival
            | EventKind::Timer(Key::Step(_) | Key::Wake(_) | Key::Irq(_) | Key::TxCause(_) | Key::Defer(_), _) => {
                self.local.push(e.time, e.seq, e.arg)
            }
            EventKind::End | EventKind::Timer(Key::App(_) | Key::Interfere(_), _) => {
                self.other.push(e.time, e.seq, e.arg)
            }
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, EventKind)> {
        let heap = match (self.local.peek(), self.other.peek()) {
            (Some(s), Some(o)) if s.before(o) => &mut self.local,
            (Some(_), None) => &mut self.local,
            _ => &mut self.other,
        };
        let e = heap.pop()?;
        self.now = Instant::from_ps(e.time);
        let kind = e.kind();
        if !self.own.is_empty() {
            if let Some(c) = self.owner(kind) {
                // The earliest event of all is the earliest of its core's.
                let mine = self.own[c].pop();
                debug_assert!(
                    mine.is_some_and(|m| (m.time, m.seq) == (e.time, e.seq)),
                    "a core's heap holds its events in the same order"
                );
            }
        }
        Some((self.now, kind))
    }

    /// Time of the next event (the horizon up to which a component may run ahead).
    #[inline]
    pub fn peek_time(&self) -> Instant {
        self.barrier_time().min(self.local_time())
    }

    /// Time of the next barrier: an event that is neither one core's own nor an arrival.
    #[inline]
    pub fn barrier_time(&self) -> Instant {
        self.other.peek().map_or(Instant::NEVER, |e| Instant::from_ps(e.time))
    }

    /// Time of the earliest event of one core or an arrival (stale ones included).
    #[inline]
    pub fn local_time(&self) -> Instant {
        self.local.peek().map_or(Instant::NEVER, |e| Instant::from_ps(e.time))
    }

    /// Time of core `c`'s own next event (stale ones included), where cores are tracked.
    #[inline]
    pub fn own_time(&self, c: usize) -> Instant {
        debug_assert!(c < self.own.len(), "cores are tracked");
        self.own.get(c).and_then(|h| h.peek()).map_or(Instant::NEVER, |e| Instant::from_ps(e.time))
    }

    pub fn len(&self) -> usize {
        self.local.len() + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One cancellable event of a component: at most one of its events is valid at a time.
#[derive(Debug, Clone, Copy)]
pub struct Timer {
    gen: u32,
    pending: bool,
    /// When it is due, its key, and the insertion number it was given when set.
    at: Instant,
    key: Key,
    seq: u64,
    /// Its event of the current generation is in the queue, at `queued_at` (no later than
    /// `at`; before it when it is to be put back).
    queued: bool,
    queued_at: Instant,
}

impl Default for Timer {
    fn default() -> Self {
        Timer {
            gen: 0,
            pending: false,
            at: Instant::ZERO,
            key: Key::Step(0),
            seq: 0,
            queued: false,
            queued_at: Instant::ZERO,
        }
    }
}

impl Timer {
    /// Schedule the event `key` at `at`, in place of any this timer had pending. An event
    /// of it already in the queue before `at` stays there and is put back at `at` when it
    /// pops ([`Timer::fired`]); one at or after `at` becomes stale.
    #[inline]
    pub fn set(&mut self, queue: &mut EventQueue, at: Instant, key: Key) {
        let seq = queue.next_seq();
        // Only an event strictly before `at` is kept: one at `at` itself would run in the
        // place of its own, earlier set, not of this one.
        if !(self.queued && self.queued_at < at && self.key == key) {
            self.gen = self.gen.wrapping_add(1);
            queue.put(at, seq, EventKind::Timer(key, self.gen));
            (self.queued, self.queued_at) = (true, at);
        }
        (self.pending, self.at, self.key, self.seq) = (true, at, key, seq);
    }

    /// Make the pending event, if any, stale.
    #[inline]
    pub fn cancel(&mut self) {
        self.pending = false;
    }

    /// Whether a valid event of this timer is in the queue.
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// An event of this timer popped with generation `gen` (at the queue's `now`): true
    /// (and no longer pending) if it is the valid one and due; false if it is stale, or
    /// came before the time the timer was set to since (then it is put back at that time).
    #[inline]
    pub fn fired(&mut self, gen: u32, queue: &mut EventQueue) -> bool {
        if gen != self.gen {
            return false;
        }
        self.queued = false;
        if !self.pending {
            return false;
        }
        if queue.now < self.at {
            queue.put(self.at, self.seq, EventKind::Timer(self.key, self.gen));
            (self.queued, self.queued_at) = (true, self.at);
            return false;
        }
        self.pending = false;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ps: u64) -> Instant {
        Instant::from_ps(ps)
    }

    #[test]
    fn ties_break_by_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(at(5), EventKind::Timer(Key::Step(1), 0));
        q.schedule(at(3), EventKind::Arrival);
        q.schedule(at(5), EventKind::Timer(Key::Step(2), 0));
        q.schedule(at(5), EventKind::End);
        assert_eq!(q.pop(), Some((at(3), EventKind::Arrival)));
        assert_eq!(q.pop(), Some((at(5), EventKind::Timer(Key::Step(1), 0))));
        assert_eq!(q.pop(), Some((at(5), EventKind::Timer(Key::Step(2), 0))));
        assert_eq!(q.pop(), Some((at(5), EventKind::End)));
        assert_eq!(q.pop(), None);
        assert_eq!(q.peek_time(), Instant::NEVER);
    }

    /// Events pushed in any order, popped as they come and interleaved with pushes, come
    /// out by (time, insertion), with their kinds as scheduled.
    #[test]
    fn events_pop_in_time_then_insertion_order_with_their_kinds() {
        let mut q = EventQueue::new();
        let mut expect = Vec::new();
        let mut state = 12345u64;
        let mut draw = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 33
        };
        let keys = [
            Key::Irq(7),
            Key::TxCause(u32::MAX),
            Key::Step(3),
            Key::Wake(0),
            Key::Defer(9),
            Key::App(1),
            Key::Interfere(2),
        ];
        let mut seq = 0u64;
        let mut popped = Vec::new();
        for round in 0..2000u64 {
            let t = at(draw() % 50 + round / 2);
            let kind = match draw() % 9 {
                0 => EventKind::Arrival,
                1 => EventKind::End,
                k => EventKind::Timer(keys[k as usize - 2], draw() as u32),
            };
            q.schedule(t, kind);
            seq += 1;
            expect.push((t, seq, kind));
            if draw() % 3 == 0 {
                popped.push(q.pop().unwrap());
                let min = expect.iter().enumerate().min_by_key(|(_, e)| (e.0, e.1)).map(|(i, _)| i).unwrap();
                let e = expect.swap_remove(min);
                assert_eq!(popped.last(), Some(&(e.0, e.2)));
            }
        }
        expect.sort_by_key(|e| (e.0, e.1));
        for e in expect {
            assert_eq!(q.pop(), Some((e.0, e.2)));
        }
        assert_eq!(q.pop(), None);
    }

    /// With cores tracked, a core's own next event is its own (a unit's end, its vector's
    /// interrupt, a timer the mode named for it), whatever the other cores have earlier;
    /// arrivals are no core's and no barrier; the end, interference and a timer the mode
    /// did not name are barriers. The pop order is the same as without tracking.
    #[test]
    fn each_core_sees_its_own_next_event_and_the_barriers() {
        let owners = || TimerCores { vector: vec![0, 1, 1], wake: vec![0, 1], defer: vec![0] };
        let events = [
            (at(50), EventKind::Timer(Key::Step(0), 0)),
            (at(10), EventKind::Timer(Key::Irq(1), 0)),
            (at(5), EventKind::Arrival),
            (at(30), EventKind::Timer(Key::Defer(0), 0)),
            (at(20), EventKind::Timer(Key::Wake(1), 0)),
            (at(40), EventKind::Timer(Key::Wake(3), 0)),
            (at(60), EventKind::Timer(Key::Interfere(1), 0)),
            (at(70), EventKind::End),
        ];
        let mut q = EventQueue::new();
        let mut plain = EventQueue::new();
        q.track_cores(2, owners());
        for (t, k) in events {
            q.schedule(t, k);
            plain.schedule(t, k);
        }
        assert_eq!((q.own_time(0), q.own_time(1)), (at(30), at(10)));
        assert_eq!(q.barrier_time(), at(40), "a wake-up timer no core was named for is a barrier");
        let mut seen = Vec::new();
        while let Some(e) = q.pop() {
            assert_eq!(Some(e), plain.pop());
            seen.push((e.0, q.own_time(0), q.own_time(1)));
        }
        assert_eq!(seen[1], (at(10), at(30), at(20)), "core 1's interrupt popped: its wake-up is next");
        assert_eq!(seen[3], (at(30), at(50), Instant::NEVER));
        assert_eq!(seen.last(), Some(&(at(70), Instant::NEVER, Instant::NEVER)));
    }

    #[test]
    fn a_timer_set_earlier_or_cancelled_leaves_its_old_event_stale() {
        let mut q = EventQueue::new();
        let mut t = Timer::default();
        t.set(&mut q, at(20), Key::Irq(0));
        t.set(&mut q, at(10), Key::Irq(0));
        let (when, EventKind::Timer(_, g1)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(10));
        assert!(t.fired(g1, &mut q));
        assert!(!t.is_pending());
        assert!(!t.fired(g1, &mut q), "an event fires once");
        let (when, EventKind::Timer(_, g2)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(20));
        assert!(!t.fired(g2, &mut q), "the event of the first set is stale");
        t.set(&mut q, at(30), Key::Irq(0));
        t.cancel();
        let (_, EventKind::Timer(_, g3)) = q.pop().unwrap() else { panic!() };
        assert!(!t.fired(g3, &mut q), "cancelled");
        assert_eq!(q.pop(), None);
        assert_eq!(q.scheduled, 3);
    }

    /// A timer set later stays in the queue at its first time and is put back at the new
    /// one when it pops there, with the insertion number of the later set: the events run
    /// in the order they would if every set scheduled an event of its own.
    #[test]
    fn a_timer_set_later_runs_in_the_order_of_its_last_set() {
        let mut q = EventQueue::new();
        let mut t = Timer::default();
        t.set(&mut q, at(10), Key::Defer(1));
        q.schedule(at(30), EventKind::Arrival);
        t.set(&mut q, at(30), Key::Defer(1)); // after the arrival at 30
        q.schedule(at(30), EventKind::End);
        t.set(&mut q, at(20), Key::Defer(1)); // earlier than 30, later than 10: after all
        assert_eq!(q.scheduled, 3, "two sets later than the event in the queue push nothing");
        let (when, EventKind::Timer(_, g)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(10));
        assert!(!t.fired(g, &mut q), "too early: put back");
        assert!(t.is_pending());
        let (when, EventKind::Timer(_, g)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(20));
        assert!(t.fired(g, &mut q));
        assert_eq!(q.pop(), Some((at(30), EventKind::Arrival)));
        assert_eq!(q.pop(), Some((at(30), EventKind::End)));
        // Set to 40, then later to 50 while its event waits: it fires at 50, after an event
        // scheduled for 50 between the two sets.
        t.set(&mut q, at(40), Key::Defer(1));
        q.schedule(at(50), EventKind::Arrival);
        t.set(&mut q, at(50), Key::Defer(1));
        let (when, EventKind::Timer(_, g)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(40));
        assert!(!t.fired(g, &mut q));
        assert_eq!(q.pop(), Some((at(50), EventKind::Arrival)));
        let (when, EventKind::Timer(_, g)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(50));
        assert!(t.fired(g, &mut q));
        assert_eq!(q.pop(), None);
        // Set again to the time its event is at: that event is stale, the new one runs
        // after what was scheduled for that time in between.
        t.set(&mut q, at(60), Key::Defer(1));
        q.schedule(at(60), EventKind::Arrival);
        t.set(&mut q, at(60), Key::Defer(1));
        let (_, EventKind::Timer(_, g)) = q.pop().unwrap() else { panic!() };
        assert!(!t.fired(g, &mut q), "the first set's event is stale");
        assert_eq!(q.pop(), Some((at(60), EventKind::Arrival)));
        let (when, EventKind::Timer(_, g)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(60));
        assert!(t.fired(g, &mut q));
    }
}
