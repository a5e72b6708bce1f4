//! Ring-scheduling strategies: which of its rx rings a core serves next (001's resource
//! managers). Each is a small state machine behind [`Strategy`], one file each, registered
//! in [`build`]; the core asks before every packet, so adding a strategy never touches the
//! core's loop.
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

//!
//! To add a strategy: a file here with its state machine and tests; a variant of
//! [`StrategyKind`] (its keys in [`StrategySpec`], checked where that spec is validated);
//! one arm in [`build`].

pub mod drr;
pub mod prio;
pub mod priowfq;
pub mod quota;
pub mod rr;
pub mod sq;

use crate::scenario::{StrategyKind, StrategySpec};

use super::time::{Instant, Span};

/// What a strategy may see of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingView {
    pub len: usize,
    /// Write-back time of the oldest frame.
    pub head_arrival: Instant,
    pub head_size: u16,
    /// Expected service time of the oldest frame.
    pub head_service: Span,
}

pub trait Strategy: Send {
    /// The ring to serve next at `now`, or None when all are empty.
    fn pick(&mut self, rings: &[RingView], now: Instant) -> Option<usize>;
    /// A frame of `size` bytes from ring `i` went into service.
    fn served(&mut self, _i: usize, _size: u16) {}
    fn name(&self) -> &'static str;
}

pub fn build(spec: &StrategySpec, rings: usize) -> Box<dyn Strategy> {
    match spec.kind {
        StrategyKind::Sq => Box::new(sq::Fcfs),
        StrategyKind::Quota => Box::new(quota::Quota { quota: spec.quota, cur: 0, used: 0 }),
        StrategyKind::Rr => Box::new(rr::TimeSlice { slice: spec.slice.into(), cur: 0, until: Instant::ZERO, started: false }),
        StrategyKind::Prio => Box::new(prio::Prio),
        StrategyKind::Priowfq => Box::new(priowfq::PrioWfq { slices: spec.slices.iter().map(|&d| d.into()).collect(), contended: false, cur: 0, until: Instant::ZERO }),
        StrategyKind::Drr => Box::new(drr::Drr {
            quanta: spec.weights.iter().map(|w| *w as i64 * spec.quantum.bytes as i64).collect(),
            deficit: vec![0; rings],
            cur: rings - 1,
            fresh: false,
        }),
    }
}

/// Next non-empty ring after `from`, cyclically (`from` itself last).
pub(crate) fn next_nonempty(rings: &[RingView], from: usize) -> Option<usize> {
    let n = rings.len();
    (1..=n).map(|k| (from + k) % n).find(|&i| rings[i].len > 0)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::units::{Bytes, Duration};

    pub(super) fn spec(kind: StrategyKind) -> StrategySpec {
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
        let rings = [RingView { len: 10, head_arrival: Instant::from_ps(5), head_size: 100, head_service: Span::from_ps(5) }, RingView { len: 10, head_arrival: Instant::from_ps(1), head_size: 100, head_service: Span::from_ps(5) }];
        let mut count = [0; 2];
        let mut now = Instant::ZERO;
        for _ in 0..n {
            let i = s.pick(&rings, now).unwrap();
            s.served(i, 100);
            count[i] += 1;
            now += Span::from_ps(5);
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

}
