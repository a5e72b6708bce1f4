//! Synthetic traffic: sources behind the ingress link (an [`Ingress`]).
//!
//! ```text
//!   source 0 --.
//!   source 1 ---+--> (merge by time) --> link (line rate + framing) --> NIC
//!   source 2 --'
//! ```
//!
//! Each source generates frames at its share of the offered rate (CBR: evenly spaced with a
//! random phase; Poisson: exponential gaps). The link serialises them: a frame's last bit
//! arrives `(size + overhead) * 8 / rate` after it started, and no earlier than the previous
//! frame's last bit plus that time. Frames are generated one at a time, on demand, so
//! memory does not grow with the number of packets.

use crate::scenario::{Pattern, ResolvedSource};

use super::ingress::{Ingress, Packet};
use super::rng::Stream;
use super::stalls::Stalls;
use super::time::{wire_time, Instant, Span, WireTime};

/// The largest cv whose gaps are drawn from a normal distribution (see `SourceGen::spread`).
const NORMAL_CV_MAX: f64 = 1.0 / 3.0;

struct SourceGen {
    pattern: Pattern,
    cv: f64,
    burst: u32,
    burst_left: u32,
    burst_flow: u32,
    /// The modulated patterns (on-off, mmpp): in the ON (high) state or not, the end of
    /// the current period (ps), the periods' means and each state's mean gap (ps).
    high: bool,
    period_end: f64,
    on_ps: f64,
    off_ps: f64,
    gap_high_ps: f64,
    gap_low_ps: f64,
    /// Mean gap in picoseconds (f64: exact CBR spacing over long runs).
    gap_ps: f64,
    next_start: f64,
    /// Cumulative size distribution: (upper bound of U, size, the size's time on the
    /// link), so that frames of mixed sizes need no wire time computed each.
    sizes: Vec<(f64, u16, Span)>,
    flows: u32,
    next_flow: u32,
    rng: Stream,
}

impl SourceGen {
    /// A frame's size and its time on the link.
    #[inline(always)]
    fn sample_size(&mut self) -> (u16, Span) {
        if self.sizes.len() == 1 {
            return (self.sizes[0].1, self.sizes[0].2);
        }
        let u = self.rng.uniform();
        for &(bound, size, wire) in &self.sizes {
            if u < bound {
                return (size, wire);
            }
        }
        let (_, size, wire) = self.sizes[self.sizes.len() - 1];
        (size, wire)
    }

    #[inline(always)]
    fn sample_flow(&mut self) -> u32 {
        match self.pattern {
            // A generator cycling through its destinations (000 V-C).
            Pattern::Cbr | Pattern::Normal | Pattern::OnOff => {
                let f = self.next_flow;
                // (f + 1) mod flows, without a division per frame.
                self.next_flow = if f + 1 >= self.flows { 0 } else { f + 1 };
                f
            }
            Pattern::Poisson | Pattern::Mmpp => self.rng.below(self.flows as u64) as u32,
            // All frames of a burst belong to one flow.
            Pattern::Burst => self.burst_flow,
        }
    }

    #[inline(always)]
    fn advance(&mut self) {
        self.next_start += match self.pattern {
            Pattern::Cbr => self.gap_ps,
            Pattern::Poisson => self.rng.exponential(self.gap_ps),
            Pattern::Normal => self.spread(self.gap_ps),
            Pattern::Burst => {
                // Frames of one burst start together; the link sends them back to back.
                self.burst_left -= 1;
                if self.burst_left > 0 {
                    0.0
                } else {
                    self.burst_left = self.burst;
                    self.burst_flow = self.rng.below(self.flows as u64) as u32;
                    self.spread(self.gap_ps * self.burst as f64)
                }
            }
            Pattern::OnOff | Pattern::Mmpp => return self.advance_modulated(),
        };
    }

    /// A gap of mean `mean` and the source's `cv` (patterns normal and burst): normal up to
    /// cv 1/3, where a negative draw (clipped to 0) is 1 in 2,300 and moves the mean by
    /// under 1e-4 of itself; gamma (shape 1/cv^2, scale mean cv^2, never negative) above,
    /// where clipping would raise the rate (cv 3: a third more).
    #[inline]
    fn spread(&mut self, mean: f64) -> f64 {
        if self.cv <= NORMAL_CV_MAX {
            self.rng.normal(mean, self.cv * mean).max(0.0)
        } else {
            self.rng.gamma(1.0 / (self.cv * self.cv), mean * self.cv * self.cv)
        }
    }

