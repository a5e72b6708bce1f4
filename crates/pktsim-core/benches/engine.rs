//! Engine speed, in nanoseconds of CPU time per simulated packet, for every case the speed
//! goals name, each as a ratio to a bare binary-heap M/D/1/K loop timed in the same run:
//!
//! - the 002 NAPI/ixgbe node (`python/pktsim/scenarios/beifuss2015-napi.toml`) on one core
//!   at 1.5 Mpps and at 0.1 Mpps (every packet its own IRQ and poll; there also with tx
//!   completions on a vector of their own, `nic.tx_vector = "separate"`, the default), and
//!   on 2, 4, 16 and 64 cores (RSS over 1,024 flows, 1.5 Mpps per core);
//! - the same node in busy-poll mode (DPDK-style) and in server mode, one core at 1.5 Mpps;
//! - server mode as M/D/1/K and M/M/1/K (1 us service, rho 0.9, K 512): what the theory
//!   tests check;
//! - the bare loop: one heap push and pop per arrival and per departure, nothing else;
//!   and the same loop as M/M/1/K (`bare-heap-mm1k`, a case like the others): the work of
//!   `server-mm1k` done bare, to compare like with like (the goals' yardstick stays the
//!   M/D/1/K loop);
//! - trace reading (`trace-read`): 5 M frames of a generated pcap (64 to 1,518 B, 4,096
//!   flows) read and their headers decoded, on one core (the goal: 20 M frames/s).
//!
//! Each case runs in five rounds, each right after a run of the bare loop; its ns/packet is
//! the fastest round (other work on a shared machine only ever slows a round down), its
//! speed against the bare loop the median over the rounds of the two timed side by side
//! (the machine's speed drifts by tens of percent within minutes, and the two side by side
//! are slowed alike). A round's
//! time is the simulating thread's time on a CPU (`CLOCK_THREAD_CPUTIME_ID`): on a virtual
//! machine, time the hypervisor gives another guest (steal) is not in it, where wall time
//! counts it (seen here: 50 ms of a 320 ms round, which made it 40% slower). The wall time
//! is printed beside it.
//!
//! Then every bundled scenario and example as it is (its own load and duration), the
//! fastest of three runs each (more, up to 30, for a file whose runs add up to less than
//! 0.2 s of CPU), against the same bare loop: the speed of a user's first runs, in every
//! I/O mode the examples cover.
//!
//! Run: `cargo bench -p pktsim-core --bench engine` (or `make bench`, which adds the sweep
//! and start-up figures). `PKTSIM_BENCH_ONLY=name` runs one case once (for `perf record`
//! or `valgrind --tool=callgrind`), the bare loop included (`bare-heap-md1k`);
//! `PKTSIM_BENCH_ONLY=path/to/file.toml` runs a scenario or example file once.
//! `PKTSIM_BENCH_SMOKE=1` runs every case once, a few milliseconds of each, and every
//! bundled file once, timing nothing: `make test` does, so that a case the scenarios no
//! longer accept fails there rather than in the next speed run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::Path;
use std::time::Instant;

use pktsim_core::engine::run;
use pktsim_core::Scenario;

/// `println!` that ends the bench quietly when standard output is gone (`make bench | head`),
/// where `println!` would panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// One timed simulation: its wall time and its thread's time on a CPU.
#[derive(Clone, Copy)]
struct Timed {
    packets: u64,
    events: u64,
    wall_s: f64,
    cpu_s: f64,
}

impl Timed {
    /// CPU time per packet, ns.
    fn ns_per_packet(&self) -> f64 {
        self.cpu_s * 1e9 / self.packets as f64
    }
}

/// A stopwatch of wall time and of this thread's time on a CPU (`cpu-time`'s
/// `CLOCK_THREAD_CPUTIME_ID`, to the nanosecond: `/proc/thread-self/schedstat` is brought up
/// to date only at scheduler ticks, 4 ms apart, and read 0 for a 2 ms run).
struct Clock {
    wall: Instant,
    cpu: cpu_time::ThreadTime,
}

impl Clock {
    fn start() -> Self {
        Clock { wall: Instant::now(), cpu: cpu_time::ThreadTime::now() }
    }
    fn stop(&self, packets: u64, events: u64) -> Timed {
        let cpu_s = self.cpu.elapsed().as_secs_f64();
        Timed { packets, events, wall_s: self.wall.elapsed().as_secs_f64(), cpu_s }
    }
}

