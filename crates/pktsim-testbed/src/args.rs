//! Command-line parsing for `pktsim-tb`: subcommands and their `--key value` flags.
//!
//! Every flag takes exactly one value, written `--key value` or `--key=value`. A bad
//! value is reported with the flag, what was expected and what was given, e.g.
//! `--rate: expected a packet rate in packets per second ..., got "abc"`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use crate::frame::{MAX_FRAME_LEN, MIN_FRAME_LEN};

/// Most packets one `gen` run may send.
pub const MAX_COUNT: u64 = 100_000_000;
/// Longest run (gen and sink), in milliseconds.
pub const MAX_DURATION_MS: u64 = 600_000;
/// Longest `xdp` hold, in milliseconds (a day: it ends with its run long before).
pub const MAX_HOLD_MS: u64 = 86_400_000;
/// Largest `gen --batch`.
pub const MAX_GEN_BATCH: usize = 256;
/// Largest `sink --batch`.
pub const MAX_SINK_BATCH: usize = 1024;
/// Highest accepted `--rate`, in packets per second.
pub const MAX_RATE_PPS: f64 = 1e9;
/// Highest CPU number `--cpu` accepts (the size of the kernel's CPU set, minus one).
pub const MAX_CPU: usize = 1023;
/// Most process ids `softirq --tasks` takes.
pub const MAX_TASKS: usize = 4;

/// Top-level usage text.
pub const USAGE: &str = "\
pktsim-tb: traffic generator and sink for pktsim's real-kernel testbed (Linux, root)

usage:
  pktsim-tb gen  --iface NAME --dst-mac MAC --src-ip IP --dst-ip IP --rate PPS|max
                 --count N --duration-ms MS [options]      send UDP probe frames
  pktsim-tb sink --iface NAME --duration-ms MS [options]   receive them, report latency
  pktsim-tb xdp  --iface NAME --prog pass|redirect [--to NAME] --duration-ms MS
                                                          hold an XDP program on NAME
  pktsim-tb xskfwd --in NAME --out NAME --batch N --mode busy|sleep --duration-ms MS
                                                          forward between two AF_XDP sockets
  pktsim-tb probe --cpu N --duration-ms MS [options]     gaps an idle spinning thread sees
  pktsim-tb wake --cpu N --from-cpu M [options]           what waking a thread on N costs
  pktsim-tb udprecv --port P --duration-ms MS [options]   receive probes on a UDP socket
  pktsim-tb softirq --cpu N --duration-ms MS [options]   NET_RX softirq and IPI time on N
  pktsim-tb version                                       print the version
  pktsim-tb spin --cpu N --duration-ms MS                 time what else takes a CPU
  pktsim-tb [gen|sink|xdp|xskfwd|probe|wake|udprecv|softirq|spin] --help
                                                          print usage

Each subcommand prints one JSON object on stdout when it stops.
Exit status: 0 done, 1 system call failed, 2 usage error.

environment:
  PKTSIM_TB_PARENT=PID   gen and sink die (SIGKILL) when their parent, process PID, dies,
                         and refuse to start when their parent is not PID (pktsim
                         testbed sets it, so a killed run leaves no generator or sink)
";

/// Usage text of `pktsim-tb gen`.
pub const GEN_USAGE: &str = "\
usage: pktsim-tb gen --iface NAME --dst-mac MAC --src-ip IP --dst-ip IP
                     --rate PPS|max --count N --duration-ms MS [options]

Sends UDP probe frames (IPv4, port 9000 -> 9001) out of an interface through an
AF_PACKET socket, open loop: packet i is due at t0 + i/rate. A packet the kernel refuses
(ENOBUFS/EAGAIN, e.g. a full veth ring) is counted as refused and not retried.

required:
  --iface NAME         interface to send on
  --dst-mac MAC        destination MAC address, aa:bb:cc:dd:ee:ff
  --src-ip A.B.C.D     IPv4 source address
  --dst-ip A.B.C.D     first IPv4 destination address
  --rate PPS|max       packets per second (a number > 0), or max: back-to-back batches
  --count N            packets to send, at most 100000000
  --duration-ms MS     hard stop after MS milliseconds, at most 600000

options:
  --dst-count N        destinations dst-ip .. dst-ip+N-1, packet i to dst-ip+(i mod N) [1]
  --size BYTES         Ethernet frame size without FCS, 74..=1514 [74]
                       (74 is the smallest frame that holds the 32-byte probe)
  --batch N            most packets per sendmmsg call, 1..=256 [32]
  --cpu N              pin to CPU N
  --run-id N           run id written into every probe (u32) [0]

Stops at --count, at --duration-ms, or on SIGINT/SIGTERM, then prints one JSON object:
sent, refused, offered, elapsed_ns, t0_mono_ns, t_end_mono_ns, offered_pps, sent_pps,
max_late_ns, interrupted, batches, batch_sizes, and stalls: the times the pacing loop was
away from the clock 2 us or more (a send call, its CPU taken), as two kinds (from 2 us and
from 100 us), each {min_ns, count, length_ns (200 quantiles)}.
";

/// Usage text of `pktsim-tb sink`.
pub const SINK_USAGE: &str = "\
usage: pktsim-tb sink --iface NAME --duration-ms MS [options]

Receives the probe frames of `pktsim-tb gen` on an interface through an AF_PACKET
socket and measures their latency: kernel (receive timestamp - tx_real_ns) and
application (CLOCK_MONOTONIC after recvmmsg - tx_mono_ns).

required:
  --iface NAME         interface to receive on
  --duration-ms MS     hard stop after MS milliseconds, at most 600000

options:
  --idle-ms MS         after the first probe, stop when none arrived for MS ms [500]
  --run-id N           count only probes of this run id; others are 'foreign' [0]
  --batch N            frames per recvmmsg call, 1..=1024 [64]
  --cpu N              pin to CPU N
  --ready-file PATH    create PATH once the socket is bound and receiving

Stops at --duration-ms, after --idle-ms of silence, or on SIGINT/SIGTERM, then prints
one JSON object: received, bytes, foreign, min_seq, max_seq, reordered, lost_estimate,
first_rx_mono_ns, last_rx_mono_ns, latency_kernel_ns, latency_app_ns, interrupted.
";

/// Usage text of `pktsim-tb xdp`.
pub const XDP_USAGE: &str = "\
usage: pktsim-tb xdp --iface NAME --prog pass|redirect [--to NAME] --duration-ms MS [options]

Loads an XDP program (assembled in pktsim-tb, loaded with bpf(2)) and attaches it to an
interface in native mode through a BPF link, which this process holds: the program
leaves the interface when pktsim-tb exits, however it exits.

required:
  --iface NAME         interface to attach to
  --prog pass|redirect pass: return XDP_PASS; redirect: XDP_REDIRECT every frame to
                       --to through a devmap
  --duration-ms MS     detach and exit after MS milliseconds, at most 86400000

