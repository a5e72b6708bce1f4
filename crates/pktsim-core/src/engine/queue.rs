//! The event queue: a binary heap ordered by (time, insertion number), so that events at
//! the same picosecond run in the order they were scheduled.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::time::Ps;

/// What an event is for. Components keep their own state; an event only names whom to
/// wake. `gen` lets a component cancel an event by moving on to a new generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The next frame arrives at the NIC while some ring wants to hear of it.
    Arrival,
    /// An I/O-mode event (`tag` chooses the handler, `index` the vector or core).
    Mode { tag: u8, index: u32, gen: u32 },
    /// Periodic housekeeping: interruption checks.
    Tick,
    /// End of the measurement.
    End,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    time: Ps,
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

#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
    pub scheduled: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn schedule(&mut self, time: Ps, kind: EventKind) {
        self.seq += 1;
        self.scheduled += 1;
        self.heap.push(Entry { time, seq: self.seq, kind });
    }

    pub fn pop(&mut self) -> Option<(Ps, EventKind)> {
        self.heap.pop().map(|e| (e.time, e.kind))
    }

    /// Time of the next event (the horizon up to which a component may run ahead).
    #[inline]
    pub fn peek_time(&self) -> Ps {
        self.heap.peek().map_or(Ps::MAX, |e| e.time)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_break_by_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(5, EventKind::Mode { tag: 0, index: 1, gen: 0 });
        q.schedule(3, EventKind::Tick);
        q.schedule(5, EventKind::Mode { tag: 0, index: 2, gen: 0 });
        q.schedule(5, EventKind::End);
        assert_eq!(q.pop(), Some((3, EventKind::Tick)));
        assert_eq!(q.pop(), Some((5, EventKind::Mode { tag: 0, index: 1, gen: 0 })));
        assert_eq!(q.pop(), Some((5, EventKind::Mode { tag: 0, index: 2, gen: 0 })));
        assert_eq!(q.pop(), Some((5, EventKind::End)));
        assert_eq!(q.pop(), None);
    }
}
