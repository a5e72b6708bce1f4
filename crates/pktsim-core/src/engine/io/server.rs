//! A plain single server per rx ring: no interrupts, no NAPI. The core takes frames from
//! its ring in arrival order and serves each for `t_proc`; a frame keeps its descriptor
//! until its service ends, so a ring of N descriptors is an M/G/1/K queue with K = N - 1
//! (one descriptor always stays empty). This is what pktsim's queueing-theory checks run on.

use super::{Ctx, IoMode};
use crate::engine::queue::EventKind;
use crate::engine::stats::Activity;
use crate::engine::time::Ps;
use crate::engine::traffic::Packet;

const EV_DONE: u8 = 0;

struct Station {
    ring: usize,
    tx: usize,
    serving: Option<(Packet, Ps)>,
    gen: u32,
}

pub struct Server {
    stations: Vec<Station>,
}

impl Server {
    /// One server per `(rx ring, tx queue)` pair.
    pub fn new(pairs: &[(usize, usize)]) -> Self {
        Server { stations: pairs.iter().map(|&(ring, tx)| Station { ring, tx, serving: None, gen: 0 }).collect() }
    }

    fn run(&mut self, s: usize, mut t: Ps, ctx: &mut Ctx) {
        loop {
            let st = &mut self.stations[s];
            if let Some((p, d)) = st.serving.take() {
                ctx.stats.busy(Activity::RxClean, t - d, t);
                // Frames that arrived during the service saw the ring before this
                // descriptor came back.
                ctx.nic.advance_to(t, ctx.stats);
                let ring = &mut ctx.nic.rx[st.ring];
                ring.unrefilled += 1;
                ring.refill();
                ctx.nic.tx_reclaim(st.tx, t, ctx.stats);
                ctx.nic.xmit(st.tx, p, t, ctx.stats);
            }
            ctx.nic.advance_to(t, ctx.stats);
            let ring = &mut ctx.nic.rx[st.ring];
            let Some(p) = ring.pkts.pop_front() else {
                ring.wake = true;
                return;
            };
            let d = ctx.costs.t_proc(&p);
            st.serving = Some((p, d));
            if t + d <= ctx.queue.peek_time() {
                t += d;
                continue;
            }
            st.gen = st.gen.wrapping_add(1);
            ctx.queue.schedule(t + d, EventKind::Mode { tag: EV_DONE, index: s as u32, gen: st.gen });
            return;
        }
    }
}

impl IoMode for Server {
    fn start(&mut self, ctx: &mut Ctx) {
        for st in &self.stations {
            ctx.nic.rx[st.ring].wake = true;
        }
    }

    fn on_event(&mut self, tag: u8, index: u32, gen: u32, ctx: &mut Ctx) {
        let s = index as usize;
        if tag == EV_DONE && self.stations[s].gen == gen {
            self.run(s, ctx.now, ctx);
        }
    }

    fn on_rx_wake(&mut self, ring: usize, t: Ps, ctx: &mut Ctx) {
        if let Some(s) = self.stations.iter().position(|st| st.ring == ring && st.serving.is_none()) {
            self.run(s, t, ctx);
        }
    }
}
