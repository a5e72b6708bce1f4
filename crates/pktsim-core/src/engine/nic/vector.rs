//! An MSI-X interrupt vector: the causes it watches (an rx ring's write-backs, a tx ring's
//! completions), its throttle counter (EITR) loaded by the moderation policy, and whether
//! it is armed (unmasked and waiting for a cause).
//!
//! ```text
//!   armed --cause at t--> interrupt scheduled at max(t, counter zero) --fires--> masked
//!     ^                                                                     |
//!     '---- napi_complete: unmask; a cause that came meanwhile fires -------'
//!           when the counter allows, else armed again
//! ```
//!
//! A policy that counts frames ([`Moderation::max_frames`]) keeps hearing of write-backs
//! while its interrupt waits: the interrupt moves to the write-back that fills the count.
//!
//! This file holds the vector's state ([`Vector`]) and its behaviour: the NIC's methods
//! that arm it, hear of causes, fire and complete its interrupts, as an `impl Nic` block of
//! its own (the NIC owns the rings a vector watches), and the runs' held interrupts
//! ([`Held`]: fired by the host, or handed back).

use super::{Held, Irq, Nic};
use crate::engine::moderation::{Episode, Moderation};
use crate::engine::queue::{EventQueue, Key, Timer};
use crate::engine::stats::Stats;
use crate::engine::time::{Instant, Span};
use crate::topology::VectorLayout;

/// What the policy says now, read once after each change: a policy changes only when it
/// hears of an episode, so every interrupt, cause and unmask in between asks it without a
/// call through its trait object.
#[derive(Debug, Clone, Copy)]
pub(super) struct PolicyNow {
    pub interval: Span,
    pub max_frames: u32,
    pub from_first_cause: bool,
}

impl PolicyNow {
    fn of(m: &dyn Moderation) -> Self {
        PolicyNow { interval: m.interval(), max_frames: m.max_frames(), from_first_cause: m.timer_from_first_cause() }
    }
}

pub struct Vector {
    pub(super) layout: VectorLayout,
    /// Unmasked and waiting for a cause (no interrupt scheduled yet).
    pub(super) armed: bool,
    pub(super) last_fire: Option<Instant>,
    /// When the throttle counter reaches zero.
    pub(super) counter_zero: Instant,
    /// The interrupt scheduled to fire, and when.
    pub(super) irq: Timer,
    pub(super) irq_at: Instant,
    /// The next tx completion, scheduled while the vector is armed and watches a tx ring.
    pub(super) tx_cause: Timer,
    /// Interrupts since the last episode ended.
    pub(super) episode_irqs: u64,
    moderation: Box<dyn Moderation>,
    pub(super) policy: PolicyNow,
}

impl Vector {
    pub fn new(layout: VectorLayout, moderation: Box<dyn Moderation>) -> Self {
        Vector {
            layout,
            armed: false,
            last_fire: None,
            counter_zero: Instant::ZERO,
            irq: Timer::default(),
            irq_at: Instant::NEVER,
            tx_cause: Timer::default(),
            episode_irqs: 0,
            policy: PolicyNow::of(&*moderation),
            moderation,
        }
    }

    /// The rx ring, tx queue and core this vector serves.
    pub fn layout(&self) -> VectorLayout {
        self.layout
    }
    pub fn is_armed(&self) -> bool {
        self.armed
    }
    /// When the throttle counter reaches zero (an interrupt cannot fire before).
    pub fn counter_zero(&self) -> Instant {
        self.counter_zero
    }
    pub fn moderation(&self) -> &dyn Moderation {
        &*self.moderation
    }

    /// The interrupt fires at `now`: load the throttle counter.
    pub(super) fn fire(&mut self, now: Instant) {
        self.last_fire = Some(now);
        self.counter_zero = now + self.policy.interval;
        self.episode_irqs += 1;
    }

