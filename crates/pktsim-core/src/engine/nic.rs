//! The NIC: rx rings with descriptor accounting, tx rings with completions and a qdisc in
//! front, and interrupt vectors with EITR throttling.
//!
//! ```text
//!  link --> classify --> rx ring (N descriptors) --> [driver rx clean] --> xmit
//!                          |  no free descriptor: drop (rx_missed_errors)
//!                          '-- descriptor write-back = interrupt cause on the ring's vector
//!
//!  xmit --> qdisc (txqueuelen) --> tx ring --> egress link --> completion = cause on the
//!                                                               tx ring's vector
//! ```
//!
//! Arrivals are processed lazily: [`Nic::advance_to`] moves every frame that has reached
//! the NIC by a time into its ring. Only rings whose owner asked to be woken (`wake`) make
//! the engine stop at each arrival; a ring drained by a busy poller is filled in batches
//! when the poller looks, which is exact because the ring's free descriptors change only
//! when the driver refills them.

use std::collections::VecDeque;

use super::classify::Classifier;
use super::moderation::Moderation;
use super::queue::{EventKind, EventQueue};
use super::stats::Stats;
use super::time::{Ps, WireTime};
use super::traffic::{Packet, Traffic};

/// One rx ring.
pub struct RxRing {
    /// Descriptors in the ring.
    pub size: u32,
    /// Frames written back and not yet cleaned by the driver.
    pub pkts: VecDeque<Packet>,
    /// Descriptors the NIC may write into (at most size - 1).
    pub hw_avail: u32,
    /// Descriptors cleaned by the driver and not yet given back.
    pub unrefilled: u32,
    /// Time of the latest descriptor write-back (the latest interrupt cause).
    pub last_write: Option<Ps>,
    /// The owner wants to hear of the next write-back.
    pub wake: bool,
    /// Vector whose interrupt this ring raises.
    pub vector: usize,
}

impl RxRing {
    pub fn new(size: u32, vector: usize) -> Self {
        RxRing { size, pkts: VecDeque::with_capacity(size as usize), hw_avail: size - 1, unrefilled: 0, last_write: None, wake: false, vector }
    }

    /// Give cleaned descriptors back to the NIC (one tail write for the batch).
    pub fn refill(&mut self) {
        self.hw_avail += self.unrefilled;
        self.unrefilled = 0;
    }
}

/// One tx ring, its qdisc and the egress link it feeds.
pub struct TxRing {
    pub size: u32,
    /// Completion times (and frame sizes) of posted, not yet cleaned descriptors, in order.
    pub in_flight: VecDeque<(Ps, u16)>,
    /// Packets waiting in the qdisc while the ring is full.
    pub qdisc: VecDeque<Packet>,
    pub qdisc_len: u32,
    /// When the egress link is free.
    pub link_free: Ps,
    /// Latest completion time among descriptors already cleaned.
    pub last_cleaned_done: Option<Ps>,
    pub vector: usize,
    /// Cores transmitting on this queue; more than one share its lock.
    pub sharers: u32,
    /// When the queue's lock is free.
    pub lock_free: Ps,
}

impl TxRing {
    pub fn new(size: u32, qdisc_len: u32, vector: usize) -> Self {
        TxRing {
            size,
            in_flight: VecDeque::with_capacity(size as usize),
            qdisc: VecDeque::new(),
            qdisc_len,
            link_free: 0,
            last_cleaned_done: None,
            vector,
            sharers: 1,
            lock_free: 0,
        }
    }

    /// The driver keeps one descriptor free.
    pub fn has_room(&self) -> bool {
        self.in_flight.len() + 1 < self.size as usize
    }

    /// Completion time of the head descriptor, if any.
    pub fn head_done(&self) -> Option<Ps> {
        self.in_flight.front().map(|&(t, _)| t)
    }

    /// Latest completion at or before `t` (a cause the vector has seen by then).
    pub fn last_done_by(&self, t: Ps) -> Option<Ps> {
        let n = self.in_flight.partition_point(|&(d, _)| d <= t);
        if n == 0 {
            self.last_cleaned_done
        } else {
            Some(self.in_flight[n - 1].0)
        }
    }

    /// First completion strictly after `t`.
    pub fn first_done_after(&self, t: Ps) -> Option<Ps> {
        let n = self.in_flight.partition_point(|&(d, _)| d <= t);
        self.in_flight.get(n).map(|&(d, _)| d)
    }
}

/// An MSI-X vector: one throttle counter, masked while its NAPI polls.
pub struct Vector {
    pub rx: Option<usize>,
    pub tx: Option<usize>,
    pub core: usize,
    pub masked: bool,
    /// Unmasked and waiting for a cause (no interrupt scheduled yet).
    pub armed: bool,
    pub last_fire: Option<Ps>,
    /// When the throttle counter reaches 0.
    pub counter_zero: Ps,
    /// Generation of this vector's scheduled events.
    pub gen: u32,
    pub moderation: Box<dyn Moderation>,
}

impl Vector {
    /// Whether a cause arrived since the last interrupt (EICR set), by time `t`.
    pub fn cause_pending(&self, nic: &Nic, t: Ps) -> bool {
        let after_fire = |w: Ps| self.last_fire.is_none_or(|f| w > f);
        let rx = self.rx.is_some_and(|r| nic.rx[r].last_write.is_some_and(after_fire));
        let tx = self.tx.is_some_and(|q| nic.tx[q].last_done_by(t).is_some_and(after_fire));
        rx || tx
    }
}