fn simulate(file: &str, sets: &[(&str, String)]) -> Timed {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/pktsim/scenarios").join(file);
    let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let sc = Scenario::load_path(&path, &sets).unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::start();
    let r = run(&sc, Default::default()).unwrap_or_else(|e| panic!("{e}"));
    clock.stop(r.sim_packets, r.events)
}

/// Whether this is a smoke run (`PKTSIM_BENCH_SMOKE`): every case briefly, nothing timed.
fn smoke() -> bool {
    std::env::var_os("PKTSIM_BENCH_SMOKE").is_some()
}

/// `seconds` of simulated time, or 2 ms in a smoke run.
fn simulated(seconds: f64) -> f64 {
    if smoke() {
        0.002
    } else {
        seconds
    }
}

/// The 002 node on `cores` cores at 1.5 Mpps each (or `rate`), `seconds` simulated.
fn node(cores: u32, rate_pps: f64, seconds: f64, extra: &[(&str, &str)]) -> Timed {
    let seconds = simulated(seconds);
    let mut sets = vec![
        ("traffic.rate", format!("{rate_pps}pps")),
        ("measure.warmup", "1ms".to_string()),
        ("measure.duration", format!("{seconds}s")),
    ];
    if cores > 1 {
        sets.push(("cpu.cores", cores.to_string()));
        sets.push(("traffic.flows", "1024".to_string()));
        sets.push(("link.rate", "1Tbit/s".to_string()));
    }
    sets.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    simulate("beifuss2015-napi.toml", &sets)
}

/// Server mode as M/D/1/K or M/M/1/K: 1 us service, rho 0.9, K 512, Poisson arrivals (the
/// scenario of `tests/theory.rs`).
fn server(service: &str, seconds: f64) -> Timed {
    let seconds = simulated(seconds);
    let text = format!(
        r#"
        [cpu]
        frequency = "1GHz"
        [link]
        rate = "100Tbit/s"
        [traffic]
        rate = "0.9Mpps"
        pattern = "poisson"
        size = "64B"
        [nic]
        rx_ring = 513
        refill_batch = 1
        tx_ring = 65536
        [host]
        io = "server"
        t_proc = "1us"
        service = "{service}"
        [measure]
        warmup = "1ms"
        duration = "{seconds}s"
        "#
    );
    let sc = Scenario::load_toml(&text, "server.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::start();
    let r = run(&sc, Default::default()).unwrap_or_else(|e| panic!("{e}"));
    clock.stop(r.sim_packets, r.events)
}

/// M/D/1/K with Poisson arrivals: the smallest honest event loop.
fn bare_md1k(packets: u64) -> Timed {
    bare_queue(packets, false)
}

/// The same loop as M/M/1/K: each service time drawn as the arrivals' gaps are (the same
/// work as `server-mm1k`'s; not the goals' yardstick).
fn bare_mm1k(packets: u64) -> Timed {
    bare_queue(packets, true)
}

/// A binary-heap M/D/1/K or (`exponential`) M/M/1/K loop.
fn bare_queue(packets: u64, exponential: bool) -> Timed {
    let packets = if smoke() { packets.min(10_000) } else { packets };
    const K: usize = 512;
    let service_ps: u64 = 1_000_000; // 1 us
    let mean_gap = service_ps as f64 / 0.9;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    };
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Ev {
        Arrival,
        Departure,
    }
    let clock = Clock::start();
    let mut heap: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut queue: VecDeque<u64> = VecDeque::with_capacity(K);
    let (mut arrived, mut dropped, mut served, mut events) = (0u64, 0u64, 0u64, 0u64);
    let mut lat_sum = 0u64;
    heap.push(Reverse((0, seq, Ev::Arrival)));
    while let Some(Reverse((t, _, ev))) = heap.pop() {
        events += 1;
        match ev {
            Ev::Arrival => {
                arrived += 1;
                if queue.len() >= K {
                    dropped += 1;
                } else {
                    queue.push_back(t);
                    if queue.len() == 1 {
                        seq += 1;
                        let d =
                            if exponential { (-(1.0 - uniform()).ln() * service_ps as f64) as u64 } else { service_ps };
                        heap.push(Reverse((t + d, seq, Ev::Departure)));
                    }
                }
                if arrived < packets {
                    let gap = (-(1.0 - uniform()).ln() * mean_gap) as u64;
                    seq += 1;
                    heap.push(Reverse((t + gap, seq, Ev::Arrival)));
                }
            }
            Ev::Departure => {
                let a = queue.pop_front().unwrap_or(t);
                lat_sum += t - a;
                served += 1;
                if !queue.is_empty() {
                    seq += 1;
                    let d = if exponential { (-(1.0 - uniform()).ln() * service_ps as f64) as u64 } else { service_ps };
                    heap.push(Reverse((t + d, seq, Ev::Departure)));
                }
            }
        }
    }
    let t = clock.stop(arrived, events);
    std::hint::black_box((dropped, served, lat_sum));
    t
}

