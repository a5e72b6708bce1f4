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
//! [`io`] (the host's I/O mode, with [`costs`] and ring [`strategy`]s), [`stats`]
//! (measurement). [`topology`] numbers rings, queues, cores and vectors for all of them.
//!
//! A [`SimNode`] is assembled from a scenario ([`build`]), runs ([`SimNode::run`]) and
//! reports ([`report`]). Time is typed ([`time`]: instants and spans in integer
//! picoseconds); events run in (time, insertion) order and components own keyed,
//! cancellable timers ([`queue`]); each component draws from its own seeded random stream
//! ([`rng`]). Same scenario + same seed = identical results.

pub mod build;
pub mod costs;
pub mod ingress;
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

/// How often a run asks whether to stop (simulated time).
const TICK: Span = Span::from_ps(1_000_000_000); // 1 ms

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
    info: ReportInfo,
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
}

impl SimNode {
    /// Send every transmitted frame to `port` too (the next node, a collector).
    pub fn connect_egress(&mut self, port: Box<dyn Egress>) {
        self.nic.connect_egress(port);
    }

    /// Run to the end of the measurement window. `cancel` is asked every simulated
    /// millisecond whether to stop (for Ctrl-C); a cancelled run returns
    /// `Error::Invalid("interrupted")`.
    pub fn run(&mut self, cancel: &mut dyn FnMut() -> bool) -> Result<()> {
        self.queue.schedule(self.stop, EventKind::End);
        self.queue.schedule(Instant::ZERO + TICK, EventKind::Tick);
        let mode = &mut *self.mode;
        let mut ctx = Ctx { now: Instant::ZERO, queue: &mut self.queue, nic: &mut self.nic, stats: &mut self.stats, costs: &mut self.costs };
        mode.start(&mut ctx);
        deliver_wakeups(mode, &mut ctx);

        while let Some((t, kind)) = ctx.queue.pop() {
            ctx.now = t;
            match kind {
                EventKind::End => break,
                EventKind::Tick => {
                    if cancel() {
                        return Err(Error::Invalid(INTERRUPTED.into()));
                    }
                    ctx.queue.schedule(t + TICK, EventKind::Tick);
                }
                EventKind::Arrival => ctx.nic.on_arrival_event(t, ctx.queue, ctx.stats),
                EventKind::Timer(key @ (Key::Irq(_) | Key::TxCause(_)), gen) => {
                    if let Some(irq) = ctx.nic.on_timer(key, gen, t, ctx.queue, ctx.stats) {
                        mode.on_irq(irq, &mut ctx);
                    }
                }
                EventKind::Timer(key, gen) => mode.on_timer(key, gen, &mut ctx),
            }
            deliver_wakeups(mode, &mut ctx);
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

/// Simulate the node a scenario describes: build, run, report.
pub fn run(sc: &ResolvedScenario, cancel: &mut dyn FnMut() -> bool) -> Result<SimResult> {
    let wall = std::time::Instant::now();
    let mut node = SimNode::build(sc);
    node.run(cancel)?;
    Ok(node.report(wall.elapsed().as_secs_f64()))
}
