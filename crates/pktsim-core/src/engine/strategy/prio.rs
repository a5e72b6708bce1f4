//! `prio`: strict priority, non-preemptive (001 Prio): the highest-priority ring with a
//! frame.

use super::{RingView, Strategy};
use crate::engine::time::Instant;

pub struct Prio;

impl Strategy for Prio {
    fn pick(&mut self, rings: &[RingView], _now: Instant) -> Option<usize> {
        rings.iter().position(|r| r.len > 0)
    }
    fn name(&self) -> &'static str {
        "prio"
    }
}
