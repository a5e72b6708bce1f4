//! The socket and the application that reads it (`[socket]`, `[app]`): where frames end
//! when the stack delivers them locally instead of forwarding them.
//!
//! ```text
//!   stack (NAPI rx clean) --> socket receive queue: sk_rmem_alloc + truesize > rcvbuf?
//!                                 yes: drop (RcvbufErrors)       (__udp_enqueue_schedule_skb)
//!                                 no:  queue; sk_data_ready wakes a blocked reader
//!   application thread: asleep --wake_latency--> runs: t_wakeup
//!       loop: recvmmsg: t_call, then up to `batch` frames, t_packet each (freed from the
//!             queue as read: latency ends here); socket empty -> block (epoll_wait)
//!
//!   with busy polling (socket.busy_poll for epoll, busy_read for recvmsg;
//!   napi_busy_loop, busy_poll_stop):
//!       socket empty -> busy poll: the thread polls its NAPI itself, busy_poll_budget
//!       frames a poll, until the socket has data or the time is up; then one more poll
//!       (busy_poll_stop) and the reads, or blocking (with IRQ suspension, the NAPI is
//!       scheduled first: napi_resume_irqs)
//!
//!   an AF_XDP socket (`io = "af-xdp"`, its rings and umem in `xsk.rs`): the rx ring is the
//!   queue; a frame read goes back to the fill ring (rxdrop) or onto the tx ring (l2fwd);
//!   the thread kicks the kernel (`t_kick`) where the driver asked for it, before a
//!   `poll()` sleep with frames to send, or to send them (copy mode); a spinning thread
//!   never sleeps, looking at its ring every `t_call`
//! ```
//!
//! One thread and one socket per NAPI core (a `SO_REUSEPORT` group steered by
//! `SO_INCOMING_CPU`), running on that core (`app.core = "same"`, after the interrupts and
//! softirq work, which preempt it) or on a core of its own (`"other"`). The I/O mode drives
//! it: [`App::deliver`] as the stack hands a frame over, [`App::next`] / [`App::finish`]
//! as the thread's core runs its work, [`App::on_wake`] when its wake-up timer fires.

use std::collections::VecDeque;

use super::ingress::Packet;
use super::queue::{EventQueue, Key, Timer};
use super::stats::Stats;
use super::time::{Instant, Span};
use super::xsk::{Xsk, XskParams, COPY_TX_BATCH};
use crate::scenario::{AppCore, ResolvedScenario};

/// The application's timing and its socket's size.
#[derive(Debug, Clone, Copy)]
pub struct AppParams {
    pub t_packet: Span,
    pub t_call: Span,
    pub batch: u32,
    pub wake_latency: Span,
    pub t_wakeup: Span,
    pub rcvbuf: u64,
    pub truesize: u64,
    /// The thread runs on its NAPI's core (else on a core of its own).
    pub same_core: bool,
    /// How long an empty socket is busy polled before the thread blocks (0: never).
    pub busy: Span,
    /// With `busy` 0, one pass of the busy-poll loop before the thread blocks: epoll with
    /// `prefer_busy_poll` polls the NAPI once and hands it back even with `busy_poll_usecs`
    /// 0 (Linux 6.13, "eventpoll: Trigger napi_busy_loop, if prefer_busy_poll is set":
    /// `ep_busy_loop_on`), which is how IRQ suspension is meant to run.
    pub busy_once: bool,
    /// How a frame that finds the socket full is counted.
    pub drop_kind: DropKind,
    /// Its load weight against ksoftirqd on a shared core (`app.nice`).
    pub weight: u32,
    /// It never sleeps: on an empty socket it looks again (`t_call` a look) or busy polls
    /// (an AF_XDP thread's loop, `host.af_xdp.wait = "spin"`).
    pub spin: bool,
    /// A kick system call (AF_XDP's `recvfrom` / `sendto` / `poll()`: `xsk_wakeup`).
    pub t_kick: Span,
    /// An AF_XDP socket's rings and umem (`io = "af-xdp"`).
    pub xsk: Option<XskParams>,
}

/// Where a frame the socket cannot take is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// `RcvbufErrors`: the receive buffer is full.
    Rcvbuf,
    /// `rx_ring_full` of an AF_XDP socket.
    XskRing,
}

