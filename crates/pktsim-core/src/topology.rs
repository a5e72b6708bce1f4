//! The node's layout: which rx ring belongs to which core and queue, which tx queue a core
//! sends on, and which interrupt vector serves which ring. Every component numbers rings,
//! queues and vectors through this one place.
//!
//! ```text
//!   core c, queue j (nic.queues, highest priority first)  -->  rx ring c * queues + j
//!   core c  -->  tx queue c mod tx_queues (several cores on one queue share its lock)
//!   vectors: one per rx ring (vector r = rx ring r), then, with nic.tx_vector = "separate",
//!            one per tx queue (vector rings + q); with "shared", tx queue q completes on
//!            the vector of ring 0 of core q mod cores
//! ```

use std::ops::Range;

/// Rings, queues, cores and vectors of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    cores: usize,
    queues_per_core: usize,
    tx_queues: usize,
    shared_tx_vector: bool,
}

impl Topology {
    /// `cores` >= 1, `queues_per_core` >= 1, `tx_queues` >= 1.
    pub fn new(cores: usize, queues_per_core: usize, tx_queues: usize, shared_tx_vector: bool) -> Self {
        Topology { cores, queues_per_core, tx_queues, shared_tx_vector }
    }

    pub fn cores(&self) -> usize {
        self.cores
    }
    pub fn queues_per_core(&self) -> usize {
        self.queues_per_core
    }
    pub fn tx_queues(&self) -> usize {
        self.tx_queues
    }
    /// Rx rings of the node.
    pub fn rings(&self) -> usize {
        self.cores * self.queues_per_core
    }

    /// Rx ring of queue `queue` on core `core`.
    #[inline]
    pub fn ring(&self, core: usize, queue: usize) -> usize {
        core * self.queues_per_core + queue
    }
    /// Core owning rx ring `ring`.
    #[inline]
    pub fn core_of_ring(&self, ring: usize) -> usize {
        // One queue per core is the common case: no division per frame.
        if self.queues_per_core == 1 {
            ring
        } else {
            ring / self.queues_per_core
        }
    }
    /// Queue (index into nic.queues) of rx ring `ring`.
    #[inline]
    pub fn queue_of_ring(&self, ring: usize) -> usize {
        ring % self.queues_per_core
    }
    /// Core `core`'s rx rings, highest priority first.
    pub fn rings_of_core(&self, core: usize) -> Range<usize> {
        self.ring(core, 0)..self.ring(core + 1, 0)
    }

    /// Tx queue core `core` sends on.
    #[inline]
    pub fn tx_of_core(&self, core: usize) -> usize {
        if core < self.tx_queues {
            core
        } else {
            core % self.tx_queues
        }
    }
    /// Tx queue frames from rx ring `ring` leave by.
    #[inline(always)]
    pub fn tx_of_ring(&self, ring: usize) -> usize {
        self.tx_of_core(self.core_of_ring(ring))
    }
    /// Cores sending on tx queue `q` (more than one share its lock).
    pub fn sharers(&self, q: usize) -> u32 {
        (0..self.cores).filter(|&c| self.tx_of_core(c) == q).count() as u32
    }
    /// Core whose CPU tx queue `q`'s completions interrupt.
    pub fn core_of_tx(&self, q: usize) -> usize {
        q % self.cores
    }

    /// Interrupt vectors: one per rx ring, plus one per tx queue unless tx completions share
    /// the rx vectors.
    pub fn vectors(&self) -> usize {
        if self.shared_tx_vector {
            self.rings()
        } else {
            self.rings() + self.tx_queues
        }
    }
    /// Vector of rx ring `ring`.
    #[inline]
    pub fn vector_of_ring(&self, ring: usize) -> usize {
        ring
    }
    /// Vector completing tx queue `q`'s descriptors.
    pub fn vector_of_tx(&self, q: usize) -> usize {
        if self.shared_tx_vector {
            self.vector_of_ring(self.ring(self.core_of_tx(q), 0))
        } else {
            self.rings() + q
        }
    }
    /// The core of each vector, in vector order.
    pub fn core_of_each_vector(&self) -> Vec<u32> {
        (0..self.vectors()).map(|v| self.vector(v).core as u32).collect()
    }
    /// The rx ring, tx queue and core of vector `v`.
    pub fn vector(&self, v: usize) -> VectorLayout {
        if v < self.rings() {
            // With more tx queues than cores, the vector watches the last queue mapped to it.
            let tx = (0..self.tx_queues).rev().find(|&q| self.shared_tx_vector && self.vector_of_tx(q) == v);
            VectorLayout { rx: Some(v), tx, core: self.core_of_ring(v) }
        } else {
            let q = v - self.rings();
            VectorLayout { rx: None, tx: Some(q), core: self.core_of_tx(q) }
        }
    }
}

/// What one vector serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorLayout {
    pub rx: Option<usize>,
    pub tx: Option<usize>,
    pub core: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_numbered_core_major() {
        let t = Topology::new(3, 2, 3, false);
        assert_eq!(t.rings(), 6);
        assert_eq!(t.ring(2, 1), 5);
        assert_eq!((t.core_of_ring(5), t.queue_of_ring(5)), (2, 1));
        assert_eq!(t.rings_of_core(1), 2..4);
        assert_eq!(t.tx_of_ring(3), 1);
    }

    #[test]
    fn cores_share_tx_queues_round_robin() {
        let t = Topology::new(4, 1, 2, false);
        assert_eq!((0..4).map(|c| t.tx_of_core(c)).collect::<Vec<_>>(), [0, 1, 0, 1]);
        assert_eq!((t.sharers(0), t.sharers(1)), (2, 2));
        assert_eq!(Topology::new(4, 1, 4, false).sharers(3), 1);
    }

    #[test]
    fn separate_tx_vectors_follow_the_rx_vectors() {
        let t = Topology::new(2, 2, 2, false);
        assert_eq!(t.vectors(), 6);
        assert_eq!(t.vector(4), VectorLayout { rx: None, tx: Some(0), core: 0 });
        assert_eq!(t.vector(5), VectorLayout { rx: None, tx: Some(1), core: 1 });
        assert_eq!(t.vector(3), VectorLayout { rx: Some(3), tx: None, core: 1 });
        assert_eq!(t.vector_of_tx(1), 5);
    }

    #[test]
    fn a_shared_tx_vector_is_the_first_ring_of_its_core() {
        let t = Topology::new(2, 2, 2, true);
        assert_eq!(t.vectors(), 4);
        assert_eq!(t.vector(0), VectorLayout { rx: Some(0), tx: Some(0), core: 0 });
        assert_eq!(t.vector(2), VectorLayout { rx: Some(2), tx: Some(1), core: 1 });
        assert_eq!(t.vector(1), VectorLayout { rx: Some(1), tx: None, core: 0 });
        assert_eq!(t.vector_of_tx(1), 2);
    }
}
