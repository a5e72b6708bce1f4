//! The NIC: it takes frames from the node's ingress, classifies them into rx rings
//! ([`classify`], [`rx`]), sends what the host transmits through tx queues ([`tx`]) to the
//! egress, and raises interrupts on its vectors ([`vector`]) as its moderation policies
//! allow.
//!
//! ```text
//!  ingress --> DMA --> classify --> rx ring (N descriptors) --> [driver takes] --> xmit
//!                                     |  no free descriptor: drop (rx_missed_errors)
//!                                     '-- write-back = interrupt cause on the ring's vector
//!
//!  xmit --> qdisc (txqueuelen) --> tx ring --> egress link --> egress port
//!                                               '-- completion = cause on the tx vector
//! ```
//!
//! I/O modes drive the NIC only through its methods, each one operation that picks its
//! fast path itself: bring rings up to a time and ask to be woken by them, take frames,
//! refill descriptors, transmit, clean completions, run a poll's cleans and frames in one
//! go; arm a vector and complete a NAPI episode ([`vector`]). The engine hands it every
//! event first ([`Nic::on_event`]) and takes the rings that woke ([`Nic::take_woken`]).
//!
//! Arrivals are processed lazily: [`Nic::advance`] moves every frame that has
//! reached the NIC by a time into its ring. Only rings whose owner asked to be woken make
//! the engine stop at each arrival; a ring drained by a busy poller is filled in batches
//! when the poller looks, which is exact because the ring's free descriptors change only
//! when the driver refills them.
//!
//! Each ring is brought up to date on its own: frames the ingress generated for other
//! rings are written back into them at once if they came before the current event (every
//! core has reached that time), else they wait in the ring's `pending` list until its
//! owner looks. So a core may run ahead of the others' work units (see
//! `io::units::run`) without writing frames into a ring whose owner is behind.

pub mod classify;
pub mod rx;
pub mod tx;
pub mod vector;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use classify::Classifier;
use rx::RxRing;
use tx::{TxRing, Xmit};
use vector::Vector;

use super::ingress::{Ingress, Packet};
use super::queue::{EventKind, EventQueue, Key};
use super::stats::Stats;
use super::time::{Instant, Span, WireTime};

/// Where a node's transmitted frames go (the next node of a chain, a collector): it hears
/// of every frame whose descriptor was posted, with the time it was posted and the time its
/// last bit left.
pub trait Egress: Send {
    fn depart(&mut self, p: &Packet, t_tx: Instant, t_done: Instant);
}

/// An interrupt that fired: its vector and the core it interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Irq {
    pub vector: usize,
    pub core: usize,
}

/// A vector's interrupt a host fires itself, at its time, instead of through the event
/// queue ([`Nic::complete`], [`Nic::forward_run`]): the vector is masked meanwhile, as for
/// a scheduled interrupt. The host fires it ([`Held::fire`]), or hands it back to the queue
/// as the general path would have it by then ([`Held::restore`]).
#[derive(Debug, Clone, Copy)]
pub struct Held {
    pub vector: usize,
    /// When it fires.
    pub at: Instant,
    /// When the general path schedules its event: at the cause (`cause`), before which the
    /// vector is armed and waits for it, or when the vector was completed.
    pub since: Instant,
    pub cause: bool,
    /// When the general path set what it waits on until `since` (its cause's timer, the
    /// ring armed: the vector completed, or a frame posted while it was armed), and
    /// whether that was a completion (at one time, a frame posted in a run comes first).
    pub set: (Instant, bool),
    /// While it waits for the cause: the tx completion it waits for (the vector's tx-cause
    /// timer), if its cause is one.
    tx_cause: Option<Instant>,
}

/// Frames the NIC takes from its ingress at a time.
const AHEAD: usize = 64;

/// All rings and vectors of the node, and its ports.
pub struct Nic {
    rx: Vec<RxRing>,
    tx: Vec<TxRing>,
    vectors: Vec<Vector>,
    classifier: Classifier,
    ingress: Box<dyn Ingress>,
    /// From a frame's last bit on the wire to its descriptor written back.
    dma: Span,
    /// From an interrupt's cause, when its moderation lets it fire, to its handler
    /// (`nic.irq_delay`).
    pub(super) irq_delay: Span,
    /// Frames off the ingress, classified, in order: the ingress hands them over a batch
    /// at a time. `ahead[at]` is the next one, written back at `next_at` (NEVER when the
    /// ingress has no more). Frames are read in place, never copied out whole before they
    /// go into their ring (a copy of a frame just written in parts stalls the CPU).
    ahead: Vec<Packet>,
    at: usize,
    next_at: Instant,
    /// Per ring: frames generated, in order, not yet written back (they came at or after
    /// `safe` when generated).
    pending: Vec<VecDeque<Packet>>,
    /// Every ring may be brought up to this time (the current event's).
    safe: Instant,
    /// Rings whose owner asked to be woken, and were: (ring, write-back time).
    woken: Vec<(usize, Instant)>,
    /// The host drives the vectors (it armed one): every armed ring was armed by its vector,
    /// and a write-back that wakes it is that vector's cause. Else no vector is ever armed.
    vectors_driven: bool,
    egress: WireTime,
    egress_port: Option<Box<dyn Egress>>,
    /// Time of the pending arrival event, if one is scheduled.
    arrival_event: Option<Instant>,
    /// Set to stop the run: arrivals stop being moved into rings.
    cancel: Arc<AtomicBool>,
}

/// What a NIC is wired to once built ([`Nic::wire`]).
pub enum Wire {
    /// Stop moving frames when this flag is set (see [`crate::engine::SimNode::cancel_on`]).
    Cancel(Arc<AtomicBool>),
    /// Send transmitted frames to this port as well (the next node, a collector).
    Port(Box<dyn Egress>),
    /// Transmit on a link of another rate (a chain's link into the next node).
    Link(WireTime),
}

/// Parts of a NIC (see [`Nic::new`]).
pub struct NicParts {
    pub rx: Vec<RxRing>,
    pub tx: Vec<TxRing>,
    pub vectors: Vec<Vector>,
    pub classifier: Classifier,
    pub ingress: Box<dyn Ingress>,
    pub dma: Span,
    pub irq_delay: Span,
    /// Egress line rate and per-frame framing overhead.
    pub egress_bps: f64,
    pub overhead_bytes: u64,
}

