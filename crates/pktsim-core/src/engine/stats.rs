//! Measurement: counters, latency histograms, CPU time by activity, time series — for the
//! whole node, per traffic class and per rx ring.
//!
//! Only what happens inside the measurement window `[warmup, warmup + duration)` counts.
//! A frame ends *forwarded* (its descriptor posted to a tx ring) or *consumed* by the host
//! (an XDP program dropped it, an application read it); throughput counts both, latency
//! runs to where the frame ended.
//! Latency is recorded in HDR histograms (3 significant digits at any magnitude, memory
//! fixed by their range), so percentiles stay exact to 0.1% however long the run. Mean
//! latencies come with a 95% confidence interval from batch means: the window is cut into
//! `batches` equal parts by departure time and Student's t is applied to the part means.

use std::collections::BTreeMap;

#[cfg(test)]
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::scenario::{LatencyFrom, LatencyTo};

use super::ingress::Packet;
use super::time::{Instant, Span};

/// What a core spends its time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Irq = 0,
    Poll = 1,
    TxClean = 2,
    RxClean = 3,
    TxLock = 4,
    /// Batched I/O calls: per-call and per-frame I/O cost.
    Io = 5,
    /// Busy polling that found nothing.
    Spin = 6,
    /// A sleeping thread's wake-up (a NAPI thread, the application).
    Wakeup = 7,
    /// The application's receive calls and per-frame work.
    App = 8,
    /// The core taken by something else (`[cpu.interference]`: the tick, preemptions).
    Interference = 9,
    /// The first work after an idle state that flushed the caches, taking longer
    /// (`[cpu.idle]`: the state's refill).
    Refill = 10,
}

pub const ACTIVITY_NAMES: [&str; 11] =
    ["irq", "poll", "tx_clean", "rx_clean", "tx_lock", "io", "spin", "wakeup", "app", "interference", "refill"];

/// The tasks whose CPU time a NAPI mode reports apart from interrupt context: ksoftirqd,
/// the NAPI threads, the application's threads.
pub const TASK_NAMES: [&str; 3] = ["ksoftirqd", "napi_threads", "app"];

/// Per-interval counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bucket {
    pub offered: u64,
    pub forwarded: u64,
    pub dropped: u64,
    /// Frames that reached the NIC before the window and were forwarded in it.
    pub carried_in: u64,
    pub irqs: u64,
    pub polls: u64,
    /// Sum of the latencies of the frames forwarded in the interval, exact in integer
    /// picoseconds (reported in ns).
    #[serde(rename = "latency_sum_ns", serialize_with = "ps_as_ns")]
    pub latency_sum_ps: u128,
    /// Sum over the interval's interrupts of the moderation interval in effect when each
    /// fired (ITR, the DIM profile's level; 0 without moderation), exact in integer
    /// picoseconds (reported in ns): over `irqs`, the mean interval, so a change of load
    /// shows how the policy moves.
    #[serde(rename = "itr_sum_ns", serialize_with = "ps_as_ns")]
    pub itr_sum_ps: u128,
    /// Rx frames the interval's polls cleaned: over `polls`, the frames per poll.
    pub rx_polled: u64,
    /// Polls the deferral timer started (`napi_defer_hard_irqs`, `gro_flush_timeout`): no
    /// hard interrupt.
    pub deferred_polls: u64,
    /// Wake-ups from an idle state that cost something (`[cpu.idle]`).
    pub wakeups: u64,
    /// Sum of the exit latencies those wake-ups paid (reported in ns): over `wakeups`,
    /// the mean, which names the state the cores slept in.
    #[serde(rename = "exit_latency_sum_ns", serialize_with = "ps_as_ns")]
    pub exit_latency_sum_ps: u128,
}

fn ps_as_ns<S: serde::Serializer>(ps: &u128, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(*ps as f64 / 1e3)
}

/// Latencies a group buffers before recording them into its histogram.
const LATENCY_BUFFER: usize = 64;

/// Latencies in ns counted in the bucket layout of `hdrhistogram`'s `Histogram::new(3)`:
/// 3 significant digits from 1 ns, 2,048 sub-buckets in the first power of two's range and
/// the upper 1,024 in each one after it. Recording is an index and an increment, where the
/// crate's record also checks for resizing and keeps a minimum, a maximum and a total on
/// every call (some 60 instructions, the largest share of a frame's statistics);
/// [`Counts::quantiles`] reads the crate's quantiles off the counts (tests hold the
/// buckets, counts and quantiles equal to recording into the crate directly).
///
/// The counts are kept in chunks of 1,024 (one power of two's range; the first range is
/// two), each allocated when a latency first falls in it and never moved: a group's memory
/// is the ranges its latencies span. (A many-core node's memory is mostly its rings'
/// histograms; counts kept as one array from 1 ns up, grown by copying, took about twice
/// as much, with the copies left behind.)
///
/// Counters are 32-bit while the counts recorded total less than 2^32, then 64-bit:
/// whether the next buffer of latencies fits is known before it is recorded, so recording
/// a latency is an index and an increment either way.
#[derive(Clone, Default)]
struct Counts {
    narrow: Chunks<u32>,
    /// Empty until the total reaches 2^32; then every count, and `narrow` is empty.
    wide: Chunks<u64>,
    total: u64,
}

/// Counters of either width.
trait Counter: Copy + Default + PartialEq + From<u8> + std::ops::AddAssign + Into<u64> {}
impl<C: Copy + Default + PartialEq + From<u8> + std::ops::AddAssign + Into<u64>> Counter for C {}

/// Counters by index in chunks of [`CHUNK`]: chunk `k` holds indices `k * CHUNK ..
/// (k + 1) * CHUNK`, allocated (zeroed) when one of them is first counted.
#[derive(Clone)]
struct Chunks<C>(Vec<Option<Box<[C; CHUNK]>>>);

impl<C> Default for Chunks<C> {
    fn default() -> Self {
        Chunks(Vec::new())
    }
}

/// Counters in a chunk of [`Chunks`]: one power of two's range.
const CHUNK: usize = 1 << Counts::HALF_MAG;