impl AppParams {
    pub fn of(sc: &ResolvedScenario) -> Option<AppParams> {
        let (a, s) = (sc.scenario.app.as_ref()?, &sc.scenario.socket);
        Some(AppParams {
            t_packet: a.t_packet.into(),
            t_call: a.t_call.into(),
            batch: a.batch,
            wake_latency: a.wake_latency.into(),
            t_wakeup: a.t_wakeup.into(),
            rcvbuf: s.rcvbuf.bytes,
            truesize: s.truesize.bytes,
            same_core: a.core == AppCore::Same,
            busy: match a.wait {
                crate::scenario::AppWait::Epoll => s.busy_poll.into(),
                crate::scenario::AppWait::Recvmsg => s.busy_read.into(),
            },
            busy_once: a.wait == crate::scenario::AppWait::Epoll && s.busy_poll.ps == 0 && s.prefer_busy_poll,
            drop_kind: DropKind::Rcvbuf,
            weight: crate::engine::sched::weight_of(a.nice),
            spin: false,
            t_kick: Span::ZERO,
            xsk: None,
        })
    }
}

/// What the application thread does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Its wake-up cost.
    Wakeup,
    /// A receive call's fixed cost.
    Call,
    /// Reading one frame (the thread's `reading`: units stay small, see `io::units::run`).
    Packet,
    /// Busy polling the NAPI once (`napi_busy_loop`'s poll; the I/O mode runs it).
    BusyPoll,
    /// The last poll of a busy-poll loop (`busy_poll_stop`), which hands the NAPI back.
    BusyStop,
    /// A spinning thread's look at its empty socket.
    Spin,
    /// A system call that kicks the kernel (`xsk_wakeup`): zero copy, the I/O mode
    /// schedules the NAPI when it ends; copy mode, it sends the frames of
    /// [`App::take_sending`] (`xsk_generic_xmit`).
    Kick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Asleep,
    Waking,
    /// Runnable; `fresh`: its wake-up cost is still to pay.
    Runnable {
        fresh: bool,
    },
}

#[derive(Debug, Default)]
struct Thread {
    queue: VecDeque<Packet>,
    rmem: u64,
    state: State,
    wake: Timer,
    /// Frames the current call still reads.
    in_call: u32,
    /// A busy-poll loop runs until then; `stopped`: its last poll is done.
    busy_until: Option<Instant>,
    stopped: bool,
    /// The frame the running `Step::Packet` reads.
    reading: Option<Packet>,
    /// It has just blocked (read by [`App::take_blocked`]).
    blocked: bool,
    /// A wait just returned frames (read by [`App::take_events`]).
    events: bool,
    /// Its AF_XDP socket's rings and umem.
    xsk: Option<Xsk>,
    /// It kicked since its last call (`poll()` kicks once before it sleeps; a copy-mode
    /// l2fwd thread once a call).
    kicked: bool,
    /// Frames its running copy-mode kick sends.
    sending: u32,
}

/// The application's threads and sockets, one per NAPI core.
pub struct App {
    p: AppParams,
    threads: Vec<Thread>,
    wakeups: u64,
    calls: u64,
    kicks: u64,
}

impl App {
    pub fn new(p: AppParams, cores: usize) -> Self {
        // A spinning thread is never asleep: it runs from the start.
        let state = if p.spin { State::Runnable { fresh: false } } else { State::Asleep };
        let threads =
            (0..cores).map(|_| Thread { xsk: p.xsk.as_ref().map(Xsk::new), state, ..Thread::default() }).collect();
        App { p, threads, wakeups: 0, calls: 0, kicks: 0 }
    }

    pub fn params(&self) -> &AppParams {
        &self.p
    }

