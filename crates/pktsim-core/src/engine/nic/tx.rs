//! One tx queue: the qdisc in front (`txqueuelen`), the tx ring with descriptors in flight,
//! the egress link they leave by, and the queue's lock when several cores share it.
//!
//! ```text
//!   xmit --> [ring has room and qdisc empty] --> descriptor posted (marker B); completes
//!                                                when the egress link has sent the frame
//!        --> [else qdisc not full] ----------> qdisc; posted when cleaning frees room
//!        --> [else] -------------------------> dropped (qdisc_full)
//! ```

use std::collections::VecDeque;

use ringbuffer::{AllocRingBuffer, RingBuffer};

use crate::engine::ingress::Packet;
use crate::engine::time::{Instant, Span, WireTime};

/// What happened to a frame handed to a tx queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Xmit {
    /// Its descriptor was posted; it completes (last bit on the wire) at the given time.
    Posted(Instant),
    Queued,
    Dropped,
}

/// One tx ring and its qdisc.
pub struct TxRing {
    size: u32,
    /// Completion times (and frame sizes) of posted, not yet cleaned descriptors, in order
    /// (fewer than the ring's size: a power-of-two buffer, a masked index per post and clean).
    in_flight: AllocRingBuffer<(Instant, u16)>,
    /// Frames waiting in the qdisc while the ring is full.
    qdisc: VecDeque<Packet>,
    qdisc_len: u32,
    /// When the egress link is free.
    link_free: Instant,
    /// Latest completion time among descriptors already cleaned.
    last_cleaned_done: Option<Instant>,
    vector: usize,
    /// Cores transmitting on this queue; more than one share its lock.
    sharers: u32,
    /// When the queue's lock is free.
    lock_free: Instant,
}

impl TxRing {
    pub fn new(size: u32, qdisc_len: u32, vector: usize, sharers: u32) -> Self {
        TxRing {
            size,
            in_flight: AllocRingBuffer::new(size.max(1) as usize),
            qdisc: VecDeque::new(),
            qdisc_len,
            link_free: Instant::ZERO,
            last_cleaned_done: None,
            vector,
            sharers,
            lock_free: Instant::ZERO,
        }
    }

    /// Vector whose interrupt this ring's completions raise.
    pub fn vector(&self) -> usize {
        self.vector
    }

    /// Whether several cores send on this queue (and share its lock).
    pub fn is_shared(&self) -> bool {
        self.sharers > 1
    }

    /// Descriptors posted and not yet cleaned.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Descriptors free to post now (the driver keeps one free), with nothing in the
    /// qdisc.
    pub fn room(&self) -> u32 {
        if !self.qdisc.is_empty() {
            return 0;
        }
        (self.size as usize).saturating_sub(self.in_flight.len() + 1) as u32
    }

    /// Frames waiting in the qdisc.
    pub fn queued(&self) -> usize {
        self.qdisc.len()
    }

    /// The driver keeps one descriptor free.
    fn has_room(&self) -> bool {
        self.in_flight.len() + 1 < self.size as usize
    }

    /// Completion time of the oldest descriptor in flight, if any.
    #[inline]
    pub fn head_done(&self) -> Option<Instant> {
        self.in_flight.peek().map(|&(t, _)| t)
    }

