//! The simulator's range: every time it adds up must fit its integer picoseconds (u64,
//! about 213 days) without wrapping. Rather than wrap silently or saturate into a wrong
//! answer, a scenario whose times or costs could leave that range is refused at load,
//! naming the key:
//!
//! | what | at most |
//! |---|---|
//! | warm-up + duration (`measure.*`) | 1,000,000 s (11.6 days) of simulated time |
//! | any one cost or delay: every key of the format whose value is a `Duration` (each is read as one, `units.rs`; a run's length and a trace's window are `TimeSpan`s) | 10 s |
//! | one frame's processing time from cycles (`cost.*`, FIB included, at `cpu.frequency`) or from `host.t_proc` + per byte | 10 s |
//! | one frame's time on the wire (`link.rate`, largest frame) | 10 s |
//! | one frame's time on the wire (`link.rate`, smallest frame) | at least 1 ps |
//! | `link.overhead` | 65,536 B |
//! | `measure.t_plus.nic_batch` | 1,024 frames |
//! | rx rings, `cpu.cores` x `nic.queues` | 1,024 (each keeps its own statistics) |
//!
//! With these bounds the largest sum the engine forms — the end of the run plus a batched
//! call of 65,536 frames of 10 s each — stays below 2^63 ps.

use crate::error::{ConfigError, Result};

use super::ResolvedScenario;

pub const MAX_RUN_PS: u64 = 1_000_000 * 1_000_000_000_000;
pub use crate::units::MAX_STEP_PS;
pub const MAX_OVERHEAD_BYTES: u64 = 65_536;
pub const MAX_NIC_BATCH: u32 = 1_024;
/// Rx rings (cores x queues): each keeps its own latency histogram (about 235 KB).
pub const MAX_RINGS: u64 = 1_024;

fn secs(ps: f64) -> String {
    format!("{:.6}s", ps / 1e12)
}

