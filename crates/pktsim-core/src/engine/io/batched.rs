//! Batched packet I/O: DPDK-style busy polling and netmap / libpcap-style system calls
//! (004; 002 II-B).
//!
//! ```text
//!   call: take up to B frames from a ring (the core's strategy picks which)
//!         cost t_call + n t_packet + bytes t_byte + sum of t_proc    --> n frames to tx
//!   nothing to take:
//!     busy-poll        keep calling: each empty call costs t_empty (the core is always
//!                      busy; useful work is reported apart from spinning)
//!     batched-syscall  sleep; the next write-back interrupts (t_irq) and the scheduler
//!                      wakes the thread (t_wakeup) before the next call
//! ```
//!
//! A frame keeps its rx descriptor until its call ends. The core's strategy picks a ring
//! before each call, and a call is never revoked: time-sliced strategies (`rr`, contended
//! `priowfq`) end a turn at the first call boundary at or after its slice's end. Spinning is not simulated call by
//! call: when the rings are empty the core notes when it started, and on the next
//! write-back it resumes at the first empty-call boundary at or after it, charging the
//! empty calls in between. When the next frame for its rings is known to come before
//! anything else can happen to the core, it spins to it without an event.

use super::units::{self, Units, Worker};
use super::{Ctx, IoMode};
use crate::engine::ingress::Packet;
use crate::engine::queue::Key;
use crate::engine::stats::Activity;
use crate::engine::strategy::{RingView, Strategy, Turn};
use crate::engine::time::{Instant, Period, Span};
use crate::scenario::{BatchCalls, IoSpec, ResolvedScenario};
use crate::topology::Topology;

/// What a core does when its rings are empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Spinning: empty calls of `t_empty` each.
    Spin {
        t_empty: Period,
    },
    Sleep {
        t_irq: Span,
        t_wakeup: Span,
    },
}

/// Per-call costs.
#[derive(Debug, Clone, Copy)]
pub struct CallCosts {
    pub batch: usize,
    pub t_call: Span,
    pub t_packet: Span,
    pub t_byte_fs: u64,
}

pub enum Unit {
    /// A call and the processing of the frames it moved (the core's `moved`).
    Call { io: Span },
    /// Spinning until a write-back is seen at an empty-call boundary.
    Spin,
    /// Interrupt and scheduler wake-up of a sleeping thread.
    Wake,
}

struct Core {
    strategy: Box<dyn Strategy>,
    worker: Worker<Unit>,
    /// The frames of the running call (kept from call to call: no allocation per call).
    moved: Vec<Packet>,
    /// When the rings were last found empty (spinning or asleep since then); a spinning
    /// core's empty calls end every `t_empty` from here. Interference while it spins moves
    /// this on by its length: the empty call under way is stretched.
    idle_since: Instant,
    /// The end of the last interference that took a spinning core: its spin since then
    /// is still to be charged, the spin before it was charged when it came. Behind
    /// `idle_since` when no interference came in this spell.
    spin_from: Instant,
    views: Vec<RingView>,
    /// One ring, which the strategy serves in order: no views or strategy to ask.
    lone: bool,
}

pub struct Batched {
    cores: Vec<Core>,
    topo: Topology,
    wait: Wait,
    costs: CallCosts,
}

impl Batched {
    pub fn new(sc: &ResolvedScenario, topo: &Topology) -> Self {
        let (b, wait) = calls_and_wait(&sc.scenario.host.io);
        let costs = CallCosts {
            batch: b.size as usize,
            t_call: b.t_call.into(),
            t_packet: b.t_packet.into(),
            t_byte_fs: b.t_byte.map_or(0, |x| x.fs_per_byte),
        };
        Self::with_parts(*topo, super::core_strategies(sc, topo), wait, costs)
    }

