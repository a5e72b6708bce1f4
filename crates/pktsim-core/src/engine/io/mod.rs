//! Host I/O modes: how cores move frames from rx rings to tx queues. Each mode is a
//! self-contained state machine behind [`IoMode`], one file each (NAPI a folder, a file per
//! concern), registered in [`build`]; the engine only routes events to it, and a mode drives
//! the NIC only through its methods.
//!
//! | `host.io` | file | mode |
//! |---|---|---|
//! | `napi` | [`napi`] (`napi/`) | Linux NAPI with an ixgbe-style driver (002, 003): softirq, poll, threads, busy polls |
//! | `server` | [`server`] | cores as plain servers of their rings with a strategy (001, theory) |
//! | `busy-poll`, `batched-syscall` | [`batched`] | DPDK-style polling, netmap / libpcap calls (004) |
//! | `threaded-napi` | [`threaded`] | threaded NAPI on a software device (veth) |
//! | `xdp` | [`xdp`] on [`napi`] | NAPI with an XDP program, native or generic |
//! | `af-xdp` | [`af_xdp`] on [`xdp`] and [`napi`] | an AF_XDP socket read by a user thread |
//!
//! Every mode runs each core as a sequence of work units ([`units`]): units run back to
//! back without touching the event queue as long as they end before the next event.
//!
//! Each mode also states what its own work costs per frame ([`ModeCosts`]: per-frame terms
//! and per-event terms such as a poll, a call or a wake-up, with how many frames share one
//! event when the rings never run dry): the analytical model (`model.rs`) prices a
//! frame with these, so model and simulator apply one cost semantics.
//!
//! To add a mode: a file here with its state machine, `impl IoMode`, its `mode_costs` and
//! a hand-traced test; an alternative of the tagged [`crate::scenario::IoSpec`] (its keys,
//! in parts, and its checks: `scenario/host.rs`) and of [`IoModeKind`]; one arm in
//! [`build`] and one in [`mode_costs`].

pub mod af_xdp;
pub mod batched;
pub mod napi;
pub mod server;
pub mod threaded;
pub mod units;
pub mod xdp;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::price::ModeCosts;
use crate::scenario::{IoModeKind, ResolvedScenario};

use super::costs::Costs;
use super::nic::rx::RxRingKind;
use super::nic::{Irq, Nic};
use super::queue::{EventQueue, Key};
use super::stats::Stats;
use super::strategy::{self, RingView, Strategy};
use super::time::{Instant, Span};
use crate::topology::Topology;

/// What an I/O mode may touch while handling an event.
pub struct Ctx<'a> {
    pub now: Instant,
    pub queue: &'a mut EventQueue,
    pub nic: &'a mut Nic,
    pub stats: &'a mut Stats,
    pub costs: &'a mut Costs,
    /// The cores' idle states: a core that runs out of work sleeps, and its wake-up costs.
    pub idle: &'a mut super::idle::Idle,
    /// The run is being stopped: handlers return as soon as they can.
    pub cancel: &'a AtomicBool,
    /// The cores share nothing but the ingress: one may run this far ahead of the earliest
    /// event of any core (None: no core runs past the next event of any kind).
    pub run_ahead: Option<Span>,
    /// Whose rings are whose.
    pub topo: Topology,
}

impl Ctx<'_> {
    /// How far core `c` may go on without the event queue: to the next event, or, when the
    /// cores are independent, to the next event that can touch it — its own next event
    /// (its unit's end, its vectors' interrupts and causes, its timers), the next arrival if
    /// one of its rings is armed, the next barrier (the end, interference) — and at most
    /// `run_ahead` past the earliest event of any core (which bounds the frames the ingress
    /// holds for rings whose cores are behind). Another core's events touch only that
    /// core's state.
    #[inline]
    pub fn horizon(&self, c: usize) -> Instant {
        let Some(ahead) = self.run_ahead else { return self.queue.peek_time() };
        let q = &*self.queue;
        let h = q.barrier_time().min(q.own_time(c)).min(q.peek_time().saturating_add(ahead));
        // (A unit at a time asks this: the core's rings are looked at only when it matters.)
        let arrival = self.nic.arrival_time();
        if arrival < h && self.topo.rings_of_core(c).any(|r| self.nic.rx(r).is_armed()) {
            return arrival;
        }
        h
    }

    #[inline]
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// A mode's own figures in a run's result (`io` in `run --json`): one type per mode, each
/// written out as its fields (keys in alphabetical order, as the contract has them).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum IoReport {
    Napi(napi::NapiReport),
    Server(server::ServerReport),
    Batched(batched::BatchedReport),
    Threaded(threaded::ThreadedReport),
    /// A chain's end-to-end result: the number of its nodes (each node's own figures are
    /// in its own result).
    Chain {
        chain: usize,
    },
    /// A mode with no figures of its own (`null`).
    None,
}

