//! ixgbe 3.x dynamic interrupt throttling (002 section III-C; `ixgbe_update_itr`,
//! `ixgbe_set_itr` in ixgbe 3.14): per-container latency states lowest / low / bulk chosen
//! by bytes per interval, the vector taking the bulkier of rx and tx, smoothed towards the
//! state's target by 002 Eq. 1, once per completed interrupt-to-poll episode.

use super::fixed::eitr_interval;
use super::{Episode, Moderation};
use crate::engine::time::{Instant, Span};

/// Latency states of ixgbe 3.x dynamic ITR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ItrState {
    Lowest = 0,
    Low = 1,
    Bulk = 2,
}

/// ixgbe 3.14 `ixgbe_update_itr` + `ixgbe_set_itr`.
pub struct IxgbeDynamic {
    /// `q_vector->itr` in register units (`usecs << 2`).
    pub itr: u32,
    pub rx_state: ItrState,
    pub tx_state: ItrState,
    bulk_target: u32,
}

/// `IXGBE_100K_ITR`, `IXGBE_20K_ITR`.
pub const ITR_100K: u32 = 40;
pub const ITR_20K: u32 = 200;

impl IxgbeDynamic {
    /// `bulk_rate`: 8000 interrupts/s (ixgbe 3.14, `IXGBE_8K_ITR` = 500) or 12000
    /// (`IXGBE_12K_ITR` = 336, Linux >= 4.4).
    pub fn new(bulk_rate: u32) -> Self {
        let bulk_target = if bulk_rate == 12_000 { 336 } else { (1_000_000 / bulk_rate.max(1)) << 2 };
        IxgbeDynamic { itr: ITR_20K, rx_state: ItrState::Lowest, tx_state: ItrState::Lowest, bulk_target }
    }

    fn update(&self, state: ItrState, packets: u64, bytes: u64) -> ItrState {
        if packets == 0 {
            return state;
        }
        let timepassed_us = (self.itr >> 2) as u64;
        if timepassed_us == 0 {
            return state;
        }
        // The driver's `bytes_perint = bytes / timepassed_us` (bytes per us = MB/s) against
        // 10 and 20, without the divisions: for whole numbers, floor(b / u) > k exactly
        // when b >= (k + 1) u.
        let above = |k: u64| bytes >= (k + 1) * timepassed_us;
        match state {
            ItrState::Lowest if above(10) => ItrState::Low,
            ItrState::Low if above(20) => ItrState::Bulk,
            ItrState::Low if !above(10) => ItrState::Lowest,
            ItrState::Bulk if !above(20) => ItrState::Low,
            s => s,
        }
    }

    fn target(&self, state: ItrState) -> u32 {
        match state {
            ItrState::Lowest => ITR_100K,
            ItrState::Low => ITR_20K,
            ItrState::Bulk => self.bulk_target,
        }
    }
}

impl Moderation for IxgbeDynamic {
    fn interval(&self) -> Span {
        eitr_interval(self.itr)
    }

    fn episode_done(&mut self, _now: Instant, ep: &Episode) {
        self.rx_state = self.update(self.rx_state, ep.rx_packets, ep.rx_bytes);
        self.tx_state = self.update(self.tx_state, ep.tx_packets, ep.tx_bytes);
        let target = self.target(self.rx_state.max(self.tx_state));
        if target != self.itr {
            // 002 Eq. 1 in register units (an EWMA of the interrupt rate), integer as in
            // the driver: r' = 10 s' r / (9 s' + r).
            let (t, r) = (target as u64, self.itr as u64);
            self.itr = ((10 * t * r) / (9 * t + r)) as u32;
        }
    }

    fn name(&self) -> &'static str {
        "dynamic"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(rx: (u64, u64), tx: (u64, u64)) -> Episode {
        Episode { rx_packets: rx.0, rx_bytes: rx.1, tx_packets: tx.0, tx_bytes: tx.1, irqs: 1 }
    }

