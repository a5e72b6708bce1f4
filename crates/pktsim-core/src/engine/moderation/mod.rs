//! Interrupt moderation policies of a NIC vector, one file each, registered in [`build`].
//!
//! The hardware side is the same for all of them (see [`super::nic::vector`]): after an
//! interrupt the vector's throttle counter is loaded with the policy's interval, and causes
//! that arrive before it runs out wait for it. A policy decides the interval; it hears of
//! every interrupt-to-poll episode when it ends (after `napi_complete`), with the time and
//! what the episode did ([`Episode`]), so policies driven by time, by counts or by both fit.
//!
//! | `nic.itr.mode` | file | policy |
//! |---|---|---|
//! | `off` | [`off`] | interval 0 (`ethtool -C rx-usecs 0`) |
//! | `static` | [`fixed`] | `rx-usecs N`, in the NIC's 2.048 us steps |
//! | `dynamic` | [`ixgbe_dynamic`] | ixgbe 3.x dynamic ITR (002 section III-C) |
//! | `dim` | [`dim`] | the kernel's `net_dim` with the mlx5 (EQE, CQE) and ice profiles |
//!
//! A policy may also count frames: with [`Moderation::max_frames`] the vector interrupts as
//! soon as that many write-backs wait in its rx ring (mlx5 `cq_max_count`), and with
//! [`Moderation::timer_from_first_cause`] its timer runs from the first cause after the
//! vector is re-armed instead of from the last interrupt (mlx5 CQE-based moderation).
//!
//! To add a policy: a file here with the policy, its `impl Moderation` and its tests; an
//! alternative of the tagged [`ItrSpec`] (`scenario/nic.rs`: a variant, the struct of the
//! keys it reads, its name in `ItrSpec::alternatives`, its checks in `ItrSpec::validate`);
//! one arm in [`build`].

pub mod dim;
pub mod fixed;
pub mod ixgbe_dynamic;
pub mod off;

use crate::scenario::ItrSpec;

use super::time::{Instant, Span};

pub use dim::Dim;
pub use fixed::{eitr_interval, Fixed};
pub use ixgbe_dynamic::IxgbeDynamic;
pub use off::NoThrottle;

/// What one interrupt-to-poll episode of a vector did, from the interrupt that started it
/// to the `napi_complete` that ended it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Episode {
    pub rx_packets: u64,
    /// Rx bytes as the driver counts them (frame without FCS).
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Interrupts the vector raised in the episode.
    pub irqs: u64,
}

/// A vector's interrupt moderation.
pub trait Moderation: Send {
    /// The throttle interval loaded into the counter when an interrupt fires.
    fn interval(&self) -> Span;
    /// End of an episode at `now`.
    fn episode_done(&mut self, _now: Instant, _episode: &Episode) {}
    /// The `nic.itr.mode` name.
    fn name(&self) -> &'static str;
    /// Interrupt at once when this many frames wait in the rx ring (0: no frame count).
    fn max_frames(&self) -> u32 {
        0
    }
    /// The interval runs from the first cause after the vector is re-armed rather than from
    /// the last interrupt.
    fn timer_from_first_cause(&self) -> bool {
        false
    }
    /// The policy's own figures for the result (null when it has none).
    fn figures(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The policy a scenario asks for, for a vector that serves an rx ring (`rx`) or only a tx
/// ring (the one place policies are registered).
pub fn build(spec: &ItrSpec, rx: bool) -> Box<dyn Moderation> {
    match spec {
        ItrSpec::Off(_) => Box::new(NoThrottle),
        ItrSpec::Static(s) => Box::new(Fixed::from_usecs((s.interval.ps / 1_000_000) as u32)),
        ItrSpec::Dynamic(d) => Box::new(IxgbeDynamic::new(d.bulk_rate)),
        ItrSpec::Dim(d) => Box::new(Dim::new(d.profile, rx)),
    }
}