    /// The next start of a modulated source. On-off: the peak rate's gap counted in ON
    /// time only (a gap an OFF period interrupts goes on in the next ON period), so the
    /// mean holds however the periods compare with the gap. Mmpp: the state's exponential
    /// gap; one that crosses the period's end is drawn again from there at the other
    /// state's rate (memoryless).
    #[inline(never)]
    fn advance_modulated(&mut self) {
        let gap = if self.pattern == Pattern::Mmpp { 0.0 } else { self.gap_high_ps };
        self.place_after(self.next_start, gap);
    }

    /// The next start at `left` of ON time (on-off) or one exponential gap (mmpp, `left`
    /// unused) after `t`, crossing periods as they end.
    fn place_after(&mut self, mut t: f64, mut left: f64) {
        let mmpp = self.pattern == Pattern::Mmpp;
        loop {
            if mmpp {
                let gap = self.rng.exponential(if self.high { self.gap_high_ps } else { self.gap_low_ps });
                if t + gap < self.period_end {
                    self.next_start = t + gap;
                    return;
                }
            } else if self.high {
                if t + left < self.period_end {
                    self.next_start = t + left;
                    return;
                }
                left -= self.period_end - t;
            }
            // The period ends first: the next one.
            t = self.period_end;
            if t >= HORIZON_PS {
                self.next_start = f64::INFINITY;
                return;
            }
            self.high = !self.high;
            self.period_end = t + self.rng.exponential(if self.high { self.on_ps } else { self.off_ps });
        }
    }
}

/// A rate schedule as a warp of time: the sources run at their base rate in "base time"
/// `u`, and a frame at base time `u` starts at the real time `t` with `L(t) = u`, where
/// `L(t)` is the integral of the schedule's share from 0 to `t`. Where the share is `f`, the
/// frames come `f` times as fast: exactly a non-homogeneous Poisson process for Poisson
/// sources, and CBR at the scheduled rate for CBR ones.
struct Warp {
    /// Per segment: its start (ps), the share at its start and at its end (equal for a
    /// step), its length (ps; the last runs on), and `L` at its start.
    segs: Vec<(f64, f64, f64, f64, f64)>,
}

impl Warp {
    /// From the points (time ps, share, ramp), in order; before the first, its share.
    fn new(points: &[(f64, f64, bool)]) -> Option<Warp> {
        let &(_, first, _) = points.first()?;
        let mut segs = Vec::new();
        let (mut t, mut share, mut l) = (0.0, first, 0.0);
        for &(at, to, ramp) in points {
            if at > t {
                let end = if ramp { to } else { share };
                segs.push((t, share, end, at - t, l));
                l += (share + end) / 2.0 * (at - t);
                t = at;
            }
            share = to;
        }
        segs.push((t, share, share, f64::INFINITY, l));
        Some(Warp { segs })
    }

    /// The real time of base time `u` (infinite where the schedule sends no more).
    fn real(&self, u: f64) -> f64 {
        let i = self.segs.partition_point(|s| s.4 <= u).saturating_sub(1);
        for &(t0, f0, f1, d, l0) in &self.segs[i..] {
            let c = u - l0;
            let area = (f0 + f1) / 2.0 * d;
            if c < area || d.is_infinite() {
                if f0 == f1 {
                    return if f0 > 0.0 { t0 + c / f0 } else { f64::INFINITY };
                }
                // L(t0 + x) - l0 = f0 x + (f1 - f0) x^2 / (2 d) = c.
                let a = (f1 - f0) / (2.0 * d);
                let x = (-f0 + (f0 * f0 + 4.0 * a * c).max(0.0).sqrt()) / (2.0 * a);
                return t0 + x.clamp(0.0, d);
            }
        }
        f64::INFINITY
    }
}

/// Later than any run ends ([`crate::scenario::limits::MAX_RUN_PS`]) with room to add
/// times to it: frames that would start after it are never generated.
const HORIZON_PS: f64 = 4.0e18;

/// All sources merged in time order, behind the ingress link.
pub struct Traffic {
    sources: Vec<SourceGen>,
    /// `traffic.schedule`: the sources' times are base times, warped to real ones.
    warp: Option<Warp>,
    /// `traffic.stalls`: the sender's stalls, each kind applied in turn to the real times.
    stalls: Vec<Stalls>,
    wire: WireTime,
    link_free: Instant,
    generated: u64,
}

