//! Event rates below saturation: how often a core is interrupted, woken and polls at an
//! offered rate, in closed form, for the analytical model ([`crate::model`]).
//!
//! Every I/O mode that sleeps works in *rounds*: something starts a round (an interrupt,
//! a NAPI thread's wake-up, a system call's return), the round pays its fixed costs, then
//! takes the frames waiting (a NAPI poll also takes those that arrive while it runs; a veth
//! poll or a system call only those there when it looked). A round is followed at once by
//! another while causes keep coming (a cause latched since the interrupt, a tx completion
//! of a frame the round sent on a shared vector, a frame that came during a veth poll),
//! else the core sleeps until the next arrival: the rounds form *chains*.
//!
//! ```text
//!   one round, from its start F:   latency L (idle)  fixed CPU o  n frames x t_frame
//!                                  W = L + o + n t_frame (+ t_poll per full weight)
//!   next round no sooner than      V = max(T, W)          T: throttle from the last fire
//!                                  V = W + min(T, N / λ)  timer from the first cause (T)
//!                                                         or a count of N frames (mlx5 CQE)
//!                                  V = W + G              deferral timer (gro_flush_timeout)
//!   chain ends after a round       q = p0(λ V)            no cause in its window
//!                                  q = p0(λ (V + V - W))  shared tx vector: only a round that
//!                                                         found no frame and saw none come
//!                                  q = p0(λ G)^D          deferral: D empty timer polls
//!   p0(x) = e^-x (Poisson); 1 if x < 1, else 0 (CBR: the next frame one gap later)
//!   rounds per chain  k = 1 / q,   idle gap between chains  I = 1/λ (Poisson),
//!                                                           max(0, 1/λ - k V) (CBR)
//!   rounds/s  R = k / (k V + I),   frames per round  n = λ / R    (a fixed point in n)
//!   CPU       = λ t_frame + R o + (R - chains/s) (o_next - o) + polls beyond the weight
//! ```
//!
//! The interrupt throttle `T` (and a frame count `N`) is what the NIC's moderation policy
//! settles at for this rate: static and off are fixed; the ixgbe dynamic ITR and DIM are
//! found by running the policy's own decisions on the steady episodes these closed forms
//! give at each level (`engine::moderation::settle`, beside the policies).

use serde::Serialize;

/// How the offered frames arrive at a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Arrivals {
    /// Exponential gaps (also the stand-in for every mix and trace).
    Poisson,
    /// Evenly spaced.
    Cbr,
}

impl Arrivals {
    /// Probability that no frame arrives in a window holding `x` frames on average.
    pub fn p_none(self, x: f64) -> f64 {
        match self {
            Arrivals::Poisson => (-x.max(0.0)).exp(),
            // A chain starts at a frame: the next comes one gap later, inside the window or not.
            Arrivals::Cbr => {
                if x < 1.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// The interrupt moderation a vector works at: its throttle interval, a frame count that
/// interrupts at once (0: none), and whether the interval runs from the first cause after
/// the vector is re-armed (else from the last interrupt).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Level {
    pub interval_ps: f64,
    pub max_frames: u32,
    pub from_first_cause: bool,
}

impl Level {
    pub const NONE: Level = Level { interval_ps: 0.0, max_frames: 0, from_first_cause: false };
}

/// What follows a round while causes keep coming.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// The interrupt, throttled as `Level` says; `tx_cause`: a round that sent frames on
    /// its own vector's tx queue is always followed by another (their completions).
    Interrupt { level: Level, tx_cause: bool },
    /// The deferral timer (`napi_defer_hard_irqs` empty polls, each `gro_flush_timeout`
    /// after the last poll ends); the chain's first round is an interrupt's.
    Deferral { polls: u32, timeout_ps: f64 },
    /// Another round at once if a frame came meanwhile (a veth poll's re-check, the next
    /// system call).
    Recheck,
}

/// One core's rounds: what they cost and how they follow each other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rounds {
    pub rate_pps: f64,
    pub arrivals: Arrivals,
    /// CPU per frame in a round, ps.
    pub t_frame_ps: f64,
    /// Fixed CPU of a chain's first round (interrupt, wake-up, poll), ps.
    pub t_start_ps: f64,
    /// Fixed CPU of a later round of the chain, ps.
    pub t_next_ps: f64,
    /// Idle wait before a chain's first round does its work (a thread's wake-up latency),
    /// and before a later one, ps.
    pub latency_start_ps: f64,
    pub latency_next_ps: f64,
    /// Frames that arrive while the round runs join it (a NAPI poll); else a round takes
    /// what was waiting when it looked.
    pub takes_late_frames: bool,
    /// Most frames a poll takes (each further weight costs `t_poll_ps` more).
    pub weight: f64,
    pub t_poll_ps: f64,
    pub next: Next,
}

/// The steady figures of a core's rounds at its offered rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Steady {
    pub rounds_per_s: f64,
    /// Chains per second: rounds that start on a core the mode left asleep.
    pub chains_per_s: f64,
    pub frames_per_round: f64,
    /// Polls (or calls) per second, the polls beyond a weight included.
    pub polls_per_s: f64,
    /// Mean idle gap before a chain's first round, s.
    pub idle_gap_s: f64,
    /// Share of the core the rounds take (0..1), frames included.
    pub busy: f64,
    /// The closed form holds (the fixed point converged below saturation).
    pub holds: bool,
}