impl Nic {
    pub fn new(parts: NicParts) -> Self {
        let mut nic = Nic {
            rx: parts.rx,
            tx: parts.tx,
            vectors: parts.vectors,
            classifier: parts.classifier,
            ingress: parts.ingress,
            dma: parts.dma,
            irq_delay: parts.irq_delay,
            ahead: Vec::with_capacity(AHEAD),
            at: 0,
            next_at: Instant::NEVER,
            pending: Vec::new(),
            safe: Instant::ZERO,
            woken: Vec::new(),
            vectors_driven: false,
            egress: WireTime::new(parts.overhead_bytes, parts.egress_bps),
            egress_port: None,
            arrival_event: None,
            cancel: Arc::default(),
        };
        nic.pending = (0..nic.rx.len()).map(|_| VecDeque::new()).collect();
        nic.pull();
        nic
    }

    /// Wire the NIC to a cancel flag, an egress port or another egress link.
    pub fn wire(&mut self, wire: Wire) {
        match wire {
            Wire::Cancel(flag) => self.cancel = flag,
            Wire::Port(port) => self.egress_port = Some(port),
            Wire::Link(link) => self.egress = link,
        }
    }

    /// The engine is at an event of `kind` at `t`: no core will look at a ring before
    /// then. The NIC's own events run here: an arrival brings the armed rings up to `t`
    /// (waking their owners); a vector's timer is a tx completion (a cause) or its
    /// interrupt, which fires and is returned for the host to handle; at the end, every
    /// frame that reached the NIC before `t` is written back (or dropped), whether or not
    /// anybody looked at its ring.
    #[inline]
    pub fn on_event(&mut self, t: Instant, kind: EventKind, queue: &mut EventQueue, stats: &mut Stats) -> Option<Irq> {
        self.safe = t;
        match kind {
            EventKind::Arrival => {
                self.on_arrival_event(t, queue, stats);
                None
            }
            EventKind::Timer(key, gen) => self.on_timer(key, gen, t, queue, stats),
            EventKind::End => {
                self.advance_all_before(t, stats);
                None
            }
        }
    }

    /// Move on to the ingress's next frame.
    #[inline]
    fn pull(&mut self) {
        self.at += 1;
        if self.at >= self.ahead.len() {
            self.pull_batch();
        }
        self.next_at = self.ahead.get(self.at).map_or(Instant::NEVER, |p| p.t_ring);
    }

    /// The next frame off the ingress (only while `next_at` is not NEVER).
    #[inline(always)]
    fn next(&self) -> &Packet {
        &self.ahead[self.at]
    }

    /// The ingress's next batch, classified in one pass (long before each frame is copied
    /// into its ring: a copy of a frame just written in parts stalls the CPU).
    #[inline(never)]
    fn pull_batch(&mut self) {
        self.ahead.clear();
        self.at = 0;
        self.ingress.fill(&mut self.ahead, AHEAD);
        if self.rx.len() == 1 {
            // One ring: every frame's, whatever the classifier would look at.
            for p in &mut self.ahead {
                p.t_ring = p.t_wire + self.dma;
                p.ring = 0;
            }
            return;
        }
        for p in &mut self.ahead {
            p.t_ring = p.t_wire + self.dma;
            p.ring = self.classifier.ring(p) as u16;
        }
    }

    pub fn rx(&self, r: usize) -> &RxRing {
        &self.rx[r]
    }
    /// Tx queue `q`, to look at, and to take its lock ([`TxRing::lock`]).
    pub fn tx(&mut self, q: usize) -> &mut TxRing {
        &mut self.tx[q]
    }
    /// The interrupt vectors (vector `v` is the `v`-th).
    pub fn vectors(&self) -> &[Vector] {
        &self.vectors
    }
    /// Frames the ingress handed out (warm-up included) up to `next`: not those of its
    /// batch still behind it.
    pub fn generated(&self) -> u64 {
        let behind = self.ahead.len().saturating_sub(self.at + 1);
        self.ingress.delivered() - behind as u64
    }

    // ------------------------------------------------------------------ receive

    fn any_wake(&self) -> bool {
        self.rx.iter().any(|r| r.is_armed())
    }

    /// Ask to be woken by the next write-back on each of `rings` (`armed`), or no longer.
    ///
    /// Invariant: while any ring is armed, an arrival event sits in the queue at or before
    /// the next frame's write-back, so no core runs ahead of a frame that would wake
    /// another one.
    pub fn arm(&mut self, rings: std::ops::Range<usize>, armed: bool, queue: &mut EventQueue) {
        for r in rings {
            if armed {
                self.arm_ring(r, queue);
            } else {
                self.rx[r].set_armed(false);
            }
        }
    }

    /// Ask to be woken by the next write-back on ring `r` (see [`Nic::arm`]).
    fn arm_ring(&mut self, r: usize, queue: &mut EventQueue) {
        self.rx[r].set_armed(true);
        self.ensure_arrival_event(queue);
    }

    /// When the next arrival event is due (NEVER without one): no armed ring receives a
    /// frame before it.
    #[inline]
    pub fn arrival_time(&self) -> Instant {
        self.arrival_event.unwrap_or(Instant::NEVER)
    }

    /// Keep an arrival event at or before the next write-back on an armed ring.
    fn ensure_arrival_event(&mut self, queue: &mut EventQueue) {
        let mut next = self.next_at;
        for (ring, pending) in self.rx.iter().zip(&self.pending) {
            if let (true, Some(p)) = (ring.is_armed(), pending.front()) {
                next = next.min(p.t_ring);
            }
        }
        if self.arrival_event.is_none_or(|a| a > next) {
            self.arrival_event = Some(next);
            queue.schedule(next, EventKind::Arrival);
        }
    }

