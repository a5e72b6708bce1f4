//! One rx ring: descriptors the NIC may write, frames written back and waiting for the
//! driver, descriptors the driver cleaned and has not yet given back.
//!
//! ```text
//!                 write-back (NIC)            take (driver)            refill (driver)
//!   hw_avail ---------------------> frames -----------------> unrefilled ----------> hw_avail
//!        no free descriptor: the frame is dropped (rx_missed_errors)
//! ```
//!
//! Invariant: `hw_avail + frames + unrefilled` is the ring's usable size (`size - 1` on a
//! NIC, which always leaves one descriptor empty; `size` on a software ring).

use crate::engine::ingress::Packet;
use crate::engine::time::Instant;

/// Frames a run of write-backs stores before it knows how many of them are due
/// ([`RxRing::write_back_prefix`]).
pub(super) const RUN: usize = 4;

/// A ring's frames in a power-of-two buffer, as many slots as the ring can hold frames
/// (rounded up): a run of write-backs, made only where at least [`RUN`] descriptors are
/// free, stores all of its frames into the slots after the newest and then counts in those
/// that were due, with no branch per frame. (A general ring buffer, such as
/// `ringbuffer`'s, has no slots past its newest entry to store into.) `RUN` more slots
/// follow the buffer's end, so that a run is stored in one piece.
struct Frames {
    /// `mask + 1 + RUN` slots.
    buf: Box<[Packet]>,
    /// Frames taken and written since the start (they never wrap: 2^64 frames).
    head: usize,
    tail: usize,
    mask: usize,
}

impl Frames {
    fn new(holds: usize) -> Self {
        let cap = holds.max(1).next_power_of_two();
        Frames { buf: vec![Packet::default(); cap + RUN].into_boxed_slice(), head: 0, tail: 0, mask: cap - 1 }
    }
    #[inline(always)]
    fn len(&self) -> usize {
        self.tail - self.head
    }
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.tail == self.head
    }
    #[inline(always)]
    fn peek(&self) -> Option<&Packet> {
        (!self.is_empty()).then(|| &self.buf[self.head & self.mask])
    }
    #[inline(always)]
    fn push(&mut self, p: Packet) {
        debug_assert!(self.len() <= self.mask);
        self.buf[self.tail & self.mask] = p;
        self.tail += 1;
    }
    #[inline(always)]
    fn pop(&mut self) -> Option<Packet> {
        if self.is_empty() {
            return None;
        }
        let p = self.buf[self.head & self.mask];
        self.head += 1;
        Some(p)
    }
}

/// How many of a ring's entries can hold frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxRingKind {
    /// A NIC descriptor ring: one descriptor always stays empty (head != tail).
    Descriptors,
    /// A software ring such as veth's ptr_ring: every entry can hold a frame, and an entry
    /// is free again as soon as its frame is taken.
    Software,
}

/// One rx ring.
pub struct RxRing {
    /// Frames written back and not yet taken by the driver (at most the ring's size: a
    /// power-of-two buffer, so a write-back and a take are a masked index each).
    frames: Frames,
    /// Descriptors the NIC may write into.
    hw_avail: u32,
    /// Descriptors taken by the driver and not yet given back.
    unrefilled: u32,
    /// Time of the latest write-back (the latest interrupt cause).
    last_write: Instant,
    /// Whether a frame was ever written back (`last_write` is its time).
    written: bool,
    /// The owner wants to hear of the next write-back.
    wake: bool,
    vector: usize,
}

impl RxRing {
    pub fn new(size: u32, vector: usize, kind: RxRingKind) -> Self {
        let usable = match kind {
            RxRingKind::Descriptors => size - 1,
            RxRingKind::Software => size,
        };
        RxRing {
            frames: Frames::new(usable as usize),
            hw_avail: usable,
            unrefilled: 0,
            last_write: Instant::ZERO,
            written: false,
            wake: false,
            vector,
        }
    }

