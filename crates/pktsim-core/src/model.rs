//! The analytical cycles-per-packet model of 000 (sections III-B, IV, V).
//!
//! ```text
//!   C_total   = sum_i C_i(S)                                   (Eq. 2, per-byte terms included)
//!   R_max     = f_cpu / C_total                                 (Eq. 1, one core)
//!   C_total   = f_cpu * CPU_load / R   = C_active / R           (Eq. 3, from a measurement)
//!   R_cpu(k)  = k * f_cpu / (C_total + (k - 1) * C_contention)  (k cores)
//!   R_line    = link_rate / (8 * (S + overhead))                (Ethernet framing)
//!   predicted = min(offered, R_cpu(k), R_line)
//!   CPU load  = predicted * C_core / (k * f_cpu)
//! ```
//!
//! The routing group is moved from the profile's FIB to the scenario's by [`crate::fib`].

use serde::Serialize;

use crate::cost::{Group, GroupCycles, GROUP_NAMES};
use crate::fib::FibReport;
use crate::scenario::ResolvedScenario;

/// Everything the analytical model says about a sc.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub name: String,
    pub frequency_hz: f64,
    pub cores: u32,
    pub mean_frame_bytes: f64,
    /// Cycles per packet by group (000 names), after per-byte terms and the FIB model.
    pub cycles_by_group: std::collections::BTreeMap<String, f64>,
    /// Eq. 2.
    pub c_total_cycles: f64,
    /// Cycles per packet on each core including contention with the other cores.
    pub c_core_cycles: f64,
    /// Time one core spends per packet.
    pub ns_per_packet: f64,
    /// Eq. 1: one core's maximum rate.
    pub r_max_pps: f64,
    /// All cores' maximum rate.
    pub r_cpu_pps: f64,
    pub line_rate_pps: f64,
    pub offered_pps: f64,
    pub predicted_pps: f64,
    /// Average load of the forwarding cores at the predicted rate (0..1).
    pub cpu_load: f64,
    /// The resource that limits the node first: "cpu" or "link".
    pub bottleneck: &'static str,
    /// Whether the offered load reaches that limit (packets are dropped).
    pub saturated: bool,
    /// Offered packets the node cannot forward, per second.
    pub dropped_pps: f64,
    pub fib: FibReport,
}

/// Processing cycles per group for the node's traffic (see
/// [`ResolvedScenario::group_cycles`]).
pub fn group_cycles(sc: &ResolvedScenario) -> (GroupCycles, FibReport) {
    sc.group_cycles()
}

