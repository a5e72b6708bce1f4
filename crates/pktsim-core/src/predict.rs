//! The analytical model assembled: the node's layout (its rings, cores and tx queues, and
//! the share of the offered frames RSS gives each core, as the simulator's classifier
//! places flows) and the I/O mode's costs (`mode_costs`, beside each mode's simulation)
//! are taken from the simulator's own components and handed to [`crate::model`], which
//! knows nothing of the simulator. `pktsim model` and `predict()` come here.

use crate::clock;
use crate::engine::build::layout;
use crate::engine::costs::Costs;
use crate::engine::io::mode_costs;
use crate::model::{self, ChainPrediction, Inputs, Prediction};
use crate::scenario::chain::ResolvedChain;
use crate::scenario::ResolvedScenario;
use crate::topology::Topology;

/// The analytical prediction for a scenario.
pub fn predict(sc: &ResolvedScenario) -> Prediction {
    match clock::settled(sc, &busiest) {
        Some((_, node)) => {
            // The load's figures at the clock the governor settles at; those at saturation
            // (a frame's price, the capacity) at full load, where the clock is
            // `cpu.frequency`.
            let mut p = model::predict(&node, &inputs(&node));
            let top = model::predict(sc, &inputs(sc));
            p.cycles_by_group = top.cycles_by_group;
            (p.c_total_cycles, p.c_core_cycles) = (top.c_total_cycles, top.c_core_cycles);
            (p.frame_cost_ns, p.ns_per_packet) = (top.frame_cost_ns, top.ns_per_packet);
            (p.r_max_pps, p.r_cpu_pps, p.capacity_pps) = (top.r_max_pps, top.r_cpu_pps, top.capacity_pps);
            for (c, t) in p.per_core.iter_mut().zip(&top.per_core) {
                (c.ns_per_packet, c.capacity_pps) = (t.ns_per_packet, t.capacity_pps);
            }
            p
        }
        None => model::predict(sc, &inputs(sc)),
    }
}

/// The model's load of the node's busiest core (an application's cores included), at the
/// clock the scenario states: what a cpufreq governor follows ([`clock::settled`]).
pub fn busiest(sc: &ResolvedScenario) -> f64 {
    let p = model::predict(sc, &inputs(sc));
    p.per_core.iter().map(|c| c.cpu_load).fold(p.cpu_load, f64::max)
}

/// The analytical prediction for a chain of nodes: each node's, and the chain's bottleneck.
pub fn predict_chain(chain: &ResolvedChain) -> ChainPrediction {
    model::predict_chain(chain, &predict)
}

/// What the model takes of the node: its layout and its I/O mode's costs.
pub fn inputs(sc: &ResolvedScenario) -> Inputs {
    let (topo, loads) = core_loads(sc);
    Inputs {
        topo,
        loads,
        mode: mode_costs(sc, &Costs::of(sc)),
        settle: crate::engine::moderation::settle,
        xdp_consumes: crate::engine::io::xdp::native_consumes(sc),
    }
}

