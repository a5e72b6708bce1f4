//! The clock a node's cores run at: the steady state of its cpufreq governor
//! (`[cpu.freq]`, [`crate::scenario::Freq`]), and the node as it runs at that clock.
//!
//! A scaling governor asks, after each sample, for a clock that depends on how busy the
//! core was at the clock it had ([`Freq::request_hz`]). Under a steady load the clock
//! settles where the request equals the clock: `f = request(f, busy(f))`. `busy(f)` falls
//! as `f` rises (the same work takes less of the time), so `f - request(f, busy(f))` rises
//! with `f` and the steady clock is found between `min` and `cpu.frequency` by false
//! position (a few evaluations of the model).
//! `busy(f)` is the analytical model's load of the node's busiest core at `f` (the cores
//! share one policy here), so the model and the simulator run the node at the same clock
//! ([`crate::predict::predict`] and [`crate::simulate::run`] start from it).
//!
//! At clock `f` every CPU cost of the scenario takes `cpu.frequency / f` times as long:
//! the cost profile's cycles, `cpu.contention` and the cache latencies follow
//! `cpu.frequency`, set to `f`; the times under `[host]` and `[app]` named `t_*` and
//! `tx_lock` (what the host's and the application's work costs) are scaled. What is not the
//! core's work stays as stated: idle states' exit latencies and explicit refills, wake-up
//! latencies, time slices, the memory latency, the interference, the NIC.

use crate::scenario::{Freq, ResolvedScenario};
use crate::units::{Duration, Frequency, TimePerByte};

/// The steady clock to within this share of the highest (a kHz at 1 GHz).
const TOLERANCE: f64 = 1e-6;
/// Most evaluations of the model while looking for it.
const MAX_STEPS: usize = 60;

/// The node `sc` runs as under its governor, with the clock it settled at (Hz), given the
/// busiest core's load at a clock (`busy`, 0..1, of the node as [`at`] makes it). `None`
/// with `performance` (the node as stated).
pub fn settled(sc: &ResolvedScenario, busy: &dyn Fn(&ResolvedScenario) -> f64) -> Option<(f64, ResolvedScenario)> {
    let freq = &sc.scenario.cpu.freq;
    if !freq.scales() {
        return None;
    }
    let max = sc.scenario.cpu.frequency.hz;
    let min = freq.min.map_or(max, |m| m.hz);
    // How far the governor's request is below the clock (rises with the clock).
    let gap = |f: f64| f - freq.request_hz(f, busy(&at(sc, f)).clamp(0.0, 1.0), max);
    // The highest clock first: a node at full load stops there with one look.
    let g_max = gap(max);
    let f = if g_max <= 0.0 {
        max
    } else {
        match gap(min) {
            g_min if g_min >= 0.0 => min,
            g_min => steady(min, g_min, max, g_max, &gap),
        }
    };
    let mut node = at(sc, f);
    node.notes.push(format!(
        "cpu.freq: {} settles at {} (of {}) at this load; every CPU cost takes {:.3}x as long",
        freq.name(),
        Frequency::from_hz((f / 1e6).round() * 1e6),
        sc.scenario.cpu.frequency,
        max / f
    ));
    Some((f, node))
}

/// The root of `gap` between `a` (`ga < 0`) and `b` (`gb > 0`): false position with the
/// Illinois step (the end that stays has its value halved), so it converges in a few
/// evaluations on a smooth gap and keeps the root bracketed on a rough one (the dynamic
/// moderation's settled level moves in steps).
fn steady(mut a: f64, mut ga: f64, mut b: f64, mut gb: f64, gap: &dyn Fn(f64) -> f64) -> f64 {
    let tol = TOLERANCE * b;
    let mut kept = 0i8;
    for _ in 0..MAX_STEPS {
        let c = ((a * gb - b * ga) / (gb - ga)).clamp(a, b);
        let gc = gap(c);
        if gc == 0.0 || b - a < tol {
            return c;
        }
        if gc > 0.0 {
            (b, gb) = (c, gc);
            if kept == -1 {
                ga /= 2.0;
            }
            kept = -1;
        } else {
            (a, ga) = (c, gc);
            if kept == 1 {
                gb /= 2.0;
            }
            kept = 1;
        }
        if gc.abs() < tol {
            return c;
        }
    }
    0.5 * (a + b)
}

