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
//!           budget or time exhausted -> time_squeeze, re-raise; __do_softirq restarts
//!           up to 10 passes / 2 ms / need_resched, then wakes ksoftirqd, a fair-class
//!           task beside the application (host.softirq: whether interrupt exits still run
//!           the softirq meanwhile)
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
//!
//! The mode in files, each an `impl Napi` block of its own beside the state held here
//! (`mod.rs`: cores, NAPIs, polls, parameters; the constructors; `impl IoMode`, where an
//! interrupt comes in, `ixgbe_msix_clean_rings`, and the deferral timer fires,
//! `napi_watchdog`):
//!
//! - `softirq.rs`: the NET_RX softirq and a core's poll loop (`Units::next`) —
//!   `net_rx_action`, `napi_schedule`, `__do_softirq`'s restarts and ksoftirqd;
//! - `poll.rs`: one driver poll in its phases, and its end — `ixgbe_poll`,
//!   `ixgbe_clean_tx_irq`, `ixgbe_clean_rx_irq`, `napi_complete_done` with deferral;
//! - `thread.rs`: threaded NAPI — `napi_threaded_poll`, `____napi_schedule`'s wake-up;
//! - `busy.rs`: the application thread and its busy polls — `napi_busy_loop`,
//!   `busy_poll_stop`, `napi_suspend_irqs`, `napi_resume_irqs`;
//! - `xdp.rs`: XDP and AF_XDP on NAPI (their constructors, a frame's verdict, the bulk's
//!   flush) — `bq_enqueue`, `xdp_do_flush`, `xsk_flush`;
//! - `lone.rs`: a lone core's whole interrupt episodes in one run, without events;
//! - `report.rs`: the mode's figures ([`NapiReport`]) and its costs ([`mode_costs`]);
//! - `tests.rs`: the mode against hand-computed traces.

use std::collections::VecDeque;

mod busy;
mod lone;
mod poll;
mod report;
mod softirq;
#[cfg(test)]
mod tests;
mod thread;
mod xdp;

pub use report::{mode_costs, NapiReport};

use super::units::{self, Units, Worker};
use super::xdp::Xdp;
use super::{Ctx, IoMode};
use crate::engine::app::{self, App, AppParams};
use crate::engine::ingress::Packet;
use crate::engine::moderation::Episode;
use crate::engine::nic::{Irq, Nic};
use crate::engine::queue::{Key, Timer};
use crate::engine::sched::{weight_of, Fair};
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};
use crate::scenario::{NetRxAction, ResolvedScenario, SoftirqRun, ThreadPolicy};
use crate::topology::Topology;
use softirq::{move_all, NetRx};

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
    /// Zero-copy AF_XDP l2fwd: sending that many frames of the socket's tx ring on a tx
    /// queue (`i40e_xmit_zc`: the descriptors, one doorbell).
    XskXmit(usize, u32),
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
            Work::XdpFlush | Work::XskXmit(..) => Activity::Io,
            Work::Wakeup | Work::App(app::Step::Wakeup) => Activity::Wakeup,
            Work::BusySpin | Work::App(app::Step::Spin) => Activity::Spin,
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
    /// Zero-copy AF_XDP: a refill came up short without `need_wakeup` (the poll reports
    /// its whole budget), the tx ring was sent from, the completions passed on so far.
    short: bool,
    xsk_sent: bool,
    tx_reported: u32,
}