    pub fn with_parts(topo: Topology, strategies: Vec<Box<dyn Strategy>>, wait: Wait, costs: CallCosts) -> Self {
        let cores = strategies
            .into_iter()
            .map(|strategy| Core {
                lone: topo.queues_per_core() == 1 && strategy.serves_a_lone_ring_in_order(),
                strategy,
                worker: Worker::default(),
                moved: Vec::new(),
                idle_since: Instant::ZERO,
                spin_from: Instant::ZERO,
                views: vec![RingView::default(); topo.queues_per_core()],
            })
            .collect();
        Batched { cores, topo, wait, costs }
    }
}

impl Units for Batched {
    type Unit = Unit;

    #[inline]
    fn worker(&mut self, core: usize) -> &mut Worker<Unit> {
        &mut self.cores[core].worker
    }

    #[inline]
    fn account(&mut self, c: usize, unit: &Unit, start: Instant, end: Instant, ctx: &mut Ctx) {
        match unit {
            Unit::Call { io, .. } => {
                ctx.stats.busy(c, Activity::Io, start, (start + *io).min(end));
                ctx.stats.busy(c, Activity::RxClean, start + *io, end);
            }
            Unit::Spin => ctx.stats.busy(c, Activity::Spin, start, end),
            Unit::Wake => ctx.stats.busy(c, Activity::Irq, start, end),
        }
    }

    #[inline]
    fn finish(&mut self, c: usize, unit: Unit, _start: Instant, t: Instant, ctx: &mut Ctx) {
        match unit {
            Unit::Call { .. } => self.end_call(c, self.topo.rings_of_core(c), t, ctx),
            Unit::Spin | Unit::Wake => {}
        }
    }

    /// With one ring served in order, a free core and a tx queue no one else waits on
    /// ([`crate::engine::nic::Nic::runs_alone`]: nothing a call does can raise an event, so
    /// the horizon stays), the core polls in a run (`Batched::poll_lone`).
    #[inline]
    fn next(&mut self, c: usize, t: &mut Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        let tx = self.topo.tx_of_core(c);
        let core = &self.cores[c];
        let horizon = ctx.horizon(c);
        if core.lone && core.worker.is_free_at(*t) && ctx.nic.runs_alone(tx, ctx.costs.tx_lock) && !ctx.cancelled() {
            let r = self.topo.rings_of_core(c).start;
            return self.poll_lone(c, r, t, horizon, ctx);
        }
        self.next_unit(c, *t, horizon, ctx)
    }
}

impl Batched {
    /// Core `c`'s next unit at `t`: a call of the frames its strategy picks, a spin to the
    /// next write-back (where it comes by `horizon`), or None (armed to be woken).
    #[inline]
    fn next_unit(&mut self, c: usize, t: Instant, horizon: Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        ctx.nic.advance(self.topo.rings_of_core(c), t, ctx.stats);
        let rings = self.topo.rings_of_core(c);
        let core = &mut self.cores[c];
        // A call is not revoked: a time-sliced turn's budget is not used, the strategy ends
        // the turn at the first call boundary after its slice.
        let turn = if core.lone {
            // What the strategy would pick: the ring, if it holds a frame.
            (!ctx.nic.rx(rings.start).is_empty()).then(|| Turn::whole(0))
        } else {
            super::ring_views(rings.clone(), &mut core.views, ctx);
            core.strategy.pick(&core.views, t)
        };
        let Some(turn) = turn else {
            core.idle_since = t;
            // Spinning: if the rings' next frame comes before the core's horizon, spin to
            // the first empty-call boundary at or after it (as a wake-up by that frame
            // would), without the event queue.
            if let Wait::Spin { t_empty } = self.wait {
                if let Some(at) = ctx.nic.next_arrival(rings.clone(), horizon, ctx.stats) {
                    let calls = t_empty.count_ceil(at.max(t) - t).max(1);
                    if t + t_empty * calls <= horizon {
                        ctx.stats.empty_polls_add(t, calls);
                        return Some((Unit::Spin, t_empty * calls));
                    }
                }
            }
            super::arm_rings(rings, ctx);
            return None;
        };
        let i = turn.ring;
        let r = rings.start + i;
        let n = self.costs.batch.min(ctx.nic.rx(r).len());
        let (io, work) = self.call(c, r, i, n, t, ctx);
        Some((Unit::Call { io }, io + work))
    }

