//! One driver poll of a vector's NAPI (ixgbe's `ixgbe_poll`), in its phases: the poll's
//! fixed cost, the tx clean (`ixgbe_clean_tx_irq`: completed descriptors, at most
//! `tx_work_limit`), the rx clean (`ixgbe_clean_rx_irq`: frames up to the weight, each
//! handed to XDP, the application or its tx queue, descriptors given back in batches,
//! `ixgbe_alloc_rx_buffers`), XDP's bulk flush; then its end (`napi_complete_done`: the
//! deferral of `napi_defer_hard_irqs` and `gro_flush_timeout`, or the episode's end and the
//! vector unmasked).
//!
//! A phase's frames and completions run as one run where nothing they do can raise an
//! event (`Nic::runs_alone`), else one unit each, inline while they end by the horizon.

use super::{Napi, Phase, PollKind, Work};
use crate::engine::io::units;
use crate::engine::io::Ctx;
use crate::engine::queue::Key;
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};
use crate::scenario::NetRxAction;

impl Napi {
    /// One step of core `c`'s poll, in its `phase` (the vector's rx ring and tx queue in
    /// `layout`), from `*t`: the unit to run next, or None when the poll went on to its
    /// next phase or ended (the caller looks again).
    #[inline(always)]
    pub(super) fn poll_step(
        &mut self,
        c: usize,
        phase: Phase,
        layout: (Option<usize>, Option<usize>),
        t: &mut Instant,
        ctx: &mut Ctx,
    ) -> Option<(Work, Span)> {
        let core = &mut self.cores[c];
        let poll = core.poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
        match phase {
            Phase::Start => {
                poll.phase = Phase::Tx;
                if ctx.costs.t_poll > Span::ZERO {
                    return Some((Work::PollStart, ctx.costs.t_poll));
                }
            }
            Phase::Tx => {
                if let Some(q) = layout.1 {
                    // Completed descriptors, one unit each; those that end by the
                    // horizon run here.
                    let d = ctx.costs.t_clean;
                    if self.cores[c].worker.is_free_at(*t) && !ctx.cancelled() {
                        // Cleaning posts no frame that could raise an event: one run.
                        let (t0, horizon) = (*t, ctx.horizon(c));
                        let poll = self.cores[c].poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
                        let beyond = ctx.nic.tx_clean(
                            q,
                            t,
                            (&mut poll.tx_done, &mut poll.tx_bytes, self.p.tx_work_limit),
                            d,
                            horizon,
                            ctx.stats,
                        );
                        self.charge_poll(c, Activity::TxClean, t0, *t, ctx);
                        if beyond {
                            return Some((Work::TxClean(q), d));
                        }
                    }
                    loop {
                        let poll = self.cores[c].poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
                        if poll.tx_done >= self.p.tx_work_limit {
                            poll.tx_complete = false;
                            break;
                        }
                        if ctx.nic.tx(q).head_done().is_none_or(|done| done > *t) {
                            break;
                        }
                        if !self.inline_fits(c, *t, d, ctx) {
                            return Some((Work::TxClean(q), d));
                        }
                        self.charge_poll(c, Activity::TxClean, *t, *t + d, ctx);
                        *t += d;
                        self.tx_cleaned(c, q, *t, ctx);
                    }
                }
                if let (Some(q), true) = (layout.1, self.xsk_l2fwd) {
                    // AF_XDP l2fwd: completions onto the completion ring, then (zero copy)
                    // the socket's tx ring sent.
                    if let Some(work) = self.xsk_tx(c, q, ctx) {
                        return Some(work);
                    }
                }
                let poll = self.cores[c].poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
                poll.phase = Phase::Rx;
            }
            Phase::Rx => {
                if let Some(r) = layout.0 {
                    let q = self.topo.tx_of_ring(r);
                    let plain = self.xdp.is_none() && self.app.is_none();
                    if plain
                        && self.cores[c].worker.is_free_at(*t)
                        && ctx.nic.runs_alone(q, ctx.costs.tx_lock)
                        && !ctx.cancelled()
                    {
                        // Frames go straight to their tx queue, raising no event:
                        // the frames that end by the horizon in one run.
                        let (t0, horizon) = (*t, ctx.horizon(c));
                        let core = &mut self.cores[c];
                        let poll = core.poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
                        let costs = &mut *ctx.costs;
                        let count = (&mut poll.rx_done, &mut poll.rx_bytes, poll.weight);
                        let beyond = ctx.nic.forward_run(
                            (r, q),
                            t,
                            count,
                            self.p.refill_batch,
                            horizon,
                            ctx.queue,
                            ctx.stats,
                            |p| costs.t_proc(p),
                            &mut core.frame,
                            &mut None,
                        );
                        self.charge_poll(c, Activity::RxClean, t0, *t, ctx);
                        if let Some(d) = beyond {
                            return Some((Work::RxPacket(r), d));
                        }
                    }
                    // One unit per frame; those that end by the horizon run here.
                    loop {
                        let core = &mut self.cores[c];
                        let poll = core.poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
                        // A full devmap bulk queue is sent before the next frame.
                        if let Some(x) =
                            self.xdp.as_ref().filter(|x| x.bulk_limit.is_some_and(|n| core.bulk.len() >= n))
                        {
                            return Some((Work::XdpFlush, x.t_flush));
                        }
                        if poll.rx_done >= poll.weight {
                            break;
                        }
                        // Descriptors go back in batches at the top of each iteration.
                        if self.xsk_zc {
                            if !self.xsk_rx_refill(c, r, *t, self.p.refill_batch, ctx) {
                                break;
                            }
                        } else {
                            ctx.nic.refill(r, *t, self.p.refill_batch, ctx.stats);
                        }
                        let core = &mut self.cores[c];
                        if ctx.nic.take(r, *t, ctx.stats, &mut core.frame) == 0 {
                            break;
                        }
                        let d = match &self.xdp {
                            Some(x) => x.frame_time(&core.frame, ctx.costs),
                            None => ctx.costs.t_proc(&core.frame),
                        };
                        if !self.inline_fits(c, *t, d, ctx) {
                            return Some((Work::RxPacket(r), d));
                        }
                        self.charge_poll(c, Activity::RxClean, *t, *t + d, ctx);
                        *t += d;
                        self.rx_cleaned(c, r, *t, ctx);
                        if let Some((q, d)) = self.cores[c].lock.take() {
                            return Some((Work::TxLock(q), d));
                        }
                    }
                    if self.p.refill_at_poll_end {
                        if self.xsk_zc {
                            self.xsk_rx_refill(c, r, *t, 1, ctx);
                        } else {
                            ctx.nic.refill(r, *t, 1, ctx.stats);
                        }
                    }
                }
                let poll = self.cores[c].poll.as_mut().unwrap_or_else(|| unreachable!("in a poll"));
                poll.phase = Phase::Flush;
            }
            Phase::Flush => {
                // xdp_do_flush: the poll's bulk goes out, then the poll ends.
                if let (false, Some(x)) = (core.bulk.is_empty(), &self.xdp) {
                    return Some((Work::XdpFlush, x.t_flush));
                }
                self.finish_poll(c, *t, ctx);
            }
        }
        None
    }

