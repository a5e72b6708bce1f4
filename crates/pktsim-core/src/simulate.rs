//! The simulator as users call it: a node, or a chain of nodes, each run at the clock its
//! cpufreq governor settles at ([`crate::clock`]); the engine itself runs a node at the
//! clock its scenario states.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::clock::settled;
use crate::engine::{self, chain::ChainResult, SimResult};
use crate::error::{ConfigError, Result};
use crate::predict::busiest;
use crate::scenario::chain::ResolvedChain;
use crate::scenario::ResolvedScenario;

/// The most frames a run simulates unless its caller allows more (`pktsim run
/// --allow-large`): about a minute of the engine at its usual 20-50 M frames/s. A typo
/// (`65536Gbit/s` for `6553.6Gbit/s`, `999990s`) is caught before it runs for an hour.
pub const MAX_FRAMES: f64 = 2e9;

/// Above this many frames a run is announced as a long one (about 10 s and more).
pub const LONG_FRAMES: f64 = 2e8;

/// The frames a run simulates: the offered rate over warm-up and duration (each node's
/// for a chain).
pub fn expected_frames(sc: &ResolvedScenario) -> f64 {
    sc.offered_pps() * (sc.scenario.measure.warmup.ps as f64 + sc.scenario.measure.duration.ps as f64) / 1e12
}

/// [`expected_frames`] over a chain's nodes (each sees at most the first node's offer).
pub fn expected_chain_frames(chain: &ResolvedChain) -> f64 {
    chain.nodes.first().map_or(0.0, |n| expected_frames(n) * chain.nodes.len() as f64)
}

/// The most memory a run is let take unless its caller allows more: 4 GiB.
pub const MAX_MEMORY_BYTES: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;

/// A run's memory, estimated from its scenario (measured with `/usr/bin/time` on `pktsim
/// run --json`): 20 MB to start, 240 kB per rx ring (its latency histograms), and 3.3 kB per
/// time-series bucket (`measure.duration / measure.interval`: the engine's counters, the
/// result as Python objects and as JSON text; a chain of two nodes with a million buckets
/// each took 6.5 GB).
pub fn expected_memory_bytes(sc: &ResolvedScenario) -> f64 {
    let m = &sc.scenario.measure;
    let buckets = m.interval.filter(|i| i.ps > 0).map_or(0.0, |i| m.duration.ps as f64 / i.ps as f64);
    let rings = sc.scenario.cpu.cores as f64 * sc.scenario.nic.queues.len().max(1) as f64;
    20e6 + rings * 240e3 + buckets * 3.3e3
}

/// [`expected_memory_bytes`] over a chain's nodes, which run at once.
pub fn expected_chain_memory_bytes(chain: &ResolvedChain) -> f64 {
    chain.nodes.iter().map(expected_memory_bytes).sum()
}

/// Refuse a run of more than [`MAX_FRAMES`] frames or [`MAX_MEMORY_BYTES`] of memory
/// (`memory`: the estimate over all its nodes, `nodes` of them), naming the keys that make
/// it so.
pub fn check_work(frames: f64, memory: f64, nodes: usize, sc: &ResolvedScenario) -> Result<()> {
    let m = &sc.scenario.measure;
    if !(memory.is_finite() && memory <= MAX_MEMORY_BYTES) {
        let (key, value) = match m.interval {
            Some(i) if i.ps > 0 => (
                "measure.interval",
                format!(
                    "{}s over {}s measured = {:.0} time-series buckets{}",
                    i.ps as f64 / 1e12,
                    m.duration.ps as f64 / 1e12,
                    m.duration.ps as f64 / i.ps as f64,
                    if nodes > 1 { format!(" in each of {nodes} nodes") } else { String::new() }
                ),
            ),
            _ => ("cpu.cores", format!("{} cores x {} queues", sc.scenario.cpu.cores, sc.scenario.nic.queues.len())),
        };
        return Err(ConfigError::new(
            sc.origin.as_str(),
            key,
            Some(value),
            format!(
                "a run that fits in 4 GiB of memory (this one takes about {:.1} GB); widen measure.interval, or pass --allow-large (allow_large=True) to run it",
                memory / 1e9
            ),
        )
        .into());
    }
    if frames.is_finite() && frames <= MAX_FRAMES {
        return Ok(());
    }
    Err(ConfigError::new(
        sc.origin.as_str(),
        "measure.duration",
        Some(format!(
            "{}s of warm-up and measurement at {:.4e} pps offered = {frames:.3e} frames",
            (m.warmup.ps as f64 + m.duration.ps as f64) / 1e12,
            sc.offered_pps()
        )),
        format!(
            "at most {MAX_FRAMES:.0e} simulated frames (about a minute); check traffic.rate, link.rate and measure.duration, or pass --allow-large (allow_large=True) to run it"
        ),
    )
    .into())
}

/// [`check_work`] for a node, on its own estimates.
pub fn check_node_work(sc: &ResolvedScenario) -> Result<()> {
    check_work(expected_frames(sc), expected_memory_bytes(sc), 1, sc)
}

/// [`check_work`] for a chain: its nodes' frames and memory together, named at its first.
pub fn check_chain_work(chain: &ResolvedChain) -> Result<()> {
    match chain.nodes.first() {
        Some(first) => {
            check_work(expected_chain_frames(chain), expected_chain_memory_bytes(chain), chain.nodes.len(), first)
        }
        None => Ok(()),
    }
}

/// Simulate the node a scenario describes as it runs: at the clock its governor settles at
/// ([`engine::run`] on [`settled`]'s node; the node as stated under `performance`).
pub fn run(sc: &ResolvedScenario, cancel: Arc<AtomicBool>) -> Result<SimResult> {
    let node = settled(sc, &stoppable(&cancel)).map(|(_, n)| n);
    engine::run(node.as_ref().unwrap_or(sc), cancel)
}

/// Simulate a chain, each node at the clock its governor settles at.
pub fn run_chain(chain: &ResolvedChain, cancel: Arc<AtomicBool>) -> Result<ChainResult> {
    if !chain.nodes.iter().any(|n| n.scenario.cpu.freq.scales()) {
        return engine::chain::run(chain, cancel);
    }
    let mut c = chain.clone();
    for n in &mut c.nodes {
        if let Some((_, node)) = settled(n, &stoppable(&cancel)) {
            *n = node;
        }
    }
    engine::chain::run(&c, cancel)
}

/// The busiest core's load for the clock's search, which a stopped run cuts short: once
/// `cancel` is set every further look says "fully busy", the search ends at the highest
/// clock at once, and the engine then stops before its first event.
fn stoppable(cancel: &AtomicBool) -> impl Fn(&ResolvedScenario) -> f64 + '_ {
    move |n| if cancel.load(Ordering::Relaxed) { 1.0 } else { busiest(n) }
}