    /// Core `c` takes `n` frames of ring `r` (its `i`-th) at `t` into its `moved`, after
    /// those already there (a lone poller's first): the call's I/O time and its frames'
    /// processing time.
    ///
    /// Each frame is taken straight into its slot of `moved` (a frame returned by value
    /// and then pushed is copied through the stack in parts, which stalls the load that
    /// reads it back whole).
    #[inline(always)]
    fn call(&mut self, c: usize, r: usize, i: usize, n: usize, t: Instant, ctx: &mut Ctx) -> (Span, Span) {
        let core = &mut self.cores[c];
        let (mut io, mut work) = (self.costs.t_call, Span::ZERO);
        let first = core.moved.len();
        debug_assert!(first <= 1, "the last call ended");
        core.moved.resize(n, Packet::default());
        let mut taken = 0;
        for (k, p) in core.moved.iter_mut().enumerate() {
            if k >= first && ctx.nic.take(r, t, ctx.stats, p) == 0 {
                break;
            }
            taken += 1;
            if !core.lone {
                core.strategy.served(i, p.size);
            }
            io += Self::frame_io(&self.costs, p);
            work += ctx.costs.t_proc(p);
        }
        core.moved.truncate(taken);
        (io, work)
    }

    /// A call's I/O time for frame `p` (`t_packet` and its bytes' `t_byte`).
    #[inline(always)]
    fn frame_io(costs: &CallCosts, p: &Packet) -> Span {
        if costs.t_byte_fs > 0 {
            return costs.t_packet + Span::from_ps(costs.t_byte_fs * p.size as u64 / 1000);
        }
        costs.t_packet
    }

    /// Core `c`'s call on `rings` ends at `t`: its descriptors go back, completions are
    /// reclaimed and its frames sent.
    #[inline]
    fn end_call(&mut self, c: usize, rings: std::ops::Range<usize>, t: Instant, ctx: &mut Ctx) {
        if rings.len() == 1 {
            return self.end_call_one(c, rings.start, t, ctx);
        }
        ctx.stats.poll(t, Some(self.cores[c].moved.len() as u32));
        // Frames due by the call's end see the ring without its descriptors.
        ctx.nic.advance(rings.clone(), t, ctx.stats);
        for r in rings {
            ctx.nic.refill(r, t, 1, ctx.stats);
        }
        Self::send_all(self.topo.tx_of_core(c), &self.cores[c].moved, t, ctx);
        self.cores[c].moved.clear();
    }

    /// [`Batched::end_call`] of a core with one ring, `r`.
    #[inline(always)]
    fn end_call_one(&mut self, c: usize, r: usize, t: Instant, ctx: &mut Ctx) {
        Self::end_call_of(r, self.topo.tx_of_core(c), &self.cores[c].moved, t, ctx);
        self.cores[c].moved.clear();
    }

    /// A call on one ring `r` that took `frames` ends at `t`: its descriptors go back,
    /// completions of tx queue `tx` are reclaimed and its frames sent.
    #[inline(always)]
    fn end_call_of(r: usize, tx: usize, frames: &[Packet], t: Instant, ctx: &mut Ctx) {
        ctx.stats.poll(t, Some(frames.len() as u32));
        // The descriptors go back just after the call's end: frames due by then see the
        // ring without them.
        ctx.nic.refill(r, t + Span::from_ps(1), 1, ctx.stats);
        Self::send_all(tx, frames, t, ctx);
    }

