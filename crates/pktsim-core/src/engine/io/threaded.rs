//! Threaded NAPI on a software device such as veth (Linux `napi_threaded_poll`,
//! `veth_xmit`, `veth_poll`).
//!
//! ```text
//!   sender: frame into the device's ring (ptr_ring, `nic.rx_ring` entries; full: refused)
//!           NAPI not scheduled -> napi_schedule -> wake_up_process(thread)     (no hard IRQ)
//!   thread: runs wake_latency later (scheduler, idle exit; the CPU is not busy for it)
//!           t_wakeup of CPU time (switch in and out, thread loop)
//!           poll: take the frames in the ring (at most `weight`), t_poll, then t_proc for
//!                 each (GRO batches them; they are forwarded at the GRO flush)
//!           napi_complete; frames came meanwhile -> poll again at once (veth_poll
//!           re-checks its ring); else sleep until the next frame schedules the NAPI
//! ```
//!
//! The ring's entries are freed as frames are consumed (no refill batching), and the ring
//! holds all `nic.rx_ring` entries. Frames go to their tx queue as each is processed; tx
//! completions are reclaimed at no cost (veth has no tx ring to clean). Each core runs one
//! thread serving its rings round robin, one poll each.

use std::collections::VecDeque;

use serde_json::json;

use super::{Ctx, IoMode};
use crate::engine::stats::Activity;
use crate::engine::time::Ps;
use crate::engine::traffic::Packet;

const EV_STEP: u8 = 0;
const EV_WAKE: u8 = 1;

/// Timing of the NAPI thread.
#[derive(Debug, Clone, Copy)]
pub struct ThreadParams {
    pub weight: u32,
    pub wake_latency_ps: Ps,
    pub t_wakeup_ps: Ps,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Wakeup,
    PollStart,
    Packet(Packet, usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Asleep; the rings are armed.
    Sleeping,
    /// Woken at the given time, not yet running.
    Waking,
    /// Running a unit that ends at `end` and lasted `len`.
    Running { unit: Unit, len: Ps },
}

struct Thread {
    rings: Vec<usize>,
    tx: usize,
    state: State,
    /// Ring polled now or last (index into `rings`), whether a poll is under way, and
    /// frames taken in it.
    cur: usize,
    in_poll: bool,
    /// Frames the current poll took from its ring, not yet processed.
    batch: VecDeque<(Packet, usize)>,
    gen: u32,
}

pub struct ThreadedNapi {
    threads: Vec<Thread>,
    owner: Vec<usize>,
    p: ThreadParams,
    wakeups: u64,
}

impl ThreadedNapi {
    pub fn new(cores: Vec<(Vec<usize>, usize)>, rings: usize, p: ThreadParams) -> Self {
        let mut owner = vec![0; rings];
        let threads = cores
            .into_iter()
            .enumerate()
            .map(|(c, (rings, tx))| {
                for &r in &rings {
                    owner[r] = c;
                }
                Thread { cur: rings.len() - 1, rings, tx, state: State::Sleeping, in_poll: false, batch: VecDeque::new(), gen: 0 }
            })
            .collect();
        ThreadedNapi { threads, owner, p, wakeups: 0 }
    }

    /// Run thread `c` from `t`: finish its unit, then pick units until it sleeps or a unit
    /// crosses the next event.
    fn run(&mut self, c: usize, mut t: Ps, ctx: &mut Ctx) {
        loop {
            let state = std::mem::replace(&mut self.threads[c].state, State::Sleeping);
            if let State::Running { unit, len } = state {
                match unit {
                    Unit::Wakeup => ctx.stats.busy(c, Activity::Wakeup, t - len, t),
                    Unit::PollStart => ctx.stats.busy(c, Activity::Poll, t - len, t),
                    Unit::Packet(p, _) => {
                        ctx.stats.busy(c, Activity::RxClean, t - len, t);
                        let tx = self.threads[c].tx;
                        ctx.nic.tx_reclaim(tx, t, ctx.stats);
                        ctx.nic.xmit(tx, p, t, ctx.stats);
                    }
                }
            }
            let Some((unit, d)) = self.next_unit(c, t, ctx) else {
                self.threads[c].state = State::Sleeping;
                super::arm_rings(&self.threads[c].rings, ctx);
                return;
            };
            self.threads[c].state = State::Running { unit, len: d };
            if !super::continue_or_suspend(ctx, t, d, EV_STEP, c, &mut self.threads[c].gen) {
                return;
            }
            t += d;
        }
    }