impl IoReport {
    /// As a JSON value (tests, and readers of single figures).
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// A pluggable I/O mode.
pub trait IoMode: Send {
    /// Set up at time 0 (arm rings or vectors, start pollers).
    fn start(&mut self, ctx: &mut Ctx);
    /// A timer this mode set popped ([`Key::Step`], [`Key::Wake`]); stale ones included.
    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx);
    /// An interrupt of a vector this mode armed fired.
    fn on_irq(&mut self, _irq: Irq, _ctx: &mut Ctx) {}
    /// A ring this mode asked to be woken by ([`Nic::arm`]) received a frame at `t`. (A ring
    /// armed by its vector, [`Nic::arm_vector`], raises the vector's cause instead: a mode
    /// that drives vectors hears of their interrupts, [`IoMode::on_irq`].)
    fn on_rx_wake(&mut self, _ring: usize, _t: Instant, _ctx: &mut Ctx) {}
    /// Interference takes forwarding core `core` from `t` for `d` (see [`units::preempt`]).
    fn preempt(&mut self, core: usize, t: Instant, d: Span, ctx: &mut Ctx);
    /// The run ends at `t`: charge the CPU time of work under way (see [`units::end`]).
    fn end(&mut self, t: Instant, ctx: &mut Ctx);
    /// Whether its cores share no state but the NIC's ingress (each its own rings, tx queue
    /// and vectors): then a core may run ahead of the others' events.
    fn independent_cores(&self) -> bool {
        false
    }
    /// The core of each index of its wake-up ([`Key::Wake`]) and deferral ([`Key::Defer`])
    /// timers, where its cores are independent (an index not named is a barrier).
    fn timer_cores(&self) -> (Vec<u32>, Vec<u32>) {
        (Vec::new(), Vec::new())
    }
    /// The rx rings this mode reads from.
    fn rx_ring_kind(&self) -> RxRingKind {
        RxRingKind::Descriptors
    }
    /// Mode-specific figures for the result (ITR intervals, wake-ups, ...).
    fn report(&self, _nic: &Nic) -> IoReport {
        IoReport::None
    }
    /// Tests: take no shortcut that has a general path beside it (a NAPI core's lone
    /// episodes), so that the two can be held equal.
    #[cfg(test)]
    fn general_path_only(&mut self) {}
}

/// A registered mode: how its cores are built, and what its own work costs (the model's
/// terms, [`ModeCosts`]).
struct Registered {
    build: fn(&ResolvedScenario, &Topology) -> Box<dyn IoMode>,
    costs: fn(&ResolvedScenario, &Costs) -> ModeCosts,
}

/// The one place modes are registered: each `host.io` with its mode's parts.
fn registered(kind: IoModeKind) -> Registered {
    match kind {
        IoModeKind::Napi => {
            Registered { build: |sc, topo| Box::new(napi::Napi::of(sc, topo, false)), costs: napi::mode_costs }
        }
        IoModeKind::Server => {
            Registered { build: |sc, topo| Box::new(server::Server::new(sc, topo)), costs: |_, _| server::mode_costs() }
        }
        IoModeKind::BusyPoll | IoModeKind::BatchedSyscall => Registered {
            build: |sc, topo| Box::new(batched::Batched::new(sc, topo)),
            costs: |sc, _| batched::mode_costs(sc),
        },
        IoModeKind::ThreadedNapi => Registered {
            build: |sc, topo| Box::new(threaded::ThreadedNapi::new(sc, topo)),
            costs: threaded::mode_costs,
        },
        IoModeKind::Xdp => Registered {
            build: |sc, topo| Box::new(napi::Napi::of(sc, topo, true)),
            costs: |sc, costs| xdp::mode_costs(sc, costs, napi::mode_costs(sc, costs)),
        },
        IoModeKind::AfXdp => Registered {
            build: |sc, topo| Box::new(napi::Napi::af_xdp(sc, topo)),
            costs: |sc, costs| af_xdp::mode_costs(sc, costs, xdp::mode_costs(sc, costs, napi::mode_costs(sc, costs))),
        },
    }
}

/// The mode a scenario asks for.
pub fn build(sc: &ResolvedScenario, topo: &Topology) -> Box<dyn IoMode> {
    (registered(sc.scenario.host.io.kind()).build)(sc, topo)
}

/// The costs of the mode a scenario asks for.
pub fn mode_costs(sc: &ResolvedScenario, costs: &Costs) -> ModeCosts {
    (registered(sc.scenario.host.io.kind()).costs)(sc, costs)
}

/// Each core's ring strategy (`host.core_strategies`, else `host.strategy`).
pub fn core_strategies(sc: &ResolvedScenario, topo: &Topology) -> Vec<Box<dyn Strategy>> {
    let rings = sc.scenario.host.io.rings().cloned().unwrap_or_default();
    (0..topo.cores())
        .map(|c| strategy::build(rings.core_strategies.get(c).unwrap_or(&rings.strategy), topo.queues_per_core()))
        .collect()
}

/// What a core's strategy may see of its rings now.
pub fn ring_views(rings: std::ops::Range<usize>, views: &mut [RingView], ctx: &Ctx) {
    for (v, r) in views.iter_mut().zip(rings) {
        let ring = ctx.nic.rx(r);
        *v = match ring.head() {
            Some(p) => RingView {
                len: ring.len(),
                head_arrival: p.t_ring,
                head_size: p.size,
                head_service: ctx.costs.t_proc_mean(p.size as u64),
            },
            None => RingView::default(),
        };
    }
}

/// Ask to be woken by the next write-back on any of these rings.
pub fn arm_rings(rings: std::ops::Range<usize>, ctx: &mut Ctx) {
    ctx.nic.arm(rings, true, ctx.queue);
}

/// No longer be woken by these rings.
pub fn disarm_rings(rings: std::ops::Range<usize>, ctx: &mut Ctx) {
    ctx.nic.arm(rings, false, ctx.queue);
}