    /// Frames waiting for the driver.
    #[inline]
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    /// The oldest waiting frame.
    #[inline]
    pub fn head(&self) -> Option<&Packet> {
        self.frames.peek()
    }
    /// Vector whose interrupt this ring raises.
    pub fn vector(&self) -> usize {
        self.vector
    }
    /// Descriptors the driver holds (taken, not yet given back).
    pub fn unrefilled(&self) -> u32 {
        self.unrefilled
    }
    /// Descriptors the NIC may write into now.
    pub fn free(&self) -> u32 {
        self.hw_avail
    }
    /// Time of the latest write-back.
    pub fn last_write(&self) -> Option<Instant> {
        self.written.then_some(self.last_write)
    }
    /// Whether the owner waits to hear of the next write-back.
    pub fn is_armed(&self) -> bool {
        self.wake
    }

    /// The NIC writes a frame back: false (and nothing changes) when no descriptor is free;
    /// true when it is in the ring, and then `woken` is whether its owner was waiting for it
    /// (the wish is used up).
    #[inline]
    pub(super) fn write_back(&mut self, p: Packet) -> Option<bool> {
        if self.hw_avail == 0 {
            return None;
        }
        self.hw_avail -= 1;
        (self.last_write, self.written) = (p.t_ring, true);
        self.frames.push(p);
        Some(std::mem::take(&mut self.wake))
    }

    /// [`RxRing::write_back`] of the first `n` of `next`, each into a free descriptor and
    /// with nobody to wake (at least [`RUN`] descriptors free, the ring not armed): all of
    /// `next` is stored, into the slots after the newest frame, and the first `n` counted
    /// in, without a branch on `n`.
    #[inline(always)]
    pub(super) fn write_back_prefix(&mut self, next: &[Packet; RUN], n: usize) {
        debug_assert!(n <= RUN && RUN <= self.hw_avail as usize && !self.wake);
        let f = &mut self.frames;
        let at = f.tail & f.mask;
        // (Frame by frame: as one 160-byte copy it would be a call to `memcpy`.)
        let slots: &mut [Packet; RUN] = (&mut f.buf[at..at + RUN]).try_into().expect("RUN slots");
        for (slot, p) in slots.iter_mut().zip(next) {
            *slot = *p;
        }
        // Past the end: those frames' slots are at the start.
        let cap = f.mask + 1;
        if at + RUN > cap {
            f.buf.copy_within(cap..at + RUN, 0);
        }
        f.tail += n;
        self.hw_avail -= n as u32;
        // The newest frame's time if there is one, else the time as it was: a select on
        // the bits, as a branch on `n` would be mispredicted.
        let keep = u64::from(n == 0).wrapping_neg();
        let newest = next[n.saturating_sub(1)].t_ring.ps();
        self.last_write = Instant::from_ps((self.last_write.ps() & keep) | (newest & !keep));
        self.written |= n > 0;
    }

    /// A frame written back at `t_ring` into a free descriptor of an empty ring and taken
    /// at once ([`RxRing::write_back`] then [`RxRing::take`], without storing it): whether
    /// it wakes the ring's owner.
    #[inline]
    pub(super) fn pass(&mut self, t_ring: Instant) -> bool {
        debug_assert!(self.frames.is_empty() && self.hw_avail > 0, "an empty ring with a free descriptor");
        self.hw_avail -= 1;
        (self.last_write, self.written) = (t_ring, true);
        self.unrefilled += 1;
        std::mem::take(&mut self.wake)
    }

    /// The driver takes the oldest frame; its descriptor is the driver's until refilled.
    #[inline]
    pub(super) fn take(&mut self) -> Option<Packet> {
        let p = self.frames.pop()?;
        self.unrefilled += 1;
        Some(p)
    }

    /// [`RxRing::take`] into `out` (true), or false when the ring is empty.
    #[inline]
    pub(super) fn take_into(&mut self, out: &mut Packet) -> bool {
        match self.frames.pop() {
            Some(p) => {
                *out = p;
                self.unrefilled += 1;
                true
            }
            None => false,
        }
    }

    /// Give every taken descriptor back to the NIC (one tail write for the batch).
    #[inline]
    pub(super) fn refill(&mut self) {
        self.hw_avail += self.unrefilled;
        self.unrefilled = 0;
    }