options:
  --to NAME            the egress interface of --prog redirect (same namespace)
  --loops N            --prog redirect first turns an empty loop N times, 0..=100000 [0]
                       (a dial for the program's cost per frame)
  --ready-file PATH    create PATH once the program is attached

Stops at --duration-ms or on SIGINT/SIGTERM, then prints one JSON object: iface, prog,
ifindex, to_ifindex, attached_ns, interrupted.
";

/// Usage text of `pktsim-tb xskfwd`.
pub const XSKFWD_USAGE: &str = "\
usage: pktsim-tb xskfwd --in NAME --out NAME --batch N --mode busy|sleep --duration-ms MS [options]

Forwards frames from queue 0 of --in to queue 0 of --out through two AF_XDP sockets in
copy mode: an XDP program on --in redirects every frame to the first socket (XSKMAP);
the forwarder takes up to --batch frames from its rx ring, copies them into the second
socket's umem and transmits them with sendto. The program leaves --in when the
forwarder exits, however it exits.

required:
  --in NAME            ingress interface
  --out NAME           egress interface (same namespace)
  --batch N            most frames per batch, 1..=256 (with busy, also the NAPI budget)
  --mode busy|sleep    busy: poll the rx ring without sleeping and run the ingress NAPI
                       with recvfrom (SO_PREFER_BUSY_POLL); sleep: block in poll(2)
  --duration-ms MS     stop after MS milliseconds, at most 600000

options:
  --busy-poll-us N     SO_BUSY_POLL of the busy mode, 1..=1000 [20]
  --loops N            the XDP program first turns an empty loop N times, 0..=100000 [0]
  --cpu N              pin to CPU N
  --ready-file PATH    create PATH once the sockets are bound and the program attached

Stops at --duration-ms or on SIGINT/SIGTERM, then prints one JSON object: forwarded,
batches, frames_per_batch, batch_sizes_log2, empty_polls, rx_calls, tx_calls, waits,
elapsed_ns, xsk_rx_dropped, xsk_rx_ring_full, xsk_fill_ring_empty, no_tx_frame,
interrupted.
";

/// Usage text of `pktsim-tb probe`.
pub const PROBE_USAGE: &str = "\
usage: pktsim-tb probe --cpu N --duration-ms MS [options]

Measures the interference a thread on CPU N suffers: pinned there (at SCHED_FIFO
--priority, if given), it reads CLOCK_MONOTONIC in a tight loop for --spin-ms, then
sleeps --rest-ms (a real-time thread stays below the kernel's real-time throttling), until
--duration-ms. Two reads more than --threshold-ns apart are a gap: the CPU was elsewhere.

required:
  --cpu N              the CPU to probe
  --duration-ms MS     stop after MS milliseconds, at most 600000

options:
  --priority P         run at SCHED_FIFO priority P, 1..=99 (the NAPI thread's: 50)
  --threshold-ns T     the shortest gap, 100..=1000000 ns [1000]
  --spin-ms MS         spinning phase, 1..=1000 [10]
  --rest-ms MS         sleeping phase between spins, 0..=1000 [1]

Prints one JSON object: spin_ns (time observed), reads, gaps, stolen_ns, gap_ns
{p50, p90, p99, max}, listed ([start_ns, length_ns] of each gap, the first 200000),
unlisted, elapsed_ns, interrupted.
";

/// Usage text of `pktsim-tb wake`.
pub const WAKE_USAGE: &str = "\
usage: pktsim-tb wake --cpu N --from-cpu M [options]

Measures what waking a sleeping thread on CPU N costs. A sleeper pinned to N (SCHED_FIFO
--priority, if given) blocks on a futex; a waker on CPU M waits a gap after it blocked,
then wakes it. The sleeper notes when it runs (wake latency), then walks a working set of
--work-kib twice: the first walk minus the second is the refill (cold caches). One pass
lets CPU N idle between wake-ups (halting), one keeps it busy with a SCHED_IDLE spinner
(awake); the difference is what leaving the idle state costs. Also: a null system call
(getppid) and half a futex round trip between two threads on N (one wake-up and switch).

required:
  --cpu N              the sleeper's CPU
  --from-cpu M         the waker's CPU (not N)

options:
  --priority P         the sleeper at SCHED_FIFO priority P, 1..=99 (the NAPI thread's: 50)
  --gaps-us LIST       idle gaps before each wake-up, comma-separated, 1..=100000 us each,
                       at most 32 [10,20,50,100,200,500,1000,2000]
  --count K            wake-ups per gap and pass, 1..=100000 [200]
  --work-kib W         the working set walked after each wake-up, 1..=65536 KiB [64]

Prints one JSON object: syscall_ns, switch_ns, warm_work_ns, halting and awake (one row
per gap: gap_ns, n, wake_latency_ns, work_ns and refill_ns {p10, p50, p90}), interrupted.
";

/// Usage text of `pktsim-tb udprecv`.
pub const UDPRECV_USAGE: &str = "\
usage: pktsim-tb udprecv --port P --duration-ms MS [options]

The application of a shared-core experiment: receives the probes of `pktsim-tb gen` on a
UDP socket (AF_INET, bound to 0.0.0.0:P) in batches (recvmmsg) and measures their
application latency (CLOCK_MONOTONIC after recvmmsg - tx_mono_ns). After each datagram
it does a fixed amount of CPU work, --work-loops turns of an empty loop: the
application's cost per datagram, in CPU time (an interruption does not shorten it).

required:
  --port P             UDP port to receive on, 1..=65535 (gen sends to 9001)
  --duration-ms MS     hard stop MS milliseconds after the socket is bound, at most 600000
                       (a --hold-ms counts in it)

options:
  --idle-ms MS         after the first probe, stop when none arrived for MS ms [500]
  --run-id N           count only probes of this run id; others are 'foreign' [0]
  --batch N            datagrams per recvmmsg call, 1..=1024 [64]
  --cpu N              pin to CPU N
  --rcvbuf BYTES       receive buffer, 1..=1073741824 (SO_RCVBUFFORCE, else SO_RCVBUF,
                       which rmem_max caps; the kernel doubles it) [the kernel's default]
  --work-loops N       after each datagram, N turns of an empty loop, 0..=10000000 [0]
  --hold-ms H          once bound, read nothing for H ms, 0..=10000 [0]; then note the
                       receive queue's memory (SO_MEMINFO) and drain the queue (those
                       datagrams are counted in held, not as received; traffic that goes
                       on during the drain is drained too: frames_sent_before counts the
                       probes sent before the memory was noted)
  --poll-us US         do not block in recvmmsg: sleep on a timer of US microseconds,
                       1..=100000, then drain the socket without waiting until it is
                       empty (no wake-up by the stack, on this CPU or another) [0: block]
  --ready-file PATH    create PATH once the socket is bound

Stops at --duration-ms, after --idle-ms of silence, or on SIGINT/SIGTERM, then prints
one JSON object: received, foreign, calls (recvmmsg calls that returned datagrams),
empty_calls and sleeps (--poll-us: the calls that found the socket empty, the timer's
wake-ups), first_rx_mono_ns, last_rx_mono_ns, latency_app_ns, rcvbuf_bytes (effective SO_RCVBUF),
ns_per_work_loop (measured at startup; null without --work-loops), work_loops, held
({rmem_alloc_bytes, frames, frames_sent_before, rcvbuf_bytes} after --hold-ms, else
null), interrupted.
";

/// Usage text of `pktsim-tb softirq`.
pub const SOFTIRQ_USAGE: &str = "\
usage: pktsim-tb softirq --cpu N --duration-ms MS [options]

Measures the time CPU N spends in NET_RX softirqs and in call-function-single IPIs (the
interrupt through which RPS hands frames to a remote CPU), exactly: eBPF programs
(assembled in pktsim-tb, loaded with bpf(2)) on the tracepoints irq:softirq_entry/exit
and irq_vectors:call_function_single_entry/exit read the clock at entry and add the span
at exit. NET_RX time is split by the task the softirq ran on: the idle task (an
interrupt on an idle CPU), ksoftirqd (--ksoftirqd-pid), each of --tasks, or any other
task (an interrupt on a busy CPU, or a task re-enabling bottom halves). A program on
sched:sched_switch times what each of these ran on CPU N, from the switch to it to the
switch away from it (interrupts and softirqs included), without /proc's accounting.

required:
  --cpu N              the CPU to measure
  --duration-ms MS     stop after MS milliseconds, at most 600000

options:
  --ksoftirqd-pid PID  the process id of ksoftirqd/N, 1..=4194304 (without it, no time is
                       ksoftirqd's: it counts as a task's)
  --tasks PID[,PID...] 1 to 4 distinct process ids (thread ids), each 1..=4194304 and not
                       --ksoftirqd-pid's, timed each on its own (else as other tasks)
  --ready-file PATH    create PATH once the programs are attached and counting

Stops at --duration-ms or on SIGINT/SIGTERM, then prints one JSON object: cpu,
ksoftirqd_pid, window_ns, net_rx {idle, ksoftirqd, task (every task but the idle task
and ksoftirqd), other (each {ns, count}), tasks [{pid, ns, count} per --tasks pid], ns,
count}, ipi {ns, count} (null where the kernel has no call_function_single
tracepoints), oncpu {idle, ksoftirqd (null without --ksoftirqd-pid), other (each {ns,
switches}), tasks [{pid, ns, switches} per --tasks pid]} (null where the kernel has no
sched_switch tracepoint; switches: times switched out; the task running when the
programs were attached and the one running at the end are not counted for those
spans), interrupted.
";

/// A usage error: what was wrong with the command line. Exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The subcommand whose flags were wrong, if any.
    pub subcommand: Option<&'static str>,
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What to do, as parsed from the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Print this usage text on stdout and exit 0.
    Help(&'static str),
    /// Print the version and exit 0.
    Version,
    Gen(GenArgs),
    Sink(SinkArgs),
    Xdp(XdpArgs),
    XskFwd(XskFwdArgs),
    Probe(ProbeArgs),
    Wake(WakeArgs),
    UdpRecv(UdpRecvArgs),
    Spin(SpinArgs),
    Softirq(SoftirqArgs),
}

/// Settings of `pktsim-tb spin`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpinArgs {
    pub cpu: usize,
    pub duration_ns: u64,
    pub ready_file: Option<PathBuf>,
}

/// Usage text of `pktsim-tb spin`.
pub const SPIN_USAGE: &str = "\
usage: pktsim-tb spin --cpu N --duration-ms MS [--ready-file PATH]

Times what everything else takes from CPU N by what is left: a SCHED_IDLE thread pinned
to it turns an empty loop whenever nothing else wants the CPU (it never lets the CPU
halt), and the time it did not get is the rest's, interrupts and softirqs with their
entry and exit included. One turn is timed at startup (the fastest of a few runs).

required:
  --cpu N              the CPU, 0..=1023
  --duration-ms MS     stop after MS milliseconds, at most 600000

options:
  --ready-file PATH    create PATH once it spins

Stops at --duration-ms or on SIGINT/SIGTERM, then prints one JSON object: cpu, window_ns,
turns, ns_per_turn, work_ns (turns x ns_per_turn), taken_ns (window_ns - work_ns),
interrupted.
";

/// Settings of `pktsim-tb udprecv`.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpRecvArgs {
    pub port: u16,
    pub duration_ns: u64,
    pub idle_ns: u64,
    pub cpu: Option<usize>,
    pub batch: usize,
    pub run_id: u32,
    pub ready_file: Option<PathBuf>,
    /// Requested SO_RCVBUF; None leaves the kernel's default.
    pub rcvbuf: Option<u32>,
    pub work_loops: u32,
    /// Time to read nothing once bound; 0 for none.
    pub hold_ns: u64,
    /// Sleep on a timer of this period and drain without waiting; 0: block in recvmmsg.
    pub poll_ns: u64,
}

/// Settings of `pktsim-tb softirq`.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftirqArgs {
    pub cpu: usize,
    pub duration_ns: u64,
    pub ksoftirqd_pid: Option<u32>,
    /// Tasks timed each on its own: 0 to [`MAX_TASKS`] distinct pids, not ksoftirqd's.
    pub tasks: Vec<u32>,
    pub ready_file: Option<PathBuf>,
}

/// Settings of `pktsim-tb wake`.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeArgs {
    pub cpu: usize,
    pub from_cpu: usize,
    pub priority: Option<u32>,
    pub gaps_ns: Vec<u64>,
    pub count: usize,
    pub work_kib: usize,
}

