//! Threaded NAPI on a software device such as veth (Linux `napi_threaded_poll`,
//! `veth_xmit`, `veth_poll`).
//!
//! ```text
//!   sender: frame into the device's ring (ptr_ring, `nic.rx_ring` entries; full: refused)
//!           NAPI not scheduled -> napi_schedule -> wake_up_process(thread)     (no hard IRQ)
//!   thread: runs wake_latency later (scheduler, idle exit; the CPU is not busy for it)
//!           t_wakeup of CPU time (switch in and out, thread loop)
//!           poll: t_poll, then consume the ring's frames one by one (veth_xdp_rcv) and
//!                 process them (t_proc each) in lists of `host.gro_normal_batch` (GRO's
//!                 gro_normal_list): after a full list the poll consumes on, and frames
//!                 that came meanwhile join it; a shorter list means the ring ran empty,
//!                 and the poll ends after it (at most `weight` frames a poll)
//!           napi_complete; frames came meanwhile -> poll again at once (veth_poll
//!           re-checks its ring); else t_sleep on its way to sleep (the ring armed: a
//!           frame meanwhile keeps it awake, it polls again with no wake-up), then sleep
//!           until the next frame schedules the NAPI
//!
//!   with [nic.napi] defer_hard_irqs and gro_flush_timeout (napi_complete_done): a poll
//!   that took fewer than `weight` frames completes at once; one that took frames reloads
//!   the deferral count; while it is above 0 it drops, the ring's notifications stay
//!   masked (senders do not schedule the NAPI) and the timer wakes the thread after
//!   gro_flush_timeout for another poll (an empty one costs t_poll); at 0 the notifications
//!   are unmasked and the ring re-checked
//! ```
//!
//! The ring's entries are freed as frames are consumed (no refill batching), and the ring
//! holds all `nic.rx_ring` entries. Frames go to their tx queue as each is processed; tx
//! completions are reclaimed at no cost (veth has no tx ring to clean). Each core runs one
//! thread serving its rings round robin, one poll each.

use std::collections::VecDeque;

use super::units::{self, Units, Worker};
use super::{Ctx, IoMode};
use crate::engine::ingress::Packet;
use crate::engine::nic::rx::RxRingKind;
use crate::engine::nic::Nic;
use crate::engine::queue::{Key, Timer};
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};
use crate::scenario::ResolvedScenario;
use crate::topology::Topology;

/// Timing of the NAPI thread.
#[derive(Debug, Clone, Copy)]
pub struct ThreadParams {
    pub weight: u32,
    /// `net.core.gro_normal_batch`: frames processed per list.
    pub gro_normal_batch: u32,
    pub wake_latency: Span,
    pub t_wakeup: Span,
    /// CPU time on the way to sleep, during which a frame keeps the thread awake.
    pub t_sleep: Span,
    /// `napi_defer_hard_irqs` and `gro_flush_timeout`, and whether they defer the interrupt
    /// ([`crate::scenario::NapiSpec::defers`]).
    pub defer_hard_irqs: u32,
    pub gro_flush_timeout: Span,
    pub defers: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    Wakeup,
    /// Arming the deferral timer in `napi_complete_done` (`host.t_timer`: the timer's
    /// arming and the expiry that follows), after the poll; then the thread is on its way
    /// to sleep.
    ArmTimer,
    PollStart,
    /// Processing the thread's `frame`, taken from ring `.0` (units carry no frame: see
    /// `units::run`).
    Packet(usize),
}

struct Thread {
    worker: Worker<Unit>,
    /// Woken and not yet running (between napi_schedule and the scheduler running it).
    waking: bool,
    wake: Timer,
    /// Ring polled now or last (index into the core's rings), and whether a poll is under
    /// way.
    cur: usize,
    in_poll: bool,
    /// Frames the current poll took from its ring, not yet processed, and the one being
    /// processed.
    batch: VecDeque<(Packet, usize)>,
    frame: Packet,
    /// Deferral: frames the current poll took, empty polls still to be driven by the
    /// timer, the timer, and whether its wake-up owes a poll even of an empty ring.
    took: usize,
    /// Whether the poll consumes more after its current list (the last list was full).
    more: bool,
    defer_left: u32,
    defer: Timer,
    timer_poll: bool,
    /// The deferral timer was just armed (its [`Unit::ArmTimer`] under way).
    armed: bool,
    /// On its way to sleep since then (its `wake` timer set for the end of t_sleep).
    doze_from: Option<Instant>,
}

