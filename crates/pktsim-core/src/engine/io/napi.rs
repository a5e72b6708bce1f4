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
//!           else napi_complete_done: with napi_defer_hard_irqs and gro_flush_timeout,
//!                a poll that did work reloads the deferral count; while it is above 0
//!                the count drops, the vector stays masked and a timer polls again after
//!                gro_flush_timeout (softirq, no hard IRQ); else ITR update (once per
//!                episode), unmask; a cause that came meanwhile fires when the throttle
//!                allows
//!           budget or time exhausted -> time_squeeze, re-raise (ksoftirqd after 10)
//!
//!   threaded ([nic.napi] threaded; napi_threaded_poll): napi_schedule wakes the NAPI's
//!   kernel thread instead of raising the softirq; it runs wake_latency later (the CPU is
//!   not busy meanwhile), pays t_wakeup, then polls its NAPI (weight 64, no netdev_budget,
//!   no time limit) until a poll completes, and sleeps; a full poll yields the core to the
//!   next runnable NAPI thread (cond_resched), else polls again
//!
//!   busy polling ([app] with socket.busy_poll / busy_read; napi_busy_loop): the
//!   application thread, on this core after the softirq work, takes the NAPI when nobody
//!   has it scheduled and polls it (busy_poll_budget frames; napi_complete_done does
//!   nothing meanwhile: an interrupt that fires stays masked); busy_poll_stop polls once
//!   more and hands the NAPI back: with prefer_busy_poll and deferral the timer is armed
//!   (irq_suspend_timeout instead when epoll found events) and the interrupt stays masked;
//!   else a full poll schedules the softirq and a partial one completes. With
//!   prefer_busy_poll the softirq completes a full poll (with deferral: the timer) rather
//!   than polling again
//! ```
//!
//! A core runs a sequence of work units ([`super::units`]: a handler, a poll's fixed cost,
//! one tx clean, one packet's rx clean); an interrupt arriving while a unit runs extends
//! that unit by `t_irq` (preemption). The vectors, their throttling and the moderation
//! policy are the NIC's; this mode decides what the cores do with interrupts and polls.

use std::collections::VecDeque;

mod lone;

use super::units::{self, Units, Worker};
use super::xdp::{Verdict, Xdp};
use super::{Ctx, IoMode};
use crate::engine::app::{self, App, AppParams};
use crate::engine::ingress::Packet;
use crate::engine::moderation::Episode;
use crate::engine::nic::{Irq, Nic};
use crate::engine::queue::{Key, Timer};
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};
use crate::scenario::{NetRxAction, ResolvedScenario};
use crate::topology::Topology;
use lone::Lone;

/// A core's unit of work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    /// The hard IRQ handler of a vector.
    Irq(usize),
    /// A poll's fixed cost.
    PollStart,
    /// Cleaning one completed descriptor of a tx queue.
    TxClean(usize),
    /// Rx clean of one frame (the core's `frame`) from a ring.
    RxPacket(usize),
    /// Waiting for and holding a shared tx queue's lock, then posting the frame (the
    /// core's `frame`).
    TxLock(usize),
    /// Posting the poll's bulk of XDP_TX / redirected frames (one doorbell).
    XdpFlush,
    /// A NAPI thread's wake-up: switching in, the thread loop (threaded NAPI).
    Wakeup,
    /// The application thread's work (`[app]`).
    App(app::Step),
    /// The application spinning while the softirq has the NAPI it would busy poll.
    BusySpin,
}

impl Work {
    fn activity(&self) -> Activity {
        match self {
            Work::Irq(_) => Activity::Irq,
            Work::PollStart => Activity::Poll,
            Work::TxClean(_) => Activity::TxClean,
            Work::RxPacket(..) => Activity::RxClean,
            Work::TxLock(..) => Activity::TxLock,
            Work::XdpFlush => Activity::Io,
            Work::Wakeup | Work::App(app::Step::Wakeup) => Activity::Wakeup,
            Work::BusySpin => Activity::Spin,
            Work::App(_) => Activity::App,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Tx,
    Rx,
    /// After the rx clean: XDP's bulk is flushed (`xdp_do_flush`), then the poll ends.
    Flush,
}

/// One driver `poll()` of a vector's NAPI.
#[derive(Debug)]
struct Poll {
    vector: usize,
    /// The vector's rx ring and tx queue (its layout, fixed).
    rx: Option<usize>,
    tx: Option<usize>,
    kind: PollKind,
    /// Most rx frames: the NAPI weight, or the busy-poll budget.
    weight: u32,
    phase: Phase,
    tx_done: u32,
    tx_bytes: u64,
    tx_complete: bool,
    rx_done: u32,
    rx_bytes: u64,
}

impl Poll {
    fn new(vector: usize, nic: &Nic, kind: PollKind, weight: u32, phase: Phase) -> Self {
        let layout = nic.vector(vector).layout();
        Poll {
            vector,
            rx: layout.rx,
            tx: layout.tx,
            kind,
            weight,
            phase,
            tx_done: 0,
            tx_bytes: 0,
            tx_complete: true,
            rx_done: 0,
            rx_bytes: 0,
        }
    }
}

/// Who polls: the softirq or a NAPI thread, or an application busy polling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PollKind {
    Normal,
    /// A poll of `napi_busy_loop` (`NAPI_STATE_IN_BUSY_POLL`).
    Busy,
    /// The poll of `busy_poll_stop`.
    BusyStop,
}

/// One `net_rx_action` invocation, kept in its core between invocations (`active`
/// false, both lists empty): starting one writes a few words in place, and NAPIs move
/// between lists one by one, instead of moving structs and lists whole (a list's header
/// just updated in parts and then copied whole stalls on store forwarding: per softirq at
/// low load, a tenth of the time).
#[derive(Debug, Default)]
struct NetRx {
    active: bool,
    budget: i64,
    /// The start of the jiffy in which the time limit is reached (`time_after_eq(jiffies,
    /// time_limit)`: from this instant on).
    time_limit: Instant,
    local: VecDeque<usize>,
    repoll: VecDeque<usize>,
    polled: bool,
}

#[derive(Default)]
struct Core {
    worker: Worker<Work>,
    /// Vectors whose hard IRQ handler waits to run.
    irq_queue: VecDeque<usize>,
    poll_list: VecDeque<usize>,
    softirq_pending: bool,
    restarts: u32,
    net_rx: NetRx,
    poll: Option<Poll>,
    /// The frame of the running RxPacket or TxLock unit (kept here, not in the unit: units
    /// stay small, see `units::run`).
    frame: Packet,
    /// A frame (`frame`) waiting for its shared tx queue's lock, and how long that takes.
    lock: Option<(usize, Span)>,
    /// XDP frames waiting for the next flush, with their tx queues.
    bulk: Vec<(Packet, usize)>,
    /// Threaded NAPI: runnable NAPI threads (by vector) and the one running.
    runnable: VecDeque<usize>,
    thread: Option<usize>,
    /// Units run inline by `next` (for the stop flag, see `Napi::inline_fits`).
    inline_units: u32,
}

/// A NAPI kernel thread's state (threaded NAPI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ThreadState {
    #[default]
    Asleep,
    /// Woken, running after the wake-up latency.
    Waking,
    /// On its core's run queue or running; `fresh`: its wake-up cost is still to pay.
    Runnable { fresh: bool },
}

