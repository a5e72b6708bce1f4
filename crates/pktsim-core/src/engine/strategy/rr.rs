//! `rr`: round robin with a time slice per turn (001 RR). A turn serves frames while the
//! next one's service still fits in the slice, and at least one frame.

use super::{next_nonempty, RingView, Strategy};
use crate::engine::time::{Instant, Span};

pub struct TimeSlice {
    pub(super) slice: Span,
    pub(super) cur: usize,
    pub(super) until: Instant,
    pub(super) started: bool,
}

impl Strategy for TimeSlice {
    fn pick(&mut self, rings: &[RingView], now: Instant) -> Option<usize> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::spec;
    use super::super::{build, RingView};
    use crate::engine::time::{Instant, Span};
    use crate::scenario::StrategyKind;

    #[test]
    fn a_slice_shorter_than_a_frame_still_serves_one_frame_per_turn() {
        let mut s = build(&spec(StrategyKind::Rr), 2);
        let rings = [RingView { len: 10, head_arrival: Instant::from_ps(0), head_size: 100, head_service: Span::from_ps(25) }, RingView { len: 10, head_arrival: Instant::from_ps(0), head_size: 100, head_service: Span::from_ps(25) }];
        let mut now = Instant::ZERO;
        let mut order = Vec::new();
        for _ in 0..4 {
            let i = s.pick(&rings, now).unwrap();
            order.push(i);
            now += Span::from_ps(25);
        }
        assert_eq!(order, [1, 0, 1, 0]);
    }
}
