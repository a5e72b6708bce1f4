//! Simulated time: [`Instant`]s and [`Span`]s, distinct types with integer picoseconds
//! inside, so an instant is never added to an instant and a span never stands for a point
//! in time.
//!
//! ```text
//!   Instant + Span = Instant      Instant - Instant = Span      Span * n = Span
//! ```
//!
//! Conversions from the scenario's units ([`crate::units::Duration`]) and to the figures a
//! result reports (seconds, nanoseconds) live here and nowhere else.

use std::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};

use crate::units::Duration;

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// A point in simulated time, in picoseconds since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// A length of simulated time, in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    /// Later than every event: what an empty queue's horizon is.
    pub const NEVER: Instant = Instant(u64::MAX);

    pub const fn from_ps(ps: u64) -> Self {
        Instant(ps)
    }
    pub const fn ps(self) -> u64 {
        self.0
    }
    /// Seconds since the start (for reports).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }
    /// `self + d`, or [`Instant::NEVER`] past the end of time.
    #[inline]
    pub fn saturating_add(self, d: Span) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
    /// Time since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Span {
        Span(self.0.saturating_sub(earlier.0))
    }
}

impl Span {
    pub const ZERO: Span = Span(0);

    pub const fn from_ps(ps: u64) -> Self {
        Span(ps)
    }
    pub const fn from_us(us: u64) -> Self {
        Span(us * PS_PER_US)
    }
    /// A non-negative time in picoseconds as a float, rounded half up to whole picoseconds
    /// (no libm call: this sits on the hot path of random service times).
    #[inline]
    pub fn from_ps_f64(ps: f64) -> Self {
        Span((ps + 0.5) as u64)
    }
    /// [`Span::from_ps_f64`] for a time known to be below 2^62 ps (a start before the
    /// traffic horizon, a draw of a step's length): one conversion instruction instead of
    /// the sequence a u64 needs, the same result.
    #[inline(always)]
    pub fn from_ps_f64_small(ps: f64) -> Self {
        debug_assert!((0.0..4.6e18).contains(&ps), "{ps} ps");
        Span((ps + 0.5) as i64 as u64)
    }
    pub const fn ps(self) -> u64 {
        self.0
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// Nanoseconds (for reports).
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / PS_PER_NS as f64
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }
    /// How many whole `unit`s fit, rounded up (`unit` above zero).
    pub fn div_ceil(self, unit: Span) -> u64 {
        self.0.div_ceil(unit.0)
    }
}

/// A span that others are divided by many times (a busy poller's empty call): its
/// quotients by one multiplication where the rounded-up dividend and the span fit in 32
/// bits, by a division otherwise. With `inverse` = ceil(2^64 / d) for 2 <= d < 2^32, the
/// high word of `inverse * n` is n / d exactly for every n below 2^32 (Lemire, Kaser and
/// Kurz, "Faster remainder by direct computation", 2019).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    span: Span,
    /// ceil(2^64 / span), or 0 where the span is 1 or does not fit in 32 bits.
    inverse: u64,
}

impl Period {
    /// `span` of at least 1 ps (zero counts as 1 ps).
    pub const fn new(span: Span) -> Self {
        let d = if span.0 == 0 { 1 } else { span.0 };
        let inverse = if d >= 2 && d < 1 << 32 { u64::MAX / d + 1 } else { 0 };
        Period { span: Span(d), inverse }
    }
    pub const fn span(self) -> Span {
        self.span
    }
    /// How many periods fit in `x`, rounded up ([`Span::div_ceil`]).
    #[inline]
    pub fn count_ceil(self, x: Span) -> u64 {
        // Wraps only for x of at least 2^32, which the test of x leaves out.
        let n = x.0.wrapping_add(self.span.0 - 1);
        if self.inverse != 0 && x.0 < 1 << 32 && n < 1 << 32 {
            ((self.inverse as u128 * n as u128) >> 64) as u64
        } else {
            x.div_ceil(self.span)
        }
    }
}

impl Mul<u64> for Period {
    type Output = Span;
    fn mul(self, n: u64) -> Span {
        self.span * n
    }
}

impl From<Duration> for Span {
    fn from(d: Duration) -> Span {
        Span(d.ps)
    }
}

impl From<crate::units::TimeSpan> for Span {
    fn from(d: crate::units::TimeSpan) -> Span {
        Span(d.ps)
    }
}

