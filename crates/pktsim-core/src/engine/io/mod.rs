//! Host I/O modes: how cores move frames from rx rings to tx queues. Each mode is a
//! self-contained state machine behind [`IoMode`], one file each, registered in [`build`];
//! the engine only routes events to it, and a mode drives the NIC only through its methods.
//!
//! | `host.io` | file | mode |
//! |---|---|---|
//! | `napi` | [`napi`] | Linux NAPI with an ixgbe-style driver (002, 003) |
//! | `server` | [`server`] | cores as plain servers of their rings with a strategy (001, theory) |
//! | `busy-poll`, `batched-syscall` | [`batched`] | DPDK-style polling, netmap / libpcap calls (004) |
//! | `threaded-napi` | [`threaded`] | threaded NAPI on a software device (veth) |
//!
//! Every mode runs each core as a sequence of work units ([`units`]): units run back to
//! back without touching the event queue as long as they end before the next event.
//!
//! To add a mode: a file here with its state machine, `impl IoMode` and a hand-traced
//! test; a variant of [`IoModeKind`] (its keys in [`crate::scenario::HostSpec`], checked
//! where that spec is validated); one arm in [`build`].

pub mod batched;
pub mod napi;
pub mod server;
pub mod threaded;
pub mod units;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::scenario::{IoModeKind, ResolvedScenario};

use super::costs::Costs;
use super::nic::rx::RxRingKind;
use super::nic::{Irq, Nic};
use super::queue::{EventQueue, Key};
use super::stats::Stats;
use super::strategy::{self, RingView, Strategy};
use super::time::Instant;
use super::topology::Topology;

/// What an I/O mode may touch while handling an event.
pub struct Ctx<'a> {
    pub now: Instant,
    pub queue: &'a mut EventQueue,
    pub nic: &'a mut Nic,
    pub stats: &'a mut Stats,
    pub costs: &'a mut Costs,
    /// The run is being stopped: handlers return as soon as they can.
    pub cancel: &'a AtomicBool,
}

impl Ctx<'_> {
    #[inline]
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
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
    /// A ring this mode asked to be woken by received a frame at `t`.
    fn on_rx_wake(&mut self, ring: usize, t: Instant, ctx: &mut Ctx);
    /// The run ends at `t`: charge the CPU time of work under way (see [`units::end`]).
    fn end(&mut self, t: Instant, ctx: &mut Ctx);
    /// The rx rings this mode reads from.
    fn rx_ring_kind(&self) -> RxRingKind {
        RxRingKind::Descriptors
    }
    /// Mode-specific figures for the result (ITR intervals, wake-ups, ...).
    fn report(&self, _nic: &Nic) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The mode a scenario asks for (the one place modes are registered).
pub fn build(sc: &ResolvedScenario, topo: &Topology) -> Box<dyn IoMode> {
    match sc.scenario.host.io {
        IoModeKind::Napi => Box::new(napi::Napi::new(sc, topo)),
        IoModeKind::BusyPoll | IoModeKind::BatchedSyscall => Box::new(batched::Batched::new(sc, topo)),
        IoModeKind::Server => Box::new(server::Server::new(sc, topo)),
        IoModeKind::ThreadedNapi => Box::new(threaded::ThreadedNapi::new(sc, topo)),
    }
}

/// Each core's ring strategy (`host.core_strategies`, else `host.strategy`).
pub fn core_strategies(sc: &ResolvedScenario, topo: &Topology) -> Vec<Box<dyn Strategy>> {
    let host = &sc.scenario.host;
    (0..topo.cores()).map(|c| strategy::build(host.core_strategies.get(c).unwrap_or(&host.strategy), topo.queues_per_core())).collect()
}

/// What a core's strategy may see of its rings now.
pub fn ring_views(rings: std::ops::Range<usize>, views: &mut [RingView], ctx: &Ctx) {
    for (v, r) in views.iter_mut().zip(rings) {
        let ring = ctx.nic.rx(r);
        *v = match ring.head() {
            Some(p) => RingView { len: ring.len(), head_arrival: p.t_ring, head_size: p.size, head_service: ctx.costs.t_proc_mean(p.size as u64) },
            None => RingView::default(),
        };
    }
}

/// Ask to be woken by the next write-back on any of these rings.
pub fn arm_rings(rings: impl IntoIterator<Item = usize>, ctx: &mut Ctx) {
    for r in rings {
        ctx.nic.arm(r, ctx.queue);
    }
}

/// No longer be woken by these rings.
pub fn disarm_rings(rings: impl IntoIterator<Item = usize>, ctx: &mut Ctx) {
    for r in rings {
        ctx.nic.disarm(r);
    }
}