impl Traffic {
    /// `offered_pps` is the total; each source gets its share.
    pub fn new(sources: &[ResolvedSource], offered_pps: f64, link_bps: f64, overhead: u64, seed: u64) -> Self {
        let gens = sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let rate = offered_pps * s.share;
                let gap_ps = if rate > 0.0 { 1e12 / rate } else { f64::INFINITY };
                let mut rng = Stream::new(seed, &format!("traffic/{i}"));
                let mut acc = 0.0;
                let sizes = s
                    .size
                    .distribution()
                    .into_iter()
                    .map(|(b, p)| {
                        acc += p;
                        (acc, b as u16, wire_time(b, overhead, link_bps))
                    })
                    .collect();
                // Sources start at a random phase so that several of them do not coincide.
                let first = if rate <= 0.0 {
                    f64::INFINITY
                } else {
                    match s.pattern {
                        Pattern::Cbr | Pattern::Normal => rng.uniform() * gap_ps,
                        Pattern::Poisson => rng.exponential(gap_ps),
                        Pattern::Burst => rng.uniform() * gap_ps * s.burst as f64,
                        // (Set below, from the state the source starts in.)
                        Pattern::OnOff | Pattern::Mmpp => 0.0,
                    }
                };
                // The modulated patterns' two rates keep the source's mean: on-off sends at
                // (on + off) / on times it while ON; mmpp's low rate is mean (on + off) /
                // (peak on + off), its high rate peak times that.
                let (on, off) = (s.on_ps.max(1.0), s.off_ps.max(1.0));
                let (gap_high_ps, gap_low_ps) = match s.pattern {
                    Pattern::Mmpp => {
                        let low = rate * (on + off) / (s.peak * on + off);
                        (1e12 / (s.peak * low), 1e12 / low)
                    }
                    _ => (gap_ps * on / (on + off), f64::INFINITY),
                };
                let flows = s.flows.min(u32::MAX as u64) as u32;
                let burst_flow = rng.below(flows as u64) as u32;
                let mut gen = SourceGen {
                    pattern: s.pattern,
                    cv: s.cv,
                    burst: s.burst,
                    burst_left: s.burst,
                    burst_flow,
                    high: false,
                    period_end: 0.0,
                    on_ps: on,
                    off_ps: off,
                    gap_high_ps,
                    gap_low_ps,
                    gap_ps,
                    next_start: first,
                    sizes,
                    flows,
                    next_flow: 0,
                    rng,
                };
                if matches!(s.pattern, Pattern::OnOff | Pattern::Mmpp) && rate > 0.0 {
                    // In the state a stationary source is in at a random time (each with
                    // the share of time it takes), for a memoryless rest of its period.
                    gen.high = gen.rng.uniform() < on / (on + off);
                    gen.period_end = gen.rng.exponential(if gen.high { on } else { off });
                    // On-off: a random phase within the peak rate's spacing, in ON time.
                    let phase = if s.pattern == Pattern::OnOff { gen.rng.uniform() * gap_high_ps } else { 0.0 };
                    gen.place_after(0.0, phase);
                }
                gen
            })
            .collect();
        Traffic {
            sources: gens,
            warp: None,
            stalls: Vec::new(),
            wire: WireTime::new(overhead, link_bps),
            link_free: Instant::ZERO,
            generated: 0,
        }
    }

    /// The offered rate over the run (`traffic.schedule`: points of time in ps, share of the
    /// rate, ramp from the point before).
    pub fn with_schedule(mut self, points: &[(f64, f64, bool)]) -> Self {
        self.warp = Warp::new(points);
        self
    }

    /// The sender's stalls (`traffic.stalls`), each kind from a stream of its own.
    pub fn with_stalls(mut self, kinds: &[crate::scenario::Stalls], seed: u64) -> Self {
        self.stalls =
            kinds.iter().enumerate().filter_map(|(i, k)| Stalls::new(k.rate.hz, k.lengths_ps(), seed, i)).collect();
        self
    }
}