impl Poll {
    fn new(vector: usize, nic: &Nic, kind: PollKind, weight: u32, phase: Phase) -> Self {
        let layout = nic.vectors()[vector].layout();
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
            short: false,
            xsk_sent: false,
            tx_reported: 0,
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

#[derive(Default)]
struct Core {
    worker: Worker<Work>,
    /// Vectors whose hard IRQ handler waits to run.
    irq_queue: VecDeque<usize>,
    poll_list: VecDeque<usize>,
    softirq_pending: bool,
    /// The softirq was raised where its exit runs it (a hard IRQ, a timer, a
    /// `local_bh_enable`): `invoke_softirq` / `do_softirq` look at it next.
    invoke: bool,
    /// The `__do_softirq` under way, between its `net_rx_action` passes.
    bh: Option<Bh>,
    /// ksoftirqd is runnable (woken by a `__do_softirq` that gave up with work left).
    ksoftirqd: bool,
    /// The fair class of the core: the application's thread ([`APP`]) and ksoftirqd
    /// ([`KSOFTIRQD`]); the task that last had the core.
    fair: Fair,
    last_task: Option<usize>,
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
    /// The next scheduler tick that would find the application running, once the tick has
    /// a softirq to run ([`Napi::tick`]).
    tick_next: Option<Instant>,
}

/// One `__do_softirq` (kernel/softirq.c): its `net_rx_action` passes so far, when it began
/// (it ends `MAX_SOFTIRQ_TIME` later, in whole jiffies: [`Napi::softirq_end`]), and
/// whether ksoftirqd runs it.
#[derive(Debug, Clone, Copy)]
struct Bh {
    passes: u32,
    start: Instant,
    ksoftirqd: bool,
}

/// `MAX_SOFTIRQ_RESTART`: passes of one `__do_softirq` before it hands over to ksoftirqd.
const MAX_SOFTIRQ_RESTART: u32 = 10;

/// The fair class's tasks on a NAPI core.
const APP: usize = 0;
const KSOFTIRQD: usize = 1;

/// A NAPI kernel thread's state (threaded NAPI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ThreadState {
    #[default]
    Asleep,
    /// Woken, running after the wake-up latency.
    Waking,
    /// On its core's run queue or running; `fresh`: its wake-up cost is still to pay.
    Runnable { fresh: bool },
    /// On its way to sleep since then (`host.thread.t_sleep`, its `wake` timer set for the
    /// end): awake, its core in no idle state.
    Dozing(Instant),
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
    /// A schedule came while it was being polled (`NAPI_STATE_MISSED`, an AF_XDP kick):
    /// its completion schedules it again.
    missed: bool,
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
    /// `napi_defer_hard_irqs` and `gro_flush_timeout`, and whether they defer the interrupt
    /// ([`crate::scenario::NapiSpec::defers`]).
    pub defer_hard_irqs: u32,
    pub gro_flush_timeout: Span,
    pub defers: bool,
    /// Threaded NAPI (`/sys/class/net/DEV/threaded`): a kernel thread per NAPI, with its
    /// wake-up latency and cost (`[host.thread]`).
    pub threaded: bool,
    pub wake_latency: Span,
    pub t_wakeup: Span,
    /// CPU time on the way to sleep, during which the NAPI's next schedule finds the thread
    /// awake (no wake-up).
    pub t_sleep: Span,
    /// Busy polling (`[socket]`): frames per busy poll, `SO_PREFER_BUSY_POLL`, and
    /// `irq_suspend_timeout`.
    pub busy_poll_budget: u32,
    pub prefer_busy_poll: bool,
    pub irq_suspend_timeout: Span,
    /// Where softirqs raised while ksoftirqd is runnable run (`host.softirq`).
    pub softirq_run: SoftirqRun,
    /// The fair class's slice (`cpu.sched.base_slice`).
    pub base_slice: Span,
    /// Interrupt and softirq time charges no task (`cpu.sched.irq_time_accounting`); else
    /// the task it interrupted.
    pub irq_time_accounting: bool,
    /// A used slice ends at once (`cpu.sched.hrtick`), else at the next tick.
    pub hrtick: bool,
    /// The NAPI threads run before an application on their core (`host.thread.policy =
    /// "fifo"`), rather than sharing it by weight.
    pub thread_fifo: bool,
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
    /// `MAX_SOFTIRQ_TIME`, 2 ms in whole jiffies (`msecs_to_jiffies` rounds up).
    softirq_time: Span,
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
    /// The NAPI threads share their cores with the application by the fair class (threaded,
    /// an application on the NAPIs' cores, `host.thread.policy = "other"`); each vector's
    /// entity on its core's run queue (after [`APP`] and [`KSOFTIRQD`]), and each core's
    /// vectors by entity.
    fair_threads: bool,
    thread_entity: Vec<usize>,
    entity_vector: Vec<Vec<usize>>,
    /// Zero-copy AF_XDP: the rings refill from the socket's fill ring, and the driver's
    /// time per frame it sends from the socket's tx ring (l2fwd).
    xsk_zc: bool,
    t_xmit_zc: Span,
    /// Zero copy with a driver that stops at a full rx ring: the ring's size.
    xsk_stop: Option<u64>,
    /// An AF_XDP l2fwd thread sends through the NAPI's tx queues.
    xsk_l2fwd: bool,
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
                defers: n.napi.defers(),
                threaded: n.napi.threaded,
                wake_latency: thread.wake_latency.into(),
                t_wakeup: thread.t_wakeup.into(),
                t_sleep: thread.t_sleep.into(),
                busy_poll_budget: sc.scenario.socket.busy_poll_budget,
                prefer_busy_poll: sc.scenario.socket.prefer_busy_poll,
                irq_suspend_timeout: n.napi.irq_suspend_timeout.into(),
                softirq_run: softirq.softirq,
                base_slice: sc.scenario.cpu.sched.base_slice.into(),
                irq_time_accounting: sc.scenario.cpu.sched.irq_time_accounting,
                hrtick: sc.scenario.cpu.sched.hrtick,
                thread_fifo: thread.policy == ThreadPolicy::Fifo,
            },
        )
    }

    pub fn with_params(topo: Topology, p: NapiParams) -> Self {
        let jiffy = Span::from_ps(1_000_000_000_000 / p.hz as u64);
        let budget_jiffies = p.budget_time.div_ceil(jiffy).max(1);
        let napi = vec![NapiInstance::default(); topo.vectors()];
        let fair = Fair::new(&[weight_of(0), weight_of(0)], p.base_slice, jiffy, p.hrtick);
        let cores = (0..topo.cores()).map(|_| Core { fair: fair.clone(), ..Core::default() }).collect();
        Napi {
            napi,
            cores,
            topo,
            p,
            jiffy,
            jiffy_at: Instant::ZERO,
            budget_jiffies,
            softirq_time: jiffy * Span::from_ps(2_000_000_000).div_ceil(jiffy).max(1),
            timer_polls: 0,
            xdp: None,
            flushes: 0,
            wakeups: 0,
            busy_polls: 0,
            app: None,
            app_workers: Vec::new(),
            lone: false,
            lone_pair: false,
            fair_threads: false,
            thread_entity: Vec::new(),
            entity_vector: Vec::new(),
            xsk_zc: false,
            t_xmit_zc: Span::ZERO,
            xsk_stop: None,
            xsk_l2fwd: false,
        }
    }

    /// The mode a scenario asks for: NAPI, with its XDP program and application if any.
    pub fn of(sc: &ResolvedScenario, topo: &Topology, xdp: bool) -> Self {
        let napi = if xdp { Self::with_xdp(sc, topo) } else { Self::new(sc, topo) };
        napi.with_app(AppParams::of(sc)).with_lone()
    }
}

