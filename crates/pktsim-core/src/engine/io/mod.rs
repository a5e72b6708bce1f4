//! Host I/O modes: how cores move packets from rx rings to tx rings. Each mode is a
//! self-contained state machine behind [`IoMode`]; the engine only routes events to it.
//!
//! - [`napi::Napi`]: Linux NAPI with an ixgbe-style driver (002, 003).
//! - [`batched::Batched`]: DPDK-style busy polling and netmap / libpcap system calls (004).
//! - [`threaded::ThreadedNapi`]: threaded NAPI on a software device (veth): no hard IRQ,
//!   a kernel thread woken by the sender.
//! - [`server::Server`]: cores as plain servers of their rings, choosing among them by a
//!   pluggable strategy (001), also used for checks against queueing theory.

pub mod batched;
pub mod napi;
pub mod server;
pub mod threaded;

use crate::scenario::ServiceDist;

use super::nic::Nic;
use super::queue::{EventKind, EventQueue};
use super::strategy::RingView;
use super::rng::Stream;
use super::stats::Stats;
use super::time::Ps;
use super::traffic::Packet;

/// Per-packet and per-event costs, in picoseconds.
pub struct Costs {
    pub t_irq: Ps,
    /// Lock hold time per packet on a shared tx queue.
    pub tx_lock: Ps,
    pub t_poll: Ps,
    pub t_clean: Ps,
    pub proc_fixed_ps: Ps,
    /// Per-byte part of t_proc, in femtoseconds per byte (integer: exact and reproducible).
    pub proc_per_byte_fs: u64,
    pub dist: ServiceDist,
    pub rng: Stream,
}

impl Costs {
    /// Rx-clean time of one packet.
    #[inline]
    pub fn t_proc(&mut self, p: &Packet) -> Ps {
        let mean = self.proc_fixed_ps + self.proc_per_byte_fs * p.size as u64 / 1000;
        match self.dist {
            ServiceDist::Constant => mean,
            ServiceDist::Exponential => super::time::round_ps(self.rng.exponential(mean as f64)),
        }
    }

    /// Mean rx-clean time for a frame size (for reports).
    pub fn t_proc_mean(&self, size: u64) -> Ps {
        self.proc_fixed_ps + self.proc_per_byte_fs * size / 1000
    }
}

/// What an I/O mode may touch while handling an event.
pub struct Ctx<'a> {
    pub now: Ps,
    pub queue: &'a mut EventQueue,
    pub nic: &'a mut Nic,
    pub stats: &'a mut Stats,
    pub costs: &'a mut Costs,
}

/// A pluggable I/O mode.
pub trait IoMode {
    /// Set up at time 0 (arm rings, start pollers).
    fn start(&mut self, ctx: &mut Ctx);
    /// An event this mode scheduled (`EventKind::Mode`).
    fn on_event(&mut self, tag: u8, index: u32, gen: u32, ctx: &mut Ctx);
    /// A ring this mode asked to be woken by received a frame at `t`.
    fn on_rx_wake(&mut self, ring: usize, t: Ps, ctx: &mut Ctx);
    /// Mode-specific figures for the result (ITR intervals, ...).
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// What a core's strategy may see of its rings now.
pub fn ring_views(rings: &[usize], views: &mut [RingView], ctx: &Ctx) {
    for (v, &r) in views.iter_mut().zip(rings) {
        let ring = &ctx.nic.rx[r];
        *v = match ring.pkts.front() {
            Some(p) => RingView { len: ring.pkts.len(), head_arrival: p.t_ring, head_size: p.size, head_service: ctx.costs.t_proc_mean(p.size as u64) },
            None => RingView::default(),
        };
    }
}

/// Whether a unit from `t` lasting `d` ends before the next event (then the caller runs on);
/// if not, schedule the caller's step event at its end under a new generation.
pub fn continue_or_suspend(ctx: &mut Ctx, t: Ps, d: Ps, tag: u8, index: usize, gen: &mut u32) -> bool {
    if t + d <= ctx.queue.peek_time() {
        return true;
    }
    *gen = gen.wrapping_add(1);
    ctx.queue.schedule(t + d, EventKind::Mode { tag, index: index as u32, gen: *gen });
    false
}

/// Ask to be woken by the next write-back on any of these rings.
pub fn arm_rings<'a>(rings: impl IntoIterator<Item = &'a usize>, ctx: &mut Ctx) {
    for &r in rings {
        ctx.nic.arm(r, ctx.queue);
    }
}
