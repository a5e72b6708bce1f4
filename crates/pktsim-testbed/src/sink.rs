//! `pktsim-tb sink`: receives the probes of `pktsim-tb gen` and measures latency.
//!
//! The sink reads IPv4 frames from an AF_PACKET socket bound to one interface, in
//! batches (recvmmsg), with a kernel receive timestamp per frame (SO_TIMESTAMPNS,
//! CLOCK_REALTIME, taken when the frame was queued to the interface: for a veth without
//! NAPI of its own that is when the peer transmitted it). For each probe
//! of the expected run it records two latencies:
//! - kernel: receive timestamp - `tx_real_ns` (wire and kernel path up to the stack);
//! - app: CLOCK_MONOTONIC read right after recvmmsg returned - `tx_mono_ns` (adds the
//!   socket queue and the wake-up of this process).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::args::SinkArgs;
use crate::frame::{self, Classified, Probe};
use crate::sys::{self, failed, RxBatch, SysError};

/// Requested receive buffer: SO_RCVBUFFORCE, falling back to SO_RCVBUF.
const RCVBUF_BYTES: i32 = 32 << 20;
/// Longest a receive call blocks, so the deadline, idle time and signals are noticed.
const RECV_TIMEOUT_NS: u64 = 50_000_000;

/// Latency distribution in ns: exact count, min, max and mean, percentiles from an HDR
/// histogram with 3 significant digits.
pub struct LatencyStats {
    hist: Histogram<u64>,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
}

impl LatencyStats {
    /// An empty distribution.
    pub fn new() -> Result<Self, String> {
        let hist = Histogram::new(3).map_err(|e| format!("cannot create a latency histogram: {e:?}"))?;
        Ok(LatencyStats { hist, min_ns: u64::MAX, max_ns: 0, sum_ns: 0 })
    }

    /// Records one latency; a negative one (clock skew) counts as 0.
    pub fn record(&mut self, latency_ns: i128) {
        let v = u64::try_from(latency_ns.max(0)).unwrap_or(u64::MAX);
        // `record` grows the histogram as needed (`saturating_record` would clamp instead).
        if self.hist.record(v).is_err() {
            self.hist.saturating_record(v);
        }
        self.min_ns = self.min_ns.min(v);
        self.max_ns = self.max_ns.max(v);
        self.sum_ns += u128::from(v);
    }

    /// Number of recorded latencies.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// `{"count","min","p50","p90","p99","p999","max","mean"}`; all but count are null
    /// when nothing was recorded.
    pub fn to_json(&self) -> Value {
        let count = self.count();
        if count == 0 {
            return json!({
                "count": 0, "min": null, "p50": null, "p90": null, "p99": null,
                "p999": null, "max": null, "mean": null,
            });
        }
        let q = |quantile: f64| self.hist.value_at_quantile(quantile).clamp(self.min_ns, self.max_ns);
        json!({
            "count": count,
            "min": self.min_ns,
            "p50": q(0.50),
            "p90": q(0.90),
            "p99": q(0.99),
            "p999": q(0.999),
            "max": self.max_ns,
            "mean": self.sum_ns as f64 / count as f64,
        })
    }
}

/// Counters of a sink run; printed as JSON by [`SinkStats::to_json`].
pub struct SinkStats {
    /// Probes of the expected run (duplicates included).
    pub received: u64,
    /// Their frame bytes (Ethernet header to end of frame, no FCS).
    pub bytes: u64,
    /// IPv4/UDP frames to port 9001 that are not probes of the expected run.
    pub foreign: u64,
    pub min_seq: Option<u64>,
    pub max_seq: Option<u64>,
    /// Probes whose seq was <= the previous probe's seq (reordered or duplicated).
    pub reordered: u64,
    last_seq: Option<u64>,
    pub first_rx_mono_ns: Option<u64>,
    pub last_rx_mono_ns: Option<u64>,
    pub latency_kernel: LatencyStats,
    pub latency_app: LatencyStats,
    pub interrupted: bool,
}

