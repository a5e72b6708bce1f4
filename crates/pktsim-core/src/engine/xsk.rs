//! An AF_XDP socket's rings and umem as its user thread and the kernel share them
//! (`[host.af_xdp]`; `net/xdp/xsk.c`, `xsk_buff_pool.c`, xdpsock): where each umem frame
//! is, and what the kernel can do for want of one.
//!
//! ```text
//!   fill ring (+ the pool's free list) --refill (zero copy) / xsk_rcv copy--> kernel
//!        ^                                                                    |
//!        |  rxdrop: the thread gives each frame back as it reads it            v
//!        +------------------------------------------------ rx ring (the thread's socket)
//!        |  l2fwd: read frames go onto the tx ring --> NIC tx queue --> completion ring
//!        +---------- the thread reaps the completion ring (complete_tx_l2fwd) <--+
//! ```
//!
//! A zero-copy ring refills only from the fill ring: with none left its descriptors stay
//! unposted and the NIC drops (`rx_missed_errors`); each refill that comes up short counts
//! in `rx_fill_ring_empty_descs` (`queue_empty_descs`) and, with `need_wakeup`, sets the
//! fill ring's flag, so the thread kicks (`xsk_wakeup`) the next time its rx ring is
//! empty; without it the poll reports its whole budget and the NAPI polls again. Copy mode
//! takes a frame per frame received (`__xsk_rcv`): with none the frame is dropped
//! (`rx_dropped`). A frame the kernel drops goes back to the pool's free list, counted
//! here with the fill ring.

use std::collections::VecDeque;

use super::ingress::Packet;
use super::time::Span;

/// xdpsock's `TX_BATCH_SIZE`: frames one copy-mode kick sends (`__xsk_generic_xmit`).
pub const COPY_TX_BATCH: u32 = 32;

/// The socket's sizes and modes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XskParams {
    pub zero_copy: bool,
    pub need_wakeup: bool,
    /// A zero-copy driver ends its rx clean at a full rx ring (`host.af_xdp.rx_full`).
    pub stop_on_full: bool,
    pub umem_frames: u32,
    pub fill_size: u32,
    pub rx_size: u32,
    pub tx_size: u32,
    pub comp_size: u32,
    /// The thread forwards (l2fwd) rather than drops (rxdrop).
    pub l2fwd: bool,
    /// Copy mode: the kernel's time per frame a kick sends (`xsk_generic_xmit`).
    pub t_xmit_copy: Span,
}

/// One socket's frames.
#[derive(Debug, Clone)]
pub struct Xsk {
    /// Frames on the fill ring, with the pool's free list.
    fill: u32,
    /// Frames the thread holds for want of room on the fill ring.
    held: u32,
    /// l2fwd: frames on the tx ring.
    tx: VecDeque<Packet>,
    /// Frames sent (their completion-ring slots reserved) and not yet reaped.
    in_flight: u32,
    /// Of those, frames on the completion ring.
    comp: u32,
    /// The fill ring's `need_wakeup` flag.
    pub flag: bool,
    /// Refills that came up short (`rx_fill_ring_empty_descs`), in the window.
    pub fill_empty: u64,
}

impl Xsk {
    /// A socket whose thread put every umem frame on the fill ring it had room for.
    pub fn new(p: &XskParams) -> Self {
        let fill = p.umem_frames.min(p.fill_size);
        Xsk { fill, held: p.umem_frames - fill, tx: VecDeque::new(), in_flight: 0, comp: 0, flag: false, fill_empty: 0 }
    }

    /// Frames on the fill ring (and the pool's free list).
    pub fn fill(&self) -> u32 {
        self.fill
    }

    /// The kernel takes up to `n` frames from the fill ring: how many it got.
    pub fn take_fill(&mut self, n: u32) -> u32 {
        let n = n.min(self.fill);
        self.fill -= n;
        n
    }

    /// A frame the kernel took goes back to the pool's free list (it dropped the frame).
    pub fn free(&mut self) {
        self.fill += 1;
    }

