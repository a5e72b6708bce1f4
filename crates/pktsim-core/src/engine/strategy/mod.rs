//! Ring-scheduling strategies: which of its rx rings a core serves next (001's resource
//! managers). Each is a small state machine behind [`Strategy`], one file each, registered
//! in [`build`]; the core asks before every unit of service, so adding a strategy never
//! touches the core's loop.
//!
//! | strategy | rule | granularity |
//! |---|---|---|
//! | `sq` | first come, first served across rings (001 SQ) | whole frames |
//! | `quota` | round robin, up to `quota` frames per turn (NAPI weight) | whole frames: counts frames |
//! | `rr` | round robin, a time slice `slice` per turn (001 RR) | preemptive: the slice ends mid-frame |
//! | `prio` | highest-priority non-empty ring (001 Prio) | whole frames: non-preemptive |
//! | `priowfq` | uncontended: the only waiting ring at once, highest priority first when contention starts; contended: per-ring time slices in turn (001 PrioWFQ) | uncontended whole frames; contended preemptive |
//! | `drr` | deficit round robin, `weight * quantum` bytes per turn | whole frames: counts bytes |
//!
//! Rings are given in priority order (index 0 highest). A [`Turn`] names the ring and, for
//! a time-sliced turn, the time left in its slice (`budget`). The `server` I/O mode revokes
//! the core when the budget runs out, mid-frame if need be (001 V-C: the resource manager
//! revokes the resource from a task unit in contention): the preempted frame keeps its
//! descriptor, stays at its ring's head and resumes with its remaining service time at its
//! ring's next turn (its [`RingView::head_service`] is then what remains). A slice that ends
//! with no other ring waiting starts a new slice for the same ring, so an uncontended ring
//! keeps the core without a switch. The batched I/O modes (`busy-poll`, `batched-syscall`)
//! ignore the budget: a call is a system call and is not revoked, so a turn goes on while
//! its slice has time left and overruns it by at most one call.
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
    /// Expected service time of the oldest frame; for a frame preempted in service, the
    /// service it still needs.
    pub head_service: Span,
}

/// A strategy's answer: the ring to serve next and how long it may keep the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    pub ring: usize,
    /// Time left in the ring's slice (above zero): a core that can revoke service stops
    /// the frame in service when it runs out. None: the frame is served to its end.
    pub budget: Option<Span>,
}

impl Turn {
    /// Serve ring `ring`'s head to its end.
    pub fn whole(ring: usize) -> Self {
        Turn { ring, budget: None }
    }
    /// Serve ring `ring` for at most `budget` (above zero).
    pub fn until(ring: usize, budget: Span) -> Self {
        debug_assert!(budget > Span::ZERO, "a slice with no time left is not a turn");
        Turn { ring, budget: Some(budget) }
    }
}

pub trait Strategy: Send {
    /// The ring to serve next at `now` and for how long, or None when all are empty.
    fn pick(&mut self, rings: &[RingView], now: Instant) -> Option<Turn>;
    /// A frame of `size` bytes from ring `i` went into service (once per frame: not again
    /// when a preempted frame resumes).
    fn served(&mut self, _i: usize, _size: u16) {}
    fn name(&self) -> &'static str;
    /// With a single ring: whether the strategy always serves its head, whole, as soon as
    /// the ring holds a frame, and `served` does nothing (a core may then skip asking).
    fn serves_a_lone_ring_in_order(&self) -> bool {
        false
    }
}

pub fn build(spec: &StrategySpec, rings: usize) -> Box<dyn Strategy> {
    match spec.kind {
        StrategyKind::Sq => Box::new(sq::Fcfs),
        StrategyKind::Quota => Box::new(quota::Quota { quota: spec.quota, cur: 0, used: 0 }),
        StrategyKind::Rr => {
            Box::new(rr::TimeSlice { slice: spec.slice.into(), cur: 0, until: Instant::ZERO, in_turn: false })
        }
        StrategyKind::Prio => Box::new(prio::Prio),
        StrategyKind::Priowfq => Box::new(priowfq::PrioWfq {
            slices: spec.slices.iter().map(|&d| d.into()).collect(),
            contended: false,
            cur: 0,
            until: Instant::ZERO,
        }),
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

    /// Serve two always-busy rings of 100 B frames taking 5 ps each, revoking the core when a
    /// turn's budget runs out (a preempted frame resumes with what it still needs), until
    /// `n` frames are done; count them per ring.
    fn share(kind: StrategyKind, n: usize) -> [usize; 2] {
        let mut s = build(&spec(kind), 2);
        let frame = Span::from_ps(5);
        let mut rest = [Span::ZERO; 2];
        let mut count = [0; 2];
        let mut now = Instant::ZERO;
        while count[0] + count[1] < n {
            let rings: [RingView; 2] = std::array::from_fn(|i| RingView {
                len: 10,
                head_arrival: Instant::from_ps(5 - 4 * i as u64),
                head_size: 100,
                head_service: if rest[i] > Span::ZERO { rest[i] } else { frame },
            });
            let turn = s.pick(&rings, now).unwrap();
            let i = turn.ring;
            if rest[i] == Span::ZERO {
                s.served(i, 100);
                rest[i] = frame;
            }
            let d = turn.budget.map_or(rest[i], |b| b.min(rest[i]));
            rest[i] -= d;
            now += d;
            if rest[i] == Span::ZERO {
                count[i] += 1;
            }
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

    /// A strategy that says it serves a lone ring in order picks that ring, whole, exactly
    /// when it holds a frame, whatever the time and the head.
    #[test]
    fn a_lone_ring_served_in_order_is_served_whole_whenever_it_holds_a_frame() {
        let kinds = [
            StrategyKind::Sq,
            StrategyKind::Prio,
            StrategyKind::Quota,
            StrategyKind::Rr,
            StrategyKind::Priowfq,
            StrategyKind::Drr,
        ];
        let mut said = 0;
        for kind in kinds {
            let mut s = build(&spec(kind), 1);
            if !s.serves_a_lone_ring_in_order() {
                continue;
            }
            said += 1;
            for k in 0..50u64 {
                let now = Instant::from_ps(k * 7);
                let len = (k % 3) as usize;
                let ring = RingView {
                    len,
                    head_arrival: Instant::from_ps(k),
                    head_size: 64 + k as u16,
                    head_service: Span::from_ps(k + 1),
                };
                let turn = s.pick(&[ring], now);
                assert_eq!(turn, (len > 0).then(|| Turn::whole(0)), "{}", s.name());
                if len > 0 {
                    s.served(0, ring.head_size);
                }
            }
        }
        assert_eq!(said, 2, "sq and prio");
    }
}