pub struct ThreadedNapi {
    threads: Vec<Thread>,
    topo: Topology,
    p: ThreadParams,
    wakeups: u64,
    /// Polls the deferral timer started in the window.
    timer_polls: u64,
}

impl ThreadedNapi {
    pub fn new(sc: &ResolvedScenario, topo: &Topology) -> Self {
        let io = &sc.scenario.host.io;
        let gro_normal_batch = match io {
            crate::scenario::IoSpec::ThreadedNapi(t) => t.gro.gro_normal_batch,
            _ => crate::scenario::GroBatch::default().gro_normal_batch,
        };
        let (poll, thread) = (io.poll(), io.thread());
        let napi = &sc.scenario.nic.napi;
        Self::with_params(
            *topo,
            ThreadParams {
                weight: poll.weight,
                gro_normal_batch,
                wake_latency: thread.wake_latency.into(),
                t_wakeup: thread.t_wakeup.into(),
                t_sleep: thread.t_sleep.into(),
                defer_hard_irqs: napi.defer_hard_irqs,
                gro_flush_timeout: napi.gro_flush_timeout.into(),
                defers: napi.defers(),
            },
        )
    }

    pub fn with_params(topo: Topology, p: ThreadParams) -> Self {
        let threads = (0..topo.cores())
            .map(|_| Thread {
                worker: Worker::default(),
                waking: false,
                wake: Timer::default(),
                cur: topo.queues_per_core() - 1,
                in_poll: false,
                batch: VecDeque::new(),
                frame: Packet::default(),
                took: 0,
                more: false,
                defer_left: 0,
                defer: Timer::default(),
                timer_poll: false,
                armed: false,
                doze_from: None,
            })
            .collect();
        ThreadedNapi { threads, topo, p, wakeups: 0, timer_polls: 0 }
    }

    /// Thread `c` ends its way to sleep at `t` (CPU time from when it began), asleep or,
    /// with `sleeps` false, awake again for a frame.
    fn end_doze(&mut self, c: usize, t: Instant, sleeps: bool, ctx: &mut Ctx) {
        let th = &mut self.threads[c];
        let Some(from) = th.doze_from.take() else { return };
        th.worker.dozing = false;
        ctx.stats.busy(c, Activity::Wakeup, from, t);
        if sleeps {
            units::sleep(&th.worker, c, t, ctx);
        } else {
            th.wake.cancel();
        }
    }

    /// Thread `c` starts running at `t`: its wake-up cost first.
    fn wake(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        self.threads[c].waking = false;
        if ctx.stats.in_window(t) {
            self.wakeups += 1;
        }
        if units::begin(self, c, Unit::Wakeup, t, self.p.t_wakeup, ctx) {
            units::run(self, c, t + self.p.t_wakeup, ctx);
        }
    }
}

impl Units for ThreadedNapi {
    type Unit = Unit;

    #[inline]
    fn worker(&mut self, core: usize) -> &mut Worker<Unit> {
        &mut self.threads[core].worker
    }

    #[inline]
    fn account(&mut self, c: usize, unit: &Unit, start: Instant, end: Instant, ctx: &mut Ctx) {
        let a = match unit {
            Unit::Wakeup => Activity::Wakeup,
            Unit::PollStart | Unit::ArmTimer => Activity::Poll,
            Unit::Packet(..) => Activity::RxClean,
        };
        ctx.stats.busy(c, a, start, end);
    }

    #[inline]
    fn finish(&mut self, c: usize, unit: Unit, _start: Instant, t: Instant, ctx: &mut Ctx) {
        match unit {
            Unit::Wakeup | Unit::PollStart => {}
            Unit::ArmTimer => self.threads[c].armed = true,
            Unit::Packet(_) => {
                let tx = self.topo.tx_of_core(c);
                ctx.nic.xmit(tx, &self.threads[c].frame, t, true, ctx.queue, ctx.stats);
            }
        }
    }

