//! Threaded NAPI (`/sys/class/net/DEV/threaded`, `napi_threaded_poll`): `napi_schedule`
//! wakes the NAPI's kernel thread instead of raising the softirq; the woken thread joins
//! its core's run queue `wake_latency` later, pays `t_wakeup` when it first runs, and polls
//! its NAPI until a poll completes (then it sleeps); after a full poll it yields the core
//! to the next runnable NAPI thread (`cond_resched`), else polls again.

use std::ops::ControlFlow;

use super::{Napi, Phase, Poll, PollKind, ThreadState, Work};
use crate::engine::io::{units, Ctx};
use crate::engine::queue::Key;
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};

impl Napi {
    /// NAPI `v`'s thread on core `c` completes its NAPI at `t`: it sleeps, or with
    /// `host.thread.t_sleep` and nothing else to run on its core (no other thread runnable,
    /// no application there) it is on its way to sleep for that long.
    pub(super) fn thread_done(&mut self, c: usize, v: usize, t: Instant, ctx: &mut Ctx) {
        let core = &mut self.cores[c];
        core.thread = None;
        if self.fair_threads {
            core.fair.block(self.thread_entity[v]);
        }
        if self.p.t_sleep.is_zero() || !core.runnable.is_empty() || self.app.is_some() {
            self.napi[v].thread = ThreadState::Asleep;
            return;
        }
        self.napi[v].thread = ThreadState::Dozing(t);
        core.worker.dozing = true;
        self.napi[v].wake.set(ctx.queue, t + self.p.t_sleep, Key::Wake(v as u32));
    }

    /// NAPI `v`'s thread (on core `c`) ends its way to sleep at `t`, its CPU time from when
    /// it began charged: asleep (its core idles if nothing runs on it), or with `sleeps`
    /// false awake again and on the run queue, with no wake-up to pay.
    pub(super) fn end_doze(&mut self, c: usize, v: usize, t: Instant, sleeps: bool, ctx: &mut Ctx) {
        let ThreadState::Dozing(from) = self.napi[v].thread else { return };
        ctx.stats.busy(c, Activity::Wakeup, from, t);
        self.cores[c].worker.dozing = false;
        if sleeps {
            self.napi[v].thread = ThreadState::Asleep;
            self.napi[v].wake.cancel();
            if self.cores[c].worker.is_idle() && self.cores[c].irq_queue.is_empty() {
                units::sleep(&self.cores[c].worker, c, t, ctx);
            }
        } else {
            self.napi[v].wake.cancel();
            self.napi[v].thread = ThreadState::Runnable { fresh: false };
            self.cores[c].runnable.push_back(v);
        }
    }

    /// NAPI `v`'s woken thread joins core `c`'s run queue at `t`.
    pub(super) fn thread_runnable(&mut self, c: usize, v: usize, t: Instant, ctx: &mut Ctx) {
        self.napi[v].thread = ThreadState::Runnable { fresh: true };
        if self.fair_threads {
            self.cores[c].fair.wake(self.thread_entity[v], t);
        }
        if ctx.stats.in_window(t) {
            self.wakeups += 1;
        }
        self.cores[c].runnable.push_back(v);
    }

    /// Core `c` at `t` with threaded NAPIs: the running NAPI thread polls its NAPI again, or
    /// the next runnable thread gets the core (paying its wake-up first if it was just
    /// woken), or with none runnable the application thread's next step runs. `Break`: the
    /// core's next unit (None: it idles); `Continue`: look again (a poll was started, or a
    /// thread became runnable meanwhile).
    #[inline(always)]
    pub(super) fn thread_step(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> ControlFlow<Option<(Work, Span)>> {
        if self.fair_threads {
            return self.thread_step_fair(c, t, ctx);
        }
        let core = &mut self.cores[c];
        let v = match core.thread {
            Some(v) => v,
            None => {
                let Some(v) = core.runnable.pop_front() else {
                    return match self.app_next(c, t, ctx) {
                        None if !self.cores[c].runnable.is_empty() => ControlFlow::Continue(()),
                        next => ControlFlow::Break(next),
                    };
                };
                core.thread = Some(v);
                if self.napi[v].thread == (ThreadState::Runnable { fresh: true }) {
                    self.napi[v].thread = ThreadState::Runnable { fresh: false };
                    if self.p.t_wakeup > Span::ZERO {
                        return ControlFlow::Break(Some((Work::Wakeup, self.p.t_wakeup)));
                    }
                }
                v
            }
        };
        core.poll = Some(Poll::new(v, ctx.nic, PollKind::Normal, self.p.weight, Phase::Start));
        ControlFlow::Continue(())
    }

    /// [`Napi::thread_step`] where the NAPI threads share the core with the application by
    /// the fair class (`host.thread.policy = "other"`): its pick runs — a NAPI thread
    /// (switched in at its wake-up cost, then polling until its NAPI completes or the fair
    /// class picks another) or the application. A thread that loses the core while it has
    /// work stays runnable and pays its switch again when it comes back.
    fn thread_step_fair(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> ControlFlow<Option<(Work, Span)>> {
        let pick = self.cores[c].fair.pick();
        let Some(e) = pick.filter(|&e| e > super::KSOFTIRQD) else {
            // The application (or nothing): a thread it displaces keeps its place.
            self.switch_out_thread(c);
            let next = self.app_next(c, t, ctx);
            self.cores[c].last_task = next.map(|_| super::APP);
            return match next {
                // (The application blocked: a thread may be runnable.)
                None if self.cores[c].fair.pick().is_some_and(|e| e > super::KSOFTIRQD) => ControlFlow::Continue(()),
                next => ControlFlow::Break(next),
            };
        };
        let v = self.entity_vector[c][e - super::KSOFTIRQD - 1];
        if self.cores[c].thread != Some(v) {
            self.switch_out_thread(c);
            if self.cores[c].last_task == Some(super::APP) {
                if let Some(app) = self.app.as_mut() {
                    app.switched_out(c);
                }
            }
            let core = &mut self.cores[c];
            core.runnable.retain(|&x| x != v);
            core.thread = Some(v);
            core.last_task = Some(e);
            if self.napi[v].thread == (ThreadState::Runnable { fresh: true }) {
                self.napi[v].thread = ThreadState::Runnable { fresh: false };
                if self.p.t_wakeup > Span::ZERO {
                    return ControlFlow::Break(Some((Work::Wakeup, self.p.t_wakeup)));
                }
            }
        }
        self.cores[c].poll = Some(Poll::new(v, ctx.nic, PollKind::Normal, self.p.weight, Phase::Start));
        ControlFlow::Continue(())
    }

    /// The NAPI thread running on core `c`, if any, loses the core with work left: back on
    /// the run queue, its switch to pay again.
    fn switch_out_thread(&mut self, c: usize) {
        if let Some(old) = self.cores[c].thread.take() {
            self.cores[c].runnable.push_front(old);
            self.napi[old].thread = ThreadState::Runnable { fresh: true };
        }
    }
}
