//! `priowfq` (001 PrioWFQ): without contention whoever waits is served at once, the
//! highest priority first when contention starts; under contention per-ring time slices in
//! turn.

use super::{next_nonempty, RingView, Strategy};
use crate::engine::time::{Instant, Span};

pub struct PrioWfq {
    pub(super) slices: Vec<Span>,
    pub(super) contended: bool,
    pub(super) cur: usize,
    pub(super) until: Instant,
}

impl Strategy for PrioWfq {
    fn pick(&mut self, rings: &[RingView], now: Instant) -> Option<usize> {
        let waiting = rings.iter().filter(|r| r.len > 0).count();
        match waiting {
            0 => {
                self.contended = false;
                None
            }
            1 => {
                // No contention: whoever waits gets the core at once.
                self.contended = false;
                rings.iter().position(|r| r.len > 0)
            }
            _ => {
                if !self.contended {
                    // Contention starts: the highest priority gets the first slice.
                    self.contended = true;
                    self.cur = rings.iter().position(|r| r.len > 0)?;
                    self.until = now + self.slices[self.cur];
                } else if rings[self.cur].len == 0 || now + rings[self.cur].head_service > self.until {
                    self.cur = next_nonempty(rings, self.cur)?;
                    self.until = now + self.slices[self.cur];
                }
                Some(self.cur)
            }
        }
    }
    fn name(&self) -> &'static str {
        "priowfq"
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::spec;
    use super::super::{build, RingView};
    use crate::engine::time::{Instant, Span};
    use crate::scenario::StrategyKind;

    #[test]
    fn priowfq_without_contention_serves_whoever_waits() {
        let mut s = build(&spec(StrategyKind::Priowfq), 2);
        let only_low = [RingView::default(), RingView { len: 3, head_arrival: Instant::from_ps(0), head_size: 64, head_service: Span::from_ps(5) }];
        assert_eq!(s.pick(&only_low, Instant::from_ps(0)), Some(1));
        // A high-priority frame arrives: it gets the core at the next packet boundary.
        let both = [RingView { len: 1, head_arrival: Instant::from_ps(7), head_size: 64, head_service: Span::from_ps(5) }, RingView { len: 2, head_arrival: Instant::from_ps(0), head_size: 64, head_service: Span::from_ps(5) }];
        assert_eq!(s.pick(&both, Instant::from_ps(8)), Some(0));
    }
}