impl Add<Span> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Span) -> Instant {
        Instant(self.0 + d.0)
    }
}
impl AddAssign<Span> for Instant {
    #[inline]
    fn add_assign(&mut self, d: Span) {
        self.0 += d.0;
    }
}
impl Sub<Span> for Instant {
    type Output = Instant;
    #[inline]
    fn sub(self, d: Span) -> Instant {
        Instant(self.0 - d.0)
    }
}
impl Sub for Instant {
    type Output = Span;
    #[inline]
    fn sub(self, earlier: Instant) -> Span {
        Span(self.0 - earlier.0)
    }
}
impl Add for Span {
    type Output = Span;
    #[inline]
    fn add(self, d: Span) -> Span {
        Span(self.0 + d.0)
    }
}
impl AddAssign for Span {
    #[inline]
    fn add_assign(&mut self, d: Span) {
        self.0 += d.0;
    }
}
impl Sub for Span {
    type Output = Span;
    #[inline]
    fn sub(self, d: Span) -> Span {
        Span(self.0 - d.0)
    }
}
impl SubAssign for Span {
    #[inline]
    fn sub_assign(&mut self, d: Span) {
        self.0 -= d.0;
    }
}
impl Mul<u64> for Span {
    type Output = Span;
    #[inline]
    fn mul(self, n: u64) -> Span {
        Span(self.0 * n)
    }
}
impl Div<u64> for Span {
    type Output = Span;
    #[inline]
    fn div(self, n: u64) -> Span {
        Span(self.0 / n)
    }
}
impl std::iter::Sum for Span {
    fn sum<I: Iterator<Item = Span>>(iter: I) -> Span {
        Span(iter.map(|s| s.0).sum())
    }
}

/// Time a link needs for `bytes` of frame plus `overhead` bytes at `bps`.
pub fn wire_time(bytes: u64, overhead: u64, bps: f64) -> Span {
    Span::from_ps_f64(((bytes + overhead) as f64 * 8.0) / bps * 1e12)
}

/// Wire time of the last frame size seen: frames mostly repeat their size.
#[derive(Debug, Clone, Copy)]
pub struct WireTime {
    overhead: u64,
    bps: f64,
    last: (u16, Span),
}

impl WireTime {
    pub fn new(overhead: u64, bps: f64) -> Self {
        WireTime { overhead, bps, last: (0, wire_time(0, overhead, bps)) }
    }

    #[inline]
    pub fn of(&mut self, size: u16) -> Span {
        if self.last.0 != size {
            self.last = (size, wire_time(size as u64, self.overhead, self.bps));
        }
        self.last.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_spans_combine_as_time_does() {
        let t = Instant::from_ps(1_000);
        let d = Span::from_ps(250);
        assert_eq!(t + d, Instant::from_ps(1_250));
        assert_eq!((t + d) - t, d);
        assert_eq!(t - d, Instant::from_ps(750));
        assert_eq!(d * 4, Span::from_ps(1_000));
        assert_eq!(Span::from_ps(1_001).div_ceil(d), 5);
        assert_eq!(t.saturating_since(t + d), Span::ZERO);
        assert_eq!(Span::from(Duration::from_ps(7)), Span::from_ps(7));
    }

    /// A period's rounded-up quotient is the division's, on the 32-bit path (spans of 2 ps
    /// to 2^32 - 1 ps, dividends up to 2^32 - 1) and off it (a 1 ps span, dividends and
    /// spans beyond 32 bits).
    #[test]
    fn a_periods_quotient_by_multiplication_is_the_divisions() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut spans: Vec<u64> = vec![
            0,
            1,
            2,
            3,
            7,
            1_000,
            50_000,
            65_535,
            65_536,
            (1 << 31) - 1,
            1 << 31,
            (1 << 32) - 1,
            1 << 32,
            (1 << 32) + 1,
            u64::MAX,
        ];
        spans.extend((0..2_000).map(|i| if i % 2 == 0 { next() >> (32 + next() % 31) } else { next() >> 32 }));
        for &d in &spans {
            let p = Period::new(Span::from_ps(d));
            let unit = Span::from_ps(d.max(1));
            assert_eq!(p.span(), unit);
            let mut xs: Vec<u64> = vec![0, 1, (1 << 32) - 1, 1 << 32, u64::MAX - d.max(1), u64::MAX];
            for k in [1u64, 2, 3, 1_000, 1 << 20] {
                let m = unit.ps().saturating_mul(k);
                xs.extend([m - 1, m, m.saturating_add(1)]);
            }
            xs.extend((0..200).map(|i| if i % 2 == 0 { next() >> 32 } else { next() >> (next() % 64) }));
            for x in xs {
                assert_eq!(p.count_ceil(Span::from_ps(x)), Span::from_ps(x).div_ceil(unit), "{x} / {d}");
            }
        }
    }

    #[test]
    fn float_times_round_half_up_to_whole_picoseconds() {
        assert_eq!(Span::from_ps_f64(2.4), Span::from_ps(2));
        assert_eq!(Span::from_ps_f64(2.5), Span::from_ps(3));
        assert_eq!(Span::from_ps_f64(1.2e19), Span::from_ps(12_000_000_000_000_000_000));
        for ps in [0.0, 0.49, 2.5, 67_200.4, 1e13 * 36.8, 4.0e18] {
            assert_eq!(Span::from_ps_f64_small(ps), Span::from_ps_f64(ps), "{ps}");
        }
    }

    #[test]
    fn a_64_byte_frame_takes_67_2_ns_at_10_gbit() {
        assert_eq!(wire_time(64, 20, 1e10), Span::from_ps(67_200));
        let mut w = WireTime::new(20, 1e10);
        assert_eq!(w.of(64), Span::from_ps(67_200));
        assert_eq!(w.of(1518), Span::from_ps(1_230_400));
    }
}