/// A pcap of `frames` Ethernet/IPv4/UDP frames (4,096 flows, IMIX-like sizes, 1 us
/// apart), captured 64 bytes deep as a capture for replay usually is, in a temporary file.
fn write_trace(frames: u64) -> std::path::PathBuf {
    use std::io::Write;
    let path = std::env::temp_dir().join(format!("pktsim-bench-trace-{}.pcap", std::process::id()));
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).expect("a temporary file"));
    let mut head = Vec::new();
    for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 65_535, 1] {
        head.extend_from_slice(&v.to_le_bytes());
    }
    w.write_all(&head).unwrap();
    let sizes = [60u32, 60, 60, 60, 60, 60, 60, 572, 572, 572, 572, 1514];
    for i in 0..frames {
        let orig = sizes[(i % 12) as usize];
        let flow = (i.wrapping_mul(2_654_435_761) >> 7) % 4096;
        let t = 1_700_000_000_000_000_000 + i * 1_000;
        let mut f = [0u8; 64];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((orig - 14) as u16).to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, (flow >> 8) as u8]);
        f[30..34].copy_from_slice(&[198, 19, 0, flow as u8]);
        f[34..36].copy_from_slice(&(1024 + (flow % 7) as u16).to_be_bytes());
        f[36..38].copy_from_slice(&5001u16.to_be_bytes());
        let incl = orig.min(64);
        for v in [(t / 1_000_000_000) as u32, (t % 1_000_000_000) as u32, incl, orig] {
            w.write_all(&v.to_le_bytes()).unwrap();
        }
        w.write_all(&f[..incl as usize]).unwrap();
    }
    w.flush().unwrap();
    path
}

/// Read and decode every frame of a 5 M-frame trace (written first, not timed).
fn trace_read() -> Timed {
    let path = write_trace(if smoke() { 10_000 } else { 5_000_000 });
    let clock = Clock::start();
    let mut r = pktsim_core::trace::TraceReader::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let (mut packets, mut bytes) = (0u64, 0u64);
    while let Some(f) = r.next_frame().unwrap_or_else(|e| panic!("{e}")) {
        packets += 1;
        bytes += f.size as u64 + f.key.src_port as u64;
    }
    let t = clock.stop(packets, 0);
    std::hint::black_box(bytes);
    let _ = std::fs::remove_file(&path);
    t
}

/// A bundled scenario or example file as it is (a chain of nodes too): build, run and
/// report, timed as the cases are.
fn bundled_file(path: &Path) -> Result<Timed, String> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{origin}: {e}"))?;
    let table = pktsim_core::loader::parse_toml_table(&text, &origin).map_err(|e| e.to_string())?;
    if pktsim_core::scenario::chain::is_chain(&table) {
        let chain = pktsim_core::scenario::chain::resolve(&table, &origin, path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| e.to_string())?;
        let clock = Clock::start();
        let r = pktsim_core::engine::chain::run(&chain, Default::default()).map_err(|e| e.to_string())?;
        // The nodes run on threads of their own: their time is the wall time.
        let t = clock.stop(r.top.sim_packets, r.top.events);
        return Ok(Timed { cpu_s: t.wall_s, ..t });
    }
    let sc = Scenario::load_path(path, &[]).map_err(|e| e.to_string())?;
    let clock = Clock::start();
    let r = run(&sc, Default::default()).map_err(|e| e.to_string())?;
    Ok(clock.stop(r.sim_packets, r.events))
}