impl SinkStats {
    /// Empty counters.
    pub fn new() -> Result<Self, String> {
        Ok(SinkStats {
            received: 0,
            bytes: 0,
            foreign: 0,
            min_seq: None,
            max_seq: None,
            reordered: 0,
            last_seq: None,
            first_rx_mono_ns: None,
            last_rx_mono_ns: None,
            latency_kernel: LatencyStats::new()?,
            latency_app: LatencyStats::new()?,
            interrupted: false,
        })
    }

    /// Accounts one probe of the expected run.
    pub fn record_probe(&mut self, probe: &Probe, frame_len: usize, kernel_real_ns: Option<u64>, app_mono_ns: u64) {
        self.received += 1;
        self.bytes += frame_len as u64;
        if self.last_seq.is_some_and(|last| probe.seq <= last) {
            self.reordered += 1;
        }
        self.last_seq = Some(probe.seq);
        self.min_seq = Some(self.min_seq.map_or(probe.seq, |m| m.min(probe.seq)));
        self.max_seq = Some(self.max_seq.map_or(probe.seq, |m| m.max(probe.seq)));
        self.first_rx_mono_ns.get_or_insert(app_mono_ns);
        self.last_rx_mono_ns = Some(app_mono_ns);
        if let Some(k) = kernel_real_ns {
            self.latency_kernel.record(i128::from(k) - i128::from(probe.tx_real_ns));
        }
        self.latency_app.record(i128::from(app_mono_ns) - i128::from(probe.tx_mono_ns));
    }

    /// `(max_seq - min_seq + 1) - received`, at least 0 (duplicates can hide losses).
    pub fn lost_estimate(&self) -> u64 {
        match (self.min_seq, self.max_seq) {
            (Some(lo), Some(hi)) => (hi - lo + 1).saturating_sub(self.received),
            _ => 0,
        }
    }

    /// The JSON object printed at the end of a run.
    pub fn to_json(&self) -> Value {
        json!({
            "received": self.received,
            "bytes": self.bytes,
            "foreign": self.foreign,
            "min_seq": self.min_seq,
            "max_seq": self.max_seq,
            "reordered": self.reordered,
            "lost_estimate": self.lost_estimate(),
            "first_rx_mono_ns": self.first_rx_mono_ns,
            "last_rx_mono_ns": self.last_rx_mono_ns,
            "latency_kernel_ns": self.latency_kernel.to_json(),
            "latency_app_ns": self.latency_app.to_json(),
            "interrupted": self.interrupted,
        })
    }
}

/// Opens the receive socket on `iface`, bound for IPv4, with timestamps and a timeout.
fn open_socket(iface: &str) -> Result<OwnedFd, SysError> {
    let fd = sys::packet_socket().map_err(failed("socket(AF_PACKET)"))?;
    let ifindex = sys::if_index(iface).map_err(failed(format!("if_nametoindex(\"{iface}\")")))?;
    if sys::set_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF_BYTES).is_err() {
        sys::set_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF_BYTES)
            .map_err(failed("setsockopt(SO_RCVBUF)"))?;
    }
    sys::set_sockopt_int(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
        .map_err(failed("setsockopt(SO_TIMESTAMPNS)"))?;
    sys::set_recv_timeout_ns(&fd, RECV_TIMEOUT_NS).map_err(failed("setsockopt(SO_RCVTIMEO)"))?;
    sys::bind_packet(&fd, ifindex, libc::ETH_P_IP as u16).map_err(failed(format!("bind(AF_PACKET, \"{iface}\")")))?;
    Ok(fd)
}

/// Whether a receive loop ends now: `Some(true)` on a stop signal, `Some(false)` at its
/// deadline or after `idle_ns` of silence since its last frame; `None` to go on.
pub fn loop_ends(deadline_mono_ns: u64, last_rx_mono_ns: Option<u64>, idle_ns: u64) -> Option<bool> {
    if sys::stop_requested() {
        return Some(true);
    }
    let now = sys::mono_ns();
    (now >= deadline_mono_ns || last_rx_mono_ns.is_some_and(|last| now.saturating_sub(last) >= idle_ns))
        .then_some(false)
}