impl IoMode for Napi {
    fn start(&mut self, ctx: &mut Ctx) {
        ctx.stats.tasks = true;
        for v in 0..self.napi.len() {
            ctx.nic.arm_vector(v, Instant::ZERO, ctx.queue);
        }
        self.xsk_start(ctx);
    }

    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx) {
        match key {
            Key::Step(c) => units::on_step(self, c as usize, gen, ctx),
            // napi_watchdog: schedule the NAPI and raise the softirq, no device interrupt.
            Key::Defer(v) if self.napi[v as usize].defer_timer.fired(gen, ctx.queue) => {
                let (v, now) = (v as usize, ctx.now);
                let c = ctx.nic.vectors()[v].layout().core;
                // A busy poller that has the NAPI meanwhile keeps it (NAPI_STATE_MISSED).
                if ctx.stats.in_window(now) && !self.napi[v].scheduled {
                    self.timer_polls += 1;
                    ctx.stats.deferred_poll(now);
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
                    if let Some(c) = self.cores.get_mut(core) {
                        c.fair.wake(APP, now);
                    }
                    if self.worker(core).is_idle() {
                        units::run(self, core, now, ctx);
                    }
                }
            }
            // A woken NAPI thread is scheduled on its core; one on its way to sleep that no
            // schedule caught sleeps.
            Key::Wake(v) if self.napi[v as usize].wake.fired(gen, ctx.queue) => {
                let (v, now) = (v as usize, ctx.now);
                let c = ctx.nic.vectors()[v].layout().core;
                if matches!(self.napi[v].thread, ThreadState::Dozing(_)) {
                    self.end_doze(c, v, now, true, ctx);
                    return;
                }
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
        for v in 0..self.napi.len() {
            if let ThreadState::Dozing(from) = self.napi[v].thread {
                ctx.stats.busy(ctx.nic.vectors()[v].layout().core, Activity::Wakeup, from, t);
            }
        }
    }

    fn on_irq(&mut self, irq: Irq, ctx: &mut Ctx) {
        let (c, now) = (irq.core, ctx.now);
        if self.cores[c].worker.is_idle() {
            self.cores[c].irq_queue.push_back(irq.vector);
            // The interrupt finds its NAPI's thread on its way to sleep: awake, it polls
            // after the handler, with no wake-up. (Another NAPI's thread on the core that
            // was on its way is switched out by the handler: asleep.)
            if self.p.threaded && !self.p.t_sleep.is_zero() {
                for v in 0..self.napi.len() {
                    if matches!(self.napi[v].thread, ThreadState::Dozing(_)) && ctx.nic.vectors()[v].layout().core == c
                    {
                        self.end_doze(c, v, now, v != irq.vector, ctx);
                    }
                }
            }
            units::run(self, c, now, ctx);
        } else {
            // Preempt: the running unit finishes t_irq later (and what an interrupt that
            // finds its core running costs on top: host.t_irq_busy); the handler's effect
            // (napi_schedule) is visible to net_rx_action at its next poll boundary.
            let t_irq = ctx.costs.t_irq + ctx.costs.t_irq_busy;
            ctx.stats.busy(c, Activity::Irq, now, now + t_irq);
            self.cores[c].worker.stretch(t_irq, Key::Step(c as u32), ctx);
            self.napi_schedule(c, irq.vector, now, ctx);
        }
    }

    fn preempt(&mut self, core: usize, t: Instant, d: Span, ctx: &mut Ctx) {
        units::preempt(self, core, t, d, ctx);
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
        self.io_report(nic)
    }
}