    /// The thread's next unit at `t`, or None when it goes to sleep (its rings armed).
    #[inline]
    fn next(&mut self, c: usize, t: &mut Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        let t = *t;
        ctx.nic.advance(self.topo.rings_of_core(c), t, ctx.stats);
        let weight = self.p.weight as usize;
        let rings = self.topo.rings_of_core(c);
        let n = rings.len();
        let th = &mut self.threads[c];
        if std::mem::take(&mut th.armed) && !th.timer_poll {
            // The timer is armed: on its way to sleep; the ring stays masked, only the
            // timer wakes it. (One that expired meanwhile wants its poll now.)
            doze(th, c, t, self.p.t_sleep, ctx);
            return None;
        }
        loop {
            if th.in_poll {
                if let Some((p, r)) = th.batch.pop_front() {
                    th.frame = p;
                    let d = ctx.costs.t_proc(&th.frame);
                    return Some((Unit::Packet(r), d));
                }
                // veth_xdp_rcv consumes the ring frame by frame until it is empty or the
                // weight is used; GRO hands the frames to the stack in lists of
                // gro_normal_batch (the rest at napi_complete). After a full list the poll
                // consumes on (frames that came meanwhile join it); after a shorter one the
                // ring was empty and the poll ends.
                let r = rings.start + th.cur;
                if th.more && th.took < weight {
                    let g = (self.p.gro_normal_batch as usize).min(weight - th.took);
                    let mut n = 0;
                    let mut p = Packet::default();
                    while n < g && ctx.nic.take(r, t, ctx.stats, &mut p) > 0 {
                        th.batch.push_back((p, r));
                        n += 1;
                    }
                    th.took += n;
                    th.more = n == g;
                    if n > 0 {
                        // The ptr_ring entries are free as soon as the frames are consumed.
                        ctx.nic.refill(r, t, 1, ctx.stats);
                        continue;
                    }
                }
                // The poll ends: weight used (repoll), or napi_complete.
                th.in_poll = false;
                ctx.stats.poll(t, Some(th.took as u32));
                let deferring = self.p.defers;
                if deferring && th.took < weight {
                    // napi_complete_done(took): work reloads the count; while it lasts the
                    // notifications stay masked and the timer polls again.
                    if th.took > 0 {
                        th.defer_left = self.p.defer_hard_irqs;
                    }
                    if th.defer_left > 0 {
                        th.defer_left -= 1;
                        th.defer.set(ctx.queue, t + self.p.gro_flush_timeout, Key::Defer(c as u32));
                        if !ctx.costs.t_timer.is_zero() {
                            return Some((Unit::ArmTimer, ctx.costs.t_timer));
                        }
                        // On its way to sleep; the ring stays masked: only the timer wakes it.
                        doze(th, c, t, self.p.t_sleep, ctx);
                        return None;
                    }
                }
            }
            if std::mem::take(&mut th.timer_poll) && (0..n).all(|j| ctx.nic.rx(rings.start + j).is_empty()) {
                // The timer's poll finds the ring empty: veth_poll returns 0.
                th.in_poll = true;
                th.took = 0;
                th.more = false;
                if ctx.costs.t_poll > Span::ZERO {
                    return Some((Unit::PollStart, ctx.costs.t_poll));
                }
                continue;
            }
            // Next poll: the next ring after the last one polled that has frames. It takes
            // the frames one by one as it processes them (above), up to the weight; a poll
            // that used its weight is followed by another at once (veth_poll also re-checks
            // the ring after napi_complete and polls again).
            let Some(j) = (1..=n).map(|i| (th.cur + i) % n).find(|&j| !ctx.nic.rx(rings.start + j).is_empty()) else {
                super::arm_rings(rings, ctx);
                // On its way to sleep: awake until t_sleep is over or a frame schedules the
                // NAPI.
                doze(th, c, t, self.p.t_sleep, ctx);
                return None;
            };
            th.cur = j;
            th.in_poll = true;
            th.took = 0;
            th.more = true;
            if ctx.costs.t_poll > Span::ZERO {
                return Some((Unit::PollStart, ctx.costs.t_poll));
            }
        }
    }
}