    /// Completions of tx queue `tx` are reclaimed at `t` and a call's `frames` sent (a call
    /// moves a frame at least).
    #[inline(always)]
    fn send_all(tx: usize, frames: &[Packet], t: Instant, ctx: &mut Ctx) {
        debug_assert!(!frames.is_empty(), "a call moves a frame");
        let Some((first, rest)) = frames.split_first() else { return };
        ctx.nic.xmit(tx, first, t, true, ctx.queue, ctx.stats);
        for p in rest {
            ctx.nic.xmit(tx, p, t, false, ctx.queue, ctx.stats);
        }
    }

    /// Core `c` polling its one ring `r` from `*t` (what the strategy would pick: the ring
    /// while it holds a frame): calls, and spins to the next write-back, that end by
    /// `horizon` run here, charged and applied as `units::run` would; the first that would
    /// not is returned. Only where nothing a call does can raise an event.
    #[inline]
    fn poll_lone(
        &mut self,
        c: usize,
        r: usize,
        t: &mut Instant,
        horizon: Instant,
        ctx: &mut Ctx,
    ) -> Option<(Unit, Span)> {
        let mut calls = 0u32;
        let tx = self.topo.tx_of_core(c);
        // The run's spins and calls follow each other: each is charged to its activity as
        // it ends, the core's time once over the whole run when it stops.
        let from = *t;
        // The call's first frame: the whole of a one-frame call, which stays in a local
        // (written whole when taken).
        let mut p = Packet::default();
        // The ring was brought up to `*t` (a call ended there): nothing more is due, and an
        // empty ring has no frame to take.
        let mut advanced = false;
        loop {
            // The call's first frame, and the frames it finds. (A poller that keeps up finds
            // one: it comes straight off the ingress.)
            let len = if advanced && ctx.nic.rx(r).is_empty() { 0 } else { ctx.nic.take(r, *t, ctx.stats, &mut p) };
            advanced = false;
            if len == 0 {
                self.cores[c].idle_since = *t;
                if let Wait::Spin { t_empty } = self.wait {
                    if let Some(at) = ctx.nic.next_arrival(r..r + 1, horizon, ctx.stats) {
                        let n = t_empty.count_ceil(at.max(*t) - *t).max(1);
                        let end = *t + t_empty * n;
                        if end <= horizon {
                            ctx.stats.empty_polls_add(*t, n);
                            ctx.stats.busy_on(Activity::Spin, *t, end);
                            *t = end;
                            continue;
                        }
                    }
                }
                ctx.stats.busy_core_over(c, from, *t);
                super::arm_rings(r..r + 1, ctx);
                return None;
            }
            if len == 1 || self.costs.batch == 1 {
                // A call of one frame: it stays in a local.
                let io = self.costs.t_call + Self::frame_io(&self.costs, &p);
                let d = io + ctx.costs.t_proc(&p);
                calls = calls.wrapping_add(1);
                if *t + d > horizon || (calls.is_multiple_of(1024) && ctx.cancelled()) {
                    ctx.stats.busy_core_over(c, from, *t);
                    self.cores[c].moved.push(p);
                    return Some((Unit::Call { io }, d));
                }
                ctx.stats.busy_on(Activity::Io, *t, *t + io);
                ctx.stats.busy_on(Activity::RxClean, *t + io, *t + d);
                *t += d;
                Self::end_call_of(r, tx, std::slice::from_ref(&p), *t, ctx);
                advanced = true;
                continue;
            }
            self.cores[c].moved.push(p);
            let (io, work) = self.call(c, r, 0, self.costs.batch.min(len), *t, ctx);
            let d = io + work;
            calls = calls.wrapping_add(1);
            if *t + d > horizon || (calls.is_multiple_of(1024) && ctx.cancelled()) {
                ctx.stats.busy_core_over(c, from, *t);
                return Some((Unit::Call { io }, d));
            }
            ctx.stats.busy_on(Activity::Io, *t, *t + io);
            ctx.stats.busy_on(Activity::RxClean, *t + io, *t + d);
            *t += d;
            self.end_call_one(c, r, *t, ctx);
            advanced = true;
        }
    }
}