impl Steady {
    pub const NONE: Steady = Steady {
        rounds_per_s: 0.0,
        chains_per_s: 0.0,
        frames_per_round: 0.0,
        polls_per_s: 0.0,
        idle_gap_s: 0.0,
        busy: 0.0,
        holds: true,
    };
}

/// The steady rounds of `r` (see the module's formulas).
pub fn steady(r: &Rounds) -> Steady {
    let lambda = r.rate_pps;
    if !(lambda > 0.0) {
        return Steady::NONE;
    }
    let ps = 1e-12;
    let rho = lambda * r.t_frame_ps * ps;
    // Fixed point in the frames per round, damped; starts from one frame a round.
    let mut n = 1.0f64;
    let mut out = Steady::NONE;
    for _ in 0..400 {
        // (The share of rounds that start a chain, from the last iteration.)
        let start_share = if out.rounds_per_s > 0.0 { out.chains_per_s / out.rounds_per_s } else { 1.0 };
        let fixed_ps = start_share * r.t_start_ps + (1.0 - start_share) * r.t_next_ps;
        let latency_ps = start_share * r.latency_start_ps + (1.0 - start_share) * r.latency_next_ps;
        let extra_polls = (n / r.weight.max(1.0)).floor();
        let w = (latency_ps + fixed_ps + n * r.t_frame_ps + extra_polls * r.t_poll_ps) * ps;
        let (v, q) = match r.next {
            Next::Interrupt { level, tx_cause } => {
                let t = level.interval_ps * ps;
                let count_s = if level.max_frames > 0 { level.max_frames as f64 / lambda } else { f64::INFINITY };
                let v = if level.from_first_cause {
                    // The timer starts at the first frame after the vector is re-armed.
                    w + t.min(count_s)
                } else {
                    w.max(t.min(w + count_s))
                };
                let q = if tx_cause && n > 0.0 {
                    // Only a round that found no frame ends the chain: no frame came between
                    // the last ring check and this one, nor in this round's window.
                    r.arrivals.p_none(lambda * (v + (v - w)))
                } else {
                    r.arrivals.p_none(lambda * v)
                };
                (v, q)
            }
            Next::Deferral { polls, timeout_ps } => {
                let g = timeout_ps * ps;
                (w + g, r.arrivals.p_none(lambda * g).powi(polls.max(1) as i32))
            }
            Next::Recheck => (w, r.arrivals.p_none(lambda * (w - latency_ps * ps))),
        };
        let q = q.max(1e-12);
        let k = 1.0 / q;
        let idle = match r.arrivals {
            Arrivals::Poisson => 1.0 / lambda,
            Arrivals::Cbr => (1.0 / lambda - k * v).max(0.0),
        };
        let rounds = k / (k * v + idle);
        let chains = rounds / k;
        let next_n = lambda / rounds;
        let polls = rounds + lambda / r.weight.max(1.0) * if n >= r.weight { 1.0 } else { 0.0 };
        let busy = lambda * r.t_frame_ps * ps
            + chains * r.t_start_ps * ps
            + (rounds - chains) * r.t_next_ps * ps
            + rounds * extra_polls * r.t_poll_ps * ps;
        out = Steady {
            rounds_per_s: rounds,
            chains_per_s: chains,
            frames_per_round: next_n,
            polls_per_s: polls,
            idle_gap_s: idle,
            // (Rounds back to back, the chain never ending: the core never sleeps.)
            busy: busy.min(1.0),
            holds: rho < 1.0,
        };
        let damped = 0.5 * n + 0.5 * next_n;
        if (damped - n).abs() < 1e-9 * n.max(1.0) {
            break;
        }
        n = damped;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn napi(level: Level, arrivals: Arrivals, rate: f64) -> Rounds {
        Rounds {
            rate_pps: rate,
            arrivals,
            t_frame_ps: 500_000.0,
            t_start_ps: 400_000.0,
            t_next_ps: 400_000.0,
            latency_start_ps: 0.0,
            latency_next_ps: 0.0,
            takes_late_frames: true,
            weight: 64.0,
            t_poll_ps: 200_000.0,
            next: Next::Interrupt { level, tx_cause: false },
        }
    }

    /// A static throttle T at a CBR rate above 1/T: one interrupt per T.
    #[test]
    fn a_static_throttle_interrupts_once_per_interval_above_its_rate() {
        let l = Level { interval_ps: 10_240_000.0, max_frames: 0, from_first_cause: false };
        let s = steady(&napi(l, Arrivals::Cbr, 200e3));
        assert!((s.rounds_per_s - 1e12 / 10_240_000.0).abs() < 1.0, "{s:?}");
        // Below 1/T each frame its interrupt.
        let s = steady(&napi(l, Arrivals::Cbr, 50e3));
        assert!((s.rounds_per_s - 50e3).abs() < 1.0, "{s:?}");
    }

    /// Poisson with a throttle T: the next interrupt at max(T, first arrival after the last
    /// one), so a period of T + e^(-λT) / λ.
    #[test]
    fn poisson_with_a_throttle_waits_for_the_later_of_the_interval_and_the_next_frame() {
        let l = Level { interval_ps: 50_000_000.0, max_frames: 0, from_first_cause: false };
        let s = steady(&napi(l, Arrivals::Poisson, 40e3));
        let period = 50e-6 + (-40e3f64 * 50e-6).exp() / 40e3;
        assert!((s.rounds_per_s * period - 1.0).abs() < 1e-6, "{s:?}");
    }
}
