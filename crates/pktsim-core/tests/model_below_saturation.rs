//! The analytical model's CPU load below saturation against the simulator's: every bundled
//! example (`examples/*.toml`; a chain's nodes each on their own) at 10, 30, 50, 70 and 90%
//! of the model's capacity. `cpu_load` is within 10% of the simulator's, and `cpu_load_max`
//! is never below it.
//!
//! The windows are short (a few ms of simulated time, the examples' seeds): the whole file
//! runs in seconds in release mode. `cargo test --release -p pktsim-core --test
//! model_below_saturation -- --nocapture` prints the table.

use std::path::{Path, PathBuf};

use pktsim_core::engine::SimResult;
use pktsim_core::model::Prediction;
use pktsim_core::predict::predict;
use pktsim_core::scenario::chain;
use pktsim_core::simulate::run;
use pktsim_core::{ResolvedScenario, Scenario};

const LOADS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
const TOLERANCE: f64 = 0.10;

/// Points where the closed forms are known to miss by more than the tolerance, and why
/// (each still checked against `cpu_load_max`; a point off by more than `limit` fails).
/// None today: the firewall node at 50 and 70% (+10.8%, +14.8% while the model took its
/// rounds at their mean) is within 7% since the rounds are a Markov chain
/// (`rates::poisson_interrupt_chain`). The model's `cpu_load_basis` says "estimate" where
/// it knows, and those points have 25%.
const OPEN: [(&str, f64, f64, &str); 0] = [];

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The nodes a file describes, with `sets` applied (a chain's each with the chain's traffic).
fn nodes(path: &Path, sets: &[(String, String)]) -> Vec<(String, ResolvedScenario)> {
    let text = std::fs::read_to_string(path).unwrap();
    let table = pktsim_core::loader::parse_toml_table(&text, &path.display().to_string()).unwrap();
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    if chain::is_chain(&table) {
        let c = chain::load_table(table, &path.display().to_string(), path.parent().unwrap(), sets)
            .unwrap_or_else(|e| panic!("{e}"));
        c.nodes.into_iter().zip(c.node_names).map(|(n, name)| (format!("{stem}[{name}]"), n)).collect()
    } else {
        vec![(stem, Scenario::load_path(path, sets).unwrap_or_else(|e| panic!("{e}")))]
    }
}

/// Simulated time for a run at `rate_pps`: at least 5 ms, and enough for 2,000 frames
/// (DIM's walk and the dynamic ITR settle in the warm-up).
fn window(rate_pps: f64) -> (String, String) {
    let ms = (2_000.0 / rate_pps * 1e3).clamp(5.0, 40.0).ceil();
    (format!("{}ms", (ms / 2.0).ceil().max(10.0)), format!("{ms}ms"))
}

/// The one-node file `path` offered `rate_pps` with the window (warm-up, duration) and
/// `extra` settings: the simulator's result and the model's prediction.
fn at_rate(path: &Path, rate_pps: f64, window: (&str, &str), extra: &[(&str, &str)]) -> (SimResult, Prediction) {
    let mut sets = vec![
        ("traffic.rate".to_string(), format!("{rate_pps:.0}pps")),
        ("measure.warmup".to_string(), window.0.to_string()),
        ("measure.duration".to_string(), window.1.to_string()),
    ];
    sets.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let sc = nodes(path, &sets).swap_remove(0).1;
    (run(&sc, Default::default()).unwrap(), predict(&sc))
}

struct Row {
    name: String,
    load: f64,
    model: f64,
    model_max: f64,
    sim: f64,
    basis: String,
}

