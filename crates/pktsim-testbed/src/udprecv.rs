//! `pktsim-tb udprecv`: the application of a shared-core experiment. It receives the
//! probes of `pktsim-tb gen` on an ordinary UDP socket (AF_INET, bound to 0.0.0.0:port),
//! in batches (recvmmsg), and does a fixed amount of CPU work after each datagram.
//!
//! - App latency per probe of the run: CLOCK_MONOTONIC read right after recvmmsg returned
//!   - `tx_mono_ns` (the whole path: stack, socket queue, wake-up of this process).
//! - The work: `--work-loops` turns of an empty loop the compiler must keep. It is a
//!   fixed amount of CPU, not of wall time: an interruption (a softirq on this CPU) does
//!   not shorten it. What one turn costs is measured at startup (`ns_per_work_loop`).
//! - `--hold-ms`: once bound, the receiver reads nothing for a while, then notes the
//!   memory its receive queue holds (SO_MEMINFO) and drains the queue, counting what it
//!   held: the caller gets the truesize a datagram is charged (rmem_alloc / frames).
//! - `--poll-us`: instead of blocking in recvmmsg (the stack's `sk_data_ready` wakes it),
//!   the receiver sleeps on a timer of this period and then drains the socket without
//!   waiting (MSG_DONTWAIT) until it is empty: nothing on another CPU has to wake it, so a
//!   stack on another CPU does not pay for waking it there.

use std::fs::File;
use std::hint::black_box;
use std::io;
use std::os::fd::OwnedFd;

use serde_json::{json, Value};

use crate::args::UdpRecvArgs;
use crate::frame::{self, Classified, Probe};
use crate::sink::{self, LatencyStats};
use crate::sys::{self, failed, SysError, UdpRxBatch};

/// Longest a receive call blocks, so the deadline, idle time and signals are noticed.
const RECV_TIMEOUT_NS: u64 = 50_000_000;
/// Turns of the work loop timed at startup (a few ms), and how many times (the
/// fastest counts: the others were interrupted).
const CALIBRATION_TURNS: u32 = 1_000_000;
const CALIBRATION_RUNS: usize = 5;

/// The application's work for one datagram: `turns` turns of an empty loop. Each turn
/// passes its counter through `black_box`, so the loop can be neither removed nor
/// collapsed, and a turn waits for the one before it.
#[inline(never)]
pub fn work(turns: u32) {
    let mut i = 0u32;
    while i < turns {
        i = black_box(i + 1);
    }
}

/// What one turn of [`work`] costs on this CPU, in ns: the fastest of `runs` timed runs
/// of `turns` (the others were interrupted).
pub fn ns_per_turn(turns: u32, runs: usize) -> f64 {
    let fastest = (0..runs)
        .map(|_| {
            let t0 = sys::mono_ns();
            work(turns);
            sys::mono_ns() - t0
        })
        .min()
        .unwrap_or(0);
    fastest as f64 / f64::from(turns)
}

/// The receive queue after `--hold-ms`: its memory, and the datagrams it held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// SK_MEMINFO_RMEM_ALLOC: the truesize of everything queued.
    pub rmem_alloc_bytes: u32,
    /// Datagrams drained from the queue after the snapshot.
    pub frames: u64,
    /// Of those, the probes of the run sent before the snapshot: with traffic still
    /// arriving during the drain, the ones that can have been in the queue when it was
    /// measured.
    pub frames_sent_before: u64,
    /// SK_MEMINFO_RCVBUF: the limit the queue is held to.
    pub rcvbuf_bytes: u32,
}

/// Counters of a udprecv run; printed as JSON by [`UdpRecvStats::to_json`].
pub struct UdpRecvStats {
    /// Probes of the expected run (duplicates included; held ones not).
    pub received: u64,
    /// Datagrams that are not probes of the expected run.
    pub foreign: u64,
    /// recvmmsg calls that returned datagrams.
    pub calls: u64,
    /// With `--poll-us`: the calls that found the socket empty, and the timer's wake-ups.
    pub empty_calls: u64,
    pub sleeps: u64,
    pub first_rx_mono_ns: Option<u64>,
    pub last_rx_mono_ns: Option<u64>,
    pub latency_app: LatencyStats,
    /// Effective SO_RCVBUF after setup.
    pub rcvbuf_bytes: Option<u64>,
    pub ns_per_work_loop: Option<f64>,
    pub work_loops: u32,
    pub held: Option<Held>,
    pub interrupted: bool,
}

impl UdpRecvStats {
    /// Empty counters for a run with `work_loops` turns of work per datagram.
    pub fn new(work_loops: u32) -> Result<Self, String> {
        Ok(UdpRecvStats {
            received: 0,
            foreign: 0,
            calls: 0,
            empty_calls: 0,
            sleeps: 0,
            first_rx_mono_ns: None,
            last_rx_mono_ns: None,
            latency_app: LatencyStats::new()?,
            rcvbuf_bytes: None,
            ns_per_work_loop: None,
            work_loops,
            held: None,
            interrupted: false,
        })
    }