    /// The stack hands frame `p` to thread `i`'s socket at `t`: queued (and its blocked
    /// reader woken: after `wake_latency`, by the timer [`Key::App`]) or dropped because the
    /// receive buffer is full. An AF_XDP socket's frame needs a umem frame: in zero copy
    /// it has one (a dropped one goes back to the pool), in copy mode it takes one from
    /// the fill ring first (none: dropped, `rx_dropped`).
    pub fn deliver(&mut self, i: usize, p: Packet, t: Instant, queue: &mut EventQueue, stats: &mut Stats) {
        let th = &mut self.threads[i];
        let zero_copy = self.p.xsk.as_ref().is_some_and(|x| x.zero_copy);
        if let (Some(x), false) = (&mut th.xsk, zero_copy) {
            if x.take_fill(1) == 0 {
                if stats.in_window(t) {
                    x.fill_empty += 1;
                }
                stats.drop_xsk_fill(&p);
                return;
            }
        }
        if th.rmem + self.p.truesize > self.p.rcvbuf {
            match self.p.drop_kind {
                DropKind::Rcvbuf => stats.drop_rcvbuf(&p),
                DropKind::XskRing => stats.drop_xsk(&p),
            }
            if let Some(x) = &mut th.xsk {
                x.free();
            }
            return;
        }
        th.rmem += self.p.truesize;
        th.queue.push_back(p);
        if th.state == State::Asleep {
            th.state = State::Waking;
            // An event even without latency: the reader's core runs from the event loop,
            // after the stack's work at `t`.
            th.wake.set(queue, t + self.p.wake_latency, Key::App(i as u32));
        }
    }

    /// Thread `i`'s wake-up timer popped: true if it is now runnable.
    pub fn on_wake(&mut self, i: usize, gen: u32, t: Instant, queue: &mut EventQueue, stats: &Stats) -> bool {
        let th = &mut self.threads[i];
        if !th.wake.fired(gen, queue) || th.state != State::Waking {
            return false;
        }
        th.state = State::Runnable { fresh: true };
        if stats.in_window(t) {
            self.wakeups += 1;
        }
        true
    }

    /// Whether thread `i` wants its core.
    pub fn runnable(&self, i: usize) -> bool {
        matches!(self.threads[i].state, State::Runnable { .. })
    }

    /// Whether thread `i` was woken and is on its way to its core (a wake-up that
    /// preempts an idle core: `need_resched` is set from the wake-up on).
    pub fn waking(&self, i: usize) -> bool {
        self.threads[i].state == State::Waking
    }

    /// Thread `i` lost its core to another task while runnable: switching back in costs its
    /// `t_wakeup` again.
    pub fn switched_out(&mut self, i: usize) {
        if self.threads[i].state == (State::Runnable { fresh: false }) {
            self.threads[i].state = State::Runnable { fresh: true };
        }
    }

    /// Thread `i`'s next step at `t` and its length, or None when it blocks.
    pub fn next(&mut self, i: usize, t: Instant, stats: &Stats) -> Option<(Step, Span)> {
        let p = &self.p;
        let th = &mut self.threads[i];
        match th.state {
            State::Runnable { fresh: true } => {
                th.state = State::Runnable { fresh: false };
                if !p.t_wakeup.is_zero() {
                    return Some((Step::Wakeup, p.t_wakeup));
                }
            }
            State::Runnable { fresh: false } => {}
            State::Asleep | State::Waking => return None,
        }
        if th.in_call == 0 {
            if th.queue.is_empty() {
                // An AF_XDP thread's empty ring: recvfrom or poll() kick the kernel where
                // it asked for it.
                if p.xsk.is_some() {
                    if let Some(k) = Self::xsk_turn(p, th, 0) {
                        if stats.in_window(t) {
                            self.kicks += 1;
                        }
                        return Some(k);
                    }
                }
                // napi_busy_loop until data or the time is up (one pass: `busy_once`), then
                // busy_poll_stop.
                if !p.busy.is_zero() || p.busy_once {
                    match th.busy_until {
                        None => {
                            th.busy_until = Some(t + p.busy);
                            return Some((Step::BusyPoll, Span::ZERO));
                        }
                        Some(until) if t < until => return Some((Step::BusyPoll, Span::ZERO)),
                        Some(_) if !th.stopped => {
                            th.stopped = true;
                            return Some((Step::BusyStop, Span::ZERO));
                        }
                        Some(_) => {}
                    }
                }
                (th.busy_until, th.stopped) = (None, false);
                if p.spin {
                    return Some((Step::Spin, p.t_call));
                }
                th.state = State::Asleep;
                th.blocked = true;
                return None;
            }
            if th.busy_until.is_some() && !th.stopped {
                // The loop found data: its last poll hands the NAPI back before the reads.
                th.stopped = true;
                return Some((Step::BusyStop, Span::ZERO));
            }
            (th.busy_until, th.stopped) = (None, false);
            let k = p.batch.min(th.queue.len() as u32);
            if p.xsk.is_some() {
                if let Some(kick) = Self::xsk_turn(p, th, k) {
                    if stats.in_window(t) {
                        self.kicks += 1;
                    }
                    return Some(kick);
                }
            }
            th.events = true;
            th.in_call = k;
            if stats.in_window(t) {
                self.calls += 1;
            }
            if !p.t_call.is_zero() {
                return Some((Step::Call, p.t_call));
            }
        }
        // A call reads only what was queued when it began (at least one frame is there).
        let f = th.queue.pop_front()?;
        th.in_call -= 1;
        th.rmem -= p.truesize;
        th.reading = Some(f);
        Some((Step::Packet, p.t_packet))
    }