    /// `napi_complete_done` on core `c` armed the NAPI's timer at `t` (`hrtimer_start`):
    /// what the timer costs (`host.t_timer`: its arming and the expiry that follows) takes
    /// the core now, after the poll, as the poll's time; it delays no frame the poll took.
    fn timer_armed(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        let d = ctx.costs.t_timer;
        if !d.is_zero() {
            units::take(self, c, t, d, Activity::Poll, ctx);
        }
    }

    pub(super) fn finish_poll(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        let Some(poll) = self.cores[c].poll.take() else { return };
        let v = poll.vector;
        ctx.stats.poll(t, poll.rx.map(|_| poll.rx_done));
        let ep = &mut self.napi[v].episode;
        ep.rx_packets += poll.rx_done as u64;
        ep.rx_bytes += poll.rx_bytes;
        ep.tx_packets += poll.tx_done as u64;
        ep.tx_bytes += poll.tx_bytes;
        let full = poll.rx_done >= poll.weight || !poll.tx_complete || poll.short;
        match poll.kind {
            // In a busy-poll loop napi_complete_done does nothing: the poller keeps it.
            PollKind::Busy => return,
            PollKind::BusyStop => {
                let inst = &mut self.napi[v];
                inst.busy_owned = false;
                let gro = self.p.gro_flush_timeout;
                if self.p.prefer_busy_poll && self.p.defers {
                    // The interrupt stays masked: the timer (IRQ suspension's when epoll
                    // found events) polls if the application does not come back first.
                    let suspend =
                        !self.p.irq_suspend_timeout.is_zero() && self.app.as_ref().is_some_and(|a| a.has_data(c));
                    inst.scheduled = false;
                    inst.defer_left = self.p.defer_hard_irqs - 1;
                    let timeout = if suspend { self.p.irq_suspend_timeout } else { gro };
                    inst.defer_timer.set(ctx.queue, t + timeout, Key::Defer(v as u32));
                    return;
                }
                if full {
                    inst.scheduled = false;
                    self.napi_schedule(c, v, t, ctx);
                    return;
                }
            }
            PollKind::Normal => {}
        }
        // A preferred busy poller's NAPI is completed even after a full poll (with
        // deferral: the timer), leaving the next poll to the application.
        let yield_to_app = full && self.p.prefer_busy_poll && poll.kind == PollKind::Normal && self.p.defers;
        let incomplete = full && !yield_to_app;
        if self.p.threaded && poll.kind == PollKind::Normal {
            let core = &mut self.cores[c];
            if !incomplete {
                // napi_complete: the thread sleeps (on its way there for t_sleep) until the
                // NAPI is scheduled again.
                self.thread_done(c, v, t, ctx);
            } else if !core.runnable.is_empty() && !self.fair_threads {
                // cond_resched: the next runnable NAPI thread gets the core (sharing it
                // with an application, the fair class decides).
                core.thread = None;
                core.runnable.push_back(v);
            }
        }
        let legacy = self.p.net_rx_action == NetRxAction::Legacy;
        let nr = &mut self.cores[c].net_rx;
        if nr.active {
            nr.budget -= poll.rx_done as i64;
            nr.polled = true;
            if incomplete {
                if legacy {
                    nr.local.push_back(v);
                } else {
                    nr.repoll.push_back(v);
                }
            }
        }
        if !incomplete {
            let inst = &mut self.napi[v];
            inst.scheduled = false;
            // A kick while it was polled (NAPI_STATE_MISSED): napi_complete_done schedules
            // it again.
            if std::mem::take(&mut inst.missed) {
                self.napi_schedule(c, v, t, ctx);
                return;
            }
            // napi_complete_done: work reloads the deferral count; while it lasts, the
            // vector stays masked and the timer polls again (the episode goes on).
            if poll.rx_done > 0 {
                inst.defer_left = self.p.defer_hard_irqs;
            }
            if inst.defer_left > 0 && self.p.defers {
                inst.defer_left -= 1;
                inst.defer_timer.set(ctx.queue, t + self.p.gro_flush_timeout, Key::Defer(v as u32));
                self.timer_armed(c, t, ctx);
                return;
            }
            // The episode ends (the moderation policy hears of it), unmask.
            let episode = std::mem::take(&mut inst.episode);
            ctx.nic.complete(v, t, episode, Instant::ZERO, &mut None, ctx.queue, ctx.stats);
        }
    }