    /// The arrival event at `t` fired: bring the armed rings up to `t` (waking their
    /// owners) and keep the invariant.
    fn on_arrival_event(&mut self, t: Instant, queue: &mut EventQueue, stats: &mut Stats) {
        if self.arrival_event == Some(t) {
            self.arrival_event = None;
        }
        for r in 0..self.rx.len() {
            if self.rx[r].is_armed() {
                self.advance_ring_to(r, t, stats);
            }
        }
        if self.any_wake() {
            self.ensure_arrival_event(queue);
        }
    }

    /// Bring `rings` up to `t`: every frame whose descriptor write-back is due by `t` is in
    /// its ring (or dropped). Where the NIC has one ring, the first frame due is moved
    /// here and the rest out of line (frames are mostly taken one at a time, by a poll, a
    /// call or a server, and one is due); else each ring's move is out of line.
    #[inline(always)]
    pub fn advance(&mut self, rings: std::ops::Range<usize>, t: Instant, stats: &mut Stats) {
        for r in rings {
            self.advance_ring_to_inline(r, t, stats);
        }
    }

    /// Move every frame of ring `r` whose descriptor write-back is due by `t` into it (or
    /// drop it).
    #[inline]
    fn advance_ring_to(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        self.advance_ring_before(r, t + Span::from_ps(1), stats);
    }

    /// Every ring up to `t` (due strictly before `t`): the end of the run.
    fn advance_all_before(&mut self, t: Instant, stats: &mut Stats) {
        for r in 0..self.rx.len() {
            self.advance_ring_before(r, t, stats);
        }
    }

    /// Move every frame of ring `r` due strictly before `t` into it (or drop it). Frames
    /// generated on the way for other rings are written back too if they came before the
    /// current event, else kept in their ring's pending list.
    #[inline(always)]
    fn advance_ring_before(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        // Most calls find nothing due: that is seen here, the moving out of line.
        if self.next_at < t || self.pending[r].front().is_some_and(|p| p.t_ring < t) {
            self.move_due(r, t, stats);
        }
    }

    /// [`Nic::advance_ring_to`] where frames are taken one at a time (a poll's, a call's,
    /// a server's): with one ring, the first frame due is moved here, the rest out of line.
    #[inline(always)]
    fn advance_ring_to_inline(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        self.advance_ring_before_inline(r, t + Span::from_ps(1), stats);
    }

    /// [`Nic::advance_ring_before`] as [`Nic::advance_ring_to_inline`] does it.
    #[inline(always)]
    fn advance_ring_before_inline(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        if self.rx.len() != 1 {
            return self.advance_ring_before(r, t, stats);
        }
        self.advance_one_ring_before(r, t, stats);
    }

    /// [`Nic::advance_ring_before_inline`] of ring `r`, the NIC's only one.
    #[inline(always)]
    fn advance_one_ring_before(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        if self.next_at < t {
            self.write_next(0, stats);
            self.pull();
            if self.next_at < t {
                self.move_due(r, t, stats);
            }
        }
    }

    /// The frames due before `t` written back into ring `r`, the NIC's only one, up to
    /// [`rx::RUN`] in one go, where at least `RUN` descriptors are free, nobody waits for
    /// a write-back and the statistics keep one group, in the window (what
    /// [`Nic::write_next`] of each would do, in order): the next `RUN` frames are stored
    /// whether due or not and the due ones counted in, with no branch on how many there
    /// are (whether the next frame came during a service is data, and a branch on it is
    /// mispredicted about half the time). True when that is all of them; false when more
    /// may be due, or, with nothing done, when the run does not apply.
    #[inline(always)]
    fn write_due_run(&mut self, r: usize, t: Instant, stats: &mut Stats) -> bool {
        let Some(next) = self.ahead.get(self.at..self.at + rx::RUN) else { return false };
        let next: &[Packet; rx::RUN] = next.try_into().expect("a run");
        debug_assert!(next.windows(2).all(|w| w[0].t_ring <= w[1].t_ring), "frames in time order");
        // Due: the frame and all before it (in the order they are written).
        let mut due = true;
        let mut n = 0;
        for p in next {
            due &= p.t_ring < t;
            n += due as usize;
        }
        let ring = &mut self.rx[r];
        if (ring.free() as usize) < rx::RUN || ring.is_armed() || !stats.offered_run(n, next[0].t_ring, t) {
            return false;
        }
        ring.write_back_prefix(next, n);
        if n == rx::RUN {
            // The run's last frame was due: the next may be too.
            self.at += rx::RUN - 1;
            self.pull();
            return false;
        }
        // (`at + n` is inside the batch: no pull.)
        self.at += n;
        self.next_at = self.ahead[self.at].t_ring;
        true
    }

    /// [`Nic::advance_ring_before`]'s work, where a frame is due.
    #[inline(never)]
    fn move_due(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        if self.rx.len() == 1 {
            // One ring: nothing pending, every frame its own.
            let mut moved = 0u32;
            while self.next_at < t {
                moved = moved.wrapping_add(1);
                if moved.is_multiple_of(1024) && self.cancel.load(Ordering::Relaxed) {
                    return;
                }
                self.write_next(0, stats);
                self.pull();
            }
            return;
        }
        if self.pending[r].front().is_some_and(|p| p.t_ring < t) {
            self.write_pending(r, t, stats);
        }
        let mut moved = 0u32;
        while self.next_at < t {
            // Every 1024 frames: a stop is seen within microseconds, at no cost per frame.
            moved = moved.wrapping_add(1);
            if moved.is_multiple_of(1024) && self.cancel.load(Ordering::Relaxed) {
                return;
            }
            let nr = self.next().ring as usize;
            if nr == r {
                self.write_next(r, stats);
            } else {
                self.place_next(nr, stats);
            }
            self.pull();
        }
    }

    /// When the next frame of `rings` is written back, if no later than `limit` (frames of
    /// other rings met on the way are handled as [`Nic::advance_ring_before`] does).
    #[inline]
    pub fn next_arrival(
        &mut self,
        rings: std::ops::Range<usize>,
        limit: Instant,
        stats: &mut Stats,
    ) -> Option<Instant> {
        if self.rx.len() == 1 {
            // One ring: nothing pending, the ingress's next frame is its.
            return (self.next_at <= limit).then_some(self.next_at);
        }
        self.next_arrival_among(rings, limit, stats)
    }