/// Settings of `pktsim-tb probe`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeArgs {
    pub cpu: Option<usize>,
    pub duration_ns: u64,
    pub priority: Option<u32>,
    pub threshold_ns: u64,
    pub spin_ns: u64,
    pub rest_ns: u64,
}

/// How `pktsim-tb xskfwd` waits for frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XskMode {
    Busy,
    Sleep,
}

/// Settings of `pktsim-tb xskfwd`.
#[derive(Debug, Clone, PartialEq)]
pub struct XskFwdArgs {
    pub iface_in: String,
    pub iface_out: String,
    pub batch: usize,
    pub mode: XskMode,
    pub duration_ns: u64,
    pub busy_poll_us: u32,
    pub loops: u32,
    pub cpu: Option<usize>,
    pub ready_file: Option<PathBuf>,
}

/// The program `pktsim-tb xdp` attaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XdpProg {
    Pass,
    Redirect { to: String, loops: u32 },
}

/// Settings of `pktsim-tb xdp`.
#[derive(Debug, Clone, PartialEq)]
pub struct XdpArgs {
    pub iface: String,
    pub prog: XdpProg,
    pub duration_ns: u64,
    pub ready_file: Option<PathBuf>,
}

/// Send rate of `gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// As fast as possible: full batches back to back.
    Max,
    /// A fixed rate, in millionths of a packet per second (so due times are integers).
    Fixed { rate_micro_pps: u64 },
}

/// Settings of `pktsim-tb gen`.
#[derive(Debug, Clone, PartialEq)]
pub struct GenArgs {
    pub iface: String,
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub dst_count: u32,
    pub rate: Rate,
    pub count: u64,
    pub duration_ns: u64,
    pub frame_len: usize,
    pub batch: usize,
    pub cpu: Option<usize>,
    pub run_id: u32,
}

/// Settings of `pktsim-tb sink`.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkArgs {
    pub iface: String,
    pub duration_ns: u64,
    pub idle_ns: u64,
    pub cpu: Option<usize>,
    pub run_id: u32,
    pub batch: usize,
    pub ready_file: Option<PathBuf>,
}

/// The environment variable naming the process gen and sink die with.
pub const PARENT_ENV: &str = "PKTSIM_TB_PARENT";

/// The parent PID from `$PKTSIM_TB_PARENT` (None when unset or empty).
pub fn parent_pid(value: Option<&std::ffi::OsStr>) -> Result<Option<u32>, UsageError> {
    let Some(v) = value else { return Ok(None) };
    if v.is_empty() {
        return Ok(None);
    }
    v.to_str().and_then(parse_int::<u32>).filter(|&p| p > 1).map(Some).ok_or_else(|| UsageError {
        subcommand: None,
        message: format!("{PARENT_ENV}={}: expected a process id above 1", v.to_string_lossy()),
    })
}

/// Parses the arguments after the program name.
pub fn parse(argv: &[String]) -> Result<Command, UsageError> {
    let Some(first) = argv.first() else {
        return Err(UsageError {
            subcommand: None,
            message: "missing subcommand (gen, sink, xdp, xskfwd, probe, wake, udprecv, softirq, spin, version)".into(),
        });
    };
    let rest = &argv[1..];
    match first.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help(USAGE)),
        "-V" | "--version" | "version" => {
            if let Some(extra) = rest.first() {
                return Err(UsageError {
                    subcommand: Some("version"),
                    message: format!("unexpected argument \"{extra}\""),
                });
            }
            Ok(Command::Version)
        }
        "gen" => parse_gen(rest),
        "sink" => parse_sink(rest),
        "xdp" => parse_xdp(rest),
        "xskfwd" => parse_xskfwd(rest),
        "probe" => parse_probe(rest),
        "wake" => parse_wake(rest),
        "udprecv" => parse_udprecv(rest),
        "spin" => parse_spin(rest),
        "softirq" => parse_softirq(rest),
        other => Err(UsageError {
            subcommand: None,
            message: format!(
                "unknown subcommand \"{other}\" (expected gen, sink, xdp, xskfwd, probe, wake, udprecv, softirq, spin or version)"
            ),
        }),
    }
}

// Flag tables: the flag and what its value must be (used in every error message).

const IFACE: (&str, &str) = ("--iface", "an interface name of 1 to 15 characters");
const DURATION_MS: (&str, &str) = ("--duration-ms", "a duration in milliseconds from 1 to 600000");
const CPU: (&str, &str) = ("--cpu", "a CPU number from 0 to 1023");
const RUN_ID: (&str, &str) = ("--run-id", "a run id from 0 to 4294967295");

const DST_MAC: (&str, &str) = ("--dst-mac", "a MAC address like aa:bb:cc:dd:ee:ff");
const SRC_IP: (&str, &str) = ("--src-ip", "an IPv4 address like 198.18.0.1");
const DST_IP: (&str, &str) = ("--dst-ip", "an IPv4 address like 198.18.0.2");
const DST_COUNT: (&str, &str) = ("--dst-count", "a number of destination addresses, 1 or more");
const RATE: (&str, &str) = ("--rate", "a packet rate in packets per second (a number > 0, at most 1e9) or \"max\"");
const COUNT: (&str, &str) = ("--count", "a packet count from 1 to 100000000");
const SIZE: (&str, &str) =
    ("--size", "a frame size in bytes from 74 to 1514 (without FCS; 74 is the smallest frame that holds the probe)");
const GEN_BATCH: (&str, &str) = ("--batch", "a batch size from 1 to 256");

const IDLE_MS: (&str, &str) = ("--idle-ms", "an idle time in milliseconds from 1 to 600000");
const SINK_BATCH: (&str, &str) = ("--batch", "a batch size from 1 to 1024");
const READY_FILE: (&str, &str) = ("--ready-file", "a file path");

const GEN_FLAGS: &[(&str, &str)] =
    &[IFACE, DST_MAC, SRC_IP, DST_IP, DST_COUNT, RATE, COUNT, DURATION_MS, SIZE, GEN_BATCH, CPU, RUN_ID];
