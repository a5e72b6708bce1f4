//! The NET_RX softirq on a NAPI core: `napi_schedule` puts a NAPI on the core's poll list
//! and raises the softirq; `net_rx_action` polls the listed NAPIs round robin within its
//! budget (`netdev_budget` packets, `netdev_budget_usecs` as whole jiffies), a full poll
//! going to the back of the list; with work left it raises itself again, and after
//! `MAX_SOFTIRQ_RESTART` restarts `__do_softirq` hands over to ksoftirqd. The old
//! (`legacy`) `net_rx_action` walks the per-CPU list itself.
//!
//! This file also holds the core's poll loop, [`Units::next`]: the next unit of a NAPI
//! core, in the kernel's order — a frame waiting for a shared tx queue's lock, a hard IRQ
//! handler (or a lone core's whole episodes, [`super::lone`]), the poll under way
//! ([`super::poll`]), the NAPI threads ([`super::thread`]), the softirq, and last the
//! application thread ([`super::busy`]).

use std::collections::VecDeque;
use std::ops::ControlFlow;

use super::lone::Lone;
use super::{Napi, Phase, Poll, PollKind, ThreadState, Work};
use crate::engine::io::units::{Units, Worker};
use crate::engine::io::Ctx;
use crate::engine::queue::Key;
use crate::engine::time::{Instant, Span};
use crate::scenario::NetRxAction;

/// One `net_rx_action` invocation, kept in its core between invocations (`active`
/// false, both lists empty): starting one writes a few words in place, and NAPIs move
/// between lists one by one, instead of moving structs and lists whole (a list's header
/// just updated in parts and then copied whole stalls on store forwarding: per softirq at
/// low load, a tenth of the time).
#[derive(Debug, Default)]
pub(super) struct NetRx {
    pub(super) active: bool,
    pub(super) budget: i64,
    /// The start of the jiffy in which the time limit is reached (`time_after_eq(jiffies,
    /// time_limit)`: from this instant on).
    pub(super) time_limit: Instant,
    pub(super) local: VecDeque<usize>,
    pub(super) repoll: VecDeque<usize>,
    pub(super) polled: bool,
}

/// Move every NAPI of `from`, in order, to the back of `to` (lists of a NAPI or two: one
/// by one, see [`NetRx`]).
#[inline]
pub(super) fn move_all(from: &mut VecDeque<usize>, to: &mut VecDeque<usize>) {
    while let Some(v) = from.pop_front() {
        to.push_back(v);
    }
}

impl Napi {
    /// The start of the jiffy `t` falls in (the last one found is kept: softirqs come many
    /// to a jiffy, and this spares a 64-bit division each).
    pub(super) fn jiffy_start(&mut self, t: Instant) -> Instant {
        if t < self.jiffy_at || t >= self.jiffy_at + self.jiffy {
            self.jiffy_at = Instant::from_ps(t.ps() - t.ps() % self.jiffy.ps());
        }
        self.jiffy_at
    }

    pub(super) fn napi_schedule(&mut self, c: usize, v: usize, t: Instant, ctx: &mut Ctx) {
        if self.napi[v].scheduled {
            return;
        }
        self.napi[v].scheduled = true;
        if self.p.threaded {
            // ____napi_schedule: wake the NAPI's thread (a running one polls again, one on
            // its way to sleep too, with no wake-up).
            if let ThreadState::Dozing(_) = self.napi[v].thread {
                self.end_doze(c, v, t, false, ctx);
                return;
            }
            if self.napi[v].thread == ThreadState::Asleep {
                self.napi[v].thread = ThreadState::Waking;
                if self.p.wake_latency.is_zero() {
                    self.thread_runnable(c, v, t, ctx);
                } else {
                    self.napi[v].wake.set(ctx.queue, t + self.p.wake_latency, Key::Wake(v as u32));
                }
            }
            return;
        }
        let core = &mut self.cores[c];
        match (core.net_rx.active, self.p.net_rx_action) {
            // Old kernels iterate the per-CPU list itself.
            (true, NetRxAction::Legacy) => core.net_rx.local.push_back(v),
            (true, NetRxAction::Modern) => core.poll_list.push_back(v),
            (false, _) => {
                core.poll_list.push_back(v);
                core.softirq_pending = true;
            }
        }
    }