    #[inline(never)]
    fn next_arrival_among(
        &mut self,
        rings: std::ops::Range<usize>,
        limit: Instant,
        stats: &mut Stats,
    ) -> Option<Instant> {
        // Pending frames came before any not yet generated.
        let pending = rings.clone().filter_map(|r| self.pending[r].front().map(|p| p.t_ring)).min();
        if pending.is_some() {
            return pending.filter(|&t| t <= limit);
        }
        let mut moved = 0u32;
        while self.next_at <= limit {
            let nr = self.next().ring as usize;
            if rings.contains(&nr) {
                return Some(self.next_at);
            }
            moved = moved.wrapping_add(1);
            if moved.is_multiple_of(1024) && self.cancel.load(Ordering::Relaxed) {
                return None;
            }
            self.place_next(nr, stats);
            self.pull();
        }
        None
    }

    /// The next frame, of ring `r` (whose pending list holds nothing older), is written back.
    #[inline(always)]
    fn write_next(&mut self, r: usize, stats: &mut Stats) {
        let p = &self.ahead[self.at];
        stats.offered(p);
        match self.rx[r].write_back(*p) {
            None => stats.drop_rx_ring(p),
            Some(true) => self.woken.push((r, p.t_ring)),
            Some(false) => {}
        }
    }

    /// The next frame, of ring `r` that nobody is bringing up to date now: written back
    /// (after its older pending frames) if it came before the current event, else kept
    /// pending until its ring's core looks.
    #[inline]
    fn place_next(&mut self, r: usize, stats: &mut Stats) {
        if self.next_at >= self.safe {
            self.pending[r].push_back(self.ahead[self.at]);
        } else {
            if !self.pending[r].is_empty() {
                self.write_pending(r, Instant::NEVER, stats);
            }
            self.write_next(r, stats);
        }
    }

    /// Write ring `r`'s pending frames due before `t` back into it.
    #[inline(never)]
    fn write_pending(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        while let Some(p) = self.pending[r].front().copied().filter(|p| p.t_ring < t) {
            self.pending[r].pop_front();
            stats.offered(&p);
            match self.rx[r].write_back(p) {
                None => stats.drop_rx_ring(&p),
                Some(true) => self.woken.push((r, p.t_ring)),
                Some(false) => {}
            }
        }
    }

    /// The rings that woke their owners since the last call, with the write-back's time,
    /// for the host to handle; where the host drives the vectors, a ring woken is its
    /// vector's cause instead, raised here (in the order of the write-backs), and none is
    /// returned.
    #[inline]
    pub fn take_woken(&mut self, queue: &mut EventQueue) -> Vec<(usize, Instant)> {
        if self.woken.is_empty() {
            return Vec::new();
        }
        if !self.vectors_driven {
            return std::mem::take(&mut self.woken);
        }
        self.causes_of_woken(queue);
        Vec::new()
    }

    /// The rings woken are their vectors' causes (see [`Nic::take_woken`]).
    #[inline(never)]
    fn causes_of_woken(&mut self, queue: &mut EventQueue) {
        for i in 0..self.woken.len() {
            let (r, t) = self.woken[i];
            self.cause(self.rx[r].vector(), t, queue);
        }
        self.woken.clear();
    }

    /// The driver takes the oldest frame of ring `r` at `t` into `out`: how many frames it
    /// found waiting, the one taken among them (0, `out` unchanged, for an empty ring).
    /// Frames due by `t` are in the ring first; the frame's descriptor stays the driver's
    /// until refilled. The frame is copied once, from the ring; or, where the NIC has that
    /// one ring, exactly one frame is due, the ring is empty and has a free descriptor (a
    /// server or a poller that keeps up), straight off the ingress (`Nic::take_lone_due`).
    #[inline(always)]
    pub fn take(&mut self, r: usize, t: Instant, stats: &mut Stats, out: &mut Packet) -> usize {
        if self.take_lone_due(r, t, stats, out) {
            return 1;
        }
        self.take_from_ring(r, t, stats, out)
    }

    /// [`Nic::take`] through the ring.
    #[inline(always)]
    fn take_from_ring(&mut self, r: usize, t: Instant, stats: &mut Stats, out: &mut Packet) -> usize {
        self.advance_ring_to_inline(r, t, stats);
        let n = self.rx[r].len();
        if n > 0 {
            self.rx[r].take_into(out);
        }
        n
    }

    /// The driver takes the one frame due on an empty ring `r` by `t`, straight off the
    /// ingress into `out`, where the NIC has that one ring: its descriptor is written back
    /// and taken at once, the ring's state and the statistics as if the frame had passed
    /// through it (a frame written into the ring and read back at once is copied twice,
    /// and the read stalls on the write). False, with nothing done, unless exactly one
    /// frame is due, the ring is empty and has a free descriptor.
    #[inline(always)]
    fn take_lone_due(&mut self, r: usize, t: Instant, stats: &mut Stats, out: &mut Packet) -> bool {
        let one_due =
            self.rx.len() == 1 && self.next_at <= t && self.ahead.get(self.at + 1).is_some_and(|q| q.t_ring > t);
        if !one_due || !self.rx[r].is_empty() || self.rx[r].free() == 0 {
            return false;
        }
        let p = &self.ahead[self.at];
        stats.offered(p);
        if self.rx[r].pass(p.t_ring) {
            self.woken.push((r, p.t_ring));
        }
        *out = *p;
        self.pull();
        true
    }

    /// The driver gives ring `r`'s taken descriptors back at `t` if it holds at least
    /// `min_batch` of them. Ties: frames due before `t` see the ring without them, a frame
    /// due at `t` finds them free (a descriptor freed at t is available to an arrival at t).
    ///
    /// A batch of one (a loop that gives descriptors back after each frame or call: a
    /// server, a poller) is given back inline; where frames wait in the NIC's one ring,
    /// those that came meanwhile are written back behind them in one go first
    /// (`Nic::write_due_run`): the taker's next frame is then the ring's head whatever
    /// came, so no later branch depends on how many did. (Where the ring is empty, whether
    /// one came decides what the taker does next: a branch on it here lets the CPU predict
    /// that later one from it.) A larger batch, given back now and then, out of line.
    #[inline(always)]
    pub fn refill(&mut self, r: usize, t: Instant, min_batch: u32, stats: &mut Stats) {
        if min_batch > 1 {
            if self.rx[r].unrefilled() >= min_batch {
                self.give_back(r, t, stats);
            }
            return;
        }
        if self.rx[r].unrefilled() > 0 {
            if self.rx.len() != 1 {
                self.advance_ring_before(r, t, stats);
            } else if self.rx[r].is_empty() || !self.write_due_run(r, t, stats) {
                self.advance_one_ring_before(r, t, stats);
            }
            self.rx[r].refill();
        }
    }