const SINK_FLAGS: &[(&str, &str)] = &[IFACE, DURATION_MS, IDLE_MS, CPU, RUN_ID, SINK_BATCH, READY_FILE];

fn parse_gen(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("gen", GEN_FLAGS, argv)? else {
        return Ok(Command::Help(GEN_USAGE));
    };
    // Checked in the order of the usage text, so the first problem is reported first.
    let iface = flags.required(IFACE, parse_iface)?;
    let dst_mac = flags.required(DST_MAC, parse_mac)?;
    let src_ip = flags.required(SRC_IP, parse_ipv4)?;
    let dst_ip = flags.required(DST_IP, parse_ipv4)?;
    let dst_count = flags.optional(DST_COUNT, |s| parse_int::<u32>(s).filter(|&n| n >= 1))?.unwrap_or(1);
    if u64::from(u32::from(dst_ip)) + u64::from(dst_count) - 1 > u64::from(u32::MAX) {
        return Err(
            flags.error(format!("--dst-count: {dst_count} addresses starting at {dst_ip} run past 255.255.255.255"))
        );
    }
    let rate = flags.required(RATE, parse_rate)?;
    let count = flags.required(COUNT, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_COUNT).contains(n)))?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    let frame_len = flags
        .optional(SIZE, |s| parse_int::<usize>(s).filter(|n| (MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(n)))?
        .unwrap_or(MIN_FRAME_LEN);
    let batch =
        flags.optional(GEN_BATCH, |s| parse_int::<usize>(s).filter(|n| (1..=MAX_GEN_BATCH).contains(n)))?.unwrap_or(32);
    Ok(Command::Gen(GenArgs {
        iface,
        dst_mac,
        src_ip,
        dst_ip,
        dst_count,
        rate,
        count,
        duration_ns: duration_ms * 1_000_000,
        frame_len,
        batch,
        cpu: flags.optional(CPU, parse_cpu)?,
        run_id: flags.optional(RUN_ID, parse_int::<u32>)?.unwrap_or(0),
    }))
}

const PROG: (&str, &str) = ("--prog", "pass or redirect");
const TO: (&str, &str) = ("--to", "an interface name of 1 to 15 characters");
const HOLD_MS: (&str, &str) = ("--duration-ms", "a duration in milliseconds from 1 to 86400000");
const LOOPS: (&str, &str) = ("--loops", "a number of loop turns from 0 to 100000");
const XDP_FLAGS: &[(&str, &str)] = &[IFACE, PROG, TO, LOOPS, HOLD_MS, READY_FILE];

fn parse_xdp(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("xdp", XDP_FLAGS, argv)? else {
        return Ok(Command::Help(XDP_USAGE));
    };
    let iface = flags.required(IFACE, parse_iface)?;
    let kind = flags.required(PROG, |s| matches!(s, "pass" | "redirect").then(|| s.to_string()))?;
    let to = flags.optional(TO, parse_iface)?;
    let loops = flags.optional(LOOPS, |s| parse_int::<u32>(s).filter(|&n| n <= 100_000))?;
    if loops.is_some() && kind != "redirect" {
        return Err(flags.error("--loops: only --prog redirect has a cost loop".into()));
    }
    let prog = match (kind.as_str(), to) {
        ("redirect", Some(to)) => XdpProg::Redirect { to, loops: loops.unwrap_or(0) },
        ("redirect", None) => return Err(flags.error("--prog redirect: missing --to (the egress interface)".into())),
        (_, Some(_)) => return Err(flags.error("--to: only --prog redirect has an egress interface".into())),
        _ => XdpProg::Pass,
    };
    let duration_ms = flags.required(HOLD_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_HOLD_MS).contains(n)))?;
    Ok(Command::Xdp(XdpArgs {
        iface,
        prog,
        duration_ns: duration_ms * 1_000_000,
        ready_file: flags.optional(READY_FILE, |s| (!s.is_empty()).then(|| PathBuf::from(s)))?,
    }))
}

const IN: (&str, &str) = ("--in", "an interface name of 1 to 15 characters");
const OUT: (&str, &str) = ("--out", "an interface name of 1 to 15 characters");
const XSK_BATCH: (&str, &str) = ("--batch", "a batch size from 1 to 256");
const MODE: (&str, &str) = ("--mode", "busy or sleep");
const BUSY_POLL_US: (&str, &str) = ("--busy-poll-us", "a busy-poll time in microseconds from 1 to 1000");
const XSKFWD_FLAGS: &[(&str, &str)] = &[IN, OUT, XSK_BATCH, MODE, DURATION_MS, BUSY_POLL_US, LOOPS, CPU, READY_FILE];

fn parse_xskfwd(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("xskfwd", XSKFWD_FLAGS, argv)? else {
        return Ok(Command::Help(XSKFWD_USAGE));
    };
    let iface_in = flags.required(IN, parse_iface)?;
    let iface_out = flags.required(OUT, parse_iface)?;
    if iface_in == iface_out {
        return Err(flags.error(format!("--out {iface_out}: expected another interface than --in")));
    }
    let batch = flags.required(XSK_BATCH, |s| parse_int::<usize>(s).filter(|n| (1..=256).contains(n)))?;
    let mode = flags.required(MODE, |s| match s {
        "busy" => Some(XskMode::Busy),
        "sleep" => Some(XskMode::Sleep),
        _ => None,
    })?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    Ok(Command::XskFwd(XskFwdArgs {
        iface_in,
        iface_out,
        batch,
        mode,
        duration_ns: duration_ms * 1_000_000,
        busy_poll_us: flags
            .optional(BUSY_POLL_US, |s| parse_int::<u32>(s).filter(|n| (1..=1000).contains(n)))?
            .unwrap_or(20),
        loops: flags.optional(LOOPS, |s| parse_int::<u32>(s).filter(|&n| n <= 100_000))?.unwrap_or(0),
        cpu: flags.optional(CPU, parse_cpu)?,
        ready_file: flags.optional(READY_FILE, |s| (!s.is_empty()).then(|| PathBuf::from(s)))?,
    }))
}

const PRIORITY: (&str, &str) = ("--priority", "a SCHED_FIFO priority from 1 to 99");
const THRESHOLD_NS: (&str, &str) = ("--threshold-ns", "a gap threshold in nanoseconds from 100 to 1000000");
const SPIN_MS: (&str, &str) = ("--spin-ms", "a spinning phase in milliseconds from 1 to 1000");
const REST_MS: (&str, &str) = ("--rest-ms", "a sleeping phase in milliseconds from 0 to 1000");
const PROBE_FLAGS: &[(&str, &str)] = &[CPU, DURATION_MS, PRIORITY, THRESHOLD_NS, SPIN_MS, REST_MS];

fn parse_probe(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("probe", PROBE_FLAGS, argv)? else {
        return Ok(Command::Help(PROBE_USAGE));
    };
    let cpu = flags.required(CPU, parse_cpu)?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    Ok(Command::Probe(ProbeArgs {
        cpu: Some(cpu),
        duration_ns: duration_ms * 1_000_000,
        priority: flags.optional(PRIORITY, |s| parse_int::<u32>(s).filter(|n| (1..=99).contains(n)))?,
        threshold_ns: flags
            .optional(THRESHOLD_NS, |s| parse_int::<u64>(s).filter(|n| (100..=1_000_000).contains(n)))?
            .unwrap_or(1000),
        spin_ns: flags.optional(SPIN_MS, |s| parse_int::<u64>(s).filter(|n| (1..=1000).contains(n)))?.unwrap_or(10)
            * 1_000_000,
        rest_ns: flags.optional(REST_MS, |s| parse_int::<u64>(s).filter(|n| *n <= 1000))?.unwrap_or(1) * 1_000_000,
    }))
}

const FROM_CPU: (&str, &str) = ("--from-cpu", "a CPU number from 0 to 1023, not --cpu's");
const GAPS_US: (&str, &str) = ("--gaps-us", "1 to 32 comma-separated gaps in microseconds, each from 1 to 100000");
const WAKE_COUNT: (&str, &str) = ("--count", "a number of wake-ups per gap from 1 to 100000");
const WORK_KIB: (&str, &str) = ("--work-kib", "a working set in KiB from 1 to 65536");
const WAKE_FLAGS: &[(&str, &str)] = &[CPU, FROM_CPU, PRIORITY, GAPS_US, WAKE_COUNT, WORK_KIB];