impl<C: Counter> Chunks<C> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Indices covered: up to the end of the last chunk.
    fn len(&self) -> usize {
        self.0.len() * CHUNK
    }

    /// Counters allocated.
    #[cfg(test)]
    fn allocated(&self) -> usize {
        self.0.iter().flatten().count() * CHUNK
    }

    /// The count at index `i`.
    #[cfg(test)]
    fn get(&self, i: usize) -> C {
        self.0.get(i / CHUNK).and_then(|c| c.as_ref()).map_or(C::default(), |c| c[i % CHUNK])
    }

    /// The counter at index `i`, its chunk allocated if it is not.
    #[inline(always)]
    fn at(&mut self, i: usize) -> &mut C {
        let k = i / CHUNK;
        if !matches!(self.0.get(k), Some(Some(_))) {
            return &mut self.allocate(k)[i % CHUNK];
        }
        let Some(Some(c)) = self.0.get_mut(k) else { unreachable!("chunk {k} allocated") };
        &mut c[i % CHUNK]
    }

    /// Allocate chunk `k` (its counters zero): its counters.
    #[cold]
    #[inline(never)]
    fn allocate(&mut self, k: usize) -> &mut [C; CHUNK] {
        if k >= self.0.len() {
            self.0.resize_with(k + 1, || None);
        }
        self.0[k].insert(
            vec![C::default(); CHUNK]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("{CHUNK} counters")),
        )
    }

    /// Add `from`'s counts, each through `f`.
    fn add<D: Counter>(&mut self, from: &Chunks<D>, f: impl Fn(D) -> C) {
        for (k, chunk) in from.0.iter().enumerate() {
            let Some(chunk) = chunk else { continue };
            for (j, &n) in chunk.iter().enumerate() {
                if n != D::default() {
                    *self.at(k * CHUNK + j) += f(n);
                }
            }
        }
    }
}

impl Counts {
    /// log2 of half the sub-buckets (1,024 for 3 significant digits).
    const HALF_MAG: u32 = 10;
    /// Values below 2,048 all fall in the first range.
    const SUB_MASK: u64 = (1 << (Self::HALF_MAG + 1)) - 1;

    /// The index of value `v` (hdrhistogram's `index_for` with unit magnitude 0).
    #[inline(always)]
    fn index(v: u64) -> usize {
        let bucket = 63 - Self::HALF_MAG - (v | Self::SUB_MASK).leading_zeros();
        let sub = (v >> bucket) as usize;
        ((bucket as usize + 1) << Self::HALF_MAG) + sub - (1 << Self::HALF_MAG)
    }

    /// The lowest value counted at index `i` (hdrhistogram's `value_for`).
    fn value(i: usize) -> u64 {
        let half = 1usize << Self::HALF_MAG;
        match (i >> Self::HALF_MAG).checked_sub(1) {
            None => i as u64,
            Some(bucket) => (((i & (half - 1)) + half) as u64) << bucket,
        }
    }

    /// Record the latencies `ps` (in ps; counted in ns, at least 1): their sum, minimum and
    /// maximum in ps.
    #[inline(always)]
    fn record_ps(&mut self, ps: &[u64]) -> (u128, u64, u64) {
        self.total += ps.len() as u64;
        if self.wide.is_empty() && self.total <= u32::MAX as u64 {
            return Self::record_into(&mut self.narrow, ps);
        }
        self.widen();
        Self::record_into(&mut self.wide, ps)
    }

    #[inline(always)]
    fn record_into<C: Counter>(counts: &mut Chunks<C>, ps: &[u64]) -> (u128, u64, u64) {
        let (mut sum, mut min, mut max) = (0u128, u64::MAX, 0u64);
        for &ps in ps {
            *counts.at(Self::index((ps / 1_000).max(1))) += C::from(1);
            sum += ps as u128;
            min = min.min(ps);
            max = max.max(ps);
        }
        (sum, min, max)
    }

    /// Record one value of `v` ns (tests: any value, 0 too).
    #[cfg(test)]
    fn record(&mut self, v: u64) {
        self.total += 1;
        if self.wide.is_empty() && self.total <= u32::MAX as u64 {
            return *self.narrow.at(Self::index(v)) += 1;
        }
        self.widen();
        *self.wide.at(Self::index(v)) += 1
    }

    /// From now on 64-bit counters.
    #[cold]
    fn widen(&mut self) {
        if self.wide.is_empty() {
            self.wide.add(&self.narrow, |n| n as u64);
            self.narrow = Chunks::default();
        }
    }

    fn add(&mut self, other: &Counts) {
        self.total += other.total;
        if self.wide.is_empty() && self.total <= u32::MAX as u64 {
            self.narrow.add(&other.narrow, |n| n);
            return;
        }
        self.widen();
        self.wide.add(&other.narrow, |n| n as u64);
        self.wide.add(&other.wide, |n| n);
    }

    /// The counts, by index.
    #[cfg(test)]
    fn counts(&self) -> Vec<u64> {
        if self.wide.is_empty() {
            (0..self.narrow.len()).map(|i| self.narrow.get(i) as u64).collect()
        } else {
            (0..self.wide.len()).map(|i| self.wide.get(i)).collect()
        }
    }

    /// Counters allocated (the memory the counts take).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.narrow.allocated().max(self.wide.allocated())
    }

    /// The latencies (ns) at quantiles `qs` (ascending), each its bucket's middle value:
    /// `hdrhistogram`'s `median_equivalent(value_at_quantile(q))` on these counts (a test
    /// holds the two equal), all in one pass over the counts where the crate's histogram
    /// would be built and then scanned from its start once per quantile (for a short run's
    /// report, most of its time).
    fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        if self.wide.is_empty() {
            Self::quantiles_of(&self.narrow, self.total, qs)
        } else {
            Self::quantiles_of(&self.wide, self.total, qs)
        }
    }

    fn quantiles_of<C: Counter, const N: usize>(counts: &Chunks<C>, total: u64, qs: [f64; N]) -> [u64; N] {
        let mut out = [0; N];
        // Counts up to and including index `i - 1`, the last one looked at.
        let (mut seen, mut i) = (0u64, 0usize);
        for (k, q) in qs.into_iter().enumerate() {
            debug_assert!(k == 0 || q >= qs[k - 1], "quantiles in ascending order");
            // The crate's target: the count reached at the quantile, rounded up, at least 1.
            let target = ((q.min(1.0) * total as f64).ceil() as u64).max(1);
            while seen < target && i < counts.len() {
                let Some(chunk) = &counts.0[i / CHUNK] else {
                    // A chunk never allocated counts nothing.
                    i = (i / CHUNK + 1) * CHUNK;
                    continue;
                };
                let j = i % CHUNK;
                // A run of 16 that stays below the target is summed whole (vectorised).
                if let Some(run) = chunk.get(j..j + 16) {
                    let sum: u64 = run.iter().map(|&n| n.into()).sum();
                    if seen + sum < target {
                        seen += sum;
                        i += 16;
                        continue;
                    }
                }
                seen += chunk[j].into();
                i += 1;
            }
            out[k] = Self::middle(i.saturating_sub(1));
        }
        out
    }

    /// The middle value (rounded up) of the values counted at index `i` (hdrhistogram's
    /// `median_equivalent`): its lowest plus half its width.
    fn middle(i: usize) -> u64 {
        let width_log2 = (i >> Self::HALF_MAG).saturating_sub(1);
        Self::value(i) + ((1u64 << width_log2) >> 1)
    }

    /// The crate's histogram of these counts.
    #[cfg(test)]
    fn histogram(&self) -> Histogram<u64> {
        let mut h = Histogram::new(3).unwrap_or_else(|_| unreachable!("valid precision"));
        for (i, n) in self.counts().into_iter().enumerate().filter(|(_, n)| *n > 0) {
            // `record_n` grows the histogram (`saturating_record_n` would clamp to its top).
            if h.record_n(Self::value(i), n).is_err() {
                h.saturating_record_n(Self::value(i), n);
            }
        }
        h
    }
}