    /// [`Nic::refill`] for a zero-copy AF_XDP ring, whose buffers come from the umem's fill
    /// ring: where it holds at least `min_batch` descriptors, ring `r` gets back as many as
    /// `fill` has frames for (taken from it). True if some stay unposted for want of frames.
    #[inline(never)]
    pub fn refill_from(&mut self, r: usize, t: Instant, min_batch: u32, fill: &mut u32, stats: &mut Stats) -> bool {
        let held = self.rx[r].unrefilled();
        if held == 0 || held < min_batch {
            return false;
        }
        self.advance_ring_before_inline(r, t, stats);
        let n = self.rx[r].refill_n(*fill);
        *fill -= n;
        n < held
    }

    /// Ring `r` starts with `n` of its free descriptors unposted (a zero-copy ring whose fill
    /// ring had fewer frames than the ring has descriptors).
    pub fn withhold(&mut self, r: usize, n: u32) {
        self.rx[r].withhold(n);
    }

    /// [`Nic::refill`]'s work for a larger batch, where there are descriptors to give back.
    #[inline(never)]
    fn give_back(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        self.give_back_inline(r, t, stats);
    }

    /// Frames due before `t` see the ring without the descriptors; then they are free.
    #[inline(always)]
    fn give_back_inline(&mut self, r: usize, t: Instant, stats: &mut Stats) {
        self.advance_ring_before_inline(r, t, stats);
        self.rx[r].refill();
    }

    // ------------------------------------------------------------------ transmit

    fn posted(stats: &mut Stats, port: &mut Option<Box<dyn Egress>>, p: &Packet, now: Instant, done: Instant) {
        stats.forwarded(p, now, done);
        if let Some(port) = port {
            port.depart(p, now, done);
        }
    }

    /// Hand a frame to tx queue `q` at `now` (marker B when its descriptor is posted): into
    /// the ring if it has room, else into the qdisc, else drop. A posted frame's completion
    /// is a cause for the queue's vector if that one is armed and waits for none.
    /// `reclaim`: for a host without a tx-clean phase, every descriptor completed by `now`
    /// is reclaimed first, at no cost (frames waiting in the qdisc move into the room).
    ///
    /// Its common case is inline: a frame posted straight to a ring with room, nothing
    /// queued, no port to tell and the queue's vector masked (no cause); the reclaim of a
    /// queue with nothing queued with it.
    #[inline(always)]
    pub fn xmit(
        &mut self,
        q: usize,
        p: &Packet,
        now: Instant,
        reclaim: bool,
        queue: &mut EventQueue,
        stats: &mut Stats,
    ) {
        let tx = &mut self.tx[q];
        // (Where the host drives no vector, none is armed.)
        if self.egress_port.is_none()
            && (!reclaim || tx.reclaim(now))
            && tx.can_post(1)
            && !(self.vectors_driven && self.vectors[tx.vector()].armed)
        {
            let done = tx.post(p, now, &mut self.egress);
            stats.forwarded(p, now, done);
            return;
        }
        self.xmit_general(q, p, now, reclaim, queue, stats);
    }

    /// [`Nic::xmit`] past its common case, out of line.
    #[inline(never)]
    fn xmit_general(
        &mut self,
        q: usize,
        p: &Packet,
        now: Instant,
        reclaim: bool,
        queue: &mut EventQueue,
        stats: &mut Stats,
    ) {
        if reclaim {
            self.tx_reclaim(q, now, stats);
        }
        self.xmit_to(q, p, now, queue, stats, None);
    }

    /// [`Nic::xmit`]; with `hold`, a completion that is a cause for the queue's armed vector
    /// is not scheduled: the interrupt it raises is held there instead (masking the
    /// vector, see [`Held`]) and its time returned.
    #[inline]
    fn xmit_to(
        &mut self,
        q: usize,
        p: &Packet,
        now: Instant,
        queue: &mut EventQueue,
        stats: &mut Stats,
        hold: Option<&mut Option<Held>>,
    ) -> Option<Instant> {
        match self.tx[q].xmit(p, now, &mut self.egress) {
            Xmit::Posted(done) => {
                Self::posted(stats, &mut self.egress_port, p, now, done);
                let v = self.tx[q].vector();
                let vec = &mut self.vectors[v];
                if vec.armed && !vec.tx_cause.is_pending() {
                    let Some(hold) = hold else {
                        vec.tx_cause.set(queue, done, Key::TxCause(v as u32));
                        return None;
                    };
                    // What the cause does when it comes (`cause`), known now: nothing can
                    // change the vector's moderation before it, as it cannot fire before.
                    let at = self.irq_time(v, done, done);
                    self.mask_for(v, at);
                    *hold =
                        Some(Held { vector: v, at, since: done, cause: true, set: (now, false), tx_cause: Some(done) });
                    return Some(at);
                }
            }
            Xmit::Queued => {}
            Xmit::Dropped => stats.drop_qdisc(p),
        }
        None
    }

    /// Clean one completed descriptor of tx queue `q` at `now`; frames waiting in the qdisc
    /// move into the freed room. Returns the cleaned frame's size.
    fn tx_clean_one(&mut self, q: usize, now: Instant, stats: &mut Stats) -> Option<u16> {
        let port = &mut self.egress_port;
        self.tx[q].clean_one(now, &mut self.egress, |p, done| Self::posted(stats, port, p, now, done))
    }

    /// Reclaim every descriptor of tx queue `q` completed by `now`, at no cost (modes
    /// without a tx-clean phase).
    #[inline]
    fn tx_reclaim(&mut self, q: usize, now: Instant, stats: &mut Stats) {
        if !self.tx[q].reclaim(now) {
            while self.tx_clean_one(q, now, stats).is_some() {}
        }
    }

