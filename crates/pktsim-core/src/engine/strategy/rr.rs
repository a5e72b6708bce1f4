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
