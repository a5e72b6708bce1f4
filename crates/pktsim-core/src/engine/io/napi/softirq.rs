//! The NET_RX softirq on a NAPI core: `napi_schedule` puts a NAPI on the core's poll list
//! and raises the softirq; `net_rx_action` polls the listed NAPIs round robin within its
//! budget (`netdev_budget` packets, `netdev_budget_usecs` as whole jiffies), a full poll
//! going to the back of the list; with work left it raises itself again. The old
//! (`legacy`) `net_rx_action` walks the per-CPU list itself.
//!
//! Where the softirq runs (kernel/softirq.c):
//!
//! ```text
//!   raised in a hard IRQ, a timer, or before local_bh_enable (the reader's receive call:
//!   spin_unlock_bh of the socket queue in __skb_recv_udp)
//!     --> on its exit: __do_softirq, unless host.softirq = "defer" and ksoftirqd is runnable
//!         (ksoftirqd_running: Linux 4.9 - 6.4 and the 5.10 / 5.15 / 6.1 stable trees;
//!         "inline" before 4.9 and from 6.5, d15121be7485)
//!   __do_softirq: net_rx_action passes while the softirq is raised again, up to
//!     MAX_SOFTIRQ_RESTART (10) passes, MAX_SOFTIRQ_TIME (2 ms in whole jiffies) and no
//!     need_resched(); with work left after that, wakeup_softirqd
//!   ksoftirqd: a nice-0 task of the core's fair class (`engine::sched`, beside the
//!     application's thread): switched in (t_wakeup), it runs __do_softirq's with the same
//!     limits while the softirq is raised, and sleeps when it is not
//! ```
//!
//! This file also holds the core's poll loop, [`Units::next`]: the next unit of a NAPI
//! core, in the kernel's order — a frame waiting for a shared tx queue's lock, a hard IRQ
//! handler (or a lone core's whole episodes, [`super::lone`]), the poll under way
//! ([`super::poll`]), the NAPI threads ([`super::thread`]), the softirq where it runs now,
//! and last the fair class's pick: ksoftirqd or the application thread ([`super::busy`]).
//! It also tells the CPU time of each unit's context apart (hard IRQ, softirq, ksoftirqd,
//! NAPI thread, application: `cpu_by_context`) and charges the tasks' time to their
//! fair-class entities.

use std::collections::VecDeque;
use std::ops::ControlFlow;

use super::lone::Lone;
use super::{Bh, Napi, Phase, Poll, PollKind, ThreadState, Work, APP, KSOFTIRQD, MAX_SOFTIRQ_RESTART};
use crate::engine::app;
use crate::engine::io::units::{Units, Worker};
use crate::engine::io::Ctx;
use crate::engine::queue::Key;
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};
use crate::scenario::{NetRxAction, SoftirqRun};

