//! A NAPI core's lone episodes: where a core is alone with its NAPIs, an interrupt's
//! whole episode runs straight through, and the interrupts that follow fire without an
//! event.
//!
//! ```text
//!   IRQ at t (core idle, the vector masked)
//!     --> hard IRQ handler (t_irq) --> softirq: the one poll
//!           tx clean run (t_clean each) --> rx clean run (t_proc each, to the tx queue)
//!     --> napi_complete_done: the policy hears of the episode; unmasked, the vector's
//!         next interrupt is known at once when a cause is pending, when a completion is
//!         posted that the throttle outlasts, or from its first cause (the ring's next
//!         write-back, the tx ring's next completion) for a policy that counts no frames
//!     --> with tx completions on a vector of their own (nic.tx_vector = "separate"), the
//!         rx clean's first frame posted while that vector is armed is its cause: its
//!         interrupt is known at once too
//!     --> that interrupt coming during a frame of the rx clean: its hard IRQ handler
//!         preempts the frame (which ends t_irq later) and schedules the tx NAPI, which
//!         the same net_rx_action polls next (no second handler, no second softirq entry)
//!     --> the earliest of these fires here at its time if it comes before anything else
//!         can happen (the horizon: the next event), and its episode starts; the other
//!         waits (held), and the episode must end before it (it would preempt it); else
//!         each goes back to the queue as the general path has it then, and the core idles
//! ```
//!
//! The general path runs the same steps as work units through [`super::units`], each
//! interrupt and cause an event. A lone episode calls the same NIC and statistics methods,
//! at the same times and in the same order, so the figures are the general path's bit for
//! bit (`lone_episodes_are_the_general_path`, `lone_episodes_break_ties_as_the_general_path`
//! run both); only the events differ. At low load a frame's interrupts, polls and tx
//! completion then cost no event at all (0.1 Mpps on the 002 node: 0.99 events per frame
//! before, 0.04 after; with the tx completions on a vector of their own 3.93 before, under
//! 0.01 after, the tx interrupt's preemption of an rx clean and the tx NAPI's poll that
//! follows run here too: `lone_episodes_poll_the_tx_napi_a_frame_preempted_for_as_the_general_path`).
//!
//! Between episodes the core sleeps in its idle state (`[cpu.idle]`): the next interrupt's
//! handler starts after the state's exit and refill, inline only when those end before
//! anything else can happen; else the interrupt goes back to the queue and the general path
//! wakes the core.
//!
//! A step that does not fit (it would end after the horizon or a held interrupt, the core
//! is taken by interference), a full poll (it stays scheduled: net_rx_action polls it
//! again) or a deferral, a thread, an XDP program or an application (not lone) leave the
//! core's state as the general path's at that point, which goes on from there.

use super::{Napi, Phase, Poll, PollKind, Work};
use crate::engine::io::{units, Ctx};
use crate::engine::nic::Held;
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};
use crate::scenario::NetRxAction;

/// Where a core's lone episodes stopped (see [`Napi::lone_episodes`]).
pub(super) enum Lone {
    /// A unit that does not end by the horizon: the core's next.
    Unit(Work, Span),
    /// The vector is unmasked, or its interrupt scheduled: the core idles.
    Idle,
    /// The core's state is the general one's at that point: carry on from there.
    General,
}

impl Napi {
    /// Whether cores may run lone episodes: plain NAPI (no thread, XDP program or
    /// application), no deferral, one rx ring per core, each core sending on a tx queue of
    /// its own whose completions interrupt the core: on its rx vector
    /// (`nic.tx_vector = "shared"`) or on a vector of their own (`"separate"`).
    pub(super) fn with_lone(mut self) -> Self {
        let t = &self.topo;
        let own_tx = t.tx_queues() == t.cores()
            && (0..t.cores()).all(|c| t.tx_of_core(c) == c && t.vector(t.vector_of_tx(c)).core == c);
        let deferral = self.p.defers;
        self.lone = !self.p.threaded
            && self.xdp.is_none()
            && self.app.is_none()
            && !deferral
            && self.p.budget > 0
            && t.queues_per_core() == 1
            && own_tx;
        self.lone_pair = self.lone && t.vectors() > t.rings();
        self
    }

    /// Hand the interrupts held in a lone run back to the queue at `now` (see
    /// [`Held::restore`]), in the order the general path scheduled
    /// them: events of one time run in that order.
    fn restore(held: &mut [Option<Held>; 2], now: Instant, ctx: &mut Ctx) {
        let [a, b] = [held[0].take(), held[1].take()];
        let (first, second) = match (a, b) {
            // A completion schedules at its time before a cause's event of that time runs;
            // causes of one time run in the order their timers were set.
            (Some(x), Some(y)) if (y.since, y.cause, y.set) < (x.since, x.cause, x.set) => (Some(y), Some(x)),
            (x, y) => (x, y),
        };
        for h in [first, second].into_iter().flatten() {
            h.restore(ctx.nic, now, ctx.queue);
        }
    }

