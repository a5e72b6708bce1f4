//! The simulator as users call it: a node, or a chain of nodes, each run at the clock its
//! cpufreq governor settles at ([`crate::clock`]); the engine itself runs a node at the
//! clock its scenario states.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::clock::settled;
use crate::engine::{self, chain::ChainResult, SimResult};
use crate::error::Result;
use crate::predict::busiest;
use crate::scenario::chain::ResolvedChain;
use crate::scenario::ResolvedScenario;

/// Simulate the node a scenario describes as it runs: at the clock its governor settles at
/// ([`engine::run`] on [`settled`]'s node; the node as stated under `performance`).
pub fn run(sc: &ResolvedScenario, cancel: Arc<AtomicBool>) -> Result<SimResult> {
    match settled(sc, &busiest) {
        Some((_, node)) => engine::run(&node, cancel),
        None => engine::run(sc, cancel),
    }
}

/// Simulate a chain, each node at the clock its governor settles at.
pub fn run_chain(chain: &ResolvedChain, cancel: Arc<AtomicBool>) -> Result<ChainResult> {
    if !chain.nodes.iter().any(|n| n.scenario.cpu.freq.scales()) {
        return engine::chain::run(chain, cancel);
    }
    let mut c = chain.clone();
    for n in &mut c.nodes {
        if let Some((_, node)) = settled(n, &busiest) {
            *n = node;
        }
    }
    engine::chain::run(&c, cancel)
}
