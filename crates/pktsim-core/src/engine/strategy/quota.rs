//! `quota`: round robin, up to `quota` frames per turn (NAPI's weight). It counts frames,
//! and a turn never ends mid-frame.

use super::{next_nonempty, RingView, Strategy, Turn};
use crate::engine::time::Instant;

pub struct Quota {
    pub(super) quota: u32,
    pub(super) cur: usize,
    pub(super) used: u32,
}

impl Strategy for Quota {
    fn pick(&mut self, rings: &[RingView], _now: Instant) -> Option<Turn> {
        if rings[self.cur].len > 0 && self.used < self.quota {
            return Some(Turn::whole(self.cur));
        }
        let next = next_nonempty(rings, self.cur)?;
        self.cur = next;
        self.used = 0;
        Some(Turn::whole(next))
    }
    fn served(&mut self, _i: usize, _size: u16) {
        self.used += 1;
    }
    fn name(&self) -> &'static str {
        "quota"
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::spec;
    use super::super::{build, RingView};
    use crate::engine::time::{Instant, Span};
    use crate::scenario::StrategyKind;

    #[test]
    fn quota_moves_on_when_a_ring_empties() {
        let mut s = build(&spec(StrategyKind::Quota), 2);
        let rings = [
            RingView { len: 1, head_arrival: Instant::from_ps(0), head_size: 64, head_service: Span::from_ps(5) },
            RingView { len: 5, head_arrival: Instant::from_ps(0), head_size: 64, head_service: Span::from_ps(5) },
        ];
        let first = s.pick(&rings, Instant::from_ps(0)).unwrap().ring;
        s.served(first, 64);
        let emptied = [RingView { len: 0, ..rings[0] }, rings[1]];
        assert_eq!(s.pick(&emptied, Instant::from_ps(1)), Some(super::super::Turn::whole(1)));
    }

    /// Quota 3 with two always-busy rings: a turn lasts exactly three frames, so the pick
    /// order is 0,0,0,1,1,1,0,0,0,1,1,1 (a quota of 1 would alternate 0,1,0,1,...).
    #[test]
    fn a_quota_of_3_serves_three_frames_per_turn_on_two_busy_rings() {
        let mut s = build(&spec(StrategyKind::Quota), 2);
        let busy =
            RingView { len: 10, head_arrival: Instant::from_ps(0), head_size: 64, head_service: Span::from_ps(5) };
        let rings = [busy, busy];
        let mut order = Vec::new();
        for k in 0..12u64 {
            let turn = s.pick(&rings, Instant::from_ps(5 * k)).unwrap();
            assert_eq!(turn.budget, None, "quota turns are whole frames");
            s.served(turn.ring, 64);
            order.push(turn.ring);
        }
        assert_eq!(order, [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
    }
}