    /// Accounts one probe of the expected run, read at `app_mono_ns`.
    pub fn record_probe(&mut self, probe: &Probe, app_mono_ns: u64) {
        self.received += 1;
        self.first_rx_mono_ns.get_or_insert(app_mono_ns);
        self.last_rx_mono_ns = Some(app_mono_ns);
        self.latency_app.record(i128::from(app_mono_ns) - i128::from(probe.tx_mono_ns));
    }

    /// The JSON object printed at the end of a run.
    pub fn to_json(&self) -> Value {
        json!({
            "received": self.received,
            "foreign": self.foreign,
            "calls": self.calls,
            "empty_calls": self.empty_calls,
            "sleeps": self.sleeps,
            "first_rx_mono_ns": self.first_rx_mono_ns,
            "last_rx_mono_ns": self.last_rx_mono_ns,
            "latency_app_ns": self.latency_app.to_json(),
            "rcvbuf_bytes": self.rcvbuf_bytes,
            "ns_per_work_loop": self.ns_per_work_loop,
            "work_loops": self.work_loops,
            "held": self.held.map(|h| json!({
                "rmem_alloc_bytes": h.rmem_alloc_bytes,
                "frames": h.frames,
                "frames_sent_before": h.frames_sent_before,
                "rcvbuf_bytes": h.rcvbuf_bytes,
            })),
            "interrupted": self.interrupted,
        })
    }
}

/// Opens the UDP socket: receive buffer (if asked for), timeout, bound to 0.0.0.0:port.
fn open_socket(args: &UdpRecvArgs) -> Result<OwnedFd, SysError> {
    let fd = sys::udp_socket().map_err(failed("socket(AF_INET, SOCK_DGRAM)"))?;
    if let Some(bytes) = args.rcvbuf {
        // At most 1 GiB (the argument parser's bound), so it fits an int.
        let bytes = bytes as i32;
        if sys::set_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes).is_err() {
            sys::set_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes)
                .map_err(failed(format!("setsockopt(SO_RCVBUF, {bytes})")))?;
        }
    }
    sys::set_recv_timeout_ns(&fd, RECV_TIMEOUT_NS).map_err(failed("setsockopt(SO_RCVTIMEO)"))?;
    sys::bind_inet_any(&fd, args.port).map_err(failed(format!("bind(0.0.0.0:{})", args.port)))?;
    Ok(fd)
}

/// The hold: reads nothing until `until_mono_ns` (or a stop), then notes the queue's
/// memory and drains it (until EAGAIN, or `deadline_mono_ns`), counting the datagrams.
fn hold_and_drain(
    fd: &OwnedFd,
    rx: &mut UdpRxBatch,
    run_id: u32,
    until_mono_ns: u64,
    deadline_mono_ns: u64,
) -> Result<Held, SysError> {
    while !sys::stop_requested() {
        let now = sys::mono_ns();
        if now >= until_mono_ns {
            break;
        }
        // EINTR (a stop signal) ends the sleep early; the loop then sees the flag.
        let _ = sys::sleep_until_mono_ns(until_mono_ns);
    }
    let (rmem_alloc_bytes, rcvbuf_bytes) = sys::sk_meminfo(fd).map_err(failed("getsockopt(SO_MEMINFO)"))?;
    let snapshot_mono_ns = sys::mono_ns();
    let (mut frames, mut frames_sent_before) = (0u64, 0u64);
    while sys::mono_ns() < deadline_mono_ns {
        match rx.recv_queued(fd) {
            Ok(n) => {
                frames += n as u64;
                for j in 0..n {
                    if let Classified::Probe(p) = frame::classify_payload(rx.payload(j), run_id) {
                        frames_sent_before += u64::from(p.tx_mono_ns < snapshot_mono_ns);
                    }
                }
            }
            Err(e) if sys::is_errno(&e, &[libc::EINTR]) => continue,
            Err(e) if sys::is_errno(&e, &[libc::EAGAIN]) => break,
            Err(e) => return Err(failed("recvmmsg(MSG_DONTWAIT)")(e)),
        }
    }
    Ok(Held { rmem_alloc_bytes, frames, frames_sent_before, rcvbuf_bytes })
}

