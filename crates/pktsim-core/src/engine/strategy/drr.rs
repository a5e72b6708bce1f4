//! `drr`: deficit round robin, `weight * quantum` bytes per ring and turn. It counts bytes
//! of whole frames: a turn never ends mid-frame.

use super::{RingView, Strategy, Turn};
use crate::engine::time::Instant;

pub struct Drr {
    pub(super) quanta: Vec<i64>,
    pub(super) deficit: Vec<i64>,
    pub(super) cur: usize,
    /// `cur` got its quantum for this turn.
    pub(super) fresh: bool,
}

impl Strategy for Drr {
    fn pick(&mut self, rings: &[RingView], _now: Instant) -> Option<Turn> {
        if rings.iter().all(|r| r.len == 0) {
            return None;
        }
        loop {
            let r = rings[self.cur];
            if r.len > 0 && self.fresh && self.deficit[self.cur] >= r.head_size as i64 {
                return Some(Turn::whole(self.cur));
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
    use super::super::tests::spec;
    use super::super::{build, RingView};
    use crate::engine::time::{Instant, Span};
    use crate::scenario::{StrategyKind, StrategySpec};
    use crate::units::Bytes;

    /// Weights [1, 1], quantum 1500 B, both rings always busy: ring 0 with 1500 B frames,
    /// ring 1 with 64 B ones. Each round ring 0 earns 1500 B and sends one frame (deficit
    /// back to 0); ring 1 earns 1500 B on top of what it kept and sends while it has 64 B,
    /// so after k rounds it has sent floor(1500 k / 64) frames: turns of 23 or 24 frames
    /// (23, 23, 24, 23, 24, ...), and over 64 rounds 1500 frames, exactly 96,000 B like
    /// ring 0's 64 x 1500 B (its deficit then back to 0).
    #[test]
    fn drr_shares_bytes_not_frames_between_big_and_small_frames() {
        let mut s =
            build(&StrategySpec { weights: vec![1, 1], quantum: Bytes::new(1500), ..spec(StrategyKind::Drr) }, 2);
        let sizes = [1500u16, 64];
        let rings: [RingView; 2] = std::array::from_fn(|i| RingView {
            len: 10,
            head_arrival: Instant::from_ps(0),
            head_size: sizes[i],
            head_service: Span::from_ps(5),
        });
        // Turns: (ring, frames) for consecutive picks of the same ring.
        let mut turns: Vec<(usize, u64)> = Vec::new();
        let mut k = 0u64;
        while turns.len() <= 128 {
            let turn = s.pick(&rings, Instant::from_ps(k)).unwrap();
            assert_eq!(turn.budget, None, "whole frames");
            s.served(turn.ring, sizes[turn.ring]);
            match turns.last_mut() {
                Some((r, n)) if *r == turn.ring => *n += 1,
                _ => turns.push((turn.ring, 1)),
            }
            k += 1;
        }
        let rounds = &turns[..128];
        let want: Vec<(usize, u64)> =
            (1..=64u64).flat_map(|k| [(0, 1), (1, 1500 * k / 64 - 1500 * (k - 1) / 64)]).collect();
        assert_eq!(rounds, &want[..]);
        assert_eq!(
            &rounds[..10],
            &[(0, 1), (1, 23), (0, 1), (1, 23), (0, 1), (1, 24), (0, 1), (1, 23), (0, 1), (1, 24)]
        );
        let served: [u64; 2] = std::array::from_fn(|i| rounds.iter().filter(|t| t.0 == i).map(|t| t.1).sum());
        assert_eq!(served, [64, 1500]);
        assert_eq!(served[0] * 1500, served[1] * 64, "byte-fair");
    }
}
