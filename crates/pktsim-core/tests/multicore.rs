//! Several cores, several rings per core, shared tx queues.

mod common;

use std::path::Path;

use common::{close, load, sim, simulate};
use pktsim_core::engine::SimResult;
use pktsim_core::Scenario;

fn server(cores: u32, sets: &[(&str, &str)]) -> SimResult {
    let text = format!(
        r#"
        [cpu]
        frequency = "1GHz"
        cores = {cores}
        [link]
        rate = "100Gbit/s"
        [traffic]
        rate = "300kpps"
        pattern = "poisson"
        size = "64B"
        flows = 4096
        [host]
        io = "server"
        t_proc = "4us"
        [measure]
        warmup = "2ms"
        duration = "40ms"
        "#
    );
    simulate(&text, "mc.toml", sets)
}

/// Each core is an M/D/1 queue at the Poisson rate RSS gives its ring: mean sojourn
/// S + rho S / (2 (1 - rho)) (Pollaczek-Khinchine), weighted by each ring's rate, within
/// three 95% half-widths of the simulated mean.
#[test]
fn each_core_is_an_md1_queue_at_its_share_of_the_load() {
    let s = 4e-6;
    for cores in [2, 4] {
        let r = server(cores, &[]);
        assert!(
            r.latency_ns.min >= 4000.0,
            "{cores} cores: no frame leaves before its 4 us of service: {}",
            r.latency_ns.min
        );
        let lam: Vec<f64> = r.per_ring.iter().map(|g| g.summary.offered_pps).collect();
        let w: f64 =
            lam.iter().map(|l| l * (s + l * s * s / (2.0 * (1.0 - l * s)))).sum::<f64>() / lam.iter().sum::<f64>();
        let ci = r.latency_mean_ci95_ns.expect("batch means");
        assert!(
            (r.latency_ns.mean - w * 1e9).abs() <= 3.0 * ci,
            "{cores} cores: {} ns vs M/D/1 {} ns (+- {ci})",
            r.latency_ns.mean,
            w * 1e9
        );
    }
}

#[test]
fn rss_spreads_the_load_and_per_ring_figures_add_up() {
    let r = server(4, &[]);
    assert_eq!(r.per_ring.len(), 4);
    let total: u64 = r.per_ring.iter().map(|g| g.summary.forwarded_packets).sum();
    assert_eq!(total, r.forwarded_packets);
    for (c, u) in r.cpu_per_core.iter().enumerate() {
        // 300 kpps over 4 cores at 4 us: 30% each, within RSS imbalance.
        assert!((u - 0.3).abs() < 0.05, "core {c}: {u}");
    }
}

#[test]
fn forwarding_scales_linearly_with_cores_that_own_their_queues() {
    let one = server(1, &[("traffic.rate", "2Mpps")]).throughput_pps;
    assert!(close(one, 250_000.0, 0.005), "{one}");
    for cores in [2u32, 4] {
        let k = server(cores, &[("traffic.rate", "2Mpps")]).throughput_pps;
        assert!(close(k / one, cores as f64, 0.01), "{cores} cores: {k} vs {one}");
    }
}

#[test]
fn a_shared_tx_queue_makes_scaling_sublinear() {
    let own = server(4, &[("traffic.rate", "2Mpps")]);
    let shared = server(4, &[("traffic.rate", "2Mpps"), ("nic.tx_queues", "1"), ("host.tx_lock", "500ns")]);
    let one = server(1, &[("traffic.rate", "2Mpps"), ("nic.tx_queues", "1"), ("host.tx_lock", "500ns")]);
    // One core alone never contends (its own queue needs no lock).
    assert!(close(one.throughput_pps, 250_000.0, 0.005));
    // A hold h shorter than the service time S over the other cores: once the cores fall
    // out of step nobody waits, and each frame costs S + h: k / (S + h) = 4 / 4.5 us.
    assert!(close(shared.throughput_pps, 4.0 / 4.5e-6, 0.001), "{}", shared.throughput_pps);
    assert!(close(shared.cpu_by_activity["tx_lock"], 0.5 / 4.5, 0.001), "{:?}", shared.cpu_by_activity);
    assert!(own.cpu_by_activity["tx_lock"] == 0.0);
    // A lock held longer than a quarter of the service time caps all cores at 1 / hold.
    let capped = server(4, &[("traffic.rate", "2Mpps"), ("nic.tx_queues", "1"), ("host.tx_lock", "2us")]);
    assert!(close(capped.throughput_pps, 500_000.0, 0.01), "{}", capped.throughput_pps);
}

#[test]
fn napi_scales_with_cores_too() {
    let napi = |cores: u32| {
        let text = format!(
            r#"
            [cpu]
            frequency = "3.3GHz"
            cores = {cores}
            [link]
            rate = "40Gbit/s"
            [traffic]
            rate = "8Mpps"
            flows = 1024
            [nic]
            tx_vector = "shared"
            [host]
            t_irq = "202ns"
            t_proc = "479ns"
            t_clean = "85ns"
            [measure]
            warmup = "2ms"
            duration = "20ms"
            "#
        );
        simulate(&text, "napi-mc.toml", &[])
    };
    let one = napi(1);
    let four = napi(4);
    assert!(close(one.throughput_pps, 1e9 / 564.0, 0.005), "{}", one.throughput_pps);
    assert!(close(four.throughput_pps / one.throughput_pps, 4.0, 0.02), "{}", four.throughput_pps);
    assert!(four.latency_ns.min >= 479.0);
}

#[test]
fn each_core_can_run_its_own_strategy() {
    // Two cores, RT and bulk rings; core 0 strict priority, core 1 FCFS: only core 0's RT
    // traffic is protected.
    let text = r#"
        [cpu]
        frequency = "1GHz"
        cores = 2
        [link]
        rate = "100Gbit/s"
        [traffic]
        rate = "450kpps"
        size = "64B"
        flows = 4096
        [[traffic.sources]]
        class = "rt"
        tos = 184
        pattern = "poisson"
        share = "30%"
        [[traffic.sources]]
        class = "bulk"
        pattern = "burst"
        burst = 32
        share = "70%"
        [nic]
        queues = ["rt", "bulk"]
        [[nic.filters]]
        tos = 184
        queue = "rt"
        [host]
        io = "server"
        t_proc = "4us"
        [[host.core_strategies]]
        kind = "prio"
        [[host.core_strategies]]
        kind = "sq"
        [measure]
        warmup = "2ms"
        duration = "100ms"
    "#;
    let r = sim(&load(text, "per-core.toml", &[]));
    assert_eq!(r.io.json()["strategy_per_core"], serde_json::json!(["prio", "sq"]));
    let rt0 = r.per_ring[0].summary.latency_ns.mean; // core 0, rt ring
    let rt1 = r.per_ring[2].summary.latency_ns.mean; // core 1, rt ring
    assert!(rt0 < 0.7 * rt1, "prio core {rt0} vs fcfs core {rt1}");
    let bad = Scenario::load_toml(
        &text.replace("[[host.core_strategies]]\n        kind = \"sq\"", ""),
        "x.toml",
        Path::new("."),
        &[],
    );
    assert!(bad.unwrap_err().to_string().contains("host.core_strategies"));
}
