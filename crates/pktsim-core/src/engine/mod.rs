//! The discrete-event simulator of one node.
//!
//! ```text
//!   ingress ──> NIC: DMA, classify, rx rings ──> I/O mode: cores (IRQ, NAPI, polling)
//!   (traffic)        vectors + moderation            │  costs, ring strategies
//!                                                    v
//!   egress  <── NIC: qdisc, tx rings, egress link <──┘            stats: measurement
//! ```
//!
//! Components, in the order a packet meets them: [`ingress`] ([`traffic`]: sources and the
//! ingress link), [`nic`] (classifier, rx and tx rings, vectors with their [`moderation`]),
//! [`io`] (the host's I/O mode, with [`costs`] and ring [`strategy`]s), [`app`] (a socket
//! and the application reading it, where the stack delivers frames locally), [`stats`]
//! (measurement). [`topology`] numbers rings, queues, cores and vectors for all of them.
//!
//! A [`SimNode`] is assembled from a scenario ([`build`]), runs ([`SimNode::run`]) and
//! reports ([`report`]). Time is typed ([`time`]: instants and spans in integer
//! picoseconds); events run in (time, insertion) order and components own keyed,
//! cancellable timers ([`queue`]); each component draws from its own seeded random stream
//! ([`rng`]). Same scenario + same seed = identical results.

pub mod app;
pub mod build;
pub mod costs;
pub mod ingress;
pub mod interference;
pub mod io;
pub mod moderation;
pub mod nic;
pub mod queue;
pub mod report;
pub mod rng;
pub mod stats;
pub mod strategy;
#[cfg(test)]
pub mod testing;
pub mod time;
pub mod topology;
pub mod traffic;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::scenario::ResolvedScenario;

use costs::Costs;
use io::{Ctx, IoMode};
use nic::{Egress, Nic};
use queue::{EventKind, EventQueue, Key};
use stats::Stats;
use time::{Instant, Span};
use topology::Topology;

pub use report::{PerPoll, RingSummary, SimResult};
pub use stats::LatencySummary;

/// Why a run stopped early.
pub const INTERRUPTED: &str = "interrupted";

/// A simulated node: its NIC (with the ingress and egress ports), the I/O mode running its
/// cores, their costs, and the statistics of the measurement window.
pub struct SimNode {
    queue: EventQueue,
    nic: Nic,
    mode: Box<dyn IoMode>,
    stats: Stats,
    costs: Costs,
    topo: Topology,
    /// End of the measurement window.
    stop: Instant,
    /// Set (from any thread) to stop the run.
    cancel: Arc<AtomicBool>,
    info: ReportInfo,
    /// `[cpu.interference]`, if anything interferes.
    interference: Option<interference::Interference>,
}

/// What the report names and scales by.
struct ReportInfo {
    name: String,
    seed: u64,
    duration: Span,
    interval: Option<Span>,
    queue_names: Vec<String>,
    class_names: Vec<String>,
    mean_frame_bytes: f64,
    notes: Vec<String>,
}

impl SimNode {
    /// Send every transmitted frame to `port` too (the next node, a collector).
    pub fn connect_egress(&mut self, port: Box<dyn Egress>) {
        self.nic.connect_egress(port);
    }

    /// Stop the run when `flag` is set (from any thread: a signal handler, a watchdog).
    /// The engine looks at it between events, between work units and between frames, so a
    /// run stops within microseconds of wall time, whatever the scenario.
    pub fn cancel_on(&mut self, flag: Arc<AtomicBool>) {
        self.nic.cancel_on(flag.clone());
        self.cancel = flag;
    }

    /// Run to the end of the measurement window; a cancelled run returns
    /// `Error::Invalid("interrupted")` and leaves the node's figures incomplete.
    pub fn run(&mut self) -> Result<()> {
        self.queue.schedule(self.stop, EventKind::End);
        let mode = &mut *self.mode;
        let cancel = &*self.cancel;
        let interference = &mut self.interference;
        let mut ctx = Ctx { now: Instant::ZERO, queue: &mut self.queue, nic: &mut self.nic, stats: &mut self.stats, costs: &mut self.costs, cancel };
        mode.start(&mut ctx);
        if let Some(i) = interference.as_mut() {
            i.start(ctx.queue);
        }
        deliver_wakeups(mode, &mut ctx);

        while let Some((t, kind)) = ctx.queue.pop() {
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::Invalid(INTERRUPTED.into()));
            }
            ctx.now = t;
            match kind {
                EventKind::End => {
                    // Frames that reached the NIC in the window count as offered (or
                    // dropped) even if nobody looked at their ring before it closed; work
                    // under way is charged up to the end.
                    ctx.nic.advance_before(t, ctx.stats);
                    mode.end(t, &mut ctx);
                    break;
                }
                EventKind::Arrival => ctx.nic.on_arrival_event(t, ctx.queue, ctx.stats),
                EventKind::Timer(key @ (Key::Irq(_) | Key::TxCause(_)), gen) => {
                    if let Some(irq) = ctx.nic.on_timer(key, gen, t, ctx.queue, ctx.stats) {
                        mode.on_irq(irq, &mut ctx);
                    }
                }
                EventKind::Timer(Key::Interfere(c), gen) => {
                    if let Some(d) = interference.as_mut().and_then(|i| i.fire(c as usize, gen, t, ctx.queue)) {
                        mode.preempt(c as usize, t, d, &mut ctx);
                    }
                }
                EventKind::Timer(key, gen) => mode.on_timer(key, gen, &mut ctx),
            }
            deliver_wakeups(mode, &mut ctx);
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Invalid(INTERRUPTED.into()));
        }
        Ok(())
    }
}

/// Tell the mode of rings that received frames it asked to hear of (arming a ring keeps
/// an arrival event in the queue; see [`Nic::arm`]).
fn deliver_wakeups(mode: &mut dyn IoMode, ctx: &mut Ctx) {
    loop {
        let woken = ctx.nic.take_woken();
        if woken.is_empty() {
            return;
        }
        for (ring, t) in woken {
            mode.on_rx_wake(ring, t, ctx);
        }
    }
}

/// Simulate the node a scenario describes: build, run, report. Setting `cancel` (from
/// another thread) stops the run with `Error::Invalid("interrupted")`.
pub fn run(sc: &ResolvedScenario, cancel: Arc<AtomicBool>) -> Result<SimResult> {
    let wall = std::time::Instant::now();
    let mut node = SimNode::build(sc);
    node.cancel_on(cancel);
    node.run()?;
    Ok(node.report(wall.elapsed().as_secs_f64()))
}