    /// The next NAPI net_rx_action polls, or None after ending the invocation.
    pub(super) fn next_poll(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<usize> {
        let core = &mut self.cores[c];
        let nr = &mut core.net_rx;
        if !nr.active {
            return None;
        }
        let exhausted = nr.budget <= 0 || t >= nr.time_limit;
        let mut squeeze = false;
        let chosen = match self.p.net_rx_action {
            NetRxAction::Modern => {
                if nr.polled && exhausted {
                    squeeze = true;
                    None
                } else if nr.local.is_empty() && nr.repoll.is_empty() && !core.poll_list.is_empty() {
                    // New NAPIs were scheduled meanwhile: `goto start`.
                    move_all(&mut core.poll_list, &mut nr.local);
                    nr.local.pop_front()
                } else {
                    nr.local.pop_front()
                }
            }
            NetRxAction::Legacy => {
                if nr.local.is_empty() {
                    None
                } else if exhausted {
                    squeeze = true;
                    None
                } else {
                    nr.local.pop_front()
                }
            }
        };
        if chosen.is_some() {
            return chosen;
        }
        // End of this net_rx_action: unprocessed, then newly scheduled, then repoll.
        let nr = &mut core.net_rx;
        nr.active = false;
        while let Some(v) = nr.local.pop_back() {
            core.poll_list.push_front(v);
        }
        move_all(&mut nr.repoll, &mut core.poll_list);
        if squeeze {
            ctx.stats.squeeze(t);
        }
        if !core.poll_list.is_empty() {
            core.softirq_pending = true;
            core.restarts += 1;
            if core.restarts > 10 {
                // __do_softirq gives up after MAX_SOFTIRQ_RESTART and wakes ksoftirqd.
                core.restarts = 0;
                if ctx.stats.in_window(t) {
                    ctx.stats.ksoftirqd_wakeups += 1;
                }
            }
        }
        None
    }
}

impl Units for Napi {
    type Unit = Work;

    #[inline]
    fn worker(&mut self, core: usize) -> &mut Worker<Work> {
        match self.cores.get_mut(core) {
            Some(c) => &mut c.worker,
            None => &mut self.app_workers[core - self.topo.cores()],
        }
    }

    #[inline]
    fn account(&mut self, c: usize, work: &Work, start: Instant, end: Instant, ctx: &mut Ctx) {
        ctx.stats.busy(c, work.activity(), start, end);
    }

    #[inline(always)]
    fn finish(&mut self, c: usize, work: Work, _start: Instant, t: Instant, ctx: &mut Ctx) {
        match work {
            Work::PollStart => {}
            Work::Irq(v) => self.napi_schedule(c, v, t, ctx),
            Work::Wakeup | Work::BusySpin => {}
            Work::App(step) => {
                let thread = if c >= self.cores.len() { c - self.cores.len() } else { c };
                if let Some(app) = &mut self.app {
                    app.finish(thread, step, t, ctx.stats);
                }
            }
            Work::TxClean(q) => self.tx_cleaned(c, q, t, ctx),
            Work::RxPacket(r) => self.rx_cleaned(c, r, t, ctx),
            Work::TxLock(q) => ctx.nic.xmit(q, &self.cores[c].frame, t, false, ctx.queue, ctx.stats),
            Work::XdpFlush => self.flush(c, t, ctx),
        }
    }

    #[inline(always)]
    fn next(&mut self, c: usize, t: &mut Instant, ctx: &mut Ctx) -> Option<(Work, Span)> {
        if c >= self.cores.len() {
            // An application thread on a core of its own.
            let app = self.app.as_mut()?;
            return app.next(c - self.cores.len(), *t, ctx.stats).map(|(s, d)| (Work::App(s), d));
        }
        if let Some((q, d)) = self.cores[c].lock.take() {
            return Some((Work::TxLock(q), d));
        }
        // Only an interrupt event queues a handler, never a step here: the queue is looked
        // at once.
        if let Some(v) = self.cores[c].irq_queue.pop_front() {
            if !self.lone {
                return Some((Work::Irq(v), ctx.costs.t_irq));
            }
            let lone = if self.lone_pair {
                self.lone_episodes::<true>(c, v, t, ctx)
            } else {
                self.lone_episodes::<false>(c, v, t, ctx)
            };
            match lone {
                Lone::Unit(w, d) => return Some((w, d)),
                Lone::Idle => return None,
                Lone::General => {}
            }
        }
        loop {
            if let Some(poll) = &self.cores[c].poll {
                let (phase, layout) = (poll.phase, (poll.rx, poll.tx));
                if let Some(unit) = self.poll_step(c, phase, layout, t, ctx) {
                    return Some(unit);
                }
                continue;
            }
            if self.p.threaded {
                // The running NAPI thread polls again, or the next runnable one runs.
                match self.thread_step(c, *t, ctx) {
                    ControlFlow::Break(next) => return next,
                    ControlFlow::Continue(()) => continue,
                }
            }
            if self.cores[c].net_rx.active {
                if let Some(v) = self.next_poll(c, *t, ctx) {
                    self.cores[c].poll = Some(Poll::new(v, ctx.nic, PollKind::Normal, self.p.weight, Phase::Start));
                }
                continue;
            }
            if self.cores[c].softirq_pending {
                self.cores[c].softirq_pending = false;
                ctx.stats.softirq(*t);
                let time_limit = self.jiffy_start(*t) + self.jiffy * self.budget_jiffies;
                let core = &mut self.cores[c];
                let nr = &mut core.net_rx;
                (nr.active, nr.budget, nr.time_limit, nr.polled) = (true, self.p.budget as i64, time_limit, false);
                move_all(&mut core.poll_list, &mut nr.local);
                continue;
            }
            self.cores[c].restarts = 0;
            match self.app_next(c, *t, ctx) {
                // napi_resume_irqs scheduled the NAPI: the softirq runs first.
                None if self.cores[c].softirq_pending => continue,
                next => return next,
            }
        }
    }
}
