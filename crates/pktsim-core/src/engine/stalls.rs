//! The sender's stalls (`[[traffic.stalls]]`, spec in `scenario::stalls`), one kind: stalls
//! begin as a Poisson process, each lasts a length drawn uniformly from the list; a frame
//! due while one lasts leaves at its end (overlapping stalls end at the later end). Frames
//! come in time order, so one pass suffices: the stalls that began by a frame's due time
//! are drawn when it is asked for. Each kind draws from a stream of its own
//! (`traffic/stalls/K`): the sources draw as they would without stalls.

use super::rng::Stream;

#[derive(Debug, Clone)]
pub struct Stalls {
    mean_gap_ps: f64,
    lengths_ps: Vec<f64>,
    /// When the next stall begins, ps.
    next_ps: f64,
    /// When the stalls begun so far are over, ps.
    end_ps: f64,
    rng: Stream,
}

impl Stalls {
    /// Kind `kind` of stalls, at `rate_hz` with lengths drawn from `lengths_ps`; None when
    /// off.
    pub fn new(rate_hz: f64, lengths_ps: Vec<f64>, seed: u64, kind: usize) -> Option<Self> {
        if !(rate_hz > 0.0) || lengths_ps.is_empty() {
            return None;
        }
        let mean_gap_ps = 1e12 / rate_hz;
        let mut rng = Stream::new(seed, &format!("traffic/stalls/{kind}"));
        let next_ps = rng.exponential(mean_gap_ps);
        Some(Stalls { mean_gap_ps, lengths_ps, next_ps, end_ps: 0.0, rng })
    }

    /// When a frame due at `due_ps` leaves (due times in order).
    #[inline]
    pub fn leave(&mut self, due_ps: f64) -> f64 {
        while self.next_ps <= due_ps {
            let len = self.lengths_ps[self.rng.below(self.lengths_ps.len() as u64) as usize];
            self.end_ps = self.end_ps.max(self.next_ps + len);
            self.next_ps += self.rng.exponential(self.mean_gap_ps);
        }
        due_ps.max(self.end_ps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One length of 50 us at 1 kHz: about 5% of the time stalled, so about 5% of evenly
    /// due frames leave late, each at its stall's end, in order; none leaves early and the
    /// number stays.
    #[test]
    fn frames_due_in_a_stall_leave_at_its_end() {
        let mut s = Stalls::new(1e3, vec![50e6], 3, 0).unwrap();
        let due: Vec<f64> = (0..1_000_000).map(|i| i as f64 * 1e6).collect(); // every 1 us, 1 s
        let out: Vec<f64> = due.iter().map(|&d| s.leave(d)).collect();
        let late = due.iter().zip(&out).filter(|(d, o)| o > d).count();
        assert!(out.windows(2).all(|w| w[0] <= w[1]));
        assert!(due.iter().zip(&out).all(|(d, o)| o >= d && o - d <= 50e6));
        // 1000 stalls of 50 us (some overlapping): ~4.9% of the time.
        assert!((40_000..60_000).contains(&late), "{late}");
        // A late frame leaves when the stall it fell into ends: with those before it.
        let groups = out.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(groups >= late - 1100, "{groups} frames share a departure with the one before, {late} late");
    }

    /// A node at 10% load with a 64-frame ring loses nothing from an even sender; with
    /// 2 ms stalls at 50 Hz, the 200 frames due in each leave together and overflow the
    /// ring: the same frames offered, some lost, and a latency tail of a ring's worth of work.
    #[test]
    fn stalls_move_frames_into_bursts_that_overflow_a_ring() {
        use crate::engine::testing::{node_toml, scenario};
        use crate::engine::SimNode;
        let host = "io = \"napi\"\nt_proc = \"1us\"";
        let ring = "[nic]\nrx_ring = 64\n[nic.itr]\nmode = \"off\"";
        let run = |extra: &str| {
            let toml =
                node_toml(host, &format!("{ring}\n{extra}")).replace("duration = \"1ms\"", "duration = \"200ms\"");
            let mut node = SimNode::build(&scenario(&toml));
            node.run().unwrap();
            node.report(0.0)
        };
        let even = run("");
        let stalled = run("[[traffic.stalls]]\nrate = \"50Hz\"\nlength = [\"2ms\"]");
        assert_eq!(even.loss_ratio, 0.0);
        // Each stall: 200 frames in 13 us, the core takes ~13, the ring 64: ~120 lost of 200.
        assert!(stalled.loss_ratio > 0.01, "{}", stalled.loss_ratio);
        let (a, b) = (even.offered_packets as i64, stalled.offered_packets as i64);
        assert!((a - b).abs() <= 200, "{a} vs {b} offered: a stall only moves frames");
        // Latency runs from the frame's arrival: a burst waits behind up to a ring's worth
        // of 1 us frames; an even frame finds the core free.
        assert_eq!(even.latency_ns.max, 1_000.0);
        assert!(stalled.latency_ns.max > 50e3 && stalled.latency_ns.max < 66e3, "{:?}", stalled.latency_ns);
    }

    #[test]
    fn a_hand_traced_stall() {
        // The first stall begins at the first exponential draw; a frame due before it
        // leaves on time, one due inside it at its end.
        let mut s = Stalls::new(1e3, vec![10e6], 1, 0).unwrap();
        let start = s.next_ps;
        assert_eq!(s.leave(start - 1.0), start - 1.0);
        assert_eq!(s.leave(start + 4e6), start + 10e6);
        assert_eq!(s.leave(start + 9e6), start + 10e6);
        assert_eq!(s.leave(start + 11e6), start + 11e6);
        assert!(Stalls::new(0.0, vec![1.0], 1, 0).is_none() && Stalls::new(1.0, vec![], 1, 0).is_none());
    }
}
