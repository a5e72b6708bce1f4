//! What the host's work costs in time: per interrupt, per poll, per tx clean, per frame
//! processed (with its per-byte part and its distribution), per shared-lock hold.
//!
//! The host's times are used where the scenario gives them (`host.t_proc`, `host.t_clean`,
//! ...); otherwise the cost profile's cycles per group (with the FIB model applied) at the
//! CPU frequency — the same numbers the analytical model uses, so the two describe one
//! node. `t_clean` takes C_free (skbs are freed when tx completions are cleaned) and
//! `t_proc` the rest.
//!
//! Two terms apply to every frame whatever the I/O mode:
//! - with `cpu.cores` = k > 1, `cpu.contention` cycles per frame for each other core
//!   (000 V-C: cores slow each other down through shared caches and memory);
//! - where the mode has no tx-clean stage of its own (server, busy-poll, batched-syscall,
//!   threaded-napi: completions are reclaimed in the same call path), `t_clean` is part of
//!   each frame's processing (napi and xdp clean completions in the poll's tx phase).
//!
//! These are [`CostTerms`] (`price.rs`, which the analytical model prices a frame with too)
//! in integer time.

use crate::price::CostTerms;
use crate::scenario::{ResolvedScenario, ServiceDist};

use super::ingress::Packet;
use super::rng::Stream;
use super::time::Span;

/// Unit exponential draws made ahead.
const DRAWS: usize = 64;

/// A ring's service stream, its unit exponential draws made `DRAWS` at a time: the `log`
/// of each is then off the critical path of the frames' times (a frame's start waits for
/// the previous frame's time), and the numbers are those drawn one at a time, in order,
/// bit for bit (nothing else draws from the stream). Each batch is also scaled and rounded
/// to integer time ahead, for the mean it was drawn at: frames of one mean (one size, or
/// no per-byte part) then take a ready time, and the multiply and the rounding are off the
/// critical path too; a frame of another mean scales its own draw, the same way.
struct Draws {
    stream: Stream,
    units: [f64; DRAWS],
    /// `units` times `mean`, rounded as [`Costs::draw`] rounds.
    spans: [Span; DRAWS],
    mean: Span,
    next: usize,
}

impl Draws {
    fn new(stream: Stream) -> Self {
        Draws { stream, units: [0.0; DRAWS], spans: [Span::ZERO; DRAWS], mean: Span::ZERO, next: DRAWS }
    }

    /// The next draw as a time of mean `mean`.
    #[inline(always)]
    fn span(&mut self, mean: Span) -> Span {
        if self.next >= DRAWS || mean != self.mean {
            return self.span_slow(mean);
        }
        let s = self.spans[self.next];
        self.next += 1;
        s
    }

    #[inline(never)]
    fn span_slow(&mut self, mean: Span) -> Span {
        if self.next == DRAWS {
            // A copy of the stream: its state stays in registers through the batch.
            let mut stream = self.stream.clone();
            for k in 0..DRAWS {
                let u = stream.unit_exponential();
                self.units[k] = u;
                self.spans[k] = Self::scale(u, mean);
            }
            self.stream = stream;
            self.next = 0;
            self.mean = mean;
        }
        self.next += 1;
        Self::scale(self.units[self.next - 1], mean)
    }

    /// A unit draw as a time of mean `mean`: a unit draw is at most 64, a mean at most a
    /// step (10 s), far below 2^62 ps.
    #[inline(always)]
    fn scale(unit: f64, mean: Span) -> Span {
        Span::from_ps_f64_small(unit * mean.ps() as f64)
    }
}

/// Per-packet and per-event costs.
pub struct Costs {
    pub t_irq: Span,
    /// What an interrupt adds when it finds its core running (`host.t_irq_busy`).
    pub t_irq_busy: Span,
    /// Lock hold time per packet on a shared tx queue.
    pub tx_lock: Span,
    pub t_poll: Span,
    /// One expiry of a NAPI's deferral timer (`host.t_timer`).
    pub t_timer: Span,
    pub t_clean: Span,
    /// Fixed part of the rx-clean time of a frame.
    pub proc_fixed: Span,
    /// Per-byte part of t_proc, in femtoseconds per byte (integer: exact and reproducible).
    pub proc_per_byte_fs: u64,
    /// `cpu.contention` per frame (in `proc_fixed` too; XDP frames that skip the stack pay
    /// it alone).
    pub contention: Span,
    pub dist: ServiceDist,
    /// The service distribution's streams, one per rx ring (ring 0's is "service"): a
    /// ring's frames draw the same times whatever order the cores run in.
    rngs: Vec<Draws>,
    seed: u64,
}

