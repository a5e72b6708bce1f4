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

use ringbuffer::{AllocRingBuffer, RingBuffer};

use crate::engine::ingress::Packet;
use crate::engine::time::Instant;

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
    frames: AllocRingBuffer<Packet>,
    /// Descriptors the NIC may write into.
    hw_avail: u32,
    /// Descriptors taken by the driver and not yet given back.
    unrefilled: u32,
    /// Time of the latest write-back (the latest interrupt cause).
    last_write: Option<Instant>,
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
        RxRing { frames: AllocRingBuffer::new(size.max(1) as usize), hw_avail: usable, unrefilled: 0, last_write: None, wake: false, vector }
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
        self.last_write
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
        self.last_write = Some(p.t_ring);
        self.frames.enqueue(p);
        Some(std::mem::take(&mut self.wake))
    }

    /// A frame written back at `t_ring` into a free descriptor of an empty ring and taken
    /// at once ([`RxRing::write_back`] then [`RxRing::take`], without storing it): whether
    /// it wakes the ring's owner.
    #[inline]
    pub(super) fn pass(&mut self, t_ring: Instant) -> bool {
        debug_assert!(self.frames.is_empty() && self.hw_avail > 0, "an empty ring with a free descriptor");
        self.hw_avail -= 1;
        self.last_write = Some(t_ring);
        self.unrefilled += 1;
        std::mem::take(&mut self.wake)
    }

    /// The driver takes the oldest frame; its descriptor is the driver's until refilled.
    #[inline]
    pub(super) fn take(&mut self) -> Option<Packet> {
        let p = self.frames.dequeue()?;
        self.unrefilled += 1;
        Some(p)
    }

    /// [`RxRing::take`] into `out` (true), or false when the ring is empty.
    #[inline]
    pub(super) fn take_into(&mut self, out: &mut Packet) -> bool {
        match self.frames.dequeue() {
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

    #[test]
    fn an_armed_ring_wakes_its_owner_once() {
        let mut r = RxRing::new(8, 0, RxRingKind::Descriptors);
        r.set_armed(true);
        assert_eq!(r.write_back(frame(1)), Some(true));
        assert!(!r.is_armed());
        assert_eq!(r.write_back(frame(2)), Some(false));
    }
}
