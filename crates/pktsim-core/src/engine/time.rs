//! Simulated time: an integer count of picoseconds.

/// A point in simulated time, in picoseconds since the start of the run.
pub type Ps = u64;

pub const PS_PER_NS: Ps = 1_000;
pub const PS_PER_US: Ps = 1_000_000;
pub const PS_PER_S: Ps = 1_000_000_000_000;

/// Picoseconds a link needs for `bytes` of frame plus `overhead` bytes at `bps`.
pub fn wire_time_ps(bytes: u64, overhead: u64, bps: f64) -> Ps {
    (((bytes + overhead) as f64 * 8.0) / bps * 1e12).round() as Ps
}
