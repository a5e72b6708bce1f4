//! `quota`: round robin, up to `quota` frames per turn (NAPI's weight).

use super::{next_nonempty, RingView, Strategy};
use crate::engine::time::Instant;

pub struct Quota {
    pub(super) quota: u32,
    pub(super) cur: usize,
    pub(super) used: u32,
}

impl Strategy for Quota {
    fn pick(&mut self, rings: &[RingView], _now: Instant) -> Option<usize> {
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
