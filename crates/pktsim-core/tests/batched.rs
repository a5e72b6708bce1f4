//! Batched I/O (busy polling, batched system calls) against closed forms.

mod common;

use common::{close, simulate};
use pktsim_core::engine::SimResult;

fn node(io: &str, sets: &[(&str, &str)]) -> SimResult {
    // How each mode waits for frames: empty calls of 50 ns (busy-poll); an interrupt of
    // 500 ns and a 3 us wake-up (batched-syscall).
    let (irq, wait) = match io {
        "busy-poll" => ("", "t_empty = \"50ns\""),
        _ => ("t_irq = \"500ns\"", "t_wakeup = \"3us\""),
    };
    let text = format!(
        r#"
        [cpu]
        frequency = "2.93GHz"
        [cpu.idle]
        table = "poll"
        [link]
        rate = "10Gbit/s"
        [traffic]
        rate = "100%"
        size = "64B"
        [nic]
        rx_ring = 2048
        tx_ring = 2048
        [host]
        io = "{io}"
        {irq}
        t_proc = "200ns"
        [host.batch]
        size = 32
        t_call = "1500ns"
        t_packet = "100ns"
        {wait}
        [measure]
        warmup = "2ms"
        duration = "20ms"
        "#
    );
    simulate(&text, "batched.toml", sets)
}

#[test]
fn saturated_throughput_is_one_over_per_packet_plus_per_call_over_batch() {
    for io in ["busy-poll", "batched-syscall"] {
        for b in [1u32, 2, 8, 64, 500] {
            let r = node(io, &[("host.batch.size", &b.to_string())]);
            let per_packet_ns = 100.0 + 200.0 + 1500.0 / b as f64;
            let expected = 1e9 / per_packet_ns;
            assert!(close(r.throughput_pps, expected, 0.003), "{io} B={b}: {} vs {expected}", r.throughput_pps);
            assert!(close(r.packets_per_poll.mean, b as f64, 1e-9), "{io} B={b}: {}", r.packets_per_poll.mean);
        }
    }
}

#[test]
fn busy_polling_burns_the_core_but_reports_useful_work_apart() {
    let r = node("busy-poll", &[("traffic.rate", "100kpps")]);
    assert!(r.cpu_utilization > 0.999, "{}", r.cpu_utilization);
    // Each isolated frame: one call of 1500 + 100 ns and 200 ns of processing.
    assert!(close(r.cpu_useful, 100e3 * 1800e-9, 0.01), "{}", r.cpu_useful);
    assert_eq!(r.irq_per_s, 0.0);
    assert!(r.empty_polls > 0);
    // A frame waits for the current empty poll to end (0..50 ns), then its call.
    assert!(r.latency_ns.min >= 1800.0 - 1.0 && r.latency_ns.max <= 1850.0 + 2.0, "{:?}", r.latency_ns);
}

#[test]
fn a_sleeping_thread_pays_interrupt_and_wakeup_per_isolated_frame() {
    let r = node("batched-syscall", &[("traffic.rate", "100kpps")]);
    assert!(close(r.irqs_per_packet, 1.0, 0.01), "{}", r.irqs_per_packet);
    // t_irq + t_wakeup + t_call + t_packet + t_proc = 500 + 3000 + 1500 + 100 + 200.
    assert_eq!(r.latency_ns.mean, 5300.0);
    assert!(close(r.cpu_utilization, 100e3 * 5300e-9, 0.01), "{}", r.cpu_utilization);
    assert_eq!(r.empty_polls, 0);
}

#[test]
fn bigger_batches_amortise_the_call_and_the_wakeup() {
    let small = node("batched-syscall", &[("traffic.rate", "1Mpps"), ("host.batch.size", "1")]);
    let big = node("batched-syscall", &[("traffic.rate", "1Mpps"), ("host.batch.size", "64")]);
    // B = 1 cannot keep up with 1 Mpps: it saturates at 1 / 1.8 us.
    assert!(close(small.throughput_pps, 1e9 / 1800.0, 0.002), "{}", small.throughput_pps);
    assert!(small.loss_ratio > 0.3, "{}", small.loss_ratio);
    assert_eq!(big.loss_ratio, 0.0);
    assert!(big.packets_per_poll.mean > 1.5);
}
