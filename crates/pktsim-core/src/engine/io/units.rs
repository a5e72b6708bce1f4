//! Cores as sequences of work units, shared by every I/O mode.
//!
//! ```text
//!   run(core, t):  finish the unit that ends at t (its effects: a frame transmitted, ...)
//!                  next unit? none: the core idles (the mode arranged to be woken)
//!                  ends before the next event: run on to its end without the event queue
//!                  else: set the core's step timer for its end and return
//! ```
//!
//! A core that runs out of work sleeps in the idle state its governor picks
//! ([`crate::engine::idle`]); the event that wakes it sets the core's step timer for the end
//! of the state's exit latency and refill (CPU time), and the mode looks for work then (a
//! thread's wake-up started with [`begin`] starts that much later).
//!
//! A unit that would cross the next event suspends at its end; an event before then may
//! stretch it (an interrupt preempting it) by setting the timer again. This is what lets a
//! busy core process frame after frame at the speed of a plain loop while staying exact
//! wherever something can interrupt it.

use super::Ctx;
use crate::engine::queue::{Key, Timer};
use crate::engine::stats::Activity;
use crate::engine::time::{Instant, Span};

/// A core's running unit and the timer of its end.
#[derive(Debug)]
pub struct Worker<U> {
    unit: Option<U>,
    len: Span,
    end: Instant,
    timer: Timer,
    /// The core is taken by interference until then: no unit starts before it.
    blocked: Instant,
    /// The core leaves an idle state until then: it looks for work then.
    waking: Instant,
    /// Out of work but still awake (a thread on its way to sleep): the core enters no idle
    /// state until the mode says it sleeps ([`sleep`]).
    pub dozing: bool,
}

impl<U> Default for Worker<U> {
    fn default() -> Self {
        Worker {
            unit: None,
            len: Span::ZERO,
            end: Instant::ZERO,
            timer: Timer::default(),
            blocked: Instant::ZERO,
            waking: Instant::ZERO,
            dozing: false,
        }
    }
}

impl<U> Worker<U> {
    /// Whether no unit is running.
    pub fn is_idle(&self) -> bool {
        self.unit.is_none()
    }
    /// When interference last taken leaves the core free (no later than now when none is).
    pub fn free_from(&self) -> Instant {
        self.blocked
    }
    /// Whether interference leaves the core free at `t`.
    pub fn is_free_at(&self, t: Instant) -> bool {
        self.blocked <= t
    }
    /// The running unit ends `d` later than planned (it was preempted for `d`).
    pub fn stretch(&mut self, d: Span, key: Key, ctx: &mut Ctx) {
        self.end += d;
        self.timer.set(ctx.queue, self.end, key);
    }
}

/// A mode whose cores run work units.
pub trait Units {
    type Unit;
    fn worker(&mut self, core: usize) -> &mut Worker<Self::Unit>;
    /// Charge the CPU time `unit` took on `core` from `start` to `end` (its end, or the end
    /// of the run for a unit still running then).
    fn account(&mut self, core: usize, unit: &Self::Unit, start: Instant, end: Instant, ctx: &mut Ctx);
    /// `unit` ran on `core` from `start` to `end`, already charged: apply its effects.
    fn finish(&mut self, core: usize, unit: Self::Unit, start: Instant, end: Instant, ctx: &mut Ctx);
    /// The core's next unit at `*t` and its length, or None when it idles.
    ///
    /// A mode may first run units itself, inline, where it can do so faster than one unit
    /// at a time through [`run`]: each must end by the horizon on a core interference
    /// leaves free ([`fits`]), be charged and have its effects applied at its end, exactly
    /// as `run` would; `*t` then moves to the end of the last one, and the unit returned
    /// is the first one not run.
    fn next(&mut self, core: usize, t: &mut Instant, ctx: &mut Ctx) -> Option<(Self::Unit, Span)>;
}

/// Whether a unit of `d` starting at `t` on `core` (whose worker is `w`) may run on
/// without the event queue: interference leaves the core free and the unit ends by the
/// next event that could touch it ([`Ctx::horizon`]).
#[inline(always)]
pub fn fits<U>(w: &Worker<U>, core: usize, t: Instant, d: Span, ctx: &Ctx) -> bool {
    w.blocked <= t && t + d <= ctx.horizon(core)
}

