//! Interference (`[cpu.interference]`): what takes a forwarding core away from the packets
//! now and then, as `pktsim testbed probe` measures it on a real CPU.
//!
//! ```text
//!   tick:     every tick_period, at a phase drawn per core, for a time drawn from t_tick
//!             (the scheduler tick: the timer interrupt and the softirq work it brings)
//!   the rest: a Poisson process of `rate`, each for a time drawn from t_preempt
//!             (timers, RCU, kworkers, the hypervisor)
//! ```
//!
//! Each event preempts its core ([`super::io::units::preempt`]): a running work unit ends
//! that much later, an idle core starts its next unit no earlier than the event's end.
//! The time counts as the core's `interference` activity. Draws come from a stream of
//! their own, so the same scenario and seed give the same events.

use super::queue::{EventQueue, Key, Timer};
use super::rng::Stream;
use super::time::{Instant, Span};
use crate::scenario::Interference as Spec;

struct Core {
    next_tick: Instant,
    next_preempt: Instant,
    timer: Timer,
}

/// The interference of a node's forwarding cores.
pub struct Interference {
    cores: Vec<Core>,
    tick: Span,
    t_tick: Vec<Span>,
    /// Mean time between preemptions, ps (0: none).
    mean_gap_ps: f64,
    t_preempt: Vec<Span>,
    rng: Stream,
}

/// Far beyond any run: an event stream that is off.
const NEVER: Instant = Instant::from_ps(u64::MAX / 4);

impl Interference {
    /// None when nothing interferes.
    pub fn new(spec: &Spec, cores: usize, seed: u64) -> Option<Self> {
        if !spec.is_on() {
            return None;
        }
        let mut rng = Stream::new(seed, "interference");
        let tick: Span = spec.tick_period.into();
        let mean_gap_ps = if spec.rate.hz > 0.0 { 1e12 / spec.rate.hz } else { 0.0 };
        let cores = (0..cores)
            .map(|_| {
                let next_tick =
                    if tick.is_zero() { NEVER } else { Instant::ZERO + Span::from_ps(rng.below(tick.ps())) };
                let next_preempt = if mean_gap_ps > 0.0 {
                    Instant::ZERO + Span::from_ps_f64(rng.exponential(mean_gap_ps))
                } else {
                    NEVER
                };
                Core { next_tick, next_preempt, timer: Timer::default() }
            })
            .collect();
        Some(Interference {
            cores,
            tick,
            t_tick: spec.t_tick.iter().map(|&d| d.into()).collect(),
            mean_gap_ps,
            t_preempt: spec.t_preempt.iter().map(|&d| d.into()).collect(),
            rng,
        })
    }

    /// Sets every core's timer for its first event.
    pub fn start(&mut self, queue: &mut EventQueue) {
        for (c, core) in self.cores.iter_mut().enumerate() {
            core.timer.set(queue, core.next_tick.min(core.next_preempt), Key::Interfere(c as u32));
        }
    }

    /// Core `c`'s timer popped with `gen` at `now`: the length of the interference that
    /// begins now (None for a stale timer); the timer is set for the core's next event.
    pub fn fire(&mut self, c: usize, gen: u32, now: Instant, queue: &mut EventQueue) -> Option<Span> {
        let core = self.cores.get_mut(c)?;
        if !core.timer.fired(gen, queue) {
            return None;
        }
        let d = if core.next_tick <= now {
            core.next_tick += self.tick;
            self.t_tick[self.rng.below(self.t_tick.len() as u64) as usize]
        } else {
            core.next_preempt = now + Span::from_ps_f64(self.rng.exponential(self.mean_gap_ps)).max(Span::from_ps(1));
            self.t_preempt[self.rng.below(self.t_preempt.len() as u64) as usize]
        };
        core.timer.set(queue, core.next_tick.min(core.next_preempt), Key::Interfere(c as u32));
        Some(d)
    }
}