/// Counters and latency of a set of packets (all, one class, one ring).
///
/// A frame that ends adds to the counters and leaves its latency in a buffer; the
/// histogram, the exact extremes, the sums and the batch means take the buffer's
/// latencies a buffer at a time ([`Group::flush`]): per frame a few stores, and with many
/// groups (a ring per core) each histogram's memory is touched in bursts. The buffer holds
/// latencies of one batch (of the batch means) only. Counts, sums and extremes come out
/// the same in any order.
#[derive(Clone)]
pub struct Group {
    pub offered: u64,
    pub forwarded: u64,
    /// Frames the host consumed (XDP_DROP, read by an application).
    pub consumed: u64,
    pub forwarded_bytes: u64,
    pub drop_rx_ring: u64,
    pub drop_qdisc: u64,
    /// Frames the application's full socket refused (`RcvbufErrors`).
    pub drop_rcvbuf: u64,
    /// Frames an AF_XDP socket's full rx ring refused (`rx_ring_full`).
    pub drop_xsk: u64,
    /// Frames a copy-mode AF_XDP socket dropped for want of a fill-ring frame (`rx_dropped`).
    pub drop_xsk_fill: u64,
    latency: Counts,
    /// Latencies (ps) of the `buf_len` frames that ended since the last flush, all of
    /// batch `buf_batch`.
    buf: [u64; LATENCY_BUFFER],
    buf_len: usize,
    buf_batch: usize,
    /// Exact extremes (the histogram keeps 3 significant digits).
    latency_min: Span,
    latency_max: Span,
    /// Latency sums in integer picoseconds: exact, so they come out the same whatever the
    /// order frames of different cores are recorded in.
    latency_sum_ps: u128,
    batch_sum_ps: Vec<u128>,
    batch_n: Vec<u64>,
}

impl Group {
    pub(crate) fn new(batches: usize) -> Self {
        Group {
            offered: 0,
            forwarded: 0,
            consumed: 0,
            forwarded_bytes: 0,
            drop_rx_ring: 0,
            drop_qdisc: 0,
            drop_rcvbuf: 0,
            drop_xsk: 0,
            drop_xsk_fill: 0,
            // 3 significant digits from 1 ns, kept for the ranges of the latencies
            // recorded: a group's memory follows what it measures (a few KB for one that
            // sees microseconds, nothing for one that sees no frame).
            latency: Counts::default(),
            buf: [0; LATENCY_BUFFER],
            buf_len: 0,
            buf_batch: 0,
            latency_min: Span::from_ps(u64::MAX),
            latency_max: Span::ZERO,
            latency_sum_ps: 0,
            batch_sum_ps: vec![0; batches],
            batch_n: vec![0; batches],
        }
    }

    #[inline]
    pub(crate) fn record(&mut self, size: u16, latency: Span, batch: usize) {
        self.forwarded += 1;
        self.forwarded_bytes += size as u64;
        self.record_latency(latency, batch);
    }

    #[inline]
    fn record_consumed(&mut self, size: u16, latency: Span, batch: usize) {
        self.consumed += 1;
        self.forwarded_bytes += size as u64;
        self.record_latency(latency, batch);
    }

    #[inline(always)]
    fn record_latency(&mut self, latency: Span, batch: usize) {
        if batch != self.buf_batch || self.buf_len >= LATENCY_BUFFER {
            self.flush();
            self.buf_batch = batch;
        }
        self.buf[self.buf_len] = latency.ps();
        self.buf_len += 1;
    }

    /// Take the buffered latencies into the histogram, the extremes, the sums and the
    /// batch means.
    #[inline(never)]
    pub fn flush(&mut self) {
        if self.buf_len == 0 {
            return;
        }
        let (sum, min, max) = self.latency.record_ps(&self.buf[..self.buf_len]);
        self.latency_min = self.latency_min.min(Span::from_ps(min));
        self.latency_max = self.latency_max.max(Span::from_ps(max));
        self.latency_sum_ps += sum;
        self.batch_sum_ps[self.buf_batch] += sum;
        self.batch_n[self.buf_batch] += self.buf_len as u64;
        self.buf_len = 0;
    }

    /// Add `other`'s frames to this group's (both flushed): as if each had been recorded
    /// here too.
    pub fn merge(&mut self, other: &Group) {
        debug_assert!(self.buf_len == 0 && other.buf_len == 0, "merge flushed groups");
        self.offered += other.offered;
        self.forwarded += other.forwarded;
        self.consumed += other.consumed;
        self.forwarded_bytes += other.forwarded_bytes;
        self.drop_rx_ring += other.drop_rx_ring;
        self.drop_qdisc += other.drop_qdisc;
        self.drop_rcvbuf += other.drop_rcvbuf;
        self.drop_xsk += other.drop_xsk;
        self.drop_xsk_fill += other.drop_xsk_fill;
        // One layout: the counts of each bucket add.
        self.latency.add(&other.latency);
        self.latency_min = self.latency_min.min(other.latency_min);
        self.latency_max = self.latency_max.max(other.latency_max);
        self.latency_sum_ps += other.latency_sum_ps;
        for (a, b) in self.batch_sum_ps.iter_mut().zip(&other.batch_sum_ps) {
            *a += b;
        }
        for (a, b) in self.batch_n.iter_mut().zip(&other.batch_n) {
            *a += b;
        }
    }

