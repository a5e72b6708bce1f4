//! Linux NAPI with an ixgbe-style driver (002 section III, 003; kernel behaviour from
//! `net_rx_action`, `napi_complete_done`, `ixgbe_poll`).
//!
//! ```text
//!   cause (rx write-back / tx completion) on an unmasked vector
//!     --> IRQ fires at max(cause, throttle counter zero); vector masked
//!     --> hard IRQ handler (t_irq, preempts softirq work) --> napi_schedule: poll list
//!     --> NET_RX softirq: net_rx_action, budget 300 packets / 2 jiffies
//!           poll(v) = tx clean (t_clean per completed packet, <= 256)
//!                   + rx clean (t_proc per packet, <= weight 64; refill in batches of 16)
//!           used the whole weight -> stays scheduled (round robin)
//!           else napi_complete: ITR update (once per episode), unmask; a cause that came
//!                meanwhile fires when the throttle allows
//!           budget or time exhausted -> time_squeeze, re-raise (ksoftirqd after 10)
//! ```
//!
//! A core runs a sequence of work units (a handler, a poll's fixed cost, one tx clean, one
//! packet's rx clean). Units run back to back without touching the event queue as long as
//! they end before the next scheduled event; otherwise the core suspends at the unit's end
//! and an interrupt arriving meanwhile extends that unit by `t_irq` (preemption).

use std::collections::VecDeque;

use serde_json::json;

use super::{Ctx, IoMode};
use crate::engine::nic::Vector;
use crate::engine::queue::EventKind;
use crate::engine::stats::Activity;
use crate::engine::time::Ps;
use crate::engine::traffic::Packet;
use crate::scenario::NetRxAction;

const EV_IRQ: u8 = 0;
const EV_TX_CAUSE: u8 = 1;
const EV_CORE: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Work {
    Idle,
    Irq(usize),
    PollStart,
    TxClean(usize),
    RxPacket(Packet, usize),
    TxLock(Packet, usize),
}