impl IoMode for Batched {
    fn start(&mut self, ctx: &mut Ctx) {
        super::arm_rings(0..self.topo.rings(), ctx);
    }

    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx) {
        if let Key::Step(c) = key {
            units::on_step(self, c as usize, gen, ctx);
        }
    }

    fn end(&mut self, t: Instant, ctx: &mut Ctx) {
        for c in 0..self.cores.len() {
            // A busy poller with nothing to do spins to the end; one in a call has spun
            // only up to the call, which is charged up to the end.
            let idle = self.cores[c].worker.is_idle();
            units::end(self, c, t, ctx);
            if let (Wait::Spin { t_empty }, true) = (self.wait, idle) {
                let core = &self.cores[c];
                let (since, from) = (core.idle_since, core.spin_from.max(core.idle_since));
                if from < t {
                    ctx.stats.busy(c, Activity::Spin, from, t);
                }
                if since < t {
                    ctx.stats.empty_polls_add(since, t_empty.count_ceil(t - since));
                }
            }
        }
    }

    /// Interference on a spinning core with nothing to do stretches the empty call under
    /// way, as it would a unit: the spin so far is charged, the core's empty calls end
    /// `d` later from now on, and its spin resumes when the interference ends.
    fn preempt(&mut self, core: usize, t: Instant, d: Span, ctx: &mut Ctx) {
        let spinning = matches!(self.wait, Wait::Spin { .. }) && self.cores[core].worker.is_idle();
        if spinning {
            let c = &self.cores[core];
            let from = c.worker.free_from().max(t);
            ctx.stats.busy(core, Activity::Spin, c.spin_from.max(c.idle_since), from);
            let c = &mut self.cores[core];
            c.idle_since += d;
            c.spin_from = from + d;
        }
        units::preempt(self, core, t, d, ctx);
    }

    fn on_rx_wake(&mut self, ring: usize, t: Instant, ctx: &mut Ctx) {
        let c = self.topo.core_of_ring(ring);
        if !self.cores[c].worker.is_idle() {
            return;
        }
        let core = &self.cores[c];
        let (since, from, free) = (core.idle_since, core.spin_from.max(core.idle_since), core.worker.free_from());
        super::disarm_rings(self.topo.rings_of_core(c), ctx);
        // The core notices the frame at the next empty-call boundary (spinning; not before
        // interference lets it go on), or after the interrupt and the wake-up (sleeping).
        let (unit, start, d) = match self.wait {
            Wait::Spin { t_empty } => {
                let calls = t_empty.count_ceil(t.max(free) - since);
                ctx.stats.empty_polls_add(since, calls);
                // The spin not yet charged: since the last interference, if any came.
                (Unit::Spin, from, since + t_empty * calls - from)
            }
            Wait::Sleep { t_irq, t_wakeup } => {
                ctx.stats.irq(t, Span::ZERO);
                (Unit::Wake, t, t_irq + t_wakeup)
            }
        };
        if units::begin(self, c, unit, start, d, ctx) {
            units::run(self, c, start + d, ctx);
        }
    }

    fn independent_cores(&self) -> bool {
        true
    }

    fn report(&self, _nic: &crate::engine::nic::Nic) -> super::IoReport {
        super::IoReport::Batched(BatchedReport {
            batch: self.costs.batch,
            strategy: self.cores.first().map(|c| c.strategy.name()),
            wait: match self.wait {
                Wait::Spin { .. } => "spin",
                Wait::Sleep { .. } => "sleep",
            },
        })
    }
}

/// A batched mode's figures in a run's result (`io`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BatchedReport {
    /// Most frames one call moves.
    pub batch: usize,
    /// The ring strategy of core 0.
    pub strategy: Option<&'static str>,
    /// How a core waits with nothing to move: "spin" (busy-poll) or "sleep".
    pub wait: &'static str,
}

