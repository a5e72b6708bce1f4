//! Generic dynamic interrupt moderation, the kernel's `net_dim` (`lib/dim/net_dim.c`:
//! `net_dim`, `net_dim_decision`, `net_dim_step`, `net_dim_stats_compare`; `lib/dim/dim.c`:
//! `dim_calc_stats`, `dim_on_top`, `dim_turn`, `dim_park_on_top`, `dim_park_tired`), with
//! the profile tables of `net_dim.c` (mlx5) and of `ice_main.c` (ice).
//!
//! ```text
//!   every napi_complete (the driver's sample: interrupts, packets, bytes, now)
//!     START_MEASURE        -> the sample opens a window
//!     MEASURE_IN_PROGRESS  -> fewer than DIM_NEVENTS = 64 interrupts since the window
//!                             opened: wait; else rates per ms (bytes, packets, events)
//!                             compared with the last window's:
//!                               bytes differ by > 10%: more is BETTER; else packets;
//!                               else events (fewer is BETTER); else SAME
//!                             decision: walk right (more moderation) / left while BETTER,
//!                             turn when not, park on top of a peak, park tired after
//!                             10 steps; a new profile index is applied, else the sample
//!                             opens the next window
//! ```
//!
//! A profile is (µs, frames): the vector interrupts `µs` after its timer starts or as soon
//! as `frames` write-backs wait in its rx ring, whichever comes first. The timer starts
//! when the last interrupt fired (mlx5 EQE mode, `cq_period_mode` 0, and ice) or at the
//! first completion after the vector was re-armed (mlx5 CQE mode, `cq_period_mode` 1: a
//! lone frame always waits `µs`); ice counts no frames. (Read as a quiet-time timer that
//! every completion restarts, CQE mode would hold frames until the count fills at any rate
//! above one per interval: 64 µs and more at 1 Mpps, where the XDP paper measured 7 µs mean
//! latency with `rx_cqe_moder` on.)
//!
//! The kernel applies a new profile from a work item (`schedule_work`) a few µs later and
//! ignores samples until then; here it applies at once and the next completion opens the
//! next window. A vector that serves an rx ring samples rx packets and bytes with the rx
//! table; a tx-only vector samples tx with the tx table (mlx5 and ice run one `struct dim`
//! per direction).
//!
//! What the sample counts is the driver's. mlx5 samples its rq statistics, which count a
//! frame only when it builds an skb for it (`rq->stats->packets` in
//! `mlx5e_complete_rx_cqe`); a frame a native XDP program drops, sends back or redirects
//! (to an AF_XDP socket too) ends before that (`mlx5e_handle_rx_cqe`: `skb_from_cqe`
//! returns NULL), so its DIM sees no packets and no bytes. Every window then compares the
//! same to the last (`prev->bpms` is 0: SAME), and DIM stays parked at the profile it
//! started with, `NET_DIM_DEF_PROFILE_CQE` / `_EQE` (8 µs). ice counts XDP frames in the
//! totals its DIM reads (`ice_clean_rx_irq`), so its DIM walks as without XDP.

use serde_json::json;

use super::{Episode, Moderation};
use crate::engine::time::{Instant, Span, PS_PER_US};
use crate::scenario::DimProfile;

/// `DIM_NEVENTS`: interrupts per measurement window.
pub const NEVENTS: u64 = 64;
/// `NET_DIM_PARAMS_NUM_PROFILES`.
const PROFILES: usize = 5;
/// `NET_DIM_DEF_PROFILE_EQE`, `NET_DIM_DEF_PROFILE_CQE`, `ICE_DIM_DEFAULT_PROFILE_IX`.
const DEFAULT_IX: usize = 1;

/// (µs, frames) per profile index; frames 0: no frame count.
type Table = [(u32, u32); PROFILES];

