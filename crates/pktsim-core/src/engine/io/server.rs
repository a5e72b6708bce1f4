//! Cores as plain servers of their rx rings: no interrupts, no NAPI (001's resource-manager
//! model, and pktsim's queueing-theory checks).
//!
//! ```text
//!   core c: rings [q0 (highest priority), q1, ...] --strategy--> serve one frame for
//!           t_proc (x = a S + b + c) --> [tx lock if the queue is shared] --> tx ring
//! ```
//!
//! Before each frame the core asks its [`Strategy`] which ring to serve. A frame keeps its
//! descriptor until its service ends, so a ring of N descriptors holds at most N - 1 frames
//! in the system (one descriptor always stays empty): one core with one ring is an M/G/1/K
//! queue with K = N - 1. An idle core waits for the next write-back on any of its rings.

use super::units::{self, Units, Worker};
use super::{Ctx, IoMode};
use crate::engine::ingress::Packet;
use crate::engine::queue::Key;
use crate::engine::stats::Activity;
use crate::engine::strategy::{RingView, Strategy};
use crate::engine::time::{Instant, Span};
use crate::engine::topology::Topology;
use crate::scenario::ResolvedScenario;

pub enum Unit {
    /// Serving a frame from a ring.
    Serve(Packet, usize),
    /// Waiting for and holding the shared tx queue's lock, then posting the frame.
    Lock(Packet),
}

struct Core {
    strategy: Box<dyn Strategy>,
    worker: Worker<Unit>,
    /// A served frame waiting for its shared tx queue's lock, and how long that takes.
    lock: Option<(Packet, Span)>,
    views: Vec<RingView>,
}

pub struct Server {
    cores: Vec<Core>,
    topo: Topology,
}

impl Server {
    pub fn new(sc: &ResolvedScenario, topo: &Topology) -> Self {
        Self::with_strategies(*topo, super::core_strategies(sc, topo))
    }

    /// One strategy per core.
    pub fn with_strategies(topo: Topology, strategies: Vec<Box<dyn Strategy>>) -> Self {
        let cores = strategies
            .into_iter()
            .map(|strategy| Core { strategy, worker: Worker::default(), lock: None, views: vec![RingView::default(); topo.queues_per_core()] })
            .collect();
        Server { cores, topo }
    }
}

impl Units for Server {
    type Unit = Unit;

    #[inline]
    fn worker(&mut self, core: usize) -> &mut Worker<Unit> {
        &mut self.cores[core].worker
    }

    #[inline]
    fn account(&mut self, c: usize, unit: &Unit, start: Instant, end: Instant, ctx: &mut Ctx) {
        let a = match unit {
            Unit::Serve(..) => Activity::RxClean,
            Unit::Lock(_) => Activity::TxLock,
        };
        ctx.stats.busy(c, a, start, end);
    }

    #[inline]
    fn finish(&mut self, c: usize, unit: Unit, _start: Instant, t: Instant, ctx: &mut Ctx) {
        let tx = self.topo.tx_of_core(c);
        match unit {
            Unit::Serve(p, r) => {
                // The frame's descriptor comes back now; frames that arrived during the
                // service saw the ring without it.
                ctx.nic.refill(r, t, 1, ctx.stats);
                let lock = ctx.nic.tx_lock(tx, t, ctx.costs.tx_lock);
                if lock > Span::ZERO {
                    self.cores[c].lock = Some((p, lock));
                    return;
                }
                ctx.nic.tx_reclaim(tx, t, ctx.stats);
                ctx.nic.xmit(tx, p, t, ctx.queue, ctx.stats);
            }
            Unit::Lock(p) => {
                ctx.nic.tx_reclaim(tx, t, ctx.stats);
                ctx.nic.xmit(tx, p, t, ctx.queue, ctx.stats);
            }
        }
    }

    #[inline]
    fn next(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        if let Some((p, lock)) = self.cores[c].lock.take() {
            return Some((Unit::Lock(p), lock));
        }
        // Choose the next frame.
        ctx.nic.advance_to(t, ctx.stats);
        let rings = self.topo.rings_of_core(c);
        let core = &mut self.cores[c];
        super::ring_views(rings.clone(), &mut core.views, ctx);
        let Some(i) = core.strategy.pick(&core.views, t) else {
            // Idle: wake on the next write-back to any of this core's rings.
            super::arm_rings(rings, ctx);
            return None;
        };
        let r = rings.start + i;
        let p = ctx.nic.take(r, t, ctx.stats)?;
        core.strategy.served(i, p.size);
        let d = ctx.costs.t_proc(&p);
        Some((Unit::Serve(p, r), d))
    }
}

