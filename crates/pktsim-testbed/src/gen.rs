//! `pktsim-tb gen`: an open-loop UDP probe generator on an AF_PACKET socket.
//!
//! Packet i (sequence number i) is due at `t0 + i / rate`. The loop sends every packet
//! that is due (at most `--batch` per sendmmsg call), sleeps or spins until the next due
//! time, and never slows down because of the receiver: a packet the kernel refuses with
//! ENOBUFS/EAGAIN (a full veth peer ring, a full socket buffer) is counted as refused and
//! skipped, so offered load stays what was asked for.

use std::io;
use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::args::{GenArgs, Rate};
use crate::frame::{self, FrameSpec};
use crate::sys::{self, failed, SysError, TxBatch};

/// A next due time further away than this is slept for; a nearer one is spun for.
const SPIN_THRESHOLD_NS: u64 = 60_000;
/// Requested send buffer (SO_SNDBUFFORCE), so the socket never throttles the sender.
const SNDBUF_BYTES: i32 = 4 << 20;

/// Due times of a fixed-rate schedule, in integer nanoseconds after t0, without drift.
///
/// The rate is kept in millionths of a packet per second, so packet i is due exactly at
/// `floor(i * 1e15 / rate_micro_pps)` ns: at 3 pps packet 3 is due at exactly 1 s, at
/// 1.5 Mpps packet 1 500 000 at exactly 1 s, however long the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    rate_micro_pps: u64,
}

/// Nanoseconds per second times the millionths in `rate_micro_pps`.
const NS_MICRO: u128 = 1_000_000_000 * 1_000_000;

impl Schedule {
    /// A schedule at `rate_micro_pps` millionths of a packet per second (> 0).
    pub fn new(rate_micro_pps: u64) -> Self {
        Schedule { rate_micro_pps: rate_micro_pps.max(1) }
    }

    /// When packet `i` is due, in ns after t0: `floor(i * 1e9 / rate_pps)`.
    pub fn due_offset_ns(&self, i: u64) -> u64 {
        let ns = u128::from(i) * NS_MICRO / u128::from(self.rate_micro_pps);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// How many packets are due `elapsed_ns` after t0: the number of i with
    /// `due_offset_ns(i) <= elapsed_ns`, i.e. `ceil((elapsed_ns + 1) * rate / 1e9)`.
    pub fn due_count(&self, elapsed_ns: u64) -> u64 {
        let n = ((u128::from(elapsed_ns) + 1) * u128::from(self.rate_micro_pps)).div_ceil(NS_MICRO);
        u64::try_from(n).unwrap_or(u64::MAX)
    }
}

/// What a `gen` run did; printed as JSON by [`GenReport::to_json`].
#[derive(Debug, Clone, PartialEq)]
pub struct GenReport {
    /// Packets the kernel accepted.
    pub sent: u64,
    /// Packets refused with ENOBUFS/EAGAIN (not retried).
    pub refused: u64,
    /// CLOCK_MONOTONIC when packet 0 was due.
    pub t0_mono_ns: u64,
    /// CLOCK_MONOTONIC right after the last sendmmsg call returned (t0 if none).
    pub t_end_mono_ns: u64,
    /// Largest lateness of a batch: send time of its first packet minus its due time
    /// (0 with `--rate max`, which has no schedule).
    pub max_late_ns: u64,
    /// Stopped by SIGINT/SIGTERM.
    pub interrupted: bool,
    /// Batches sent, by size: 1, 2-3, 4-7, 8-15, 16-31, 32 and more frames. A paced
    /// generator sends one frame at a time; bigger batches mean it ran late and caught up
    /// (the frames of a batch reach the device back to back).
    pub batch_sizes: [u64; 6],
    /// The stalls: each time the pacing loop, which reads the clock as it spins, did not
    /// see it for [`STALL_MIN_NS`] or more (a send call, its CPU taken elsewhere; the
    /// frames due meanwhile leave together after it). Sleeps the loop chose are not stalls. Reported by kind ([`GenReport::stall_kinds`]), the model's
    /// `[[traffic.stalls]]`.
    pub stalls: hdrhistogram::Histogram<u64>,
}

/// The shortest absence of the pacing loop that counts as a stall: a spinning loop reads
/// the clock every few tens of nanoseconds.
pub const STALL_MIN_NS: u64 = 2_000;
/// The shortest lateness that counts as a long stall (reported as a kind of its own).
pub const LONG_STALL_NS: u64 = 100_000;
/// Quantiles of each kind of stall's lengths reported (evenly: each stands for 1/200).
pub const STALL_QUANTILES: usize = 200;

/// An empty histogram of stall lengths (1 ns to 100 s, 3 significant digits).
pub fn stall_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static histogram bounds")
}