fn measure() -> Vec<Row> {
    let mut rows = Vec::new();
    for path in examples() {
        for (i, (name, node)) in nodes(&path, &[]).into_iter().enumerate() {
            let capacity = predict(&node).capacity_pps;
            for &load in &LOADS {
                let rate = load * capacity;
                let (warmup, duration) = window(rate);
                let set = |k: &str, v: String| (k.to_string(), v);
                let sets = [
                    set("traffic.rate", format!("{:.0}pps", rate)),
                    set("measure.warmup", warmup),
                    set("measure.duration", duration),
                ];
                let sc = nodes(&path, &sets).swap_remove(i).1;
                let r: SimResult = run(&sc, Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
                // The model at the rate the window actually processed (a short window of
                // random or bursty arrivals holds a few per cent more or fewer frames).
                let seen = r.throughput_pps;
                let mut sets = sets.to_vec();
                sets[0].1 = format!("{seen:.0}pps");
                let p: Prediction = predict(&nodes(&path, &sets).swap_remove(i).1);
                rows.push(Row {
                    name: name.clone(),
                    load,
                    model: p.cpu_load,
                    model_max: p.cpu_load_max,
                    sim: r.cpu_utilization,
                    basis: p.cpu_load_basis.clone(),
                });
            }
        }
    }
    rows
}

#[test]
fn cpu_load_below_saturation_is_within_ten_percent_of_the_simulator() {
    let rows = measure();
    let mut bad = Vec::new();
    println!("{:<44} {:>5} {:>8} {:>8} {:>8} {:>7}", "example", "load", "model", "max", "sim", "err%");
    for r in &rows {
        let err = (r.model - r.sim) / r.sim;
        println!(
            "{:<44} {:>5.1} {:>8.4} {:>8.4} {:>8.4} {:>+7.1}  {}",
            r.name,
            r.load,
            r.model,
            r.model_max,
            r.sim,
            100.0 * err,
            r.basis.split(':').next().unwrap_or("")
        );
        let open = OPEN.iter().find(|o| o.0 == r.name && (o.1 - r.load).abs() < 1e-9);
        let limit = if r.basis.starts_with("estimate") { 0.25 } else { open.map_or(TOLERANCE, |o| o.2) };
        if err.abs() > limit {
            bad.push(format!("{} at {:.0}%: model {:.4}, simulator {:.4}", r.name, 100.0 * r.load, r.model, r.sim));
        }
        // (0.1%: the simulator runs each time rounded to whole picoseconds, the model not.)
        if r.model_max < r.sim * (1.0 - 1e-3) {
            bad.push(format!(
                "{} at {:.0}%: cpu_load_max {:.4} below the simulator's {:.4}",
                r.name,
                100.0 * r.load,
                r.model_max,
                r.sim
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Interrupts of a node whose tx queue completes on a vector of its own (the firewall node of
/// `router-firewall-chain`, 3.5 us a frame): the model's, rx and tx vectors together, against
/// the simulator's at 30, 50 and 70% load, with the ITR static at 10 and 30 us. The rx
/// rounds follow the chain of `rates::poisson_interrupt_chain` and the tx vector one round
/// per rx round. With the rounds at their mean and the tx completions a Poisson stream of
/// their own, the model gave 168.7 k/s where the simulator gives 121 k/s (+39%, 50% load,
/// 10 us). Today: within 6% at 30%, +8% / +15% at 50%, +25% / +33% at 70% (open: nearer
/// saturation the simulator's tx vector takes fewer rounds than its rx vector, 0.94 of them
/// at 70%, and a round's busy period varies more than the chain's two ways allow).
#[test]
fn interrupts_of_separate_rx_and_tx_vectors_are_the_simulators() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/router-firewall-chain.toml");
    let capacity = predict(&nodes(&path, &[]).swap_remove(1).1).capacity_pps;
    let mut bad = Vec::new();
    for interval in ["10us", "30us"] {
        for (load, limit) in [(0.3, 0.10), (0.5, 0.16), (0.7, 0.35)] {
            let set = |k: &str, v: &str| (k.to_string(), v.to_string());
            let rate = format!("{:.0}pps", load * capacity);
            let sets = [
                set("traffic.rate", &rate),
                set("nodes.1.nic.itr.mode", "static"),
                set("nodes.1.nic.itr.interval", interval),
                set("measure.warmup", "10ms"),
                set("measure.duration", "100ms"),
            ];
            let sc = nodes(&path, &sets).swap_remove(1).1;
            let sim = run(&sc, Default::default()).unwrap().irq_per_s;
            let model = predict(&sc).irq_per_s;
            println!("{interval} {load}: model {model:.0}/s, simulator {sim:.0}/s");
            if (model / sim - 1.0).abs() > limit {
                bad.push(format!("{interval} at {:.0}%: model {model:.0}/s, simulator {sim:.0}/s", 100.0 * load));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A veth NAPI thread with deferral (`examples/veth-threaded-napi.toml`, CBR, with
/// `napi_defer_hard_irqs` 2 and `gro_flush_timeout` 20, 50 and 200 us): the timer's rounds
/// each wake the thread again, and a chain ends after two empty ones. The model is within
/// 5% of the simulator at every load (1.5% at worst in these 60 ms windows but +3.0% at
/// 200 us and 10% load, 0.5% over 1 s; without deferral in the model it was off by up to
/// +101%, and by -24% while a chain's two empty timer polls were left out where every one
/// is empty), and `cpu_load_max` is never below it.
#[test]
fn a_veth_threads_deferral_is_the_simulators_below_saturation() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/veth-threaded-napi.toml");
    let capacity = predict(&nodes(&path, &[]).swap_remove(0).1).capacity_pps;
    let mut bad = Vec::new();
    for timeout in ["20us", "50us", "200us"] {
        for &load in &LOADS {
            let rate = load * capacity;
            let (r, p) = at_rate(
                &path,
                rate,
                ("10ms", "60ms"),
                &[("nic.napi.defer_hard_irqs", "2"), ("nic.napi.gro_flush_timeout", timeout)],
            );
            let err = (p.cpu_load - r.cpu_utilization) / r.cpu_utilization;
            println!(
                "{timeout:>6} {load:.1} model {:.4} max {:.4} sim {:.4} {:+.1}%",
                p.cpu_load,
                p.cpu_load_max,
                r.cpu_utilization,
                100.0 * err
            );
            if err.abs() > 0.05 || p.cpu_load_max < r.cpu_utilization * (1.0 - 1e-3) {
                bad.push(format!(
                    "{timeout} at {load}: model {:.4} (max {:.4}), simulator {:.4}",
                    p.cpu_load, p.cpu_load_max, r.cpu_utilization
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A reader on the CPU that receives its frames, with random service
/// (`python/pktsim/scenarios/veth-udp-receiver.toml`: evenly spaced frames, 6 us of
/// exponential processing each, an IPI and a poll per frame at these loads): the reader
/// runs in the idle time a frame's round leaves, and is still reading when the next frame
/// comes whenever the round ran long enough (`model::core_events`), so it sleeps and is woken
/// less often as the load grows. The model's CPU is within 7% at 10-70% of the capacity and
/// its wake-ups within 20% of the simulator's at 50% (with a wake-up for every frame the
/// CPU was 8% high at 50% and 70%, and the wake-ups 55% high).
#[test]
fn a_reader_beside_random_service_is_woken_as_often_as_the_simulators() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/pktsim/scenarios/veth-udp-receiver.toml");
    let close = |a: f64, b: f64, rel: f64| (a - b).abs() <= rel * b.abs();
    let capacity = predict(&nodes(&path, &[]).swap_remove(0).1).capacity_pps;
    for load in [0.1, 0.3, 0.5, 0.7] {
        let rate = load * capacity;
        let (r, p) = at_rate(&path, rate, ("20ms", "300ms"), &[]);
        let wakes_sim = r.io.json()["app"]["wakeups"].as_f64().unwrap() / 0.3;
        println!(
            "{load:.1}: CPU model {:.4} sim {:.4} ({:+.1}%), wake-ups a frame model {:.3} sim {:.3}",
            p.cpu_load,
            r.cpu_utilization,
            100.0 * (p.cpu_load / r.cpu_utilization - 1.0),
            p.wakeups_per_s / rate,
            wakes_sim / rate
        );
        assert!(
            close(p.cpu_load, r.cpu_utilization, 0.07),
            "{load}: model {}, simulator {}",
            p.cpu_load,
            r.cpu_utilization
        );
        if load == 0.5 {
            assert!(
                close(p.wakeups_per_s, wakes_sim, 0.20),
                "wake-ups: model {}, simulator {wakes_sim}",
                p.wakeups_per_s
            );
        }
    }
}
