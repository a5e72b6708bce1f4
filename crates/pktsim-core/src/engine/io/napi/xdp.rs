//! XDP and AF_XDP on NAPI ([`crate::engine::io::xdp`], [`crate::engine::io::af_xdp`]): the
//! modes' constructors, where a frame the rx clean finished goes (the program's verdict:
//! dropped, into the poll's bulk for XDP_TX and redirects, `bq_enqueue`; or up the stack
//! to the application's socket), and the bulk's flush at the poll's end: to the tx queues
//! (`xdp_do_flush`) or onto the AF_XDP socket's rx ring (`xsk_flush`).

use super::Napi;
use crate::engine::ingress::Packet;
use crate::engine::io::xdp::{Verdict, Xdp};
use crate::engine::io::Ctx;
use crate::engine::time::Instant;
use crate::scenario::ResolvedScenario;
use crate::topology::Topology;

impl Napi {
    /// NAPI with an XDP program on every frame (io = "xdp").
    pub fn with_xdp(sc: &ResolvedScenario, topo: &Topology) -> Self {
        Napi { xdp: Some(Xdp::new(sc)), ..Self::new(sc, topo) }
    }

    /// AF_XDP: the program redirects to the queue's socket, whose user thread is the
    /// application, busy polling (preferred, its batch a poll) when asked to.
    pub fn af_xdp(sc: &ResolvedScenario, topo: &Topology) -> Self {
        let x = &sc.scenario.host.io.af_xdp().cloned().unwrap_or_default();
        let mut napi = Napi { xdp: Some(Xdp::to_xsk(sc)), ..Self::new(sc, topo) };
        napi.p.busy_poll_budget = x.batch;
        napi.p.prefer_busy_poll = x.busy_poll;
        napi.with_app(crate::engine::io::af_xdp::app_params(sc))
    }

    /// Where XDP or an application sends a frame the driver finished at `t` (rx ring of
    /// core `c`, tx queue `q`): true if it went there, false if it is forwarded as usual.
    /// Out of line: the plain forwarding path stays small.
    #[inline(never)]
    pub(super) fn rx_verdict(&mut self, c: usize, p: Packet, q: usize, t: Instant, ctx: &mut Ctx) -> bool {
        match self.xdp.as_ref().map_or(Verdict::Stack, Xdp::verdict) {
            Verdict::Stack | Verdict::Send => {}
            Verdict::Consume => {
                ctx.stats.consumed(&p, t);
                return true;
            }
            Verdict::Bulk => {
                self.cores[c].bulk.push((p, q));
                return true;
            }
        }
        // Delivered locally: into the socket of this core's application thread.
        match &mut self.app {
            Some(app) => {
                app.deliver(c, p, t, ctx.queue, ctx.stats);
                true
            }
            None => false,
        }
    }

    /// The poll's XDP bulk goes out at `t`: to the tx queues (`xdp_do_flush`), or onto the
    /// AF_XDP socket's rx ring (`xsk_flush`).
    pub(super) fn flush(&mut self, c: usize, t: Instant, ctx: &mut Ctx) {
        if ctx.stats.in_window(t) {
            self.flushes += 1;
        }
        let to_xsk = self.xdp.as_ref().is_some_and(|x| x.xsk.is_some());
        for (p, q) in std::mem::take(&mut self.cores[c].bulk) {
            match &mut self.app {
                Some(app) if to_xsk => app.deliver(c, p, t, ctx.queue, ctx.stats),
                _ => ctx.nic.xmit(q, &p, t, false, ctx.queue, ctx.stats),
            }
        }
    }
}
