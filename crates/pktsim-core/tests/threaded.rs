//! Threaded NAPI on a veth-like device against closed forms and a hand-computed trace.

mod common;

use common::{close, load};
use pktsim_core::engine::SimResult;

fn scenario(sets: &[(&str, &str)]) -> pktsim_core::ResolvedScenario {
    let text = r#"
        [cpu]
        frequency = "2GHz"
        cores = 1
        [cpu.idle]
        table = "poll"
        [link]
        rate = "100Gbit/s"
        [traffic]
        rate = "100kpps"
        size = "64B"
        pattern = "cbr"
        [nic]
        rx_ring = 256
        tx_ring = 4096
        dma_delay = "0ns"
        [host]
        io = "threaded-napi"
        t_proc = "600ns"
        t_poll = "0ns" # (the closed forms and the trace below have no per-poll term)
        weight = 64
        [host.thread]
        wake_latency = "2us"
        t_wakeup = "1us"
        [measure]
        warmup = "1ms"
        duration = "20ms"
        "#;
    load(text, "threaded.toml", sets)
}

fn sim(sets: &[(&str, &str)]) -> SimResult {
    common::sim(&scenario(sets))
}

fn wakeups(r: &SimResult) -> f64 {
    r.io.json()["wakeups"].as_u64().unwrap() as f64
}

#[test]
fn sparse_arrivals_wake_the_thread_for_every_frame() {
    // 100 kpps = one frame every 10 us, far apart: each frame wakes the thread, which then
    // needs wake_latency + t_wakeup + t_poll + t_proc before the frame leaves.
    let r = sim(&[("host.t_poll", "200ns")]);
    let fwd = r.forwarded_packets as f64;
    assert!(close(wakeups(&r), fwd, 1e-3), "{} wake-ups for {fwd} frames", wakeups(&r));
    assert!(close(r.packets_per_poll.mean, 1.0, 1e-9));
    let lat = 2000.0 + 1000.0 + 200.0 + 600.0;
    assert!((r.latency_ns.p50 - lat).abs() < 5.0 && (r.latency_ns.max - lat).abs() < 5.0, "{:?}", r.latency_ns);
    // CPU per frame: wake-up + poll + processing, at 100 kpps.
    assert!(close(r.cpu_utilization, (1000.0 + 200.0 + 600.0) * 1e-9 * 1e5, 2e-3), "{}", r.cpu_utilization);
    assert!(close(r.cpu_by_activity["wakeup"], 1000.0e-9 * 1e5, 2e-3));
    assert_eq!(r.irq_per_s, 0.0, "veth has no hard IRQ");
}

#[test]
fn hand_trace_eight_frames_per_wakeup() {
    // Frames every 1 us, latency 2 us, wake-up 1 us, 0.6 us each. Frame 0 (t=0) wakes the
    // thread at 2 us; it runs at 3 us and finds frames 0-3; frames keep arriving every
    // 1 us while it clears one per 0.6 us: frames 0..7 end at 3.6, 4.2, ..., 7.8 us. At
    // 7.8 us the ring is empty (frame 8 comes at 8 us): sleep. The cycle repeats every
    // 8 us: 8 frames per wake-up, (1 + 8 x 0.6) / 8 = 0.725 us of CPU per frame; latency
    // of frame i (0..7) = 3.6 + 0.6 i - i = 3.6 - 0.4 i us: 3.6 us max, 0.8 us min.
    let r = sim(&[("traffic.rate", "1Mpps")]);
    let fwd = r.forwarded_packets as f64;
    assert!(close(fwd / wakeups(&r), 8.0, 2e-3), "{} frames per wake-up", fwd / wakeups(&r));
    assert!(close(r.cpu_utilization, 0.725, 2e-3), "{}", r.cpu_utilization);
    assert!((r.latency_ns.max - 3600.0).abs() < 5.0, "{:?}", r.latency_ns);
    assert!((r.latency_ns.min - 800.0).abs() < 5.0, "{:?}", r.latency_ns);
    assert!(close(r.latency_ns.mean, 2200.0, 2e-3), "{:?}", r.latency_ns);
    assert_eq!(r.loss_ratio, 0.0);
}

