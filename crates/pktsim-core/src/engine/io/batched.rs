//! Batched packet I/O: DPDK-style busy polling and netmap / libpcap-style system calls
//! (004; 002 II-B).
//!
//! ```text
//!   call: take up to B frames from a ring (the core's strategy picks which)
//!         cost t_call + n t_packet + bytes t_byte + sum of t_proc    --> n frames to tx
//!   nothing to take:
//!     busy-poll        keep calling: each empty call costs t_empty (the core is always
//!                      busy; useful work is reported apart from spinning)
//!     batched-syscall  sleep; the next write-back interrupts (t_irq) and the scheduler
//!                      wakes the thread (t_wakeup) before the next call
//! ```
//!
//! A frame keeps its rx descriptor until its call ends. Spinning is not simulated call by
//! call: when the rings are empty the core notes when it started, and on the next
//! write-back it resumes at the first empty-call boundary at or after it, charging the
//! empty calls in between.

use super::{Ctx, IoMode};
use crate::engine::stats::Activity;
use crate::engine::strategy::{RingView, Strategy};
use crate::engine::time::Ps;
use crate::engine::traffic::Packet;

const EV_STEP: u8 = 0;

/// What a core does when its rings are empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Spin { t_empty: Ps },
    Sleep { t_irq: Ps, t_wakeup: Ps },
}

/// Per-call costs.
#[derive(Debug, Clone, Copy)]
pub struct CallCosts {
    pub batch: usize,
    pub t_call: Ps,
    pub t_packet: Ps,
    pub t_byte_fs: u64,
}

enum Unit {
    /// A call and the processing of the frames it moved.
    Call { frames: Vec<(Packet, usize)>, io: Ps },
    /// Spinning until a write-back is seen at an empty-call boundary.
    Spin,
    /// Interrupt and scheduler wake-up of a sleeping thread.
    Wake,
}

enum State {
    Running(Unit, Ps),
    /// Rings empty and armed: spinning since, or asleep since.
    Waiting(Ps),
}

struct Core {
    rings: Vec<usize>,
    tx: usize,
    strategy: Box<dyn Strategy>,
    state: State,
    views: Vec<RingView>,
    gen: u32,
}

pub struct Batched {
    cores: Vec<Core>,
    owner: Vec<usize>,
    wait: Wait,
    costs: CallCosts,
}

impl Batched {
    pub fn new(cores: Vec<(Vec<usize>, usize, Box<dyn Strategy>)>, rings: usize, wait: Wait, costs: CallCosts) -> Self {
        let mut owner = vec![0; rings];
        let cores = cores
            .into_iter()
            .enumerate()
            .map(|(c, (rings, tx, strategy))| {
                for &r in &rings {
                    owner[r] = c;
                }
                Core { views: vec![RingView::default(); rings.len()], rings, tx, strategy, state: State::Waiting(0), gen: 0 }
            })
            .collect();
        Batched { cores, owner, wait, costs }
    }

    fn run(&mut self, c: usize, mut t: Ps, ctx: &mut Ctx) {
        loop {
            // Finish the running unit.
            let state = std::mem::replace(&mut self.cores[c].state, State::Waiting(t));
            if let State::Running(unit, d) = state {
                match unit {
                    Unit::Call { frames, io } => {
                        ctx.stats.busy(c, Activity::Io, t - d, t - d + io);
                        ctx.stats.busy(c, Activity::RxClean, t - d + io, t);
                        ctx.stats.poll(t, Some(frames.len() as u32));
                        ctx.nic.advance_to(t, ctx.stats);
                        let tx = self.cores[c].tx;
                        for &(_, r) in &frames {
                            let ring = &mut ctx.nic.rx[r];
                            ring.unrefilled += 1;
                        }
                        for &r in &self.cores[c].rings {
                            ctx.nic.rx[r].refill();
                        }
                        ctx.nic.tx_reclaim(tx, t, ctx.stats);
                        for (p, _) in frames {
                            ctx.nic.xmit(tx, p, t, ctx.stats);
                        }
                    }
                    Unit::Spin => ctx.stats.busy(c, Activity::Spin, t - d, t),
                    Unit::Wake => ctx.stats.busy(c, Activity::Irq, t - d, t),
                }
            }
            // Next call.
            ctx.nic.advance_to(t, ctx.stats);
            let core = &mut self.cores[c];
            super::ring_views(&core.rings, &mut core.views, ctx);
            let Some(i) = core.strategy.pick(&core.views, t) else {
                core.state = State::Waiting(t);
                super::arm_rings(&core.rings, ctx);
                return;
            };
            let r = core.rings[i];
            let n = self.costs.batch.min(ctx.nic.rx[r].pkts.len());
            let mut frames = Vec::with_capacity(n);
            let (mut io, mut work) = (self.costs.t_call, 0);
            for _ in 0..n {
                let Some(p) = ctx.nic.rx[r].pkts.pop_front() else { break };
                core.strategy.served(i, p.size);
                io += self.costs.t_packet + self.costs.t_byte_fs * p.size as u64 / 1000;
                work += ctx.costs.t_proc(&p);
                frames.push((p, r));
            }
            let d = io + work;
            core.state = State::Running(Unit::Call { frames, io }, d);
            if !super::continue_or_suspend(ctx, t, d, EV_STEP, c, &mut self.cores[c].gen) {
                return;
            }
            t += d;
        }
    }
}

impl IoMode for Batched {
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
        let State::Waiting(since) = self.cores[c].state else { return };
        for &r in &self.cores[c].rings {
            ctx.nic.rx[r].wake = false;
        }
        // The core notices the frame at the next empty-call boundary (spinning), or after
        // the interrupt and the wake-up (sleeping).
        let (unit, d) = match self.wait {
            Wait::Spin { t_empty } => {
                let calls = (t - since).div_ceil(t_empty.max(1));
                ctx.stats.empty_polls_add(since, calls);
                let resume = since + calls * t_empty;
                (Unit::Spin, resume - since)
            }
            Wait::Sleep { t_irq, t_wakeup } => {
                ctx.stats.irq(t);
                (Unit::Wake, t_irq + t_wakeup)
            }
        };
        let start = match self.wait {
            Wait::Spin { .. } => since,
            Wait::Sleep { .. } => t,
        };
        self.cores[c].state = State::Running(unit, d);
        if super::continue_or_suspend(ctx, start, d, EV_STEP, c, &mut self.cores[c].gen) {
            self.run(c, start + d, ctx);
        }
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "wait": match self.wait { Wait::Spin { .. } => "spin", Wait::Sleep { .. } => "sleep" },
            "batch": self.costs.batch,
            "strategy": self.cores.first().map(|c| c.strategy.name()),
        })
    }
}
