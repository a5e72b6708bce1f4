//! `rr`: round robin with a time slice per turn (001 RR). A turn lasts until its slice ends
//! or its ring empties; the slice may end mid-frame (the core revokes service, see the
//! module header). A slice that ends with no other ring waiting is followed by a new one
//! for the same ring.

use super::{next_nonempty, RingView, Strategy, Turn};
use crate::engine::time::{Instant, Span};

pub struct TimeSlice {
    pub(super) slice: Span,
    pub(super) cur: usize,
    pub(super) until: Instant,
    /// `cur`'s turn is under way (its ring has not been seen empty since it began).
    pub(super) in_turn: bool,
}

impl Strategy for TimeSlice {
    fn pick(&mut self, rings: &[RingView], now: Instant) -> Option<Turn> {
        if !(self.in_turn && rings[self.cur].len > 0 && now < self.until) {
            self.in_turn = false;
            self.cur = next_nonempty(rings, self.cur)?;
            self.until = now + self.slice;
            self.in_turn = true;
        }
        Some(Turn::until(self.cur, self.until - now))
    }
    fn name(&self) -> &'static str {
        "rr"
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::spec;
    use super::super::{build, RingView, Turn};
    use crate::engine::time::{Instant, Span};
    use crate::scenario::StrategyKind;

    fn busy(service_ps: u64) -> RingView {
        RingView { len: 10, head_arrival: Instant::from_ps(0), head_size: 100, head_service: Span::from_ps(service_ps) }
    }

    /// Slice 10 ps, frames of 25 ps: every turn is one slice, the rings alternate and a
    /// frame needs three turns of its ring.
    #[test]
    fn a_slice_shorter_than_a_frame_ends_mid_frame() {
        let mut s = build(&spec(StrategyKind::Rr), 2);
        let rings = [busy(25), busy(25)];
        let turns: Vec<Turn> = (0..4).map(|k| s.pick(&rings, Instant::from_ps(10 * k)).unwrap()).collect();
        let slice = Some(Span::from_ps(10));
        assert_eq!(
            turns,
            [
                Turn { ring: 1, budget: slice },
                Turn { ring: 0, budget: slice },
                Turn { ring: 1, budget: slice },
                Turn { ring: 0, budget: slice }
            ]
        );
    }

    /// A turn that stops early (its frame ended at 4 ps) goes on with what is left of the
    /// slice; at the slice's end with the other ring empty, the same ring gets a new slice.
    #[test]
    fn a_turn_keeps_the_rest_of_its_slice_and_an_uncontended_ring_gets_the_next() {
        let mut s = build(&spec(StrategyKind::Rr), 2);
        let only_0 = [busy(4), RingView::default()];
        assert_eq!(s.pick(&only_0, Instant::from_ps(0)), Some(Turn::until(0, Span::from_ps(10))));
        assert_eq!(s.pick(&only_0, Instant::from_ps(4)), Some(Turn::until(0, Span::from_ps(6))));
        assert_eq!(s.pick(&only_0, Instant::from_ps(10)), Some(Turn::until(0, Span::from_ps(10))));
        // Ring 1 gets a frame at 12 ps: it waits for the slice of ring 0 to end at 20 ps.
        let both = [busy(4), busy(4)];
        assert_eq!(s.pick(&both, Instant::from_ps(12)), Some(Turn::until(0, Span::from_ps(8))));
        assert_eq!(s.pick(&both, Instant::from_ps(20)), Some(Turn::until(1, Span::from_ps(10))));
        // A turn ends when its ring empties, even if a frame comes back before the slice's end.
        assert_eq!(
            s.pick(&[busy(4), RingView::default()], Instant::from_ps(22)),
            Some(Turn::until(0, Span::from_ps(10)))
        );
        assert_eq!(s.pick(&[RingView::default(), RingView::default()], Instant::from_ps(23)), None);
        assert_eq!(s.pick(&[busy(4), busy(4)], Instant::from_ps(24)), Some(Turn::until(1, Span::from_ps(10))));
    }
}