/// Thread `th` (of core `c`) runs out of work at `t` and is on its way to sleep for
/// `t_sleep` (none: it sleeps at once): awake, the core in no idle state, its `wake` timer
/// set for the end.
fn doze(th: &mut Thread, c: usize, t: Instant, t_sleep: Span, ctx: &mut Ctx) {
    if t_sleep.is_zero() {
        return;
    }
    th.doze_from = Some(t);
    th.worker.dozing = true;
    th.wake.set(ctx.queue, t + t_sleep, Key::Wake(c as u32));
}

impl IoMode for ThreadedNapi {
    fn start(&mut self, ctx: &mut Ctx) {
        super::arm_rings(0..self.topo.rings(), ctx);
    }

    fn end(&mut self, t: Instant, ctx: &mut Ctx) {
        for c in 0..self.threads.len() {
            units::end(self, c, t, ctx);
            if let Some(from) = self.threads[c].doze_from {
                ctx.stats.busy(c, Activity::Wakeup, from, t);
            }
        }
    }

    fn rx_ring_kind(&self) -> RxRingKind {
        // A ptr_ring holds all its entries (a NIC ring keeps one free).
        RxRingKind::Software
    }

    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx) {
        match key {
            Key::Step(c) => units::on_step(self, c as usize, gen, ctx),
            Key::Wake(c) => {
                let c = c as usize;
                if !self.threads[c].wake.fired(gen, ctx.queue) {
                    return;
                }
                if self.threads[c].doze_from.is_some() {
                    // No frame came on its way to sleep: it sleeps.
                    let now = ctx.now;
                    self.end_doze(c, now, true, ctx);
                } else if self.threads[c].waking {
                    let now = ctx.now;
                    self.wake(c, now, ctx);
                }
            }
            // napi_watchdog: the deferral timer schedules the NAPI, which wakes the thread.
            Key::Defer(c) if self.threads[c as usize].defer.fired(gen, ctx.queue) => {
                let (c, now) = (c as usize, ctx.now);
                if ctx.stats.in_window(now) {
                    self.timer_polls += 1;
                }
                if self.threads[c].doze_from.is_some() {
                    // The timer finds the thread still on its way to sleep: it polls.
                    self.threads[c].timer_poll = true;
                    self.end_doze(c, now, false, ctx);
                    units::run(self, c, now, ctx);
                    return;
                }
                let th = &mut self.threads[c];
                th.timer_poll = true;
                if th.worker.is_idle() && !th.waking {
                    th.waking = true;
                    if self.p.wake_latency.is_zero() {
                        self.wake(c, now, ctx);
                    } else {
                        th.wake.set(ctx.queue, now + self.p.wake_latency, Key::Wake(c as u32));
                    }
                }
            }
            _ => {}
        }
    }

    fn preempt(&mut self, core: usize, t: Instant, d: Span, ctx: &mut Ctx) {
        units::preempt(self, core, t, d, ctx);
    }

    fn on_rx_wake(&mut self, ring: usize, t: Instant, ctx: &mut Ctx) {
        let c = self.topo.core_of_ring(ring);
        if self.threads[c].doze_from.is_some() {
            // The frame finds the thread on its way to sleep: it polls again, no wake-up.
            self.end_doze(c, t, false, ctx);
            super::disarm_rings(self.topo.rings_of_core(c), ctx);
            units::run(self, c, t, ctx);
            return;
        }
        let th = &self.threads[c];
        if !th.worker.is_idle() || th.waking {
            return;
        }
        // napi_schedule masks further notifications until the thread completes.
        super::disarm_rings(self.topo.rings_of_core(c), ctx);
        let th = &mut self.threads[c];
        th.waking = true;
        if self.p.wake_latency.is_zero() {
            self.wake(c, t, ctx);
        } else {
            th.wake.set(ctx.queue, t + self.p.wake_latency, Key::Wake(c as u32));
        }
    }

    fn independent_cores(&self) -> bool {
        true
    }

    /// A core's thread has its wake-up and deferral timers.
    fn timer_cores(&self) -> (Vec<u32>, Vec<u32>) {
        let by_core: Vec<u32> = (0..self.topo.cores() as u32).collect();
        (by_core.clone(), by_core)
    }

    fn report(&self, _nic: &Nic) -> super::IoReport {
        super::IoReport::Threaded(ThreadedReport {
            deferral_timer_polls: self.timer_polls,
            t_wakeup_ns: self.p.t_wakeup.as_ns_f64(),
            wake_latency_ns: self.p.wake_latency.as_ns_f64(),
            wakeups: self.wakeups,
            weight: self.p.weight,
        })
    }
}