#[test]
fn saturation_polls_full_weights_and_the_ring_overflows() {
    // Offered 3 Mpps against 1 / (600 ns + 6.4 us / 64) = 1.4286 Mpps.
    let sc = scenario(&[("traffic.rate", "3Mpps"), ("host.t_poll", "6400ns")]);
    let r = common::sim(&sc);
    let cap = 1e9 / (600.0 + 6400.0 / 64.0);
    assert!(close(r.throughput_pps, cap, 2e-3), "{} vs {cap}", r.throughput_pps);
    assert!(close(r.packets_per_poll.mean, 64.0, 1e-3), "{}", r.packets_per_poll.mean);
    assert!(wakeups(&r) <= 1.0, "a saturated thread never sleeps: {}", wakeups(&r));
    assert!(close(r.loss_ratio, 1.0 - cap / 3e6, 5e-3), "{}", r.loss_ratio);
    assert!(r.drops.get("rx_ring_full").copied().unwrap_or(0) > 0, "{:?}", r.drops);
    // A full ring ahead (256 frames), and up to a weight more taken with the frame: the
    // latency is between 256 and 256 + 64 service times.
    let service_ns = 1e9 / cap;
    assert!(r.latency_ns.p50 > 256.0 * service_ns && r.latency_ns.p50 < 320.0 * service_ns, "{:?}", r.latency_ns);
    // The analytical model gives the same capacity.
    let p = pktsim_core::predict::predict(&sc);
    assert!(close(p.r_max_pps, cap, 1e-9), "{}", p.r_max_pps);
}

#[test]
fn a_poll_takes_what_the_ring_holds_when_it_starts() {
    // Frames 1.25 us apart (800 kpps); no wake-up latency or cost; 1.5 us per poll and
    // 0.6 us per frame. A poll of n frames lasts 1.5 + 0.6 n us, during which
    // (1.5 + 0.6 n) / 1.25 frames come, which the next poll takes: the steady state is
    // n = 1.5 / (1.25 - 0.6) = 2.31 frames per poll, and a poll always finds frames, so
    // the thread is busy all the time: 0.8 Mpps x (0.6 + 1.5 / n) us = 1.0.
    let r = sim(&[
        ("traffic.rate", "800kpps"),
        ("host.t_poll", "1500ns"),
        ("host.thread.wake_latency", "0ns"),
        ("host.thread.t_wakeup", "0ns"),
    ]);
    assert!(close(r.packets_per_poll.mean, 1.5 / (1.25 - 0.6), 0.01), "{}", r.packets_per_poll.mean);
    assert!(close(r.cpu_utilization, 0.8 * (0.6 + 1.5 / (1.5 / 0.65)), 0.01), "{}", r.cpu_utilization);
    assert!(wakeups(&r) <= 1.0, "{}", wakeups(&r));
}

#[test]
fn cpu_per_frame_falls_with_load_as_wakeups_amortise() {
    let mut last = f64::INFINITY;
    for rate in ["50kpps", "400kpps", "800kpps", "1.2Mpps", "1.6Mpps"] {
        let r = sim(&[("traffic.rate", rate)]);
        let per_frame_ns = r.cpu_utilization * 1e9 / r.throughput_pps;
        assert!(per_frame_ns <= last + 1e-6, "{rate}: {per_frame_ns} after {last}");
        let w = wakeups(&r) / r.forwarded_packets as f64;
        // CPU per frame = t_proc + t_wakeup x wake-ups per frame (t_poll = 0).
        assert!(close(per_frame_ns, 600.0 + 1000.0 * w, 5e-3), "{rate}: {per_frame_ns} vs {w}");
        last = per_frame_ns;
    }
}

#[test]
fn same_seed_same_result() {
    let a = sim(&[("traffic.rate", "1.3Mpps"), ("traffic.pattern", "poisson")]);
    let b = sim(&[("traffic.rate", "1.3Mpps"), ("traffic.pattern", "poisson")]);
    assert_eq!(a.forwarded_packets, b.forwarded_packets);
    assert_eq!(a.latency_ns.p99.to_bits(), b.latency_ns.p99.to_bits());
    assert_eq!(a.io, b.io);
}