    /// The thread gives `n` frames back: onto the fill ring as far as it has room, the
    /// rest held until it has.
    pub fn give_back(&mut self, n: u32, p: &XskParams) {
        self.held += n;
        let room = p.fill_size.saturating_sub(self.fill);
        let m = room.min(self.held);
        self.fill += m;
        self.held -= m;
    }

    /// l2fwd: free entries of the tx ring.
    pub fn tx_room(&self, p: &XskParams) -> u32 {
        p.tx_size - self.tx.len() as u32
    }

    /// l2fwd: a frame the thread read goes onto the tx ring.
    pub fn push_tx(&mut self, f: Packet) {
        self.tx.push_back(f);
    }

    /// l2fwd: frames on the tx ring.
    pub fn tx_len(&self) -> u32 {
        self.tx.len() as u32
    }

    /// Frames the kernel may send now, at most `n`: those on the tx ring that the
    /// completion ring has slots for (`xsk_tx_peek_desc` reserves one per frame).
    pub fn sendable(&self, n: u32, p: &XskParams) -> u32 {
        let slots = p.comp_size.saturating_sub(self.in_flight);
        n.min(slots).min(self.tx.len() as u32)
    }

    /// The kernel takes the tx ring's oldest frame to send it.
    pub fn pop_tx(&mut self) -> Option<Packet> {
        let f = self.tx.pop_front()?;
        self.in_flight += 1;
        Some(f)
    }

    /// The driver's tx clean completed `n` of the frames sent: onto the completion ring.
    pub fn completed(&mut self, n: u32) {
        self.comp = (self.comp + n).min(self.in_flight);
    }

    /// The thread reaps up to `n` completions (`complete_tx_l2fwd`) onto the fill ring.
    pub fn reap(&mut self, n: u32, p: &XskParams) {
        let m = n.min(self.comp);
        self.comp -= m;
        self.in_flight -= m;
        self.give_back(m, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> XskParams {
        XskParams {
            zero_copy: true,
            need_wakeup: true,
            stop_on_full: true,
            umem_frames: 10,
            fill_size: 8,
            rx_size: 8,
            tx_size: 4,
            comp_size: 4,
            l2fwd: true,
            t_xmit_copy: Span::ZERO,
        }
    }

    /// 10 frames, a fill ring of 8: 8 on it, 2 held; the kernel takes 6, gets back 3 (the
    /// thread read them): 5 on the fill ring; 7 more give it 8 and leave 4 held.
    #[test]
    fn frames_go_round_the_fill_ring_as_far_as_it_has_room() {
        let p = params();
        let mut x = Xsk::new(&p);
        assert_eq!((x.fill(), x.held), (8, 2));
        assert_eq!(x.take_fill(6), 6);
        assert_eq!(x.take_fill(6), 2);
        assert_eq!(x.fill(), 0);
        x.give_back(3, &p);
        assert_eq!((x.fill(), x.held), (5, 0));
        x.give_back(7, &p);
        assert_eq!((x.fill(), x.held), (8, 4));
    }

    /// A tx ring of 4, a completion ring of 4: the kernel sends no more than it has
    /// completion slots for, and a reaped completion frees a slot and fills the fill ring.
    #[test]
    fn the_completion_ring_bounds_what_is_sent() {
        let p = params();
        let mut x = Xsk::new(&p);
        x.take_fill(8);
        for _ in 0..4 {
            x.push_tx(Packet::default());
        }
        assert_eq!(x.tx_room(&p), 0);
        assert_eq!(x.sendable(64, &p), 4);
        for _ in 0..3 {
            x.pop_tx();
        }
        x.push_tx(Packet::default());
        x.push_tx(Packet::default());
        assert_eq!(x.sendable(64, &p), 1, "3 slots taken");
        x.completed(2);
        x.reap(64, &p);
        // The 2 reaped and the 2 held since the start go onto the fill ring.
        assert_eq!((x.fill(), x.sendable(64, &p)), (4, 3));
    }
}
