//! `sq`: a single queue across the core's rings — first come, first served by the oldest
//! head (001 SQ).

use super::{RingView, Strategy, Turn};
use crate::engine::time::Instant;

pub struct Fcfs;

impl Strategy for Fcfs {
    fn pick(&mut self, rings: &[RingView], _now: Instant) -> Option<Turn> {
        rings
            .iter()
            .enumerate()
            .filter(|(_, r)| r.len > 0)
            .min_by_key(|(i, r)| (r.head_arrival, *i))
            .map(|(i, _)| Turn::whole(i))
    }
    fn serves_a_lone_ring_in_order(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "sq"
    }
}