/// [`crate::engine::stats::TASK_NAMES`]' indices.
const TASK_KSOFTIRQD: usize = 0;
const TASK_NAPI_THREADS: usize = 1;
const TASK_APP: usize = 2;

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
                core.invoke = true;
            }
        }
    }

    /// The end of a `__do_softirq` begun at `t`: `MAX_SOFTIRQ_TIME` (2 ms) in whole jiffies
    /// (`msecs_to_jiffies` rounds up), counted from the jiffy `t` is in.
    fn softirq_end(&mut self, t: Instant) -> Instant {
        self.jiffy_start(t) + self.softirq_time
    }

    /// Whether core `c`'s pending softirq runs now, in interrupt context or in ksoftirqd's
    /// `__do_softirq` under way: the next pass of that one, or a new one where the raise
    /// was (`invoke_softirq` on interrupt exit, `do_softirq` on `local_bh_enable`) unless
    /// ksoftirqd is runnable and `host.softirq = "defer"` leaves it the work.
    fn softirq_runs(&mut self, c: usize, t: Instant) -> bool {
        // (A raise while a __do_softirq runs is that one's: the interrupt's exit is still
        // in softirq context, `in_interrupt()`.)
        let invoke = std::mem::take(&mut self.cores[c].invoke);
        let core = &self.cores[c];
        if core.bh.is_some() {
            return true;
        }
        let inline = !core.ksoftirqd || (invoke && self.p.softirq_run == SoftirqRun::Inline);
        if inline {
            self.cores[c].tick_next = None;
            self.cores[c].bh = Some(Bh { passes: 0, start: t, ksoftirqd: false });
        }
        inline
    }

    /// The scheduler tick's interrupt on core `c` while the application thread ran, seen at
    /// its step at `t` (the first in a jiffy after a step in the one before, with no
    /// softirq or ksoftirqd between): its exit (`irq_exit`, `invoke_softirq`) runs a
    /// pending softirq, where ksoftirqd is runnable and has not had the core yet, with
    /// `host.softirq = "inline"` (with "defer", `ksoftirqd_running()` leaves it the work).
    /// True if the softirq runs now.
    #[inline(always)]
    fn tick(&mut self, c: usize, t: Instant) -> bool {
        let core = &mut self.cores[c];
        // Only a pending softirq that ksoftirqd holds (with "inline") is the tick's to
        // run; until then nothing is followed. (A tick while other work had the core found
        // it in softirq context or in ksoftirqd: it ran nothing.)
        if !core.ksoftirqd || !core.softirq_pending || self.p.softirq_run != SoftirqRun::Inline {
            core.tick_next = None;
            return false;
        }
        let ran = core.last_task == Some(APP);
        match core.tick_next {
            Some(next) if ran && t < next => false,
            next => {
                let tick = ran && next.is_some();
                // (The jiffy's start is kept: no division while t stays in it.)
                let after = self.jiffy_start(t) + self.jiffy;
                let core = &mut self.cores[c];
                core.tick_next = Some(after);
                core.invoke |= tick;
                tick
            }
        }
    }

    /// `need_resched()` on core `c`: a task waits for the core and the one that had it used
    /// its slice or blocked, or the core was idle and a task is waking on it.
    fn need_resched(&self, c: usize) -> bool {
        let core = &self.cores[c];
        core.fair.need_resched()
            || (core.fair.curr().is_none()
                && self.app_workers.is_empty()
                && self.app.as_ref().is_some_and(|a| a.waking(c)))
    }

    /// The task core `c`'s poll work runs in now ([`crate::engine::stats::TASK_NAMES`]'
    /// index; None: a softirq in interrupt context): a busy-polling application, a NAPI
    /// thread, ksoftirqd. (An application on a core of its own polls nothing.)
    #[inline(always)]
    fn poll_task(&self, c: usize) -> Option<usize> {
        let core = self.cores.get(c)?;
        if core.poll.as_ref().is_some_and(|p| p.kind != PollKind::Normal) {
            Some(TASK_APP)
        } else if self.p.threaded {
            Some(TASK_NAPI_THREADS)
        } else if core.bh.is_some_and(|b| b.ksoftirqd) {
            Some(TASK_KSOFTIRQD)
        } else {
            None
        }
    }

    /// CPU time `[start, end)` of core `c`'s poll work, charged to the task it runs in.
    #[inline(always)]
    pub(super) fn charge_poll(&mut self, c: usize, a: Activity, start: Instant, end: Instant, ctx: &mut Ctx) {
        ctx.stats.busy(c, a, start, end);
        let task = self.poll_task(c);
        self.charge_task(c, task, start, end, ctx);
    }

    /// Task `task` (None: interrupt context) ran `[start, end)` on core `c`: its CPU figure,
    /// and its fair-class entity's runtime where it shares a NAPI core.
    #[inline(always)]
    fn charge_task(&mut self, c: usize, task: Option<usize>, start: Instant, end: Instant, ctx: &mut Ctx) {
        let Some(task) = task else {
            // Interrupt context: without IRQ time accounting the task it interrupted (the
            // one that has the core) is charged for it, in its virtual runtime only (its
            // CPU figure keeps the contexts apart).
            if !self.p.irq_time_accounting {
                if let Some(core) = self.cores.get_mut(c) {
                    if let Some(curr) = core.fair.curr() {
                        core.fair.charge(curr, start, end);
                    }
                }
            }
            return;
        };
        ctx.stats.busy_task(task, start, end);
        if let Some(core) = self.cores.get_mut(c) {
            match task {
                TASK_APP => core.fair.charge(APP, start, end),
                TASK_KSOFTIRQD => core.fair.charge(KSOFTIRQD, start, end),
                _ if self.fair_threads => {
                    if let Some(v) = core.thread {
                        core.fair.charge(self.thread_entity[v], start, end);
                    }
                }
                _ => {}
            }
        }
    }

    /// The tail of `__do_softirq` after a `net_rx_action` pass on core `c` at `t`: with
    /// the softirq raised again it restarts while within `MAX_SOFTIRQ_TIME`, with no
    /// reschedule due and fewer than `MAX_SOFTIRQ_RESTART` passes, else wakes ksoftirqd.
    fn softirq_tail(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        let core = &mut self.cores[c];
        let Some(mut bh) = core.bh.take() else { return };
        if !core.softirq_pending {
            return;
        }
        bh.passes += 1;
        if bh.passes < MAX_SOFTIRQ_RESTART && t < self.softirq_end(bh.start) && !self.need_resched(c) {
            let core = &mut self.cores[c];
            core.bh = Some(bh);
            return;
        }
        // wakeup_softirqd
        let core = &mut self.cores[c];
        if !core.ksoftirqd {
            core.ksoftirqd = true;
            core.fair.wake(KSOFTIRQD, t);
            if ctx.stats.in_window(t) {
                ctx.stats.ksoftirqd_wakeups += 1;
            }
        }
    }

    /// Core `c` at `t` with no interrupt or softirq work it must run now: the fair class's
    /// pick runs — ksoftirqd (switching in first, then a `__do_softirq` of its own, or
    /// sleeping when nothing is pending) or the application's thread. `Break`: the core's
    /// next unit (None: it idles); `Continue`: look again.
    #[inline(always)]
    fn task_step(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> ControlFlow<Option<(Work, Span)>> {
        if self.app.is_none() && !self.cores[c].ksoftirqd {
            // (No task wants the core: it idles.)
            self.cores[c].last_task = None;
            return ControlFlow::Break(None);
        }
        if self.cores[c].fair.pick() == Some(KSOFTIRQD) {
            let core = &mut self.cores[c];
            if core.last_task != Some(KSOFTIRQD) {
                if core.last_task == Some(APP) {
                    if let Some(app) = self.app.as_mut() {
                        app.switched_out(c);
                    }
                }
                core.last_task = Some(KSOFTIRQD);
                if !self.p.t_wakeup.is_zero() {
                    return ControlFlow::Break(Some((Work::Wakeup, self.p.t_wakeup)));
                }
            }
            if core.softirq_pending {
                self.cores[c].tick_next = None;
                self.cores[c].bh = Some(Bh { passes: 0, start: t, ksoftirqd: true });
            } else {
                // run_ksoftirqd finds nothing pending: ksoftirqd sleeps.
                core.ksoftirqd = false;
                core.fair.block(KSOFTIRQD);
                core.last_task = None;
            }
            return ControlFlow::Continue(());
        }
        if self.tick(c, t) {
            return ControlFlow::Continue(());
        }
        let next = self.app_next(c, t, ctx);
        self.cores[c].last_task = next.map(|_| APP);
        match next {
            // napi_resume_irqs scheduled the NAPI: the softirq runs first.
            None if self.cores[c].softirq_pending => ControlFlow::Continue(()),
            next => ControlFlow::Break(next),
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
        }
        self.softirq_tail(c, t, ctx);
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
        let task = match work {
            Work::Irq(_) => None,
            Work::App(_) | Work::BusySpin => Some(TASK_APP),
            Work::Wakeup if self.p.threaded => Some(TASK_NAPI_THREADS),
            Work::Wakeup => Some(TASK_KSOFTIRQD),
            _ => self.poll_task(c),
        };
        self.charge_task(c, task, start, end, ctx);
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
                    // Each datagram a receive call takes goes through `__skb_recv_udp`,
                    // whose `spin_unlock_bh` of the socket queue is a `local_bh_enable`
                    // that runs pending softirqs: after the call's entry and after each
                    // frame but its last.
                    let dequeue = step == app::Step::Call || (step == app::Step::Packet && app.in_call(thread));
                    if dequeue && app.params().drop_kind == app::DropKind::Rcvbuf {
                        if let Some(core) = self.cores.get_mut(c) {
                            core.invoke |= core.softirq_pending;
                        }
                    }
                }
                if step == app::Step::Kick {
                    self.xsk_kicked(thread, t, ctx);
                }
            }
            Work::XskXmit(q, n) => self.xsk_xmit(c, q, n, t, ctx),
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
            if self.cores[c].softirq_pending && self.softirq_runs(c, *t) {
                self.cores[c].softirq_pending = false;
                ctx.stats.softirq(*t);
                let time_limit = self.jiffy_start(*t) + self.jiffy * self.budget_jiffies;
                let core = &mut self.cores[c];
                let nr = &mut core.net_rx;
                (nr.active, nr.budget, nr.time_limit, nr.polled) = (true, self.p.budget as i64, time_limit, false);
                move_all(&mut core.poll_list, &mut nr.local);
                continue;
            }
            self.cores[c].invoke = false;
            match self.task_step(c, *t, ctx) {
                ControlFlow::Break(next) => return next,
                ControlFlow::Continue(()) => continue,
            }
        }
    }
}