/// Index of a batch of `n` frames in [`GenReport::batch_sizes`].
pub fn batch_class(n: usize) -> usize {
    (usize::BITS - 1 - n.max(1).leading_zeros()).min(5) as usize
}

impl GenReport {
    /// sent + refused.
    pub fn offered(&self) -> u64 {
        self.sent + self.refused
    }

    /// Last send time minus t0.
    pub fn elapsed_ns(&self) -> u64 {
        self.t_end_mono_ns.saturating_sub(self.t0_mono_ns)
    }

    /// The JSON object printed at the end of a run.
    pub fn to_json(&self) -> Value {
        let elapsed_ns = self.elapsed_ns();
        let per_s = |n: u64| {
            if elapsed_ns == 0 {
                0.0
            } else {
                n as f64 * 1e9 / elapsed_ns as f64
            }
        };
        json!({
            "sent": self.sent,
            "refused": self.refused,
            "offered": self.offered(),
            "elapsed_ns": elapsed_ns,
            "t0_mono_ns": self.t0_mono_ns,
            "t_end_mono_ns": self.t_end_mono_ns,
            "offered_pps": per_s(self.offered()),
            "sent_pps": per_s(self.sent),
            "max_late_ns": self.max_late_ns,
            "interrupted": self.interrupted,
            "batches": self.batch_sizes.iter().sum::<u64>(),
            "batch_sizes": {
                "1": self.batch_sizes[0], "2-3": self.batch_sizes[1], "4-7": self.batch_sizes[2],
                "8-15": self.batch_sizes[3], "16-31": self.batch_sizes[4], "32+": self.batch_sizes[5],
            },
            "stalls": self.stall_kinds(),
        })
    }

    /// The stalls in two kinds, short (from [`STALL_MIN_NS`]) and long (from
    /// [`LONG_STALL_NS`]): each its count and [`STALL_QUANTILES`] quantiles of its lengths,
    /// at the middle of each 1/200 of them, so that a few long stalls among thousands of
    /// short ones keep their lengths.
    pub fn stall_kinds(&self) -> Value {
        let total = self.stalls.len();
        let short = self.stalls.count_between(0, LONG_STALL_NS - 1);
        let kind = |min_ns: u64, count: u64, before: u64| {
            let lengths: Vec<u64> = if count == 0 {
                Vec::new()
            } else {
                (0..STALL_QUANTILES)
                    .map(|i| {
                        let q =
                            (before as f64 + (i as f64 + 0.5) / STALL_QUANTILES as f64 * count as f64) / total as f64;
                        self.stalls.lowest_equivalent(self.stalls.value_at_quantile(q))
                    })
                    .collect()
            };
            json!({"min_ns": min_ns, "count": count, "length_ns": lengths})
        };
        json!([kind(STALL_MIN_NS, short, 0), kind(LONG_STALL_NS, total - short, short)])
    }
}

/// Opens and configures the send socket on `iface`; returns it with the interface MAC.
fn open_socket(iface: &str) -> Result<(std::os::fd::OwnedFd, [u8; 6]), SysError> {
    let fd = sys::packet_socket().map_err(failed("socket(AF_PACKET)"))?;
    let ifindex = sys::if_index(iface).map_err(failed(format!("if_nametoindex(\"{iface}\")")))?;
    let src_mac = sys::if_hwaddr(&fd, iface).map_err(failed(format!("ioctl(SIOCGIFHWADDR, \"{iface}\")")))?;
    sys::bind_packet(&fd, ifindex, 0).map_err(failed(format!("bind(AF_PACKET, \"{iface}\")")))?;
    // Both are optimisations; the generator works without them.
    let _ = sys::set_sockopt_int(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
    let _ = sys::set_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SNDBUF_BYTES);
    Ok((fd, src_mac))
}

