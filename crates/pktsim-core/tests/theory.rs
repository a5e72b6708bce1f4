//! The engine against queueing theory, in the plain single-server mode (no IRQ or NAPI
//! effects): M/M/1/K loss and sojourn, M/D/1 waiting time (Pollaczek-Khinchine), at more
//! than 10^6 packets each. A very fast link keeps the arrivals Poisson (framing spacing
//! negligible), and a zero DMA delay makes the latency the sojourn time.

mod common;

use common::simulate as sim_toml;
use pktsim_core::engine::SimResult;

fn simulate(rate: &str, service: &str, dist: &str, ring: u32, duration: &str, seed: u64) -> SimResult {
    let text = format!(
        r#"
        seed = {seed}
        [cpu]
        frequency = "1GHz"
        [link]
        rate = "100Tbit/s"
        [traffic]
        rate = "{rate}"
        pattern = "poisson"
        size = "64B"
        [nic]
        rx_ring = {ring}
        refill_batch = 1
        tx_ring = 65536
        [host]
        io = "server"
        t_proc = "{service}"
        service = "{dist}"
        [measure]
        warmup = "20ms"
        duration = "{duration}"
        "#
    );
    sim_toml(&text, "theory.toml", &[])
}

#[test]
fn mm1k_loss_probability_and_mean_sojourn() {
    // lambda = 0.9 Mpps, mu = 1 Mpps, K = 10 in the system (11 descriptors, one kept empty).
    let (lambda, mu, k) = (0.9e6_f64, 1e6_f64, 10_i32);
    let rho = lambda / mu;
    let p_k = (1.0 - rho) * rho.powi(k) / (1.0 - rho.powi(k + 1));
    let l = rho / (1.0 - rho) - (k + 1) as f64 * rho.powi(k + 1) / (1.0 - rho.powi(k + 1));
    let w_ns = l / (lambda * (1.0 - p_k)) * 1e9;

    let r = simulate("0.9Mpps", "1us", "exponential", 11, "1500ms", 11);
    assert!(r.offered_packets > 1_000_000, "{}", r.offered_packets);
    let loss_err = (r.loss_ratio - p_k).abs() / p_k;
    let w_err = (r.latency_ns.mean - w_ns).abs() / w_ns;
    eprintln!(
        "M/M/1/K: loss {:.5} vs {:.5} ({:.2}%), W {:.1} ns vs {:.1} ns ({:.2}%)",
        r.loss_ratio,
        p_k,
        100.0 * loss_err,
        r.latency_ns.mean,
        w_ns,
        100.0 * w_err
    );
    assert!(loss_err < 0.04, "loss {} vs {}", r.loss_ratio, p_k);
    assert!(w_err < 0.02, "sojourn {} vs {}", r.latency_ns.mean, w_ns);
}

#[test]
fn md1_mean_waiting_time_pollaczek_khinchine() {
    // rho = 0.8 with deterministic 1 us service: Wq = rho / (2 mu (1 - rho)) = 2 us.
    let (lambda, mu) = (0.8e6_f64, 1e6_f64);
    let rho = lambda / mu;
    let wq_ns = rho / (2.0 * mu * (1.0 - rho)) * 1e9;
    let r = simulate("0.8Mpps", "1us", "constant", 65536, "1500ms", 5);
    assert!(r.forwarded_packets > 1_000_000, "{}", r.forwarded_packets);
    assert_eq!(r.loss_ratio, 0.0);
    let wq = r.latency_ns.mean - 1000.0;
    let err = (wq - wq_ns).abs() / wq_ns;
    eprintln!("M/D/1: Wq {wq:.1} ns vs {wq_ns:.1} ns ({:.2}%)", 100.0 * err);
    assert!(err < 0.03, "Wq {wq} vs {wq_ns}");
    // Deterministic service: nobody is faster than the service time.
    assert!(r.latency_ns.min >= 999.0);
}

#[test]
fn mm1_utilisation_is_rho() {
    let r = simulate("0.5Mpps", "1us", "exponential", 65536, "500ms", 3);
    assert!((r.cpu_utilization - 0.5).abs() < 0.01, "{}", r.cpu_utilization);
    // M/M/1 mean sojourn 1 / (mu - lambda) = 2 us.
    assert!((r.latency_ns.mean - 2000.0).abs() / 2000.0 < 0.02, "{}", r.latency_ns.mean);
}
