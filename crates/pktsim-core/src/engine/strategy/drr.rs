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