    /// Whether thread `i` is in a receive call with frames still to take.
    #[inline]
    pub fn in_call(&self, i: usize) -> bool {
        self.threads[i].in_call > 0
    }

    /// Whether thread `i` blocked since this was last asked (`napi_resume_irqs` then).
    pub fn take_blocked(&mut self, i: usize) -> bool {
        std::mem::take(&mut self.threads[i].blocked)
    }

    /// Whether thread `i`'s wait returned frames since this was last asked (epoll then
    /// suspends the NAPI's interrupts: `ep_suspend_napi_irqs`).
    pub fn take_events(&mut self, i: usize) -> bool {
        std::mem::take(&mut self.threads[i].events)
    }

    /// A kick, `extra` more in the call (a look at the rings): in copy mode it sends up
    /// to [`COPY_TX_BATCH`] frames of the tx ring, each `t_xmit_copy`.
    fn kick(p: &AppParams, th: &mut Thread, extra: Span) -> (Step, Span) {
        let mut d = p.t_kick + extra;
        if let (Some(xp), Some(x)) = (&p.xsk, &th.xsk) {
            if xp.l2fwd && !xp.zero_copy {
                th.sending = x.sendable(COPY_TX_BATCH, xp);
                d += xp.t_xmit_copy * th.sending as u64;
            }
        }
        (Step::Kick, d)
    }

    /// An AF_XDP thread's turn of its loop before a call of `k` frames (0: its rx ring is
    /// empty): it reaps the completion ring (l2fwd, `complete_tx_l2fwd`), then kicks the
    /// kernel if it must — with frames to read, where the tx ring has no room for them
    /// (and looks again) or, in copy mode, to send what waits (once a call); on an empty
    /// ring, where the driver set the fill ring's `need_wakeup` flag (zero copy, not busy
    /// polling: a busy poll polls the NAPI itself and `xsk_no_wakeup` skips the kick),
    /// before a `poll()` sleep with frames on the tx ring (l2fwd), or in copy mode with
    /// frames to send.
    #[inline(never)]
    fn xsk_turn(p: &AppParams, th: &mut Thread, k: u32) -> Option<(Step, Span)> {
        let (xp, x) = (p.xsk.as_ref()?, th.xsk.as_mut()?);
        if xp.l2fwd {
            x.reap(p.batch, xp);
        }
        if k > 0 {
            if xp.l2fwd && x.tx_room(xp) < k {
                return Some(Self::kick(p, th, p.t_call));
            }
            if xp.l2fwd && !xp.zero_copy && !th.kicked && x.sendable(COPY_TX_BATCH, xp) > 0 {
                th.kicked = true;
                return Some(Self::kick(p, th, Span::ZERO));
            }
            th.kicked = false;
            return None;
        }
        let flag = std::mem::take(&mut x.flag) && p.busy.is_zero();
        let sleeps = !p.spin && p.busy.is_zero();
        let tx = xp.l2fwd
            && !th.kicked
            && if xp.zero_copy { sleeps && x.tx_len() > 0 } else { x.sendable(COPY_TX_BATCH, xp) > 0 };
        if !flag && !tx {
            return None;
        }
        th.kicked = true;
        Some(Self::kick(p, th, Span::ZERO))
    }

    /// The driver set thread `i`'s fill ring's `need_wakeup` flag: the thread kicks when
    /// it next finds its rx ring empty. (A thread asleep then is woken by the frames the
    /// NAPI delivered before it stopped: it only sleeps on an empty ring.)
    pub fn need_wakeup(&mut self, i: usize) {
        if let Some(x) = &mut self.threads[i].xsk {
            x.flag = true;
        }
    }

    /// Thread `i`'s AF_XDP socket.
    pub fn xsk(&mut self, i: usize) -> Option<&mut Xsk> {
        self.threads[i].xsk.as_mut()
    }

