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
//! The vector's behaviour is driven by [`super::Nic`], which owns its rings; this file holds
//! its state.

use crate::engine::moderation::{Episode, Moderation};
use crate::engine::queue::Timer;
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