    /// The episode ends at `now`: the policy hears of it.
    pub(super) fn episode_done(&mut self, now: Instant, mut ep: Episode) {
        ep.irqs = std::mem::take(&mut self.episode_irqs);
        self.moderation.episode_done(now, &ep);
        self.policy = PolicyNow::of(&*self.moderation);
    }
}

impl Nic {
    /// Whether a cause reached vector `v` since its last interrupt (EICR set), by `t`,
    /// given its tx ring's last completion by then.
    #[inline]
    fn cause_pending(&self, v: usize, last_done: Option<Instant>) -> bool {
        let vec = &self.vectors[v];
        let after_fire = |w: Instant| vec.last_fire.is_none_or(|f| w > f);
        let rx = vec.layout.rx.is_some_and(|r| self.rx[r].last_write().is_some_and(after_fire));
        rx || last_done.is_some_and(after_fire)
    }

    /// Vector `v`'s tx ring's last completion by `t` and first after it (none without one).
    #[inline]
    fn done_around(&self, v: usize, t: Instant) -> (Option<Instant>, Option<Instant>) {
        self.vectors[v].layout.tx.map_or((None, None), |q| self.tx[q].done_around(t))
    }

    /// Arm vector `v` at `t`: the next cause (a write-back on its rx ring, the next
    /// completion on its tx ring) schedules an interrupt.
    ///
    /// Where a completion is already posted (at `d`) and the policy times the interrupt
    /// from the last one only (it counts no frames), while the throttle holds it until
    /// `counter_zero >= d`: whatever cause comes first, the interrupt fires at
    /// `counter_zero`, so it is scheduled now, as that cause would (the vector masked, its
    /// ring no longer waking anyone), instead of waiting for the completion's event.
    pub fn arm_vector(&mut self, v: usize, t: Instant, queue: &mut EventQueue) {
        self.vectors_driven = true;
        let (_, next_done) = self.done_around(v, t);
        self.arm_vector_before(v, t, next_done, Instant::ZERO, queue, &mut None);
    }

    /// [`Nic::arm_vector`] at `t`, where an interrupt it schedules at once that fires
    /// strictly before `inline` is not scheduled but returned (see [`Nic::complete`]);
    /// `next_done` is the vector's tx ring's first completion after now. Before it puts
    /// anything into the queue, `other` goes back to it.
    fn arm_vector_before(
        &mut self,
        v: usize,
        t: Instant,
        next_done: Option<Instant>,
        inline: Instant,
        queue: &mut EventQueue,
        other: &mut Option<Held>,
    ) -> Option<Instant> {
        let vec = &self.vectors[v];
        if let Some(d) = next_done {
            if vec.policy.max_frames == 0 && !vec.policy.from_first_cause && vec.counter_zero >= d {
                let at = vec.counter_zero;
                self.mask_for(v, at);
                if at < inline {
                    return Some(at);
                }
                self.restore_first(other, t, queue);
                self.vectors[v].irq.set(queue, at, Key::Irq(v as u32));
                return None;
            }
        }
        let vec = &mut self.vectors[v];
        vec.armed = true;
        vec.irq.cancel();
        vec.tx_cause.cancel();
        if vec.layout.rx.is_some() || next_done.is_some() {
            self.restore_first(other, t, queue);
        }
        if let Some(r) = self.vectors[v].layout.rx {
            self.arm_ring(r, queue);
        }
        if let Some(d) = next_done {
            self.vectors[v].tx_cause.set(queue, d, Key::TxCause(v as u32));
        }
        None
    }

    /// When the interrupt of vector `v`, about to be armed with no cause pending, would
    /// fire, if strictly before `limit`: at its first cause — the next write-back on its
    /// ring (if a descriptor is free for it) or its tx ring's next completion (`next_done`),
    /// whichever comes first — when the throttle allows. For a policy that counts no frames
    /// (whose interrupt no later write-back moves).
    /// Returns the interrupt's time and its cause's.
    #[inline(always)]
    fn first_cause_irq(
        &mut self,
        v: usize,
        next_done: Option<Instant>,
        limit: Instant,
        stats: &mut Stats,
    ) -> Option<(Instant, Instant)> {
        let rx = self.vectors[v]
            .layout
            .rx
            .filter(|&r| self.rx[r].free() > 0)
            .and_then(|r| self.next_arrival(r..r + 1, limit, stats));
        let cause = match (rx, next_done) {
            (Some(a), Some(d)) => a.min(d),
            (a, d) => a.or(d)?,
        };
        let at = self.irq_time(v, cause, cause);
        (at < limit).then_some((at, cause))
    }

