//! `prio`: strict priority, non-preemptive (001 Prio): the highest-priority ring with a
//! frame.

use super::{RingView, Strategy, Turn};
use crate::engine::time::Instant;

pub struct Prio;

impl Strategy for Prio {
    fn pick(&mut self, rings: &[RingView], _now: Instant) -> Option<Turn> {
        rings.iter().position(|r| r.len > 0).map(Turn::whole)
    }
    fn serves_a_lone_ring_in_order(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "prio"
    }
}