    /// This group with its buffer flushed (a copy only if there is something to flush).
    fn flushed(&self) -> std::borrow::Cow<'_, Group> {
        if self.buf_len == 0 {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut g = self.clone();
            g.flush();
            std::borrow::Cow::Owned(g)
        }
    }

    /// Frames that ended (forwarded or consumed): the latency samples.
    pub fn finished(&self) -> u64 {
        self.forwarded + self.consumed
    }

    pub fn latency_mean_ns(&self) -> f64 {
        if self.finished() == 0 {
            0.0
        } else {
            self.flushed().latency_sum_ps as f64 / 1e3 / self.finished() as f64
        }
    }

    /// Half-width of the 95% confidence interval of the mean latency (batch means), or
    /// None when fewer than two batches saw packets.
    pub fn latency_ci95_ns(&self) -> Option<f64> {
        let g = self.flushed();
        let means: Vec<f64> = g
            .batch_sum_ps
            .iter()
            .zip(&g.batch_n)
            .filter(|(_, n)| **n > 0)
            .map(|(s, n)| *s as f64 / 1e3 / *n as f64)
            .collect();
        let b = means.len();
        if b < 2 {
            return None;
        }
        let m = means.iter().sum::<f64>() / b as f64;
        let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (b - 1) as f64;
        Some(student_t95(b - 1) * (var / b as f64).sqrt())
    }

    pub fn summary(&self, duration_s: f64) -> GroupSummary {
        // Flushed once: the mean and its interval below borrow this one.
        let g = self.flushed();
        let g = &*g;
        // A percentile is its histogram bucket's middle value (3 significant digits), kept
        // within the exact extremes: never above a latency that occurred.
        let (min_ns, max_ns) = (g.latency_min.as_ns_f64(), g.latency_max.as_ns_f64());
        let none = self.finished() == 0;
        let [p25, p50, p75, p90, p99, p999] = g.latency.quantiles([0.25, 0.50, 0.75, 0.90, 0.99, 0.999]);
        let pct = |ns: u64| if none { 0.0 } else { (ns as f64).clamp(min_ns, max_ns) };
        let dropped = self.drop_rx_ring + self.drop_qdisc + self.drop_rcvbuf + self.drop_xsk + self.drop_xsk_fill;
        let mut drops = BTreeMap::new();
        drops.insert("rx_ring_full".to_string(), self.drop_rx_ring);
        drops.insert("qdisc_full".to_string(), self.drop_qdisc);
        drops.insert("rcvbuf_errors".to_string(), self.drop_rcvbuf);
        drops.insert("xsk_rx_ring_full".to_string(), self.drop_xsk);
        drops.insert("xsk_rx_dropped".to_string(), self.drop_xsk_fill);
        GroupSummary {
            offered_pps: self.offered as f64 / duration_s,
            throughput_pps: self.finished() as f64 / duration_s,
            throughput_bps: self.forwarded_bytes as f64 * 8.0 / duration_s,
            loss_ratio: if self.offered == 0 { 0.0 } else { dropped as f64 / self.offered as f64 },
            latency_ns: LatencySummary {
                p25: pct(p25),
                p50: pct(p50),
                p75: pct(p75),
                p90: pct(p90),
                p99: pct(p99),
                p999: pct(p999),
                max: if none { 0.0 } else { max_ns },
                min: if none { 0.0 } else { min_ns },
                mean: g.latency_mean_ns(),
            },
            latency_mean_ci95_ns: g.latency_ci95_ns(),
            drops,
            offered_packets: self.offered,
            forwarded_packets: self.forwarded,
            consumed_packets: self.consumed,
        }
    }
}

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
pub fn student_t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // Beyond 30 the first-order expansion is within 0.1%.
        _ => 1.960 + 2.4 / df as f64,
    }
}

/// Latency percentiles in nanoseconds: each the middle of its histogram bucket (3
/// significant digits) kept within the exact `min` and `max`; `mean` exact.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub min: f64,
    pub mean: f64,
}

/// The result fields of one group.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    pub offered_pps: f64,
    pub throughput_pps: f64,
    pub throughput_bps: f64,
    pub loss_ratio: f64,
    pub latency_ns: LatencySummary,
    pub latency_mean_ci95_ns: Option<f64>,
    pub drops: BTreeMap<String, u64>,
    pub offered_packets: u64,
    pub forwarded_packets: u64,
    /// Frames the host consumed (XDP_DROP, an application); throughput counts them.
    pub consumed_packets: u64,
}

/// 001's latency adder: 4 T_DMA + 2 nic_batch x, with x the frame's mean service time.
#[derive(Debug, Clone, Copy)]
pub struct TPlus {
    /// 4 T_DMA.
    pub dma4: Span,
    /// 2 nic_batch.
    pub batch2: u64,
    /// Mean service time of a frame: fixed part and femtoseconds per byte.
    pub proc_fixed: Span,
    pub proc_per_byte_fs: u64,
}

impl TPlus {
    #[inline]
    fn of(&self, size: u16) -> Span {
        self.dma4 + (self.proc_fixed + Span::from_ps(self.proc_per_byte_fs * size as u64 / 1000)) * self.batch2
    }
}