/// Per-vector NAPI state and what its episode did so far.
#[derive(Default, Clone)]
struct NapiInstance {
    scheduled: bool,
    episode: Episode,
    /// Empty polls still to be driven by the deferral timer before the IRQ is unmasked.
    defer_left: u32,
    defer_timer: Timer,
    /// Threaded NAPI: the NAPI's kernel thread and its wake-up timer.
    thread: ThreadState,
    wake: Timer,
    /// An application's busy poll has it (`NAPI_STATE_IN_BUSY_POLL`).
    busy_owned: bool,
}

/// Move every NAPI of `from`, in order, to the back of `to` (lists of a NAPI or two: one
/// by one, see [`NetRx`]).
#[inline]
fn move_all(from: &mut VecDeque<usize>, to: &mut VecDeque<usize>) {
    while let Some(v) = from.pop_front() {
        to.push_back(v);
    }
}

/// NAPI and driver limits.
pub struct NapiParams {
    pub weight: u32,
    pub budget: u32,
    pub budget_time: Span,
    pub hz: u32,
    pub tx_work_limit: u32,
    pub refill_batch: u32,
    pub refill_at_poll_end: bool,
    pub net_rx_action: NetRxAction,
    /// `napi_defer_hard_irqs` and `gro_flush_timeout` (deferral off when either is 0).
    pub defer_hard_irqs: u32,
    pub gro_flush_timeout: Span,
    /// Threaded NAPI (`/sys/class/net/DEV/threaded`): a kernel thread per NAPI, with its
    /// wake-up latency and cost (`[host.thread]`).
    pub threaded: bool,
    pub wake_latency: Span,
    pub t_wakeup: Span,
    /// Busy polling (`[socket]`): frames per busy poll, `SO_PREFER_BUSY_POLL`, and
    /// `irq_suspend_timeout`.
    pub busy_poll_budget: u32,
    pub prefer_busy_poll: bool,
    pub irq_suspend_timeout: Span,
}

pub struct Napi {
    napi: Vec<NapiInstance>,
    cores: Vec<Core>,
    topo: Topology,
    p: NapiParams,
    jiffy: Span,
    /// The start of the jiffy last asked for (see `jiffy_start`).
    jiffy_at: Instant,
    budget_jiffies: u64,
    /// Polls the deferral timer started in the measurement window.
    timer_polls: u64,
    /// The XDP program (io = "xdp"), and its flushes in the window.
    xdp: Option<Xdp>,
    flushes: u64,
    /// NAPI thread wake-ups in the window (threaded NAPI).
    wakeups: u64,
    /// Busy polls in the window.
    busy_polls: u64,
    /// The application reading what the stack delivers (`[app]`), and the workers of its
    /// cores when it has cores of its own (core `cores + i` runs thread `i`).
    app: Option<App>,
    app_workers: Vec<Worker<Work>>,
    /// Cores may run lone episodes ([`Napi::lone_episodes`]): plain NAPI, one rx ring per
    /// core, each sending on a tx queue of its own whose completions interrupt the core, no
    /// deferral; `lone_pair`: on a vector of their own (`nic.tx_vector = "separate"`).
    lone: bool,
    lone_pair: bool,
}

impl Napi {
    pub fn new(sc: &ResolvedScenario, topo: &Topology) -> Self {
        let (io, n) = (&sc.scenario.host.io, &sc.scenario.nic);
        let (poll, softirq, thread) = (io.poll(), io.softirq(), io.thread());
        Self::with_params(
            *topo,
            NapiParams {
                weight: poll.weight,
                budget: softirq.budget,
                budget_time: softirq.budget_time.into(),
                hz: softirq.hz,
                tx_work_limit: n.tx_work_limit,
                refill_batch: n.refill_batch,
                refill_at_poll_end: n.refill_at_poll_end,
                net_rx_action: softirq.net_rx_action,
                defer_hard_irqs: n.napi.defer_hard_irqs,
                gro_flush_timeout: n.napi.gro_flush_timeout.into(),
                threaded: n.napi.threaded,
                wake_latency: thread.wake_latency.into(),
                t_wakeup: thread.t_wakeup.into(),
                busy_poll_budget: sc.scenario.socket.busy_poll_budget,
                prefer_busy_poll: sc.scenario.socket.prefer_busy_poll,
                irq_suspend_timeout: n.napi.irq_suspend_timeout.into(),
            },
        )
    }

    pub fn with_params(topo: Topology, p: NapiParams) -> Self {
        let jiffy = Span::from_ps(1_000_000_000_000 / p.hz as u64);
        let budget_jiffies = p.budget_time.div_ceil(jiffy).max(1);
        let napi = vec![NapiInstance::default(); topo.vectors()];
        let cores = (0..topo.cores()).map(|_| Core::default()).collect();
        Napi {
            napi,
            cores,
            topo,
            p,
            jiffy,
            jiffy_at: Instant::ZERO,
            budget_jiffies,
            timer_polls: 0,
            xdp: None,
            flushes: 0,
            wakeups: 0,
            busy_polls: 0,
            app: None,
            app_workers: Vec::new(),
            lone: false,
            lone_pair: false,
        }
    }

