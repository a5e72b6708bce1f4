//! Ring-scheduling strategies: which of its rx rings a core serves next (001's resource
//! managers). Each is a small state machine behind [`Strategy`]; the core asks before
//! every packet, so adding a strategy never touches the core's loop.
//!
//! | strategy | rule |
//! |---|---|
//! | `sq` | first come, first served across rings (001 SQ) |
//! | `quota` | round robin, up to `quota` packets per turn (NAPI weight) |
//! | `rr` | round robin, a time slice `slice` per turn (001 RR) |
//! | `prio` | highest-priority non-empty ring, non-preemptive (001 Prio) |
//! | `priowfq` | uncontended: the only waiting ring at once, highest priority first when contention starts; contended: per-ring time slices in turn (001 PrioWFQ) |
//! | `drr` | deficit round robin, `weight * quantum` bytes per turn |
//!
//! Rings are given in priority order (index 0 highest). A time-sliced turn serves frames
//! while the next one's service still fits in the slice, and at least one frame: service
//! is never preempted, and no turn overruns its slice by more than one frame.

use crate::scenario::{StrategyKind, StrategySpec};

use super::time::Ps;

/// What a strategy may see of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingView {
    pub len: usize,
    /// Write-back time of the oldest frame.
    pub head_arrival: Ps,
    pub head_size: u16,
    /// Expected service time of the oldest frame.
    pub head_service: Ps,
}

pub trait Strategy: Send {
    /// The ring to serve next at `now`, or None when all are empty.
    fn pick(&mut self, rings: &[RingView], now: Ps) -> Option<usize>;
    /// A frame of `size` bytes from ring `i` went into service.
    fn served(&mut self, _i: usize, _size: u16) {}
    fn name(&self) -> &'static str;
}

pub fn build(spec: &StrategySpec, rings: usize) -> Box<dyn Strategy> {
    match spec.kind {
        StrategyKind::Sq => Box::new(Fcfs),
        StrategyKind::Quota => Box::new(Quota { quota: spec.quota, cur: 0, used: 0 }),
        StrategyKind::Rr => Box::new(TimeSlice { slice: spec.slice.ps, cur: 0, until: 0, started: false }),
        StrategyKind::Prio => Box::new(Prio),
        StrategyKind::Priowfq => Box::new(PrioWfq { slices: spec.slices.iter().map(|d| d.ps).collect(), contended: false, cur: 0, until: 0 }),
        StrategyKind::Drr => Box::new(Drr {
            quanta: spec.weights.iter().map(|w| *w as i64 * spec.quantum.bytes as i64).collect(),
            deficit: vec![0; rings],
            cur: rings - 1,
            fresh: false,
        }),
    }
}

/// Next non-empty ring after `from`, cyclically (`from` itself last).
fn next_nonempty(rings: &[RingView], from: usize) -> Option<usize> {
    let n = rings.len();
    (1..=n).map(|k| (from + k) % n).find(|&i| rings[i].len > 0)
}

pub struct Fcfs;

impl Strategy for Fcfs {
    fn pick(&mut self, rings: &[RingView], _now: Ps) -> Option<usize> {
        rings.iter().enumerate().filter(|(_, r)| r.len > 0).min_by_key(|(i, r)| (r.head_arrival, *i)).map(|(i, _)| i)
    }
    fn name(&self) -> &'static str {
        "sq"
    }
}

pub struct Quota {
    quota: u32,
    cur: usize,
    used: u32,
}

impl Strategy for Quota {
    fn pick(&mut self, rings: &[RingView], _now: Ps) -> Option<usize> {
        if rings[self.cur].len > 0 && self.used < self.quota {
            return Some(self.cur);
        }
        let next = next_nonempty(rings, self.cur)?;
        self.cur = next;
        self.used = 0;
        Some(next)
    }
    fn served(&mut self, _i: usize, _size: u16) {
        self.used += 1;
    }
    fn name(&self) -> &'static str {
        "quota"
    }
}

pub struct TimeSlice {
    slice: Ps,
    cur: usize,
    until: Ps,
    started: bool,
}

impl Strategy for TimeSlice {
    fn pick(&mut self, rings: &[RingView], now: Ps) -> Option<usize> {
        if self.started && rings[self.cur].len > 0 && now + rings[self.cur].head_service <= self.until {
            return Some(self.cur);
        }
        let next = next_nonempty(rings, self.cur)?;
        self.cur = next;
        self.until = now + self.slice;
        self.started = true;
        Some(next)
    }
    fn name(&self) -> &'static str {
        "rr"
    }
}

pub struct Prio;

impl Strategy for Prio {
    fn pick(&mut self, rings: &[RingView], _now: Ps) -> Option<usize> {
        rings.iter().position(|r| r.len > 0)
    }
    fn name(&self) -> &'static str {
        "prio"
    }
}

pub struct PrioWfq {
    slices: Vec<Ps>,
    contended: bool,
    cur: usize,
    until: Ps,
}