fn parse_wake(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("wake", WAKE_FLAGS, argv)? else {
        return Ok(Command::Help(WAKE_USAGE));
    };
    let cpu = flags.required(CPU, parse_cpu)?;
    let from_cpu = flags.required(FROM_CPU, |s| parse_cpu(s).filter(|&c| c != cpu))?;
    let gaps_us = flags.optional(GAPS_US, |s| {
        let v: Option<Vec<u64>> =
            s.split(',').map(|g| parse_int::<u64>(g.trim()).filter(|n| (1..=100_000).contains(n))).collect();
        v.filter(|v| (1..=32).contains(&v.len()))
    })?;
    Ok(Command::Wake(WakeArgs {
        cpu,
        from_cpu,
        priority: flags.optional(PRIORITY, |s| parse_int::<u32>(s).filter(|n| (1..=99).contains(n)))?,
        gaps_ns: gaps_us
            .unwrap_or_else(|| vec![10, 20, 50, 100, 200, 500, 1000, 2000])
            .iter()
            .map(|g| g * 1000)
            .collect(),
        count: flags
            .optional(WAKE_COUNT, |s| parse_int::<usize>(s).filter(|n| (1..=100_000).contains(n)))?
            .unwrap_or(200),
        work_kib: flags
            .optional(WORK_KIB, |s| parse_int::<usize>(s).filter(|n| (1..=65_536).contains(n)))?
            .unwrap_or(64),
    }))
}

fn parse_sink(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("sink", SINK_FLAGS, argv)? else {
        return Ok(Command::Help(SINK_USAGE));
    };
    let iface = flags.required(IFACE, parse_iface)?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    let idle_ms =
        flags.optional(IDLE_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?.unwrap_or(500);
    Ok(Command::Sink(SinkArgs {
        iface,
        duration_ns: duration_ms * 1_000_000,
        idle_ns: idle_ms * 1_000_000,
        cpu: flags.optional(CPU, parse_cpu)?,
        run_id: flags.optional(RUN_ID, parse_int::<u32>)?.unwrap_or(0),
        batch: flags
            .optional(SINK_BATCH, |s| parse_int::<usize>(s).filter(|n| (1..=MAX_SINK_BATCH).contains(n)))?
            .unwrap_or(64),
        ready_file: flags.optional(READY_FILE, |s| (!s.is_empty()).then(|| PathBuf::from(s)))?,
    }))
}

const PORT: (&str, &str) = ("--port", "a UDP port from 1 to 65535");
const RCVBUF: (&str, &str) = ("--rcvbuf", "a receive buffer size in bytes from 1 to 1073741824");
const WORK_LOOPS: (&str, &str) = ("--work-loops", "a number of loop turns from 0 to 10000000");
const READ_HOLD_MS: (&str, &str) = ("--hold-ms", "a hold time in milliseconds from 0 to 10000");
const POLL_US: (&str, &str) = ("--poll-us", "a timer period in microseconds from 1 to 100000");
const UDPRECV_FLAGS: &[(&str, &str)] =
    &[PORT, DURATION_MS, IDLE_MS, CPU, SINK_BATCH, RUN_ID, READY_FILE, RCVBUF, WORK_LOOPS, READ_HOLD_MS, POLL_US];

/// Largest `udprecv --rcvbuf`, in bytes.
pub const MAX_RCVBUF: u32 = 1 << 30;
/// Most `udprecv --work-loops`.
pub const MAX_WORK_LOOPS: u32 = 10_000_000;
/// Longest `udprecv --hold-ms`.
pub const MAX_READ_HOLD_MS: u64 = 10_000;
/// Longest timer period of `udprecv --poll-us`.
pub const MAX_POLL_US: u64 = 100_000;

const SPIN_FLAGS: &[(&str, &str)] = &[CPU, DURATION_MS, READY_FILE];

fn parse_spin(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("spin", SPIN_FLAGS, argv)? else {
        return Ok(Command::Help(SPIN_USAGE));
    };
    let cpu = flags.required(CPU, parse_cpu)?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    Ok(Command::Spin(SpinArgs {
        cpu,
        duration_ns: duration_ms * 1_000_000,
        ready_file: flags.optional(READY_FILE, |s| (!s.is_empty()).then(|| PathBuf::from(s)))?,
    }))
}

fn parse_udprecv(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("udprecv", UDPRECV_FLAGS, argv)? else {
        return Ok(Command::Help(UDPRECV_USAGE));
    };
    let port = flags.required(PORT, |s| parse_int::<u16>(s).filter(|&p| p >= 1))?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    let idle_ms =
        flags.optional(IDLE_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?.unwrap_or(500);
    Ok(Command::UdpRecv(UdpRecvArgs {
        port,
        duration_ns: duration_ms * 1_000_000,
        idle_ns: idle_ms * 1_000_000,
        cpu: flags.optional(CPU, parse_cpu)?,
        batch: flags
            .optional(SINK_BATCH, |s| parse_int::<usize>(s).filter(|n| (1..=MAX_SINK_BATCH).contains(n)))?
            .unwrap_or(64),
        run_id: flags.optional(RUN_ID, parse_int::<u32>)?.unwrap_or(0),
        ready_file: flags.optional(READY_FILE, |s| (!s.is_empty()).then(|| PathBuf::from(s)))?,
        rcvbuf: flags.optional(RCVBUF, |s| parse_int::<u32>(s).filter(|n| (1..=MAX_RCVBUF).contains(n)))?,
        work_loops: flags.optional(WORK_LOOPS, |s| parse_int::<u32>(s).filter(|&n| n <= MAX_WORK_LOOPS))?.unwrap_or(0),
        hold_ns: flags.optional(READ_HOLD_MS, |s| parse_int::<u64>(s).filter(|&n| n <= MAX_READ_HOLD_MS))?.unwrap_or(0)
            * 1_000_000,
        poll_ns: flags
            .optional(POLL_US, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_POLL_US).contains(n)))?
            .unwrap_or(0)
            * 1000,
    }))
}

/// Highest process id Linux hands out (PID_MAX_LIMIT).
const MAX_PID: u32 = 4_194_304;

const KSOFTIRQD_PID: (&str, &str) = ("--ksoftirqd-pid", "a process id from 1 to 4194304");
const TASKS: (&str, &str) = ("--tasks", "1 to 4 distinct comma-separated process ids, each from 1 to 4194304");
const SOFTIRQ_FLAGS: &[(&str, &str)] = &[CPU, DURATION_MS, KSOFTIRQD_PID, TASKS, READY_FILE];

fn parse_softirq(argv: &[String]) -> Result<Command, UsageError> {
    let Some(flags) = Flags::collect("softirq", SOFTIRQ_FLAGS, argv)? else {
        return Ok(Command::Help(SOFTIRQ_USAGE));
    };
    let cpu = flags.required(CPU, parse_cpu)?;
    let duration_ms =
        flags.required(DURATION_MS, |s| parse_int::<u64>(s).filter(|n| (1..=MAX_DURATION_MS).contains(n)))?;
    let ksoftirqd_pid = flags.optional(KSOFTIRQD_PID, |s| parse_int::<u32>(s).filter(|n| (1..=MAX_PID).contains(n)))?;
    let tasks = flags
        .optional(TASKS, |s| {
            let v: Option<Vec<u32>> =
                s.split(',').map(|p| parse_int::<u32>(p.trim()).filter(|n| (1..=MAX_PID).contains(n))).collect();
            v.filter(|v| (1..=MAX_TASKS).contains(&v.len()) && v.iter().enumerate().all(|(i, p)| !v[..i].contains(p)))
        })?
        .unwrap_or_default();
    if let Some(pid) = ksoftirqd_pid.filter(|p| tasks.contains(p)) {
        return Err(flags.error(format!("--tasks: {pid} is --ksoftirqd-pid, timed as ksoftirqd already")));
    }
    Ok(Command::Softirq(SoftirqArgs {
        cpu,
        duration_ns: duration_ms * 1_000_000,
        ksoftirqd_pid,
        tasks,
        ready_file: flags.optional(READY_FILE, |s| (!s.is_empty()).then(|| PathBuf::from(s)))?,
    }))
}

/// The flags of one subcommand, each given at most once.
struct Flags {
    subcommand: &'static str,
    values: BTreeMap<&'static str, String>,
}

