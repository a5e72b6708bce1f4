//! The simulator as users call it: a node, or a chain of nodes, each run at the clock its
//! cpufreq governor settles at ([`crate::clock`]); the engine itself runs a node at the
//! clock its scenario states.

use std::sync::atomic::{AtomicBool, Ordering};
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