/// All rings of the node and the traffic feeding them.
pub struct Nic {
    pub rx: Vec<RxRing>,
    pub tx: Vec<TxRing>,
    classifier: Classifier,
    traffic: Traffic,
    next: Packet,
    /// Rings whose owner asked to be woken, and were: (ring, write-back time).
    pub woken: Vec<(usize, Ps)>,
    egress: WireTime,
    /// Time of the pending arrival event, if one is scheduled.
    arrival_event: Option<Ps>,
}

impl Nic {
    pub fn new(rx: Vec<RxRing>, tx: Vec<TxRing>, classifier: Classifier, mut traffic: Traffic, egress_bps: f64, overhead: u64) -> Self {
        let next = traffic.next_packet();
        Nic { rx, tx, classifier, traffic, next, woken: Vec::new(), egress: WireTime::new(overhead, egress_bps), arrival_event: None }
    }

    /// When the next frame's descriptor would be written.
    #[inline]
    pub fn next_arrival(&self) -> Ps {
        self.next.t_ring
    }

    pub fn any_wake(&self) -> bool {
        self.rx.iter().any(|r| r.wake)
    }

    /// Ask to be woken by the next write-back on ring `r`.
    ///
    /// Invariant: while any ring is armed, an arrival event sits in the queue at or before
    /// the next frame's write-back, so no core runs ahead of a frame that would wake
    /// another one.
    pub fn arm(&mut self, r: usize, queue: &mut EventQueue) {
        self.rx[r].wake = true;
        self.ensure_arrival_event(queue);
    }

    pub fn ensure_arrival_event(&mut self, queue: &mut EventQueue) {
        let next = self.next.t_ring;
        if self.arrival_event.is_none_or(|a| a > next) {
            self.arrival_event = Some(next);
            queue.schedule(next, EventKind::Arrival);
        }
    }

    /// The arrival event at `t` fired: bring the rings up to `t` and keep the invariant.
    pub fn on_arrival_event(&mut self, t: Ps, queue: &mut EventQueue, stats: &mut Stats) {
        if self.arrival_event == Some(t) {
            self.arrival_event = None;
        }
        self.advance_to(t, stats);
        if self.any_wake() {
            self.ensure_arrival_event(queue);
        }
    }

    /// Move every frame whose descriptor write-back is due by `t` into its ring (or drop it).
    #[inline]
    pub fn advance_to(&mut self, t: Ps, stats: &mut Stats) {
        while self.next.t_ring <= t {
            let mut p = self.next;
            self.next = self.traffic.next_packet();
            let r = self.classifier.ring(&p);
            p.ring = r as u16;
            stats.offered(&p);
            let ring = &mut self.rx[r];
            if ring.hw_avail == 0 {
                stats.drop_rx_ring(&p);
                continue;
            }
            ring.hw_avail -= 1;
            ring.last_write = Some(p.t_ring);
            ring.pkts.push_back(p);
            if ring.wake {
                ring.wake = false;
                self.woken.push((r, p.t_ring));
            }
        }
    }

    /// Hand a packet to tx queue `q` at `now`: into the ring if it has room, else into the
    /// qdisc, else drop. Returns the completion time when posted.
    pub fn xmit(&mut self, q: usize, p: Packet, now: Ps, stats: &mut Stats) -> Option<Ps> {
        let ring = &mut self.tx[q];
        if ring.has_room() && ring.qdisc.is_empty() {
            Some(post(ring, &mut self.egress, p, now, stats))
        } else if ring.qdisc.len() < ring.qdisc_len as usize {
            ring.qdisc.push_back(p);
            None
        } else {
            stats.drop_qdisc(&p, now);
            None
        }
    }

    /// Clean one completed descriptor of tx queue `q`; then move qdisc packets into the
    /// freed room. Returns the cleaned frame's size.
    pub fn tx_clean_one(&mut self, q: usize, now: Ps, stats: &mut Stats) -> Option<u16> {
        let ring = &mut self.tx[q];
        let (done, size) = *ring.in_flight.front()?;
        if done > now {
            return None;
        }
        ring.in_flight.pop_front();
        ring.last_cleaned_done = Some(done);
        while ring.has_room() {
            let Some(p) = ring.qdisc.pop_front() else { break };
            post(ring, &mut self.egress, p, now, stats);
        }
        Some(size)
    }

    /// Take tx queue `q`'s lock at `now` if cores share it: returns how long the core spins
    /// for it plus how long it holds it (0 for a queue of its own).
    pub fn tx_lock(&mut self, q: usize, now: Ps, hold: Ps) -> Ps {
        let ring = &mut self.tx[q];
        if ring.sharers <= 1 || hold == 0 {
            return 0;
        }
        let start = now.max(ring.lock_free);
        ring.lock_free = start + hold;
        start + hold - now
    }

    /// Reclaim every descriptor of tx queue `q` completed by `now`, at no cost (modes
    /// without a tx-clean phase).
    pub fn tx_reclaim(&mut self, q: usize, now: Ps, stats: &mut Stats) {
        while self.tx_clean_one(q, now, stats).is_some() {}
    }

    pub fn generated(&self) -> u64 {
        self.traffic.generated
    }
}

/// Write a packet's descriptor into a tx ring at `now` (marker B); it completes when the
/// egress link has sent it.
fn post(ring: &mut TxRing, egress: &mut WireTime, p: Packet, now: Ps, stats: &mut Stats) -> Ps {
    let done = now.max(ring.link_free) + egress.of(p.size);
    ring.link_free = done;
    ring.in_flight.push_back((done, p.size));
    stats.forwarded(&p, now, done);
    done
}