impl Strategy for PrioWfq {
    fn pick(&mut self, rings: &[RingView], now: Ps) -> Option<usize> {
        let waiting = rings.iter().filter(|r| r.len > 0).count();
        match waiting {
            0 => {
                self.contended = false;
                None
            }
            1 => {
                // No contention: whoever waits gets the core at once.
                self.contended = false;
                rings.iter().position(|r| r.len > 0)
            }
            _ => {
                if !self.contended {
                    // Contention starts: the highest priority gets the first slice.
                    self.contended = true;
                    self.cur = rings.iter().position(|r| r.len > 0)?;
                    self.until = now + self.slices[self.cur];
                } else if rings[self.cur].len == 0 || now + rings[self.cur].head_service > self.until {
                    self.cur = next_nonempty(rings, self.cur)?;
                    self.until = now + self.slices[self.cur];
                }
                Some(self.cur)
            }
        }
    }
    fn name(&self) -> &'static str {
        "priowfq"
    }
}

pub struct Drr {
    quanta: Vec<i64>,
    deficit: Vec<i64>,
    cur: usize,
    /// `cur` got its quantum for this turn.
    fresh: bool,
}

impl Strategy for Drr {
    fn pick(&mut self, rings: &[RingView], _now: Ps) -> Option<usize> {
        if rings.iter().all(|r| r.len == 0) {
            return None;
        }
        loop {
            let r = rings[self.cur];
            if r.len > 0 && self.fresh && self.deficit[self.cur] >= r.head_size as i64 {
                return Some(self.cur);
            }
            if r.len == 0 {
                self.deficit[self.cur] = 0;
            }
            // Next ring's turn: it earns its quantum.
            self.cur = (self.cur + 1) % rings.len();
            if rings[self.cur].len > 0 {
                self.deficit[self.cur] += self.quanta[self.cur];
                self.fresh = true;
            } else {
                self.deficit[self.cur] = 0;
                self.fresh = false;
            }
        }
    }
    fn served(&mut self, i: usize, size: u16) {
        self.deficit[i] -= size as i64;
    }
    fn name(&self) -> &'static str {
        "drr"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Bytes, Duration};

    fn spec(kind: StrategyKind) -> StrategySpec {
        StrategySpec {
            kind,
            quota: 3,
            slice: Duration::from_ps(10),
            slices: vec![Duration::from_ps(30), Duration::from_ps(10)],
            weights: vec![3, 1],
            quantum: Bytes::new(100),
        }
    }

    /// Serve two always-busy rings for `n` packets of 100 B taking 5 ps each; count per ring.
    fn share(kind: StrategyKind, n: usize) -> [usize; 2] {
        let mut s = build(&spec(kind), 2);
        let rings = [RingView { len: 10, head_arrival: 5, head_size: 100, head_service: 5 }, RingView { len: 10, head_arrival: 1, head_size: 100, head_service: 5 }];
        let mut count = [0; 2];
        let mut now = 0;
        for _ in 0..n {
            let i = s.pick(&rings, now).unwrap();
            s.served(i, 100);
            count[i] += 1;
            now += 5;
        }
        count
    }

    #[test]
    fn each_strategy_shares_two_busy_rings_as_its_rule_says() {
        assert_eq!(share(StrategyKind::Prio, 100), [100, 0]);
        assert_eq!(share(StrategyKind::Sq, 100), [0, 100], "FCFS serves the older head");
        assert_eq!(share(StrategyKind::Quota, 120), [60, 60]);
        assert_eq!(share(StrategyKind::Rr, 120), [60, 60]);
        // PrioWFQ under contention: 30 ps vs 10 ps slices -> 3:1.
        assert_eq!(share(StrategyKind::Priowfq, 120), [90, 30]);
        // DRR weights 3:1.
        assert_eq!(share(StrategyKind::Drr, 120), [90, 30]);
    }

    #[test]
    fn a_slice_shorter_than_a_frame_still_serves_one_frame_per_turn() {
        let mut s = build(&spec(StrategyKind::Rr), 2);
        let rings = [RingView { len: 10, head_arrival: 0, head_size: 100, head_service: 25 }, RingView { len: 10, head_arrival: 0, head_size: 100, head_service: 25 }];
        let mut now = 0;
        let mut order = Vec::new();
        for _ in 0..4 {
            let i = s.pick(&rings, now).unwrap();
            order.push(i);
            now += 25;
        }
        assert_eq!(order, [1, 0, 1, 0]);
    }

    #[test]
    fn priowfq_without_contention_serves_whoever_waits() {
        let mut s = build(&spec(StrategyKind::Priowfq), 2);
        let only_low = [RingView::default(), RingView { len: 3, head_arrival: 0, head_size: 64, head_service: 5 }];
        assert_eq!(s.pick(&only_low, 0), Some(1));
        // A high-priority frame arrives: it gets the core at the next packet boundary.
        let both = [RingView { len: 1, head_arrival: 7, head_size: 64, head_service: 5 }, RingView { len: 2, head_arrival: 0, head_size: 64, head_service: 5 }];
        assert_eq!(s.pick(&both, 8), Some(0));
    }

    #[test]
    fn quota_moves_on_when_a_ring_empties() {
        let mut s = build(&spec(StrategyKind::Quota), 2);
        let rings = [RingView { len: 1, head_arrival: 0, head_size: 64, head_service: 5 }, RingView { len: 5, head_arrival: 0, head_size: 64, head_service: 5 }];
        let first = s.pick(&rings, 0).unwrap();
        s.served(first, 64);
        let emptied = [RingView { len: 0, ..rings[0] }, rings[1]];
        assert_eq!(s.pick(&emptied, 1), Some(1));
    }
}