    /// The thread's next unit at `t`, or None when it goes to sleep.
    fn next_unit(&mut self, c: usize, t: Ps, ctx: &mut Ctx) -> Option<(Unit, Ps)> {
        ctx.nic.advance_to(t, ctx.stats);
        let weight = self.p.weight;
        let th = &mut self.threads[c];
        let n = th.rings.len();
        loop {
            if th.in_poll {
                if let Some((p, r)) = th.batch.pop_front() {
                    let d = ctx.costs.t_proc(&p);
                    return Some((Unit::Packet(p, r), d));
                }
                // The poll ends: weight used (repoll), or napi_complete.
                th.in_poll = false;
            }
            // Next poll: the next ring after the last one polled that has frames. It takes
            // what the ring holds now, up to the weight; frames that come while they are
            // processed wait for the next poll (veth_poll re-checks the ring after
            // napi_complete and polls again).
            let j = (1..=n).map(|i| (th.cur + i) % n).find(|&j| !ctx.nic.rx[th.rings[j]].pkts.is_empty())?;
            th.cur = j;
            th.in_poll = true;
            let r = th.rings[j];
            let ring = &mut ctx.nic.rx[r];
            let take = (weight as usize).min(ring.pkts.len());
            th.batch.extend(ring.pkts.drain(..take).map(|p| (p, r)));
            // The ptr_ring entries are free as soon as the frames are consumed.
            ring.unrefilled += take as u32;
            ring.refill();
            ctx.stats.poll(t, Some(take as u32));
            if ctx.costs.t_poll > 0 {
                return Some((Unit::PollStart, ctx.costs.t_poll));
            }
        }
    }

    fn wake(&mut self, c: usize, ctx: &mut Ctx) {
        let th = &mut self.threads[c];
        th.state = State::Running { unit: Unit::Wakeup, len: self.p.t_wakeup_ps };
        if ctx.stats.in_window(ctx.now) {
            self.wakeups += 1;
        }
        let now = ctx.now;
        if super::continue_or_suspend(ctx, now, self.p.t_wakeup_ps, EV_STEP, c, &mut self.threads[c].gen) {
            self.run(c, now + self.p.t_wakeup_ps, ctx);
        }
    }
}

impl IoMode for ThreadedNapi {
    fn start(&mut self, ctx: &mut Ctx) {
        for th in &self.threads {
            for &r in &th.rings {
                // A ptr_ring holds all its entries (a NIC ring keeps one free).
                ctx.nic.rx[r].hw_avail = ctx.nic.rx[r].size;
            }
        }
        super::arm_rings(self.threads.iter().flat_map(|t| &t.rings), ctx);
    }

    fn on_event(&mut self, tag: u8, index: u32, gen: u32, ctx: &mut Ctx) {
        let c = index as usize;
        match tag {
            EV_STEP if self.threads[c].gen == gen => self.run(c, ctx.now, ctx),
            EV_WAKE if self.threads[c].gen == gen && self.threads[c].state == State::Waking => self.wake(c, ctx),
            _ => {}
        }
    }

    fn on_rx_wake(&mut self, ring: usize, t: Ps, ctx: &mut Ctx) {
        let c = self.owner[ring];
        if self.threads[c].state != State::Sleeping {
            return;
        }
        // napi_schedule masks further notifications until the thread completes.
        for &r in &self.threads[c].rings {
            ctx.nic.rx[r].wake = false;
        }
        let th = &mut self.threads[c];
        th.state = State::Waking;
        th.gen = th.gen.wrapping_add(1);
        if self.p.wake_latency_ps == 0 {
            let mut sub = Ctx { now: t, queue: ctx.queue, nic: ctx.nic, stats: ctx.stats, costs: ctx.costs };
            self.wake(c, &mut sub);
        } else {
            ctx.queue.schedule(t + self.p.wake_latency_ps, crate::engine::queue::EventKind::Mode { tag: EV_WAKE, index: c as u32, gen: th.gen });
        }
    }

    fn report(&self) -> serde_json::Value {
        json!({
            "wakeups": self.wakeups,
            "weight": self.p.weight,
            "wake_latency_ns": self.p.wake_latency_ps as f64 / 1e3,
            "t_wakeup_ns": self.p.t_wakeup_ps as f64 / 1e3,
        })
    }
}