/// Check a validated scenario against the simulator's range (see the module header).
pub(super) fn check(sc: &ResolvedScenario) -> Result<()> {
    let s = &sc.scenario;
    let origin = sc.origin.as_str();
    let err = |key: &str, value: String, expected: String| -> crate::error::Error {
        ConfigError::new(origin, key, Some(value), expected).into()
    };

    let rings = s.cpu.cores as u64 * s.nic.queues.len() as u64;
    if rings > MAX_RINGS {
        let key = if s.nic.queues.len() > 1 { "nic.queues" } else { "cpu.cores" };
        return Err(err(
            key,
            format!("{} cores x {} queues = {rings} rx rings", s.cpu.cores, s.nic.queues.len()),
            format!("at most {MAX_RINGS} rx rings in all (each keeps its own latency statistics)"),
        ));
    }
    let m = &s.measure;
    if m.warmup.ps.saturating_add(m.duration.ps) > MAX_RUN_PS {
        return Err(err(
            "measure.duration",
            format!("warmup {:?} + duration {:?}", m.warmup.to_string(), m.duration.to_string()),
            "at most 1000000s (11.6 days) of simulated time for warm-up and duration together".into(),
        ));
    }

    if let Some(tp) = &m.t_plus {
        if tp.nic_batch > MAX_NIC_BATCH {
            return Err(err(
                "measure.t_plus.nic_batch",
                tp.nic_batch.to_string(),
                format!("at most {MAX_NIC_BATCH} frames"),
            ));
        }
    }

    // Per-frame times at the largest frame.
    let max_frame = sc.sources.iter().flat_map(|src| src.size.distribution()).map(|(b, _)| b).max().unwrap_or(0) as f64;
    let mean_frame = sc.mean_frame_bytes();
    let (h, batch) = (&s.host, s.host.io.batch().cloned().unwrap_or_default());
    for (key, per_byte) in [("host.t_proc_per_byte", h.stack.t_proc_per_byte), ("host.batch.t_byte", batch.t_byte)] {
        if let Some(tpb) = per_byte {
            let ps = tpb.fs_per_byte as f64 * max_frame / 1e3;
            if !(ps <= MAX_STEP_PS as f64) {
                return Err(err(
                    key,
                    format!("{:?} ({} for a {max_frame} B frame)", tpb.to_string(), secs(ps)),
                    "at most 10s per frame in all".into(),
                ));
            }
        }
    }
    let overhead = s.link.overhead.bytes;
    if overhead > MAX_OVERHEAD_BYTES {
        return Err(err(
            "link.overhead",
            format!("{:?}", s.link.overhead.to_string()),
            format!("at most {MAX_OVERHEAD_BYTES}B of framing per frame"),
        ));
    }
    let wire_ps = (max_frame + overhead as f64) * 8.0 / s.link.rate.bps * 1e12;
    if !(wire_ps <= MAX_STEP_PS as f64) {
        return Err(err(
            "link.rate",
            format!("{:?} ({} on the wire for a {max_frame} B frame)", s.link.rate.to_string(), secs(wire_ps)),
            "a line rate that sends the largest frame in at most 10s".into(),
        ));
    }
    // Time has picosecond steps: the smallest frame must take at least one on the wire, or
    // frames would pile up at one instant (this also bounds the offered rate at 10^12 pps).
    let min_frame = sc.sources.iter().flat_map(|src| src.size.distribution()).map(|(b, _)| b).min().unwrap_or(0) as f64;
    let min_wire_ps = (min_frame + overhead as f64) * 8.0 / s.link.rate.bps * 1e12;
    if !(min_wire_ps >= 1.0) {
        return Err(err(
            "link.rate",
            format!("{:?} ({min_wire_ps:.3e} ps on the wire for a {min_frame} B frame)", s.link.rate.to_string()),
            "a line rate that takes at least 1ps per frame (pktsim's time step): at most about 500Tbit/s for 64 B frames".into(),
        ));
    }
    let (groups, _) = sc.group_cycles();
    let per_byte_total: f64 = sc.cost.per_byte.0.iter().sum();
    let cycles = groups.total() + per_byte_total * (max_frame - mean_frame).max(0.0);
    let f = s.cpu.frequency.hz;
    let ps = cycles / f * 1e12;
    if !(ps <= MAX_STEP_PS as f64) {
        return Err(err(
            "cost",
            format!("{cycles:.4e} cycles per frame at {} ({})", s.cpu.frequency, secs(ps)),
            "cycles per frame (cost.profile, cost.cycles, cost.per_byte and the FIB model at cpu.frequency) taking at most 10s".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::scenario::Scenario;

    const BASE: &str = "[cpu]\nfrequency = \"3.3GHz\"\n[link]\nrate = \"10Gbit/s\"\n[traffic]\nrate = \"1Mpps\"\n[cost]\nprofile = \"raumer2015-64B\"\n";

    fn load(sets: &[(&str, &str)]) -> Result<(), String> {
        let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Scenario::load_toml(BASE, "l.toml", Path::new("."), &sets).map(|_| ()).map_err(|e| e.to_string())
    }

    fn refused(sets: &[(&str, &str)], key: &str) {
        match load(sets) {
            Ok(()) => panic!("{sets:?} was accepted"),
            Err(m) => assert!(m.starts_with(&format!("l.toml: {key}")), "{sets:?}: {m}"),
        }
    }

    #[test]
    fn costs_and_times_that_would_wrap_the_clock_are_refused_naming_the_key() {
        refused(&[("cost.cycles.other", "1e17cycles")], "cost");
        refused(&[("cpu.frequency", "1Hz")], "cost");
        refused(&[("host.t_proc", "1us"), ("host.t_proc_per_byte", "1e12ns/B")], "host.t_proc_per_byte");
        refused(&[("measure.t_plus.t_dma", "9000000s"), ("measure.t_plus.nic_batch", "8")], "measure.t_plus.t_dma");
        refused(&[("measure.t_plus.t_dma", "1us"), ("measure.t_plus.nic_batch", "100000")], "measure.t_plus.nic_batch");
        refused(&[("measure.duration", "2000000s")], "measure.duration");
        refused(&[("host.t_irq", "11s")], "host.t_irq");
        refused(&[("host.io", "xdp"), ("host.xdp.t_driver", "11s")], "host.xdp.t_driver");
        refused(&[("app.wake_latency", "11s")], "app.wake_latency");
        refused(&[("socket.busy_poll", "11s"), ("app.t_call", "1us"), ("host.t_poll", "1us")], "socket.busy_poll");
        refused(&[("cpu.cores", "4096"), ("nic.queues", "[\"a\", \"b\", \"c\", \"d\"]")], "nic.queues");
        refused(&[("cpu.cores", "2000")], "cpu.cores");
        refused(&[("host.io", "server"), ("host.strategy.slice", "1h")], "host.strategy.slice");
        refused(&[("link.overhead", "1MB"), ("traffic.rate", "100%")], "link.overhead");
        refused(&[("link.rate", "1bit/s"), ("traffic.rate", "100%")], "link.rate");
        refused(&[("link.rate", "1e30Gbit/s")], "link.rate");
    }

    #[test]
    fn the_largest_accepted_values_are_accepted() {
        assert_eq!(load(&[("host.t_irq", "10s"), ("measure.duration", "999000s")]), Ok(()));
        assert_eq!(load(&[("host.t_proc", "10s")]), Ok(()));
        assert_eq!(load(&[("link.rate", "100bit/s"), ("traffic.rate", "100%")]), Ok(()), "84 B in 6.72 s");
    }
}