pub struct Stats {
    pub warm: Instant,
    pub stop: Instant,
    t_off: Span,
    t_plus: Option<TPlus>,
    from: LatencyFrom,
    to: LatencyTo,
    /// The whole node's frames: recorded as they come when there is one ring and one
    /// class, else the sum of the ring (or class) groups, made by [`Stats::flush`].
    pub all: Group,
    /// Per class and per ring, each kept only when there is more than one (else the
    /// report gives the node's figures for the one there is).
    pub classes: Vec<Group>,
    pub rings: Vec<Group>,
    class_of_source: Vec<usize>,
    batches: usize,
    batch_len: Span,
    /// The batch (of the batch means) a departure time falls in, for the last one asked:
    /// (first instant, end, index). Departures come in time order, so this spares a
    /// division per frame.
    batch_at: (Instant, Instant, usize),
    /// Frames that reached the NIC before the window and were forwarded in it.
    pub carried_in: u64,
    pub irqs: u64,
    pub polls: u64,
    pub softirqs: u64,
    pub time_squeeze: u64,
    pub ksoftirqd_wakeups: u64,
    /// CPU time per activity, all cores together.
    pub busy: [Span; ACTIVITY_NAMES.len()],
    /// CPU time of the tasks that run packet work (`TASK_NAMES`), where the I/O mode tells
    /// them apart (`tasks`): the rest of the packet work is interrupt context.
    pub by_task: [Span; TASK_NAMES.len()],
    pub tasks: bool,
    pub empty_polls: u64,
    pub busy_core: Vec<Span>,
    /// Rx packets cleaned per poll of a vector with an rx ring: index = packets (the last:
    /// that many or more).
    pub rx_per_poll: Vec<u64>,
    /// Rx packets those polls cleaned in all (their mean is exact past the last index).
    pub rx_polled: u64,
    interval: Option<Span>,
    pub series: Vec<Bucket>,
    /// One group a frame (no class groups), no time series, no T+: a frame's statistics
    /// can take the short way ([`Stats::forwarded`]).
    plain: bool,
}

pub struct StatsConfig {
    pub warm: Instant,
    pub duration: Span,
    pub t_off: Span,
    pub t_plus: Option<TPlus>,
    pub from: LatencyFrom,
    pub to: LatencyTo,
    pub max_per_poll: usize,
    pub interval: Option<Span>,
    pub batches: usize,
    pub classes: usize,
    pub class_of_source: Vec<usize>,
    pub rings: usize,
    pub cores: usize,
}

/// A forwarded frame's time between the measurement points (without the adders): from its
/// last bit in or its descriptor written back, to its descriptor posted (`t_tx`) or its
/// last bit out (`t_done`).
#[inline(always)]
fn measured(from: LatencyFrom, to: LatencyTo, p: &Packet, t_tx: Instant, t_done: Instant) -> Span {
    let start = match from {
        LatencyFrom::WireIn => p.t_wire,
        LatencyFrom::RxRing => p.t_ring,
    };
    let end = match to {
        LatencyTo::TxRing => t_tx,
        LatencyTo::WireOut => t_done,
    };
    debug_assert!(end >= start, "packet leaves at {end:?} before it arrived at {start:?}: {p:?}");
    end - start
}

impl Stats {
    pub fn new(c: StatsConfig) -> Self {
        let series = match c.interval {
            Some(i) => vec![Bucket::default(); c.duration.div_ceil(i) as usize],
            None => Vec::new(),
        };
        let n = |k: usize| if k > 1 { k } else { 0 };
        Stats {
            warm: c.warm,
            stop: c.warm + c.duration,
            t_off: c.t_off,
            t_plus: c.t_plus,
            from: c.from,
            to: c.to,
            all: Group::new(c.batches),
            classes: (0..n(c.classes)).map(|_| Group::new(c.batches)).collect(),
            rings: (0..n(c.rings)).map(|_| Group::new(c.batches)).collect(),
            class_of_source: c.class_of_source,
            batch_at: (Instant::ZERO, Instant::ZERO, 0),
            batches: c.batches,
            batch_len: Span::from_ps(c.duration.ps().div_ceil(c.batches as u64).max(1)),
            carried_in: 0,
            irqs: 0,
            polls: 0,
            softirqs: 0,
            time_squeeze: 0,
            ksoftirqd_wakeups: 0,
            busy: [Span::ZERO; ACTIVITY_NAMES.len()],
            by_task: [Span::ZERO; TASK_NAMES.len()],
            tasks: false,
            empty_polls: 0,
            busy_core: vec![Span::ZERO; c.cores],
            rx_per_poll: vec![0; c.max_per_poll + 1],
            rx_polled: 0,
            plain: n(c.classes) == 0 && c.interval.is_none() && c.t_plus.is_none(),
            interval: c.interval,
            series,
        }
    }

    #[inline]
    pub fn in_window(&self, t: Instant) -> bool {
        t >= self.warm && t < self.stop
    }

    #[inline(always)]
    fn bucket(&mut self, t: Instant) -> Option<&mut Bucket> {
        let i = self.interval?;
        self.series.get_mut(((t - self.warm).ps() / i.ps()) as usize)
    }

    /// Apply `f` to the packet's groups: its class's and its ring's where those are kept,
    /// else the whole node's (which [`Stats::flush`] makes the sum of the ring groups, or of
    /// the class groups: a frame is recorded once per partition, not once more for the
    /// node).
    #[inline]
    fn each_group(&mut self, p: &Packet, mut f: impl FnMut(&mut Group)) {
        if self.rings.is_empty() && self.classes.is_empty() {
            f(&mut self.all);
            return;
        }
        if !self.classes.is_empty() {
            f(&mut self.classes[self.class_of_source[p.source as usize]]);
        }
        if !self.rings.is_empty() {
            f(&mut self.rings[p.ring as usize]);
        }
    }

    #[inline(always)]
    pub fn offered(&mut self, p: &Packet) {
        if self.in_window(p.t_ring) {
            self.each_group(p, |g| g.offered += 1);
            if let Some(b) = self.bucket(p.t_ring) {
                b.offered += 1;
            }
        }
    }

    /// [`Stats::offered`] of `n` frames written back from `first` on, all before `end`
    /// (in time order), without a branch per frame: where a frame has one group and no
    /// time series and all of them are in the window (else false, with nothing done).
    #[inline(always)]
    pub fn offered_run(&mut self, n: usize, first: Instant, end: Instant) -> bool {
        if !self.plain || !self.rings.is_empty() || first < self.warm || end > self.stop {
            return false;
        }
        self.all.offered += n as u64;
        true
    }

    #[inline]
    pub fn drop_rx_ring(&mut self, p: &Packet) {
        if self.in_window(p.t_ring) {
            self.each_group(p, |g| g.drop_rx_ring += 1);
            if let Some(b) = self.bucket(p.t_ring) {
                b.dropped += 1;
            }
        }
    }

    /// A full qdisc refused a frame. Like every drop, it counts with the frame's arrival
    /// (in the window and in the time series' interval where the frame was offered), so
    /// that the frames lost are a part of the frames offered, whenever they are lost.
    pub fn drop_qdisc(&mut self, p: &Packet) {
        self.dropped(p, |g| g.drop_qdisc += 1);
    }