/// Per call `t_call` (a full batch when the rings never run dry), per frame `t_packet` and
/// `t_byte`; busy-poll spins at any load, batched-syscall pays an interrupt and a wake-up
/// whenever it slept (never at saturation).
pub fn mode_costs(sc: &ResolvedScenario) -> crate::price::ModeCosts {
    let (b, wait) = calls_and_wait(&sc.scenario.host.io);
    let per_call = b.size.min(sc.scenario.nic.rx_ring).max(1) as f64;
    let mut terms = vec![
        crate::price::IoCost::per_event("call", b.t_call.ps as f64, per_call, 1.0),
        crate::price::IoCost {
            fs_per_byte: b.t_byte.map_or(0.0, |x| x.fs_per_byte as f64),
            ..crate::price::IoCost::per_frame("frame I/O", b.t_packet.ps as f64)
        },
    ];
    let busy_poll = matches!(wait, Wait::Spin { .. });
    let mut events = crate::price::Events::None;
    if let Wait::Sleep { t_irq, t_wakeup } = wait {
        let ps = t_irq.ps() + t_wakeup.ps();
        terms.push(crate::price::IoCost::per_event("wake-up", ps as f64, f64::INFINITY, 1.0));
        events = crate::price::Events::Recheck {
            t_start_ps: ps as f64,
            t_round_ps: b.t_call.ps as f64,
            latency_ps: 0.0,
            weight: per_call,
            defer: None,
            t_timer_ps: 0.0,
        };
    }
    crate::price::ModeCosts { terms, always_busy: busy_poll, events, ..Default::default() }
}