/// Runs the receiver until `--duration-ms`, `--idle-ms` of silence after the first
/// probe, or a stop signal.
pub fn run(args: &UdpRecvArgs) -> Result<UdpRecvStats, SysError> {
    if let Some(cpu) = args.cpu {
        sys::pin_to_cpu(cpu).map_err(failed(format!("sched_setaffinity(cpu {cpu})")))?;
    }
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    let mut stats = UdpRecvStats::new(args.work_loops)
        .map_err(|e| SysError { call: "hdrhistogram".into(), err: io::Error::other(e) })?;
    if args.work_loops > 0 {
        stats.ns_per_work_loop = Some(ns_per_turn(CALIBRATION_TURNS, CALIBRATION_RUNS));
    }
    let fd = open_socket(args)?;
    let rcvbuf =
        sys::get_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF).map_err(failed("getsockopt(SO_RCVBUF)"))?;
    stats.rcvbuf_bytes = u64::try_from(rcvbuf).ok();
    let mut rx = UdpRxBatch::new(args.batch);

    if let Some(path) = &args.ready_file {
        File::create(path).map_err(failed(format!("create ready file {}", path.display())))?;
    }

    let start_mono_ns = sys::mono_ns();
    let deadline_mono_ns = start_mono_ns.saturating_add(args.duration_ns);
    if args.hold_ns > 0 {
        let until = start_mono_ns.saturating_add(args.hold_ns);
        stats.held = Some(hold_and_drain(&fd, &mut rx, args.run_id, until, deadline_mono_ns)?);
    }
    let mut next_poll_mono_ns = sys::mono_ns();
    loop {
        if let Some(interrupted) = sink::loop_ends(deadline_mono_ns, stats.last_rx_mono_ns, args.idle_ns) {
            stats.interrupted = interrupted;
            break;
        }
        let got = if args.poll_ns > 0 { rx.recv_queued(&fd) } else { rx.recv(&fd) };
        let n = match got {
            Ok(n) => n,
            Err(e) if args.poll_ns > 0 && sys::is_errno(&e, &[libc::EAGAIN]) => {
                // Drained: sleep to the next period (from now, if this one is over).
                stats.empty_calls += 1;
                stats.sleeps += 1;
                next_poll_mono_ns = next_poll_mono_ns.saturating_add(args.poll_ns).max(sys::mono_ns());
                let _ = sys::sleep_until_mono_ns(next_poll_mono_ns);
                continue;
            }
            Err(e) if sys::is_errno(&e, &[libc::EAGAIN, libc::EINTR]) => continue,
            Err(e) => return Err(failed("recvmmsg")(e)),
        };
        let app_mono_ns = sys::mono_ns();
        if n > 0 {
            stats.calls += 1;
        }
        for j in 0..n {
            match frame::classify_payload(rx.payload(j), args.run_id) {
                Classified::Probe(probe) => stats.record_probe(&probe, app_mono_ns),
                Classified::Foreign | Classified::Other => stats.foreign += 1,
            }
            if args.work_loops > 0 {
                work(args.work_loops);
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_run_has_null_fields() {
        let s = UdpRecvStats::new(0).unwrap();
        let j = s.to_json();
        let mut keys: Vec<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "calls",
                "empty_calls",
                "first_rx_mono_ns",
                "foreign",
                "held",
                "interrupted",
                "last_rx_mono_ns",
                "latency_app_ns",
                "ns_per_work_loop",
                "rcvbuf_bytes",
                "received",
                "sleeps",
                "work_loops"
            ]
        );
        assert_eq!((j["received"].as_u64(), j["foreign"].as_u64(), j["calls"].as_u64()), (Some(0), Some(0), Some(0)));
        assert!(j["first_rx_mono_ns"].is_null());
        assert!(j["last_rx_mono_ns"].is_null());
        assert!(j["rcvbuf_bytes"].is_null());
        assert!(j["ns_per_work_loop"].is_null());
        assert!(j["held"].is_null());
        assert_eq!(j["work_loops"], 0);
        assert_eq!(j["interrupted"], false);
        assert_eq!(j["latency_app_ns"]["count"], 0);
        assert!(j["latency_app_ns"]["p50"].is_null());
    }

    #[test]
    fn probes_and_hold_in_json() {
        let mut s = UdpRecvStats::new(500).unwrap();
        for (i, t) in [4_000u64, 5_000, 9_000].into_iter().enumerate() {
            s.record_probe(&Probe { run_id: 0, seq: i as u64, tx_mono_ns: 1_000, tx_real_ns: 0 }, t);
        }
        s.rcvbuf_bytes = Some(425_984);
        s.ns_per_work_loop = Some(0.75);
        s.held = Some(Held { rmem_alloc_bytes: 76_800, frames: 100, frames_sent_before: 98, rcvbuf_bytes: 425_984 });
        let j = s.to_json();
        assert_eq!(j["received"], 3);
        assert_eq!((j["first_rx_mono_ns"].as_u64(), j["last_rx_mono_ns"].as_u64()), (Some(4_000), Some(9_000)));
        assert_eq!(j["latency_app_ns"]["min"], 3_000);
        assert_eq!(j["latency_app_ns"]["max"], 8_000);
        assert_eq!(j["rcvbuf_bytes"], 425_984);
        assert_eq!(j["ns_per_work_loop"], 0.75);
        assert_eq!(j["work_loops"], 500);
        assert_eq!(
            j["held"],
            json!({"rmem_alloc_bytes": 76_800, "frames": 100, "frames_sent_before": 98, "rcvbuf_bytes": 425_984})
        );
    }

    #[test]
    fn work_takes_time_in_proportion_to_its_turns() {
        // Not a benchmark: only that the loop is not optimised away.
        let t0 = sys::mono_ns();
        work(2_000_000);
        assert!(sys::mono_ns() - t0 > 100_000, "2e6 turns in under 0.1 ms");
        let per_turn = ns_per_turn(CALIBRATION_TURNS, CALIBRATION_RUNS);
        assert!(per_turn > 0.0 && per_turn < 100.0, "{per_turn}");
    }
}
