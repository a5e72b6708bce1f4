//! `priowfq` (001 PrioWFQ): without contention whoever waits is served at once and to the
//! end of its frame, the highest priority first when contention starts; under contention
//! per-ring time slices in turn, which may end mid-frame (the core revokes service, see the
//! module header).

use super::{next_nonempty, RingView, Strategy, Turn};
use crate::engine::time::{Instant, Span};

pub struct PrioWfq {
    pub(super) slices: Vec<Span>,
    pub(super) contended: bool,
    pub(super) cur: usize,
    pub(super) until: Instant,
}

impl Strategy for PrioWfq {
    fn pick(&mut self, rings: &[RingView], now: Instant) -> Option<Turn> {
        let waiting = rings.iter().filter(|r| r.len > 0).count();
        match waiting {
            0 => {
                self.contended = false;
                None
            }
            1 => {
                // No contention: whoever waits gets the core at once, for a whole frame.
                self.contended = false;
                rings.iter().position(|r| r.len > 0).map(Turn::whole)
            }
            _ => {
                if !self.contended {
                    // Contention starts: the highest priority gets the first slice.
                    self.contended = true;
                    self.cur = rings.iter().position(|r| r.len > 0)?;
                    self.until = now + self.slices[self.cur];
                } else if rings[self.cur].len == 0 || now >= self.until {
                    self.cur = next_nonempty(rings, self.cur)?;
                    self.until = now + self.slices[self.cur];
                }
                Some(Turn::until(self.cur, self.until - now))
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
    use super::super::{build, RingView, Turn};
    use crate::engine::time::{Instant, Span};
    use crate::scenario::StrategyKind;

    fn waiting(len: usize, service_ps: u64) -> RingView {
        RingView { len, head_arrival: Instant::from_ps(0), head_size: 64, head_service: Span::from_ps(service_ps) }
    }

    #[test]
    fn priowfq_without_contention_serves_whoever_waits() {
        let mut s = build(&spec(StrategyKind::Priowfq), 2);
        let only_low = [RingView::default(), waiting(3, 5)];
        assert_eq!(s.pick(&only_low, Instant::from_ps(0)), Some(Turn::whole(1)), "a whole frame, no slice");
        // A high-priority frame arrives: it gets the core at the next frame boundary, for
        // its slice of 30 ps.
        let both = [waiting(1, 5), waiting(2, 5)];
        assert_eq!(s.pick(&both, Instant::from_ps(8)), Some(Turn::until(0, Span::from_ps(30))));
    }

    /// Slices 30 and 10 ps, frames of 25 ps: the high-priority ring's slice ends 5 ps into
    /// its second frame, the low one's 10 ps into its first; both resume at their next turn.
    #[test]
    fn contended_slices_end_mid_frame() {
        let mut s = build(&spec(StrategyKind::Priowfq), 2);
        let both = [waiting(5, 25), waiting(5, 25)];
        assert_eq!(s.pick(&both, Instant::from_ps(0)), Some(Turn::until(0, Span::from_ps(30))));
        assert_eq!(s.pick(&both, Instant::from_ps(25)), Some(Turn::until(0, Span::from_ps(5))));
        assert_eq!(
            s.pick(&[waiting(4, 20), waiting(5, 25)], Instant::from_ps(30)),
            Some(Turn::until(1, Span::from_ps(10)))
        );
        assert_eq!(
            s.pick(&[waiting(4, 20), waiting(5, 15)], Instant::from_ps(40)),
            Some(Turn::until(0, Span::from_ps(30)))
        );
        // Contention over (ring 0 empty): ring 1's partly served frame is served to its end.
        assert_eq!(s.pick(&[RingView::default(), waiting(5, 15)], Instant::from_ps(60)), Some(Turn::whole(1)));
    }
}