    // ------------------------------------------------------------------ runs

    /// Whether a run on tx queue `q` ([`Nic::forward_run`], [`Nic::tx_clean`]) may
    /// pass the event queue by: its frames wait for no shared lock (none, or no hold time)
    /// and its vector is masked, so posting a frame schedules no completion cause.
    #[inline]
    pub fn runs_alone(&self, q: usize, lock_hold: Span) -> bool {
        (!self.tx[q].is_shared() || lock_hold.is_zero()) && !self.vectors[self.tx[q].vector()].armed
    }

    /// The driver's rx clean loop: from `*t`, frames of rx ring `r` one after another,
    /// each taking `time(frame)` and posted to tx queue `q` when it ends, while `*n` (the
    /// frames cleaned, counted here with their `bytes` less the FCS) is below `max` and the
    /// ring holds a frame. Each iteration first gives descriptors back in batches of
    /// `refill_batch` and brings the ring up to date, exactly as a unit at a time would.
    /// A frame that would end after `horizon` is left in `out` (taken, not yet cleaned)
    /// and its time returned: the caller runs it as a unit. Only where
    /// [`Nic::runs_alone`] holds, or where `q`'s vector, another one, is armed and has no
    /// completion pending: then the first frame posted is its cause, and the interrupt
    /// that raises is held in `hold` (see [`Held`]); no frame ends after it. Nothing here
    /// schedules an event, so the horizon stays.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn forward_run(
        &mut self,
        (r, q): (usize, usize),
        t: &mut Instant,
        (n, bytes, max): (&mut u32, &mut u64, u32),
        refill_batch: u32,
        horizon: Instant,
        queue: &mut EventQueue,
        stats: &mut Stats,
        mut time: impl FnMut(&Packet) -> Span,
        out: &mut Packet,
        hold: &mut Option<Held>,
    ) -> Option<Span> {
        let armed = self.vectors[self.tx[q].vector()].armed;
        debug_assert!(!armed || self.tx[q].vector() != self.rx[r].vector(), "a run's frames raise no event");
        // With room in the ring for every frame the run may post, nothing queued and no
        // port to tell, each frame is posted straight away (what `xmit` would do, where the
        // masked vector takes no completion cause).
        let direct = !armed && self.egress_port.is_none() && self.tx[q].can_post(max.saturating_sub(*n) as usize);
        let mut horizon = horizon;
        while *n < max {
            self.refill(r, *t, refill_batch, stats);
            self.advance_ring_to_inline(r, *t, stats);
            let Some(p) = self.rx[r].take() else { break };
            let d = time(&p);
            if *t + d > horizon {
                *out = p;
                return Some(d);
            }
            *t += d;
            *n += 1;
            *bytes += p.size.saturating_sub(4) as u64;
            if direct {
                let done = self.tx[q].post(&p, *t, &mut self.egress);
                stats.forwarded(&p, *t, done);
            } else if let Some(at) = self.xmit_to(q, &p, *t, queue, stats, Some(&mut *hold)) {
                // The held interrupt would preempt a frame that ends after it.
                horizon = horizon.min(at);
            }
        }
        None
    }

    /// The driver's tx clean: from `*t`, completed descriptors of tx queue `q`, one per
    /// `d`, each completed when its clean starts and cleaned when it ends (frames waiting
    /// in the qdisc then move into the freed room), while `*n` (counted here, with the
    /// frames' `bytes` less the FCS) is below `max`. A clean that would end after `horizon`
    /// is not run: true, the caller runs it as a unit. A run of cleans only where
    /// [`Nic::runs_alone`] holds; the clean a unit ended at `*t` (its time taken) is one
    /// with `d` zero, `max` one more than `*n` and `horizon` at `*t`.
    #[inline(always)]
    pub fn tx_clean(
        &mut self,
        q: usize,
        t: &mut Instant,
        (n, bytes, max): (&mut u32, &mut u64, u32),
        d: Span,
        horizon: Instant,
        stats: &mut Stats,
    ) -> bool {
        if let Some(beyond) = self.tx[q].clean_run(t, d, horizon, (&mut *n, &mut *bytes, max)) {
            return beyond;
        }
        while *n < max && self.tx[q].head_done().is_some_and(|done| done <= *t) {
            if *t + d > horizon {
                return true;
            }
            *t += d;
            if let Some(size) = self.tx_clean_one(q, *t, stats) {
                *n += 1;
                *bytes += size.saturating_sub(4) as u64;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::moderation::Episode;
    use crate::engine::moderation::Fixed;
    use crate::engine::nic::rx::RxRingKind;
    use crate::engine::stats::StatsConfig;
    use crate::engine::testing::Scripted;
    use crate::scenario::{LatencyFrom, LatencyTo, PacketSize, Pattern, ResolvedSource};
    use crate::topology::Topology;

    fn us(x: f64) -> Instant {
        Instant::from_ps((x * 1e6).round() as u64)
    }

    /// One core, one rx ring of 8 descriptors and its vector (tx completions shared on
    /// it), static moderation of 10.24 us; frames at `frames_us`.
    fn nic(frames_us: &[f64]) -> (Nic, EventQueue, Stats) {
        let topo = Topology::new(1, 1, 1, true);
        let sources = [ResolvedSource::simple("s", 1.0, Pattern::Cbr, PacketSize::default(), 1)];
        let frames: Vec<(u64, u16)> = frames_us.iter().map(|&t| ((t * 1e3).round() as u64, 64)).collect();
        let nic = Nic::new(NicParts {
            rx: vec![RxRing::new(8, 0, RxRingKind::Descriptors)],
            tx: vec![TxRing::new(8, 8, 0, 1)],
            vectors: vec![Vector::new(topo.vector(0), Box::new(Fixed::from_usecs(10)))],
            classifier: Classifier::new(topo, &["q".to_string()], 0, &[], &sources),
            ingress: Box::new(Scripted::new(&frames)),
            dma: Span::ZERO,
            irq_delay: Span::ZERO,
            egress_bps: 1e10,
            overhead_bytes: 20,
        });
        let stats = Stats::new(StatsConfig {
            warm: Instant::ZERO,
            duration: Span::from_us(1_000),
            t_off: Span::ZERO,
            t_plus: None,
            from: LatencyFrom::RxRing,
            to: LatencyTo::TxRing,
            max_per_poll: 64,
            interval: None,
            batches: 2,
            classes: 1,
            class_of_source: vec![0],
            rings: 1,
            cores: 1,
        });
        (nic, EventQueue::new(), stats)
    }

    /// A server's refill writes back the frames that came during a service the same in a
    /// run (`Nic::write_due_run`, here whether or not frames wait in the ring) as one by
    /// one: the ring, the frames taken from it, the wake-ups and the statistics, step by
    /// step. The frames come in clumps (up to six in a picosecond), some at the very
    /// picosecond a service ends (due after it), on the ring of 8 descriptors of [`nic`]
    /// (runs of 0 to `RUN` frames, runs longer than `RUN`, too few free descriptors for a
    /// run); the window opens and closes among them, and the ring is sometimes armed.
    #[test]
    fn a_refill_writes_back_the_same_frames_in_a_run_as_one_by_one() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut draw = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let (mut t_ns, mut frames_us) = (0u64, Vec::new());
        while frames_us.len() < 3_000 {
            t_ns += [0, 0, 0, 100, 300, 900, 2_000, 4_000][draw(8) as usize];
            frames_us.push(t_ns as f64 / 1e3);
        }
        let services_ps: Vec<u64> =
            (0..3_000).map(|_| [200_000, 700_000, 1_500_000, 3_000_000][draw(4) as usize]).collect();
        let armed: Vec<bool> = (0..3_000).map(|_| draw(10) == 0).collect();
        let run = |by_run: bool| {
            let (mut nic, mut queue, mut stats) = nic(&frames_us);
            stats.warm = Instant::from_ps(300_000_000);
            stats.stop = Instant::from_ps(900_000_000);
            let (mut t, mut steps) = (Instant::ZERO, Vec::new());
            for (&d, &arm) in services_ps.iter().zip(&armed) {
                let mut frame = Packet::default();
                if nic.take_from_ring(0, t, &mut stats, &mut frame) == 0 {
                    let Some(at) = nic.next_arrival(0..1, Instant::from_ps(u64::MAX / 2), &mut stats) else { break };
                    t = at;
                    continue;
                }
                t += Span::from_ps(d);
                nic.rx[0].set_armed(arm);
                // (What `Nic::refill` of a batch of one does, the way chosen here.)
                if nic.rx[0].unrefilled() > 0 {
                    if !(by_run && nic.write_due_run(0, t, &mut stats)) {
                        nic.advance_ring_before_inline(0, t, &mut stats);
                    }
                    nic.rx[0].refill();
                }
                let ring = &nic.rx[0];
                steps.push((
                    frame.t_ring,
                    ring.len(),
                    ring.free(),
                    ring.unrefilled(),
                    ring.last_write(),
                    ring.is_armed(),
                    nic.next_at,
                    nic.take_woken(&mut queue),
                    stats.all.offered,
                    stats.all.drop_rx_ring,
                ));
            }
            steps
        };
        let (by_run, one_by_one) = (run(true), run(false));
        assert!(by_run.len() > 1_000, "{}", by_run.len());
        assert!(by_run.iter().any(|s| s.9 > 0) && by_run.iter().any(|s| !s.7.is_empty()), "drops and wake-ups");
        for (i, (a, b)) in by_run.iter().zip(&one_by_one).enumerate() {
            assert_eq!(a, b, "step {i}");
        }
        assert_eq!(by_run.len(), one_by_one.len());
    }

    /// Pop events, standing in for the engine and an I/O mode that drives the vectors
    /// (every wake-up a cause): the next interrupt that fires, if any.
    fn next_irq(nic: &mut Nic, q: &mut EventQueue, st: &mut Stats) -> Option<Instant> {
        while let Some((t, kind)) = q.pop() {
            if nic.on_event(t, kind, q, st).is_some() {
                return Some(t);
            }
            assert!(nic.take_woken(q).is_empty(), "wake-ups are causes");
        }
        None
    }

    #[test]
    fn an_armed_vector_interrupts_at_the_first_write_back_then_waits_for_its_counter() {
        let (mut nic, mut q, mut st) = nic(&[1.0, 3.0, 30.0]);
        nic.arm_vector(0, Instant::ZERO, &mut q);
        assert_eq!(next_irq(&mut nic, &mut q, &mut st), Some(us(1.0)));
        assert_eq!(nic.vectors()[0].counter_zero(), us(11.24), "rx-usecs 10 is 10.24 us");
        assert!(!nic.vectors()[0].is_armed() && !nic.rx(0).is_armed(), "masked while NAPI polls");
        // The poll takes the frame and completes at 2 us: nothing new, the vector re-arms.
        assert!(nic.take(0, us(2.0), &mut st, &mut Packet::default()) > 0);
        nic.complete(0, us(2.0), Episode::default(), Instant::ZERO, &mut None, &mut q, &mut st);
        assert!(nic.vectors()[0].is_armed());
        // The frame of 3 us is a cause, but the counter holds the interrupt to 11.24 us.
        assert_eq!(next_irq(&mut nic, &mut q, &mut st), Some(us(11.24)));
        assert!(nic.take(0, us(12.0), &mut st, &mut Packet::default()) > 0);
        nic.complete(0, us(12.0), Episode::default(), Instant::ZERO, &mut None, &mut q, &mut st);
        // Long after the counter ran out, the next frame interrupts at once.
        assert_eq!(next_irq(&mut nic, &mut q, &mut st), Some(us(30.0)));
        assert_eq!(st.irqs, 3);
    }

    #[test]
    fn a_cause_that_comes_while_masked_interrupts_when_the_vector_is_unmasked() {
        let (mut nic, mut q, mut st) = nic(&[1.0, 3.0]);
        nic.arm_vector(0, Instant::ZERO, &mut q);
        assert_eq!(next_irq(&mut nic, &mut q, &mut st), Some(us(1.0)));
        // The frame of 3 us is written while the vector is masked (no wake-up) ...
        assert!(nic.take(0, us(5.0), &mut st, &mut Packet::default()) > 0);
        assert_eq!(nic.rx(0).len(), 1);
        // ... so napi_complete at 5 us finds the cause set: an interrupt when the counter
        // allows, not an armed vector.
        nic.complete(0, us(5.0), Episode::default(), Instant::ZERO, &mut None, &mut q, &mut st);
        assert!(!nic.vectors()[0].is_armed());
        assert_eq!(next_irq(&mut nic, &mut q, &mut st), Some(us(11.24)));
    }

    #[test]
    fn a_transmitted_frame_is_a_cause_on_an_armed_tx_vector() {
        let (mut nic, mut q, mut st) = nic(&[]);
        nic.arm_vector(0, Instant::ZERO, &mut q);
        // 64 B at 10 Gbit/s: done 67.2 ns after posting.
        nic.xmit(0, &Packet::arriving(us(0.0), 64, 0, 0), us(20.0), false, &mut q, &mut st);
        assert_eq!(nic.tx(0).head_done(), Some(us(20.0672)));
        assert_eq!(next_irq(&mut nic, &mut q, &mut st), Some(us(20.0672)));
        assert_eq!(nic.tx_clean_one(0, us(20.05), &mut st), None, "not complete before 20.0672 us");
        assert_eq!(nic.tx_clean_one(0, us(21.0), &mut st), Some(64));
        assert_eq!(st.all.forwarded, 1);
    }

    /// A frame taken straight off the ingress leaves the ring, the statistics and the
    /// wake-ups as a frame written back and then taken does; it is taken that way only when
    /// it is the one frame due on an empty ring with a free descriptor.
    #[test]
    fn a_frame_taken_straight_off_the_ingress_is_one_that_passed_through_the_ring() {
        let frames = [1.0, 2.0, 2.5, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0];
        let (mut a, mut qa, mut sa) = nic(&frames);
        let (mut b, mut qb, mut sb) = nic(&frames);
        a.arm(0..1, true, &mut qa);
        b.arm(0..1, true, &mut qb);
        // (time, whether the frame comes straight off the ingress)
        let takes = [
            (0.5, false),
            (1.5, true),
            (3.0, false),
            (3.0, false),
            (6.5, true),
            (7.5, true),
            (8.5, true),
            (9.5, true),
            (10.5, false),
            (11.5, false),
            (12.0, false),
        ];
        for (i, &(t, straight)) in takes.iter().enumerate() {
            if i == 8 {
                // Descriptors never given back: the ring has no free one left.
                assert_eq!(a.rx(0).free(), 0, "7 descriptors taken");
            }
            let (mut pa, mut pb) = (Packet::default(), Packet::default());
            let got = a.take_lone_due(0, us(t), &mut sa, &mut pa);
            assert_eq!(got, straight, "take {i} at {t} us");
            let got_a = got || a.take_from_ring(0, us(t), &mut sa, &mut pa) > 0;
            let got_b = b.take_from_ring(0, us(t), &mut sb, &mut pb) > 0;
            assert_eq!((got_a, pa), (got_b, pb), "take {i} at {t} us");
            assert_eq!(
                (a.rx(0).len(), a.rx(0).free(), a.rx(0).unrefilled(), a.rx(0).last_write()),
                (b.rx(0).len(), b.rx(0).free(), b.rx(0).unrefilled(), b.rx(0).last_write())
            );
            assert_eq!((sa.all.offered, sa.all.drop_rx_ring), (sb.all.offered, sb.all.drop_rx_ring));
            assert_eq!(a.take_woken(&mut qa), b.take_woken(&mut qb));
            if i == 0 {
                a.arm(0..1, true, &mut qa);
                b.arm(0..1, true, &mut qb);
            }
        }
        assert!(sa.all.drop_rx_ring > 0, "the ring ran out of descriptors");
    }

    /// One ring brought up to a time by the inline move (the first frame due moved in
    /// place) holds what the out-of-line move gives it: frames, drops, wake-ups.
    #[test]
    fn the_inline_move_of_one_ring_is_the_out_of_line_one() {
        let frames = [1.0, 2.0, 2.0, 2.5, 4.0, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0];
        let (mut a, mut qa, mut sa) = nic(&frames);
        let (mut b, mut qb, mut sb) = nic(&frames);
        a.arm(0..1, true, &mut qa);
        b.arm(0..1, true, &mut qb);
        for t in [0.5, 1.0, 2.0, 2.0, 3.0, 5.0, 7.0, 12.0] {
            a.advance_ring_to_inline(0, us(t), &mut sa);
            b.advance_ring_to(0, us(t), &mut sb);
            assert_eq!(
                (a.rx(0).len(), a.rx(0).free(), a.rx(0).last_write()),
                (b.rx(0).len(), b.rx(0).free(), b.rx(0).last_write()),
                "at {t} us"
            );
            assert_eq!((sa.all.offered, sa.all.drop_rx_ring), (sb.all.offered, sb.all.drop_rx_ring), "at {t} us");
            assert_eq!(a.take_woken(&mut qa), b.take_woken(&mut qb), "at {t} us");
            a.arm(0..1, true, &mut qa);
            b.arm(0..1, true, &mut qb);
        }
        assert!(sa.all.drop_rx_ring > 0, "the ring of 7 filled");
    }

    #[test]
    fn the_driver_gives_descriptors_back_in_batches() {
        let (mut nic, _q, mut st) = nic(&[1.0, 2.0, 3.0]);
        for t in [1.5, 2.5] {
            assert!(nic.take(0, us(t), &mut st, &mut Packet::default()) > 0);
        }
        assert_eq!((nic.rx(0).unrefilled(), nic.rx(0).free()), (2, 5), "7 usable, 2 written and taken");
        nic.refill(0, us(3.5), 3, &mut st);
        assert_eq!(nic.rx(0).unrefilled(), 2, "fewer than the batch: kept");
        nic.refill(0, us(3.5), 2, &mut st);
        assert_eq!(
            (nic.rx(0).unrefilled(), nic.rx(0).free(), nic.rx(0).len()),
            (0, 6, 1),
            "the frame of 3 us came in first"
        );
    }
}