const MLX5_RX_EQE: Table = [(1, 256), (8, 256), (64, 256), (128, 256), (256, 256)];
const MLX5_RX_CQE: Table = [(2, 256), (8, 128), (16, 64), (32, 64), (64, 64)];
const MLX5_TX_EQE: Table = [(1, 128), (8, 128), (32, 128), (64, 128), (128, 128)];
const MLX5_TX_CQE: Table = [(5, 128), (8, 64), (16, 32), (32, 32), (64, 32)];
const ICE_RX: Table = [(2, 0), (8, 0), (16, 0), (62, 0), (126, 0)];
const ICE_TX: Table = [(2, 0), (8, 0), (40, 0), (128, 0), (256, 0)];

/// The profile table of a device and direction.
pub fn table(profile: DimProfile, rx: bool) -> &'static Table {
    match (profile, rx) {
        (DimProfile::Mlx5Eqe, true) => &MLX5_RX_EQE,
        (DimProfile::Mlx5Eqe, false) => &MLX5_TX_EQE,
        (DimProfile::Mlx5Cqe, true) => &MLX5_RX_CQE,
        (DimProfile::Mlx5Cqe, false) => &MLX5_TX_CQE,
        (DimProfile::Ice, true) => &ICE_RX,
        (DimProfile::Ice, false) => &ICE_TX,
    }
}

/// `enum dim_tune_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tune {
    ParkingOnTop,
    ParkingTired,
    GoingRight,
    GoingLeft,
}

/// `struct dim_stats`: rates per millisecond of one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rates {
    pub ppms: u64,
    pub bpms: u64,
    pub epms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Better,
    Worse,
    Same,
}

/// `struct dim_sample`: running counters at a completion.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    time: Instant,
    events: u64,
    packets: u64,
    bytes: u64,
}

/// `IS_SIGNIFICANT_DIFF`: more than 10% apart (integer percent, as the kernel computes it).
fn significant(val: u64, reference: u64) -> bool {
    reference != 0 && 100 * val.abs_diff(reference) / reference > 10
}

/// `net_dim_stats_compare`.
fn compare(curr: &Rates, prev: &Rates) -> Cmp {
    let more_is_better = |c: u64, p: u64| if c > p { Cmp::Better } else { Cmp::Worse };
    if prev.bpms == 0 {
        return if curr.bpms > 0 { Cmp::Better } else { Cmp::Same };
    }
    if significant(curr.bpms, prev.bpms) {
        return more_is_better(curr.bpms, prev.bpms);
    }
    if prev.ppms == 0 {
        return if curr.ppms > 0 { Cmp::Better } else { Cmp::Same };
    }
    if significant(curr.ppms, prev.ppms) {
        return more_is_better(curr.ppms, prev.ppms);
    }
    if prev.epms == 0 {
        return Cmp::Same;
    }
    if significant(curr.epms, prev.epms) {
        return if curr.epms < prev.epms { Cmp::Better } else { Cmp::Worse };
    }
    Cmp::Same
}

/// `dim_calc_stats`: None for a window of less than a microsecond.
fn rates(start: &Sample, end: &Sample) -> Option<Rates> {
    let delta_us = (end.time.ps() - start.time.ps()) / PS_PER_US;
    if delta_us == 0 {
        return None;
    }
    let per_ms = |n: u64| (n * 1000).div_ceil(delta_us);
    Some(Rates {
        ppms: per_ms(end.packets - start.packets),
        bpms: per_ms(end.bytes - start.bytes),
        epms: per_ms(NEVENTS),
    })
}

/// `struct dim` and the profile table it walks.
pub struct Dim {
    table: &'static Table,
    rx: bool,
    /// The driver counts the rx frames where DIM samples them (not an mlx5 driver whose
    /// native XDP program takes every frame).
    rx_counted: bool,
    from_first_cause: bool,
    name: &'static str,
    pub profile_ix: usize,
    pub tune: Tune,
    steps_left: u32,
    steps_right: u32,
    tired: u32,
    /// A window is open (`DIM_MEASURE_IN_PROGRESS`) from this sample.
    start: Option<Sample>,
    prev: Rates,
    now: Sample,
    /// Windows closed and profile changes, for the report.
    pub windows: u64,
    pub changes: u64,
}