/// The analytical prediction for a sc.
pub fn predict(sc: &ResolvedScenario) -> Prediction {
    let s = &sc.scenario;
    let f = s.cpu.frequency.hz;
    let k = s.cpu.cores;
    let (mut cycles, fib) = group_cycles(sc);
    // Batched I/O (busy-poll, batched-syscall): the call cost shared by a full batch, the
    // per-frame I/O and the copy belong to reception (000's C_RX).
    if matches!(s.host.io, crate::scenario::IoModeKind::BusyPoll | crate::scenario::IoModeKind::BatchedSyscall) {
        let b = &s.host.batch;
        let ps = b.t_packet.ps as f64 + b.t_call.ps as f64 / b.size as f64 + b.t_byte.map_or(0.0, |x| x.fs_per_byte as f64 / 1e3 * sc.mean_frame_bytes());
        cycles.set(Group::Rx, cycles.get(Group::Rx) + ps * 1e-12 * s.cpu.frequency.hz);
    }
    // Threaded NAPI at saturation: every poll takes a full weight and the thread never
    // sleeps, so the poll cost is shared by `weight` frames and wake-ups vanish.
    if s.host.io == crate::scenario::IoModeKind::ThreadedNapi {
        let ps = s.host.t_poll.ps as f64 / s.host.weight as f64;
        cycles.set(Group::Rx, cycles.get(Group::Rx) + ps * 1e-12 * s.cpu.frequency.hz);
    }
    let c_total = cycles.total();
    let c_core = c_total + (k as f64 - 1.0) * s.cpu.contention.cycles;
    let r_max = f / c_total;
    let r_cpu = k as f64 * f / c_core;
    let line = sc.line_rate_pps();
    let offered = sc.offered_pps();
    let capacity = r_cpu.min(line);
    let predicted = offered.min(capacity);
    let cpu_load = (predicted * c_core / (k as f64 * f)).min(1.0);
    Prediction {
        name: s.name.clone().unwrap_or_else(|| sc.origin.clone()),
        frequency_hz: f,
        cores: k,
        mean_frame_bytes: sc.mean_frame_bytes(),
        cycles_by_group: GROUP_NAMES.iter().map(|g| g.to_string()).zip(cycles.0).collect(),
        c_total_cycles: c_total,
        c_core_cycles: c_core,
        ns_per_packet: c_core / f * 1e9,
        r_max_pps: r_max,
        r_cpu_pps: r_cpu,
        line_rate_pps: line,
        offered_pps: offered,
        predicted_pps: predicted,
        cpu_load,
        bottleneck: if r_cpu < line { "cpu" } else { "link" },
        saturated: offered >= capacity * (1.0 - 1e-12),
        dropped_pps: (offered - predicted).max(0.0),
        fib,
    }
}

/// Eq. 3: cycles per packet from a measured rate and CPU load, or from active cycles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FromMeasurement {
    pub rate_pps: f64,
    pub frequency_hz: f64,
    pub cpu_load: f64,
    pub active_cycles_per_s: f64,
    pub c_total_cycles: f64,
    /// Eq. 1 with that C_total: the rate at full load.
    pub r_max_pps: f64,
}

