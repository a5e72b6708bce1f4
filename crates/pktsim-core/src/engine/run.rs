//! The event loop of a [`SimNode`]: pop the next event, hand it to its owner (the NIC's
//! arrivals and interrupt timers, the interference, the I/O mode's timers), then tell the
//! mode of the rings that received frames it asked to hear of; stop at the window's end or
//! when the run is cancelled.

use std::sync::atomic::Ordering;

use crate::error::{Error, Result};

use super::io::{Ctx, IoMode};
use super::queue::{self, EventKind, Key};
use super::time::Instant;
use super::{SimNode, INTERRUPTED};

impl SimNode {
    /// Run to the end of the measurement window; a cancelled run returns
    /// `Error::Invalid("interrupted")` and leaves the node's figures incomplete.
    pub fn run(&mut self) -> Result<()> {
        if self.run_ahead.is_some() {
            // Each core's own events apart: a core runs ahead of the others' events.
            let (wake, defer) = self.mode.timer_cores();
            self.queue.track_cores(
                self.topo.cores(),
                queue::TimerCores { vector: self.topo.core_of_each_vector(), wake, defer },
            );
        }
        self.queue.schedule(self.stop, EventKind::End);
        let mode = &mut *self.mode;
        let cancel = &*self.cancel;
        let interference = &mut self.interference;
        let mut ctx = Ctx {
            now: Instant::ZERO,
            queue: &mut self.queue,
            nic: &mut self.nic,
            stats: &mut self.stats,
            costs: &mut self.costs,
            idle: &mut self.idle,
            cancel,
            run_ahead: self.run_ahead,
            topo: self.topo,
        };
        mode.start(&mut ctx);
        if let Some(i) = interference.as_mut() {
            i.start(ctx.queue);
        }
        deliver_wakeups(mode, &mut ctx);

        while let Some((t, kind)) = ctx.queue.pop() {
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::Invalid(INTERRUPTED.into()));
            }
            ctx.now = t;
            // The NIC hears of every event first: its own (arrivals, its vectors' timers)
            // run there, and at the end frames that reached it in the window count as
            // offered (or dropped) even if nobody looked at their ring before it closed.
            let irq = ctx.nic.on_event(t, kind, ctx.queue, ctx.stats);
            match kind {
                EventKind::End => {
                    // Work under way is charged up to the end.
                    mode.end(t, &mut ctx);
                    ctx.stats.flush();
                    break;
                }
                EventKind::Arrival => {}
                EventKind::Timer(Key::Irq(_) | Key::TxCause(_), _) => {
                    if let Some(irq) = irq {
                        mode.on_irq(irq, &mut ctx);
                    }
                }
                EventKind::Timer(Key::Interfere(c), gen) => {
                    if let Some(d) = interference.as_mut().and_then(|i| i.fire(c as usize, gen, t, ctx.queue)) {
                        mode.preempt(c as usize, t, d, &mut ctx);
                    }
                }
                EventKind::Timer(key, gen) => mode.on_timer(key, gen, &mut ctx),
            }
            deliver_wakeups(mode, &mut ctx);
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Invalid(INTERRUPTED.into()));
        }
        Ok(())
    }
}

/// Tell the mode of rings that received frames it asked to hear of (arming a ring keeps
/// an arrival event in the queue; see [`Nic::arm`]); a ring its vector armed raises the
/// vector's cause in the NIC instead ([`Nic::take_woken`]).
fn deliver_wakeups(mode: &mut dyn IoMode, ctx: &mut Ctx) {
    loop {
        let woken = ctx.nic.take_woken(ctx.queue);
        if woken.is_empty() {
            return;
        }
        for (ring, t) in woken {
            mode.on_rx_wake(ring, t, ctx);
        }
    }
}