    /// Core `c`, idle, takes vector `v`'s interrupt at `*t`: its episodes run here, one
    /// after another, while the core is alone with its NAPIs and each step ends by the
    /// horizon — the hard IRQ handler, the softirq's one poll (tx clean, rx clean, both as
    /// runs) and `napi_complete`. The interrupts this raises that come before anything
    /// else can happen fire here without an event: the vector's next one, from
    /// `napi_complete`, and with tx completions on a vector of their own, that vector's,
    /// from the first frame the rx clean posts while it is armed (each is held until it
    /// fires, and bounds the other vector's episodes, which it would preempt). The tx
    /// vector's interrupt that comes during a frame of the rx clean preempts that frame
    /// here (its handler's time added to the frame's) and its NAPI is polled after the rx
    /// NAPI in the same net_rx_action, while budget and time limit allow. Each step is
    /// charged and applied as the units and the events of the general path would, in the
    /// same order (`lone_episodes_are_the_general_path`); where a step does not fit, the
    /// held interrupts go back to the queue and the core's state is left as the general
    /// path's at that point, which goes on from there.
    ///
    /// `PAIR`: the core has a tx vector of its own (`lone_pair`); without, nothing is held
    /// but the one vector's next interrupt, and the loop is compiled without the rest.
    #[inline(never)]
    pub(super) fn lone_episodes<const PAIR: bool>(
        &mut self,
        c: usize,
        v: usize,
        t: &mut Instant,
        ctx: &mut Ctx,
    ) -> Lone {
        // (The time is a local while the episodes run: through the caller's pointer, each
        // step would load and store it.)
        let mut now = *t;
        let lone = self.lone_episodes_from::<PAIR>(c, v, &mut now, ctx);
        *t = now;
        lone
    }