/// `C_total = f * load / R` (or `C_active / R` when `active_cycles_per_s` is given).
pub fn from_measurement(rate_pps: f64, frequency_hz: f64, cpu_load: Option<f64>, active_cycles_per_s: Option<f64>) -> Result<FromMeasurement, String> {
    if !(rate_pps.is_finite() && rate_pps > 0.0) {
        return Err(format!("rate = {rate_pps} pps: expected a measured packet rate above 0"));
    }
    if !(frequency_hz.is_finite() && frequency_hz > 0.0) {
        return Err(format!("freq = {frequency_hz} Hz: expected a frequency above 0"));
    }
    let active = match (cpu_load, active_cycles_per_s) {
        (Some(_), Some(_)) => return Err("give either the CPU load or the active cycles, not both".into()),
        (None, None) => return Err("give the CPU load (--cpu-load 100%) or the active cycles per second (--active-cycles)".into()),
        (Some(load), None) => {
            if !(load > 0.0 && load <= 1.0) {
                return Err(format!("cpu-load = {}%: expected a load above 0% and at most 100%", load * 100.0));
            }
            frequency_hz * load
        }
        (None, Some(a)) => {
            if !(a > 0.0 && a <= frequency_hz * (1.0 + 1e-9)) {
                return Err(format!("active-cycles = {a}/s: expected above 0 and at most the frequency ({frequency_hz} cycles/s)"));
            }
            a
        }
    };
    let c_total = active / rate_pps;
    Ok(FromMeasurement {
        rate_pps,
        frequency_hz,
        cpu_load: active / frequency_hz,
        active_cycles_per_s: active,
        c_total_cycles: c_total,
        r_max_pps: frequency_hz / c_total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use std::path::Path;

    fn node(extra: &str) -> ResolvedScenario {
        let text = format!(
            r#"
            [cpu]
            frequency = "3.3GHz"
            [link]
            rate = "10Gbit/s"
            [traffic]
            size = "64B"
            [cost]
            profile = "raumer2015-64B"
            {extra}
            "#
        );
        Scenario::load_toml(&text, "t.toml", Path::new("."), &[]).unwrap()
    }

    #[test]
    fn eq1_and_eq2_for_table_ii_64b() {
        let p = predict(&node(""));
        assert_eq!(p.c_total_cycles, 1978.0); // Table II row sums to 1978 (printed total 1979)
        assert!((p.r_max_pps - 3.3e9 / 1978.0).abs() < 1e-6);
        assert_eq!(p.bottleneck, "cpu");
        assert!(p.saturated, "offered defaults to line rate");
        assert!((p.cpu_load - 1.0).abs() < 1e-12);
    }

    #[test]
    fn line_rate_of_64b_frames_at_10g_is_14_88_mpps() {
        let p = predict(&node(""));
        assert!((p.line_rate_pps - 14_880_952.380952).abs() < 1e-3, "{}", p.line_rate_pps);
    }

    #[test]
    fn below_capacity_the_prediction_is_the_offered_rate() {
        let n = Scenario::load_toml(
            r#"
            [cpu]
            frequency = "3.3GHz"
            [link]
            rate = "10Gbit/s"
            [traffic]
            rate = "1Mpps"
            [cost]
            profile = "raumer2015-64B"
            "#,
            "t",
            Path::new("."),
            &[],
        )
        .unwrap();
        let p = predict(&n);
        assert_eq!(p.predicted_pps, 1e6);
        assert!(!p.saturated);
        assert!((p.cpu_load - 1e6 * 1978.0 / 3.3e9).abs() < 1e-12);
    }

    #[test]
    fn cores_scale_linearly_without_contention_and_sublinearly_with() {
        let one = predict(&node(""));
        let mut n = node("");
        n.scenario.cpu.cores = 4;
        let four = predict(&n);
        assert!((four.r_cpu_pps / one.r_cpu_pps - 4.0).abs() < 1e-12);
        n.scenario.cpu.contention = crate::units::Cycles::new(100.0);
        let four_c = predict(&n);
        assert!((four_c.r_cpu_pps - 4.0 * 3.3e9 / (1978.0 + 300.0)).abs() < 1e-6);
    }

    #[test]
    fn eq3_inverts_eq1() {
        let m = from_measurement(1.67e6, 3.3e9, Some(1.0), None).unwrap();
        assert!((m.c_total_cycles - 1976.047904).abs() < 1e-5);
        let m2 = from_measurement(1.2e6, 3.3e9, None, Some(0.75 * 3.3e9)).unwrap();
        assert!((m2.c_total_cycles - 2062.5).abs() < 1e-9);
        assert!(from_measurement(1e6, 3.3e9, Some(1.5), None).is_err());
        assert!(from_measurement(0.0, 3.3e9, Some(1.0), None).is_err());
    }

    #[test]
    fn recycling_replaces_alloc_and_free_and_a_shared_allocator_costs_per_core() {
        let base = predict(&node(""));
        let rec = predict(&node("[cost.buffers]\nrecycling = true\nrecycle = \"40cycles\""));
        assert_eq!(rec.cycles_by_group["alloc"], 40.0);
        assert_eq!(rec.cycles_by_group["free"], 0.0);
        assert_eq!(base.c_total_cycles - rec.c_total_cycles, 144.0 + 231.0 - 40.0);
        let mut shared = node("[cost.buffers]\nshared_lock = \"30cycles\"");
        shared.scenario.cpu.cores = 4;
        assert_eq!(predict(&shared).cycles_by_group["alloc"], 144.0 + 3.0 * 30.0);
    }

    #[test]
    fn routing_follows_the_flow_count() {
        let few = predict(&node(""));
        let mut n = node("");
        n.sources[0].flows = 1_048_576;
        let many = predict(&n);
        let d = many.cycles_by_group["routing"] - few.cycles_by_group["routing"];
        assert!((d - 520.0).abs() < 520.0 * 0.02, "routing grows by ~520 cycles at 1 Mi flows, got {d}");
    }
}