    fn schedule_irq(&mut self, v: usize, at: Instant, queue: &mut EventQueue) {
        self.mask_for(v, at);
        self.vectors[v].irq.set(queue, at, Key::Irq(v as u32));
    }

    /// The driver triggers vector `v`'s interrupt itself at `t` (`i40e_force_wb`,
    /// `ice_trigger_sw_intr`, for an AF_XDP socket's kick: `ndo_xsk_wakeup`): an armed
    /// vector fires at once, whatever its throttle. False for a masked one (its interrupt
    /// is on its way, or its NAPI is being polled or deferred: the host sees to it).
    pub fn software_interrupt(&mut self, v: usize, t: Instant, queue: &mut EventQueue) -> bool {
        if !self.vectors[v].armed {
            return false;
        }
        self.schedule_irq(v, t, queue);
        true
    }

    /// Vector `v` masked, its interrupt to fire at `at` (scheduled by the caller, or fired
    /// by the host itself): no cause schedules another, its ring wakes nobody.
    #[inline]
    pub(super) fn mask_for(&mut self, v: usize, at: Instant) {
        let vec = &mut self.vectors[v];
        vec.armed = false;
        vec.tx_cause.cancel();
        vec.irq_at = at;
        if let Some(r) = vec.layout.rx {
            self.rx[r].set_armed(false);
        }
    }

    /// When vector `v`'s interrupt fires for causes up to `t`, the first at `first`: at
    /// once if its policy counts frames and the rx ring holds that many; else when the
    /// throttle counter allows (from the last interrupt), or one interval after `first`
    /// for a policy whose timer starts at the first cause.
    pub(super) fn irq_time(&self, v: usize, t: Instant, first: Instant) -> Instant {
        let vec = &self.vectors[v];
        let n = vec.policy.max_frames;
        let at = if n > 0 && vec.layout.rx.is_some_and(|r| self.rx[r].len() >= n as usize) {
            t
        } else if vec.policy.from_first_cause {
            (first + vec.policy.interval).max(t)
        } else {
            t.max(vec.counter_zero)
        };
        // Its delivery: the vector stays masked meanwhile, so what comes then rides along.
        at + self.irq_delay
    }

    /// Keep hearing of rx write-backs while vector `v`'s interrupt waits (after `t`) if
    /// its policy counts frames.
    fn keep_counting(&mut self, v: usize, t: Instant, queue: &mut EventQueue) {
        let vec = &self.vectors[v];
        if let (true, Some(r), true) = (vec.policy.max_frames > 0, vec.layout.rx, vec.irq_at > t) {
            self.arm_ring(r, queue);
        }
    }

    /// A cause reached vector `v` at `t` (a write-back on its ring that woke it, see
    /// [`Nic::take_woken`]; a tx completion): an armed vector schedules its interrupt for
    /// when its moderation allows. While a counting policy's interrupt waits, a write-back
    /// may bring it forward (the count is full).
    pub(super) fn cause(&mut self, v: usize, t: Instant, queue: &mut EventQueue) {
        let vec = &self.vectors[v];
        if vec.armed {
            let at = self.irq_time(v, t, t);
            self.schedule_irq(v, at, queue);
            self.keep_counting(v, t, queue);
        } else if vec.irq.is_pending() && vec.irq_at > t && vec.policy.max_frames > 0 {
            let at = self.irq_time(v, t, t);
            if at < self.vectors[v].irq_at {
                self.schedule_irq(v, at, queue);
            }
            self.keep_counting(v, t, queue);
        }
    }