impl Traffic {
    /// One CBR or Poisson source of one size (what the papers and the theory checks send):
    /// `emit`'s steps, its draws in its order (flow, then gap), with the state in locals, so
    /// the loop runs in registers rather than through memory; a loop for each pattern.
    #[inline(never)]
    fn fill_one_size<const POISSON: bool>(&mut self, out: &mut Vec<Packet>, max: usize) {
        let src = &mut self.sources[0];
        let size = src.sizes[0].1;
        let wire = self.wire.of(size);
        let (mut next, mut link_free, mut flow) = (src.next_start, self.link_free, src.next_flow);
        // Copies, so that the generator's state stays in registers through the batch.
        let (mut rng, gap_ps, flows) = (src.rng.clone(), src.gap_ps, src.flows);
        let mut n = 0;
        out.reserve(max);
        while n < max && next < HORIZON_PS {
            let start = Instant::ZERO + Span::from_ps_f64_small(next);
            let f = if POISSON {
                let f = rng.below(flows as u64) as u32;
                next += rng.exponential(gap_ps);
                f
            } else {
                next += gap_ps;
                let f = flow;
                flow = if flow + 1 >= flows { 0 } else { flow + 1 };
                f
            };
            let t_wire = start.max(link_free) + wire;
            link_free = t_wire;
            out.push(Packet::arriving(t_wire, size, 0, f));
            n += 1;
        }
        (src.next_start, self.link_free, src.next_flow, src.rng) = (next, link_free, flow, rng);
        self.generated += n as u64;
    }

    /// The source whose next frame starts first (the first such, on a tie). Few sources:
    /// a linear scan beats a heap (sources with no share never win).
    #[inline(always)]
    fn next_source(&self) -> usize {
        let mut best = 0;
        for i in 1..self.sources.len() {
            if self.sources[i].next_start < self.sources[best].next_start {
                best = i;
            }
        }
        best
    }

    /// Source `i`'s next frame off the link, or None when the sources are done.
    #[inline(always)]
    fn emit(&mut self, i: usize) -> Option<Packet> {
        let src = &mut self.sources[i];
        // A frame that would start after any run can end (a gap longer than the run, a
        // source without a share) never comes: the sources are done.
        if !(src.next_start < HORIZON_PS) {
            return None;
        }
        let real = match &self.warp {
            Some(w) => w.real(src.next_start),
            None => src.next_start,
        };
        if !(real < HORIZON_PS) {
            return None;
        }
        // A frame a stall held leaves at its end, unless the next kind holds it longer.
        let real = self.stalls.iter_mut().fold(real, |t, st| st.leave(t));
        let start = Instant::ZERO + Span::from_ps_f64_small(real);
        let (size, wire) = src.sample_size();
        let flow = src.sample_flow();
        src.advance();
        let t_wire = start.max(self.link_free) + wire;
        self.link_free = t_wire;
        self.generated += 1;
        Some(Packet::arriving(t_wire, size, i as u16, flow))
    }
}

impl Ingress for Traffic {
    /// The next frame off the link.
    fn next_packet(&mut self) -> Option<Packet> {
        let mut p = Packet::default();
        self.next_into(&mut p).then_some(p)
    }

    #[inline]
    fn next_into(&mut self, out: &mut Packet) -> bool {
        match self.emit(self.next_source()) {
            Some(p) => {
                *out = p;
                true
            }
            None => false,
        }
    }

    /// One source alone needs no merge: its frames come in one tight loop. Several are
    /// merged frame by frame, each frame pushed as it is made (made into a local first, it
    /// was copied through the stack in parts and read back whole).
    fn fill(&mut self, out: &mut Vec<Packet>, max: usize) {
        if self.sources.len() != 1 {
            out.reserve(max);
            for _ in 0..max {
                match self.emit(self.next_source()) {
                    Some(p) => out.push(p),
                    None => return,
                }
            }
            return;
        }
        let src = &self.sources[0];
        if src.sizes.len() == 1 && self.warp.is_none() && self.stalls.is_empty() {
            match src.pattern {
                Pattern::Cbr => return self.fill_one_size::<false>(out, max),
                Pattern::Poisson => return self.fill_one_size::<true>(out, max),
                _ => {}
            }
        }
        for _ in 0..max {
            match self.emit(0) {
                Some(p) => out.push(p),
                None => return,
            }
        }
    }