/// Share of the offered frames and their mean size, per core, as RSS places flows.
fn core_loads(sc: &ResolvedScenario) -> (Topology, Vec<(f64, f64)>) {
    let (topo, classifier) = layout(sc);
    let mut load = vec![(0.0, 0.0); topo.cores()];
    for (i, src) in sc.sources.iter().enumerate() {
        let shares = classifier.ring_shares(i, src.flows);
        let bytes = src.size.mean_bytes();
        for (r, frac) in shares.iter().enumerate() {
            let c = &mut load[topo.core_of_ring(r)];
            c.0 += src.share * frac;
            c.1 += src.share * frac * bytes;
        }
    }
    for c in &mut load {
        c.1 = if c.0 > 0.0 { c.1 / c.0 } else { sc.mean_frame_bytes() };
    }
    (topo, load)
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
        // Every frame's processing, and the interrupts and polls at their predicted rates.
        let frames = 1e6 * 1978.0 / 3.3e9;
        assert!(p.cpu_load > frames && p.cpu_load <= p.cpu_load_max, "{} {}", p.cpu_load, p.cpu_load_max);
        assert!(p.irq_per_s > 0.0 && p.polls_per_s > 0.0, "{p:?}");
        assert!(p.cpu_load_basis.starts_with("closed form"), "{}", p.cpu_load_basis);
    }

    #[test]
    fn cores_scale_linearly_without_contention_and_sublinearly_with() {
        let mut n = node("");
        n.sources[0].flows = 4096;
        let one = predict(&n);
        n.scenario.cpu.cores = 4;
        let four = predict(&n);
        assert!((four.r_cpu_pps / one.r_cpu_pps - 4.0).abs() < 1e-9, "{} vs {}", four.r_cpu_pps, one.r_cpu_pps);
        n.scenario.cpu.contention = crate::units::Cycles::new(100.0);
        let four_c = predict(&n);
        assert!(
            (four_c.r_cpu_pps / (4.0 * 3.3e9 / (one.c_total_cycles + 300.0)) - 1.0).abs() < 1e-9,
            "{}",
            four_c.r_cpu_pps
        );
    }

    /// RSS places a flow on one core: one flow on four cores forwards what one core does,
    /// and the node is loss-free only up to that.
    #[test]
    fn one_flow_uses_one_core_of_four() {
        let one = predict(&node(""));
        let mut n = node("");
        n.scenario.cpu.cores = 4;
        let four = predict(&n);
        assert_eq!(four.per_core.iter().filter(|c| c.share > 0.0).count(), 1);
        assert!((four.r_cpu_pps / one.r_cpu_pps - 1.0).abs() < 1e-12);
        assert!((four.predicted_pps / one.predicted_pps - 1.0).abs() < 1e-12);
        assert!((four.cpu_load - 0.25).abs() < 1e-12, "one of four cores busy: {}", four.cpu_load);
    }

    /// Explicit host times with a per-byte term (001's x = a S + b + c): 4.04 us per
    /// 1518 B frame, whatever the cost profile says.
    #[test]
    fn explicit_times_and_per_byte_service_price_the_frame() {
        let mut n = node("");
        n.scenario.host.stack.t_proc = Some(crate::units::Duration::from_ps(497_000));
        n.scenario.host.stack.t_proc_per_byte = Some(crate::units::TimePerByte { fs_per_byte: 2_334_000 });
        n.scenario.host.io = crate::scenario::IoSpec::Server(Default::default());
        n.sources[0].size = crate::scenario::PacketSize::Fixed(crate::units::Bytes::new(1518));
        let p = predict(&n);
        let x_ns = 497.0 + 2.334 * 1518.0;
        assert!((p.ns_per_packet - x_ns).abs() < 1e-6, "{} vs {x_ns}", p.ns_per_packet);
        assert!((p.r_max_pps - 1e9 / x_ns).abs() < 1e-3);
    }

    /// Below saturation, evenly spaced frames 50 us apart on threaded NAPI: each frame's
    /// round (wake-up, poll, the frame: 20 us of CPU) ends before the next frame, so each
    /// frame pays a poll and a wake-up alone, which is also the bound.
    #[test]
    fn partial_load_cpu_is_bracketed_by_the_amortised_and_the_per_frame_event_costs() {
        let mut n = node("");
        let h = &mut n.scenario.host;
        h.io = crate::scenario::IoSpec::ThreadedNapi(crate::scenario::ThreadedNapiIo {
            poll: crate::scenario::Poll {
                t_poll: crate::units::Duration::from_ps(4_000_000),
                weight: 64,
                ..Default::default()
            },
            thread: crate::scenario::ThreadSpec {
                t_wakeup: crate::units::Duration::from_ps(9_000_000),
                ..Default::default()
            },
            ..Default::default()
        });
        h.stack.t_proc = Some(crate::units::Duration::from_ps(7_000_000));
        n.scenario.traffic.rate = Some(crate::units::OfferedRate::Packets(crate::units::PacketRate { pps: 20_000.0 }));
        let p = predict(&n);
        assert!((p.cpu_load - 20e3 * (7e-6 + 4e-6 + 9e-6)).abs() < 1e-9, "{}", p.cpu_load);
        assert!((p.cpu_load_max - 20e3 * (7e-6 + 4e-6 + 9e-6)).abs() < 1e-9, "{}", p.cpu_load_max);
        assert!((p.wakeups_per_s - 20e3).abs() < 1e-6 && (p.polls_per_s - 20e3).abs() < 1e-6, "{p:?}");
        assert!(p.cpu_load_basis.starts_with("closed form"), "{}", p.cpu_load_basis);
    }

    #[test]
    fn page_pool_replaces_alloc_and_free_by_its_fast_path_or_its_ring() {
        let pp = "[cost.buffers.page_pool]\nfast = \"20cycles\"\nring = \"70cycles\"\nalloc = \"400cycles\"\nalloc_share = 0.01";
        let p = predict(&node(pp));
        assert!(
            (p.cycles_by_group["alloc"] - (20.0 + 4.0)).abs() < 1e-9,
            "forwarded frames recycle in the NAPI: {}",
            p.cycles_by_group["alloc"]
        );
        assert_eq!(p.cycles_by_group["free"], 0.0);
        // Four cores sharing one tx queue: three of four cores' frames are cleaned by core 0.
        let mut n = node(&format!("{pp}\n[nic]\ntx_queues = 1"));
        n.scenario.cpu.cores = 4;
        let shared = predict(&n);
        assert!(
            (shared.cycles_by_group["alloc"] - (0.25 * 20.0 + 0.75 * 70.0 + 4.0)).abs() < 1e-9,
            "{}",
            shared.cycles_by_group["alloc"]
        );
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
