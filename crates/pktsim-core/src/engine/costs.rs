//! What the host's work costs in time: per interrupt, per poll, per tx clean, per frame
//! processed (with its per-byte part and its distribution), per shared-lock hold.
//!
//! The host's times are used where the scenario gives them (`host.t_proc`, `host.t_clean`,
//! ...); otherwise the cost profile's cycles per group (with the FIB model applied) at the
//! CPU frequency — the same numbers the analytical model uses, so the two describe one
//! node. `t_clean` takes C_free (skbs are freed when tx completions are cleaned) and
//! `t_proc` the rest.

use crate::cost::Group;
use crate::model;
use crate::scenario::{ResolvedScenario, ServiceDist};

use super::ingress::Packet;
use super::rng::Stream;
use super::time::Span;

/// Per-packet and per-event costs.
pub struct Costs {
    pub t_irq: Span,
    /// Lock hold time per packet on a shared tx queue.
    pub tx_lock: Span,
    pub t_poll: Span,
    pub t_clean: Span,
    /// Fixed part of the rx-clean time of a frame.
    pub proc_fixed: Span,
    /// Per-byte part of t_proc, in femtoseconds per byte (integer: exact and reproducible).
    pub proc_per_byte_fs: u64,
    pub dist: ServiceDist,
    pub rng: Stream,
}

impl Costs {
    /// The scenario's costs (see the module header).
    pub fn of(sc: &ResolvedScenario) -> Costs {
        let s = &sc.scenario;
        let f = s.cpu.frequency.hz;
        let (groups, _) = model::group_cycles(sc);
        let mean_size = sc.mean_frame_bytes();
        let per_byte_free = sc.cost.per_byte.get(Group::Free);
        let per_byte_total: f64 = sc.cost.per_byte.0.iter().sum();
        let cycles = |c: f64| Span::from_ps((c / f * 1e12).round() as u64);
        let t_clean = match s.host.t_clean {
            Some(d) => d.into(),
            None if s.host.t_proc.is_some() => Span::ZERO,
            None => cycles(groups.get(Group::Free)),
        };
        let (fixed, per_byte_fs) = match s.host.t_proc {
            // Explicit times still see the FIB model: a bigger FIB adds its routing cycles.
            // x = a S + b + c (001): t_proc = b + c, t_proc_per_byte = a.
            Some(d) => (
                Span::from(d) + cycles((groups.get(Group::Routing) - sc.cost.fixed.get(Group::Routing)).max(0.0)),
                s.host.t_proc_per_byte.map_or(0, |a| a.fs_per_byte),
            ),
            None => {
                // group_cycles is at the mean size; take the per-byte part out again.
                let per_byte = per_byte_total - per_byte_free;
                let fixed_cycles = groups.total() - groups.get(Group::Free) - per_byte * mean_size;
                (cycles(fixed_cycles), (per_byte / f * 1e15).round() as u64)
            }
        };
        Costs {
            t_irq: s.host.t_irq.into(),
            tx_lock: s.host.tx_lock.into(),
            t_poll: s.host.t_poll.into(),
            t_clean,
            proc_fixed: fixed,
            proc_per_byte_fs: per_byte_fs,
            dist: s.host.service,
            rng: Stream::new(s.seed, "service"),
        }
    }

    /// Rx-clean time of one packet (drawn from the service distribution).
    #[inline]
    pub fn t_proc(&mut self, p: &Packet) -> Span {
        let mean = self.t_proc_mean(p.size as u64);
        match self.dist {
            ServiceDist::Constant => mean,
            ServiceDist::Exponential => Span::from_ps_f64(self.rng.exponential(mean.ps() as f64)),
        }
    }

    /// Mean rx-clean time for a frame size.
    #[inline]
    pub fn t_proc_mean(&self, size: u64) -> Span {
        self.proc_fixed + Span::from_ps(self.proc_per_byte_fs * size / 1000)
    }
}
