//! XDP and AF_XDP on NAPI ([`crate::engine::io::xdp`], [`crate::engine::io::af_xdp`]): the
//! modes' constructors, where a frame the rx clean finished goes (the program's verdict:
//! dropped, into the poll's bulk for XDP_TX and redirects, `bq_enqueue`; or up the stack
//! to the application's socket), and the bulk's flush at the poll's end: to the tx queues
//! (`xdp_do_flush`) or onto the AF_XDP socket's rx ring (`xsk_flush`).

use super::Napi;
use super::Work;
use crate::engine::ingress::Packet;
use crate::engine::io::xdp::{Verdict, Xdp};
use crate::engine::io::Ctx;
use crate::engine::queue::Key;
use crate::engine::time::{Instant, Span};
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
        napi.p.prefer_busy_poll = x.busy_poll.ps > 0;
        napi.t_xmit_zc = x.t_xmit_zc.unwrap_or_default().into();
        let napi = napi.with_app(crate::engine::io::af_xdp::app_params(sc));
        let xsk = napi.app.as_ref().and_then(|a| a.params().xsk);
        Napi {
            xsk_zc: xsk.is_some_and(|x| x.zero_copy),
            xsk_stop: xsk.filter(|x| x.stop_on_full).map(|x| x.rx_size as u64),
            xsk_l2fwd: xsk.is_some_and(|x| x.l2fwd),
            ..napi
        }
    }

    /// Zero copy: each ring starts with as many buffers posted as its socket's fill ring
    /// gave it.
    pub(super) fn xsk_start(&mut self, ctx: &mut Ctx) {
        // A spinning thread runs from the start.
        if self.app.as_ref().is_some_and(|a| a.params().spin) {
            for i in 0..self.topo.cores() {
                let core = self.app_core(i);
                if let Some(c) = self.cores.get_mut(core) {
                    c.fair.wake(super::APP, Instant::ZERO);
                }
                crate::engine::io::units::run(self, core, Instant::ZERO, ctx);
            }
        }
        if !self.xsk_zc {
            return;
        }
        for c in 0..self.cores.len() {
            for r in self.topo.rings_of_core(c) {
                let Some(x) = self.app.as_mut().and_then(|a| a.xsk(c)) else { return };
                let free = ctx.nic.rx(r).free();
                let posted = x.take_fill(free);
                ctx.nic.withhold(r, free - posted);
            }
        }
    }

    /// Zero copy, at the top of each rx-clean iteration: the driver stops at a full rx
    /// ring where it does (false, the fill ring's `need_wakeup` set), else gives ring `r`
    /// its descriptors back as far as the fill ring has frames; one that comes up short
    /// counts in `rx_fill_ring_empty_descs` and asks for a kick (`need_wakeup`) or keeps
    /// the NAPI polling (the poll reports its whole budget).
    #[inline]
    pub(super) fn xsk_rx_refill(&mut self, c: usize, r: usize, t: Instant, min_batch: u32, ctx: &mut Ctx) -> bool {
        let Some(app) = self.app.as_mut() else { return true };
        if let Some(rx_size) = self.xsk_stop {
            if app.queued(c) + self.cores[c].bulk.len() as u64 >= rx_size {
                app.need_wakeup(c);
                return false;
            }
        }
        let held = ctx.nic.rx(r).unrefilled();
        if held == 0 || held < min_batch {
            return true;
        }
        let need_wakeup = app.params().xsk.as_ref().is_some_and(|x| x.need_wakeup);
        let Some(x) = app.xsk(c) else { return true };
        let mut fill = x.fill();
        let short = ctx.nic.refill_from(r, t, min_batch, &mut fill, ctx.stats);
        x.take_fill(x.fill() - fill);
        if short {
            if ctx.stats.in_window(t) {
                x.fill_empty += 1;
            }
            if need_wakeup {
                app.need_wakeup(c);
            } else if let Some(poll) = &mut self.cores[c].poll {
                poll.short = true;
            }
        }
        true
    }

    /// AF_XDP l2fwd in core `c`'s poll, after the tx clean of queue `q`: the frames it
    /// completed go onto the completion ring; zero copy, the socket's tx ring is sent
    /// (once a poll: as many frames as the queue and the completion ring have room for,
    /// the NAPI kept polling while more wait). The unit that sends them, if any.
    pub(super) fn xsk_tx(&mut self, c: usize, q: usize, ctx: &mut Ctx) -> Option<(Work, Span)> {
        let app = self.app.as_mut()?;
        let xp = app.params().xsk.filter(|x| x.l2fwd)?;
        let poll = self.cores[c].poll.as_mut()?;
        let x = app.xsk(c)?;
        x.completed(poll.tx_done - poll.tx_reported);
        poll.tx_reported = poll.tx_done;
        if !xp.zero_copy || poll.xsk_sent {
            return None;
        }
        poll.xsk_sent = true;
        let n = x.sendable(ctx.nic.tx(q).room(), &xp);
        if n == 0 {
            return None;
        }
        if x.tx_len() > n {
            poll.tx_complete = false;
        }
        Some((Work::XskXmit(q, n), self.t_xmit_zc * n as u64))
    }

    /// The frames of core `c`'s socket's tx ring that an [`Work::XskXmit`] sent go to
    /// tx queue `q` at `t`.
    pub(super) fn xsk_xmit(&mut self, c: usize, q: usize, n: u32, t: Instant, ctx: &mut Ctx) {
        let Some(x) = self.app.as_mut().and_then(|a| a.xsk(c)) else { return };
        for _ in 0..n {
            let Some(p) = x.pop_tx() else { break };
            ctx.nic.xmit(q, &p, t, false, ctx.queue, ctx.stats);
        }
    }

    /// Thread `i`'s kick ended at `t`: in copy mode its frames go out (`xsk_generic_xmit`);
    /// in zero copy the driver's `ndo_xsk_wakeup` schedules the NAPI: marked missed while
    /// it is polled, else a software interrupt (an armed vector fires at once; a deferred
    /// NAPI's masked one interrupts all the same).
    pub(super) fn xsk_kicked(&mut self, i: usize, t: Instant, ctx: &mut Ctx) {
        let Some(app) = self.app.as_mut() else { return };
        let Some(xp) = app.params().xsk else { return };
        let r = self.topo.rings_of_core(i).start;
        if !xp.zero_copy {
            let q = self.topo.tx_of_ring(r);
            for p in app.take_sending(i) {
                ctx.nic.xmit(q, &p, t, false, ctx.queue, ctx.stats);
            }
            return;
        }
        let v = self.topo.vector_of_ring(r);
        if self.napi[v].scheduled || self.napi[v].busy_owned {
            self.napi[v].missed = true;
            return;
        }
        if ctx.nic.software_interrupt(v, t, ctx.queue) || !self.napi[v].defer_timer.is_pending() {
            return;
        }
        // Deferred, its vector masked: the interrupt schedules the NAPI as the timer would
        // (its handler's time left out).
        self.napi[v].defer_timer.set(ctx.queue, t, Key::Defer(v as u32));
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