/// Every bundled scenario (`python/pktsim/scenarios`) and example (`examples`), sorted.
fn bundled_files() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["python/pktsim/scenarios", "examples"] {
        let mut v: Vec<_> = std::fs::read_dir(root.join(dir))
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        files.extend(v);
    }
    files
}

type Case = (&'static str, fn() -> Timed);

const CASES: &[Case] = &[
    ("napi-1core-1.5Mpps", || node(1, 1.5e6, 5.0, &[])),
    ("napi-1core-0.1Mpps", || node(1, 0.1e6, 30.0, &[])),
    ("napi-1core-0.1Mpps-txv", || node(1, 0.1e6, 30.0, &[("nic.tx_vector", "separate")])),
    ("napi-2cores", || node(2, 3.0e6, 2.0, &[])),
    ("napi-4cores", || node(4, 6.0e6, 1.0, &[])),
    ("napi-4cores-0.4Mpps", || node(4, 0.4e6, 5.0, &[])),
    ("napi-16cores", || node(16, 24.0e6, 0.25, &[])),
    ("napi-64cores", || node(64, 96.0e6, 0.07, &[])),
    ("busy-poll-1core", || {
        node(1, 1.5e6, 5.0, &[("host.io", "busy-poll"), ("host.batch.size", "32"), ("host.batch.t_empty", "50ns")])
    }),
    ("server-1core", || node(1, 1.5e6, 5.0, &[("host.io", "server")])),
    ("server-md1k", || server("constant", 10.0)),
    ("server-mm1k", || server("exponential", 10.0)),
    ("trace-read", trace_read),
    ("bare-heap-md1k", || bare_md1k(10_000_000)),
    ("bare-heap-mm1k", || bare_mm1k(10_000_000)),
];

/// Rounds of every case, each after a run of the bare loop: each ns/packet is the fastest
/// round (on a shared machine a round can only be slowed by other work, never sped up, so
/// the fastest is the best estimate of a deterministic computation's own time), each
/// ratio to the bare loop the median of the rounds'.
const ROUNDS: usize = 5;

/// Runs of each bundled file (the fastest counts).
const FILE_ROUNDS: usize = 3;

/// More runs of a bundled file whose runs are short, until they add up to this much CPU
/// time (at most `FILE_ROUNDS_MAX`): a run of 2 ms is easily slowed by a third by one
/// interruption, and three of them left the same file at 25 ns a packet in one place of a
/// run and 43 ns in another.
const FILE_CPU_S: f64 = 0.2;
const FILE_ROUNDS_MAX: usize = 30;

/// Packets of a bare-loop run beside a case (about 0.2 s).
const BARE_PACKETS: u64 = 4_000_000;

/// The process's peak resident memory (VmHWM), MB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Peak memory of one case run alone in a process of its own, MB.
fn case_rss_mb(case: &str) -> f64 {
    let out =
        std::env::current_exe().and_then(|exe| std::process::Command::new(exe).env("PKTSIM_BENCH_ONLY", case).output());
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("peak RSS "))
        .and_then(|v| v.trim_end_matches(" MB").parse().ok())
        .unwrap_or(f64::NAN)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let only = std::env::var("PKTSIM_BENCH_ONLY").ok();
    if let Some(file) = only.as_deref().filter(|o| o.ends_with(".toml")) {
        // A scenario or example file alone, as the bundled files are run (for a profile).
        let t = bundled_file(Path::new(file)).unwrap_or_else(|e| {
            eprintln!("PKTSIM_BENCH_ONLY: {e}");
            std::process::exit(2)
        });
        out!(
            "{file}: {} packets, {:.1} ns/packet, {:.2} events/packet",
            t.packets,
            t.ns_per_packet(),
            t.events as f64 / t.packets as f64
        );
        return;
    }
    if smoke() {
        for (name, f) in CASES {
            let t = f();
            out!("{name}: {} packets", t.packets);
        }
        for path in bundled_files() {
            let t = bundled_file(&path).unwrap_or_else(|e| panic!("{e}"));
            out!("{}: {} packets", path.display(), t.packets);
        }
        out!("smoke: {} cases and the bundled files ran", CASES.len());
        return;
    }
    let cases: Vec<&Case> = CASES.iter().filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n)).collect();
    if cases.is_empty() {
        eprintln!(
            "PKTSIM_BENCH_ONLY={}: expected one of {}",
            only.unwrap_or_default(),
            CASES.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
        );
        std::process::exit(2);
    }
    if only.is_some() {
        // One case alone, nothing else in the profile (and in the peak memory).
        let t = (cases[0].1)();
        out!(
            "{}: {} packets, {:.1} ns/packet, {:.2} events/packet ({:.1} ns/packet of wall time)",
            cases[0].0,
            t.packets,
            t.ns_per_packet(),
            t.events as f64 / t.packets as f64,
            t.wall_s * 1e9 / t.packets as f64
        );
        out!("peak RSS {:.1} MB", peak_rss_mb());
        return;
    }
    // Warm caches and the allocator once.
    let _ = bare_md1k(1_000_000);
    let _ = node(1, 1.5e6, 0.2, &[]);
    let cases: Vec<&&Case> = cases.iter().filter(|(n, _)| *n != "bare-heap-md1k").collect();
    // Every case, round after round, each run right after a run of the bare loop: on a
    // shared machine whose speed drifts by tens of percent within minutes (and differs
    // between consecutive seconds), a case and the bare loop timed side by side are slowed
    // alike. A case's speed against the bare loop is the median over the rounds of the two
    // side by side; its ns/packet is its fastest round.
    let mut bare: Vec<f64> = Vec::new();
    let mut runs: Vec<Vec<(Timed, f64)>> = cases.iter().map(|_| Vec::new()).collect();
    for _ in 0..ROUNDS {
        for (i, (_, f)) in cases.iter().enumerate() {
            let b = bare_md1k(BARE_PACKETS).ns_per_packet();
            bare.push(b);
            runs[i].push((f(), b));
        }
    }
    let bare_ns = bare.iter().copied().fold(f64::INFINITY, f64::min);
    struct Row<'a> {
        name: &'a str,
        best: Timed,
        median_ns: f64,
        /// Median over the rounds of (bare loop's ns/packet / the case's), side by side.
        ratio: f64,
    }
    let rows: Vec<Row> = cases
        .iter()
        .zip(&runs)
        .filter_map(|((name, _), ts)| {
            let best = ts.iter().map(|(t, _)| *t).min_by(|a, b| a.ns_per_packet().total_cmp(&b.ns_per_packet()))?;
            let median_ns = median(ts.iter().map(|(t, _)| t.ns_per_packet()).collect());
            let ratio = median(ts.iter().map(|(t, b)| b / t.ns_per_packet()).collect());
            Some(Row { name, best, median_ns, ratio })
        })
        .collect();
    out!(
        "{:<22} {:>10} {:>8} {:>11} {:>9} {:>9} {:>11}",
        "case",
        "packets",
        "wall s",
        "ns/packet",
        "median",
        "events/p",
        "bare/case"
    );
    for r in &rows {
        let t = &r.best;
        out!(
            "{:<22} {:>10} {:>8.3} {:>11.1} {:>9.1} {:>9.2} {:>11.2}",
            r.name,
            t.packets,
            t.wall_s,
            t.ns_per_packet(),
            r.median_ns,
            t.events as f64 / t.packets as f64,
            r.ratio
        );
    }
    out!(
        "{:<22} {:>10} {:>8} {:>11.1} {:>9.1} {:>9.2} {:>11.2}   ({} runs)",
        "bare-heap-md1k",
        BARE_PACKETS,
        "",
        bare_ns,
        median(bare.clone()),
        2.0,
        1.0,
        bare.len(),
    );
    out!("(ns/packet: CPU time of the simulating thread, the fastest of {ROUNDS} rounds; median: of the rounds; wall s: that round's wall time;");
    out!(" bare/case: the bare loop's ns/packet over the case's, timed side by side, the median of the rounds)");
    // The goals: speed relative to the bare loop ("bare/case" above), >= the goal; one case
    // against another through their ratios to the bare loop.
    let ratio = |n: &str| rows.iter().find(|r| r.name == n).map_or(f64::NAN, |r| r.ratio);
    let ns_of = |n: &str| rows.iter().find(|r| r.name == n).map(|r| r.best.ns_per_packet());
    let goal = |what: &str, value: f64, at_least: f64| {
        out!("goal: {what:<52} {value:>6.2} (>= {at_least}): {}", if value >= at_least { "met" } else { "NOT met" });
    };
    out!();
    goal("002 node, 1 core, 1.5 Mpps: x the bare loop", ratio("napi-1core-1.5Mpps"), 2.0);
    let low = ratio("napi-1core-1.5Mpps") / ratio("napi-1core-0.1Mpps");
    out!(
        "goal: {:<52} {low:>6.2} (<= 2): {}",
        "0.1 Mpps cost per packet / 1.5 Mpps cost",
        if low <= 2.0 { "met" } else { "NOT met" }
    );
    out!(
        "      {:<52} {:>6.2}   (not a goal)",
        "0.1 Mpps, tx vector of its own: cost / tx on rx vector",
        ratio("napi-1core-0.1Mpps") / ratio("napi-1core-0.1Mpps-txv")
    );
    goal("4 cores: x the bare loop", ratio("napi-4cores"), 1.0);
    out!(
        "      {:<52} {:>6.2}   (not a goal)",
        "4 cores at 0.1 Mpps a core: cost / at 1.5 Mpps a core",
        ratio("napi-4cores") / ratio("napi-4cores-0.4Mpps")
    );
    goal("64 cores: x the bare loop", ratio("napi-64cores"), 0.5);
    let napi = ratio("napi-1core-1.5Mpps");
    goal("busy-poll: NAPI's ns/packet / busy-poll's", ratio("busy-poll-1core") / napi, 1.0);
    goal("server M/D/1/K: x the bare loop", ratio("server-md1k"), 1.5);
    goal("server M/M/1/K: x the bare loop", ratio("server-mm1k"), 1.5);
    out!(
        "      {:<52} {:>6.2}   (the same work: not the goal's yardstick)",
        "server M/M/1/K: x a bare M/M/1/K loop",
        ratio("server-mm1k") / ratio("bare-heap-mm1k")
    );
    goal("server: NAPI's ns/packet / server's (same node)", ratio("server-1core") / napi, 1.0);
    out!(
        "      {:<52} {:>6.2}   (Poisson arrivals, another node: not the goal's comparison)",
        "server M/D/1/K: NAPI's ns/packet / server's",
        ratio("server-md1k") / napi
    );
    goal("trace read and decode: M frames/s on one core (on CPU)", 1e3 / ns_of("trace-read").unwrap_or(f64::NAN), 20.0);
    let (one, many) = (case_rss_mb("napi-1core-1.5Mpps"), case_rss_mb("napi-64cores"));
    out!(
        "goal: {:<52} {many:>6.1} (<= 25): {}   (1 core: {one:.1} MB)",
        "64 cores: peak memory of the process, MB",
        if many <= 25.0 { "met" } else { "NOT met" }
    );

    // Every bundled scenario and example as it is (its own load and duration; build and
    // report included, as in the cases): where a user's first runs stand.
    out!();
    out!("{:<36} {:>10} {:>11} {:>9} {:>11}", "bundled file", "packets", "ns/packet", "events/p", "bare/file");
    for path in bundled_files() {
        let mut ts: Vec<Timed> = Vec::new();
        while ts.len() < FILE_ROUNDS
            || (ts.iter().map(|t| t.cpu_s).sum::<f64>() < FILE_CPU_S && ts.len() < FILE_ROUNDS_MAX)
        {
            ts.push(bundled_file(&path).unwrap_or_else(|e| panic!("{e}")));
        }
        let Some(t) = ts.iter().min_by(|a, b| a.ns_per_packet().total_cmp(&b.ns_per_packet())).copied() else {
            continue;
        };
        let name = path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let dir = if path.parent().is_some_and(|p| p.ends_with("examples")) { "examples/" } else { "scenarios/" };
        out!(
            "{:<36} {:>10} {:>11.1} {:>9.2} {:>11.2}",
            format!("{dir}{name}"),
            t.packets,
            t.ns_per_packet(),
            t.events as f64 / t.packets as f64,
            bare_ns / t.ns_per_packet()
        );
    }
    out!("(the fastest of {FILE_ROUNDS} runs each, or of more up to {FILE_ROUNDS_MAX} until they add up to {FILE_CPU_S} s of CPU, against the fastest bare loop)");
}