/// Run `core` from `t` until it idles or a unit would end after the next event.
///
/// A unit that runs on without the event queue stays in a local: only a unit that
/// suspends is stored in the core's worker (moving a frame-carrying unit in and out of the
/// worker on every unit was a fifth of the engine's time).
#[inline]
pub fn run<M: Units>(m: &mut M, core: usize, mut t: Instant, ctx: &mut Ctx) {
    let mut units = 0u32;
    let w = m.worker(core);
    if w.unit.is_none() && ctx.idle.is_on() {
        // Still leaving its idle state, or woken now: the core looks for work when it is
        // out — at once when nothing can touch it before then, else at its step timer.
        if w.waking > t {
            return;
        }
        if let Some(at) = wake(w, core, t, ctx) {
            if at < ctx.horizon(core) && !ctx.cancelled() {
                t = at;
            } else {
                w.timer.set(ctx.queue, at, Key::Step(core as u32));
                return;
            }
        }
    }
    let mut done = w.unit.take().map(|u| (u, w.len));
    loop {
        // Every 1024 units: a stop is seen within microseconds, at no cost per unit.
        units = units.wrapping_add(1);
        if units.is_multiple_of(1024) && ctx.cancelled() {
            if let Some((unit, len)) = done {
                // Left as it was: suspended at its end.
                let w = m.worker(core);
                (w.unit, w.len, w.end) = (Some(unit), len, t);
            }
            return;
        }
        if let Some((unit, len)) = done.take() {
            m.account(core, &unit, t - len, t, ctx);
            m.finish(core, unit, t - len, t, ctx);
        }
        let Some((unit, d)) = m.next(core, &mut t, ctx) else {
            sleep(m.worker(core), core, t, ctx);
            return;
        };
        let w = m.worker(core);
        if fits(w, core, t, d, ctx) {
            done = Some((unit, d));
            t += d;
            continue;
        }
        suspend(w, core, unit, t, d, ctx);
        return;
    }
}

/// Start `unit` on `core` at `t`, lasting `d`: true if it ends no later than the next
/// event (the caller runs on to `t + d`), else its end is scheduled and false. A core
/// taken by interference at `t` starts the unit when the interference ends.
#[inline]
pub fn begin<M: Units>(m: &mut M, core: usize, unit: M::Unit, t: Instant, d: Span, ctx: &mut Ctx) -> bool {
    let w = m.worker(core);
    if let Some(at) = wake(w, core, t, ctx) {
        // Its idle state's exit holds the unit back.
        if at > w.blocked {
            w.blocked = at;
        }
    }
    if fits(w, core, t, d, ctx) {
        w.unit = Some(unit);
        w.len = d;
        w.end = t + d;
        return true;
    }
    suspend(w, core, unit, t, d, ctx);
    false
}

/// `core` runs out of work at `t` (or when the interference that has it ends): it sleeps in
/// the state its governor picks.
#[inline]
pub fn sleep<U>(w: &Worker<U>, core: usize, t: Instant, ctx: &mut Ctx) {
    if ctx.idle.is_on() && !w.dozing {
        ctx.idle.enter(core, if w.blocked > t { w.blocked } else { t });
    }
}

/// `core` is woken at `t` (nothing happens unless it sleeps): when leaving its state costs
/// something, the time it looks for work (after the state's exit latency and its refill,
/// CPU time: [`Activity::Refill`]).
#[inline]
pub fn wake<U>(w: &mut Worker<U>, core: usize, t: Instant, ctx: &mut Ctx) -> Option<Instant> {
    if !ctx.idle.is_on() {
        return None;
    }
    let wake = ctx.idle.exit(core, t);
    if wake.latency.is_zero() && wake.refill.is_zero() {
        return None;
    }
    let start = t + wake.latency;
    ctx.stats.busy(core, Activity::Refill, start, start + wake.refill);
    ctx.stats.wake(t, wake.latency);
    w.waking = start + wake.refill;
    Some(w.waking)
}

/// Store `unit` (started at `t`, or when the core's interference ends) in the worker and
/// set the step timer for its end.
#[inline]
fn suspend<U>(w: &mut Worker<U>, core: usize, unit: U, t: Instant, d: Span, ctx: &mut Ctx) {
    let start = if w.blocked > t { w.blocked } else { t };
    w.unit = Some(unit);
    w.len = d;
    w.end = start + d;
    w.timer.set(ctx.queue, w.end, Key::Step(core as u32));
}