    /// The frames thread `i`'s copy-mode kick that just ended sends, in order.
    pub fn take_sending(&mut self, i: usize) -> Vec<Packet> {
        let th = &mut self.threads[i];
        let n = std::mem::take(&mut th.sending);
        th.xsk.as_mut().map_or_else(Vec::new, |x| (0..n).map_while(|_| x.pop_tx()).collect())
    }

    /// Frames in thread `i`'s socket.
    #[inline]
    pub fn queued(&self, i: usize) -> u64 {
        self.threads[i].queue.len() as u64
    }

    /// Whether thread `i`'s socket holds frames.
    pub fn has_data(&self, i: usize) -> bool {
        !self.threads[i].queue.is_empty()
    }

    /// Thread `i` finished `step` at `t`: a frame read is consumed; an AF_XDP thread's
    /// goes back to the fill ring (rxdrop) or onto the tx ring (l2fwd).
    pub fn finish(&mut self, i: usize, step: Step, t: Instant, stats: &mut Stats) {
        if step == Step::Packet {
            let th = &mut self.threads[i];
            if let Some(p) = th.reading.take() {
                match (&self.p.xsk, &mut th.xsk) {
                    (None, _) | (_, None) => stats.consumed(&p, t),
                    (Some(xp), Some(x)) if xp.l2fwd => x.push_tx(p),
                    (Some(xp), Some(x)) => {
                        x.give_back(1, xp);
                        stats.consumed(&p, t);
                    }
                }
            }
        }
    }

    pub fn report(&self) -> AppReport {
        let xsk = self.p.xsk.is_some();
        AppReport {
            calls: self.calls,
            core: if self.p.same_core { "same" } else { "other" },
            queued_at_end: self.threads.iter().map(|t| t.queue.len()).sum::<usize>(),
            wakeups: self.wakeups,
            kicks: xsk.then_some(self.kicks),
            fill_ring_empty: xsk
                .then(|| self.threads.iter().filter_map(|t| t.xsk.as_ref()).map(|x| x.fill_empty).sum()),
        }
    }
}