    /// The application's socket refused a frame (its receive buffer was full).
    pub fn drop_rcvbuf(&mut self, p: &Packet) {
        self.dropped(p, |g| g.drop_rcvbuf += 1);
    }

    /// An AF_XDP socket's full rx ring refused a frame.
    pub fn drop_xsk(&mut self, p: &Packet) {
        self.dropped(p, |g| g.drop_xsk += 1);
    }

    /// A copy-mode AF_XDP socket found its fill ring empty for a frame.
    pub fn drop_xsk_fill(&mut self, p: &Packet) {
        self.dropped(p, |g| g.drop_xsk_fill += 1);
    }

    /// A frame lost after its ring took it: `count` in its groups, by its arrival.
    fn dropped(&mut self, p: &Packet, count: impl FnMut(&mut Group)) {
        if self.in_window(p.t_ring) {
            self.each_group(p, count);
            if let Some(b) = self.bucket(p.t_ring) {
                b.dropped += 1;
            }
        }
    }

    /// Put every group's buffered latencies into its histogram and figures, and make the
    /// whole node's group the sum of the ring groups (or class groups) where those are
    /// kept (the run ended).
    pub fn flush(&mut self) {
        for g in std::iter::once(&mut self.all).chain(&mut self.classes).chain(&mut self.rings) {
            g.flush();
        }
        let parts = if self.rings.is_empty() { &self.classes } else { &self.rings };
        if !parts.is_empty() {
            self.all = Group::new(self.batches);
            for g in parts {
                self.all.merge(g);
            }
        }
    }

    /// The batch a departure at `t` (in the window) counts in.
    #[inline]
    fn batch_of(&mut self, t: Instant) -> usize {
        let (lo, hi, i) = self.batch_at;
        if t >= lo && t < hi {
            return i;
        }
        let i = (((t - self.warm).ps() / self.batch_len.ps()) as usize).min(self.batches - 1);
        let lo = self.warm + self.batch_len * i as u64;
        let hi = if i == self.batches - 1 { self.stop } else { lo + self.batch_len };
        self.batch_at = (lo, hi, i);
        i
    }

    /// A packet's descriptor was written to a tx ring at `t_tx`; its last bit leaves at `t_done`.
    ///
    /// Mostly the frame has one group to go to (its ring's, or the node's with one ring),
    /// in the batch of the last one, with room in its buffer: a few instructions in the
    /// caller, without the call (which saved and restored a dozen registers per frame).
    /// The rest goes out of line, the same figures.
    #[inline(always)]
    pub fn forwarded(&mut self, p: &Packet, t_tx: Instant, t_done: Instant) {
        let (lo, hi, i) = self.batch_at;
        let g = if self.rings.is_empty() { &mut self.all } else { &mut self.rings[p.ring as usize] };
        if self.plain && t_tx >= lo && t_tx < hi && i == g.buf_batch && g.buf_len < LATENCY_BUFFER {
            g.forwarded += 1;
            g.forwarded_bytes += p.size as u64;
            g.buf[g.buf_len] = (measured(self.from, self.to, p, t_tx, t_done) + self.t_off).ps();
            g.buf_len += 1;
            self.carried_in += (p.t_ring < self.warm) as u64;
            return;
        }
        self.forwarded_in_full(p, t_tx, t_done);
    }

    /// [`Stats::forwarded`], every case.
    #[inline(never)]
    fn forwarded_in_full(&mut self, p: &Packet, t_tx: Instant, t_done: Instant) {
        // The batch of the last departure lies in the window: one test for both, mostly.
        let (lo, hi, i) = self.batch_at;
        let batch = if t_tx >= lo && t_tx < hi {
            i
        } else if self.in_window(t_tx) {
            self.batch_of(t_tx)
        } else {
            return;
        };
        let adder = self.t_off + self.t_plus.map_or(Span::ZERO, |t| t.of(p.size));
        let latency = measured(self.from, self.to, p, t_tx, t_done) + adder;
        if p.t_ring < self.warm {
            self.carried_in += 1;
        }
        self.each_group(p, |g| g.record(p.size, latency, batch));
        if let Some(b) = self.bucket(t_tx) {
            b.forwarded += 1;
            b.latency_sum_ps += latency.ps() as u128;
        }
    }

    /// The host consumed a frame at `t` (an XDP program dropped it, an application read
    /// it): it ends there, and its latency runs to `t`.
    #[inline]
    pub fn consumed(&mut self, p: &Packet, t: Instant) {
        if !self.in_window(t) {
            return;
        }
        let start = match self.from {
            LatencyFrom::WireIn => p.t_wire,
            LatencyFrom::RxRing => p.t_ring,
        };
        let latency = t - start + self.t_off + self.t_plus.map_or(Span::ZERO, |tp| tp.of(p.size));
        if p.t_ring < self.warm {
            self.carried_in += 1;
        }
        // Kept from the last frame that ended, mostly: no division per frame.
        let batch = self.batch_of(t);
        self.each_group(p, |g| g.record_consumed(p.size, latency, batch));
        if let Some(b) = self.bucket(t) {
            b.forwarded += 1;
            b.latency_sum_ps += latency.ps() as u128;
        }
    }

    /// A core woken at `t` from an idle state whose exit took `latency`.
    pub fn wake(&mut self, t: Instant, latency: Span) {
        if self.in_window(t) {
            if let Some(b) = self.bucket(t) {
                b.wakeups += 1;
                b.exit_latency_sum_ps += latency.ps() as u128;
            }
        }
    }

    /// A poll the deferral timer started at `t`.
    pub fn deferred_poll(&mut self, t: Instant) {
        if self.in_window(t) {
            if let Some(b) = self.bucket(t) {
                b.deferred_polls += 1;
            }
        }
    }

    /// An interrupt at `t`, its vector's moderation interval then `itr`.
    pub fn irq(&mut self, t: Instant, itr: Span) {
        if self.in_window(t) {
            self.irqs += 1;
            if let Some(b) = self.bucket(t) {
                b.irqs += 1;
                b.itr_sum_ps += itr.ps() as u128;
            }
        }
    }

