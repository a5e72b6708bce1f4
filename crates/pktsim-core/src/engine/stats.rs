//! Measurement: counters, latency histogram, CPU time by activity, time series.
//!
//! Only what happens inside the measurement window `[warmup, warmup + duration)` counts.
//! Latency is recorded in an HDR histogram (3 significant digits at any magnitude, memory
//! fixed by its range), so percentiles stay exact to 0.1% however long the run.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::scenario::{LatencyFrom, LatencyTo};

use super::time::{Ps, PS_PER_NS};
use super::traffic::Packet;

/// What a core spends its time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Irq = 0,
    Poll = 1,
    TxClean = 2,
    RxClean = 3,
}

pub const ACTIVITY_NAMES: [&str; 4] = ["irq", "poll", "tx_clean", "rx_clean"];

/// Per-interval counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bucket {
    pub offered: u64,
    pub forwarded: u64,
    pub dropped: u64,
    pub irqs: u64,
    pub polls: u64,
    pub latency_sum_ns: f64,
}

pub struct Stats {
    pub warm: Ps,
    pub stop: Ps,
    t_off_ps: Ps,
    from: LatencyFrom,
    to: LatencyTo,
    pub offered: u64,
    pub forwarded: u64,
    pub forwarded_bytes: u64,
    pub drop_rx_ring: u64,
    pub drop_qdisc: u64,
    pub irqs: u64,
    pub polls: u64,
    pub softirqs: u64,
    pub time_squeeze: u64,
    pub ksoftirqd_wakeups: u64,
    pub busy_ps: [u64; 4],
    pub latency: Histogram<u64>,
    latency_sum_ns: f64,
    /// Rx packets cleaned per poll of a vector with an rx ring: index = packets.
    pub rx_per_poll: Vec<u64>,
    interval_ps: Option<Ps>,
    pub series: Vec<Bucket>,
}

impl Stats {
    pub fn new(warm: Ps, duration: Ps, t_off_ps: Ps, from: LatencyFrom, to: LatencyTo, max_per_poll: usize, interval_ps: Option<Ps>) -> Self {
        // 1 ns .. 100 s at 3 significant digits.
        let latency = Histogram::new_with_bounds(1, 100_000_000_000, 3).unwrap_or_else(|_| unreachable!("valid bounds"));
        let series = match interval_ps {
            Some(i) => vec![Bucket::default(); duration.div_ceil(i) as usize],
            None => Vec::new(),
        };
        Stats {
            warm,
            stop: warm + duration,
            t_off_ps,
            from,
            to,
            offered: 0,
            forwarded: 0,
            forwarded_bytes: 0,
            drop_rx_ring: 0,
            drop_qdisc: 0,
            irqs: 0,
            polls: 0,
            softirqs: 0,
            time_squeeze: 0,
            ksoftirqd_wakeups: 0,
            busy_ps: [0; 4],
            latency,
            latency_sum_ns: 0.0,
            rx_per_poll: vec![0; max_per_poll + 1],
            interval_ps,
            series,
        }
    }

    #[inline]
    pub fn in_window(&self, t: Ps) -> bool {
        t >= self.warm && t < self.stop
    }

    #[inline]
    fn bucket(&mut self, t: Ps) -> Option<&mut Bucket> {
        let i = self.interval_ps?;
        self.series.get_mut(((t - self.warm) / i) as usize)
    }

    #[inline]
    pub fn offered(&mut self, t: Ps) {
        if self.in_window(t) {
            self.offered += 1;
            if let Some(b) = self.bucket(t) {
                b.offered += 1;
            }
        }
    }

    #[inline]
    pub fn drop_rx_ring(&mut self, t: Ps) {
        if self.in_window(t) {
            self.drop_rx_ring += 1;
            if let Some(b) = self.bucket(t) {
                b.dropped += 1;
            }
        }
    }

    pub fn drop_qdisc(&mut self, t: Ps) {
        if self.in_window(t) {
            self.drop_qdisc += 1;
            if let Some(b) = self.bucket(t) {
                b.dropped += 1;
            }
        }
    }

    /// A packet's descriptor was written to a tx ring at `t_tx`; its last bit leaves at `t_done`.
    #[inline]
    pub fn forwarded(&mut self, p: &Packet, t_tx: Ps, t_done: Ps) {
        if !self.in_window(t_tx) {
            return;
        }
        self.forwarded += 1;
        self.forwarded_bytes += p.size as u64;
        let start = match self.from {
            LatencyFrom::WireIn => p.t_wire,
            LatencyFrom::RxRing => p.t_ring,
        };
        let end = match self.to {
            LatencyTo::TxRing => t_tx,
            LatencyTo::WireOut => t_done,
        };
        let ps = end - start + self.t_off_ps;
        let ns = (ps / PS_PER_NS).max(1);
        self.latency.saturating_record(ns);
        self.latency_sum_ns += ps as f64 / 1e3;
        if let Some(b) = self.bucket(t_tx) {
            b.forwarded += 1;
            b.latency_sum_ns += ps as f64 / 1e3;
        }
    }

    pub fn irq(&mut self, t: Ps) {
        if self.in_window(t) {
            self.irqs += 1;
            if let Some(b) = self.bucket(t) {
                b.irqs += 1;
            }
        }
    }

    pub fn poll(&mut self, t: Ps, rx_packets: Option<u32>) {
        if self.in_window(t) {
            self.polls += 1;
            if let Some(n) = rx_packets {
                let i = (n as usize).min(self.rx_per_poll.len() - 1);
                self.rx_per_poll[i] += 1;
            }
            if let Some(b) = self.bucket(t) {
                b.polls += 1;
            }
        }
    }

    pub fn softirq(&mut self, t: Ps) {
        if self.in_window(t) {
            self.softirqs += 1;
        }
    }

    pub fn squeeze(&mut self, t: Ps) {
        if self.in_window(t) {
            self.time_squeeze += 1;
        }
    }

    /// CPU time `[start, end)` spent on `a`; only the part inside the window counts.
    #[inline]
    pub fn busy(&mut self, a: Activity, start: Ps, end: Ps) {
        let s = start.max(self.warm);
        let e = end.min(self.stop);
        if e > s {
            self.busy_ps[a as usize] += e - s;
        }
    }

    pub fn latency_mean_ns(&self) -> f64 {
        if self.forwarded == 0 {
            0.0
        } else {
            self.latency_sum_ns / self.forwarded as f64
        }
    }
}