impl IoMode for Server {
    fn start(&mut self, ctx: &mut Ctx) {
        super::arm_rings(0..self.topo.rings(), ctx);
    }

    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx) {
        if let Key::Step(c) = key {
            units::on_step(self, c as usize, gen, ctx);
        }
    }

    fn end(&mut self, t: Instant, ctx: &mut Ctx) {
        for c in 0..self.cores.len() {
            units::end(self, c, t, ctx);
        }
    }

    fn on_rx_wake(&mut self, ring: usize, t: Instant, ctx: &mut Ctx) {
        let c = self.topo.core_of_ring(ring);
        if self.cores[c].worker.is_idle() {
            super::disarm_rings(self.topo.rings_of_core(c), ctx);
            units::run(self, c, t, ctx);
        }
    }

    fn report(&self, _nic: &crate::engine::nic::Nic) -> serde_json::Value {
        let names: Vec<&str> = self.cores.iter().map(|c| c.strategy.name()).collect();
        serde_json::json!({ "strategy": names.first(), "strategy_per_core": names })
    }
}

/// A served frame costs its processing only; a shared tx queue adds its lock.
pub fn mode_costs() -> super::ModeCosts {
    super::ModeCosts { tx_lock: true, ..Default::default() }
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    /// t_proc 2 us; a ring of 4 descriptors holds 3 frames, and a frame in service keeps
    /// its descriptor: of 4 frames 100 ns apart, the fourth is dropped.
    #[test]
    fn frames_are_served_in_turn_and_a_full_ring_drops() {
        let toml = node_toml("io = \"server\"\nt_proc = \"2us\"", "[nic]\nrx_ring = 4\nrefill_batch = 1");
        let frames = [(10_000, 64), (11_000, 64), (20_000, 64), (30_000, 64), (30_100, 64), (30_200, 64), (30_300, 64)];
        let (r, dep) = trace(&toml, &frames);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [12_000.0, 14_000.0, 22_000.0, 32_000.0, 34_000.0, 36_000.0]);
        assert!(dep.iter().all(|(tx, done)| (done - tx - 67.2).abs() < 1e-9), "{dep:?}");
        assert_eq!((r.offered_packets, r.forwarded_packets, r.drops["rx_ring_full"]), (7, 6, 1));
        assert!((r.latency_ns.max - 5_800.0).abs() < 6.0, "the third of the burst: 3.8 us waiting + 2 us: {}", r.latency_ns.max);
    }

    /// Ties: a descriptor freed at t is available to a frame arriving at t. Frames every
    /// 0.5 us, 1 us of service, one usable descriptor: every other frame is served.
    #[test]
    fn a_descriptor_freed_at_t_takes_the_frame_arriving_at_t() {
        let toml = node_toml("io = \"server\"\nt_proc = \"1us\"", "[nic]\nrx_ring = 2\nrefill_batch = 1");
        let frames: Vec<(u64, u16)> = (0..20).map(|i| (10_000 + 500 * i, 64)).collect();
        let (r, dep) = trace(&toml, &frames);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, (0..10).map(|i| 11_000.0 + 1_000.0 * i as f64).collect::<Vec<_>>());
        assert_eq!((r.forwarded_packets, r.drops["rx_ring_full"]), (10, 10));
    }

    /// A frame in service past the end of the window: frames that reached the NIC in the
    /// window still count as offered (or dropped), and the CPU is charged to the end.
    #[test]
    fn the_window_closes_on_work_under_way() {
        let toml = node_toml("io = \"server\"\nt_proc = \"2ms\"", "[nic]\nrx_ring = 4\nrefill_batch = 1");
        let (r, dep) = trace(&toml, &[(10_000, 64), (20_000, 64), (30_000, 64), (40_000, 64)]);
        assert!(dep.is_empty());
        assert_eq!((r.offered_packets, r.forwarded_packets, r.drops["rx_ring_full"]), (4, 0, 1));
        assert!((r.cpu_utilization - 0.99).abs() < 1e-12, "busy from 10 us to the end of 1 ms: {}", r.cpu_utilization);
    }
}