    #[test]
    fn eq1_moves_a_tenth_of_the_rate_towards_the_target() {
        let mut m = IxgbeDynamic::new(8000);
        // Heavy traffic: 64 B frames (60 bytes counted), many per interval -> bulk.
        m.episode_done(Instant::ZERO, &ep((1000, 60_000), (0, 0)));
        assert_eq!(m.rx_state, ItrState::Low);
        let before = m.itr;
        m.episode_done(Instant::ZERO, &ep((1000, 60_000), (0, 0)));
        assert_eq!(m.rx_state, ItrState::Bulk);
        // r' = 10*500*200/(9*500+200) = 212 (integer).
        assert_eq!(before, 200);
        assert_eq!(m.itr, 212);
        // As a rate: 1/r' = 0.9/r + 0.1/s'.
        let rate = |reg: u32| 1.0 / reg as f64;
        assert!((rate(212) - (0.9 * rate(200) + 0.1 * rate(500))).abs() / rate(212) < 0.01);
        for _ in 0..200 {
            m.episode_done(Instant::ZERO, &ep((1000, 60_000), (0, 0)));
        }
        // Integer truncation stalls the approach where r (t - r) / (9 t + r) < 1: at 490
        // for t = 500, which the NIC runs as 488 & 0xFF8 -> 61 * 2.048 us = 124.9 us.
        assert_eq!(m.itr, 490);
        assert_eq!(m.interval(), Span::from_ps(124_928_000));
    }

    /// The state changes exactly where the driver's integer `bytes / timepassed_us`
    /// crosses 10 and 20 (the division is written as a product).
    #[test]
    fn the_thresholds_are_the_drivers_division() {
        for itr in [4, 40, 41, 200, 336, 490, 500, 4095] {
            let mut m = IxgbeDynamic::new(8000);
            m.itr = itr;
            let u = (itr >> 2) as u64;
            for bytes in 0..(25 * u + 3) {
                let per = bytes / u;
                for (state, want) in [
                    (ItrState::Lowest, if per > 10 { ItrState::Low } else { ItrState::Lowest }),
                    (
                        ItrState::Low,
                        if per > 20 {
                            ItrState::Bulk
                        } else if per <= 10 {
                            ItrState::Lowest
                        } else {
                            ItrState::Low
                        },
                    ),
                    (ItrState::Bulk, if per <= 20 { ItrState::Low } else { ItrState::Bulk }),
                ] {
                    assert_eq!(m.update(state, 1, bytes), want, "itr {itr}, {bytes} bytes, {state:?}");
                }
            }
        }
    }

    /// bulk_rate 12000 targets `IXGBE_12K_ITR` = 336 (not 4 x floor(10^6 / 12000) = 332).
    /// Two bulk episodes: the first moves Lowest -> Low (target 200 = itr: no change), the
    /// second Low -> Bulk: r' = 10 * 336 * 200 / (9 * 336 + 200) = 672000 / 3224 = 208
    /// (integer), 26 * 2.048 = 53.248 us. Then 216 and 224 (332 would give 223), stalling at
    /// 326 where 326 * 10 / (9 * 336 + 326) < 1, which the NIC runs as 320 >> 3 = 40 units:
    /// 81.92 us.
    #[test]
    fn a_bulk_rate_of_12000_approaches_the_12k_itr_of_336() {
        let mut m = IxgbeDynamic::new(12_000);
        let bulk = ep((1000, 60_000), (0, 0));
        m.episode_done(Instant::ZERO, &bulk);
        assert_eq!((m.rx_state, m.itr), (ItrState::Low, 200));
        m.episode_done(Instant::ZERO, &bulk);
        assert_eq!((m.rx_state, m.itr), (ItrState::Bulk, 208));
        assert_eq!(m.interval(), Span::from_ps(53_248_000));
        m.episode_done(Instant::ZERO, &bulk);
        assert_eq!(m.itr, 216);
        m.episode_done(Instant::ZERO, &bulk);
        assert_eq!(m.itr, 224);
        for _ in 0..100 {
            m.episode_done(Instant::ZERO, &bulk);
        }
        assert_eq!(m.itr, 326);
        assert_eq!(m.interval(), Span::from_ps(81_920_000));
    }

    #[test]
    fn light_traffic_stays_at_lowest_latency() {
        let mut m = IxgbeDynamic::new(8000);
        for _ in 0..100 {
            m.episode_done(Instant::ZERO, &ep((1, 60), (1, 60)));
        }
        assert_eq!(m.rx_state, ItrState::Lowest);
        assert!(m.itr <= ITR_100K + 1, "{}", m.itr);
    }

    #[test]
    fn the_bulkier_container_wins() {
        let mut m = IxgbeDynamic::new(12_000);
        m.episode_done(Instant::ZERO, &ep((1, 60), (10_000, 600_000)));
        assert_eq!((m.rx_state, m.tx_state), (ItrState::Lowest, ItrState::Low));
        m.episode_done(Instant::ZERO, &ep((1, 60), (10_000, 600_000)));
        assert_eq!(m.tx_state, ItrState::Bulk);
        assert!(m.itr > ITR_20K);
    }
}