/// Interference takes `core` from `t` for `d`: a unit running at `t` ends `d` later, an
/// idle core (or one whose unit ends at `t`) starts nothing before `t + d`; overlapping
/// interference queues up. The time is the core's `interference` activity.
pub fn preempt<M: Units>(m: &mut M, core: usize, t: Instant, d: Span, ctx: &mut Ctx) {
    take(m, core, t, d, Activity::Interference, ctx);
}

/// Work no unit stands for takes `core` from `t` for `d`, as interference does
/// ([`preempt`]), charged as `activity`.
pub fn take<M: Units>(m: &mut M, core: usize, t: Instant, d: Span, activity: Activity, ctx: &mut Ctx) {
    let w = m.worker(core);
    let from = if w.blocked > t { w.blocked } else { t };
    ctx.stats.busy(core, activity, from, from + d);
    if w.unit.is_some() && w.end > t {
        w.stretch(d, Key::Step(core as u32), ctx);
    } else {
        w.blocked = from + d;
    }
}

/// The run ends at `t`: charge the part of `core`'s running unit, if any, done by then.
pub fn end<M: Units>(m: &mut M, core: usize, t: Instant, ctx: &mut Ctx) {
    let w = m.worker(core);
    let Some(unit) = w.unit.take() else { return };
    let start = w.end - w.len;
    if start < t {
        m.account(core, &unit, start, t, ctx);
    }
}

/// The step timer of `core` popped with `gen`: run the core on if the event is current.
pub fn on_step<M: Units>(m: &mut M, core: usize, gen: u32, ctx: &mut Ctx) {
    if m.worker(core).timer.fired(gen, ctx.queue) {
        let now = ctx.now;
        run(m, core, now, ctx);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    fn host(interference: &str) -> String {
        node_toml(
            "io = \"threaded-napi\"\nt_proc = \"5us\"",
            &format!("[host.thread]\nwake_latency = \"0ns\"\n[cpu.interference]\n{interference}"),
        )
    }

    /// A tick every 97 us for 3 us, its phase drawn; a 5 us frame every 10 us (half the
    /// core; 97 is no multiple of 10, so the ticks fall at every point of a frame's cycle).
    /// A frame whose processing a tick interrupts ends exactly 3 us late, one that comes
    /// during a tick waits for its end (less than 3 us), every other frame is on time; the
    /// window of 1 ms holds 10 or 11 ticks of 3 us.
    #[test]
    fn the_tick_stretches_a_running_unit_and_delays_an_idle_core() {
        let frames: Vec<(u64, u16)> = (0..95).map(|i| (10_000 + i * 10_000, 64)).collect();
        let (r, dep) = trace(&host("tick_period = \"97us\"\nt_tick = [\"3us\"]"), &frames);
        let (c, dep0) = trace(&host(""), &frames);
        assert_eq!(c.cpu_by_activity["interference"], 0.0);
        assert_eq!(dep.len(), dep0.len());
        let late: Vec<f64> = dep.iter().zip(&dep0).map(|(a, b)| a.0 - b.0).collect();
        assert!(late.iter().all(|&l| (0.0..=3_000.0).contains(&l)), "{late:?}");
        assert!(late.contains(&3_000.0), "a stretched frame ends exactly 3 us late: {late:?}");
        assert!(
            late.iter().any(|&l| l > 0.0 && l < 3_000.0),
            "a frame that came during a tick waited for it: {late:?}"
        );
        assert!(late.iter().filter(|&&l| l > 0.0).count() <= 11, "at most one frame per tick: {late:?}");
        let us = r.cpu_by_activity["interference"] * 1000.0;
        assert!((us - 30.0).abs() < 1e-6 || (us - 33.0).abs() < 1e-6, "{us} us of ticks");
    }

    /// Preemptions at 20 kHz of 1 or 2 us (drawn evenly): over 1 ms about 20 of them,
    /// 1.5 us on average, about 3% of the core; the same seed gives the same events.
    #[test]
    fn preemptions_come_at_their_rate_with_their_lengths_and_repeat_with_the_seed() {
        let toml = host("rate = \"20kHz\"\nt_preempt = [\"1us\", \"2us\"]");
        let (a, _) = trace(&toml, &[(10_000, 64)]);
        let (b, _) = trace(&toml, &[(10_000, 64)]);
        let share = a.cpu_by_activity["interference"];
        assert_eq!(share, b.cpu_by_activity["interference"]);
        assert!((0.01..0.06).contains(&share), "{share}");
        // 1 ms of whole 1 and 2 us pieces: a multiple of 1 us.
        let us = share * 1000.0;
        assert!((us - us.round()).abs() < 1e-6, "{us}");
    }
}