    /// How many descriptors in flight complete by `t` (none when the oldest completes
    /// later, the common case at low load: no search).
    #[inline(always)]
    fn done_by(&self, t: Instant) -> usize {
        match self.in_flight.peek() {
            // Completions are in order: the first not due, by bisection.
            Some(&(d, _)) if d <= t => {
                let (mut lo, mut hi) = (1, self.in_flight.len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.done_at(mid) <= t {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
            _ => 0,
        }
    }

    /// Completion time of the `i`-th descriptor in flight (`i` below their count). The
    /// oldest is a peek: the buffer's `get` takes its index modulo the length, a division.
    #[inline]
    fn done_at(&self, i: usize) -> Instant {
        let e = if i == 0 { self.in_flight.peek() } else { self.in_flight.get(i) };
        e.map_or(Instant::NEVER, |&(d, _)| d)
    }

    /// Latest completion at or before `t` (a cause the vector has seen by then).
    #[cfg(test)]
    pub fn last_done_by(&self, t: Instant) -> Option<Instant> {
        self.done_around(t).0
    }

    /// First completion strictly after `t`.
    #[cfg(test)]
    pub fn first_done_after(&self, t: Instant) -> Option<Instant> {
        self.done_around(t).1
    }

    /// The latest completion at or before `t` (a cause the vector has seen by then) and
    /// the first strictly after it, in one look.
    #[inline(always)]
    pub fn done_around(&self, t: Instant) -> (Option<Instant>, Option<Instant>) {
        let n = self.done_by(t);
        let last = if n == 0 { self.last_cleaned_done } else { Some(self.done_at(n - 1)) };
        (last, (n < self.in_flight.len()).then(|| self.done_at(n)))
    }

    /// Hand a frame to the queue at `now`. A posted frame's descriptor completes when the
    /// egress link has sent it (`egress` gives the frame's time on the wire).
    #[inline]
    pub(super) fn xmit(&mut self, p: &Packet, now: Instant, egress: &mut WireTime) -> Xmit {
        if self.has_room() && self.qdisc.is_empty() {
            Xmit::Posted(self.post(p, now, egress))
        } else if self.qdisc.len() < self.qdisc_len as usize {
            self.qdisc.push_back(*p);
            Xmit::Queued
        } else {
            Xmit::Dropped
        }
    }

    /// Whether the next `k` frames handed to the queue are all posted at once: nothing
    /// waits in the qdisc and the ring has room for them (with the free descriptor kept).
    #[inline]
    pub(super) fn can_post(&self, k: usize) -> bool {
        self.qdisc.is_empty() && self.in_flight.len() + k < self.size as usize
    }

    /// Post a frame's descriptor at `now` (see [`TxRing::can_post`]): its completion time.
    #[inline(always)]
    pub(super) fn post(&mut self, p: &Packet, now: Instant, egress: &mut WireTime) -> Instant {
        let done = now.max(self.link_free) + egress.of(p.size);
        self.link_free = done;
        self.in_flight.enqueue((done, p.size));
        done
    }

    /// Clean the oldest descriptor if it completed by `now`: its frame's size. Frames then
    /// move from the qdisc into the freed room; `posted` hears of each with its completion.
    #[inline]
    pub(super) fn clean_one(
        &mut self,
        now: Instant,
        egress: &mut WireTime,
        mut posted: impl FnMut(&Packet, Instant),
    ) -> Option<u16> {
        let &(done, size) = self.in_flight.peek()?;
        if done > now {
            return None;
        }
        self.in_flight.dequeue();
        self.last_cleaned_done = Some(done);
        while self.has_room() {
            let Some(p) = self.qdisc.pop_front() else { break };
            let d = self.post(&p, now, egress);
            posted(&p, d);
        }
        Some(size)
    }

    /// Clean completed descriptors one per `d` from `*t` (each completed when its clean
    /// starts, cleaned when it ends) while `*n` is below `max`, with no frame waiting in the
    /// qdisc (so cleaning posts nothing): the count of cleans and their bytes less the FCS
    /// go into `n` and `bytes`. Returns None where the qdisc holds frames (clean one at a
    /// time, [`TxRing::clean_one`]); else whether a clean was left because it would end
    /// after `horizon`.
    #[inline]
    pub(super) fn clean_run(
        &mut self,
        t: &mut Instant,
        d: Span,
        horizon: Instant,
        (n, bytes, max): (&mut u32, &mut u64, u32),
    ) -> Option<bool> {
        if !self.qdisc.is_empty() {
            return None;
        }
        while *n < max {
            let Some(&(done, size)) = self.in_flight.peek() else { break };
            if done > *t {
                break;
            }
            if *t + d > horizon {
                return Some(true);
            }
            *t += d;
            self.in_flight.dequeue();
            self.last_cleaned_done = Some(done);
            *n += 1;
            *bytes += size.saturating_sub(4) as u64;
        }
        Some(false)
    }

    /// Reclaim every descriptor completed by `now` where no frame waits in the qdisc
    /// (reclaiming then posts nothing): true; false, reclaiming none, where one waits.
    #[inline]
    pub(super) fn reclaim(&mut self, now: Instant) -> bool {
        if !self.qdisc.is_empty() {
            return false;
        }
        while let Some(&(done, _)) = self.in_flight.peek() {
            if done > now {
                break;
            }
            self.in_flight.dequeue();
            self.last_cleaned_done = Some(done);
        }
        true
    }

    /// A core takes the queue's lock at `now` for `hold`: how long it spins for it plus how
    /// long it holds it (zero for a queue of its own).
    pub fn lock(&mut self, now: Instant, hold: Span) -> Span {
        if self.sharers <= 1 || hold.is_zero() {
            return Span::ZERO;
        }
        let start = now.max(self.lock_free);
        self.lock_free = start + hold;
        start + hold - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(size: u16) -> Packet {
        Packet::arriving(Instant::ZERO, size, 0, 0)
    }
    fn at(ps: u64) -> Instant {
        Instant::from_ps(ps)
    }

    #[test]
    fn frames_leave_back_to_back_at_the_link_rate_and_overflow_into_the_qdisc() {
        // 64 B at 10 Gbit/s with 20 B framing: 67.2 ns each.
        let mut egress = WireTime::new(20, 1e10);
        let mut q = TxRing::new(3, 1, 0, 1);
        assert_eq!(q.xmit(&frame(64), at(0), &mut egress), Xmit::Posted(at(67_200)));
        assert_eq!(q.xmit(&frame(64), at(0), &mut egress), Xmit::Posted(at(134_400)));
        assert_eq!(q.xmit(&frame(64), at(0), &mut egress), Xmit::Queued, "one descriptor stays free");
        assert_eq!(q.xmit(&frame(64), at(0), &mut egress), Xmit::Dropped, "qdisc of 1 full");
        assert_eq!(q.last_done_by(at(100_000)), Some(at(67_200)));
        assert_eq!(q.first_done_after(at(67_200)), Some(at(134_400)));
        let mut posted = Vec::new();
        assert_eq!(q.clean_one(at(50_000), &mut egress, |_, d| posted.push(d)), None, "not complete yet");
        assert_eq!(q.clean_one(at(70_000), &mut egress, |_, d| posted.push(d)), Some(64));
        // The queued frame takes the freed descriptor and leaves after the second.
        assert_eq!(posted, [at(201_600)]);
        assert_eq!((q.in_flight(), q.queued()), (2, 0));
        assert_eq!(q.last_done_by(at(0)), Some(at(67_200)), "the cleaned completion is remembered");
    }

    /// Which completions are due by a time, found by bisection, is what a scan of the
    /// descriptors in flight finds, also after the ring's buffer has wrapped many times.
    #[test]
    fn completions_due_by_a_time_are_those_a_scan_finds() {
        let mut egress = WireTime::new(20, 1e10);
        let mut q = TxRing::new(16, 0, 0, 1);
        for round in 0..40u64 {
            // Post until full (frames of 64 and 1518 B), clean a few, at times that move on.
            let now = at(round * 5_000_000);
            for i in 0..15 {
                let _ = q.xmit(&frame(if (i + round) % 3 == 0 { 1518 } else { 64 }), now, &mut egress);
            }
            let done: Vec<Instant> = (0..q.in_flight()).map(|i| q.done_at(i)).collect();
            for probe in 0..200u64 {
                let t = at(round * 5_000_000 + probe * 25_000);
                let n = done.iter().filter(|&&d| d <= t).count();
                assert_eq!(q.done_by(t), n, "round {round}, t {t:?}");
                assert_eq!(q.first_done_after(t), done.get(n).copied());
                if n > 0 {
                    assert_eq!(q.last_done_by(t), Some(done[n - 1]));
                }
            }
            for _ in 0..(7 + round % 5) {
                q.clean_one(at(u64::MAX / 2), &mut egress, |_, _| {});
            }
        }
    }

    #[test]
    fn a_shared_lock_serialises_its_holders() {
        let mut own = TxRing::new(8, 8, 0, 1);
        assert_eq!(own.lock(at(0), Span::from_ps(40)), Span::ZERO);
        let mut shared = TxRing::new(8, 8, 0, 2);
        assert_eq!(shared.lock(at(0), Span::from_ps(40)), Span::from_ps(40));
        assert_eq!(shared.lock(at(10), Span::from_ps(40)), Span::from_ps(70), "waits 30 ps, holds 40");
        assert_eq!(shared.lock(at(200), Span::from_ps(40)), Span::from_ps(40));
    }
}