impl Flags {
    /// Collects `--key value` / `--key=value` pairs, checking names against `known`.
    /// Returns `None` when `--help` or `-h` is among the arguments.
    fn collect(
        subcommand: &'static str,
        known: &[(&'static str, &'static str)],
        argv: &[String],
    ) -> Result<Option<Flags>, UsageError> {
        if argv.iter().any(|a| a == "--help" || a == "-h") {
            return Ok(None);
        }
        let mut flags = Flags { subcommand, values: BTreeMap::new() };
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            i += 1;
            if !arg.starts_with("--") {
                return Err(flags.error(format!("unexpected argument \"{arg}\" (flags are written --name value)")));
            }
            let (name, inline_value) = match arg.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (arg.as_str(), None),
            };
            let Some(&(flag, expected)) = known.iter().find(|(f, _)| *f == name) else {
                return Err(flags.error(format!("unknown flag {name}")));
            };
            let value = match inline_value {
                Some(v) => v,
                None => match argv.get(i) {
                    Some(v) if !v.starts_with("--") => {
                        i += 1;
                        v.clone()
                    }
                    _ => return Err(flags.error(format!("{flag}: missing value (expected {expected})"))),
                },
            };
            if flags.values.insert(flag, value).is_some() {
                return Err(flags.error(format!("{flag}: given more than once")));
            }
        }
        Ok(Some(flags))
    }

    fn error(&self, message: String) -> UsageError {
        UsageError { subcommand: Some(self.subcommand), message }
    }

    fn optional<T>(
        &self,
        (flag, expected): (&'static str, &'static str),
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, UsageError> {
        match self.values.get(flag) {
            None => Ok(None),
            Some(v) => match parse(v) {
                Some(t) => Ok(Some(t)),
                None => Err(self.error(format!("{flag}: expected {expected}, got \"{v}\""))),
            },
        }
    }

    fn required<T>(
        &self,
        spec: (&'static str, &'static str),
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, UsageError> {
        self.optional(spec, parse)?
            .ok_or_else(|| self.error(format!("missing required flag {} (expected {})", spec.0, spec.1)))
    }
}

/// A decimal integer (digits only).
fn parse_int<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_iface(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() < 16
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
    ok.then(|| s.to_string())
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn parse_ipv4(s: &str) -> Option<Ipv4Addr> {
    s.parse().ok()
}

fn parse_cpu(s: &str) -> Option<usize> {
    parse_int::<usize>(s).filter(|&n| n <= MAX_CPU)
}

/// `max`, or a rate in packets per second, kept as millionths of a packet per second.
fn parse_rate(s: &str) -> Option<Rate> {
    if s == "max" {
        return Some(Rate::Max);
    }
    let pps: f64 = s.parse().ok()?;
    if !pps.is_finite() || pps <= 0.0 || pps > MAX_RATE_PPS {
        return None;
    }
    let rate_micro_pps = (pps * 1e6).round() as u64;
    (rate_micro_pps > 0).then_some(Rate::Fixed { rate_micro_pps })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const GEN_OK: &str = "gen --iface tbx-a --dst-mac 02:00:00:00:00:02 --src-ip 198.18.9.1 \
                          --dst-ip 198.18.9.2 --rate 10000 --count 1000 --duration-ms 1000";

    fn gen_err(extra: &str) -> String {
        match parse(&argv(&format!("{GEN_OK} {extra}"))) {
            Err(e) => {
                assert_eq!(e.subcommand, Some("gen"));
                e.message
            }
            Ok(c) => panic!("accepted {extra:?}: {c:?}"),
        }
    }

    #[test]
    fn gen_defaults() {
        let Ok(Command::Gen(g)) = parse(&argv(GEN_OK)) else { panic!() };
        assert_eq!(g.iface, "tbx-a");
        assert_eq!(g.dst_mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(g.dst_count, 1);
        assert_eq!(g.rate, Rate::Fixed { rate_micro_pps: 10_000_000_000 });
        assert_eq!(g.count, 1000);
        assert_eq!(g.duration_ns, 1_000_000_000);
        assert_eq!(g.frame_len, 74);
        assert_eq!(g.batch, 32);
        assert_eq!(g.cpu, None);
        assert_eq!(g.run_id, 0);
    }

    #[test]
    fn gen_all_flags_and_equals_form() {
        let a = format!("{GEN_OK} --dst-count 4 --size=1514 --batch 256 --cpu 1 --run-id 4294967295");
        let a = a.replace("--rate 10000", "--rate=max");
        let Ok(Command::Gen(g)) = parse(&argv(&a)) else { panic!() };
        assert_eq!(g.rate, Rate::Max);
        assert_eq!((g.dst_count, g.frame_len, g.batch, g.cpu, g.run_id), (4, 1514, 256, Some(1), u32::MAX));
    }

    #[test]
    fn fractional_rates() {
        let Ok(Command::Gen(g)) = parse(&argv(&GEN_OK.replace("10000", "1.5e6"))) else { panic!() };
        assert_eq!(g.rate, Rate::Fixed { rate_micro_pps: 1_500_000_000_000 });
        let Ok(Command::Gen(g)) = parse(&argv(&GEN_OK.replace("10000", "0.25"))) else { panic!() };
        assert_eq!(g.rate, Rate::Fixed { rate_micro_pps: 250_000 });
    }

    #[test]
    fn gen_value_errors_name_flag_value_and_expectation() {
        assert_eq!(
            gen_err("--rate abc").as_str(),
            "--rate: given more than once",
            "duplicates are caught before values are parsed"
        );
        let only = |a: &str| match parse(&argv(&GEN_OK.replace("--rate 10000", a))) {
            Err(e) => e.message,
            Ok(c) => panic!("accepted {a:?}: {c:?}"),
        };
        assert_eq!(
            only("--rate abc"),
            "--rate: expected a packet rate in packets per second (a number > 0, at most 1e9) or \"max\", got \"abc\""
        );
        for bad in ["0", "-5", "nan", "inf", "2e9", "1e-9"] {
            assert!(only(&format!("--rate {bad}")).starts_with("--rate: expected"), "{bad}");
        }
        assert!(only("").starts_with("missing required flag --rate"));
        assert_eq!(only("--rate"), "--rate: missing value (expected a packet rate in packets per second (a number > 0, at most 1e9) or \"max\")");
        let size = gen_err("--size 60");
        assert!(size.starts_with("--size: expected a frame size in bytes from 74 to 1514"), "{size}");
        assert!(size.ends_with("got \"60\""), "{size}");
        assert!(gen_err("--size 1515").starts_with("--size: expected"));
        assert!(gen_err("--batch 0").starts_with("--batch: expected a batch size from 1 to 256"));
        assert!(gen_err("--batch 257").starts_with("--batch: expected"));
        assert!(gen_err("--dst-count 0").starts_with("--dst-count: expected"));
        assert_eq!(gen_err("--cpu -1"), "--cpu: expected a CPU number from 0 to 1023, got \"-1\"");
        assert!(gen_err("--cpu x").starts_with("--cpu: expected a CPU number"));
        assert!(gen_err("--run-id 4294967296").starts_with("--run-id: expected"));
        assert!(gen_err("--bogus 1").starts_with("unknown flag --bogus"));
        assert!(gen_err("stray").starts_with("unexpected argument \"stray\""));
    }

    #[test]
    fn gen_field_parsers() {
        let with = |from: &str, to: &str| match parse(&argv(&GEN_OK.replace(from, to))) {
            Err(e) => e.message,
            Ok(c) => panic!("accepted {to:?}: {c:?}"),
        };
        assert_eq!(
            with("02:00:00:00:00:02", "02:00:00:00:00"),
            "--dst-mac: expected a MAC address like aa:bb:cc:dd:ee:ff, got \"02:00:00:00:00\""
        );
        assert!(with("02:00:00:00:00:02", "02:00:00:00:00:02:03").starts_with("--dst-mac: expected"));
        assert!(with("02:00:00:00:00:02", "0g:00:00:00:00:02").starts_with("--dst-mac: expected"));
        assert!(with("198.18.9.1", "198.18.9").starts_with("--src-ip: expected an IPv4 address"));
        assert!(with("--count 1000", "--count 100000001")
            .starts_with("--count: expected a packet count from 1 to 100000000"));
        assert!(with("--count 1000", "--count 0").starts_with("--count: expected"));
        assert!(with("--duration-ms 1000", "--duration-ms 600001").starts_with("--duration-ms: expected"));
        assert!(with("tbx-a", "an-interface-name-too-long").starts_with("--iface: expected"));
        assert!(with("198.18.9.2", "255.255.255.254 --dst-count 3").contains("run past 255.255.255.255"));
        assert!(with("--iface tbx-a", "").starts_with("missing required flag --iface"));
    }

    #[test]
    fn sink_parsing() {
        let Ok(Command::Sink(s)) = parse(&argv("sink --iface tbx-b --duration-ms 2000")) else { panic!() };
        assert_eq!(s.duration_ns, 2_000_000_000);
        assert_eq!((s.idle_ns, s.batch, s.run_id, s.cpu, s.ready_file), (500_000_000, 64, 0, None, None));
        let Ok(Command::Sink(s)) = parse(&argv(
            "sink --iface tbx-b --duration-ms 5 --idle-ms 7 --run-id 3 --batch 1024 --cpu 0 --ready-file /tmp/r",
        )) else {
            panic!()
        };
        assert_eq!((s.idle_ns, s.batch, s.run_id, s.cpu), (7_000_000, 1024, 3, Some(0)));
        assert_eq!(s.ready_file, Some(PathBuf::from("/tmp/r")));
        let err = |a: &str| parse(&argv(a)).unwrap_err().message;
        assert!(err("sink --iface tbx-b").starts_with("missing required flag --duration-ms"));
        assert!(err("sink --iface tbx-b --duration-ms 5 --batch 1025")
            .starts_with("--batch: expected a batch size from 1 to 1024"));
        assert!(err("sink --iface tbx-b --duration-ms 5 --rate 5").starts_with("unknown flag --rate"));
        assert!(err("sink --iface tbx-b --duration-ms 5 --idle-ms 0").starts_with("--idle-ms: expected"));
    }

    #[test]
    fn xdp_parsing() {
        let c = parse(&argv("xdp --iface tb-dut0 --prog redirect --to tb-dut1 --duration-ms 5000")).unwrap();
        assert_eq!(
            c,
            Command::Xdp(XdpArgs {
                iface: "tb-dut0".into(),
                prog: XdpProg::Redirect { to: "tb-dut1".into(), loops: 0 },
                duration_ns: 5_000_000_000,
                ready_file: None
            })
        );
        let c = parse(&argv("xdp --iface tb-sink0 --prog pass --duration-ms 1")).unwrap();
        assert!(matches!(c, Command::Xdp(XdpArgs { prog: XdpProg::Pass, .. })));
        let err = |s: &str| parse(&argv(s)).unwrap_err().message;
        assert_eq!(
            err("xdp --iface a --prog redirect --duration-ms 1"),
            "--prog redirect: missing --to (the egress interface)"
        );
        assert_eq!(
            err("xdp --iface a --prog pass --to b --duration-ms 1"),
            "--to: only --prog redirect has an egress interface"
        );
        assert_eq!(
            err("xdp --iface a --prog pass --loops 3 --duration-ms 1"),
            "--loops: only --prog redirect has a cost loop"
        );
        assert_eq!(
            err("xdp --iface a --prog redirect --to b --loops 100001 --duration-ms 1"),
            "--loops: expected a number of loop turns from 0 to 100000, got \"100001\""
        );
        assert!(matches!(
            parse(&argv("xdp --iface a --prog redirect --to b --loops 7 --duration-ms 1")).unwrap(),
            Command::Xdp(XdpArgs { prog: XdpProg::Redirect { loops: 7, .. }, .. })
        ));
        assert_eq!(err("xdp --iface a --prog drop --duration-ms 1"), "--prog: expected pass or redirect, got \"drop\"");
        assert_eq!(
            err("xdp --iface a --prog pass"),
            "missing required flag --duration-ms (expected a duration in milliseconds from 1 to 86400000)"
        );
        assert_eq!(parse(&argv("xdp --help")).unwrap(), Command::Help(XDP_USAGE));
    }

    #[test]
    fn xskfwd_parsing() {
        let c =
            parse(&argv("xskfwd --in tb-dut0 --out tb-dut1 --batch 32 --mode busy --duration-ms 100 --cpu 1")).unwrap();
        assert_eq!(
            c,
            Command::XskFwd(XskFwdArgs {
                iface_in: "tb-dut0".into(),
                iface_out: "tb-dut1".into(),
                batch: 32,
                mode: XskMode::Busy,
                duration_ns: 100_000_000,
                busy_poll_us: 20,
                loops: 0,
                cpu: Some(1),
                ready_file: None
            })
        );
        let err = |s: &str| parse(&argv(s)).unwrap_err().message;
        assert_eq!(
            err("xskfwd --in a --out b --batch 0 --mode busy --duration-ms 1"),
            "--batch: expected a batch size from 1 to 256, got \"0\""
        );
        assert_eq!(
            err("xskfwd --in a --out b --batch 257 --mode busy --duration-ms 1"),
            "--batch: expected a batch size from 1 to 256, got \"257\""
        );
        assert_eq!(
            err("xskfwd --in a --out b --batch 8 --mode spin --duration-ms 1"),
            "--mode: expected busy or sleep, got \"spin\""
        );
        assert_eq!(
            err("xskfwd --in a --out a --batch 8 --mode busy --duration-ms 1"),
            "--out a: expected another interface than --in"
        );
        assert_eq!(
            err("xskfwd --in a --out b --batch 8 --mode sleep --duration-ms 1 --busy-poll-us 0"),
            "--busy-poll-us: expected a busy-poll time in microseconds from 1 to 1000, got \"0\""
        );
        assert_eq!(parse(&argv("xskfwd -h")).unwrap(), Command::Help(XSKFWD_USAGE));
    }

    #[test]
    fn probe_parsing() {
        let c = parse(&argv("probe --cpu 1 --duration-ms 2000 --priority 50")).unwrap();
        assert_eq!(
            c,
            Command::Probe(ProbeArgs {
                cpu: Some(1),
                duration_ns: 2_000_000_000,
                priority: Some(50),
                threshold_ns: 1000,
                spin_ns: 10_000_000,
                rest_ns: 1_000_000
            })
        );
        let err = |s: &str| parse(&argv(s)).unwrap_err().message;
        assert_eq!(err("probe --duration-ms 5"), "missing required flag --cpu (expected a CPU number from 0 to 1023)");
        assert_eq!(
            err("probe --cpu 1 --duration-ms 5 --priority 100"),
            "--priority: expected a SCHED_FIFO priority from 1 to 99, got \"100\""
        );
        assert_eq!(
            err("probe --cpu 1 --duration-ms 5 --threshold-ns 10"),
            "--threshold-ns: expected a gap threshold in nanoseconds from 100 to 1000000, got \"10\""
        );
        assert_eq!(
            err("probe --cpu 1 --duration-ms 5 --spin-ms 0"),
            "--spin-ms: expected a spinning phase in milliseconds from 1 to 1000, got \"0\""
        );
    }

    #[test]
    fn wake_parsing() {
        let c = parse(&argv("wake --cpu 1 --from-cpu 0 --priority 50 --gaps-us 10,200 --count 5")).unwrap();
        assert_eq!(
            c,
            Command::Wake(WakeArgs {
                cpu: 1,
                from_cpu: 0,
                priority: Some(50),
                gaps_ns: vec![10_000, 200_000],
                count: 5,
                work_kib: 64
            })
        );
        let err = |s: &str| parse(&argv(s)).unwrap_err().message;
        assert!(err("wake --cpu 1 --from-cpu 1")
            .starts_with("--from-cpu: expected a CPU number from 0 to 1023, not --cpu's"));
        assert!(err("wake --cpu 1 --from-cpu 0 --gaps-us 10,0")
            .starts_with("--gaps-us: expected 1 to 32 comma-separated gaps"));
        assert!(err("wake --cpu 1").starts_with("missing required flag --from-cpu"));
    }

    #[test]
    fn spin_parsing() {
        let c = parse(&argv("spin --cpu 1 --duration-ms 500 --ready-file /tmp/s")).unwrap();
        assert_eq!(
            c,
            Command::Spin(SpinArgs { cpu: 1, duration_ns: 500_000_000, ready_file: Some(PathBuf::from("/tmp/s")) })
        );
        let e = parse(&argv("spin --duration-ms 5")).unwrap_err();
        assert_eq!(e.subcommand, Some("spin"));
        assert!(e.message.starts_with("missing required flag --cpu"), "{}", e.message);
        assert!(parse(&argv("spin --cpu 1 --duration-ms 0"))
            .unwrap_err()
            .message
            .starts_with("--duration-ms: expected"));
        assert_eq!(parse(&argv("spin --help")).unwrap(), Command::Help(SPIN_USAGE));
    }

    #[test]
    fn udprecv_parsing() {
        let c = parse(&argv("udprecv --port 9001 --duration-ms 2000")).unwrap();
        assert_eq!(
            c,
            Command::UdpRecv(UdpRecvArgs {
                port: 9001,
                duration_ns: 2_000_000_000,
                idle_ns: 500_000_000,
                cpu: None,
                batch: 64,
                run_id: 0,
                ready_file: None,
                rcvbuf: None,
                work_loops: 0,
                hold_ns: 0,
                poll_ns: 0
            })
        );
        let c = parse(&argv(
            "udprecv --port 65535 --duration-ms 5 --idle-ms 7 --cpu 1 --batch 1024 --run-id 3 \
             --ready-file /tmp/r --rcvbuf 1073741824 --work-loops 10000000 --hold-ms 10000",
        ))
        .unwrap();
        assert_eq!(
            c,
            Command::UdpRecv(UdpRecvArgs {
                port: 65535,
                duration_ns: 5_000_000,
                idle_ns: 7_000_000,
                cpu: Some(1),
                batch: 1024,
                run_id: 3,
                ready_file: Some(PathBuf::from("/tmp/r")),
                rcvbuf: Some(1 << 30),
                work_loops: 10_000_000,
                hold_ns: 10_000_000_000,
                poll_ns: 0
            })
        );
        let err = |s: &str| {
            let e = parse(&argv(s)).unwrap_err();
            assert_eq!(e.subcommand, Some("udprecv"), "{s}");
            e.message
        };
        assert_eq!(
            err("udprecv --duration-ms 5"),
            "missing required flag --port (expected a UDP port from 1 to 65535)"
        );
        assert_eq!(err("udprecv --port 0 --duration-ms 5"), "--port: expected a UDP port from 1 to 65535, got \"0\"");
        assert_eq!(
            err("udprecv --port 65536 --duration-ms 5"),
            "--port: expected a UDP port from 1 to 65535, got \"65536\""
        );
        assert!(err("udprecv --port 9001").starts_with("missing required flag --duration-ms"));
        assert!(err("udprecv --port 9001 --duration-ms 600001").starts_with("--duration-ms: expected"));
        assert!(err("udprecv --port 9001 --duration-ms 5 --idle-ms 0").starts_with("--idle-ms: expected"));
        assert!(err("udprecv --port 9001 --duration-ms 5 --batch 0")
            .starts_with("--batch: expected a batch size from 1 to 1024"));
        assert!(err("udprecv --port 9001 --duration-ms 5 --batch 1025").starts_with("--batch: expected"));
        assert_eq!(
            err("udprecv --port 9001 --duration-ms 5 --rcvbuf 0"),
            "--rcvbuf: expected a receive buffer size in bytes from 1 to 1073741824, got \"0\""
        );
        assert!(err("udprecv --port 9001 --duration-ms 5 --rcvbuf 1073741825").starts_with("--rcvbuf: expected"));
        assert_eq!(
            err("udprecv --port 9001 --duration-ms 5 --work-loops 10000001"),
            "--work-loops: expected a number of loop turns from 0 to 10000000, got \"10000001\""
        );
        assert_eq!(
            err("udprecv --port 9001 --duration-ms 5 --hold-ms 10001"),
            "--hold-ms: expected a hold time in milliseconds from 0 to 10000, got \"10001\""
        );
        assert!(err("udprecv --port 9001 --duration-ms 5 --hold-ms -1").starts_with("--hold-ms: expected"));
        assert_eq!(
            err("udprecv --port 9001 --duration-ms 5 --poll-us 0"),
            "--poll-us: expected a timer period in microseconds from 1 to 100000, got \"0\""
        );
        assert!(err("udprecv --port 9001 --duration-ms 5 --poll-us 100001").starts_with("--poll-us: expected"));
        assert!(err("udprecv --port 9001 --duration-ms 5 --cpu 1024").starts_with("--cpu: expected"));
        assert!(err("udprecv --port 9001 --duration-ms 5 --iface x").starts_with("unknown flag --iface"));
        assert_eq!(parse(&argv("udprecv --help")).unwrap(), Command::Help(UDPRECV_USAGE));
    }

    #[test]
    fn softirq_parsing() {
        let c = parse(&argv("softirq --cpu 1 --duration-ms 1000")).unwrap();
        assert_eq!(
            c,
            Command::Softirq(SoftirqArgs {
                cpu: 1,
                duration_ns: 1_000_000_000,
                ksoftirqd_pid: None,
                tasks: vec![],
                ready_file: None
            })
        );
        let c = parse(&argv("softirq --cpu 0 --duration-ms 5 --ksoftirqd-pid 15 --ready-file /tmp/r")).unwrap();
        assert_eq!(
            c,
            Command::Softirq(SoftirqArgs {
                cpu: 0,
                duration_ns: 5_000_000,
                ksoftirqd_pid: Some(15),
                tasks: vec![],
                ready_file: Some(PathBuf::from("/tmp/r"))
            })
        );
        let tasks = |s: &str| match parse(&argv(s)).unwrap() {
            Command::Softirq(a) => a.tasks,
            c => panic!("{c:?}"),
        };
        assert_eq!(tasks("softirq --cpu 1 --duration-ms 5 --tasks 4242"), [4242]);
        assert_eq!(tasks("softirq --cpu 1 --duration-ms 5 --tasks=7,1,4194304,300"), [7, 1, 4_194_304, 300]);
        assert_eq!(tasks("softirq --cpu 1 --duration-ms 5 --ksoftirqd-pid 15 --tasks 16,17"), [16, 17]);
        let err = |s: &str| {
            let e = parse(&argv(s)).unwrap_err();
            assert_eq!(e.subcommand, Some("softirq"), "{s}");
            e.message
        };
        assert_eq!(
            err("softirq --duration-ms 5"),
            "missing required flag --cpu (expected a CPU number from 0 to 1023)"
        );
        assert!(err("softirq --cpu 1").starts_with("missing required flag --duration-ms"));
        assert_eq!(
            err("softirq --cpu 1 --duration-ms 5 --ksoftirqd-pid 0"),
            "--ksoftirqd-pid: expected a process id from 1 to 4194304, got \"0\""
        );
        assert!(err("softirq --cpu 1 --duration-ms 5 --ksoftirqd-pid 4194305").starts_with("--ksoftirqd-pid: expected"));
        assert!(err("softirq --cpu 1 --duration-ms 0").starts_with("--duration-ms: expected"));
        assert_eq!(
            err("softirq --cpu 1 --duration-ms 5 --tasks 0"),
            "--tasks: expected 1 to 4 distinct comma-separated process ids, each from 1 to 4194304, got \"0\""
        );
        for bad in ["", "1,", ",1", "1,,2", "x", "-1", "4194305", "1,2,3,4,5", "5,6,5", "1;2"] {
            let e = err(&format!("softirq --cpu 1 --duration-ms 5 --tasks={bad}"));
            assert!(e.starts_with("--tasks: expected 1 to 4 distinct"), "{bad:?}: {e}");
        }
        assert_eq!(
            err("softirq --cpu 1 --duration-ms 5 --ksoftirqd-pid 15 --tasks 9,15"),
            "--tasks: 15 is --ksoftirqd-pid, timed as ksoftirqd already"
        );
        assert_eq!(parse(&argv("softirq -h")).unwrap(), Command::Help(SOFTIRQ_USAGE));
    }

    #[test]
    fn parent_from_environment() {
        use std::ffi::OsStr;
        assert_eq!(parent_pid(None), Ok(None));
        assert_eq!(parent_pid(Some(OsStr::new(""))), Ok(None));
        assert_eq!(parent_pid(Some(OsStr::new("4242"))), Ok(Some(4242)));
        for bad in ["1", "0", "-3", "x", "99999999999"] {
            let e = parent_pid(Some(OsStr::new(bad))).unwrap_err();
            assert_eq!(e.message, format!("PKTSIM_TB_PARENT={bad}: expected a process id above 1"));
        }
    }

    #[test]
    fn top_level() {
        assert_eq!(parse(&argv("--help")), Ok(Command::Help(USAGE)));
        assert_eq!(parse(&argv("gen --help")), Ok(Command::Help(GEN_USAGE)));
        assert_eq!(parse(&argv("sink --iface x -h")), Ok(Command::Help(SINK_USAGE)));
        assert_eq!(parse(&argv("version")), Ok(Command::Version));
        let e = parse(&argv("bench")).unwrap_err();
        assert_eq!(
            (e.subcommand, e.message.as_str()),
            (
                None,
                "unknown subcommand \"bench\" (expected gen, sink, xdp, xskfwd, probe, wake, udprecv, softirq, spin or version)"
            )
        );
        assert!(parse(&[]).is_err());
    }
}
