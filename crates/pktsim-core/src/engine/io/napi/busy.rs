//! The application reading what the stack delivers (`[app]`), on its NAPI's core or on
//! cores of its own, and its busy polls (`[socket]` busy_poll / busy_read: `napi_busy_loop`):
//! with the NAPI nobody has scheduled, the application takes it and polls it itself
//! (`busy_poll_budget` frames, `napi_complete_done` doing nothing meanwhile); the loop's
//! end (`busy_poll_stop`) polls once more and hands the NAPI back. With IRQ suspension,
//! epoll finding events restarts the NAPI's timer (`napi_suspend_irqs`) and blocking in
//! epoll schedules the NAPI (`napi_resume_irqs`).

use super::{Napi, Phase, Poll, PollKind, Work, KSOFTIRQD};
use crate::engine::app::{self, App, AppParams};
use crate::engine::io::units::Worker;
use crate::engine::io::Ctx;
use crate::engine::queue::Key;
use crate::engine::sched::{weight_of, Fair};
use crate::engine::time::{Instant, Span};

impl Napi {
    /// The node's NAPIs feeding an application (`[app]`) instead of the tx queues.
    pub(super) fn with_app(mut self, p: Option<AppParams>) -> Self {
        if let Some(p) = p {
            let n = self.topo.cores();
            self.app_workers = if p.same_core { Vec::new() } else { (0..n).map(|_| Worker::default()).collect() };
            // The run queue of each core: the application, ksoftirqd, and the NAPI threads
            // of its vectors (all nice 0).
            let cores = self.cores.len();
            self.entity_vector = vec![Vec::new(); cores];
            self.thread_entity = (0..self.topo.vectors())
                .map(|v| {
                    let c = self.topo.vector(v).core;
                    self.entity_vector[c].push(v);
                    1 + self.entity_vector[c].len()
                })
                .collect();
            self.fair_threads = p.same_core && self.p.threaded && !self.p.thread_fifo;
            for (c, core) in self.cores.iter_mut().enumerate() {
                let mut weights = vec![p.weight, weight_of(0)];
                weights.extend(self.entity_vector[c].iter().map(|_| weight_of(0)));
                // ksoftirqd preempted by a wake-up runs on to the end of its pass
                // (`handle_softirqs` looks at need_resched only between passes, with
                // bottom halves off), a NAPI thread to the end of its poll (`cond_resched`
                // in `napi_threaded_poll_loop`).
                let mut fair = Fair::new(&weights, self.p.base_slice, self.jiffy, self.p.hrtick).runs_on(KSOFTIRQD);
                for k in 0..self.entity_vector[c].len() {
                    fair = fair.runs_on(2 + k);
                }
                core.fair = fair;
            }
            self.app = Some(App::new(p, n));
        }
        self
    }

    /// The application thread `i`'s core (its NAPI's, or one of its own).
    pub(super) fn app_core(&self, i: usize) -> usize {
        if self.app_workers.is_empty() {
            i
        } else {
            self.topo.cores() + i
        }
    }

    /// The application thread's next step on NAPI core `c`, when it shares the core and
    /// the core has no interrupt or softirq work left.
    #[inline(always)]
    pub(super) fn app_next(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<(Work, Span)> {
        self.app.as_ref()?;
        self.app_step(c, t, ctx)
    }

    fn app_step(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<(Work, Span)> {
        let app = self.app.as_mut().filter(|_| self.app_workers.is_empty())?;
        // The NAPI its socket is fed by (sk_napi_id): the core's first ring's.
        let v = self.topo.vector_of_ring(self.topo.rings_of_core(c).start);
        let kind = match app.next(c, t, ctx.stats) {
            None => {
                if !app.runnable(c) {
                    self.cores[c].fair.block(super::APP);
                }
                // Blocking in epoll with IRQ suspension: napi_resume_irqs.
                if app.take_blocked(c) && !self.p.irq_suspend_timeout.is_zero() {
                    self.napi_schedule(c, v, t, ctx);
                }
                return None;
            }
            Some((app::Step::BusyPoll, _)) => PollKind::Busy,
            Some((app::Step::BusyStop, _)) => PollKind::BusyStop,
            Some((s, d)) => {
                // epoll returned events: napi_suspend_irqs restarts the NAPI's timer with
                // irq_suspend_timeout, keeping a deferred NAPI's interrupt masked.
                if app.take_events(c) && !self.p.irq_suspend_timeout.is_zero() && self.napi[v].defer_timer.is_pending()
                {
                    self.napi[v].defer_timer.set(ctx.queue, t + self.p.irq_suspend_timeout, Key::Defer(v as u32));
                }
                return Some((Work::App(s), d));
            }
        };
        if self.napi[v].scheduled && !self.napi[v].busy_owned {
            // The softirq (or its thread) has the NAPI: spin for a poll's time.
            return Some((Work::BusySpin, ctx.costs.t_poll));
        }
        self.napi[v].scheduled = true;
        self.napi[v].busy_owned = true;
        if ctx.stats.in_window(t) {
            self.busy_polls += 1;
        }
        let weight = self.p.busy_poll_budget;
        self.cores[c].poll = Some(Poll::new(v, ctx.nic, kind, weight, Phase::Tx));
        Some((Work::PollStart, ctx.costs.t_poll))
    }
}