/// Node `sc` at clock `f_hz` (see the module header), its governor pinned there
/// (`performance` at `cpu.frequency = f_hz`).
pub fn at(sc: &ResolvedScenario, f_hz: f64) -> ResolvedScenario {
    let mut node = sc.clone();
    let s = &mut node.scenario;
    let factor = s.cpu.frequency.hz / f_hz;
    s.cpu.frequency = Frequency::from_hz(f_hz);
    s.cpu.freq = Freq::default();
    if factor != 1.0 {
        s.host = scaled(&s.host, factor);
        s.app = s.app.as_ref().map(|a| scaled(a, factor));
    }
    node
}

/// A section with its CPU costs (keys `t_*` and `tx_lock`, at any depth) `factor` times
/// as long: written out, scaled, read back.
fn scaled<T: serde::Serialize + serde::de::DeserializeOwned>(section: &T, factor: f64) -> T {
    let mut v = toml::Value::try_from(section).expect("a scenario section writes out as TOML");
    scale_value(&mut v, false, factor);
    v.try_into().expect("a scenario section with scaled times reads back")
}

fn scale_value(v: &mut toml::Value, cost: bool, factor: f64) {
    match v {
        toml::Value::Table(t) => {
            for (k, x) in t.iter_mut() {
                scale_value(x, k.starts_with("t_") || k == "tx_lock", factor);
            }
        }
        toml::Value::Array(a) if cost => a.iter_mut().for_each(|x| scale_value(x, true, factor)),
        toml::Value::String(text) if cost => {
            if let Ok(d) = Duration::parse(text) {
                *text = format!("{}ps", (d.ps as f64 * factor).round() as u64);
            } else if let Ok(b) = TimePerByte::parse(text) {
                *text = format!("{}ps/B", (b.fs_per_byte as f64 * factor).round() / 1e3);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::engine::costs::Costs;
    use crate::predict::predict;
    use crate::scenario::Scenario;

    fn load(toml: &str) -> ResolvedScenario {
        Scenario::load_toml(toml, "t.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    const BASE: &str =
        "[cpu]\nfrequency = \"4GHz\"\n[link]\nrate = \"10Gbit/s\"\n[cost]\nprofile = \"raumer2015-64B\"\n";

    /// Every I/O mode's costs (the host's, its mode's own, the application's) take twice as
    /// long at half the clock: none is left out, defaults included.
    #[test]
    fn at_half_the_clock_every_cost_of_every_mode_takes_twice_as_long() {
        let modes = [
            "[host]\nio = \"napi\"\nt_irq = \"300ns\"\ntx_lock = \"50ns\"\n[app]\nt_packet = \"100ns\"",
            "[host]\nio = \"server\"",
            "[host]\nio = \"busy-poll\"\n[host.batch]\nt_call = \"80ns\"\nt_empty = \"20ns\"\nt_byte = \"1ns/B\"",
            "[host]\nio = \"batched-syscall\"\n[host.batch]\nt_call = \"80ns\"\nt_packet = \"7ns\"",
            "[host]\nio = \"threaded-napi\"\n[host.thread]\nt_sleep = \"200ns\"",
            "[host]\nio = \"xdp\"\n[host.xdp]\naction = \"tx\"\nt_driver = \"40ns\"\nt_xmit = \"20ns\"\nt_flush = \"100ns\"",
            "[host]\nio = \"af-xdp\"\n[host.xdp]\naction = \"redirect\"\nt_driver = \"40ns\"\n[host.af_xdp]\nt_xsk = \"10ns\"\nzero_copy = false\nt_copy = \"30ns\"\nt_copy_per_byte = \"0.5ns/B\"\n[app]\nt_packet = \"50ns\"",
        ];
        for m in modes {
            let sc = load(&format!("{BASE}[traffic]\nrate = \"1Mpps\"\n{m}"));
            let half = at(&sc, 2e9);
            let (a, b) = (Costs::of(&sc), Costs::of(&half));
            assert_eq!(b.t_irq.ps(), 2 * a.t_irq.ps(), "{m}");
            assert_eq!(b.t_poll.ps(), 2 * a.t_poll.ps(), "{m}");
            assert_eq!(b.tx_lock.ps(), 2 * a.tx_lock.ps(), "{m}");
            assert!(b.proc_fixed.ps().abs_diff(2 * a.proc_fixed.ps()) <= 1, "{m}");
            assert!(b.t_clean.ps().abs_diff(2 * a.t_clean.ps()) <= 1, "{m}");
            // The model's price of a frame, term by term.
            let (pa, pb) = (predict(&sc), predict(&half));
            for (k, x) in &pa.frame_cost_ns {
                let y = pb.frame_cost_ns[k];
                assert!((y - 2.0 * x).abs() <= 1e-6 * x.abs() + 2e-3, "{m}: {k} {x} ns -> {y} ns");
            }
            assert!((pb.ns_per_packet - 2.0 * pa.ns_per_packet).abs() < 1e-3, "{m}");
            let app = |s: &ResolvedScenario| s.scenario.app.as_ref().map(|a| a.t_packet.ps);
            assert_eq!(app(&half), app(&sc).map(|p| 2 * p), "{m}");
            // What is not the core's work stays.
            assert_eq!(half.scenario.nic, sc.scenario.nic);
            assert_eq!(half.scenario.cpu.idle, sc.scenario.cpu.idle);
        }
    }

    /// Work w at the full clock, one interrupt per frame, no idle state: the busy share at
    /// clock f is w x max / f. intel_pstate settles where f = 1.25 max busy, so busy =
    /// sqrt(0.8 w), until the lowest clock, where busy = w max / min; schedutil settles at
    /// busy = 0.8 between the two.
    #[test]
    fn the_governors_settle_where_their_closed_forms_say() {
        let node = |gov: &str, rate: &str| {
            load(&format!(
                "{BASE}[cpu.idle]\ntable = \"poll\"\n[cpu.freq]\ngovernor = \"{gov}\"\nmin = \"1GHz\"\n[nic.itr]\nmode = \"off\"\n\
                 [host]\nio = \"napi\"\nt_proc = \"400ns\"\nt_irq = \"0ns\"\nt_poll = \"0ns\"\nt_clean = \"0ns\"\n[traffic]\nrate = \"{rate}\""
            ))
        };
        let busy = |s: &ResolvedScenario| predict(s).cpu_load;
        for (rate, w) in [("100kpps", 0.04f64), ("500kpps", 0.2), ("1Mpps", 0.4)] {
            let (f, n) = settled(&node("powersave", rate), &busy).unwrap();
            let u = busy(&n);
            let expect = if 1.25 * 4e9 * (0.8 * w).sqrt() < 1e9 { w * 4.0 } else { (0.8 * w).sqrt() };
            assert!((u - expect).abs() < 1e-6, "powersave {rate}: busy {u} at {f} Hz, closed form {expect}");
            let (f, n) = settled(&node("schedutil", rate), &busy).unwrap();
            let u = busy(&n);
            let expect = if w * 4.0 < 0.8 { w * 4.0 } else { 0.8 };
            assert!((u - expect).abs() < 1e-6, "schedutil {rate}: busy {u} at {f} Hz, closed form {expect}");
        }
        assert!(settled(&load(&format!("{BASE}[traffic]\nrate = \"1Mpps\"")), &busy).is_none());
        // The capacity is the node's at full load (400 ns a frame at 4 GHz), whatever the
        // clock this load settles at.
        assert!((predict(&node("powersave", "100kpps")).capacity_pps - 2.5e6).abs() < 1.0);
    }

    /// The simulator runs the node at the governor's steady clock: at 500 kpps of 400 ns
    /// frames (w = 0.2 at 4 GHz) intel_pstate settles at 2 GHz, where the core is busy 40%
    /// of the time, frames take 800 ns, and the result says so.
    #[test]
    fn the_simulator_runs_at_the_steady_clock() {
        let sc = load(&format!(
            "{BASE}[cpu.idle]\ntable = \"poll\"\n[cpu.freq]\ngovernor = \"powersave\"\nmin = \"1GHz\"\n[nic.itr]\nmode = \"off\"\n\
             [host]\nio = \"napi\"\nt_proc = \"400ns\"\nt_irq = \"0ns\"\nt_poll = \"0ns\"\nt_clean = \"0ns\"\n\
             [traffic]\nrate = \"500kpps\"\n[measure]\nwarmup = \"1ms\"\nduration = \"20ms\""
        ));
        let r = crate::simulate::run(&sc, Default::default()).unwrap();
        assert!((r.cpu_freq_hz - 2e9).abs() < 1e3, "{}", r.cpu_freq_hz);
        assert!((r.cpu_utilization - 0.4).abs() < 1e-3, "{}", r.cpu_utilization);
        assert!((r.t_proc_ns - 800.0).abs() < 1e-3, "{}", r.t_proc_ns);
        assert!(
            r.notes.iter().any(|n| n.starts_with("cpu.freq: powersave settles at 2GHz (of 4GHz)")),
            "{:?}",
            r.notes
        );
        // A run stopped before it starts looks for the clock no further and stops.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let e = crate::simulate::run(&sc, stop).unwrap_err().to_string();
        assert!(e.contains(crate::engine::INTERRUPTED), "{e}");
    }
}