/// A threaded NAPI's figures in a run's result (`io`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ThreadedReport {
    /// Polls the deferral timer drove.
    pub deferral_timer_polls: u64,
    /// The thread's CPU time per wake-up.
    pub t_wakeup_ns: f64,
    /// From the sender's schedule to the thread running.
    pub wake_latency_ns: f64,
    /// Times the thread was woken.
    pub wakeups: u64,
    /// Frames per poll at most.
    pub weight: u32,
}

/// Per poll `t_poll` (a full weight of frames when the ring never runs dry), per wake-up
/// `t_wakeup` (none then: the thread never sleeps).
pub fn mode_costs(sc: &ResolvedScenario, costs: &crate::engine::costs::Costs) -> crate::price::ModeCosts {
    let per_poll = sc.scenario.host.io.poll().weight.min(sc.scenario.nic.rx_ring).max(1) as f64;
    // With deferral, a frame alone may be followed by napi_defer_hard_irqs timer polls.
    let napi = &sc.scenario.nic.napi;
    let deferred = if napi.defers() { napi.defer_hard_irqs as f64 } else { 0.0 };
    let mut terms = vec![
        crate::price::IoCost::per_event("poll", costs.t_poll.ps() as f64, per_poll, 1.0 + deferred),
        crate::price::IoCost::per_event(
            "wake-up",
            // The way to sleep before each wake-up, and the wake-up.
            (sc.scenario.host.io.thread().t_wakeup.ps + sc.scenario.host.io.thread().t_sleep.ps) as f64,
            f64::INFINITY,
            1.0 + deferred,
        ),
    ];
    terms.extend(crate::price::IoCost::deferral_timer(costs.t_timer.ps() as f64, deferred));
    crate::price::ModeCosts {
        terms,
        events: crate::price::Events::Recheck {
            t_start_ps: sc.scenario.host.io.thread().t_wakeup.ps as f64,
            t_round_ps: costs.t_poll.ps() as f64,
            latency_ps: sc.scenario.host.io.thread().wake_latency.ps as f64,
            weight: per_poll,
            defer: napi.defers().then_some((napi.defer_hard_irqs, napi.gro_flush_timeout.ps as f64)),
            t_timer_ps: costs.t_timer.ps() as f64,
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    /// wake_latency 2 us, t_wakeup 1 us, t_proc 1 us, weight 2. The frame of 10 us wakes the
    /// thread at 12 us; after its wake-up (to 13 us) the ring holds 3 frames: a poll of 2,
    /// then a poll of 1; the thread sleeps until the frame of 30 us wakes it at 32 us.
    #[test]
    fn the_thread_wakes_late_polls_up_to_its_weight_and_sleeps_when_the_ring_is_empty() {
        let toml = node_toml(
            "io = \"threaded-napi\"\nt_proc = \"1us\"\nweight = 2",
            "[host.thread]\nwake_latency = \"2us\"\nt_wakeup = \"1us\"",
        );
        let (r, dep) = trace(&toml, &[(10_000, 64), (10_500, 64), (11_000, 64), (30_000, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [14_000.0, 15_000.0, 16_000.0, 34_000.0]);
        assert_eq!(r.io.json()["wakeups"], 2);
        assert_eq!(r.packets_per_poll.histogram[..3], [0, 2, 1], "polls of 2, 1 and 1 frames");
        assert!((r.cpu_by_activity["wakeup"] - 2e-6 / 1e-3).abs() < 1e-12);
    }

    /// A poll consumes frames and processes them in lists of gro_normal_batch: frames at 10
    /// and 13.7 us, the thread runs at 12 (wake-up to 13), polls (t_poll 0.5 us to 13.5).
    /// With gro_normal_batch 1 every list is full: the first frame (13.5-14.5), then the
    /// second, which came meanwhile, joins the poll (14.5-15.5): one poll of 2. With the
    /// kernel's 8 the first list is short (the ring ran empty): the poll ends at 14.5 and
    /// the re-check polls again (14.5-15.0 t_poll, the frame to 16.0), no wake-up between.
    /// A frame of 15.7 (batch 1) or 16.5 us (batch 8) finds the thread asleep.
    /// On its way to sleep (t_sleep 5 us, t_wakeup 1 us, t_proc 1 us; frames at 10, 13
    /// and 30 us): the first frame wakes the thread (10-11) and leaves at 12; the thread is
    /// on its way to sleep from 12, and the frame at 13 finds it awake (no wake-up): it
    /// leaves at 14; no frame comes in 14-19, it sleeps; the frame at 30 wakes it again.
    /// Its way to sleep is CPU time: 1 + 5 + 5 us, besides 2 us of wake-ups.
    #[test]
    fn a_frame_on_the_threads_way_to_sleep_keeps_it_awake() {
        let host = "io = \"threaded-napi\"\nt_proc = \"1us\"";
        let thread = "[host.thread]\nt_wakeup = \"1us\"\nt_sleep = \"5us\"";
        let frames = [(10_000, 64), (13_000, 64), (30_000, 64)];
        let (r, dep) = trace(&node_toml(host, thread), &frames);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [12_000.0, 14_000.0, 32_000.0]);
        assert_eq!(r.io.json()["wakeups"], 2);
        assert!((r.cpu_by_activity["wakeup"] - 13e-6 / 1e-3).abs() < 1e-12, "{}", r.cpu_by_activity["wakeup"]);
        // Without it, the second frame wakes the thread.
        let (r0, dep0) = trace(&node_toml(host, "[host.thread]\nt_wakeup = \"1us\""), &frames);
        assert_eq!(dep0.iter().map(|d| d.0).collect::<Vec<_>>(), [12_000.0, 15_000.0, 32_000.0]);
        assert_eq!(r0.io.json()["wakeups"], 3);
    }

    #[test]
    fn a_poll_consumes_on_after_a_full_gro_list_and_ends_after_a_short_one() {
        let host = "io = \"threaded-napi\"\nt_proc = \"1us\"\nt_poll = \"500ns\"";
        let thread = "[host.thread]\nwake_latency = \"2us\"\nt_wakeup = \"1us\"";
        let (r, dep) = trace(
            &node_toml(&format!("{host}\ngro_normal_batch = 1"), thread),
            &[(10_000, 64), (13_700, 64), (15_700, 64)],
        );
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [14_500.0, 15_500.0, 20_200.0]);
        assert_eq!(r.io.json()["wakeups"], 2);
        assert_eq!(r.packets_per_poll.histogram[..3], [0, 1, 1], "a poll of 2 frames, then one of 1");
        let (r, dep) = trace(&node_toml(host, thread), &[(10_000, 64), (13_700, 64), (16_500, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [14_500.0, 16_000.0, 21_000.0]);
        assert_eq!(r.io.json()["wakeups"], 2);
        assert_eq!(r.packets_per_poll.histogram[..3], [0, 3, 0], "three polls of 1 frame");
    }

    /// veth with napi_defer_hard_irqs 1 and gro_flush_timeout 5 us (t_poll 0.5 us). Frames
    /// at 10 and 12 us: the thread runs at 12 (wake-up to 13), polls both (13-15.5); the
    /// poll took fewer than the weight: the count is reloaded (1) and drops to 0, the
    /// notifications stay masked and the timer (20.5) wakes the thread at 22.5 for an empty
    /// poll (23.5-24), which unmasks. Without deferral: one wake-up and one poll.
    #[test]
    fn deferral_keeps_a_veth_napi_masked_and_its_timer_wakes_the_thread() {
        let host = "io = \"threaded-napi\"\nt_proc = \"1us\"\nt_poll = \"500ns\"\nt_timer = \"0ns\"";
        let thread = "[host.thread]\nwake_latency = \"2us\"\nt_wakeup = \"1us\"";
        let toml = node_toml(host, &format!("{thread}\n[nic.napi]\ndefer_hard_irqs = 1\ngro_flush_timeout = \"5us\""));
        let (r, dep) = trace(&toml, &[(10_000, 64), (12_000, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [14_500.0, 15_500.0]);
        assert_eq!((r.io.json()["wakeups"].as_u64(), r.io.json()["deferral_timer_polls"].as_u64()), (Some(2), Some(1)));
        assert_eq!(r.packets_per_poll.histogram[..3], [1, 0, 1], "a poll of 2, an empty one");
        assert!((r.cpu_by_activity["poll"] - 1e-6 / 1e-3).abs() < 1e-12);
        let (r, _) = trace(&node_toml(host, thread), &[(10_000, 64), (12_000, 64)]);
        assert_eq!((r.io.json()["wakeups"].as_u64(), r.polls_per_packet), (Some(1), 0.5));
    }

    /// The trace above with the deferral timer costing 1 us (`host.t_timer`), charged when
    /// the poll that took both frames arms it (15.5-16.5, as poll time): 2 us of poll time
    /// in all. On its way to sleep for 10 us (`t_sleep`) from 16.5, the thread is found by
    /// the timer at 20.5 and polls at once, with no second wake-up. With a timer of 0.5 us
    /// it expires while it is armed (at 16): the thread polls after the arming, and is not
    /// left asleep with its ring masked.
    #[test]
    fn the_deferral_timer_costs_t_timer_when_the_thread_arms_it() {
        let host = "io = \"threaded-napi\"\nt_proc = \"1us\"\nt_poll = \"500ns\"\nt_timer = \"1us\"";
        let thread = "[host.thread]\nwake_latency = \"2us\"\nt_wakeup = \"1us\"";
        let defer = |timeout: &str| format!("[nic.napi]\ndefer_hard_irqs = 1\ngro_flush_timeout = \"{timeout}\"");
        let frames = [(10_000, 64), (12_000, 64)];
        let (r, dep) = trace(&node_toml(host, &format!("{thread}\n{}", defer("5us"))), &frames);
        assert_eq!(dep.iter().map(|d| d.0).collect::<Vec<f64>>(), [14_500.0, 15_500.0]);
        assert_eq!((r.io.json()["wakeups"].as_u64(), r.io.json()["deferral_timer_polls"].as_u64()), (Some(2), Some(1)));
        assert!((r.cpu_by_activity["poll"] - 2e-6 / 1e-3).abs() < 1e-12, "{}", r.cpu_by_activity["poll"]);
        assert!((r.cpu_by_activity["wakeup"] - 2e-6 / 1e-3).abs() < 1e-12);
        let dozing = format!("{thread}\nt_sleep = \"10us\"\n{}", defer("5us"));
        let (r, _) = trace(&node_toml(host, &dozing), &frames);
        assert_eq!((r.io.json()["wakeups"].as_u64(), r.io.json()["deferral_timer_polls"].as_u64()), (Some(1), Some(1)));
        assert!((r.cpu_by_activity["poll"] - 2e-6 / 1e-3).abs() < 1e-12, "{}", r.cpu_by_activity["poll"]);
        let (r, _) = trace(&node_toml(host, &format!("{thread}\n{}", defer("500ns"))), &frames);
        assert_eq!((r.io.json()["wakeups"].as_u64(), r.io.json()["deferral_timer_polls"].as_u64()), (Some(1), Some(1)));
        assert_eq!(r.packets_per_poll.histogram[..3], [1, 0, 1], "a poll of 2, then the timer's empty one");
        // Without deferral no timer is armed.
        let (r, _) = trace(&node_toml(host, thread), &frames);
        assert!((r.cpu_by_activity["poll"] - 0.5e-6 / 1e-3).abs() < 1e-12);
    }
}
