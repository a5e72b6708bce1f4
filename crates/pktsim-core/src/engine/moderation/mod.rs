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
//! Where a policy settles at a steady rate (the model's interval below saturation) is
//! found by [`settle`], which runs the policy's own decisions on the model's steady
//! episodes.
//!
//! To add a policy: a file here with the policy, its `impl Moderation` and its tests; an
//! alternative of the tagged [`ItrSpec`] (`scenario/nic.rs`: a variant, the struct of the
//! keys it reads, its name in `ItrSpec::alternatives`, its checks in `ItrSpec::validate`);
//! one arm in [`build`].

pub mod dim;
pub mod fixed;
pub mod ixgbe_dynamic;
pub mod off;

use crate::rates::Level;
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
/// ring (the one place policies are registered); `xdp_consumes`: a native XDP program takes
/// every rx frame before the driver builds an skb (`io::xdp::native_consumes`), which an
/// mlx5 driver's DIM does not see.
pub fn build(spec: &ItrSpec, rx: bool, xdp_consumes: bool) -> Box<dyn Moderation> {
    match spec {
        ItrSpec::Off(_) => Box::new(NoThrottle),
        ItrSpec::Static(s) => Box::new(Fixed::from_usecs((s.interval.ps / 1_000_000) as u32)),
        ItrSpec::Dynamic(d) => Box::new(IxgbeDynamic::new(d.bulk_rate)),
        ItrSpec::Dim(d) => Box::new(Dim::new(d.profile, rx, xdp_consumes)),
    }
}

/// The level the policy `spec` settles at on a vector (`rx`: it serves an rx ring;
/// `xdp_consumes` as for [`build`]; `tx_too`: its episodes also clean tx completions, as many as rx frames) whose frames
/// carry `bytes` each as the driver counts them, given the steady rounds per second and
/// frames per round at a level (`at`, the model's closed forms, [`crate::rates`]).
///
/// Static and off hold one interval. The dynamic ITR and DIM decide from what episodes
/// did, so their own decisions run on the steady episodes `at` gives for the level they
/// hold at each step (frames per episode spread to whole frames, as evenly spaced arrivals
/// give them, or where arrivals are random drawn with a fixed sequence as the Poisson
/// frames waiting at the poll's start and those that join it while it runs (`at`'s third
/// figure per frame processed); time advancing by one round each), from their initial
/// state: 4,000 episodes,
/// the interval averaged by time over the last half (the dynamic ITR may go on flipping
/// between two states there, as it does in the simulator).
pub fn settle(
    spec: &ItrSpec,
    rx: bool,
    xdp_consumes: bool,
    tx_too: bool,
    bytes: f64,
    poisson: bool,
    at: &dyn Fn(&Level) -> (f64, f64, f64),
) -> Level {
    let mut m = build(spec, rx, xdp_consumes);
    let level = |m: &dyn Moderation| Level {
        interval_ps: m.interval().ps() as f64,
        max_frames: m.max_frames(),
        from_first_cause: m.timer_from_first_cause(),
    };
    if matches!(spec, ItrSpec::Off(_) | ItrSpec::Static(_)) {
        return level(&*m);
    }
    const EPISODES: usize = 4_000;
    let (mut now_ps, mut carry, mut seed) = (0.0f64, 0.0f64, 0x9E37_79B9_7F4A_7C15u64);
    let (mut weighted, mut span) = (0.0, 0.0);
    // (The levels a policy visits are few, and a dynamic ITR flips between them.)
    let mut cache: Vec<(Level, (f64, f64, f64))> = Vec::new();
    for i in 0..EPISODES {
        let l = level(&*m);
        let (rounds_per_s, frames, growth) = match cache.iter().find(|(c, _)| *c == l) {
            Some(&(_, v)) => v,
            None => {
                let v = at(&l);
                cache.push((l, v));
                v
            }
        };
        if !(rounds_per_s > 0.0) {
            break;
        }
        let period_ps = 1e12 / rounds_per_s;
        if i >= EPISODES / 2 {
            weighted += l.interval_ps * period_ps;
            span += period_ps;
        }
        let k = if poisson {
            // The frames waiting when the poll starts, Poisson; each frame it processes lets
            // Poisson(growth) more join it (a busy period), drawn at a fixed sequence.
            let mut draw = |mean: f64| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
                let (mut k, mut p) = (0.0, (-mean).exp());
                let mut cdf = p;
                while u > cdf && k < 10.0 * mean + 20.0 {
                    k += 1.0;
                    p *= mean / k;
                    cdf += p;
                }
                k
            };
            let growth = growth.clamp(0.0, 0.95);
            let (mut total, mut pending) = (draw(frames * (1.0 - growth)), 0.0);
            pending += total;
            while pending > 0.0 && total < 1e4 {
                let more = draw(pending * growth);
                total += more;
                pending = more;
            }
            total
        } else {
            carry += frames;
            let k = carry.floor();
            carry -= k;
            k
        };
        let (n, b) = (k as u64, (k * bytes).round() as u64);
        let ep = Episode {
            rx_packets: if rx { n } else { 0 },
            rx_bytes: if rx { b } else { 0 },
            tx_packets: if tx_too || !rx { n } else { 0 },
            tx_bytes: if tx_too || !rx { b } else { 0 },
            irqs: 1,
        };
        now_ps += period_ps;
        m.episode_done(Instant::from_ps(now_ps as u64), &ep);
    }
    let last = level(&*m);
    if span > 0.0 {
        Level { interval_ps: weighted / span, ..last }
    } else {
        last
    }
}