    #[inline(always)]
    pub fn poll(&mut self, t: Instant, rx_packets: Option<u32>) {
        if self.in_window(t) {
            self.polls += 1;
            if let Some(n) = rx_packets {
                let i = (n as usize).min(self.rx_per_poll.len() - 1);
                self.rx_per_poll[i] += 1;
                self.rx_polled += u64::from(n);
            }
            if let Some(b) = self.bucket(t) {
                b.polls += 1;
                b.rx_polled += rx_packets.map_or(0, u64::from);
            }
        }
    }

    /// `n` empty polls, the first at `t`.
    pub fn empty_polls_add(&mut self, t: Instant, n: u64) {
        if self.in_window(t) {
            self.empty_polls += n;
        }
    }

    pub fn softirq(&mut self, t: Instant) {
        if self.in_window(t) {
            self.softirqs += 1;
        }
    }

    pub fn squeeze(&mut self, t: Instant) {
        if self.in_window(t) {
            self.time_squeeze += 1;
        }
    }

    /// [`Stats::busy`]'s activity part alone: for a run of back-to-back intervals whose
    /// core's part is charged once, over the whole run ([`Stats::busy_core_over`]); the
    /// clamped pieces of a partition add up to the clamped whole.
    #[inline]
    pub fn busy_on(&mut self, a: Activity, start: Instant, end: Instant) {
        if let Some(d) = self.windowed(start, end) {
            self.busy[a as usize] += d;
        }
    }

    /// The part of `[start, end)` inside the measurement window, if any.
    #[inline(always)]
    fn windowed(&self, start: Instant, end: Instant) -> Option<Span> {
        let (s, e) = (start.max(self.warm), end.min(self.stop));
        (e > s).then(|| e - s)
    }

    /// [`Stats::busy`]'s core part alone, over a whole run `[start, end)` (see
    /// [`Stats::busy_on`]).
    #[inline]
    pub fn busy_core_over(&mut self, core: usize, start: Instant, end: Instant) {
        if let Some(d) = self.windowed(start, end) {
            self.busy_core[core] += d;
        }
    }

    /// CPU time `[start, end)` task `task` (of [`TASK_NAMES`]) ran; only the part inside the
    /// window counts.
    #[inline]
    pub fn busy_task(&mut self, task: usize, start: Instant, end: Instant) {
        if let Some(d) = self.windowed(start, end) {
            self.by_task[task] += d;
        }
    }