impl Costs {
    /// The scenario's costs (see the module header), in integer time.
    pub fn of(sc: &ResolvedScenario) -> Costs {
        let s = &sc.scenario;
        let k = CostTerms::of(sc);
        let span = |ps: f64| Span::from_ps(ps.round() as u64);
        // Explicit times are whole picoseconds; only the FIB's extra is rounded.
        let proc = if k.explicit {
            Span::from(s.host.stack.t_proc.unwrap_or_default()) + span(k.routing_extra_ps)
        } else {
            span(k.proc_ps)
        };
        let clean = match s.host.stack.t_clean {
            Some(d) => d.into(),
            None => span(k.clean_ps),
        };
        let (proc, clean) = if k.clean_in_proc { (proc + clean, Span::ZERO) } else { (proc, clean) };
        Costs {
            t_irq: s.host.io.t_irq().into(),
            t_irq_busy: s.host.io.irq().map_or(Span::ZERO, |i| i.t_irq_busy.into()),
            tx_lock: s.host.io.tx_lock().into(),
            t_poll: s.host.io.poll().t_poll.into(),
            t_timer: s.host.io.poll().t_timer.into(),
            t_clean: clean,
            proc_fixed: proc + span(k.contention_ps),
            proc_per_byte_fs: k.proc_fs_per_byte.round() as u64,
            contention: span(k.contention_ps),
            dist: s.host.stack.service,
            rngs: Vec::new(),
            seed: s.seed,
        }
    }

    /// Rx-clean time of one packet (drawn from the service distribution).
    #[inline]
    pub fn t_proc(&mut self, p: &Packet) -> Span {
        let mean = self.t_proc_mean(p.size as u64);
        self.draw(mean, p)
    }

    /// A time of mean `mean` for frame `p` drawn from the service distribution
    /// (`host.service`, from its ring's stream): `mean` itself when constant.
    #[inline(always)]
    pub fn draw(&mut self, mean: Span, p: &Packet) -> Span {
        match self.dist {
            ServiceDist::Constant => mean,
            ServiceDist::Exponential => self.draw_exponential(mean, p),
        }
    }

    #[inline]
    fn draw_exponential(&mut self, mean: Span, p: &Packet) -> Span {
        self.stream(p.ring as usize).span(mean)
    }

    #[inline]
    fn stream(&mut self, ring: usize) -> &mut Draws {
        if ring >= self.rngs.len() {
            self.add_streams(ring);
        }
        &mut self.rngs[ring]
    }

    #[cold]
    fn add_streams(&mut self, ring: usize) {
        while self.rngs.len() <= ring {
            let r = self.rngs.len();
            let name = if r == 0 { "service".to_string() } else { format!("service/ring{r}") };
            self.rngs.push(Draws::new(Stream::new(self.seed, &name)));
        }
    }

    /// Mean rx-clean time for a frame size (no division per frame without a per-byte part).
    #[inline]
    pub fn t_proc_mean(&self, size: u64) -> Span {
        if self.proc_per_byte_fs == 0 {
            return self.proc_fixed;
        }
        self.proc_fixed + Span::from_ps(self.proc_per_byte_fs * size / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream's times are its unit draws, one at a time and in order, each scaled by the
    /// mean asked for then: whether the mean is the one a batch was scaled for ahead, or
    /// another (frames of several sizes with a per-byte part), and across batch ends.
    #[test]
    fn draws_are_the_stream_one_at_a_time_whatever_the_means() {
        let mut draws = Draws::new(Stream::new(3, "service"));
        let mut stream = Stream::new(3, "service");
        let means = [Span::from_ps(1_000_000), Span::from_ps(2_500_000), Span::from_ps(479_123)];
        for i in 0..5 * DRAWS + 7 {
            // Runs of 100 draws at one mean, then at another (so batches start at either),
            // broken now and then by a third.
            let mean = if i % 29 == 28 { means[2] } else { means[(i / 100) % 2] };
            let want = Span::from_ps_f64_small(stream.unit_exponential() * mean.ps() as f64);
            assert_eq!(draws.span(mean), want, "draw {i}, mean {mean:?}");
        }
    }
}
