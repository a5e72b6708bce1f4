//! Engine throughput, in simulated packets per wall-clock second.
//!
//! (a) the 002 NAPI/ixgbe node at 1.5 Mpps offered (the bundled scenario), and
//! (b) a minimal hand-written binary-heap M/D/1/K loop (K = 512, rho = 0.9): one heap event
//!     per arrival and per departure, nothing else,
//! and their ratio. Run: `cargo bench -p pktsim-core --bench engine` (or `make bench`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::Path;
use std::time::Instant;

use pktsim_core::engine::run;
use pktsim_core::Scenario;

fn bench_napi(sim_seconds: u32) -> (u64, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/pktsim/scenarios/beifuss2015-napi.toml");
    let sets = vec![
        ("traffic.rate".to_string(), "1.5Mpps".to_string()),
        ("measure.warmup".to_string(), "10ms".to_string()),
        ("measure.duration".to_string(), format!("{sim_seconds}s")),
    ];
    let sc = Scenario::load_path(&path, &sets).expect("bundled scenario");
    let t = Instant::now();
    let r = run(&sc, Default::default()).expect("run");
    (r.sim_packets, t.elapsed().as_secs_f64())
}

/// M/D/1/K with Poisson arrivals: the smallest honest event loop.
fn bench_md1k(packets: u64) -> (u64, f64) {
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
    let t0 = Instant::now();
    let mut heap: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut queue: VecDeque<u64> = VecDeque::with_capacity(K);
    let (mut arrived, mut dropped, mut served) = (0u64, 0u64, 0u64);
    let mut lat_sum = 0u64;
    heap.push(Reverse((0, seq, Ev::Arrival)));
    while let Some(Reverse((t, _, ev))) = heap.pop() {
        match ev {
            Ev::Arrival => {
                arrived += 1;
                if queue.len() >= K {
                    dropped += 1;
                } else {
                    queue.push_back(t);
                    if queue.len() == 1 {
                        seq += 1;
                        heap.push(Reverse((t + service_ps, seq, Ev::Departure)));
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
                    heap.push(Reverse((t + service_ps, seq, Ev::Departure)));
                }
            }
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    std::hint::black_box((dropped, served, lat_sum));
    (arrived, wall)
}

fn main() {
    // Warm caches and the allocator once.
    let _ = bench_napi(1);
    let _ = bench_md1k(1_000_000);
    let (a_pkts, a_wall) = bench_napi(10);
    let (b_pkts, b_wall) = bench_md1k(15_000_000);
    let a_rate = a_pkts as f64 / a_wall;
    let b_rate = b_pkts as f64 / b_wall;
    println!("(a) 002 NAPI/ixgbe node, 1.5 Mpps offered: {a_pkts} packets in {a_wall:.3} s = {:.2} M simulated packets/s", a_rate / 1e6);
    println!("(b) bare binary-heap M/D/1/K loop, K=512, rho=0.9: {b_pkts} packets in {b_wall:.3} s = {:.2} M simulated packets/s", b_rate / 1e6);
    println!("ratio (a)/(b): {:.2}", a_rate / b_rate);
    println!("goal (a) >= 10 M simulated packets/s: {}", if a_rate >= 10e6 { "met" } else { "NOT met" });
}