/// A batched mode's calls, and how its cores wait when there is nothing to move: spinning
/// in empty calls (busy-poll; an empty call costs `t_empty`, else `t_call`), or asleep until
/// an interrupt and a wake-up (batched-syscall).
fn calls_and_wait(io: &IoSpec) -> (BatchCalls, Wait) {
    match io {
        IoSpec::BusyPoll(p) => {
            let (c, e) = (&p.batch.calls, &p.batch.empty);
            let t_empty = if e.t_empty.ps > 0 { e.t_empty.into() } else { c.t_call.into() };
            (c.clone(), Wait::Spin { t_empty: Period::new(t_empty) })
        }
        IoSpec::BatchedSyscall(s) => {
            (s.batch.calls.clone(), Wait::Sleep { t_irq: s.irq.t_irq.into(), t_wakeup: s.batch.wake.t_wakeup.into() })
        }
        // (Only the batched modes are built here: see io::build.)
        _ => (BatchCalls::default(), Wait::Sleep { t_irq: Span::ZERO, t_wakeup: Span::ZERO }),
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    /// Calls of up to 2 frames, 1 us each, and the wait each mode has: empty calls of
    /// 0.5 us (busy-poll), a 2 us wake-up (batched-syscall).
    const SPIN: &str = "[host.batch]\nsize = 2\nt_call = \"1us\"\nt_empty = \"500ns\"";
    const SLEEP: &str = "[host.batch]\nsize = 2\nt_call = \"1us\"\nt_wakeup = \"2us\"";
    const FRAMES: [(u64, u16); 3] = [(10_200, 64), (10_400, 64), (10_600, 64)];

    /// Spinning since 0 with 0.5 us empty calls, the core sees the frame of 10.2 us at the
    /// call boundary of 10.5 us (21 empty calls); a call takes 2 frames: 1 us + 2 x 1 us.
    #[test]
    fn a_busy_poller_notices_frames_at_its_next_empty_call_and_moves_them_in_batches() {
        let toml = node_toml("io = \"busy-poll\"\nt_proc = \"1us\"", SPIN);
        let (r, dep) = trace(&toml, &FRAMES);
        assert_eq!(dep, [(13_500.0, 13_567.2), (13_500.0, 13_634.4), (15_500.0, 15_567.2)]);
        // 21 empty calls before the first frame, then from 15.5 us to the end of the 1 ms
        // window 1969 more.
        assert_eq!(r.empty_polls, 21 + 1969);
        assert_eq!(r.packets_per_poll.histogram[..3], [0, 1, 1]);
        assert_eq!(r.cpu_utilization, 1.0, "a busy poller never idles");
        assert!((r.cpu_useful - 5e-6 / 1e-3).abs() < 1e-12, "two calls: 3 us + 2 us of 1 ms");
    }

    /// A call running when the window ends is charged up to the end, and the spin before
    /// it only up to the call: the frame of 998.5 us is seen at that very empty-call
    /// boundary (1,997 empty calls of 0.5 us), its call (1 us + 1 us) runs past 1 ms.
    #[test]
    fn a_call_running_at_the_end_is_charged_once() {
        let toml = node_toml("io = \"busy-poll\"\nt_proc = \"1us\"", SPIN);
        let (r, dep) = trace(&toml, &[(998_500, 64)]);
        assert!(dep.is_empty(), "{dep:?}");
        assert_eq!(r.empty_polls, 1997);
        assert_eq!(r.cpu_utilization, 1.0, "the spin, then the call: the whole window once");
        assert!((r.cpu_useful - 1.5e-6 / 1e-3).abs() < 1e-12, "1.5 us of the call: {}", r.cpu_useful);
    }

    /// A tick of 3 us every 97 us on a busy poller with a frame every 10 us: a tick that
    /// takes the core while it spins stretches the empty call under way, so a frame is
    /// late by at most the tick and one empty call (0.5 us), and only where a tick came
    /// since the frame before; the core is never idle: spinning, calling or taken.
    #[test]
    fn a_tick_stretches_the_empty_call_under_way() {
        let frames: Vec<(u64, u16)> = (0..99).map(|i| (5_100 + i * 10_000, 64)).collect();
        let toml = node_toml("io = \"busy-poll\"\nt_proc = \"1us\"", SPIN);
        let (c, dep0) = trace(&toml, &frames);
        let (r, dep) =
            trace(&format!("{toml}\n[cpu.interference]\ntick_period = \"97us\"\nt_tick = [\"3us\"]"), &frames);
        assert_eq!(c.cpu_utilization, 1.0);
        assert_eq!(r.cpu_utilization, 1.0, "{:?}", r.cpu_by_activity);
        assert!(r.cpu_by_activity["idle"].abs() < 1e-12, "{:?}", r.cpu_by_activity);
        let ticks_us = r.cpu_by_activity["interference"] * 1000.0;
        assert!((ticks_us - 30.0).abs() < 1e-6 || (ticks_us - 33.0).abs() < 1e-6, "{ticks_us} us of ticks");
        assert_eq!(dep.len(), dep0.len());
        let late: Vec<f64> = dep.iter().zip(&dep0).map(|(a, b)| a.0 - b.0).collect();
        assert!(late.iter().all(|&l| l.abs() <= 3_500.0), "{late:?}");
        assert!(late.iter().filter(|&&l| l > 500.0).count() <= 11, "at most one late frame per tick: {late:?}");
        assert!(late.iter().any(|&l| l > 500.0), "some frame waited for a tick: {late:?}");
    }

    /// Asleep, the core pays the interrupt (1 us) and the wake-up (2 us) first.
    #[test]
    fn a_sleeping_thread_wakes_on_an_interrupt_then_calls() {
        let toml = node_toml("io = \"batched-syscall\"\nt_irq = \"1us\"\nt_proc = \"1us\"", SLEEP);
        let (r, dep) = trace(&toml, &FRAMES);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [16_200.0, 16_200.0, 18_200.0]);
        assert_eq!(r.irq_per_s, 1e3, "one interrupt in 1 ms");
        assert_eq!(r.empty_polls, 0);
    }
}
