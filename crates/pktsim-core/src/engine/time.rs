//! Simulated time: an integer count of picoseconds.

/// A point in simulated time, in picoseconds since the start of the run.
pub type Ps = u64;

pub const PS_PER_NS: Ps = 1_000;
pub const PS_PER_US: Ps = 1_000_000;
pub const PS_PER_S: Ps = 1_000_000_000_000;

/// Picoseconds a link needs for `bytes` of frame plus `overhead` bytes at `bps`.
pub fn wire_time_ps(bytes: u64, overhead: u64, bps: f64) -> Ps {
    round_ps(((bytes + overhead) as f64 * 8.0) / bps * 1e12)
}

/// Round a non-negative time to whole picoseconds (half up; no libm call on the hot path).
#[inline]
pub fn round_ps(x: f64) -> Ps {
    (x + 0.5) as Ps
}

/// Wire time of the last frame size seen: frames mostly repeat their size.
#[derive(Debug, Clone, Copy)]
pub struct WireTime {
    overhead: u64,
    bps: f64,
    last: (u16, Ps),
}

impl WireTime {
    pub fn new(overhead: u64, bps: f64) -> Self {
        WireTime { overhead, bps, last: (0, wire_time_ps(0, overhead, bps)) }
    }

    #[inline]
    pub fn of(&mut self, size: u16) -> Ps {
        if self.last.0 != size {
            self.last = (size, wire_time_ps(size as u64, self.overhead, self.bps));
        }
        self.last.1
    }
}