/// The application's figures in a run's result (`io.app`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AppReport {
    /// Its calls (each reading up to a batch of frames).
    pub calls: u64,
    /// Where it runs: on the NAPI's core ("same") or another ("other").
    pub core: &'static str,
    /// Frames left in its sockets when the run ended.
    pub queued_at_end: usize,
    /// Times its thread was woken.
    pub wakeups: u64,
    /// AF_XDP: its kick system calls (`xsk_wakeup`, a copy-mode send).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kicks: Option<u64>,
    /// AF_XDP: times the kernel found the fill ring short (`rx_fill_ring_empty_descs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill_ring_empty: Option<u64>,
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    const HOST: &str = "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"2us\"";

    fn toml(app: &str, socket: &str) -> String {
        let extra = format!("[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[app]\nt_packet = \"1us\"\nt_call = \"500ns\"\nbatch = 4\nwake_latency = \"3us\"\nt_wakeup = \"1us\"\n{app}\n[socket]\n{socket}");
        node_toml(HOST, &extra)
    }

    /// One core, the application on it. Frames at 10 and 11 us.
    ///
    /// ```text
    ///  10     IRQ, handler 10-11; poll: frame 1 11-13 -> socket, wakes the reader (runs at
    ///         16); frame 2 13-15 -> socket; complete: frame 2 came after the IRQ -> IRQ at
    ///         15, handler 15-16, empty poll, armed
    ///  16     the reader: wake-up 16-17, recvmmsg 17-17.5, frames 17.5-18.5, 18.5-19.5
    /// ```
    #[test]
    fn the_application_reads_after_the_softirq_work_on_its_core() {
        let (r, dep) = trace(&toml("core = \"same\"", ""), &[(10_000, 64), (11_000, 64)]);
        assert!(dep.is_empty(), "nothing is forwarded");
        assert_eq!((r.consumed_packets, r.forwarded_packets), (2, 0));
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (8_500.0, 8_500.0), "to the application's read");
        assert_eq!((r.io.json()["app"]["wakeups"].as_u64(), r.io.json()["app"]["calls"].as_u64()), (Some(1), Some(1)));
        assert!((r.cpu_by_activity["app"] - 2.5e-6 / 1e-3).abs() < 1e-12);
        assert!((r.cpu_by_activity["wakeup"] - 1e-6 / 1e-3).abs() < 1e-12);
        assert_eq!(r.irq_per_s * 1e-3, 2.0);
    }

    /// The application on a core of its own: the CPU figures count two cores, the reader's
    /// work is on the second.
    #[test]
    fn an_application_on_its_own_core() {
        let (r, _) = trace(&toml("core = \"other\"", ""), &[(10_000, 64), (11_000, 64)]);
        assert_eq!(r.consumed_packets, 2);
        assert_eq!(r.cpu_per_core.len(), 2);
        assert!((r.cpu_per_core[1] - 3.5e-6 / 1e-3).abs() < 1e-12, "wake-up, call, two frames: {:?}", r.cpu_per_core);
        assert!((r.cpu_per_core[0] - 6e-6 / 1e-3).abs() < 1e-12, "two IRQs, two frames of 2 us");
    }

    /// A receive buffer of two frames' truesize: the third frame queued before the reader
    /// runs is dropped and counted as RcvbufErrors.
    #[test]
    fn a_full_receive_buffer_drops() {
        let (r, _) =
            trace(&toml("", "rcvbuf = \"1536B\"\ntruesize = \"768B\""), &[(10_000, 64), (10_100, 64), (10_200, 64)]);
        assert_eq!(r.drops["rcvbuf_errors"], 1);
        assert_eq!(r.consumed_packets, 2);
        assert!((r.loss_ratio - 1.0 / 3.0).abs() < 1e-12);
    }

    /// A drop counts with its frame's arrival, as its offer does: frames that came before
    /// the window (from 5 us) and are refused in it are not lost in it, so the frames lost
    /// stay a part of those offered. A reader that sleeps past the window; a buffer of one
    /// frame: the frame of 2 us is queued, those of 3 and 4 us refused at 7 and 9 us, the
    /// one of 100 us refused at once.
    #[test]
    fn drops_count_with_the_arrival_of_their_frames() {
        let extra = "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[app]\nt_packet = \"1us\"\nwake_latency = \"2ms\"\n[socket]\nrcvbuf = \"768B\"\ntruesize = \"768B\"";
        let toml = node_toml(HOST, extra).replace("warmup = \"0s\"", "warmup = \"5us\"");
        let (r, _) = trace(&toml, &[(2_000, 64), (3_000, 64), (4_000, 64), (100_000, 64)]);
        assert_eq!(r.offered_packets, 1);
        assert_eq!(r.drops["rcvbuf_errors"], 1);
        assert_eq!(r.loss_ratio, 1.0);
    }

    /// A reader blocked in recvmsg with `socket.busy_read` busy polls as an epoll reader
    /// with `socket.busy_poll` does (`napi_busy_loop` either way): the setup of the NAPI
    /// test `a_busy_polling_reader_polls_the_napi_itself` (t_irq 1 us, t_poll 200 ns,
    /// t_proc 1 us, the reader 500 ns a frame, frames at 10 and 15.05 us) with
    /// wait = "recvmsg" and busy_read = "10us" gives the epoll / busy_poll = "10us" run bit
    /// for bit: 2 frames read, latencies 2.7 and 2.75 us, 64 busy polls.
    #[test]
    fn a_recvmsg_reader_with_busy_read_polls_as_an_epoll_reader_with_busy_poll() {
        let host = "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"200ns\"\nt_proc = \"1us\"";
        let busy = |wait: &str, socket: &str| {
            let extra = format!("[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[app]\nt_packet = \"500ns\"\nbatch = 8\nwait = \"{wait}\"\n[socket]\n{socket}");
            let (mut r, dep) = trace(&node_toml(host, &extra), &[(10_000, 64), (15_050, 64)]);
            r.wall_s = 0.0;
            (serde_json::to_string(&r).unwrap(), dep, r)
        };
        let (epoll, epoll_dep, e) = busy("epoll", "busy_poll = \"10us\"");
        let (recvmsg, recvmsg_dep, r) = busy("recvmsg", "busy_read = \"10us\"");
        assert_eq!((e.consumed_packets, e.latency_ns.min, e.latency_ns.max), (2, 2_700.0, 2_750.0));
        assert_eq!(e.io.json()["busy_polls"], 64);
        assert_eq!(r.io.json()["busy_polls"], 64);
        assert_eq!(recvmsg, epoll);
        assert_eq!(recvmsg_dep, epoll_dep);
    }
}