impl Dim {
    /// DIM on a vector with an rx ring (`rx`) or a tx-only vector, with a device's tables;
    /// `xdp_consumes`: a native XDP program takes every rx frame before an skb exists.
    pub fn new(profile: DimProfile, rx: bool, xdp_consumes: bool) -> Self {
        Dim {
            table: table(profile, rx),
            rx,
            rx_counted: !(xdp_consumes && profile != DimProfile::Ice),
            from_first_cause: profile == DimProfile::Mlx5Cqe,
            name: "dim",
            profile_ix: DEFAULT_IX,
            tune: Tune::ParkingOnTop,
            steps_left: 0,
            steps_right: 0,
            tired: 0,
            start: None,
            prev: Rates::default(),
            now: Sample::default(),
            windows: 0,
            changes: 0,
        }
    }

    /// `net_dim_step`: false when on an edge or too tired to step (nothing changes then).
    fn step(&mut self) -> Step {
        if self.tired == 2 * PROFILES as u32 {
            return Step::TooTired;
        }
        match self.tune {
            Tune::GoingRight if self.profile_ix == PROFILES - 1 => return Step::OnEdge,
            Tune::GoingRight => {
                self.profile_ix += 1;
                self.steps_right += 1;
            }
            Tune::GoingLeft if self.profile_ix == 0 => return Step::OnEdge,
            Tune::GoingLeft => {
                self.profile_ix -= 1;
                self.steps_left += 1;
            }
            Tune::ParkingOnTop | Tune::ParkingTired => {}
        }
        self.tired += 1;
        Step::Stepped
    }

    fn exit_parking(&mut self) {
        self.tune = if self.profile_ix > 0 { Tune::GoingLeft } else { Tune::GoingRight };
        self.step();
    }

    fn park_on_top(&mut self) {
        (self.steps_left, self.steps_right, self.tired) = (0, 0, 0);
        self.tune = Tune::ParkingOnTop;
    }

    fn park_tired(&mut self) {
        (self.steps_left, self.steps_right) = (0, 0);
        self.tune = Tune::ParkingTired;
    }

    fn on_top(&self) -> bool {
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => true,
            Tune::GoingRight => self.steps_left > 1 && self.steps_right == 1,
            Tune::GoingLeft => self.steps_right > 1 && self.steps_left == 1,
        }
    }

    fn turn(&mut self) {
        match self.tune {
            Tune::GoingRight => {
                self.tune = Tune::GoingLeft;
                self.steps_left = 0;
            }
            Tune::GoingLeft => {
                self.tune = Tune::GoingRight;
                self.steps_right = 0;
            }
            Tune::ParkingOnTop | Tune::ParkingTired => {}
        }
    }

    /// `net_dim_decision`: whether the profile index changed.
    pub fn decide(&mut self, curr: &Rates) -> bool {
        let (prev_tune, prev_ix) = (self.tune, self.profile_ix);
        match self.tune {
            Tune::ParkingOnTop => {
                if compare(curr, &self.prev) != Cmp::Same {
                    self.exit_parking();
                }
            }
            Tune::ParkingTired => {
                self.tired -= 1;
                if self.tired == 0 {
                    self.exit_parking();
                }
            }
            Tune::GoingRight | Tune::GoingLeft => {
                if compare(curr, &self.prev) != Cmp::Better {
                    self.turn();
                }
                if self.on_top() {
                    self.park_on_top();
                } else {
                    match self.step() {
                        Step::OnEdge => self.park_on_top(),
                        Step::TooTired => self.park_tired(),
                        Step::Stepped => {}
                    }
                }
            }
        }
        if prev_tune != Tune::ParkingOnTop || self.tune != Tune::ParkingOnTop {
            self.prev = *curr;
        }
        self.profile_ix != prev_ix
    }

    /// `net_dim` with the driver's sample at a completion.
    fn sample(&mut self, s: Sample) {
        if let Some(start) = self.start {
            if s.events - start.events < NEVENTS {
                return;
            }
            let Some(curr) = rates(&start, &s) else { return };
            self.windows += 1;
            if self.decide(&curr) {
                // DIM_APPLY_NEW_PROFILE; the work item applies it and measuring restarts
                // at the next completion.
                self.changes += 1;
                self.start = None;
                return;
            }
        }
        self.start = Some(s);
    }
}