/// Runs the sink until `--duration-ms`, `--idle-ms` of silence after the first probe,
/// or a stop signal.
pub fn run(args: &SinkArgs) -> Result<SinkStats, SysError> {
    if let Some(cpu) = args.cpu {
        sys::pin_to_cpu(cpu).map_err(failed(format!("sched_setaffinity(cpu {cpu})")))?;
    }
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    let mut stats = SinkStats::new().map_err(|e| SysError { call: "hdrhistogram".into(), err: io::Error::other(e) })?;
    let fd = open_socket(&args.iface)?;
    let mut rx = RxBatch::new(args.batch);

    if let Some(path) = &args.ready_file {
        File::create(path).map_err(failed(format!("create ready file {}", path.display())))?;
    }

    let start_mono_ns = sys::mono_ns();
    let deadline_mono_ns = start_mono_ns.saturating_add(args.duration_ns);
    loop {
        if let Some(interrupted) = loop_ends(deadline_mono_ns, stats.last_rx_mono_ns, args.idle_ns) {
            stats.interrupted = interrupted;
            break;
        }
        let n = match rx.recv(&fd) {
            Ok(n) => n,
            Err(e) if sys::is_errno(&e, &[libc::EAGAIN, libc::EINTR]) => continue,
            Err(e) => return Err(failed("recvmmsg")(e)),
        };
        let app_mono_ns = sys::mono_ns();
        for j in 0..n {
            let p = rx.packet(j);
            if p.pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            match frame::classify(p.data, args.run_id) {
                Classified::Other => {}
                Classified::Foreign => stats.foreign += 1,
                Classified::Probe(probe) => stats.record_probe(&probe, p.len, p.kernel_real_ns, app_mono_ns),
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(seq: u64) -> Probe {
        Probe { run_id: 0, seq, tx_mono_ns: 1_000, tx_real_ns: 10_000 }
    }

    #[test]
    fn counters_and_losses() {
        let mut s = SinkStats::new().unwrap();
        for seq in [5, 6, 8, 7, 9, 9, 12] {
            s.record_probe(&probe(seq), 74, Some(12_000), 4_000);
        }
        assert_eq!(s.received, 7);
        assert_eq!(s.bytes, 7 * 74);
        assert_eq!((s.min_seq, s.max_seq), (Some(5), Some(12)));
        assert_eq!(s.reordered, 2, "7 after 8, and the duplicate 9");
        assert_eq!(s.lost_estimate(), 1, "8 seqs in 5..=12, 7 received (10, 11 lost, one duplicate)");
        let j = s.to_json();
        assert_eq!(j["latency_kernel_ns"]["p50"], 2_000);
        assert_eq!(j["latency_app_ns"]["min"], 3_000);
        assert_eq!(j["latency_app_ns"]["mean"], 3_000.0);
    }

    #[test]
    fn empty_run_has_null_fields() {
        let s = SinkStats::new().unwrap();
        let j = s.to_json();
        assert_eq!(j["received"], 0);
        assert_eq!(j["lost_estimate"], 0);
        assert!(j["min_seq"].is_null());
        assert!(j["first_rx_mono_ns"].is_null());
        assert_eq!(j["latency_kernel_ns"]["count"], 0);
        assert!(j["latency_kernel_ns"]["p99"].is_null());
        assert!(j["latency_app_ns"]["mean"].is_null());
    }

    #[test]
    fn percentiles_span_a_wide_range() {
        let mut l = LatencyStats::new().unwrap();
        for v in 1..=100_000u64 {
            l.record(i128::from(v) * 100); // 100 ns .. 10 ms
        }
        let j = l.to_json();
        let near = |key: &str, want: f64| {
            let got = j[key].as_f64().unwrap();
            assert!((got - want).abs() <= want * 0.001, "{key}: {got} vs {want}");
        };
        near("p50", 5_000_000.0);
        near("p90", 9_000_000.0);
        near("p99", 9_900_000.0);
        near("p999", 9_990_000.0);
        assert_eq!(j["min"], 100);
        assert_eq!(j["max"], 10_000_000);
    }

    #[test]
    fn negative_latency_is_clamped() {
        let mut l = LatencyStats::new().unwrap();
        l.record(-5);
        l.record(1_000_000);
        let j = l.to_json();
        assert_eq!(j["min"], 0);
        assert_eq!(j["max"], 1_000_000);
        assert_eq!(j["count"], 2);
    }
}
