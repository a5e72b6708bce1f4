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

use super::{Ctx, IoMode};
use crate::engine::stats::Activity;
use crate::engine::strategy::{RingView, Strategy};
use crate::engine::time::Ps;
use crate::engine::traffic::Packet;

const EV_STEP: u8 = 0;

enum Unit {
    Serve(Packet, usize),
    Lock(Packet),
}

struct Core {
    rings: Vec<usize>,
    tx: usize,
    strategy: Box<dyn Strategy>,
    unit: Option<(Unit, Ps)>,
    views: Vec<RingView>,
    gen: u32,
}

pub struct Server {
    cores: Vec<Core>,
    /// Core owning each ring.
    owner: Vec<usize>,
}

impl Server {
    /// `cores[c] = (rings in priority order, tx queue, strategy)`.
    pub fn new(cores: Vec<(Vec<usize>, usize, Box<dyn Strategy>)>, rings: usize) -> Self {
        let mut owner = vec![0; rings];
        let cores = cores
            .into_iter()
            .enumerate()
            .map(|(c, (rings, tx, strategy))| {
                for &r in &rings {
                    owner[r] = c;
                }
                Core { views: vec![RingView::default(); rings.len()], rings, tx, strategy, unit: None, gen: 0 }
            })
            .collect();
        Server { cores, owner }
    }

    /// Run core `c` from `t` until it idles or its next unit would cross the next event.
    fn run(&mut self, c: usize, mut t: Ps, ctx: &mut Ctx) {
        loop {
            let core = &mut self.cores[c];
            // Finish the current unit.
            match core.unit.take() {
                Some((Unit::Serve(p, r), d)) => {
                    ctx.stats.busy(c, Activity::RxClean, t - d, t);
                    // Frames that arrived during the service saw the ring before this
                    // descriptor came back.
                    ctx.nic.advance_to(t, ctx.stats);
                    let ring = &mut ctx.nic.rx[r];
                    ring.unrefilled += 1;
                    ring.refill();
                    let hold = ctx.costs.tx_lock;
                    let lock = ctx.nic.tx_lock(core.tx, t, hold);
                    if lock > 0 {
                        core.unit = Some((Unit::Lock(p), lock));
                        if super::continue_or_suspend(ctx, t, lock, EV_STEP, c, &mut self.cores[c].gen) {
                            t += lock;
                            continue;
                        }
                        return;
                    }
                    ctx.nic.tx_reclaim(core.tx, t, ctx.stats);
                    ctx.nic.xmit(core.tx, p, t, ctx.stats);
                }
                Some((Unit::Lock(p), d)) => {
                    ctx.stats.busy(c, Activity::TxLock, t - d, t);
                    ctx.nic.tx_reclaim(core.tx, t, ctx.stats);
                    ctx.nic.xmit(core.tx, p, t, ctx.stats);
                }
                None => {}
            }
            // Choose the next frame.
            ctx.nic.advance_to(t, ctx.stats);
            let core = &mut self.cores[c];
            super::ring_views(&core.rings, &mut core.views, ctx);
            let Some(i) = core.strategy.pick(&core.views, t) else {
                // Idle: wake on the next write-back to any of this core's rings.
                super::arm_rings(&core.rings, ctx);
                return;
            };
            let r = core.rings[i];
            let Some(p) = ctx.nic.rx[r].pkts.pop_front() else { return };
            core.strategy.served(i, p.size);
            let d = ctx.costs.t_proc(&p);
            core.unit = Some((Unit::Serve(p, r), d));
            if super::continue_or_suspend(ctx, t, d, EV_STEP, c, &mut self.cores[c].gen) {
                t += d;
                continue;
            }
            return;
        }
    }
}

impl IoMode for Server {
    fn start(&mut self, ctx: &mut Ctx) {
        super::arm_rings(self.cores.iter().flat_map(|c| &c.rings), ctx);
    }

    fn on_event(&mut self, tag: u8, index: u32, gen: u32, ctx: &mut Ctx) {
        let c = index as usize;
        if tag == EV_STEP && self.cores[c].gen == gen {
            self.run(c, ctx.now, ctx);
        }
    }

    fn on_rx_wake(&mut self, ring: usize, t: Ps, ctx: &mut Ctx) {
        let c = self.owner[ring];
        if self.cores[c].unit.is_none() {
            for &r in &self.cores[c].rings {
                ctx.nic.rx[r].wake = false;
            }
            self.run(c, t, ctx);
        }
    }

    fn report(&self) -> serde_json::Value {
        let names: Vec<&str> = self.cores.iter().map(|c| c.strategy.name()).collect();
        serde_json::json!({ "strategy": names.first(), "strategy_per_core": names })
    }
}
