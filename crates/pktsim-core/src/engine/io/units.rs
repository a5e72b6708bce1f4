//! Cores as sequences of work units, shared by every I/O mode.
//!
//! ```text
//!   run(core, t):  finish the unit that ends at t (its effects: a frame transmitted, ...)
//!                  next unit? none: the core idles (the mode arranged to be woken)
//!                  ends before the next event: run on to its end without the event queue
//!                  else: set the core's step timer for its end and return
//! ```
//!
//! A unit that would cross the next event suspends at its end; an event before then may
//! stretch it (an interrupt preempting it) by setting the timer again. This is what lets a
//! busy core process frame after frame at the speed of a plain loop while staying exact
//! wherever something can interrupt it.

use super::Ctx;
use crate::engine::queue::{Key, Timer};
use crate::engine::time::{Instant, Span};

/// A core's running unit and the timer of its end.
#[derive(Debug)]
pub struct Worker<U> {
    unit: Option<U>,
    len: Span,
    end: Instant,
    timer: Timer,
}

impl<U> Default for Worker<U> {
    fn default() -> Self {
        Worker { unit: None, len: Span::ZERO, end: Instant::ZERO, timer: Timer::default() }
    }
}

impl<U> Worker<U> {
    /// Whether no unit is running.
    pub fn is_idle(&self) -> bool {
        self.unit.is_none()
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
    /// The core's next unit at `t` and its length, or None when it idles.
    fn next(&mut self, core: usize, t: Instant, ctx: &mut Ctx) -> Option<(Self::Unit, Span)>;
}

/// Run `core` from `t` until it idles or a unit would end after the next event.
#[inline]
pub fn run<M: Units>(m: &mut M, core: usize, mut t: Instant, ctx: &mut Ctx) {
    let mut units = 0u32;
    loop {
        // Every 1024 units: a stop is seen within microseconds, at no cost per unit.
        units = units.wrapping_add(1);
        if units % 1024 == 0 && ctx.cancelled() {
            return;
        }
        let w = m.worker(core);
        if let Some(unit) = w.unit.take() {
            let len = w.len;
            m.account(core, &unit, t - len, t, ctx);
            m.finish(core, unit, t - len, t, ctx);
        }
        let Some((unit, d)) = m.next(core, t, ctx) else { return };
        if !begin(m, core, unit, t, d, ctx) {
            return;
        }
        t += d;
    }
}

/// Start `unit` on `core` at `t`, lasting `d`: true if it ends no later than the next
/// event (the caller runs on to `t + d`), else its end is scheduled and false.
#[inline]
pub fn begin<M: Units>(m: &mut M, core: usize, unit: M::Unit, t: Instant, d: Span, ctx: &mut Ctx) -> bool {
    let w = m.worker(core);
    w.unit = Some(unit);
    w.len = d;
    w.end = t + d;
    if t + d <= ctx.queue.peek_time() {
        return true;
    }
    w.timer.set(ctx.queue, t + d, Key::Step(core as u32));
    false
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
    if m.worker(core).timer.fired(gen) {
        let now = ctx.now;
        run(m, core, now, ctx);
    }
}
