//! The node's ingress port: where frames come from.
//!
//! ```text
//!   synthetic sources + link (traffic.rs) --.
//!   a trace, an upstream node (later)  -----+--> Ingress::next_packet --> NIC (DMA, classify)
//! ```
//!
//! An ingress hands the NIC one frame at a time, in the order their last bits arrive, and
//! only when asked, so memory never grows with the number of frames. A frame is a plain
//! record that carries what every later stage needs: its times, its size and its flow.

use super::time::Instant;

/// A frame as the simulator carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Packet {
    /// When the frame entered the first node of its path (for end-to-end latency; on a
    /// single node, its last bit received).
    pub t_origin: Instant,
    /// Last bit received from the wire at this node.
    pub t_wire: Instant,
    /// Descriptor written back to the rx ring (t_wire + the NIC's DMA delay).
    pub t_ring: Instant,
    /// Frame size in bytes (FCS included).
    pub size: u16,
    /// Source index: with `flow`, the frame's flow identity (its 5-tuple, see
    /// [`super::nic::classify::tuple`]).
    pub source: u16,
    /// Flow number within the source.
    pub flow: u32,
    /// Rx ring the NIC put it in.
    pub ring: u16,
}

impl Packet {
    /// A frame whose last bit arrives at `t_wire` (its origin there too).
    pub fn arriving(t_wire: Instant, size: u16, source: u16, flow: u32) -> Self {
        Packet { t_origin: t_wire, t_wire, t_ring: t_wire, size, source, flow, ring: 0 }
    }
}

/// A source of frames for a node's NIC.
pub trait Ingress: Send {
    /// The next frame off the wire (`t_wire` never decreases from one call to the next), or
    /// None when the ingress has no more.
    fn next_packet(&mut self) -> Option<Packet>;
    /// The next frame written into `out` (true), or false when the ingress has no more.
    /// Writing in place spares a copy of a just-written frame, which stalls the CPU.
    #[inline]
    fn next_into(&mut self, out: &mut Packet) -> bool {
        match self.next_packet() {
            Some(p) => {
                *out = p;
                true
            }
            None => false,
        }
    }
    /// Append up to `max` next frames to `out`, in order: fewer only when the ingress has
    /// no more. The NIC takes frames a batch at a time (one call per batch, the frames
    /// generated in one tight loop where an ingress can).
    #[inline]
    fn fill(&mut self, out: &mut Vec<Packet>, max: usize) {
        let mut p = Packet::default();
        for _ in 0..max {
            if !self.next_into(&mut p) {
                return;
            }
            out.push(p);
        }
    }
    /// Frames handed out so far.
    fn delivered(&self) -> u64;
}
