//! The event queue and keyed, cancellable timers.
//!
//! The queue is a binary heap ordered by (time, insertion number), so events at the same
//! picosecond run in the order they were scheduled; it knows no component. Components keep
//! their own state; an event only says whose it is ([`Key`]). A component that may have to
//! take back an event it scheduled owns a [`Timer`] for it: setting the timer again or
//! cancelling it makes the event already in the heap stale, and its owner ignores it when
//! it pops (the heap is never searched).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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

#[derive(Debug, Clone, Copy)]
struct Entry {
    time: Instant,
    seq: u64,
    kind: EventKind,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse so the earliest (then first inserted) pops first.
        other.time.cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The events, in two heaps: the ends of the cores' work units ([`Key::Step`]) and all the
/// rest (the barriers). Popping takes the earlier of the two tops, so the order is that of
/// one heap; apart, they tell a core how far it may run ahead of the others' units
/// ([`EventQueue::barrier_time`], [`EventQueue::step_time`]).
#[derive(Debug, Default)]
pub struct EventQueue {
    steps: BinaryHeap<Entry>,
    other: BinaryHeap<Entry>,
    seq: u64,
    /// Events scheduled so far (stale ones included).
    pub scheduled: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn schedule(&mut self, time: Instant, kind: EventKind) {
        self.seq += 1;
        self.scheduled += 1;
        let e = Entry { time, seq: self.seq, kind };
        match kind {
            EventKind::Timer(Key::Step(_), _) => self.steps.push(e),
            _ => self.other.push(e),
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, EventKind)> {
        let heap = match (self.steps.peek(), self.other.peek()) {
            // Entry's order is reversed (a max-heap pops the earliest): greater = earlier.
            (Some(s), Some(o)) if s > o => &mut self.steps,
            (Some(_), None) => &mut self.steps,
            _ => &mut self.other,
        };
        heap.pop().map(|e| (e.time, e.kind))
    }

    /// Time of the next event (the horizon up to which a component may run ahead).
    #[inline]
    pub fn peek_time(&self) -> Instant {
        self.barrier_time().min(self.step_time())
    }

    /// Time of the next event that is not the end of a core's work unit.
    #[inline]
    pub fn barrier_time(&self) -> Instant {
        self.other.peek().map_or(Instant::NEVER, |e| e.time)
    }

    /// Time of the earliest end of a core's work unit in the queue (stale ones included).
    #[inline]
    pub fn step_time(&self) -> Instant {
        self.steps.peek().map_or(Instant::NEVER, |e| e.time)
    }

    pub fn len(&self) -> usize {
        self.steps.len() + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One cancellable event of a component: at most one of its events is valid at a time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer {
    gen: u32,
    pending: bool,
}

impl Timer {
    /// Schedule the event `key` at `at`; an event this timer had pending becomes stale.
    #[inline]
    pub fn set(&mut self, queue: &mut EventQueue, at: Instant, key: Key) {
        self.gen = self.gen.wrapping_add(1);
        self.pending = true;
        queue.schedule(at, EventKind::Timer(key, self.gen));
    }

    /// Make the pending event, if any, stale.
    #[inline]
    pub fn cancel(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        self.pending = false;
    }

    /// Whether a valid event of this timer is in the queue.
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// An event of this timer popped with generation `gen`: true (and no longer pending) if
    /// it is the valid one, false if it is stale.
    #[inline]
    pub fn fired(&mut self, gen: u32) -> bool {
        if self.pending && self.gen == gen {
            self.pending = false;
            true
        } else {
            false
        }
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

    #[test]
    fn a_timer_set_again_or_cancelled_leaves_its_old_event_stale() {
        let mut q = EventQueue::new();
        let mut t = Timer::default();
        t.set(&mut q, at(10), Key::Irq(0));
        t.set(&mut q, at(20), Key::Irq(0));
        let (_, EventKind::Timer(_, g1)) = q.pop().unwrap() else { panic!() };
        assert!(!t.fired(g1), "the event of the first set is stale");
        assert!(t.is_pending());
        let (when, EventKind::Timer(_, g2)) = q.pop().unwrap() else { panic!() };
        assert_eq!(when, at(20));
        assert!(t.fired(g2));
        assert!(!t.is_pending());
        assert!(!t.fired(g2), "an event fires once");
        t.set(&mut q, at(30), Key::Irq(0));
        t.cancel();
        let (_, EventKind::Timer(_, g3)) = q.pop().unwrap() else { panic!() };
        assert!(!t.fired(g3), "cancelled");
        assert_eq!(q.scheduled, 3);
    }
}