    /// CPU time `[start, end)` core `core` spent on `a`; only the part inside the window counts.
    #[inline(always)]
    pub fn busy(&mut self, core: usize, a: Activity, start: Instant, end: Instant) {
        if let Some(d) = self.windowed(start, end) {
            self.busy[a as usize] += d;
            self.busy_core[core] += d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group's histogram grows with the latencies it records: one that sees no frame or
    /// microseconds stays small, and what it records is kept at 3 significant digits up to
    /// the engine's longest run.
    #[test]
    fn latency_memory_follows_what_is_measured() {
        let empty = Group::new(2);
        assert_eq!(empty.latency.len(), 0);
        let mut us = Group::new(2);
        for i in 0..10_000u64 {
            us.record(64, Span::from_ps(1_000_000 + 1_000 * i), 0);
        }
        us.flush();
        assert!(us.latency.len() <= 8192, "{}", us.latency.len());
        // Only the ranges a group's latencies span: 40 - 50 us is one chunk of counters
        // (counts from 1 ns up to 50 us would be 7 of them).
        let mut band = Group::new(2);
        for i in 0..10_000u64 {
            band.record(64, Span::from_ps(40_000_000 + 1_000 * i), 0);
        }
        band.flush();
        assert_eq!(band.latency.len(), CHUNK);
        // (Buckets 32 ns wide here, each quantile its bucket's middle: 40,000, 44,999 and
        // 49,999 ns fall in [40,000, 40,032), [44,992, 45,024) and [49,984, 50,016).)
        assert_eq!(band.latency.quantiles([0.0, 0.5, 1.0]), [40_016, 45_008, 50_000]);
        let mut long = Group::new(2);
        long.record(64, Span::from_ps(1_000_000 * 1_000_000_000_000), 0); // 1e6 s
        long.record(64, Span::from_ps(1_000_000), 0);
        let l = long.summary(1.0).latency_ns;
        assert_eq!((l.min, l.max), (1_000.0, 1e15));
        assert!((l.p999 / 1e15 - 1.0).abs() < 1e-3, "{}", l.p999);
    }

    /// A group's own counts are the crate's histogram: recording the same values into
    /// `hdrhistogram::Histogram::new(3)` gives the same buckets, counts and quantiles,
    /// from 0 to u64::MAX (values spread over every power of two, and every value of the
    /// first ranges, where the layout has its edges).
    #[test]
    fn own_counts_are_the_crates_histogram() {
        let mut crate_h: Histogram<u64> = Histogram::new(3).unwrap();
        let mut own = Counts::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values: Vec<u64> = (0..5000).collect();
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        values.push(u64::MAX);
        for &v in &values {
            crate_h.record(v).unwrap();
            own.record(v);
            assert_eq!(Counts::value(Counts::index(v)), crate_h.lowest_equivalent(v), "{v}");
        }
        let h = own.histogram();
        assert_eq!(h.len(), crate_h.len());
        let a: Vec<(u64, u64)> = h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        let b: Vec<(u64, u64)> = crate_h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        assert!(a == b, "{} buckets against the crate's {}", a.len(), b.len());
        let qs = [0.0, 0.001, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.99999, 1.0];
        for q in qs {
            assert_eq!(h.value_at_quantile(q), crate_h.value_at_quantile(q), "q {q}");
        }
        assert_eq!(own.quantiles(qs), qs.map(|q| crate_h.median_equivalent(crate_h.value_at_quantile(q))));
    }

    /// The quantiles taken in one pass are the crate's: for histograms of 1 to 20,000
    /// values (small ones put the targets on bucket edges, where a count reaches a
    /// quantile exactly), spread over microseconds to seconds and over every power of two,
    /// `quantiles` gives `median_equivalent(value_at_quantile(q))` of the crate's histogram
    /// of the same values, for the report's quantiles and for 0, 1 and a quantile given
    /// twice.
    #[test]
    fn quantiles_in_one_pass_are_the_crates() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for n in [1usize, 2, 3, 4, 7, 10, 100, 1000, 20_000] {
            for spread in [0u32, 10, 20, 40, 63] {
                let mut crate_h: Histogram<u64> = Histogram::new(3).unwrap();
                let mut own = Counts::default();
                for _ in 0..n {
                    let r = next();
                    let v = if spread == 63 { r >> (r % 64) } else { 1_000 + (r >> (63 - spread)) };
                    crate_h.record(v).unwrap();
                    own.record(v);
                }
                let qs = [0.0, 0.25, 0.5, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0];
                let theirs = qs.map(|q| crate_h.median_equivalent(crate_h.value_at_quantile(q)));
                assert_eq!(own.quantiles(qs), theirs, "{n} values, spread {spread}");
            }
        }
    }

    /// Counts stay exact past 2^32: 32-bit counters become 64-bit ones before the total
    /// reaches 2^32, recorded or added, and the histogram sees them whole.
    #[test]
    fn counts_past_2_pow_32_stay_exact() {
        let mut a = Counts::default();
        a.record(500);
        let i = Counts::index(500);
        // As if u32::MAX - 1 had been recorded at 500 ns.
        (*a.narrow.at(i), a.total) = (u32::MAX - 1, u32::MAX as u64 - 1);
        a.record(500);
        assert!(a.wide.is_empty(), "u32::MAX still fits");
        a.record(500);
        a.record(700);
        assert!(a.narrow.is_empty() && !a.wide.is_empty());
        assert_eq!((a.wide.get(i), a.wide.get(Counts::index(700))), (u32::MAX as u64 + 1, 1));
        let mut b = Counts::default();
        b.record(500);
        b.add(&a);
        b.add(&a);
        assert_eq!(b.counts()[i], 1 + 2 * (u32::MAX as u64 + 1));
        let h = b.histogram();
        assert_eq!(h.len(), 1 + 2 * (u32::MAX as u64 + 2));
        assert_eq!(h.count_at(500), b.counts()[i]);
        // Two narrow halves whose sum passes 2^32 add up wide.
        let mut c = Counts::default();
        c.record(500);
        (*c.narrow.at(i), c.total) = (3 << 30, 3 << 30);
        let mut d = c.clone();
        d.add(&c);
        assert_eq!(d.counts()[i], 6 << 30);
        // A group's buffer that takes the total past u32::MAX is recorded wide.
        let mut e = Counts::default();
        e.record(500);
        (*e.narrow.at(i), e.total) = (u32::MAX - 1, u32::MAX as u64 - 1);
        assert_eq!(e.record_ps(&[500_000, 500_400]), (1_000_400, 500_000, 500_400));
        assert_eq!(e.wide.get(i), u32::MAX as u64 + 1);
    }

    #[test]
    fn percentiles_never_exceed_a_latency_that_occurred() {
        let mut g = Group::new(2);
        for _ in 0..1000 {
            g.record(64, Span::from_ps(3_500_000), 0);
        }
        let l = g.summary(1.0).latency_ns;
        // 3500 ns lies in a bucket 2 ns wide whose top is 3501 ns.
        assert_eq!(
            (l.p25, l.p50, l.p99, l.p999, l.max, l.min, l.mean),
            (3500.0, 3500.0, 3500.0, 3500.0, 3500.0, 3500.0, 3500.0)
        );
    }

    #[test]
    fn the_extremes_are_exact_to_the_picosecond() {
        let mut g = Group::new(2);
        for ps in [1_234_567, 9_876_543_210, 5_000_000] {
            g.record(64, Span::from_ps(ps), 0);
        }
        let l = g.summary(1.0).latency_ns;
        assert_eq!((l.min, l.max), (1234.567, 9_876_543.21));
        assert!(l.p50 >= l.min && l.p50 <= l.max && (l.p50 - 5000.0).abs() <= 3.0, "{}", l.p50);
    }

    /// A frame's short way through [`Stats::forwarded`] gives the figures of the full
    /// one: frames before, in and after the window, carried in from before it, more than a
    /// buffer to a batch, across every batch, with both latency start and end points, on
    /// one ring and on three (a group each).
    #[test]
    fn the_short_way_of_a_forwarded_frame_is_the_full_one() {
        let ms = |x: u64| Instant::from_ps(x * 1_000_000_000);
        for (from, to, rings) in [
            (LatencyFrom::RxRing, LatencyTo::TxRing, 1),
            (LatencyFrom::WireIn, LatencyTo::WireOut, 1),
            (LatencyFrom::RxRing, LatencyTo::TxRing, 3),
        ] {
            let config = || StatsConfig {
                warm: ms(1),
                duration: Span::from_ps(4_000_000_000),
                t_off: Span::from_ps(7_521),
                t_plus: None,
                from,
                to,
                max_per_poll: 64,
                interval: None,
                batches: 10,
                classes: 1,
                class_of_source: vec![0],
                rings,
                cores: rings,
            };
            let (mut short, mut full) = (Stats::new(config()), Stats::new(config()));
            assert!(short.plain);
            full.plain = false;
            let mut x = 0x2545_f491_4f6c_dd1du64;
            let mut t = 0u64;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t += x % 400_000;
                let mut p = Packet::arriving(Instant::from_ps(t), 64 + (x >> 50) as u16, 0, 0);
                p.t_ring = p.t_wire + Span::from_ps(300);
                p.ring = (x % rings as u64) as u16;
                let t_tx = p.t_ring + Span::from_ps(x % 3_000_000);
                let t_done = t_tx + Span::from_ps(67_200);
                short.forwarded(&p, t_tx, t_done);
                full.forwarded(&p, t_tx, t_done);
            }
            short.flush();
            full.flush();
            assert!(
                short.carried_in > 0 && short.all.forwarded > 10_000,
                "{} {}",
                short.carried_in,
                short.all.forwarded
            );
            assert_eq!(short.carried_in, full.carried_in);
            for (a, b) in std::iter::once((&short.all, &full.all)).chain(short.rings.iter().zip(&full.rings)) {
                assert_eq!(
                    (a.forwarded, a.forwarded_bytes, a.latency_sum_ps, a.latency_min, a.latency_max),
                    (b.forwarded, b.forwarded_bytes, b.latency_sum_ps, b.latency_min, b.latency_max)
                );
                assert_eq!(
                    (&a.batch_sum_ps, &a.batch_n, a.latency.counts()),
                    (&b.batch_sum_ps, &b.batch_n, b.latency.counts())
                );
            }
            assert_eq!(short.rings.len(), if rings > 1 { rings } else { 0 });
        }
    }
}