    /// A timer of the NIC's popped at `now`: a tx completion (a cause), or an interrupt,
    /// which fires and is returned for the host to handle.
    pub(super) fn on_timer(
        &mut self,
        key: Key,
        gen: u32,
        now: Instant,
        queue: &mut EventQueue,
        stats: &mut Stats,
    ) -> Option<Irq> {
        match key {
            Key::TxCause(v) if self.vectors[v as usize].tx_cause.fired(gen, queue) => {
                self.cause(v as usize, now, queue);
                None
            }
            Key::Irq(v) if self.vectors[v as usize].irq.fired(gen, queue) => Some(self.fire(v as usize, now, stats)),
            _ => None,
        }
    }

    /// Vector `v`'s interrupt fires at `now`: the throttle counter is loaded, and the host
    /// handles the interrupt returned. The event of a scheduled interrupt calls this; so
    /// does a host that held the interrupt instead ([`Held::fire`]).
    #[inline]
    fn fire(&mut self, v: usize, now: Instant, stats: &mut Stats) -> Irq {
        let vec = &mut self.vectors[v];
        vec.fire(now);
        // A counting policy's ring stops waking the vector once it fired.
        if let Some(r) = vec.layout.rx {
            self.rx[r].set_armed(false);
        }
        stats.irq(now, self.vectors[v].moderation().interval());
        Irq { vector: v, core: self.vectors[v].layout.core }
    }