    /// The node's NAPIs feeding an application (`[app]`) instead of the tx queues.
    fn with_app(mut self, p: Option<AppParams>) -> Self {
        if let Some(p) = p {
            let n = self.topo.cores();
            self.app_workers = if p.same_core { Vec::new() } else { (0..n).map(|_| Worker::default()).collect() };
            self.app = Some(App::new(p, n));
        }
        self
    }

    /// The application thread `i`'s core (its NAPI's, or one of its own).
    fn app_core(&self, i: usize) -> usize {
        if self.app_workers.is_empty() {
            i
        } else {
            self.topo.cores() + i
        }
    }

    /// The application thread's next step on NAPI core `c`, when it shares the core and
    /// the core has no interrupt or softirq work left.
    #[inline(always)]
    fn app_next(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<(Work, Span)> {
        self.app.as_ref()?;
        self.app_step(c, t, ctx)
    }

    fn app_step(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<(Work, Span)> {
        let app = self.app.as_mut().filter(|_| self.app_workers.is_empty())?;
        // The NAPI its socket is fed by (sk_napi_id): the core's first ring's.
        let v = self.topo.vector_of_ring(self.topo.rings_of_core(c).start);
        let kind = match app.next(c, t, ctx.stats) {
            None => {
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

    /// NAPI with an XDP program on every frame (io = "xdp").
    pub fn with_xdp(sc: &ResolvedScenario, topo: &Topology) -> Self {
        Napi { xdp: Some(Xdp::new(sc)), ..Self::new(sc, topo) }
    }

    /// The mode a scenario asks for: NAPI, with its XDP program and application if any.
    pub fn of(sc: &ResolvedScenario, topo: &Topology, xdp: bool) -> Self {
        let napi = if xdp { Self::with_xdp(sc, topo) } else { Self::new(sc, topo) };
        napi.with_app(AppParams::of(sc)).with_lone()
    }

    /// AF_XDP: the program redirects to the queue's socket, whose user thread is the
    /// application, busy polling (preferred, its batch a poll) when asked to.
    pub fn af_xdp(sc: &ResolvedScenario, topo: &Topology) -> Self {
        let x = &sc.scenario.host.io.af_xdp().cloned().unwrap_or_default();
        let mut napi = Napi { xdp: Some(Xdp::to_xsk(sc)), ..Self::new(sc, topo) };
        napi.p.busy_poll_budget = x.batch;
        napi.p.prefer_busy_poll = x.busy_poll;
        napi.with_app(super::af_xdp::app_params(sc))
    }

    /// The start of the jiffy `t` falls in (the last one found is kept: softirqs come many
    /// to a jiffy, and this spares a 64-bit division each).
    fn jiffy_start(&mut self, t: Instant) -> Instant {
        if t < self.jiffy_at || t >= self.jiffy_at + self.jiffy {
            self.jiffy_at = Instant::from_ps(t.ps() - t.ps() % self.jiffy.ps());
        }
        self.jiffy_at
    }

    fn napi_schedule(&mut self, c: usize, v: usize, t: Instant, ctx: &mut Ctx) {
        if self.napi[v].scheduled {
            return;
        }
        self.napi[v].scheduled = true;
        if self.p.threaded {
            // ____napi_schedule: wake the NAPI's thread (a running one polls again).
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

    /// NAPI `v`'s woken thread joins core `c`'s run queue at `t`.
    fn thread_runnable(&mut self, c: usize, v: usize, t: Instant, ctx: &mut Ctx) {
        self.napi[v].thread = ThreadState::Runnable { fresh: true };
        if ctx.stats.in_window(t) {
            self.wakeups += 1;
        }
        self.cores[c].runnable.push_back(v);
    }

    /// The next NAPI net_rx_action polls, or None after ending the invocation.
    fn next_poll(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<usize> {
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

    /// Where XDP or an application sends a frame the driver finished at `t` (rx ring of
    /// core `c`, tx queue `q`): true if it went there, false if it is forwarded as usual.
    /// Out of line: the plain forwarding path stays small.
    #[inline(never)]
    fn rx_verdict(&mut self, c: usize, p: Packet, q: usize, t: Instant, ctx: &mut Ctx) -> bool {
        match self.xdp.as_ref().map_or(Verdict::Stack, Xdp::verdict) {
            Verdict::Stack | Verdict::Send => {}
            Verdict::Consume => {
                ctx.stats.consumed(&p, t);
                return true;
            }
            Verdict::Bulk => {
                self.cores[c].bulk.push((p, q));
                return true;
            }
        }
        // Delivered locally: into the socket of this core's application thread.
        match &mut self.app {
            Some(app) => {
                app.deliver(c, p, t, ctx.queue, ctx.stats);
                true
            }
            None => false,
        }
    }

    /// The poll's XDP bulk goes out at `t`: to the tx queues (`xdp_do_flush`), or onto the
    /// AF_XDP socket's rx ring (`xsk_flush`).
    fn flush(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        if ctx.stats.in_window(t) {
            self.flushes += 1;
        }
        let to_xsk = self.xdp.as_ref().is_some_and(|x| x.xsk.is_some());
        for (p, q) in std::mem::take(&mut self.cores[c].bulk) {
            match &mut self.app {
                Some(app) if to_xsk => app.deliver(c, p, t, ctx.queue, ctx.stats),
                _ => ctx.nic.xmit(q, &p, t, ctx.queue, ctx.stats),
            }
        }
    }

    fn finish_poll(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        let Some(poll) = self.cores[c].poll.take() else { return };
        let v = poll.vector;
        ctx.stats.poll(t, poll.rx.map(|_| poll.rx_done));
        let ep = &mut self.napi[v].episode;
        ep.rx_packets += poll.rx_done as u64;
        ep.rx_bytes += poll.rx_bytes;
        ep.tx_packets += poll.tx_done as u64;
        ep.tx_bytes += poll.tx_bytes;
        let full = poll.rx_done >= poll.weight || !poll.tx_complete;
        match poll.kind {
            // In a busy-poll loop napi_complete_done does nothing: the poller keeps it.
            PollKind::Busy => return,
            PollKind::BusyStop => {
                let inst = &mut self.napi[v];
                inst.busy_owned = false;
                let gro = self.p.gro_flush_timeout;
                if self.p.prefer_busy_poll && self.p.defer_hard_irqs > 0 && gro > Span::ZERO {
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
        let yield_to_app = full
            && self.p.prefer_busy_poll
            && poll.kind == PollKind::Normal
            && self.p.defer_hard_irqs > 0
            && self.p.gro_flush_timeout > Span::ZERO;
        let incomplete = full && !yield_to_app;
        if self.p.threaded && poll.kind == PollKind::Normal {
            let core = &mut self.cores[c];
            if !incomplete {
                // napi_complete: the thread sleeps until the NAPI is scheduled again.
                core.thread = None;
                self.napi[v].thread = ThreadState::Asleep;
            } else if !core.runnable.is_empty() {
                // cond_resched: the next runnable NAPI thread gets the core.
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
            // napi_complete_done: work reloads the deferral count; while it lasts, the
            // vector stays masked and the timer polls again (the episode goes on).
            if poll.rx_done > 0 {
                inst.defer_left = self.p.defer_hard_irqs;
            }
            if inst.defer_left > 0 && self.p.gro_flush_timeout > Span::ZERO {
                inst.defer_left -= 1;
                inst.defer_timer.set(ctx.queue, t + self.p.gro_flush_timeout, Key::Defer(v as u32));
                return;
            }
            // The episode ends (the moderation policy hears of it), unmask.
            let episode = std::mem::take(&mut inst.episode);
            ctx.nic.complete(v, t, episode, ctx.queue, ctx.stats);
        }
    }

    /// A tx clean unit of core `c` on queue `q` ended at `t`: the oldest completed
    /// descriptor is cleaned and counted in the poll.
    #[inline(always)]
    fn tx_cleaned(&mut self, c: usize, q: usize, t: Instant, ctx: &mut Ctx) {
        if let Some(size) = ctx.nic.tx_clean_one(q, t, ctx.stats) {
            if let Some(poll) = &mut self.cores[c].poll {
                poll.tx_done += 1;
                poll.tx_bytes += size.saturating_sub(4) as u64;
            }
        }
    }

    /// The rx clean of core `c`'s frame from ring `r` ended at `t`: counted in the poll,
    /// then handed to XDP or the application, or sent (after the shared tx queue's lock,
    /// when there is one to wait for: then the core's `lock` is set).
    #[inline(always)]
    fn rx_cleaned(&mut self, c: usize, r: usize, t: Instant, ctx: &mut Ctx) {
        let q = self.topo.tx_of_ring(r);
        let core = &mut self.cores[c];
        if let Some(poll) = &mut core.poll {
            poll.rx_done += 1;
            poll.rx_bytes += core.frame.size.saturating_sub(4) as u64;
        }
        if (self.xdp.is_some() || self.app.is_some()) && self.rx_verdict(c, self.cores[c].frame, q, t, ctx) {
            return;
        }
        let lock = ctx.nic.tx_lock(q, t, ctx.costs.tx_lock);
        if lock > Span::ZERO {
            self.cores[c].lock = Some((q, lock));
        } else {
            ctx.nic.xmit(q, &self.cores[c].frame, t, ctx.queue, ctx.stats);
        }
    }

    /// Whether core `c` may run a unit of `d` from `t` inline (see [`Units::next`]); every
    /// 1,024 inline units the run's stop flag is looked at, and a stopped run runs none.
    #[inline(always)]
    fn inline_fits(&mut self, c: usize, t: Instant, d: Span, ctx: &Ctx) -> bool {
        let core = &mut self.cores[c];
        core.inline_units = core.inline_units.wrapping_add(1);
        if core.inline_units.is_multiple_of(1024) && ctx.cancelled() {
            return false;
        }
        units::fits(&core.worker, c, t, d, ctx)
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
            Work::TxLock(q) => ctx.nic.xmit(q, &self.cores[c].frame, t, ctx.queue, ctx.stats),
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
                let phase = poll.phase;
                let layout = (poll.rx, poll.tx);
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
                                let beyond = ctx.nic.tx_clean_run(
                                    q,
                                    t,
                                    (&mut poll.tx_done, &mut poll.tx_bytes, self.p.tx_work_limit),
                                    d,
                                    horizon,
                                    ctx.stats,
                                );
                                ctx.stats.busy(c, Activity::TxClean, t0, *t);
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
                                ctx.stats.busy(c, Activity::TxClean, *t, *t + d);
                                *t += d;
                                self.tx_cleaned(c, q, *t, ctx);
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
                                ctx.stats.busy(c, Activity::RxClean, t0, *t);
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
                                ctx.nic.refill(r, *t, self.p.refill_batch, ctx.stats);
                                if !ctx.nic.take_into(r, *t, ctx.stats, &mut core.frame) {
                                    break;
                                }
                                let d = match &self.xdp {
                                    Some(x) => x.frame_time(&core.frame, ctx.costs),
                                    None => ctx.costs.t_proc(&core.frame),
                                };
                                if !self.inline_fits(c, *t, d, ctx) {
                                    return Some((Work::RxPacket(r), d));
                                }
                                ctx.stats.busy(c, Activity::RxClean, *t, *t + d);
                                *t += d;
                                self.rx_cleaned(c, r, *t, ctx);
                                if let Some((q, d)) = self.cores[c].lock.take() {
                                    return Some((Work::TxLock(q), d));
                                }
                            }
                            if self.p.refill_at_poll_end {
                                ctx.nic.refill(r, *t, 1, ctx.stats);
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
                continue;
            }
            if self.p.threaded {
                // The running NAPI thread polls again, or the next runnable one runs.
                let core = &mut self.cores[c];
                let v = match core.thread {
                    Some(v) => v,
                    None => {
                        let Some(v) = core.runnable.pop_front() else {
                            match self.app_next(c, *t, ctx) {
                                None if !self.cores[c].runnable.is_empty() => continue,
                                next => return next,
                            }
                        };
                        core.thread = Some(v);
                        if self.napi[v].thread == (ThreadState::Runnable { fresh: true }) {
                            self.napi[v].thread = ThreadState::Runnable { fresh: false };
                            if self.p.t_wakeup > Span::ZERO {
                                return Some((Work::Wakeup, self.p.t_wakeup));
                            }
                        }
                        v
                    }
                };
                core.poll = Some(Poll::new(v, ctx.nic, PollKind::Normal, self.p.weight, Phase::Start));
                continue;
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

impl IoMode for Napi {
    fn start(&mut self, ctx: &mut Ctx) {
        for v in 0..self.napi.len() {
            ctx.nic.arm_vector(v, Instant::ZERO, ctx.queue);
        }
    }

    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx) {
        match key {
            Key::Step(c) => units::on_step(self, c as usize, gen, ctx),
            // napi_watchdog: schedule the NAPI and raise the softirq, no device interrupt.
            Key::Defer(v) if self.napi[v as usize].defer_timer.fired(gen, ctx.queue) => {
                let (v, now) = (v as usize, ctx.now);
                let c = ctx.nic.vector(v).layout().core;
                // A busy poller that has the NAPI meanwhile keeps it (NAPI_STATE_MISSED).
                if ctx.stats.in_window(now) && !self.napi[v].scheduled {
                    self.timer_polls += 1;
                }
                self.napi_schedule(c, v, now, ctx);
                if self.cores[c].worker.is_idle() {
                    units::run(self, c, now, ctx);
                }
            }
            // The application thread a frame woke runs (after the softirq work on its core).
            Key::App(i) => {
                let (i, now) = (i as usize, ctx.now);
                if self.app.as_mut().is_some_and(|a| a.on_wake(i, gen, now, ctx.queue, ctx.stats)) {
                    let core = self.app_core(i);
                    if self.worker(core).is_idle() {
                        units::run(self, core, now, ctx);
                    }
                }
            }
            // A woken NAPI thread is scheduled on its core.
            Key::Wake(v) if self.napi[v as usize].wake.fired(gen, ctx.queue) => {
                let (v, now) = (v as usize, ctx.now);
                let c = ctx.nic.vector(v).layout().core;
                self.thread_runnable(c, v, now, ctx);
                if self.cores[c].worker.is_idle() {
                    units::run(self, c, now, ctx);
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, t: Instant, ctx: &mut Ctx) {
        for c in 0..self.cores.len() + self.app_workers.len() {
            units::end(self, c, t, ctx);
        }
    }

    fn on_irq(&mut self, irq: Irq, ctx: &mut Ctx) {
        let (c, now) = (irq.core, ctx.now);
        if self.cores[c].worker.is_idle() {
            self.cores[c].irq_queue.push_back(irq.vector);
            units::run(self, c, now, ctx);
        } else {
            // Preempt: the running unit finishes t_irq later; the handler's effect
            // (napi_schedule) is visible to net_rx_action at its next poll boundary.
            let t_irq = ctx.costs.t_irq;
            ctx.stats.busy(c, Activity::Irq, now, now + t_irq);
            self.cores[c].worker.stretch(t_irq, Key::Step(c as u32), ctx);
            self.napi_schedule(c, irq.vector, now, ctx);
        }
    }

    fn preempt(&mut self, core: usize, t: Instant, d: Span, ctx: &mut Ctx) {
        units::preempt(self, core, t, d, ctx);
    }

    fn on_rx_wake(&mut self, ring: usize, t: Instant, ctx: &mut Ctx) {
        let v = ctx.nic.rx(ring).vector();
        ctx.nic.cause(v, t, ctx.queue);
    }

    fn independent_cores(&self) -> bool {
        // An application thread on a core of its own reads another core's socket.
        self.app_workers.is_empty()
    }

    /// A NAPI's thread and its deferral timer are its vector's, on the vector's core.
    fn timer_cores(&self) -> (Vec<u32>, Vec<u32>) {
        (self.topo.core_of_each_vector(), self.topo.core_of_each_vector())
    }

    #[cfg(test)]
    fn general_path_only(&mut self) {
        self.lone = false;
        self.lone_pair = false;
    }

    fn report(&self, nic: &Nic) -> super::IoReport {
        // A policy's own state at the end (DIM: profile index, windows, changes), per vector.
        let state: Vec<_> = nic.vectors().iter().map(|v| v.moderation().figures()).filter(|f| !f.is_null()).collect();
        super::IoReport::Napi(NapiReport {
            app: self.app.as_ref().map(|a| a.report()),
            busy_polls: self.app.as_ref().map(|_| self.busy_polls),
            deferral_timer_polls: self.timer_polls,
            itr_interval_ns: nic.vectors().iter().map(|v| v.moderation().interval().as_ns_f64()).collect(),
            moderation: nic.vectors().first().map(|v| v.moderation().name()),
            moderation_state: (!state.is_empty()).then_some(state),
            thread_wakeups: self.p.threaded.then_some(self.wakeups),
            xdp: self.xdp.as_ref().map(|x| x.report(self.flushes)),
        })
    }
}

/// A NAPI's figures in a run's result (`io`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NapiReport {
    /// The application's, where an `[app]` (or AF_XDP's user thread) reads the frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<crate::engine::app::AppReport>,
    /// Polls the application made itself (busy polling), with an application.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_polls: Option<u64>,
    /// Polls the deferral timer drove (`napi_defer_hard_irqs`).
    pub deferral_timer_polls: u64,
    /// Each vector's throttle interval at the end.
    pub itr_interval_ns: Vec<f64>,
    /// The moderation policy (`nic.itr.mode`).
    pub moderation: Option<&'static str>,
    /// Each vector's policy's own state at the end, where it has one (DIM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moderation_state: Option<Vec<serde_json::Value>>,
    /// Wake-ups of the NAPI threads (`nic.napi.threaded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_wakeups: Option<u64>,
    /// The XDP program's figures (xdp, af-xdp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp: Option<super::xdp::XdpReport>,
}

/// Per frame its tx clean, on the core its tx queue completes to; per poll `t_poll` (a full
/// weight when the rings never run dry); per interrupt `t_irq` (none then: the vector stays
/// masked while polls use their whole weight). At low load a frame may pay an rx interrupt
/// and poll, and with `nic.tx_vector = "separate"` a tx interrupt and poll as well.
pub fn mode_costs(sc: &ResolvedScenario, costs: &crate::engine::costs::Costs) -> crate::price::ModeCosts {
    let (io, n) = (&sc.scenario.host.io, &sc.scenario.nic);
    let weight = io.poll().weight;
    let per_poll = weight.min(n.rx_ring).max(1) as f64;
    let vectors = if n.tx_vector == crate::scenario::TxVector::Shared { 1.0 } else { 2.0 };
    let mut notes = Vec::new();
    if vectors > 1.0 && costs.t_poll > Span::ZERO {
        notes.push(
            "at saturation, polls of the separate tx vectors (their rate follows interrupt moderation) are left out"
                .to_string(),
        );
    }
    // With deferral, a frame alone may be followed by napi_defer_hard_irqs timer polls.
    let deferred = if n.napi.gro_flush_timeout.ps > 0 { n.napi.defer_hard_irqs as f64 } else { 0.0 };
    let mut terms = vec![
        crate::price::IoCost::per_event("poll", costs.t_poll.ps() as f64, per_poll, vectors + deferred),
        crate::price::IoCost::per_event("interrupt", costs.t_irq.ps() as f64, f64::INFINITY, vectors),
    ];
    if n.napi.threaded {
        // A thread that never runs out of work never sleeps; alone, a frame may wake it.
        terms.push(crate::price::IoCost::per_event(
            "wake-up",
            io.thread().t_wakeup.ps as f64,
            f64::INFINITY,
            vectors + deferred,
        ));
    }
    let sock = &sc.scenario.socket;
    let suspends = n.napi.irq_suspend_timeout.ps > 0;
    let app = sc.scenario.app.as_ref().map(|a| crate::price::AppCosts {
        frame_ps: a.t_packet.ps as f64 + a.t_call.ps as f64 / a.batch.max(1) as f64,
        same_core: a.core == crate::scenario::AppCore::Same,
        drives: suspends
            .then(|| costs.t_poll.ps() as f64 * (1.0 / sock.busy_poll_budget.max(1) as f64 - 1.0 / per_poll)),
        busy_extra_ps: costs.t_poll.ps() as f64 * (1.0 / sock.busy_poll_budget.max(1) as f64 - 1.0 / per_poll),
    });
    if let Some(a) = &app {
        notes.clear();
        if a.same_core && (costs.t_irq > Span::ZERO || costs.t_poll > Span::ZERO) {
            notes.push("the application shares the NAPI's core: the stack is not saturated, its interrupts and polls cost more than the saturated estimate, so the read rate is an upper bound".to_string());
        }
    }
    // A preferred busy poller's NAPI yields after every poll: while the reader is busy
    // (its socket never empty), only the deferral timer polls it.
    let s = &sc.scenario.socket;
    let prefer = app.is_some() && s.prefer_busy_poll && n.napi.defer_hard_irqs > 0 && n.napi.gro_flush_timeout.ps > 0;
    let poll_gap_ps = if prefer && !suspends { n.napi.gro_flush_timeout.ps as f64 } else { 0.0 };
    crate::price::ModeCosts {
        terms,
        poll_gap_ps,
        // Frames an application reads are not sent.
        tx_lock: app.is_none(),
        tx_clean_ps: if app.is_some() { 0.0 } else { costs.t_clean.ps() as f64 },
        app,
        cleans_per_rx: n.tx_work_limit as f64 / weight.max(1) as f64,
        notes,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace, trace_origins};

    /// ITR off, t_irq 1 us, t_proc 2 us, t_clean 0.5 us; tx completions on their own
    /// vector. Frames reach the rx ring at 10 and 12 us.
    ///
    /// ```text
    ///  10     IRQ v0 (rx) -> handler 10-11 -> poll v0: frame 1 11-13, tx at 13 (done 13.0672)
    ///  13     frame 2 (written at 12 while v0 was masked) 13-15
    ///  13.07  IRQ v1 (tx completion) preempts: frame 2 ends at 16, tx at 16 (done 16.0672)
    ///  16     v0 completes; its cause from 12 is pending -> IRQ v0 at 16 (counter 0)
    ///         poll v1 (scheduled by the handler at 13.07): tx clean 16-16.5, preempted by
    ///         IRQ v0 -> 17.5; second clean 17.5-18; v1 completes, completion from
    ///         16.07 pending -> IRQ v1 at 18; poll v0: nothing, v0 armed
    ///  18     IRQ v1 -> handler 18-19 -> poll v1: nothing, armed
    /// ```
    #[test]
    fn an_interrupt_preempts_a_poll_and_causes_that_came_while_masked_interrupt_at_unmask() {
        let toml = node_toml(
            "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"2us\"\nt_clean = \"500ns\"",
            "[nic.itr]\nmode = \"off\"",
        );
        let (r, dep, origins) = trace_origins(&toml, &[(10_000, 64), (12_000, 64)]);
        assert_eq!(dep, [(13_000.0, 13_067.2), (16_000.0, 16_067.2)]);
        assert_eq!(origins, [10_000.0, 12_000.0], "the egress port sees where each frame began");
        assert_eq!(r.irq_per_s * 1e-3, 4.0, "IRQs at 10, 13.07, 16, 18 us");
        assert_eq!(r.polls_per_packet, 2.0, "four polls for two frames");
        assert_eq!(r.packets_per_poll.histogram[..3], [1, 0, 1], "rx polls: one with both frames, one empty");
        assert_eq!((r.latency_ns.min, r.latency_ns.mean), (3_000.0, 3_500.0));
        assert!((r.cpu_by_activity["irq"] - 4e-6 / 1e-3).abs() < 1e-12, "4 handlers of 1 us in 1 ms");
        assert!((r.cpu_by_activity["tx_clean"] - 1e-6 / 1e-3).abs() < 1e-12);
    }

    /// napi_defer_hard_irqs = 2, gro_flush_timeout = 5 us; ITR off, tx completions on the
    /// rx vector, t_irq 1 us, t_poll 0.5 us, t_proc 2 us. Frames reach the ring at 10 and
    /// 14 us.
    ///
    /// ```text
    ///  10     IRQ -> handler 10-11 -> poll 11-11.5, frame 1 11.5-13.5: work, count 2 -> 1,
    ///         vector stays masked, timer at 18.5 (frame 2 at 14 raises no IRQ)
    ///  18.5   timer poll 18.5-19, frame 2 19-21: work, count 2 -> 1, timer at 26
    ///  26     timer poll 26-26.5 (cleans frame 2's completion): empty, count 1 -> 0, timer at 31.5
    ///  31.5   timer poll 31.5-32: empty, count 0 -> unmask; completions came while masked
    ///         -> IRQ at 32 -> handler 32-33 -> poll 33-33.5: empty, unmask
    /// ```
    #[test]
    fn deferral_keeps_the_interrupt_masked_and_polls_from_a_timer() {
        let host = "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"500ns\"\nt_proc = \"2us\"";
        let toml = node_toml(host, "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\ndefer_hard_irqs = 2\ngro_flush_timeout = \"5us\"");
        let (r, dep) = trace(&toml, &[(10_000, 64), (14_000, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [13_500.0, 21_000.0]);
        assert_eq!(r.irq_per_s * 1e-3, 2.0, "IRQs at 10 and 32 us only");
        assert_eq!(r.polls_per_packet, 2.5, "polls at 11, 18.5, 26, 31.5 and 33 us");
        assert_eq!(r.io.json()["deferral_timer_polls"], 3);
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (3_500.0, 7_000.0));
        assert!((r.cpu_by_activity["irq"] - 2e-6 / 1e-3).abs() < 1e-12);
        assert!((r.cpu_by_activity["poll"] - 2.5e-6 / 1e-3).abs() < 1e-12);
        // Without deferral the vector is unmasked at 13.5 us; frame 1's completion at
        // 13.5672 interrupts, and frame 2 is polled at 15.0672 and leaves at 17.0672.
        let plain = node_toml(
            "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"500ns\"\nt_proc = \"2us\"",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"",
        );
        let (_, dep) = trace(&plain, &[(10_000, 64), (14_000, 64)]);
        assert!((dep[1].0 - 17_067.2).abs() < 1e-6, "{dep:?}");
    }

    /// DIM, mlx5 CQE mode, at its default profile (index 1: 8 us, 128 frames); t_irq 1 us,
    /// t_proc 1 us; tx completions on the rx vector.
    ///
    /// ```text
    ///  10     frame 1 written back: the timer runs 8 us from it -> IRQ at 18 (frame 2 at
    ///         14 waits with it); handler 18-19, frames 19-20, 20-21
    ///  21     complete: the completion of 20.07 came meanwhile -> IRQ 8 us after it was
    ///         seen, at 29; its poll cleans both completions; armed
    /// ```
    #[test]
    fn dim_cqe_mode_interrupts_one_interval_after_the_first_write_back() {
        let toml = node_toml(
            "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-cqe\"",
        );
        let (r, dep) = trace(&toml, &[(10_000, 64), (14_000, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [20_000.0, 21_000.0]);
        assert_eq!(r.io.json()["moderation_state"][0]["usec"], 8);
        assert_eq!(r.io.json()["moderation_state"][0]["frames"], 128);
        assert_eq!(r.irq_per_s * 1e-3, 2.0, "IRQs at 18 and 29 us");
        assert_eq!(r.polls_per_packet, 1.0);
    }

    /// EQE mode (index 1: 8 us from the last interrupt, 256 frames): a lone frame
    /// interrupts at once; the next waits for the interval since that interrupt.
    #[test]
    fn dim_eqe_mode_times_from_the_last_interrupt() {
        let toml = node_toml(
            "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-eqe\"",
        );
        let (_, dep) = trace(&toml, &[(10_000, 64), (13_000, 64)]);
        // IRQ 10, handler to 11, frame 1 to 12 (completes at 12.07: a cause of the armed
        // vector -> IRQ when the counter allows, 10 + 8 = 18; frame 2 at 13 leaves it
        // there). Handler 18-19, frame 2 19-20.
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [12_000.0, 20_000.0]);
    }

    /// A full count interrupts at the write-back that fills it: CQE mode index 1 counts
    /// 128 frames; frames every 10 ns from 10 us fill it at 11.27 us, long before the timer.
    #[test]
    fn dim_interrupts_when_the_ring_holds_its_frame_count() {
        let toml = node_toml(
            "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"10ns\"",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-cqe\"",
        );
        let frames: Vec<(u64, u16)> = (0..128).map(|i| (10_000 + 10 * i, 64)).collect();
        let (_, dep) = trace(&toml, &frames);
        // IRQ at 11.27, handler to 12.27, then frame 1 to 12.28.
        assert_eq!(dep[0].0, 12_280.0);
    }

    /// Threaded NAPI on a device: wake_latency 3 us, t_wakeup 1 us, t_irq 1 us, t_proc 2 us,
    /// ITR off, tx completions on the rx vector. Frames at 10 and 11 us.
    ///
    /// ```text
    ///  10     IRQ -> handler 10-11 -> napi_schedule wakes the thread: runs at 14 (the core
    ///         idles meanwhile); wake-up 14-15, poll: frames 15-17, 17-19; complete, sleep
    ///  19     frame 1's completion (17.07) came while masked -> IRQ 19, handler 19-20,
    ///         thread at 23, wake-up 23-24, poll cleans both completions, sleeps; frame 2's
    ///         completion (19.07) came after the IRQ of 19 -> IRQ 24, thread at 28, wake-up
    ///         28-29, empty poll, armed
    /// ```
    #[test]
    fn a_threaded_napi_is_polled_by_its_thread_the_interrupt_wakes() {
        let host = "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"2us\"\n[host.thread]\nwake_latency = \"3us\"\nt_wakeup = \"1us\"";
        let toml =
            node_toml(host, "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\nthreaded = true");
        let (r, dep) = trace(&toml, &[(10_000, 64), (11_000, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [17_000.0, 19_000.0]);
        assert_eq!(r.irq_per_s * 1e-3, 3.0);
        assert_eq!(r.io.json()["thread_wakeups"], 3);
        assert_eq!(r.softirqs_per_packet, 0.0, "no NET_RX softirq");
        assert!((r.cpu_by_activity["wakeup"] - 3e-6 / 1e-3).abs() < 1e-12);
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (7_000.0, 8_000.0));
    }

    const BUSY: &str = "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"200ns\"\nt_proc = \"1us\"";

    fn busy_toml(socket: &str, napi: &str) -> String {
        let extra = format!("[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\n{napi}\n[app]\nt_packet = \"500ns\"\nbatch = 8\n[socket]\nbusy_poll = \"10us\"\n{socket}");
        node_toml(BUSY, &extra)
    }

    /// Busy polling for 10 us (t_poll 200 ns, t_proc 1 us, the reader 500 ns a frame).
    /// Frames at 10 and 15.05 us.
    ///
    /// ```text
    ///  10     IRQ, handler 10-11, softirq poll 11-11.2, frame 11.2-12.2 -> socket; the
    ///         reader reads it 12.2-12.7; the socket is empty: busy polls of 200 ns from 12.7
    ///  15.05  frame 2: the vector is armed -> IRQ preempts the busy poll of 14.9 (ends
    ///         16.1; napi_schedule finds the NAPI taken); its rx phase takes frame 2,
    ///         16.1-17.1; busy_poll_stop's poll 17.1-17.3 completes the NAPI (unmasked);
    ///         the reader reads 17.3-17.8; busy polls again until 27.8
    /// ```
    #[test]
    fn a_busy_polling_reader_polls_the_napi_itself() {
        let (r, _) = trace(&busy_toml("", ""), &[(10_000, 64), (15_050, 64)]);
        assert_eq!(r.consumed_packets, 2);
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (2_700.0, 2_750.0));
        assert_eq!(r.irq_per_s * 1e-3, 2.0);
        // Busy polls: 12.7 .. 14.9 (12, the last one preempted to 16.1 and taking frame 2
        // to 17.1), its stop, then from 17.8 to 27.8 (50) and the stop: 64.
        assert_eq!(r.io.json()["busy_polls"], 64);
    }

    /// The same with SO_PREFER_BUSY_POLL and deferral (2, 5 us): the interrupt masked by
    /// the first frame's deferral stays masked while the reader polls; frame 2 is found by
    /// a busy poll, and only after the reader blocks does the timer poll and unmask.
    ///
    /// ```text
    ///  10     IRQ, softirq poll, frame 1 to 12.2: work -> count 2 -> 1, timer 17.2, masked
    ///  15.05  frame 2, no IRQ: the busy poll 14.9-15.1 takes it 15.1-16.1; stop poll
    ///         16.1-16.3 arms the timer (21.3) instead of unmasking; read 16.3-16.8
    ///  21.3   the timer finds the NAPI busy polled (missed); the loop ends at 26.8, its stop
    ///         poll arms the timer (32.0); the reader blocks
    ///  32.0   timer poll: empty, count 1 -> 0, timer 37.2; 37.2: empty -> unmask; the
    ///         cause frame 2 latched while masked fires then (37.4), to an empty poll
    /// ```
    #[test]
    fn prefer_busy_poll_keeps_the_interrupt_masked_while_the_reader_polls() {
        let (r, _) = trace(
            &busy_toml("prefer_busy_poll = true", "defer_hard_irqs = 2\ngro_flush_timeout = \"5us\""),
            &[(10_000, 64), (15_050, 64)],
        );
        assert_eq!(r.consumed_packets, 2);
        assert_eq!(
            r.irq_per_s * 1e-3,
            2.0,
            "frame 1's, and at 37.4 the cause frame 2 latched: none while the reader polled"
        );
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (1_750.0, 2_700.0));
        assert_eq!(r.io.json()["deferral_timer_polls"], 2, "at 32.0 and 37.2 us");
    }

    /// IRQ suspension (1 ms) on top of the previous test: the stop poll after the loop that
    /// found frame 2 arms the suspension timer (16.3 + 1000 us) instead of gro_flush_timeout;
    /// the next loop ends empty at 26.8, its stop poll arms the 5 us timer, and before the
    /// reader blocks napi_resume_irqs schedules the NAPI: a softirq poll at 27.0 (count
    /// 1 -> 0, timer 32.2), whose empty poll unmasks (the latched cause fires at 32.4).
    #[test]
    fn irq_suspension_holds_the_timer_while_epoll_finds_events_and_resumes_when_it_blocks() {
        let napi = "defer_hard_irqs = 2\ngro_flush_timeout = \"5us\"\nirq_suspend_timeout = \"1ms\"";
        let (r, _) = trace(&busy_toml("prefer_busy_poll = true", napi), &[(10_000, 64), (15_050, 64)]);
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (1_750.0, 2_700.0));
        assert_eq!(r.io.json()["deferral_timer_polls"], 1, "at 32.2 us only");
        assert_eq!(r.irq_per_s * 1e-3, 2.0);
        assert_eq!(r.softirqs_per_packet, 2.0, "at 11 (IRQ), 27.0 (resume), 32.2 (timer), 33.4 (IRQ)");
    }

    #[test]
    fn the_throttle_counter_delays_the_second_interrupt() {
        // rx-usecs 10: 10.24 us. Frames at 10 and 15 us: the second interrupt waits for the
        // counter loaded at 10 us, until 20.24 us.
        let toml = node_toml(
            "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"static\"\ninterval = \"10us\"",
        );
        let (r, dep) = trace(&toml, &[(10_000, 64), (15_000, 64)]);
        // IRQ at 10, handler to 11, frame to 12; IRQ at 20.24, handler to 21.24, frame to 22.24.
        assert_eq!(dep[0].0, 12_000.0);
        assert_eq!(dep[1].0, 22_240.0);
        assert!((r.latency_ns.max - 7_240.0).abs() < 8.0, "7.24 us, within its HDR bucket: {}", r.latency_ns.max);
    }
}