    fn delivered(&self) -> u64 {
        self.generated
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::PacketSize;

    impl Traffic {
        fn next(&mut self) -> Packet {
            self.next_packet().unwrap()
        }
    }
    use crate::units::Bytes;

    fn src(pattern: Pattern, share: f64, size: u64) -> ResolvedSource {
        ResolvedSource::simple("s", share, pattern, PacketSize::Fixed(Bytes::new(size)), 4)
    }

    #[test]
    fn bursts_come_back_to_back_at_the_mean_rate() {
        let mut s = src(Pattern::Burst, 1.0, 1518);
        s.burst = 16;
        let wire = 1538 * 8 * 100; // ps per frame at 10 Gbit/s
        let mut t = Traffic::new(&[s], 1e5, 1e10, 20, 9);
        let pkts: Vec<Packet> = (0..160_000).map(|_| t.next()).collect();
        // Within a burst: back to back at line rate, one flow (a burst that starts while
        // the previous one is still on the wire, ~1 in 5000 at cv 0.25, joins it).
        let (mut back_to_back, mut same_flow) = (0, 0);
        for w in pkts.windows(2) {
            if w[1].t_wire - w[0].t_wire == Span::from_ps(wire) {
                back_to_back += 1;
                same_flow += (w[0].flow == w[1].flow) as u32;
            }
        }
        assert!(back_to_back >= 160_000 * 15 / 16 - 200, "{back_to_back}");
        assert!(same_flow as f64 >= 0.999 * back_to_back as f64, "{same_flow} of {back_to_back}");
        let span = (pkts[pkts.len() - 1].t_wire - pkts[0].t_wire).as_secs_f64();
        assert!(((pkts.len() as f64 / span) - 1e5).abs() / 1e5 < 0.01);
    }

    #[test]
    fn normal_gaps_keep_the_mean_rate() {
        let mut s = src(Pattern::Normal, 1.0, 64);
        s.cv = 0.5;
        let mut t = Traffic::new(&[s], 1e6, 1e10, 20, 4);
        let first = t.next().t_wire;
        let mut last = first;
        for _ in 0..100_000 {
            last = t.next().t_wire;
        }
        let rate = 100_000.0 / (last - first).as_secs_f64();
        assert!((rate - 1e6).abs() / 1e6 < 0.01, "{rate}");
    }

    #[test]
    fn cbr_at_line_rate_is_back_to_back() {
        // 64 B at 10 Gbit/s: 84 B on the wire = 67.2 ns.
        let line = 1e10 / (84.0 * 8.0);
        let mut t = Traffic::new(&[src(Pattern::Cbr, 1.0, 64)], line, 1e10, 20, 1);
        let a = t.next();
        let b = t.next();
        let c = t.next();
        assert_eq!(b.t_wire - a.t_wire, Span::from_ps(67_200));
        assert_eq!(c.t_wire - b.t_wire, Span::from_ps(67_200));
        assert_eq!((a.flow, b.flow, c.flow), (0, 1, 2));
    }

    #[test]
    fn poisson_rate_and_link_cap() {
        let mut t = Traffic::new(&[src(Pattern::Poisson, 1.0, 64)], 1e6, 1e10, 20, 3);
        let n = 200_000;
        let mut last = t.next();
        let first = last.t_wire;
        for _ in 0..n {
            let p = t.next();
            assert!(p.t_wire - last.t_wire >= Span::from_ps(67_200), "link serialises frames");
            assert_eq!(p.t_origin, p.t_wire);
            last = p;
        }
        let rate = n as f64 / (last.t_wire - first).as_secs_f64();
        assert!((rate - 1e6).abs() / 1e6 < 0.01, "{rate}");
    }

    #[test]
    fn a_source_whose_gaps_outlast_any_run_sends_nothing() {
        // 1e-8 pps: one frame every 3 years, past the longest run pktsim takes.
        let mut t = Traffic::new(&[src(Pattern::Cbr, 1.0, 64)], 1e-8, 1e10, 20, 1);
        assert_eq!(t.next_packet(), None);
        assert_eq!(t.delivered(), 0);
        let mut p = Traffic::new(&[src(Pattern::Poisson, 1.0, 64)], 1e-8, 1e10, 20, 1);
        assert!(p.next_packet().is_none_or(|f| f.t_wire.ps() < 4_000_000_000_000_000_000));
    }

    /// A batch (`fill`, with its loops for CBR and Poisson of one size and its merge of
    /// several sources) holds the frames one at a time gives, for every pattern alone and
    /// for sources of every pattern merged.
    #[test]
    fn batches_hold_the_frames_one_at_a_time_gives() {
        let mut cases: Vec<Vec<ResolvedSource>> = Vec::new();
        for pattern in [Pattern::Cbr, Pattern::Poisson, Pattern::Normal, Pattern::Burst] {
            let mut s = src(pattern, 1.0, 64);
            s.cv = 0.3;
            s.burst = 4;
            cases.push(vec![s]);
        }
        cases.push(
            [
                (Pattern::Cbr, 0.1, 64),
                (Pattern::Poisson, 0.4, 1518),
                (Pattern::Normal, 0.2, 576),
                (Pattern::Burst, 0.3, 64),
            ]
            .iter()
            .map(|&(pattern, share, size)| {
                let mut s = src(pattern, share, size);
                s.cv = 0.3;
                s.burst = 4;
                s
            })
            .collect(),
        );
        for sources in cases {
            let one: Vec<Packet> = {
                let mut t = Traffic::new(&sources, 2e6, 1e10, 20, 5);
                (0..1000).map(|_| t.next()).collect()
            };
            let mut t = Traffic::new(&sources, 2e6, 1e10, 20, 5);
            let mut batch = Vec::new();
            while batch.len() < 1000 {
                let want = 64.min(1000 - batch.len());
                t.fill(&mut batch, want);
            }
            let patterns: Vec<Pattern> = sources.iter().map(|s| s.pattern).collect();
            assert_eq!(batch, one, "{patterns:?}");
            assert_eq!(t.delivered(), 1000);
            if sources.len() > 1 {
                assert!((0..sources.len()).all(|i| batch.iter().any(|p| p.source as usize == i)), "every source sends");
            }
        }
    }

    /// Sample mean and sd/mean of successive differences of `times` (ps).
    fn gap_mean_and_cv(times: &[u64]) -> (f64, f64) {
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean) * (g - mean)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt() / mean)
    }

    /// Normal gaps at 1 Mpps with cv 0.25: mean 1 us, sd 250 ns. Over 100k gaps the sample
    /// cv has a standard error of about 0.25 / sqrt(2 * 100k) = 0.0006, and the link (64 B:
    /// 67.2 ns) only squeezes gaps more than 3.7 sd short: sd/mean = 0.25 +- 0.01 (a spread
    /// of 0 gives 0).
    #[test]
    fn normal_gaps_spread_with_the_sources_cv() {
        let mut s = src(Pattern::Normal, 1.0, 64);
        s.cv = 0.25;
        let mut t = Traffic::new(&[s], 1e6, 1e10, 20, 11);
        let times: Vec<u64> = (0..=100_000).map(|_| t.next().t_wire.ps()).collect();
        let (mean, cv) = gap_mean_and_cv(&times);
        assert!((mean - 1e6).abs() / 1e6 < 0.01, "{mean}");
        assert!((cv - 0.25).abs() < 0.01, "{cv}");
    }

    /// A cv a normal gap cannot have without going negative keeps the source's rate: cv 3
    /// at 100 kpps (gamma gaps, shape 1/9) gives a mean gap of 10 us within 3% over 200k gaps
    /// (standard error 3 / sqrt(200k) = 0.7%), with the cv asked for within 10% (the sample
    /// cv of so skewed a distribution converges slowly). Clipped normal gaps would give a
    /// mean of 10 us x E[max(0, 1 + 3Z)] = 13.5 us.
    #[test]
    fn a_large_cv_keeps_the_mean_rate() {
        let mut s = src(Pattern::Normal, 1.0, 64);
        s.cv = 3.0;
        let mut t = Traffic::new(&[s], 1e5, 1e10, 20, 11);
        let times: Vec<u64> = (0..=200_000).map(|_| t.next().t_wire.ps()).collect();
        let (mean, cv) = gap_mean_and_cv(&times);
        assert!((mean - 1e7).abs() / 1e7 < 0.03, "{mean}");
        assert!((cv - 3.0).abs() < 0.3, "{cv}");
    }

    /// Bursts of 16 at 1 Mpps with cv 0.25: bursts start 16 us apart on average with an sd
    /// of 4 us. A burst's first frame leaves the link one wire time (67.2 ns) after its
    /// start, as the previous burst (16 x 67.2 ns = 1.08 us on the wire) is long gone but
    /// for gaps 3.7 sd short: gaps between every 16th frame have sd/mean = 0.25 +- 0.01.
    #[test]
    fn burst_start_gaps_spread_with_the_sources_cv() {
        let mut s = src(Pattern::Burst, 1.0, 64);
        s.cv = 0.25;
        s.burst = 16;
        let mut t = Traffic::new(&[s], 1e6, 1e10, 20, 12);
        let times: Vec<u64> = (0..=100_000 * 16).map(|_| t.next().t_wire.ps()).step_by(16).collect();
        assert_eq!(times.len(), 100_001);
        let (mean, cv) = gap_mean_and_cv(&times);
        assert!((mean - 16e6).abs() / 16e6 < 0.01, "{mean}");
        assert!((cv - 0.25).abs() < 0.01, "{cv}");
    }

    #[test]
    fn sources_share_the_rate() {
        let mut t = Traffic::new(&[src(Pattern::Cbr, 0.25, 1500), src(Pattern::Cbr, 0.75, 64)], 4e5, 1e10, 20, 1);
        let mut count = [0u32; 2];
        for _ in 0..40_000 {
            count[t.next().source as usize] += 1;
        }
        assert!((count[0] as i64 - 10_000).abs() <= 2, "{count:?}");
    }

    /// Frame counts in windows of `window_ps` over `n` frames: their mean and index of
    /// dispersion (variance over mean).
    fn counts(t: &mut Traffic, n: usize, window_ps: u64) -> (f64, f64) {
        let mut counts = vec![0u64];
        for _ in 0..n {
            let w = (t.next().t_ring.ps() / window_ps) as usize;
            if w >= counts.len() {
                counts.resize(w + 1, 0);
            }
            counts[w] += 1;
        }
        counts.pop(); // (the last window is cut short)
        let m = counts.iter().sum::<u64>() as f64 / counts.len() as f64;
        let v = counts.iter().map(|&c| (c as f64 - m).powi(2)).sum::<f64>() / (counts.len() - 1) as f64;
        (m, v / m)
    }

    /// A two-state MMPP keeps its mean rate, and its counts spread as the closed form says
    /// (Heffes and Lucantoni 1986: IDC(t) = 1 + 2 s1 s2 (l1 - l2)^2 / ((s1 + s2)^3 m)
    /// (1 - (1 - e^-(s1+s2)t) / ((s1 + s2) t)), m = (l1 s2 + l2 s1) / (s1 + s2)); Poisson's
    /// is 1 and CBR's about 0.
    #[test]
    fn an_mmpp_keeps_its_mean_and_spreads_its_counts_as_the_closed_form_says() {
        let mmpp = |pattern| {
            let mut s = src(pattern, 1.0, 64);
            (s.on_ps, s.off_ps, s.peak) = (200e6, 600e6, 8.0); // 200 us high, 600 us low
            s
        };
        let rate = 1e6;
        let mut t = Traffic::new(&[mmpp(Pattern::Mmpp)], rate, 100e9, 20, 3);
        let window: u64 = 100_000_000; // 100 us
        let (m, idc) = counts(&mut t, 2_000_000, window);
        assert!((m / 100.0 - 1.0).abs() < 0.02, "mean {m} per 100 us");
        // The two rates: low = mean (on + off) / (peak on + off), high = peak low.
        let (s1, s2) = (1.0 / 200e-6, 1.0 / 600e-6); // leaving high, leaving low, per s
        let l2 = rate * 800e-6 / (8.0 * 200e-6 + 600e-6);
        let l1 = 8.0 * l2;
        let mean = (l1 * s2 + l2 * s1) / (s1 + s2);
        assert!((mean / rate - 1.0).abs() < 1e-9);
        let (a, tw) = (s1 + s2, 100e-6);
        let want =
            1.0 + 2.0 * s1 * s2 * (l1 - l2).powi(2) / (a * a * a * mean) * (1.0 - (1.0 - (-a * tw).exp()) / (a * tw));
        assert!((idc / want - 1.0).abs() < 0.1, "IDC {idc}, closed form {want}");
        let (_, poisson) =
            counts(&mut Traffic::new(&[src(Pattern::Poisson, 1.0, 64)], rate, 100e9, 20, 3), 500_000, window);
        assert!((poisson - 1.0).abs() < 0.1 && idc > 10.0, "Poisson {poisson}, MMPP {idc}");
    }

    /// An on-off source sends at its peak, (on + off) / on times its mean, while ON, and
    /// nothing while OFF: its mean holds, and a share off / (on + off) of time is silent.
    #[test]
    fn an_on_off_source_sends_at_its_peak_while_on_and_keeps_its_mean() {
        let mut s = src(Pattern::OnOff, 1.0, 64);
        (s.on_ps, s.off_ps) = (50e6, 150e6); // 50 us on, 150 us off: peak 4 Mpps for 1 Mpps
        let mut t = Traffic::new(&[s], 1e6, 100e9, 20, 5);
        let pkts: Vec<Packet> = (0..1_000_000).map(|_| t.next()).collect();
        let span_s = pkts.last().unwrap().t_ring.ps() as f64 / 1e12;
        assert!((pkts.len() as f64 / span_s / 1e6 - 1.0).abs() < 0.02, "{} pps", pkts.len() as f64 / span_s);
        // Gaps inside a period are the peak's 250 ns; the rest are the OFF periods.
        let gaps: Vec<u64> = pkts.windows(2).map(|w| (w[1].t_ring - w[0].t_ring).ps()).collect();
        let inside = gaps.iter().filter(|&&g| g == 250_000).count() as f64 / gaps.len() as f64;
        assert!(inside > 0.97, "{inside}");
        let silent: f64 = gaps.iter().filter(|&&g| g > 250_000).map(|&g| g as f64).sum::<f64>() / 1e12 / span_s;
        assert!((silent / 0.75 - 1.0).abs() < 0.05, "silent {silent} of the time");
    }

    /// A schedule's steps and ramps: the frames in each part of the run are its share of
    /// the rate times its length (a ramp's: the mean of its ends); a 0% part sends nothing.
    #[test]
    fn a_schedule_steps_and_ramps_the_rate_over_the_run() {
        let ms = 1e9;
        let points = [
            (0.0, 1.0, false),
            (1.0 * ms, 0.5, false),
            (2.0 * ms, 0.0, false),
            (3.0 * ms, 0.5, false),
            (5.0 * ms, 1.5, true),
        ];
        for pattern in [Pattern::Cbr, Pattern::Poisson] {
            let mut t = Traffic::new(&[src(pattern, 1.0, 64)], 1e6, 100e9, 20, 7).with_schedule(&points);
            let mut count = [0u32; 7];
            loop {
                let p = t.next();
                let k = (p.t_ring.ps() as f64 / ms) as usize;
                if k >= count.len() {
                    break;
                }
                count[k] += 1;
            }
            // 1 Mpps, 0.5, 0, then a ramp from 0.5 to 1.5 over 2 ms (0.75 and 1.25 of it in
            // each half), then 1.5 on.
            let want = [1000.0, 500.0, 0.0, 750.0, 1250.0, 1500.0, 1500.0];
            let tol = if pattern == Pattern::Cbr { 0.01 } else { 0.15 };
            for (k, (&c, &w)) in count.iter().zip(&want).enumerate() {
                assert!((c as f64 - w).abs() <= tol * w.max(1.0) + 1.0, "{pattern:?} ms {k}: {c} frames, {w} expected");
            }
        }
        // The warp's inverse at a ramp: L(t) over 3..5 ms is 0.5 x + x^2 / 4 ms.
        let w = Warp::new(&points).unwrap();
        let l3 = 1.0 * ms + 0.5 * ms; // L at 3 ms
        assert!((w.real(l3) - 3.0 * ms).abs() < 1.0);
        assert!((w.real(l3 + 0.5 * ms + 0.25 * ms) - 4.0 * ms).abs() < 1.0);
        assert!((w.real(l3 + 2.0 * ms) - 5.0 * ms).abs() < 1.0);
    }

    /// An on-off source whose ON periods are shorter than its peak's gap keeps its mean: a
    /// gap an OFF period interrupts goes on in the next ON period.
    #[test]
    fn an_on_off_source_keeps_its_mean_when_its_periods_are_shorter_than_its_gaps() {
        let mut s = src(Pattern::OnOff, 1.0, 64);
        (s.on_ps, s.off_ps) = (100e6, 100e6); // 100 us each: a 500 us gap at the peak of 2 kpps
        let mut t = Traffic::new(&[s], 1e3, 100e9, 20, 5);
        let pkts: Vec<Packet> = (0..20_000).map(|_| t.next()).collect();
        let pps = pkts.len() as f64 / (pkts.last().unwrap().t_ring.ps() as f64 / 1e12);
        assert!((pps / 1e3 - 1.0).abs() < 0.03, "{pps} pps");
    }
}