enum Step {
    Stepped,
    OnEdge,
    TooTired,
}

impl Moderation for Dim {
    fn interval(&self) -> Span {
        Span::from_us(self.table[self.profile_ix].0 as u64)
    }
    fn max_frames(&self) -> u32 {
        self.table[self.profile_ix].1
    }
    fn timer_from_first_cause(&self) -> bool {
        self.from_first_cause
    }
    fn episode_done(&mut self, now: Instant, ep: &Episode) {
        let (packets, bytes) = match (self.rx, self.rx_counted) {
            (true, true) => (ep.rx_packets, ep.rx_bytes),
            (true, false) => (0, 0),
            (false, _) => (ep.tx_packets, ep.tx_bytes),
        };
        self.now = Sample {
            time: now,
            events: self.now.events + ep.irqs,
            packets: self.now.packets + packets,
            bytes: self.now.bytes + bytes,
        };
        self.sample(self.now);
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn figures(&self) -> serde_json::Value {
        let (usec, frames) = self.table[self.profile_ix];
        json!({"profile_ix": self.profile_ix, "usec": usec, "frames": frames, "windows": self.windows, "changes": self.changes})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(bpms: u64, ppms: u64, epms: u64) -> Rates {
        Rates { bpms, ppms, epms }
    }

    #[test]
    fn more_than_ten_percent_is_significant_in_integer_percent() {
        assert!(!significant(110, 100), "exactly 10% is not");
        assert!(significant(111, 100));
        assert!(!significant(91, 100));
        assert!(significant(89, 100));
        assert!(!significant(5, 0), "nothing to compare with");
        // 100 * 11 / 100 = 11 > 10; 100 * 10 / 99 = 10 (integer): not significant.
        assert!(!significant(109, 99));
    }

    #[test]
    fn bytes_decide_then_packets_then_fewer_events() {
        assert_eq!(compare(&r(0, 0, 0), &r(0, 9, 9)), Cmp::Same);
        assert_eq!(compare(&r(1, 0, 0), &r(0, 9, 9)), Cmp::Better);
        assert_eq!(compare(&r(120, 1, 1), &r(100, 100, 100)), Cmp::Better);
        assert_eq!(compare(&r(80, 1000, 1), &r(100, 100, 100)), Cmp::Worse, "bytes first");
        assert_eq!(compare(&r(105, 120, 1), &r(100, 100, 100)), Cmp::Better, "then packets");
        assert_eq!(compare(&r(105, 105, 50), &r(100, 100, 100)), Cmp::Better, "then fewer events");
        assert_eq!(compare(&r(105, 105, 150), &r(100, 100, 100)), Cmp::Worse);
        assert_eq!(compare(&r(105, 105, 105), &r(100, 100, 100)), Cmp::Same);
    }

    /// From the initial state (parked on top at index 1), traced through
    /// `net_dim_decision`: a better window leaves parking to the left; a worse one turns;
    /// having gone right three steps, one step back that is still better is a peak:
    /// parked on top, where windows within 10% change nothing and keep the old reference.
    #[test]
    fn the_walk_leaves_parking_turns_and_parks_on_a_peak() {
        let mut d = Dim::new(DimProfile::Mlx5Eqe, true, false);
        assert_eq!((d.profile_ix, d.tune), (1, Tune::ParkingOnTop));
        assert!(d.decide(&r(100, 10, 10)), "bpms 0 -> 100: better, exit parking leftwards");
        assert_eq!((d.profile_ix, d.tune), (0, Tune::GoingLeft));
        assert!(d.decide(&r(50, 10, 10)), "worse: turn right and step");
        assert_eq!((d.profile_ix, d.tune), (1, Tune::GoingRight));
        assert!(d.decide(&r(80, 10, 10)), "better: keep going right");
        assert!(d.decide(&r(100, 10, 10)));
        assert_eq!((d.profile_ix, d.tune, d.steps_right), (3, Tune::GoingRight, 3));
        assert!(d.decide(&r(50, 10, 10)), "worse: turn left, one step");
        assert_eq!((d.profile_ix, d.tune, d.steps_left), (2, Tune::GoingLeft, 1));
        assert!(!d.decide(&r(60, 10, 10)), "better, but 3 steps right and 1 back: on top");
        assert_eq!((d.profile_ix, d.tune, d.tired), (2, Tune::ParkingOnTop, 0));
        assert!(!d.decide(&r(61, 10, 10)), "within 10%: stays parked");
        assert_eq!(d.prev, r(60, 10, 10), "the reference is kept while parked on top");
        assert!(d.decide(&r(200, 10, 10)), "better: leaves parking leftwards");
        assert_eq!((d.profile_ix, d.tune), (1, Tune::GoingLeft));
    }

    #[test]
    fn a_step_that_is_not_significantly_better_turns_the_walk() {
        let mut d = Dim::new(DimProfile::Mlx5Cqe, true, false);
        d.tune = Tune::GoingLeft;
        (d.steps_right, d.steps_left, d.profile_ix) = (2, 0, 3);
        d.prev = r(100, 10, 10);
        assert!(d.decide(&r(120, 10, 10)), "better: step left, steps_left 1");
        assert_eq!(d.profile_ix, 2);
        assert!(d.decide(&r(130, 10, 10)), "8% more bytes is the same: turn right and step");
        assert_eq!((d.profile_ix, d.tune, d.steps_right), (3, Tune::GoingRight, 1));
    }

    #[test]
    fn ten_steps_make_it_tired_and_it_rests_as_many_windows() {
        let mut d = Dim::new(DimProfile::Ice, true, false);
        d.tune = Tune::GoingRight;
        d.profile_ix = 0;
        d.tired = 10;
        d.prev = r(100, 10, 10);
        assert!(!d.decide(&r(200, 10, 10)));
        assert_eq!(d.tune, Tune::ParkingTired);
        for _ in 0..9 {
            assert!(!d.decide(&r(200, 10, 10)));
        }
        assert_eq!(d.tune, Tune::ParkingTired);
        assert!(d.decide(&r(200, 10, 10)), "the tenth rest exits parking (rightwards from index 0)");
        assert_eq!((d.profile_ix, d.tune), (1, Tune::GoingRight));
    }

    /// An mlx5 EQE policy for an rx (`rx`) or a tx vector after 65 episodes of `ep`, 10 us
    /// apart: the first opens a window, the 65th closes it (64 interrupts since).
    fn one_window(rx: bool, ep: Episode) -> Dim {
        one_window_of(Dim::new(DimProfile::Mlx5Eqe, rx, false), ep)
    }

    fn one_window_of(mut d: Dim, ep: Episode) -> Dim {
        d.episode_done(Instant::from_ps(0), &ep);
        for i in 1..64u64 {
            d.episode_done(Instant::from_ps(i * 10 * PS_PER_US), &ep);
        }
        assert_eq!(d.windows, 0, "63 interrupts since the window opened");
        d.episode_done(Instant::from_ps(640 * PS_PER_US), &ep);
        assert_eq!(d.windows, 1);
        d
    }

    /// 64 interrupts close a window; rates are per ms over whole µs, rounded up.
    #[test]
    fn a_window_closes_after_64_interrupts() {
        let d = one_window(true, Episode { rx_packets: 10, rx_bytes: 600, irqs: 1, ..Episode::default() });
        // 640 packets in 640 us: 1000 ppms; 38400 bytes: 60000 bpms; 64 events: 100 epms.
        assert_eq!(d.prev, Rates { ppms: 1000, bpms: 60_000, epms: 100 });
        assert_eq!((d.profile_ix, d.changes), (0, 1), "better than nothing: left to index 0");
        assert_eq!(d.interval(), Span::from_us(1));
        assert_eq!(d.max_frames(), 256);
        assert_eq!(
            rates(
                &Sample { time: Instant::from_ps(0), ..Sample::default() },
                &Sample { time: Instant::from_ps(999_999), ..Sample::default() }
            ),
            None
        );
    }

    /// A tx-only vector (`Dim::new(.., false)`) samples tx packets and bytes and walks the
    /// tx table. 65 episodes of 10 tx packets / 600 tx bytes (no rx), 10 us apart: the first
    /// opens the window, the 65th closes it with 64 interrupts over 640 us: 1000 ppms,
    /// 60000 bpms, 100 epms. Against the empty reference (bpms 0) that is BETTER: parked on
    /// top at index 1 it exits leftwards to index 0, which in `MLX5_TX_EQE` is (1 us, 128
    /// frames) (the rx table's index 0 has 256 frames; sampling the rx counters would
    /// see bpms 0: SAME, and stay at index 1, 8 us).
    #[test]
    fn a_tx_only_vector_samples_tx_counters_and_walks_the_tx_table() {
        let d = one_window(false, Episode { tx_packets: 10, tx_bytes: 600, irqs: 1, ..Episode::default() });
        assert_eq!(d.prev, Rates { ppms: 1000, bpms: 60_000, epms: 100 });
        assert_eq!((d.profile_ix, d.tune, d.changes), (0, Tune::GoingLeft, 1));
        assert_eq!(d.interval(), Span::from_us(1));
        assert_eq!(d.max_frames(), 128);
    }

    /// A native XDP program that takes every frame: an mlx5 driver counts none of them
    /// where its DIM samples, so the window has no bytes, compares SAME with the empty
    /// reference and DIM stays parked at index 1 (8 us) whatever the load; ice counts
    /// them and walks as without XDP (better than nothing: left to index 0).
    #[test]
    fn mlx5_dim_does_not_see_frames_a_native_xdp_program_takes() {
        let ep = Episode { rx_packets: 10, rx_bytes: 600, irqs: 1, ..Episode::default() };
        let d = one_window_of(Dim::new(DimProfile::Mlx5Cqe, true, true), ep);
        assert_eq!((d.windows, d.prev), (1, Rates::default()), "parked on top, SAME keeps the reference");
        assert_eq!((d.profile_ix, d.tune, d.changes), (1, Tune::ParkingOnTop, 0));
        assert_eq!((d.interval(), d.max_frames()), (Span::from_us(8), 128));
        let mut d = d;
        for i in 0..6400u64 {
            d.episode_done(Instant::from_ps((650 + i * 10) * PS_PER_US), &Episode { rx_packets: 1 + i % 50, ..ep });
        }
        assert_eq!((d.windows, d.profile_ix, d.changes), (101, 1, 0), "a hundred windows later, at any load");
        let ice = one_window_of(Dim::new(DimProfile::Ice, true, true), ep);
        assert_eq!((ice.profile_ix, ice.changes), (0, 1));
    }

    #[test]
    fn tables_are_the_kernels() {
        assert_eq!(table(DimProfile::Mlx5Cqe, true)[DEFAULT_IX], (8, 128));
        assert_eq!(table(DimProfile::Mlx5Eqe, false)[4], (128, 128));
        assert_eq!(table(DimProfile::Ice, true).map(|p| p.0), [2, 8, 16, 62, 126]);
        assert!(Dim::new(DimProfile::Mlx5Cqe, true, false).timer_from_first_cause());
        assert!(!Dim::new(DimProfile::Ice, true, false).timer_from_first_cause());
        assert_eq!(Dim::new(DimProfile::Ice, true, false).max_frames(), 0);
    }
}