/// Runs the generator until `--count`, `--duration-ms` or a stop signal.
pub fn run(args: &GenArgs) -> Result<GenReport, SysError> {
    if let Some(cpu) = args.cpu {
        sys::pin_to_cpu(cpu).map_err(failed(format!("sched_setaffinity(cpu {cpu})")))?;
    }
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    let _ = sys::set_timer_slack_ns(1);

    let (fd, src_mac) = open_socket(&args.iface)?;
    let template = frame::build(&FrameSpec {
        dst_mac: args.dst_mac,
        src_mac,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        frame_len: args.frame_len,
        run_id: args.run_id,
    });
    let mut tx = TxBatch::new(args.batch, template.len());
    for j in 0..args.batch {
        tx.frame_mut(j).copy_from_slice(&template);
    }
    let first_dst = u32::from(args.dst_ip);
    let dst_count = u64::from(args.dst_count);
    let schedule = match args.rate {
        Rate::Max => None,
        Rate::Fixed { rate_micro_pps } => Some(Schedule::new(rate_micro_pps)),
    };

    let t0_mono_ns = sys::mono_ns();
    let deadline_mono_ns = t0_mono_ns.saturating_add(args.duration_ns);
    let mut report = GenReport {
        sent: 0,
        refused: 0,
        t0_mono_ns,
        t_end_mono_ns: t0_mono_ns,
        max_late_ns: 0,
        interrupted: false,
        batch_sizes: [0; 6],
        stalls: stall_histogram(),
    };
    let mut next_seq: u64 = 0;
    let mut last_ns: Option<u64> = None;

    loop {
        if sys::stop_requested() {
            report.interrupted = true;
            break;
        }
        if next_seq >= args.count {
            break;
        }
        let now = sys::mono_ns();
        // The time since the loop last looked at the clock, unless it slept: the sender
        // was away (a send call, its CPU taken); a frame due meanwhile left late.
        if let Some(last) = last_ns.filter(|_| schedule.is_some()) {
            if now - last >= STALL_MIN_NS {
                // Within the histogram's bounds (at most 100 s: runs are shorter).
                report.stalls.saturating_record(now - last);
            }
        }
        last_ns = Some(now);
        if now >= deadline_mono_ns {
            break;
        }
        let left = args.count - next_seq;
        let (n, due_mono_ns) = match schedule {
            None => (left.min(args.batch as u64), None),
            Some(s) => {
                let due_total = s.due_count(now - t0_mono_ns).min(args.count);
                let next_due_mono_ns = t0_mono_ns.saturating_add(s.due_offset_ns(next_seq));
                if due_total <= next_seq {
                    let wake_mono_ns = next_due_mono_ns.min(deadline_mono_ns);
                    if wake_mono_ns.saturating_sub(now) > SPIN_THRESHOLD_NS {
                        last_ns = None; // asleep by choice, not away
                        match sys::sleep_until_mono_ns(wake_mono_ns) {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(failed("clock_nanosleep(CLOCK_MONOTONIC)")(e)),
                        }
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                ((due_total - next_seq).min(args.batch as u64), Some(next_due_mono_ns))
            }
        };
        let n = n as usize;

        for j in 0..n {
            let seq = next_seq + j as u64;
            let f = tx.frame_mut(j);
            frame::set_seq(f, seq);
            if dst_count > 1 {
                frame::set_dst_ip(f, Ipv4Addr::from(first_dst + (seq % dst_count) as u32));
            }
        }
        report.batch_sizes[batch_class(n)] += 1;
        send_batch(&fd, &mut tx, n, due_mono_ns, &mut report)?;
        next_seq += n as u64;
    }
    Ok(report)
}

/// Sends frames `0..n` of `tx`, stamping them right before each sendmmsg call. A
/// message the kernel does not accept with ENOBUFS/EAGAIN is counted as refused and
/// skipped; the rest of the batch is sent with the next call.
fn send_batch(
    fd: &std::os::fd::OwnedFd,
    tx: &mut TxBatch,
    n: usize,
    due_mono_ns: Option<u64>,
    report: &mut GenReport,
) -> Result<(), SysError> {
    let mut start = 0;
    let mut first_call = true;
    while start < n {
        let tx_mono_ns = sys::mono_ns();
        let tx_real_ns = sys::real_ns();
        for j in start..n {
            frame::set_tx_times(tx.frame_mut(j), tx_mono_ns, tx_real_ns);
        }
        if first_call {
            if let Some(due) = due_mono_ns {
                report.max_late_ns = report.max_late_ns.max(tx_mono_ns.saturating_sub(due));
            }
            first_call = false;
        }
        let result = tx.send(fd, start, n);
        report.t_end_mono_ns = sys::mono_ns();
        match result {
            Ok(k) => {
                report.sent += k as u64;
                start += k;
                if start < n {
                    // sendmmsg stopped at message `start`: the kernel refused it.
                    report.refused += 1;
                    start += 1;
                }
            }
            Err(e) if sys::is_errno(&e, &[libc::ENOBUFS, libc::EAGAIN]) => {
                report.refused += 1;
                start += 1;
            }
            // Nothing was sent; try the same messages again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed("sendmmsg")(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute-force count of due packets, for checking `due_count`.
    fn count_due(s: &Schedule, elapsed_ns: u64, limit: u64) -> u64 {
        (0..limit).take_while(|&i| s.due_offset_ns(i) <= elapsed_ns).count() as u64
    }

    #[test]
    fn batch_classes_are_powers_of_two() {
        let classes: Vec<usize> = [1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 64, 256].iter().map(|&n| batch_class(n)).collect();
        assert_eq!(classes, [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5]);
    }

    #[test]
    fn three_pps_is_exact() {
        let s = Schedule::new(3_000_000);
        assert_eq!(s.due_offset_ns(0), 0);
        assert_eq!(s.due_offset_ns(1), 333_333_333);
        assert_eq!(s.due_offset_ns(2), 666_666_666);
        assert_eq!(s.due_offset_ns(3), 1_000_000_000);
        // No drift after a long run: 1e8 packets at 3 pps take exactly 1e8/3 s.
        assert_eq!(s.due_offset_ns(99_999_999), 33_333_333_000_000_000);
        assert_eq!(s.due_offset_ns(100_000_000), 33_333_333_333_333_333);
        assert_eq!(s.due_count(0), 1);
        assert_eq!(s.due_count(333_333_332), 1);
        assert_eq!(s.due_count(333_333_333), 2);
        assert_eq!(s.due_count(999_999_999), 3);
        assert_eq!(s.due_count(1_000_000_000), 4);
    }

    #[test]
    fn one_and_a_half_mpps_is_exact() {
        let s = Schedule::new(1_500_000_000_000);
        assert_eq!(s.due_offset_ns(1), 666);
        assert_eq!(s.due_offset_ns(2), 1_333);
        assert_eq!(s.due_offset_ns(3), 2_000);
        assert_eq!(s.due_offset_ns(1_500_000), 1_000_000_000);
        assert_eq!(s.due_offset_ns(100_000_000), 66_666_666_666);
        assert_eq!(s.due_count(999_999_999), 1_500_000);
        assert_eq!(s.due_count(1_000_000_000), 1_500_001);
        // A float period accumulated packet by packet would drift; the integer
        // schedule stays within 1 ns of the exact value i * 1e9 / 1.5e6.
        for i in (0..100_000_000u64).step_by(999_983) {
            let exact = i as u128 * 2_000 / 3;
            assert_eq!(u128::from(s.due_offset_ns(i)), exact);
        }
    }

    #[test]
    fn due_count_matches_due_offsets() {
        for rate_micro_pps in [1, 250_000, 3_000_000, 7_000_000_000, 1_500_000_000_000, 1_000_000_000_000_000] {
            let s = Schedule::new(rate_micro_pps);
            for i in 0..200u64 {
                let t = s.due_offset_ns(i);
                assert!(s.due_count(t) > i, "rate {rate_micro_pps} i {i}");
                if t > 0 && s.due_offset_ns(i - 1) < t {
                    assert_eq!(s.due_count(t - 1), i, "rate {rate_micro_pps} i {i}");
                }
            }
            for elapsed in [0, 1, 999, 1_000, 12_345, 1_000_000, 999_999_999] {
                let limit = 5_000;
                if s.due_offset_ns(limit) > elapsed {
                    assert_eq!(
                        s.due_count(elapsed),
                        count_due(&s, elapsed, limit),
                        "rate {rate_micro_pps} t {elapsed}"
                    );
                }
            }
        }
    }

    #[test]
    fn report_json() {
        let r = GenReport {
            sent: 900,
            refused: 100,
            t0_mono_ns: 5_000,
            t_end_mono_ns: 5_000 + 500_000_000,
            max_late_ns: 42,
            interrupted: false,
            batch_sizes: [800, 0, 0, 0, 0, 3],
            stalls: stall_histogram(),
        };
        let mut r2 = r.clone();
        for late in [3_000, 5_000, 40_000, 2_000_000] {
            r2.stalls.record(late).unwrap();
        }
        let kinds = r2.to_json()["stalls"].clone();
        let q = |k: usize| {
            kinds[k]["length_ns"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>()
        };
        assert_eq!((kinds[0]["count"].as_u64(), kinds[1]["count"].as_u64()), (Some(3), Some(1)));
        let short = q(0);
        assert_eq!(short.len(), STALL_QUANTILES);
        // A third of the quantiles each (3 significant digits); the long one alone.
        assert_eq!((short[0], short[100], short[199]), (3_000, 5_000, 40_000));
        assert!(q(1).iter().all(|&v| (v as f64 - 2e6).abs() < 2e3), "{:?}", q(1));
        let j = r.to_json();
        assert_eq!(j["stalls"][0]["count"], 0);
        assert!(j["stalls"][1]["length_ns"].as_array().unwrap().is_empty());
        assert_eq!(j["batches"], 803);
        assert_eq!(j["batch_sizes"]["32+"], 3);
        assert_eq!(j["offered"], 1000);
        assert_eq!(j["elapsed_ns"], 500_000_000);
        assert_eq!(j["offered_pps"], 2000.0);
        assert_eq!(j["sent_pps"], 1800.0);
        let empty = GenReport { sent: 0, refused: 0, t_end_mono_ns: 5_000, ..r };
        assert_eq!(empty.to_json()["sent_pps"], 0.0);
    }
}