impl Work {
    fn activity(&self) -> Option<Activity> {
        match self {
            Work::Idle => None,
            Work::Irq(_) => Some(Activity::Irq),
            Work::PollStart => Some(Activity::Poll),
            Work::TxClean(_) => Some(Activity::TxClean),
            Work::RxPacket(..) => Some(Activity::RxClean),
            Work::TxLock(..) => Some(Activity::TxLock),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Tx,
    Rx,
}

#[derive(Debug)]
struct Poll {
    vector: usize,
    phase: Phase,
    tx_done: u32,
    tx_bytes: u64,
    tx_complete: bool,
    rx_done: u32,
    rx_bytes: u64,
}

/// One `net_rx_action` invocation.
#[derive(Debug)]
struct NetRx {
    budget: i64,
    time_limit_jiffy: u64,
    local: VecDeque<usize>,
    repoll: VecDeque<usize>,
    polled: bool,
}

struct Core {
    work: Work,
    work_len: Ps,
    work_end: Ps,
    gen: u32,
    irq_queue: VecDeque<usize>,
    poll_list: VecDeque<usize>,
    softirq_pending: bool,
    restarts: u32,
    net_rx: Option<NetRx>,
    poll: Option<Poll>,
    /// A packet waiting for its shared tx queue's lock, and how long that takes.
    lock: Option<(Packet, usize, Ps)>,
}

/// Per-vector NAPI state and the episode's totals for ITR.
#[derive(Default, Clone)]
struct NapiInstance {
    scheduled: bool,
    ep_rx: (u64, u64),
    ep_tx: (u64, u64),
    tx_cause_at: Option<Ps>,
}

pub struct NapiParams {
    pub weight: u32,
    pub budget: u32,
    pub budget_time_ps: Ps,
    pub hz: u32,
    pub tx_work_limit: u32,
    pub refill_batch: u32,
    pub refill_at_poll_end: bool,
    pub net_rx_action: NetRxAction,
}

pub struct Napi {
    pub vectors: Vec<Vector>,
    napi: Vec<NapiInstance>,
    cores: Vec<Core>,
    /// Tx queue each rx ring forwards to.
    route: Vec<usize>,
    p: NapiParams,
    jiffy_ps: Ps,
    budget_jiffies: u64,
}

impl Napi {
    pub fn new(vectors: Vec<Vector>, cores: usize, route: Vec<usize>, p: NapiParams) -> Self {
        let jiffy_ps = 1_000_000_000_000 / p.hz as Ps;
        let budget_jiffies = p.budget_time_ps.div_ceil(jiffy_ps).max(1);
        let napi = vec![NapiInstance::default(); vectors.len()];
        let cores = (0..cores)
            .map(|_| Core {
                work: Work::Idle,
                work_len: 0,
                work_end: 0,
                gen: 0,
                irq_queue: VecDeque::new(),
                poll_list: VecDeque::new(),
                softirq_pending: false,
                restarts: 0,
                net_rx: None,
                poll: None,
                lock: None,
            })
            .collect();
        Napi { vectors, napi, cores, route, p, jiffy_ps, budget_jiffies }
    }

    fn jiffy(&self, t: Ps) -> u64 {
        t / self.jiffy_ps
    }

    // ----------------------------------------------------------------- vector hardware

    /// Unmask vector `v` at `t` (after napi_complete): fire at once if a cause is pending,
    /// else wait for the next one.
    fn unmask(&mut self, v: usize, t: Ps, ctx: &mut Ctx) {
        ctx.nic.advance_to(t, ctx.stats);
        self.vectors[v].masked = false;
        if self.vectors[v].cause_pending(ctx.nic, t) {
            let at = t.max(self.vectors[v].counter_zero);
            self.schedule_fire(v, at, ctx);
        } else {
            self.arm(v, t, ctx);
        }
    }

    fn arm(&mut self, v: usize, t: Ps, ctx: &mut Ctx) {
        let vec = &mut self.vectors[v];
        vec.armed = true;
        vec.gen = vec.gen.wrapping_add(1);
        if let Some(r) = vec.rx {
            ctx.nic.arm(r, ctx.queue);
        }
        self.napi[v].tx_cause_at = None;
        if let Some(q) = vec.tx {
            if let Some(d) = ctx.nic.tx[q].first_done_after(t) {
                self.napi[v].tx_cause_at = Some(d);
                ctx.queue.schedule(d, EventKind::Mode { tag: EV_TX_CAUSE, index: v as u32, gen: vec.gen });
            }
        }
    }

    fn schedule_fire(&mut self, v: usize, at: Ps, ctx: &mut Ctx) {
        let vec = &mut self.vectors[v];
        vec.armed = false;
        vec.gen = vec.gen.wrapping_add(1);
        if let Some(r) = vec.rx {
            ctx.nic.rx[r].wake = false;
        }
        self.napi[v].tx_cause_at = None;
        ctx.queue.schedule(at, EventKind::Mode { tag: EV_IRQ, index: v as u32, gen: vec.gen });
    }

    /// A cause on an armed vector at `t`.
    fn cause(&mut self, v: usize, t: Ps, ctx: &mut Ctx) {
        if self.vectors[v].armed {
            let at = t.max(self.vectors[v].counter_zero);
            self.schedule_fire(v, at, ctx);
        }
    }

    fn fire(&mut self, v: usize, ctx: &mut Ctx) {
        let now = ctx.now;
        let vec = &mut self.vectors[v];
        vec.masked = true;
        vec.last_fire = Some(now);
        vec.counter_zero = now + vec.moderation.interval_ps();
        ctx.stats.irq(now);
        let c = vec.core;
        if self.cores[c].work == Work::Idle {
            self.cores[c].irq_queue.push_back(v);
            self.run_core(c, now, ctx);
        } else {
            // Preempt: the running unit finishes t_irq later; the handler's effect
            // (napi_schedule) is visible to net_rx_action at its next poll boundary.
            let t_irq = ctx.costs.t_irq;
            ctx.stats.busy(c, Activity::Irq, now, now + t_irq);
            let core = &mut self.cores[c];
            core.work_end += t_irq;
            core.gen = core.gen.wrapping_add(1);
            ctx.queue.schedule(core.work_end, EventKind::Mode { tag: EV_CORE, index: c as u32, gen: core.gen });
            self.napi_schedule(c, v);
        }
    }

    // ----------------------------------------------------------------- NAPI core

    fn napi_schedule(&mut self, c: usize, v: usize) {
        if self.napi[v].scheduled {
            return;
        }
        self.napi[v].scheduled = true;
        let core = &mut self.cores[c];
        match (&mut core.net_rx, self.p.net_rx_action) {
            // Old kernels iterate the per-CPU list itself.
            (Some(nr), NetRxAction::Legacy) => nr.local.push_back(v),
            (Some(_), NetRxAction::Modern) => core.poll_list.push_back(v),
            (None, _) => {
                core.poll_list.push_back(v);
                core.softirq_pending = true;
            }
        }
    }

    /// Run core `c` from time `t` until it idles or its next unit would cross the next event.
    fn run_core(&mut self, c: usize, mut t: Ps, ctx: &mut Ctx) {
        loop {
            // Finish the current unit.
            let work = std::mem::replace(&mut self.cores[c].work, Work::Idle);
            if let Some(a) = work.activity() {
                ctx.stats.busy(c, a, t - self.cores[c].work_len, t);
            }
            match work {
                Work::Idle | Work::PollStart => {}
                Work::Irq(v) => self.napi_schedule(c, v),
                Work::TxClean(q) => {
                    if let Some(size) = ctx.nic.tx_clean_one(q, t, ctx.stats) {
                        if let Some(poll) = &mut self.cores[c].poll {
                            poll.tx_done += 1;
                            poll.tx_bytes += size.saturating_sub(4) as u64;
                        }
                    }
                }
                Work::RxPacket(p, r) => {
                    let q = self.route[r];
                    if let Some(poll) = &mut self.cores[c].poll {
                        poll.rx_done += 1;
                        poll.rx_bytes += p.size.saturating_sub(4) as u64;
                    }
                    let lock = ctx.nic.tx_lock(q, t, ctx.costs.tx_lock);
                    if lock > 0 {
                        self.cores[c].lock = Some((p, q, lock));
                    } else {
                        self.xmit(p, q, t, ctx);
                    }
                }
                Work::TxLock(p, q) => self.xmit(p, q, t, ctx),
            }
            // Pick the next one.
            let (next, d) = self.next_work(c, t, ctx);
            if next == Work::Idle {
                return;
            }
            let core = &mut self.cores[c];
            core.work = next;
            core.work_len = d;
            core.work_end = t + d;
            if t + d <= ctx.queue.peek_time() {
                t += d;
                continue;
            }
            core.gen = core.gen.wrapping_add(1);
            ctx.queue.schedule(t + d, EventKind::Mode { tag: EV_CORE, index: c as u32, gen: core.gen });
            return;
        }
    }

    /// Post a packet to tx queue `q` (marker B); its completion is a cause for the queue's
    /// vector if that one waits for one.
    fn xmit(&mut self, p: Packet, q: usize, t: Ps, ctx: &mut Ctx) {
        if let Some(done) = ctx.nic.xmit(q, p, t, ctx.stats) {
            let tv = ctx.nic.tx[q].vector;
            if self.vectors[tv].armed && self.napi[tv].tx_cause_at.is_none() {
                self.napi[tv].tx_cause_at = Some(done);
                let gen = self.vectors[tv].gen;
                ctx.queue.schedule(done, EventKind::Mode { tag: EV_TX_CAUSE, index: tv as u32, gen });
            }
        }
    }

    fn next_work(&mut self, c: usize, t: Ps, ctx: &mut Ctx) -> (Work, Ps) {
        if let Some((p, q, d)) = self.cores[c].lock.take() {
            return (Work::TxLock(p, q), d);
        }
        loop {
            if let Some(v) = self.cores[c].irq_queue.pop_front() {
                return (Work::Irq(v), ctx.costs.t_irq);
            }
            if let Some(poll) = &mut self.cores[c].poll {
                let v = poll.vector;
                match poll.phase {
                    Phase::Start => {
                        poll.phase = Phase::Tx;
                        if ctx.costs.t_poll > 0 {
                            return (Work::PollStart, ctx.costs.t_poll);
                        }
                    }
                    Phase::Tx => {
                        if let Some(q) = self.vectors[v].tx {
                            if poll.tx_done >= self.p.tx_work_limit {
                                poll.tx_complete = false;
                            } else if ctx.nic.tx[q].head_done().is_some_and(|d| d <= t) {
                                return (Work::TxClean(q), ctx.costs.t_clean);
                            }
                        }
                        poll.phase = Phase::Rx;
                    }
                    Phase::Rx => {
                        if let Some(r) = self.vectors[v].rx {
                            if poll.rx_done < self.p.weight {
                                let ring = &ctx.nic.rx[r];
                                if ring.unrefilled >= self.p.refill_batch {
                                    ctx.nic.advance_to(t, ctx.stats);
                                    ctx.nic.rx[r].refill();
                                }
                                ctx.nic.advance_to(t, ctx.stats);
                                if let Some(p) = ctx.nic.rx[r].pkts.pop_front() {
                                    ctx.nic.rx[r].unrefilled += 1;
                                    let d = ctx.costs.t_proc(&p);
                                    return (Work::RxPacket(p, r), d);
                                }
                            }
                            if self.p.refill_at_poll_end && ctx.nic.rx[r].unrefilled > 0 {
                                ctx.nic.advance_to(t, ctx.stats);
                                ctx.nic.rx[r].refill();
                            }
                        }
                        self.finish_poll(c, t, ctx);
                    }
                }
                continue;
            }
            if self.cores[c].net_rx.is_some() {
                if let Some(v) = self.next_poll(c, t, ctx) {
                    self.cores[c].poll = Some(Poll { vector: v, phase: Phase::Start, tx_done: 0, tx_bytes: 0, tx_complete: true, rx_done: 0, rx_bytes: 0 });
                }
                continue;
            }
            if self.cores[c].softirq_pending {
                self.cores[c].softirq_pending = false;
                ctx.stats.softirq(t);
                let list = std::mem::take(&mut self.cores[c].poll_list);
                self.cores[c].net_rx = Some(NetRx {
                    budget: self.p.budget as i64,
                    time_limit_jiffy: self.jiffy(t) + self.budget_jiffies,
                    local: list,
                    repoll: VecDeque::new(),
                    polled: false,
                });
                continue;
            }
            self.cores[c].restarts = 0;
            return (Work::Idle, 0);
        }
    }

    /// The next NAPI net_rx_action polls, or None after ending the invocation.
    fn next_poll(&mut self, c: usize, t: Ps, ctx: &mut Ctx) -> Option<usize> {
        let jiffy = self.jiffy(t);
        let core = &mut self.cores[c];
        let nr = core.net_rx.as_mut()?;
        let exhausted = nr.budget <= 0 || jiffy >= nr.time_limit_jiffy;
        let mut squeeze = false;
        let chosen = match self.p.net_rx_action {
            NetRxAction::Modern => {
                if nr.polled && exhausted {
                    squeeze = true;
                    None
                } else if nr.local.is_empty() && nr.repoll.is_empty() && !core.poll_list.is_empty() {
                    // New NAPIs were scheduled meanwhile: `goto start`.
                    nr.local = std::mem::take(&mut core.poll_list);
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
        let mut nr = core.net_rx.take()?;
        nr.local.append(&mut core.poll_list);
        nr.local.append(&mut nr.repoll);
        core.poll_list = nr.local;
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

    fn finish_poll(&mut self, c: usize, t: Ps, ctx: &mut Ctx) {
        let Some(poll) = self.cores[c].poll.take() else { return };
        let v = poll.vector;
        ctx.stats.poll(t, self.vectors[v].rx.map(|_| poll.rx_done));
        let inst = &mut self.napi[v];
        inst.ep_rx.0 += poll.rx_done as u64;
        inst.ep_rx.1 += poll.rx_bytes;
        inst.ep_tx.0 += poll.tx_done as u64;
        inst.ep_tx.1 += poll.tx_bytes;
        let incomplete = poll.rx_done >= self.p.weight || !poll.tx_complete;
        let legacy = self.p.net_rx_action == NetRxAction::Legacy;
        if let Some(nr) = self.cores[c].net_rx.as_mut() {
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
            // napi_complete, then ixgbe_set_itr once per episode, then unmask.
            let inst = &mut self.napi[v];
            inst.scheduled = false;
            let (rx, tx) = (std::mem::take(&mut inst.ep_rx), std::mem::take(&mut inst.ep_tx));
            self.vectors[v].moderation.episode_done(rx, tx);
            self.unmask(v, t, ctx);
        }
    }
}

impl IoMode for Napi {
    fn start(&mut self, ctx: &mut Ctx) {
        for v in 0..self.vectors.len() {
            self.arm(v, 0, ctx);
        }
    }

    fn on_event(&mut self, tag: u8, index: u32, gen: u32, ctx: &mut Ctx) {
        let i = index as usize;
        match tag {
            EV_IRQ if self.vectors[i].gen == gen => self.fire(i, ctx),
            EV_TX_CAUSE if self.vectors[i].gen == gen => {
                self.napi[i].tx_cause_at = None;
                self.cause(i, ctx.now, ctx)
            }
            EV_CORE if self.cores[i].gen == gen => self.run_core(i, ctx.now, ctx),
            _ => {}
        }
    }

    fn on_rx_wake(&mut self, ring: usize, t: Ps, ctx: &mut Ctx) {
        let v = ctx.nic.rx[ring].vector;
        self.cause(v, t, ctx);
    }

    fn report(&self) -> serde_json::Value {
        json!({
            "itr_interval_ns": self.vectors.iter().map(|v| v.moderation.interval_ps() as f64 / 1e3).collect::<Vec<_>>(),
            "moderation": self.vectors.first().map(|v| v.moderation.name()),
        })
    }
}