    /// A tx clean unit of core `c` on queue `q` ended at `t`: the oldest completed
    /// descriptor is cleaned (the unit took its time) and counted in the poll.
    #[inline(always)]
    pub(super) fn tx_cleaned(&mut self, c: usize, q: usize, t: Instant, ctx: &mut Ctx) {
        let (mut done, mut bytes) = (0, 0);
        let (done, bytes) = match &mut self.cores[c].poll {
            Some(poll) => (&mut poll.tx_done, &mut poll.tx_bytes),
            None => (&mut done, &mut bytes),
        };
        let (mut at, max) = (t, *done + 1);
        ctx.nic.tx_clean(q, &mut at, (done, bytes, max), Span::ZERO, t, ctx.stats);
    }

    /// The rx clean of core `c`'s frame from ring `r` ended at `t`: counted in the poll,
    /// then handed to XDP or the application, or sent (after the shared tx queue's lock,
    /// when there is one to wait for: then the core's `lock` is set).
    #[inline(always)]
    pub(super) fn rx_cleaned(&mut self, c: usize, r: usize, t: Instant, ctx: &mut Ctx) {
        let q = self.topo.tx_of_ring(r);
        let core = &mut self.cores[c];
        if let Some(poll) = &mut core.poll {
            poll.rx_done += 1;
            poll.rx_bytes += core.frame.size.saturating_sub(4) as u64;
        }
        if (self.xdp.is_some() || self.app.is_some()) && self.rx_verdict(c, self.cores[c].frame, q, t, ctx) {
            return;
        }
        let lock = ctx.nic.tx(q).lock(t, ctx.costs.tx_lock);
        if lock > Span::ZERO {
            self.cores[c].lock = Some((q, lock));
        } else {
            ctx.nic.xmit(q, &self.cores[c].frame, t, false, ctx.queue, ctx.stats);
        }
    }

    /// Whether core `c` may run a unit of `d` from `t` inline (see [`Units::next`]); every
    /// 1,024 inline units the run's stop flag is looked at, and a stopped run runs none.
    #[inline(always)]
    pub(super) fn inline_fits(&mut self, c: usize, t: Instant, d: Span, ctx: &Ctx) -> bool {
        let core = &mut self.cores[c];
        core.inline_units = core.inline_units.wrapping_add(1);
        if core.inline_units.is_multiple_of(1024) && ctx.cancelled() {
            return false;
        }
        units::fits(&core.worker, c, t, d, ctx)
    }
}