    /// Give back `n` of the taken descriptors (at most those held): a zero-copy driver
    /// posts only as many as it found buffers for (`xsk_buff_alloc_batch`).
    #[inline]
    pub(super) fn refill_n(&mut self, n: u32) -> u32 {
        let n = n.min(self.unrefilled);
        self.hw_avail += n;
        self.unrefilled -= n;
        n
    }

    /// Take `n` free descriptors back from the NIC (at most those free), unposted: a
    /// zero-copy ring starts with as many buffers as the fill ring gave it.
    pub(super) fn withhold(&mut self, n: u32) {
        let n = n.min(self.hw_avail);
        self.hw_avail -= n;
        self.unrefilled += n;
    }

    pub(super) fn set_armed(&mut self, armed: bool) {
        self.wake = armed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(t: u64) -> Packet {
        let mut p = Packet::arriving(Instant::from_ps(t), 64, 0, 0);
        p.t_ring = p.t_wire;
        p
    }

    #[test]
    fn a_descriptor_ring_of_four_holds_three_frames_until_refilled() {
        let mut r = RxRing::new(4, 0, RxRingKind::Descriptors);
        assert_eq!(r.free(), 3);
        for t in 0..3 {
            assert_eq!(r.write_back(frame(t)), Some(false));
        }
        assert_eq!(r.write_back(frame(3)), None, "full: dropped");
        assert_eq!(r.take().map(|p| p.t_wire), Some(Instant::from_ps(0)), "oldest first");
        assert_eq!((r.len(), r.unrefilled(), r.free()), (2, 1, 0));
        assert_eq!(r.write_back(frame(4)), None, "a taken descriptor is not free until refilled");
        r.refill();
        assert_eq!((r.unrefilled(), r.free()), (0, 1));
        assert_eq!(r.write_back(frame(5)), Some(false));
        assert_eq!(r.last_write(), Some(Instant::from_ps(5)));
    }

    #[test]
    fn a_software_ring_uses_every_entry() {
        let mut r = RxRing::new(4, 0, RxRingKind::Software);
        for t in 0..4 {
            assert!(r.write_back(frame(t)).is_some());
        }
        assert!(r.write_back(frame(4)).is_none());
    }

    /// A run of write-backs is the write-backs one by one: where the run's slots wrap past
    /// the buffer's end, and where none of it is due (the ring as it was, no write-back
    /// time yet).
    #[test]
    fn a_run_of_write_backs_is_the_write_backs_one_by_one() {
        for (start, left) in (0..20).flat_map(|s| [(s, false), (s, true)]) {
            for n in 0..=RUN {
                let next: [Packet; RUN] = std::array::from_fn(|k| frame(100 + k as u64));
                let (mut run, mut one_by_one) =
                    (RxRing::new(8, 0, RxRingKind::Descriptors), RxRing::new(8, 0, RxRingKind::Descriptors));
                for r in [&mut run, &mut one_by_one] {
                    // Move the ring's start on, leaving a frame in it or not.
                    for t in 0..start {
                        r.write_back(frame(t));
                        r.take();
                        r.refill();
                    }
                    if left {
                        r.write_back(frame(start));
                    }
                }
                run.write_back_prefix(&next, n);
                for p in &next[..n] {
                    assert_eq!(one_by_one.write_back(*p), Some(false));
                }
                let what = format!("start {start}, a frame left {left}, {n} due");
                assert_eq!(
                    (run.len(), run.free(), run.last_write()),
                    (one_by_one.len(), one_by_one.free(), one_by_one.last_write()),
                    "{what}"
                );
                assert_eq!(run.last_write().is_none(), start == 0 && !left && n == 0, "{what}");
                while let Some(p) = one_by_one.take() {
                    assert_eq!(run.take().map(|q| q.t_ring), Some(p.t_ring), "{what}");
                }
                assert!(run.is_empty(), "{what}");
            }
        }
    }

    #[test]
    fn an_armed_ring_wakes_its_owner_once() {
        let mut r = RxRing::new(8, 0, RxRingKind::Descriptors);
        r.set_armed(true);
        assert_eq!(r.write_back(frame(1)), Some(true));
        assert!(!r.is_armed());
        assert_eq!(r.write_back(frame(2)), Some(false));
    }
}