    /// `napi_complete` of vector `v`'s episode at `t`: the moderation policy hears of it,
    /// then the vector is unmasked — a cause that came meanwhile interrupts when the
    /// throttle counter allows, else the vector waits for the next one.
    ///
    /// `inline`: for a host that will do nothing else until the vector's next interrupt if
    /// that comes before `inline` (the next event; `Instant::ZERO` for none): an interrupt
    /// that would be scheduled strictly before `inline` is not, and is returned held
    /// instead (see [`Held`]); the vector is masked as for a scheduled interrupt, and the
    /// host fires it at that time ([`Held::fire`]), as the interrupt's event would have, or
    /// hands it back ([`Held::restore`]). Only for a policy that counts no frames (nothing
    /// reaches a masked vector before its interrupt then).
    ///
    /// `other`: another vector's held interrupt that the general path scheduled before
    /// this completion: it goes back to the queue (at `t`) before anything this puts
    /// there, whose events of one time then run in the general path's order; it stays
    /// held where this puts nothing there.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn complete(
        &mut self,
        v: usize,
        t: Instant,
        episode: Episode,
        inline: Instant,
        other: &mut Option<Held>,
        queue: &mut EventQueue,
        stats: &mut Stats,
    ) -> Option<Held> {
        // (Each case its own copy of the work: with no other held interrupt, the common
        // one, nothing of it is looked at.)
        if other.is_none() {
            self.complete_alone(v, t, episode, inline, queue, stats)
        } else {
            self.complete_other(v, t, episode, inline, queue, stats, other)
        }
    }

    /// [`Nic::complete`] with no other held interrupt.
    fn complete_alone(
        &mut self,
        v: usize,
        t: Instant,
        episode: Episode,
        inline: Instant,
        queue: &mut EventQueue,
        stats: &mut Stats,
    ) -> Option<Held> {
        self.complete_inline(v, t, episode, inline, queue, stats, &mut None)
    }

    /// [`Nic::complete`] with another held interrupt.
    #[allow(clippy::too_many_arguments)]
    fn complete_other(
        &mut self,
        v: usize,
        t: Instant,
        episode: Episode,
        inline: Instant,
        queue: &mut EventQueue,
        stats: &mut Stats,
        other: &mut Option<Held>,
    ) -> Option<Held> {
        self.complete_inline(v, t, episode, inline, queue, stats, other)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn complete_inline(
        &mut self,
        v: usize,
        t: Instant,
        episode: Episode,
        inline: Instant,
        queue: &mut EventQueue,
        stats: &mut Stats,
        other: &mut Option<Held>,
    ) -> Option<Held> {
        self.vectors[v].episode_done(t, episode);
        if let Some(r) = self.vectors[v].layout.rx {
            self.advance_ring_to_inline(r, t, stats);
        }
        let inline = if self.vectors[v].policy.max_frames == 0 { inline } else { Instant::ZERO };
        let (last_done, next_done) = self.done_around(v, t);
        let held = |at, since, cause| Held { vector: v, at, since, cause, set: (t, true), tx_cause: next_done };
        if self.cause_pending(v, last_done) {
            // The oldest frame waiting in the ring came first (a tx completion alone: now).
            let first = self.vectors[v].layout.rx.and_then(|r| self.rx[r].head().map(|p| p.t_ring)).unwrap_or(t);
            let at = self.irq_time(v, t, first);
            if at < inline {
                self.mask_for(v, at);
                return Some(held(at, t, false));
            }
            self.restore_first(other, t, queue);
            self.schedule_irq(v, at, queue);
            self.keep_counting(v, t, queue);
            None
        } else {
            // Armed, its first cause would schedule the interrupt: where that fires before
            // `inline`, it is the one returned (scheduled now where the throttle outlasts
            // a completion already posted, see `arm_vector`).
            if inline > Instant::ZERO {
                if let Some((at, cause)) = self.first_cause_irq(v, next_done, inline, stats) {
                    let p = self.vectors[v].policy;
                    let at_once = next_done
                        .is_some_and(|d| p.max_frames == 0 && !p.from_first_cause && self.vectors[v].counter_zero >= d);
                    self.mask_for(v, at);
                    return Some(if at_once { held(at, t, false) } else { held(at, cause, true) });
                }
            }
            let at = self.arm_vector_before(v, t, next_done, inline, queue, other)?;
            Some(held(at, t, false))
        }
    }

    /// `other`, if any, goes back to the queue at `t` (see [`Nic::complete`]).
    #[inline(always)]
    fn restore_first(&mut self, other: &mut Option<Held>, t: Instant, queue: &mut EventQueue) {
        if other.is_some() {
            self.restore_other(other, t, queue);
        }
    }

    #[cold]
    #[inline(never)]
    fn restore_other(&mut self, other: &mut Option<Held>, t: Instant, queue: &mut EventQueue) {
        if let Some(h) = other.take() {
            self.restore(h, t, queue);
        }
    }

    /// Hand a held interrupt back at `now` (see [`Held::restore`]).
    fn restore(&mut self, h: Held, now: Instant, queue: &mut EventQueue) {
        let v = h.vector;
        if h.cause && now <= h.since {
            // (`irq_at`, set when it was held, is read only while the interrupt of an rx
            // vector whose policy counts frames is scheduled: such an interrupt is never
            // held.)
            let vec = &mut self.vectors[v];
            vec.armed = true;
            if let Some(r) = vec.layout.rx {
                self.arm_ring(r, queue);
            }
            if let Some(d) = h.tx_cause {
                self.vectors[v].tx_cause.set(queue, d, Key::TxCause(v as u32));
            }
        } else {
            self.vectors[v].irq.set(queue, h.at, Key::Irq(v as u32));
        }
    }
}

impl Held {
    /// The host fires the held interrupt at its time, as the interrupt's event would have:
    /// the vector's throttle counter is loaded, and the host handles the interrupt returned.
    #[inline]
    pub fn fire(self, nic: &mut Nic, stats: &mut Stats) -> Irq {
        nic.fire(self.vector, self.at, stats)
    }

    /// Hand the held interrupt back to the queue at `now`, as the general path has it
    /// then: the vector armed, waiting for its cause, if that comes no earlier (the cause's
    /// event runs after the host's work at that time), else its interrupt scheduled.
    pub fn restore(self, nic: &mut Nic, now: Instant, queue: &mut EventQueue) {
        nic.restore(self, now, queue);
    }
}