    /// [`Napi::lone_episodes`]' work.
    #[inline(always)]
    fn lone_episodes_from<const PAIR: bool>(&mut self, c: usize, v: usize, t: &mut Instant, ctx: &mut Ctx) -> Lone {
        let t_irq = ctx.costs.t_irq;
        let core = &self.cores[c];
        let quiet = core.irq_queue.is_empty()
            && core.poll.is_none()
            && !core.net_rx.active
            && !core.softirq_pending
            && !core.ksoftirqd
            && core.bh.is_none()
            && core.poll_list.is_empty()
            && !self.napi[v].scheduled;
        if !quiet {
            return Lone::Unit(Work::Irq(v), t_irq);
        }
        let (t_poll, t_clean, weight) = (ctx.costs.t_poll, ctx.costs.t_clean, self.p.weight);
        // The held interrupts: of the core's rx vector, and of its tx vector.
        let mut held: [Option<Held>; 2] = [None, None];
        let mut v = v;
        let mut horizon = ctx.horizon(c);
        // The tx vector's NAPI, scheduled by its interrupt during the rx clean: polled
        // next in the same net_rx_action (`second`: this poll is that one).
        let mut scheduled: Option<usize> = None;
        let mut second = false;
        // (Without a tx vector of its own, every episode is the one vector's.)
        let first_layout = ctx.nic.vectors()[v].layout();
        loop {
            let layout = if PAIR { ctx.nic.vectors()[v].layout() } else { first_layout };
            let (rx, tx) = (layout.rx, layout.tx);
            let me = if PAIR { usize::from(rx.is_none()) } else { 0 };
            // The other vector's held interrupt would preempt this episode.
            let end = if PAIR { held[1 - me].map_or(horizon, |h| horizon.min(h.at)) } else { horizon };
            // The poll as the general path keeps it, for a step that does not fit.
            let poll = |phase, tx_: (u32, u64, bool), rx_: (u32, u64)| Poll {
                vector: v,
                rx,
                tx,
                kind: PollKind::Normal,
                weight,
                phase,
                tx_done: tx_.0,
                tx_bytes: tx_.1,
                tx_complete: tx_.2,
                rx_done: rx_.0,
                rx_bytes: rx_.1,
                short: false,
                xsk_sent: false,
                tx_reported: 0,
            };
            // The hard IRQ handler; its napi_schedule raises the softirq, which runs next
            // and polls its only NAPI. (A second poll has neither.)
            if !(PAIR && std::mem::take(&mut second)) {
                if !self.cores[c].worker.is_free_at(*t) || *t + t_irq > end || ctx.cancelled() {
                    Self::restore(&mut held, *t, ctx);
                    return Lone::Unit(Work::Irq(v), t_irq);
                }
                ctx.stats.busy(c, Activity::Irq, *t, *t + t_irq);
                *t += t_irq;
                self.napi[v].scheduled = true;
                ctx.stats.softirq(*t);
                let time_limit = self.jiffy_start(*t) + self.jiffy * self.budget_jiffies;
                // invoke_softirq: a __do_softirq of its own (the core was quiet).
                self.cores[c].bh = Some(super::Bh { passes: 0, start: *t, ksoftirqd: false });
                let nr = &mut self.cores[c].net_rx;
                (nr.active, nr.budget, nr.time_limit, nr.polled) = (true, self.p.budget as i64, time_limit, false);
            }
            if t_poll > Span::ZERO {
                if *t + t_poll > end {
                    Self::restore(&mut held, *t, ctx);
                    self.cores[c].poll = Some(poll(Phase::Tx, (0, 0, true), (0, 0)));
                    return Lone::Unit(Work::PollStart, t_poll);
                }
                ctx.stats.busy(c, Activity::Poll, *t, *t + t_poll);
                *t += t_poll;
            }
            // Tx clean, then rx clean, each as a run.
            let (mut tx_done, mut tx_bytes) = (0, 0);
            if let Some(q) = tx {
                let t0 = *t;
                let beyond = ctx.nic.tx_clean(
                    q,
                    t,
                    (&mut tx_done, &mut tx_bytes, self.p.tx_work_limit),
                    t_clean,
                    end,
                    ctx.stats,
                );
                ctx.stats.busy(c, Activity::TxClean, t0, *t);
                if beyond {
                    Self::restore(&mut held, *t, ctx);
                    self.cores[c].poll = Some(poll(Phase::Tx, (tx_done, tx_bytes, true), (0, 0)));
                    return Lone::Unit(Work::TxClean(q), t_clean);
                }
            }
            let tx_complete = tx.is_none() || tx_done < self.p.tx_work_limit;
            let (mut rx_done, mut rx_bytes) = (0, 0);
            if let Some(r) = rx {
                let q = self.topo.tx_of_ring(r);
                let mut run_end = end;
                let beyond = loop {
                    let (t0, mut cause) = (*t, None);
                    let core = &mut self.cores[c];
                    let costs = &mut *ctx.costs;
                    let beyond = ctx.nic.forward_run(
                        (r, q),
                        t,
                        (&mut rx_done, &mut rx_bytes, weight),
                        self.p.refill_batch,
                        run_end,
                        ctx.queue,
                        ctx.stats,
                        |p| costs.t_proc(p),
                        &mut core.frame,
                        &mut cause,
                    );
                    ctx.stats.busy(c, Activity::RxClean, t0, *t);
                    // (Only the tx vector, another one, can be armed: a cause held for it.)
                    if PAIR && cause.is_some() {
                        held[1] = cause;
                    }
                    // The tx vector's interrupt comes during the frame that starts at `*t`:
                    // the hard IRQ handler preempts it (the frame ends t_irq later) and
                    // schedules the tx NAPI, which this net_rx_action polls after this one,
                    // as an event of the general path's would, if all of it comes before
                    // anything else can happen (strictly: the stretched frame's end is an
                    // event set after those already queued).
                    if let (true, Some(d), Some(h)) = (PAIR, beyond, held[1]) {
                        let e = *t + d + t_irq;
                        if *t <= h.at && h.at < *t + d && e < horizon {
                            held[1] = None;
                            h.fire(ctx.nic, ctx.stats);
                            ctx.stats.busy(c, Activity::Irq, h.at, h.at + t_irq);
                            self.napi_schedule(c, h.vector, h.at, ctx);
                            scheduled = Some(h.vector);
                            ctx.stats.busy(c, Activity::RxClean, *t + t_irq, e);
                            *t = e;
                            let frame = self.cores[c].frame;
                            rx_done += 1;
                            rx_bytes += frame.size.saturating_sub(4) as u64;
                            ctx.nic.xmit(q, &frame, e, false, ctx.queue, ctx.stats);
                            horizon = ctx.horizon(c);
                            run_end = horizon;
                            continue;
                        }
                    }
                    break beyond;
                };
                if let Some(d) = beyond {
                    Self::restore(&mut held, *t, ctx);
                    self.cores[c].poll = Some(poll(Phase::Rx, (tx_done, tx_bytes, tx_complete), (rx_done, rx_bytes)));
                    return Lone::Unit(Work::RxPacket(r), d);
                }
                // (The general path's rx loop looks at the ring once more, in vain: the run
                // ended on an empty ring, or at the weight.)
                if self.p.refill_at_poll_end {
                    ctx.nic.refill(r, *t, 1, ctx.stats);
                }
            }
            // The poll ends. A full one stays scheduled: the general path repolls it.
            if rx_done >= weight || !tx_complete {
                Self::restore(&mut held, *t, ctx);
                self.cores[c].poll = Some(poll(Phase::Flush, (tx_done, tx_bytes, tx_complete), (rx_done, rx_bytes)));
                return Lone::General;
            }
            // finish_poll, then napi_complete_done: the episode ends.
            ctx.stats.poll(*t, rx.map(|_| rx_done));
            let nr = &mut self.cores[c].net_rx;
            nr.budget -= rx_done as i64;
            nr.polled = true;
            let inst = &mut self.napi[v];
            inst.scheduled = false;
            if rx_done > 0 {
                inst.defer_left = self.p.defer_hard_irqs;
            }
            let mut episode = std::mem::take(&mut inst.episode);
            episode.rx_packets += rx_done as u64;
            episode.rx_bytes += rx_bytes;
            episode.tx_packets += tx_done as u64;
            episode.tx_bytes += tx_bytes;
            // (This vector's own interrupt fired: none of it is held.)
            debug_assert!(held[me].is_none());
            // The other vector's held interrupt goes first to the queue if the general path
            // scheduled it before this completion may schedule anything (a completion
            // schedules before a cause's event of its time runs).
            let first = |o: &Held| if o.cause { o.since < *t } else { o.since <= *t };
            held[me] = match held[1 - me].take_if(|o| PAIR && first(o)) {
                Some(o) => {
                    let mut other = Some(o);
                    let mine = ctx.nic.complete(v, *t, episode, horizon, &mut other, ctx.queue, ctx.stats);
                    match other {
                        Some(o) => held[1 - me] = Some(o),
                        // It went back to the queue.
                        None => horizon = ctx.horizon(c),
                    }
                    mine
                }
                None => ctx.nic.complete(v, *t, episode, horizon, &mut None, ctx.queue, ctx.stats),
            };
            if held[me].is_none() {
                // It may have scheduled an event.
                horizon = ctx.horizon(c);
            }
            // The tx NAPI scheduled during the rx clean is next on net_rx_action's list:
            // polled now, or (budget or time used up) left to the general path, which ends
            // the invocation there and raises the softirq again.
            if let Some(next) = scheduled.take().filter(|_| PAIR) {
                let core = &mut self.cores[c];
                let nr = &mut core.net_rx;
                if nr.budget <= 0 || *t >= nr.time_limit {
                    Self::restore(&mut held, *t, ctx);
                    return Lone::General;
                }
                match self.p.net_rx_action {
                    NetRxAction::Modern => super::move_all(&mut core.poll_list, &mut nr.local),
                    NetRxAction::Legacy => {}
                }
                let polled = nr.local.pop_front();
                debug_assert!(polled == Some(next) && nr.local.is_empty() && core.poll_list.is_empty());
                (v, second) = (next, true);
                continue;
            }
            // net_rx_action ends: its list is empty.
            let nr = &mut self.cores[c].net_rx;
            if self.p.net_rx_action == NetRxAction::Modern && (nr.budget <= 0 || *t >= nr.time_limit) {
                ctx.stats.squeeze(*t);
            }
            nr.active = false;
            self.cores[c].bh = None;
            // The next interrupt: the earlier held one, if it comes before anything else
            // can happen (two at one time go back to the queue).
            // (Without a tx vector of its own, only the rx vector's is ever held.)
            let next = match held {
                _ if !PAIR => 0,
                [Some(a), Some(b)] if a.at != b.at => usize::from(b.at < a.at),
                [Some(_), None] => 0,
                [None, Some(_)] => 1,
                _ => {
                    Self::restore(&mut held, *t, ctx);
                    return Lone::Idle;
                }
            };
            // The core sleeps from here: the handler starts when its idle state's exit and
            // refill are done, which must come before anything else can happen (the
            // general path's interrupt would find the core waking).
            if ctx.idle.is_on() {
                units::sleep(&self.cores[c].worker, c, *t, ctx);
                let out = held[next].map(|h| {
                    let w = ctx.idle.peek(c, h.at);
                    h.at + w.latency + w.refill + t_irq
                });
                let other = if PAIR { held[1 - next].map(|o| o.at) } else { None };
                if out.is_none_or(|o| o > horizon || other.is_some_and(|a| a < o)) {
                    Self::restore(&mut held, *t, ctx);
                    return Lone::Idle;
                }
            }
            match held[next].take_if(|h| h.at < horizon) {
                Some(h) => {
                    debug_assert!(PAIR || h.vector == v);
                    h.fire(ctx.nic, ctx.stats);
                    let w = &mut self.cores[c].worker;
                    *t = units::wake(w, c, h.at, ctx).unwrap_or(h.at);
                    v = h.vector;
                }
                None => {
                    Self::restore(&mut held, *t, ctx);
                    return Lone::Idle;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
