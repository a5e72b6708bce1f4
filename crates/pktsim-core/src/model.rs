//! The analytical cycles-per-packet model of 000 (sections III-B, IV, V), priced with the
//! simulator's own cost semantics.
//!
//! ```text
//!   C_total   = sum_i C_i(S)                                   (Eq. 2, per-byte terms included)
//!   R_max     = f_cpu / C_total                                 (Eq. 1, one core)
//!   C_total   = f_cpu * CPU_load / R   = C_active / R           (Eq. 3, from a measurement)
//!   R_line    = link_rate / (8 * (S + overhead))                (Ethernet framing)
//!
//!   per core c (RSS places each flow on one core, as the simulator's classifier does):
//!     w_c      share of the offered frames, S_c their mean size
//!     t_c      = t_proc(S_c) + (k - 1) C_contention / f + t_clean
//!                + sum over the I/O mode's events: t_event / frames per event at saturation
//!     cap_c    = (1 - clean_c) / T_c    h: tx lock hold when cores share a tx queue;
//!                T_c = E[max(t_c + h, h (1 + K))], K the other cores in their frames
//!                (each with probability its share of the time in them): a round of the lock
//!   forwarded(R) = sum over tx queues q of min( sum_{c on q} min(R w_c, cap_c), 1 / h ),
//!                  at most what the core that cleans q's completions cleans
//!                  (tx_work_limit per poll of its weight)
//!   capacity  = the offered rate at which the first core (or lock) saturates, <= R_line
//!   CPU load  = at saturation: forwarded work at the saturated per-frame cost (the NAPI
//!               amortisation of a full poll); below it: each frame's work plus the
//!               interrupts, polls, calls and wake-ups at the rates of their closed forms
//!               ([`crate::rates`], the section at the end of this file), a round that
//!               starts on a sleeping core waiting for its idle state's exit and paying its
//!               refill ([`IdleModel`]: the state the governor picks for the mean idle
//!               time); cpu_load_max with every per-event cost paid by each frame alone
//!               (the bound at any load)
//! ```
//!
//! The per-frame terms come from [`crate::price`] ([`CostTerms`], and the I/O mode's
//! [`ModeCosts`]), the same numbers the simulator runs; the routing group is moved from the
//! profile's FIB to the scenario's by [`crate::fib`]. The model knows nothing of the
//! simulator: the node's layout and the mode's costs come in as [`Inputs`], which
//! [`crate::predict`] takes from the simulator's own components.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost::{Group, GroupCycles, GROUP_NAMES};
use crate::fib::FibReport;
use crate::price::{CostTerms, Events, IoCost, ModeCosts};
use crate::rates::{steady, Arrivals, Level, Next, Rounds, Steady};
use crate::scenario::ResolvedScenario;
use crate::topology::Topology;

/// What the model says about one core.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreFigures {
    /// Share of the offered frames RSS places on this core.
    pub share: f64,
    pub mean_frame_bytes: f64,
    /// Time per frame at saturation, tx lock included.
    pub ns_per_packet: f64,
    /// What a frame waits for a shared tx lock at the predicted rates besides its own
    /// work: the rest of a round of the other cores' holds ([`lock_round`]); 0 without one.
    pub lock_wait_ns: f64,
    /// Most frames per second this core forwards (with its wait for a shared lock).
    pub capacity_pps: f64,
    pub forwarded_pps: f64,
    pub cpu_load: f64,
    /// Episodes per second that start on this core while it is idle (the interrupt, wake-up
    /// or call that ends a sleep), and the mean idle gap before them, s: what a cost of
    /// waking from an idle state would be paid on ([`idle_starts`]).
    pub idle_starts_per_s: f64,
    pub idle_gap_s: f64,
}

/// Everything the analytical model says about a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub name: String,
    /// The clock the cores run at this load: `cpu.frequency`, or where `[cpu.freq]`'s
    /// governor settles (the figures at saturation stay at `cpu.frequency`).
    pub frequency_hz: f64,
    pub cores: u32,
    pub mean_frame_bytes: f64,
    /// Cycles per packet by group (000 names), after per-byte terms and the FIB model, with
    /// the I/O mode's work at saturation in RX.
    pub cycles_by_group: BTreeMap<String, f64>,
    /// Eq. 2: one core's cycles per frame at saturation.
    pub c_total_cycles: f64,
    /// Cycles per frame on a core of this node: with contention and the tx lock.
    pub c_core_cycles: f64,
    /// Time per frame at saturation, by term, on a core of this node.
    pub frame_cost_ns: BTreeMap<String, f64>,
    /// Time one core spends per frame.
    pub ns_per_packet: f64,
    /// Eq. 1: one core's maximum rate.
    pub r_max_pps: f64,
    /// Most frames per second the node's cores forward, when every core that RSS gives
    /// traffic is saturated.
    pub r_cpu_pps: f64,
    /// Highest offered rate forwarded without loss: where the first core (or shared tx
    /// lock) saturates, or the line rate.
    pub capacity_pps: f64,
    pub line_rate_pps: f64,
    pub offered_pps: f64,
    pub predicted_pps: f64,
    /// Average load of the node's cores at the predicted rate (0..1), per-event costs
    /// shared as at saturation (see `cpu_load_basis`).
    pub cpu_load: f64,
    /// The same with every per-event cost (interrupt, poll, call, wake-up) paid by each
    /// frame alone: the bound at low load.
    pub cpu_load_max: f64,
    /// What `cpu_load` assumes.
    pub cpu_load_basis: String,
    /// Predicted events per second over the node's cores (closed forms below saturation,
    /// [`crate::rates`]): hard interrupts, polls (or system calls), wake-ups of threads
    /// (NAPI threads, the application's, a sleeping system call's), and rx frames per poll.
    pub irq_per_s: f64,
    pub polls_per_s: f64,
    pub wakeups_per_s: f64,
    pub frames_per_poll: f64,
    /// The resource that limits the node first: "cpu" or "link".
    pub bottleneck: &'static str,
    /// Whether the offered load reaches that limit (packets are dropped).
    pub saturated: bool,
    /// Offered packets the node cannot forward, per second.
    pub dropped_pps: f64,
    pub per_core: Vec<CoreFigures>,
    pub fib: FibReport,
    /// Terms the model leaves out or figures it assumes.
    pub notes: Vec<String>,
}

/// Processing cycles per group for the node's traffic (see
/// [`ResolvedScenario::group_cycles`]).
pub fn group_cycles(sc: &ResolvedScenario) -> (GroupCycles, FibReport) {
    sc.group_cycles()
}

/// Frames each core forwards at offered rate `rate` (infinite: every loaded core as busy
/// as it can be), what each tx queue carries, each core's load, and whether a tx queue is
/// near its limit (its lock at least half busy, or completions left uncleaned).
///
/// Core c forwards x_c = min(rate w_c, (1 - its tx-clean load) / T_c); a tx queue carries
/// at most its lock's 1 / h. T_c is the core's time per frame: its own work (`own_c`, the
/// hold included), or, where the cores that share its queue's lock keep it busier, a round
/// of the lock ([`lock_round`]). The clean load of a core depends on what the others send,
/// so the figures are found by damped fixed-point iteration (monotone, converges in tens of
/// steps; 500 at most).
fn forwarding<Q, C, QI, CI>(
    rate: f64,
    loads: &[(f64, f64)],
    own_s: &[f64],
    clean: (f64, f64),
    lock_pps: &[f64],
    on_queue: &Q,
    cleans: &C,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, bool, Vec<f64>)
where
    Q: Fn(usize) -> QI,
    QI: Iterator<Item = usize>,
    C: Fn(usize) -> CI,
    CI: Iterator<Item = usize>,
{
    let (clean_s, cleans_per_rx) = clean;
    let n = loads.len();
    let queues = lock_pps.len();
    let demand: Vec<f64> = loads.iter().map(|&(w, _)| if w > 0.0 { rate * w } else { 0.0 }).collect();
    let mut x: Vec<f64> = (0..n).map(|c| demand[c].min(1.0 / own_s[c])).collect();
    // What the tx queues are sent (each at most its lock's rate) and what they carry: a
    // core that is saturated with rx work cleans at most `cleans_per_rx` frames per rx
    // frame, and a queue whose completions are not cleaned fills and drops the rest.
    let flows = |x: &[f64]| -> (Vec<f64>, Vec<f64>) {
        let sent: Vec<f64> = (0..queues).map(|q| on_queue(q).map(|c| x[c]).sum::<f64>().min(lock_pps[q])).collect();
        let mut carried = sent.clone();
        for c in 0..n {
            let due: f64 = cleans(c).map(|q| sent[q]).sum();
            let backlogged = x[c] < demand[c] * (1.0 - 1e-9);
            let most = if backlogged && x[c] > 0.0 { cleans_per_rx * x[c] } else { f64::INFINITY };
            if due > most {
                for q in cleans(c) {
                    carried[q] = sent[q] * most / due;
                }
            }
        }
        (sent, carried)
    };
    // Each core's time per frame, with its round of the lock (`t`: the last figures, for the
    // others' shares of the time in their frames).
    let rounds = |x: &[f64], t: &[f64]| -> Vec<f64> {
        let mut next = own_s.to_vec();
        for (q, &pps) in lock_pps.iter().enumerate() {
            if pps.is_finite() {
                let h = 1.0 / pps;
                for c in on_queue(q) {
                    let busy: Vec<f64> = on_queue(q).filter(|&o| o != c).map(|o| x[o] * t[o]).collect();
                    next[c] = lock_round(h, own_s[c], &busy);
                }
            }
        }
        next
    };
    let mut per_frame = own_s.to_vec();
    for _ in 0..500 {
        let (_, carried) = flows(&x);
        per_frame = rounds(&x, &per_frame);
        let mut change: f64 = 0.0;
        for c in 0..n {
            let clean_load: f64 = clean_s * cleans(c).map(|q| carried[q]).sum::<f64>();
            let next = demand[c].min((1.0 - clean_load).max(0.0) / per_frame[c]);
            let damped = 0.5 * x[c] + 0.5 * next;
            change = change.max((damped - x[c]).abs() / damped.max(1.0));
            x[c] = damped;
        }
        if change < 1e-13 {
            break;
        }
    }
    let (sent, carried) = flows(&x);
    let queue_limited = sent.iter().zip(&carried).any(|(s, c)| c < &(s * (1.0 - 1e-9)))
        || sent.iter().zip(lock_pps).any(|(s, l)| *s > 0.5 * l);
    // Each core's load: its frames at their time, the lock's round (spinning) included.
    let per_frame = rounds(&x, &per_frame);
    let mut busy = vec![0.0; n];
    let mut out = vec![0.0; n];
    for (q, &carries) in carried.iter().enumerate() {
        let offered: f64 = on_queue(q).map(|c| x[c]).sum();
        for c in on_queue(q) {
            busy[c] = x[c] * per_frame[c];
            // What core c gets through to the wire.
            out[c] = if offered > 0.0 { x[c] * carries / offered } else { 0.0 };
        }
    }
    #[allow(clippy::needless_range_loop)] // (`cleans(c)` needs the index)
    for c in 0..n {
        let clean_load: f64 = clean_s * cleans(c).map(|q| carried[q]).sum::<f64>();
        busy[c] = (busy[c] + clean_load).min(1.0);
    }
    (out, carried, busy, queue_limited, per_frame)
}

/// A core's time per frame where it shares a tx lock held `h` a frame: its own work `own`
/// (the hold included), or, when the other cores that are forwarding at that moment keep the
/// lock busier, a round of their holds: the spin lock serves the cores that wait in turn, so
/// with K others in the middle of their frames (each with one ready every round) a frame
/// takes max(own, h (1 + K)). Each other core is in its frames with the probability `busy`
/// gives (its share of the time in its frames, waits included), and the time is the mean of
/// that over the K the others' shares make (a sum of Bernoullis, exact).
///
/// Where every other core is backlogged, T = max(own, n h): a core forwards at most one
/// frame per round while the others keep the lock busy, and one that also cleans the queue's
/// completions (a burst outside the lock: `ixgbe_clean_tx_irq`'s `tx_work_limit` per poll)
/// loses those rounds to them: with four cores on one lock held 400 ns, the cleaning core
/// forwards 0.53 Mpps, and with it the queue carries 4 x 0.53 = 2.13 Mpps where the lock
/// would pass 2.5 (the simulator: 2.125). Below saturation the others are in their frames
/// now and then: four cores on a lock held 250 ns at 90% of the capacity (the lock busy 81%
/// of the time) wait about 60 ns a frame (the simulator: 79).
pub(crate) fn lock_round(h: f64, own: f64, busy: &[f64]) -> f64 {
    // P(K = k), k = 0..=n, over the others' Bernoulli shares.
    let mut pk = vec![1.0];
    for &b in busy {
        let b = b.clamp(0.0, 1.0);
        let mut next = vec![0.0; pk.len() + 1];
        for (k, &p) in pk.iter().enumerate() {
            next[k] += p * (1.0 - b);
            next[k + 1] += p * b;
        }
        pk = next;
    }
    pk.iter().enumerate().map(|(k, &p)| p * own.max(h * (1.0 + k as f64))).sum()
}

/// What the model takes of the node besides its scenario: its layout and its I/O mode's
/// costs.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Rings, cores and tx queues, numbered.
    pub topo: Topology,
    /// Per core: its share of the offered frames and their mean size, as RSS places flows.
    pub loads: Vec<(f64, f64)>,
    /// What the I/O mode's own work costs.
    pub mode: ModeCosts,
    /// Where the NIC's moderation policy settles at a steady rate (the policies' own
    /// decisions, `engine::moderation::settle`): policy, rx vector, tx completions on it,
    /// bytes per frame as the driver counts them, Poisson arrivals, steady (rounds/s, frames a
    /// round, frames that arrive during one frame's processing and join its poll) at a level.
    pub settle: Settle,
    /// A native XDP program takes every rx frame before the driver counts it (what an mlx5
    /// driver's DIM samples: `engine::moderation::dim`).
    pub xdp_consumes: bool,
}

/// See [`Inputs::settle`].
pub type Settle =
    fn(&crate::scenario::ItrSpec, bool, bool, bool, f64, bool, &dyn Fn(&Level) -> (f64, f64, f64)) -> Level;

/// Frames the reader's socket holds (`rcvbuf` over each frame's `truesize`).
fn socket_frames(s: &crate::scenario::Scenario) -> f64 {
    (s.socket.rcvbuf.bytes / s.socket.truesize.bytes.max(1)).max(1) as f64
}

/// What a reader reads per second beside a fair-class task that always has the stack's
/// work (ksoftirqd, or a SCHED_OTHER NAPI thread, in overload), and its share of the core.
/// The task processes a frame in `own_s`, P frames a pass (`per_pass`: one `net_rx_action`
/// pass of ksoftirqd's, a NAPI thread's poll), and pays `switch_s` each time it is switched
/// in after the reader; the reader holds `frames` (its socket, or its AF_XDP ring) and its
/// first frame reaches it after the pass's first frame (a socket: `sk_data_ready` on each
/// skb) or at the pass's end (`at_pass_end`: AF_XDP's `xsk_flush`); its wake-up takes
/// `app.wake_latency` more.
///
/// The reader empties its socket and blocks; the task's pass wakes it. The fair class
/// (EEVDF, `engine/sched.rs`) keeps a sleeper's lag, so only the time both are runnable
/// counts, and two kinds of turn alternate:
///
/// - the wake-up preempts (the reader is behind): the task runs on to the end of the pass
///   the wake-up lands in (its only preemption point), j passes in all, and the rest of
///   that pass is charged to the reader (the skipped clock: `rq_clock_skip_update`), which
///   then reads the j P frames: charged c_p = the skip + its wake-up + its frames, while
///   the task is charged nothing the reader is runnable for;
/// - once those charges have used up the reader's lag the wake-up does not preempt: the
///   task keeps the core for the rest of its slice, to the next tick (S = half the base
///   slice + half a jiffy; no jiffy with `hrtick`), while the reader waits and its socket
///   fills (N frames, its capacity at most); then the reader reads them (c_n). Below
///   the stack's capacity (`drains`: the stack's share of the core rho, under 1) the task
///   runs out of work first: it drains the B frames that came while the reader read and
///   those that come meanwhile, B own / (1 - rho), and sleeps, so its turn is the shorter
///   of the two (a NAPI thread, and ksoftirqd beside an AF_XDP reader; beside a socket
///   reader the interrupts' softirqs run inline again once ksoftirqd sleeps and the
///   reader's receive calls run them too, so there the whole slice is kept).
///
/// The lag balances by weight: q c_p / w_R + (1 - q) c_n / w_R = (1 - q) S / w_T gives
/// the mix q of the two kinds; frames read over the time both take is the rate. On
/// `udp-receiver` beside its NAPI thread at 2.8 Mpps the fair split of the core (what the
/// model said before the skipped clock) read 43% more than the simulator.
#[allow(clippy::too_many_arguments)]
fn beside_a_fair_task(
    s: &crate::scenario::Scenario,
    a: &crate::price::AppCosts,
    own_s: f64,
    per_pass: f64,
    frames: f64,
    at_pass_end: bool,
    switch_s: f64,
    w_app: f64,
    w_task: f64,
    drains: Option<f64>,
) -> (f64, f64) {
    let app_s = a.frame_ps / 1e12;
    let wake_s = a.t_wakeup_ps / 1e12;
    let sched = &s.cpu.sched;
    let jiffy_s = if sched.hrtick { 0.0 } else { 1.0 / s.host.io.softirq().hz as f64 };
    let pass_s = (per_pass * own_s).max(1e-15);
    // The wake-up lands this long after its pass started; the task ends the pass it lands in.
    let lands = if at_pass_end { pass_s } else { own_s } + a.wake_latency_ps / 1e12;
    let passes = (lands / pass_s - 1e-9).ceil().max(1.0);
    let skip = passes * pass_s - lands;
    let read_p = (passes * per_pass).min(frames);
    let slice = sched.base_slice.ps as f64 / 1e12 / 2.0 + jiffy_s / 2.0;
    // Below the stack's capacity (`drains`: its share of the core, under 1) the task runs
    // out of work before its slice ends: it drains what came while the reader read (and
    // while it drains), then sleeps, and the reader has the core.
    let (mut stretch, mut read_n) = (slice, frames.min(slice / own_s.max(1e-15)).max(1.0));
    if let Some(rho) = drains.filter(|&r| r < 1.0) {
        for _ in 0..50 {
            let backlog = rho / own_s.max(1e-15) * (switch_s + wake_s + read_n * app_s);
            stretch = slice.min(backlog * own_s / (1.0 - rho));
            read_n = frames.min(stretch / own_s.max(1e-15)).max(1.0);
        }
    }
    let (c_p, c_n) = (skip + wake_s + read_p * app_s, wake_s + read_n * app_s);
    let slack = stretch / w_task - c_n / w_app;
    let q = if slack <= 0.0 { 0.0 } else { slack / (c_p / w_app + slack) };
    let task = switch_s + q * passes * pass_s + (1.0 - q) * stretch;
    let reader = q * (wake_s + read_p * app_s) + (1.0 - q) * c_n;
    let read = q * read_p + (1.0 - q) * read_n;
    (read / (task + reader), reader / (task + reader))
}

/// Whether a reader beside ksoftirqd (`"defer"`, or an AF_XDP reader) takes turns with it
/// ([`beside_a_fair_task`]): it sleeps and empties what it holds in each of its turns, as
/// nothing delivers meanwhile (the softirq deferred to ksoftirqd) or it reads faster than
/// the softirqs its interrupts run deliver (a frame in `own_s`).
fn takes_turns(s: &crate::scenario::Scenario, a: &crate::price::AppCosts, own_s: f64) -> bool {
    let defer = s.host.io.softirq().softirq == crate::scenario::SoftirqRun::Defer;
    !a.spin && (defer || a.frame_ps / 1e12 < own_s)
}

/// What an application on its NAPI's core reads per second when ksoftirqd has the stack's
/// work (`engine::io::napi::softirq`), and whether it has it at this load. The stack takes
/// `rho` of the core (s per frame `own_s`) and an interrupt finds `f_irq` frames.
///
/// ksoftirqd gets the work when a `__do_softirq` ends with work left: it polls one NAPI's
/// frames a pass (P = min(weight, budget)) and hands over after `MAX_SOFTIRQ_RESTART`
/// passes, so an interrupt's episode must outlast ten full polls. Episodes average f frames
/// (the rate / the interrupts a second) but grow without bound as rho nears 1; the model
/// takes the hand-over from rho = 1 - f / (10 P) on, a rule, not a closed form: where it
/// first happens is history (one long episode), and with `"defer"` ksoftirqd keeps the work
/// from then on wherever the stack's share of the core is short of rho. `tests/shared_core.rs`
/// records the loads where the simulator's 100 ms differ.
///
/// - `host.softirq = "defer"`: ksoftirqd keeps the work while the stack's share of the core
///   is short of rho; it and the reader share the core by their weights (`app.nice`;
///   ksoftirqd nice 0) as the fair class's clock and lags have it: a wake-up that preempts
///   ksoftirqd charges the rest of its pass to the reader, whose lag then runs out now and
///   then and it waits for ksoftirqd's slice ([`beside_a_fair_task`]), at most 1 / (own +
///   its time) (a reader faster than the stack blocks). An AF_XDP reader gets the same with
///   either setting (its calls take no socket lock), its ring for the socket. Beside a
///   device's NAPI thread (`nic.napi.threaded`, policy "other") the reader gets the same,
///   the thread's poll for the pass, from the load where the thread's share is short of
///   rho; beside a SCHED_FIFO thread it gets what the thread leaves;
/// - `"inline"`: softirqs still run on interrupt exit, so the reader loses nothing until
///   the stack saturates; then each datagram its receive calls take (`__skb_recv_udp`'s
///   `local_bh_enable`) runs a whole `__do_softirq` first (10 P frames, or up to
///   `MAX_SOFTIRQ_TIME`, on average half a jiffy short), and ksoftirqd's fair share of the
///   reader's task time comes on top: batch frames per (batch such softirqs + the reader's
///   call and frames x (1 + ksoftirqd's weight / the reader's)), the softirqs counted in
///   its task time too without IRQ time accounting (`cpu.sched.irq_time_accounting`).
fn shared_core_plateau(
    s: &crate::scenario::Scenario,
    a: &crate::price::AppCosts,
    own_s: f64,
    rho: f64,
    f_irq: f64,
) -> (f64, bool) {
    let app_s = a.frame_ps / 1e12;
    let w_app = s.app.as_ref().map_or(1024.0, |x| crate::engine::sched::weight_of(x.nice) as f64);
    let w_k = crate::engine::sched::weight_of(0) as f64;
    let softirq = s.host.io.softirq();
    let per_pass = s.host.io.poll().weight.min(softirq.budget).max(1) as f64;
    let saturated = rho >= 1.0 - 1e-9;
    // What the reader holds, and whether its frames reach it at a pass's end (AF_XDP's
    // `xsk_flush`) or one by one (a socket).
    let xsk = s.host.io.af_xdp();
    let (frames, at_pass_end) = xsk.map_or((socket_frames(s), false), |x| (x.rx_size as f64, true));
    if s.nic.napi.threaded {
        // A NAPI thread polls until its ring drains: SCHED_FIFO keeps the core whenever it
        // has work (the reader gets what is left), SCHED_OTHER shares it by weight as soon
        // as the thread's share is short of rho.
        let thread = s.host.io.thread();
        if thread.policy == crate::scenario::ThreadPolicy::Fifo {
            return (0.0, saturated);
        }
        let (read, share) = beside_a_fair_task(s, a, own_s, per_pass, frames, at_pass_end, 0.0, w_app, w_k, Some(rho));
        return (read.min(1.0 / (own_s + app_s)), rho > 1.0 - share);
    }
    // An AF_XDP reader's calls take no socket lock: nothing runs the softirq in them.
    let defer = softirq.softirq == crate::scenario::SoftirqRun::Defer;
    if defer || xsk.is_some() {
        // A reader that takes turns with ksoftirqd (switched in after each of them,
        // `host.thread.t_wakeup`); one that never empties what it holds, or spins, is never
        // woken: the two share the core by weight, the reader a wake-up per P frames.
        let (read, share) = if takes_turns(s, a, own_s) {
            let switch_s = s.host.io.thread().t_wakeup.ps as f64 / 1e12;
            beside_a_fair_task(s, a, own_s, per_pass, frames, at_pass_end, switch_s, w_app, w_k, xsk.map(|_| rho))
        } else {
            let share = w_app / (w_app + w_k);
            (share / (app_s + a.t_wakeup_ps / 1e12 / per_pass), share)
        };
        let engaged = saturated || (rho >= 1.0 - f_irq / (10.0 * per_pass) && rho > 1.0 - share);
        return (read.min(1.0 / (own_s + app_s)), engaged);
    }
    let jiffy_s = 1.0 / softirq.hz as f64;
    let max_time_s = (0.002 / jiffy_s).ceil().max(1.0) * jiffy_s - jiffy_s / 2.0;
    let bh_s = (10.0 * per_pass * own_s).min(max_time_s);
    let call_s = (a.t_call_ps + a.batch * a.t_packet_ps) / 1e12;
    let task_s = call_s + if s.cpu.sched.irq_time_accounting { 0.0 } else { a.batch * bh_s };
    (a.batch / (a.batch * bh_s + call_s + task_s * w_k / w_app), saturated)
}

/// The analytical prediction for a scenario, with its layout and mode costs ([`Inputs`]).
pub fn predict(sc: &ResolvedScenario, inputs: &Inputs) -> Prediction {
    let s = &sc.scenario;
    let f = s.cpu.frequency.hz;
    let k = s.cpu.cores;
    let terms = CostTerms::of(sc);
    let mode = &inputs.mode;
    let mut notes: Vec<String> = sc.notes.iter().chain(&mode.notes).cloned().collect();
    if s.traffic.synthetic().is_some_and(|t| !t.schedule.is_empty()) {
        notes.push("traffic.schedule changes the offered rate over the run; this prediction is for traffic.rate itself (predict each step with --set traffic.rate)".into());
    }
    if s.nic.irq_delay.ps > 0 {
        notes.push("nic.irq_delay is the simulator's alone: this prediction neither delays the interrupts nor lets frames ride along with them".into());
    }
    if s.host.io.irq().is_some_and(|i| i.t_irq_busy.ps > 0) {
        notes.push("host.t_irq_busy is the simulator's alone: this prediction charges every interrupt host.t_irq (run the simulator for what interrupts that find their core running add)".into());
    }
    let mean = sc.mean_frame_bytes();

    // Per-frame time at saturation for frames of `bytes`, and with every event paid alone.
    let io_ps = |bytes: f64, per_frame: &dyn Fn(&IoCost) -> f64| -> f64 {
        mode.terms.iter().map(|t| (t.ps + t.fs_per_byte * bytes / 1e3) * per_frame(t)).sum()
    };
    let sat = |t: &IoCost| {
        if t.frames_at_saturation.is_finite() {
            1.0 / t.frames_at_saturation
        } else {
            0.0
        }
    };
    // The stack's share of a frame (all of it, or none where XDP ends the frame first).
    let frame_ps = |bytes: f64| terms.contention_ps + mode.proc_share * (terms.frame_ps(bytes) - terms.contention_ps);
    let t_sat_ps = |bytes: f64| frame_ps(bytes) + io_ps(bytes, &sat);
    let t_max_ps = |bytes: f64| frame_ps(bytes) + io_ps(bytes, &|t| t.max_per_frame);

    // Eq. 2 on one core (no contention, no lock), with the I/O mode's work in RX.
    let io_mean = io_ps(mean, &sat);
    let to_cycles = |ps: f64| ps * 1e-12 * f;
    let mut groups = if terms.explicit {
        let mut g = GroupCycles::default();
        g.set(Group::Routing, to_cycles(terms.routing_extra_ps));
        g.set(Group::Free, to_cycles(terms.clean_ps));
        g.set(
            Group::Rx,
            to_cycles(terms.frame_ps(mean) - terms.contention_ps - terms.clean_ps - terms.routing_extra_ps),
        );
        notes.push("host.t_proc is given: its time is not split into 000's groups (shown as RX, with the FIB model's extra routing time as routing)".into());
        g
    } else {
        let mut g = sc.group_cycles().0;
        g.set(Group::Rx, (g.get(Group::Rx) - to_cycles(terms.poll_share_ps)).max(0.0));
        g
    };
    for g in groups.0.iter_mut() {
        *g *= mode.proc_share;
    }
    groups.set(Group::Rx, groups.get(Group::Rx) + to_cycles(io_mean));
    let c_total = groups.total();

    // Per core: RSS share, saturated time, tx lock; tx clean on the tx queue's core.
    let (topo, loads) = (inputs.topo, &inputs.loads);
    let hold_ps = |c: usize| {
        if mode.tx_lock && topo.sharers(topo.tx_of_core(c)) > 1 {
            s.host.io.tx_lock().ps as f64
        } else {
            0.0
        }
    };
    let offered = sc.offered_pps();
    let line = sc.line_rate_pps();
    let queues = topo.tx_queues();
    let on_queue = |q: usize| (0..topo.cores()).filter(move |&c| topo.tx_of_core(c) == q);
    let lock_pps: Vec<f64> = (0..queues)
        .map(|q| {
            on_queue(q)
                .next()
                .map_or(f64::INFINITY, |c| if hold_ps(c) > 0.0 { 1e12 / hold_ps(c) } else { f64::INFINITY })
        })
        .collect();
    // Interference takes its share of every core: the rest does the work, so each frame
    // takes 1 / (1 - share) as long in wall-clock time (and the core's load counts it).
    let stolen = interference_share(&sc.scenario.cpu.interference);
    let stretch = 1.0 / (1.0 - stolen).max(1e-9);
    if stolen > 0.0 {
        notes.push(format!(
            "cpu.interference takes {:.2}% of each core (tick and preemptions, mean times): each frame's time is stretched by what it leaves; the delays it adds to single frames are the simulator's",
            100.0 * stolen
        ));
    }
    let clean_s = mode.tx_clean_ps / 1e12 * stretch;
    // Seconds of one core's own work per frame it forwards, and the tx queues it cleans.
    let own_s: Vec<f64> =
        loads.iter().enumerate().map(|(c, &(_, bytes))| (t_sat_ps(bytes) + hold_ps(c)) / 1e12 * stretch).collect();
    let cleans = |c: usize| (0..queues).filter(move |&q| topo.core_of_tx(q) == c);
    let solve =
        |rate: f64| forwarding(rate, loads, &own_s, (clean_s, mode.cleans_per_rx), &lock_pps, &on_queue, &cleans);
    let (mut fwd, per_queue, mut busy, queue_limited, frame_s) = solve(offered);
    // A preferred busy poller's NAPI, polled only every poll_gap after a poll ends while
    // its reader is busy, takes at most a weight per (gap + that poll's time); a reader
    // fast enough to empty its socket meanwhile busy polls and drives the NAPI itself.
    let weight = s.host.io.poll().weight.min(s.nic.rx_ring).max(1) as f64;
    let app_s_gap = mode.app.as_ref().map(|a| a.frame_ps / 1e12);
    let mut drives = vec![mode.app.as_ref().is_some_and(|a| a.drives.is_some()); topo.cores()];
    if mode.poll_gap_ps > 0.0 {
        for c in 0..topo.cores() {
            let cap = weight / (mode.poll_gap_ps / 1e12 + weight * own_s[c]);
            if let (Some(app_s), true) = (app_s_gap, mode.app.as_ref().is_some_and(|a| a.same_core)) {
                if (1.0 - cap * own_s[c]) / app_s > cap {
                    drives[c] = true;
                    continue;
                }
            }
            if fwd[c] > cap {
                busy[c] *= cap / fwd[c];
                fwd[c] = cap;
            }
        }
        notes.push(format!("prefer_busy_poll with deferral: a reader busy reading leaves the NAPI to the deferral timer, one poll of {weight:.0} frames per gro_flush_timeout; one that empties its socket drives the NAPI"));
    }
    // What the stack processes on each core, before an application reads (below).
    let (stack_fwd, stack_busy) = (fwd.clone(), busy.clone());
    let arrivals = if sc.trace.is_none()
        && sc.sources.iter().all(|src| src.pattern == crate::scenario::Pattern::Cbr)
        && loads.iter().filter(|l| l.0 > 0.0).count() <= 1
    {
        Arrivals::Cbr
    } else {
        Arrivals::Poisson
    };
    let event_term = |t: &IoCost| matches!(t.name, "poll" | "interrupt" | "wake-up" | "call");
    let idle = IdleModel::of(sc);
    // Core c's interrupts, polls and wake-ups below saturation with its reader taking
    // `read_pps` (rates.rs).
    let core_ev = |c: usize, read_pps: f64| {
        let bytes = loads[c].1;
        let t_frame_ps = (frame_ps(bytes)
            + mode
                .terms
                .iter()
                .filter(|t| !event_term(t))
                .map(|t| (t.ps + t.fs_per_byte * bytes / 1e3) * sat(t))
                .sum::<f64>()
            + hold_ps(c))
            * stretch
            // and its wait for a shared lock (spinning is CPU)
            + (frame_s[c] - own_s[c]).max(0.0) * 1e12;
        let tx_pps: f64 = cleans(c).map(|q| per_queue[q]).sum();
        core_events(&CoreInputs {
            mode,
            arrivals,
            rx_pps: stack_fwd[c],
            t_frame_ps,
            t_frame_exp_ps: if s.host.stack.service == crate::scenario::ServiceDist::Exponential {
                mode.proc_share * (terms.proc_ps + terms.proc_fs_per_byte * bytes / 1e3) * stretch
            } else {
                0.0
            },
            bytes: (bytes - 4.0).max(0.0),
            tx_pps,
            clean_busy: clean_s * tx_pps,
            read_pps,
            settle: inputs.settle,
            xdp_consumes: inputs.xdp_consumes,
            idle: &idle,
        })
    };
    let (_, cpu_queue, _, _, _) = solve(f64::INFINITY);
    let r_cpu: f64 = cpu_queue.iter().sum();
    let mut predicted: f64 = per_queue.iter().sum();
    // An application reads what each core's stack delivers: on the same core with the
    // time the softirq work leaves (none once the stack saturates the core: receive
    // livelock), or on a core of its own at up to 1 / its per-frame time.
    let app_s = mode.app.as_ref().map(|a| a.frame_ps / 1e12);
    let mut app_busy = vec![0.0; topo.cores()];
    let mut plateau_notes: Vec<String> = Vec::new();
    if let (Some(a), Some(app_s)) = (&mode.app, app_s) {
        for c in 0..topo.cores() {
            if a.same_core && drives[c] {
                let extra_ps = a.drives.unwrap_or(a.busy_extra_ps);
                // The reader's busy polls feed the stack only what it reads.
                let per_frame = own_s[c] + extra_ps / 1e12 + app_s;
                let read = (loads[c].0 * offered).min(1.0 / per_frame);
                busy[c] = read * per_frame;
                fwd[c] = read;
                continue;
            }
            // A zero-copy AF_XDP socket that holds the stack back: once the stack and the
            // reader overrun the core, the stack processes only what the reader reads.
            if let (true, Some(bp_ps)) = (a.same_core, a.back_pressure_ps) {
                let demand = loads[c].0 * offered;
                let stack_s = if fwd[c] > 0.0 { busy[c] / fwd[c] } else { own_s[c] };
                if demand * (stack_s + app_s) >= 1.0 {
                    // A reader that spins keeps the core while ksoftirqd waits with the
                    // stack's work: the stack gets ksoftirqd's share by weight.
                    let w_app = s.app.as_ref().map_or(1024.0, |x| crate::engine::sched::weight_of(x.nice) as f64);
                    let w_k = crate::engine::sched::weight_of(0) as f64;
                    let read = if a.spin {
                        demand.min(w_k / (w_k + w_app) / stack_s)
                    } else {
                        demand.min(1.0 / (stack_s + app_s + bp_ps / 1e12))
                    };
                    busy[c] = 1.0;
                    fwd[c] = read;
                    if plateau_notes.is_empty() {
                        plateau_notes.push("the AF_XDP socket holds the stack back (its driver stops at a full rx ring, or its umem runs out first): the NAPI processes only what the reader reads, and each cycle of the ring costs a kick, its interrupts and the reader's wake-up".into());
                    }
                    continue;
                }
            }
            let read = if !a.same_core {
                fwd[c].min(1.0 / app_s)
            } else {
                // What the softirq work leaves, or what the reader gets once ksoftirqd has
                // the work (see `shared_core_plateau`).
                let left = ((1.0 - busy[c]).max(0.0) / app_s).min(fwd[c]);
                let demand = loads[c].0 * offered;
                let f_irq = demand / core_ev(c, left).irq_per_s.max(1e-9);
                let (plateau, engaged) = shared_core_plateau(s, a, own_s[c], busy[c], f_irq);
                if plateau_notes.is_empty() && engaged {
                    let defer = s.host.io.softirq().softirq == crate::scenario::SoftirqRun::Defer
                        || matches!(s.host.io, crate::scenario::IoSpec::AfXdp(_));
                    plateau_notes.push(if a.spin {
                        "a reader that spins on its NAPI's core keeps it for its slices while ksoftirqd waits with the stack's work, and a driver that drops at a full rx ring burns ksoftirqd's turns on frames the ring refuses: the read rate here is an upper bound (the simulator reads a few per cent of it; a zero-copy socket whose driver stops at a full ring, rx_full = \"stop\", or busy polling avoids this)"
                    } else if s.nic.napi.threaded {
                        "the NAPI thread shares its core with the reader (host.thread.policy = \"other\") once its share is short of the stack's load, not evenly: a wake-up that preempts the thread lets it finish its poll on the reader's clock (wakeup_preempt's skipped clock), and once the reader's lag is used up it waits out the thread's slice; the model mixes the two kinds of turn as the lags balance"
                    } else if defer && !takes_turns(s, a, own_s[c]) {
                        "past the load where a __do_softirq ends with work left, ksoftirqd keeps the stack's work; the reader, slower a frame than the stack, never empties its ring, is never woken and shares the core with ksoftirqd by their weights"
                    } else if defer {
                        "past the load where a __do_softirq ends with work left, ksoftirqd keeps the stack's work and shares the core with the reader (host.softirq = \"defer\", or a reader whose calls run no softirq), not evenly: a wake-up that preempts ksoftirqd lets it finish its pass on the reader's clock (wakeup_preempt's skipped clock), and once the reader's lag is used up it waits out ksoftirqd's slice; the model mixes the two kinds of turn as the lags balance (below the stack's capacity an AF_XDP reader's ksoftirqd drains its backlog and sleeps before its slice ends; a socket reader's is taken to keep its slice, as the interrupts' softirqs run inline again once it sleeps)"
                    } else {
                        "host.softirq = \"inline\": the stack takes its core; each datagram the reader takes first runs a whole __do_softirq (MAX_SOFTIRQ_RESTART passes, its local_bh_enable)"
                    }.to_string());
                }
                if engaged {
                    plateau.min(fwd[c])
                } else {
                    left
                }
            };
            if a.same_core {
                busy[c] = if a.spin { 1.0 } else { (busy[c] + read * app_s).min(1.0) };
            } else {
                app_busy[c] = if a.spin { 1.0 } else { read * app_s };
            }
            fwd[c] = read;
        }
        if a.spin {
            notes.push("the reader spins on its ring in user space: its core is always busy".into());
        }
        predicted = fwd.iter().sum();
    }
    notes.extend(plateau_notes);
    // The first core (or lock) to saturate, as the offered rate R grows: core c's load is
    // R (w_c own_c + clean * share of the queues it cleans), linear in R.
    let mut first_sat = f64::INFINITY;
    for c in 0..topo.cores() {
        let cleaned: f64 = cleans(c).map(|q| on_queue(q).map(|d| loads[d].0).sum::<f64>()).sum();
        let same_core_app = mode.app.as_ref().is_some_and(|a| a.same_core);
        let drives_ps = mode.app.as_ref().and_then(|a| a.drives).unwrap_or(0.0);
        let per_rate = loads[c].0
            * (own_s[c] + drives_ps / 1e12 + if same_core_app { app_s.unwrap_or(0.0) } else { 0.0 })
            + clean_s * cleaned;
        // The deferral timer's cap on a preferred busy poller's NAPI, unless its reader
        // empties the socket and drives the NAPI itself (as the rates above say).
        if mode.poll_gap_ps > 0.0 && loads[c].0 > 0.0 && !drives[c] {
            let weight = s.host.io.poll().weight.min(s.nic.rx_ring).max(1) as f64;
            first_sat = first_sat.min(weight / (mode.poll_gap_ps / 1e12 + weight * own_s[c]) / loads[c].0);
        }
        if per_rate > 0.0 {
            first_sat = first_sat.min(1.0 / per_rate);
        }
        if let (false, Some(app_s)) = (same_core_app, app_s) {
            if loads[c].0 * app_s > 0.0 {
                first_sat = first_sat.min(1.0 / (loads[c].0 * app_s));
            }
        }
    }
    #[allow(clippy::needless_range_loop)] // (`on_queue(q)` needs the index)
    for q in 0..queues {
        let share: f64 = on_queue(q).map(|c| loads[c].0).sum();
        if share > 0.0 {
            first_sat = first_sat.min(lock_pps[q] / share);
        }
    }
    // Where cores share a lock, each spins for the others' holds (`lock_round`), which
    // grows with the rate: the first loss is where the solved node first drops a frame.
    if first_sat.is_finite() && lock_pps.iter().any(|l| l.is_finite()) {
        let offered_share: f64 = loads.iter().map(|l| l.0).sum();
        let loses = |r: f64| solve(r).0.iter().sum::<f64>() < r * offered_share * (1.0 - 1e-9);
        if loses(first_sat) {
            let (mut lo, mut hi) = (0.0, first_sat);
            while hi - lo > 1e-9 * hi {
                let mid = 0.5 * (lo + hi);
                if loses(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            first_sat = lo;
        }
    }
    if queue_limited {
        notes.push("a shared tx queue is near its limit (its lock, or the core that cleans its completions): each core waits for the others' holds in turn, and the core that cleans the queue's completions loses its turns while it cleans (with NAPI the simulator forwards within 1.1% of the model from 7% to 100% lock occupancy; crates/pktsim-core/tests/model_vs_sim.rs)".into());
    }
    let mut per_core: Vec<CoreFigures> = loads
        .iter()
        .enumerate()
        .map(|(c, &(w, bytes))| CoreFigures {
            share: w,
            mean_frame_bytes: bytes,
            ns_per_packet: own_s[c] * 1e9,
            lock_wait_ns: (frame_s[c] - own_s[c]).max(0.0) * 1e9,
            capacity_pps: 1.0 / frame_s[c],
            forwarded_pps: fwd[c],
            cpu_load: busy[c],
            idle_starts_per_s: 0.0,
            idle_gap_s: 0.0,
        })
        .collect();
    let capacity = first_sat.min(line);
    // An application with cores of its own adds one per core to the CPU figures.
    let k_all = if app_busy.iter().any(|&b| b > 0.0) || mode.app.as_ref().is_some_and(|a| !a.same_core) {
        2 * k as usize
    } else {
        k as usize
    };
    let cpu_load = (busy.iter().sum::<f64>() + app_busy.iter().sum::<f64>()) / k_all as f64;
    let cpu_load_max = (0..topo.cores())
        .map(|c| {
            if busy[c] >= 1.0 {
                return 1.0;
            }
            let cleaned: f64 = cleans(c).map(|q| per_queue[q]).sum();
            (fwd[c] * (t_max_ps(loads[c].1) + hold_ps(c)) / 1e12 + clean_s * cleaned).min(1.0)
        })
        .sum::<f64>()
        / k_all as f64
        + app_busy.iter().sum::<f64>() / k_all as f64;
    // Below saturation: each core's rounds in closed form (see the section at the end).
    let mut ev = Vec::with_capacity(topo.cores());
    for c in 0..topo.cores() {
        let demand = loads[c].0 * offered;
        let saturated = loads[c].0 > 0.0
            && (stack_busy[c] >= 1.0 - 1e-9
                || stack_fwd[c] < demand * (1.0 - 1e-9)
                || fwd[c] < stack_fwd[c] * (1.0 - 1e-9));
        ev.push((core_ev(c, if mode.app.is_some() { fwd[c] } else { 0.0 }), saturated));
    }
    let some_saturated = ev.iter().any(|(_, s)| *s);
    let closed_holds = ev.iter().all(|(e, _)| e.holds);
    let spins = ev.iter().any(|(e, sat)| e.spins && !sat);
    // (A reader that busy polls keeps its core busy whoever polls the NAPI.)
    let preferred = (mode.poll_gap_ps > 0.0 || drives.iter().any(|&d| d)) && !spins;
    let (cpu_load, cpu_load_max, basis) = if mode.always_busy {
        notes.push(format!("busy-poll: the cores spin at any load; useful work {:.1}%", 100.0 * cpu_load));
        (1.0, 1.0, "always busy: the cores poll without sleeping, so the load is 1 by definition".to_string())
    } else if matches!(mode.events, Events::None) {
        (cpu_load, cpu_load_max.max(cpu_load), "exact: every cost of this node is per frame".to_string())
    } else if preferred || !closed_holds {
        let why = if preferred {
            "a preferred busy poller or IRQ suspension decides when the NAPI is polled: no closed form here"
        } else {
            "the closed forms' fixed point does not hold at this rate (a core near saturation)"
        };
        notes.push(format!("cpu_load is the saturated-cost estimate: {why}"));
        (cpu_load, cpu_load_max, format!("saturated-cost estimate ({why}): per-event costs shared by as many frames as at saturation; cpu_load_max is the bound with each frame paying them alone"))
    } else {
        // Saturated cores keep the saturated figures; the others their rounds.
        let busy_sum: f64 = ev.iter().enumerate().map(|(c, (e, sat))| if *sat { busy[c] } else { e.busy }).sum();
        let max_sum: f64 = ev
            .iter()
            .enumerate()
            .map(|(c, (e, sat))| if *sat { 1.0f64.min(busy[c].max(e.busy_max)) } else { e.busy_max })
            .sum();
        let app_sum: f64 = ev.iter().enumerate().map(|(c, (e, sat))| if *sat { app_busy[c] } else { e.app_busy }).sum();
        let app_max: f64 = app_busy.iter().sum::<f64>().max(app_sum);
        let load = (busy_sum + app_sum) / k_all as f64;
        let load_max =
            ((max_sum + app_max) / k_all as f64).max(load).max(if some_saturated { cpu_load_max } else { 0.0 });
        let mut basis = "closed form: interrupts, polls and wake-ups at their predicted rates (rounds and chains, rates.rs), the moderation at the level its policy settles at".to_string();
        if spins {
            basis.push_str(
                "; the reader busy polls its empty socket, so the core is busy but for gaps longer than busy_poll",
            );
        }
        if some_saturated {
            basis.push_str("; saturated cores at the saturated cost");
        }
        if arrivals == Arrivals::Cbr && s.host.stack.service != crate::scenario::ServiceDist::Constant {
            // The rounds' closed forms know evenly spaced arrivals against fixed times (the
            // phase of a round's end against the next frame is fixed) or Poisson arrivals;
            // random times move that phase from round to round.
            let why = "evenly spaced arrivals with random service times: the phase of a round's end against the next frame varies, which neither closed form holds (an estimate, within about 25%)";
            notes.push(format!("cpu_load: {why}"));
            basis = format!("estimate: {basis}; {why}");
        }
        (load.min(1.0), load_max.min(1.0), basis)
    };
    let sum_ev = |f: &dyn Fn(&CoreEvents) -> f64| ev.iter().map(|(e, _)| f(e)).sum::<f64>();
    let (irq_per_s, polls_per_s, wakeups_per_s) =
        (sum_ev(&|e| e.irq_per_s), sum_ev(&|e| e.polls_per_s), sum_ev(&|e| e.wakeups_per_s));
    let rx_polls = sum_ev(&|e| e.rx_polls_per_s);
    let frames_per_poll = if rx_polls > 0.0 { sum_ev(&|e| e.rx_pps) / rx_polls } else { 0.0 };
    if sc.sources.iter().any(|src| src.flows < 4 * k as u64) && k > 1 {
        notes.push("few flows on several cores: RSS places each flow on one core, so some cores get none".into());
    }

    for (f, (e, _)) in per_core.iter_mut().zip(&ev) {
        (f.idle_starts_per_s, f.idle_gap_s) = (e.idle_starts_per_s, e.idle_gap_s);
        if !matches!(mode.events, Events::None) && !mode.always_busy && f.cpu_load < 1.0 {
            f.cpu_load = e.busy;
        }
    }
    let mut frame_cost_ns = BTreeMap::new();
    frame_cost_ns.insert(
        "processing".to_string(),
        mode.proc_share * (terms.proc_ps + terms.proc_fs_per_byte * mean / 1e3) / 1e3,
    );
    frame_cost_ns.insert(
        "tx clean".to_string(),
        if terms.clean_in_proc { mode.proc_share * terms.clean_ps } else { mode.tx_clean_ps } / 1e3,
    );
    frame_cost_ns.insert("contention".to_string(), terms.contention_ps / 1e3);
    for t in &mode.terms {
        if t.name != "tx clean" {
            *frame_cost_ns.entry(t.name.to_string()).or_default() += (t.ps + t.fs_per_byte * mean / 1e3) * sat(t) / 1e3;
        }
    }
    if let Some(app_s) = app_s {
        frame_cost_ns.insert("application".to_string(), app_s * 1e9);
    }
    let hold = (0..topo.cores()).map(hold_ps).fold(0.0, f64::max);
    frame_cost_ns.insert("tx lock".to_string(), hold / 1e3);
    let c_core = c_total + to_cycles(terms.contention_ps + hold);

    Prediction {
        name: s.name.clone().unwrap_or_else(|| sc.origin.clone()),
        frequency_hz: f,
        cores: k,
        mean_frame_bytes: mean,
        cycles_by_group: GROUP_NAMES.iter().map(|g| g.to_string()).zip(groups.0).collect(),
        c_total_cycles: c_total,
        c_core_cycles: c_core,
        frame_cost_ns,
        ns_per_packet: c_core / f * 1e9,
        r_max_pps: f / c_total,
        r_cpu_pps: r_cpu,
        capacity_pps: capacity,
        line_rate_pps: line,
        offered_pps: offered,
        predicted_pps: predicted.min(offered),
        cpu_load,
        cpu_load_max,
        cpu_load_basis: basis,
        irq_per_s,
        polls_per_s,
        wakeups_per_s,
        frames_per_poll,
        bottleneck: if first_sat < line { "cpu" } else { "link" },
        saturated: offered >= capacity * (1.0 - 1e-12),
        dropped_pps: (offered - predicted).max(0.0),
        per_core,
        fib: sc.group_cycles().1,
        notes,
    }
}

/// Eq. 3: cycles per packet from a measured rate and CPU load, or from active cycles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FromMeasurement {
    pub rate_pps: f64,
    pub frequency_hz: f64,
    pub cpu_load: f64,
    pub active_cycles_per_s: f64,
    pub c_total_cycles: f64,
    /// Eq. 1 with that C_total: the rate at full load.
    pub r_max_pps: f64,
}

/// `C_total = f * load / R` (or `C_active / R` when `active_cycles_per_s` is given).
pub fn from_measurement(
    rate_pps: f64,
    frequency_hz: f64,
    cpu_load: Option<f64>,
    active_cycles_per_s: Option<f64>,
) -> Result<FromMeasurement, String> {
    if !(rate_pps.is_finite() && rate_pps > 0.0) {
        return Err(format!("rate = {rate_pps} pps: expected a measured packet rate above 0"));
    }
    if !(frequency_hz.is_finite() && frequency_hz > 0.0) {
        return Err(format!("freq = {frequency_hz} Hz: expected a frequency above 0"));
    }
    let active = match (cpu_load, active_cycles_per_s) {
        (Some(_), Some(_)) => return Err("give either the CPU load or the active cycles, not both".into()),
        (None, None) => {
            return Err("give the CPU load (--cpu-load 100%) or the active cycles per second (--active-cycles)".into())
        }
        (Some(load), None) => {
            if !(load > 0.0 && load <= 1.0) {
                return Err(format!("cpu-load = {}%: expected a load above 0% and at most 100%", load * 100.0));
            }
            frequency_hz * load
        }
        (None, Some(a)) => {
            if !(a > 0.0 && a <= frequency_hz * (1.0 + 1e-9)) {
                return Err(format!(
                    "active-cycles = {a}/s: expected above 0 and at most the frequency ({frequency_hz} cycles/s)"
                ));
            }
            a
        }
    };
    let c_total = active / rate_pps;
    Ok(FromMeasurement {
        rate_pps,
        frequency_hz,
        cpu_load: active / frequency_hz,
        active_cycles_per_s: active,
        c_total_cycles: c_total,
        r_max_pps: frequency_hz / c_total,
    })
}

/// The share of a core `[cpu.interference]` takes: the tick's mean time per period plus
/// the preemptions' rate times their mean length.
pub fn interference_share(i: &crate::scenario::Interference) -> f64 {
    let mean = |v: &[crate::units::Duration]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().map(|d| d.ps as f64).sum::<f64>() / v.len() as f64
        }
    };
    let tick = if i.tick_period.ps > 0 { mean(&i.t_tick) / i.tick_period.ps as f64 } else { 0.0 };
    tick + i.rate.hz * mean(&i.t_preempt) * 1e-12
}

/// The analytical model of a chain: each node's prediction (with the chain's traffic) and
/// the links between them; the chain carries what its narrowest point does.
#[derive(Debug, Clone, Serialize)]
pub struct ChainPrediction {
    pub name: String,
    /// The node (index) whose loss-free capacity, or the capacity of the link into it, is
    /// the smallest.
    pub bottleneck_node: usize,
    /// What limits it there: the node's own bottleneck ("cpu", "link", ...) or "inbound link".
    pub bottleneck: String,
    /// The chain's loss-free capacity (pps): the least of the nodes' and the links'.
    pub r_max_pps: f64,
    /// The same (the name a node's prediction gives its loss-free capacity).
    pub capacity_pps: f64,
    pub offered_pps: f64,
    /// min(offered, r_max).
    pub predicted_pps: f64,
    pub saturated: bool,
    /// Each link's line rate in frames of the chain's mean size (pps), link i from node i
    /// into node i + 1.
    pub link_rate_pps: Vec<f64>,
    pub node_names: Vec<String>,
    pub nodes: Vec<Prediction>,
}

/// A chain's prediction from each node's (`node`: [`crate::predict::predict`]).
pub fn predict_chain(
    chain: &crate::scenario::chain::ResolvedChain,
    node: &dyn Fn(&ResolvedScenario) -> Prediction,
) -> ChainPrediction {
    let nodes: Vec<Prediction> = chain.nodes.iter().map(node).collect();
    let link_rate_pps: Vec<f64> = chain
        .links
        .iter()
        .zip(&chain.nodes)
        .map(|(l, n)| {
            crate::scenario::line_rate_pps(l.rate_bps, n.mean_frame_bytes(), n.scenario.link.overhead.bytes as f64)
        })
        .collect();
    let mut best = (0usize, f64::INFINITY, String::new());
    for (i, p) in nodes.iter().enumerate() {
        if p.capacity_pps < best.1 {
            best = (i, p.capacity_pps, p.bottleneck.to_string());
        }
        // The link out of the previous node feeds this one.
        if i > 0 && link_rate_pps[i - 1] < best.1 {
            best = (i, link_rate_pps[i - 1], "inbound link".to_string());
        }
    }
    let offered = nodes[0].offered_pps;
    ChainPrediction {
        name: chain.name.clone(),
        bottleneck_node: best.0,
        bottleneck: best.2,
        r_max_pps: best.1,
        capacity_pps: best.1,
        offered_pps: offered,
        predicted_pps: offered.min(best.1),
        saturated: offered > best.1,
        link_rate_pps,
        node_names: chain.node_names.clone(),
        nodes,
    }
}

// ---------------------------------------------------------------------------------------
// Below saturation: event rates and CPU in closed form (crate::rates)

/// What one core does below saturation, from the closed forms of [`crate::rates`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CoreEvents {
    /// The core's load (the stack's rounds, its tx vector's, the tx clean, the application
    /// on this core), and an application's on a core of its own.
    pub busy: f64,
    pub app_busy: f64,
    /// The load with every event paid by each frame alone: the bound at any load.
    pub busy_max: f64,
    pub irq_per_s: f64,
    pub polls_per_s: f64,
    pub rx_polls_per_s: f64,
    pub wakeups_per_s: f64,
    pub rx_pps: f64,
    /// See [`idle_starts`].
    pub idle_starts_per_s: f64,
    pub idle_gap_s: f64,
    /// The closed forms hold here (else the figures are the saturated-cost estimate).
    pub holds: bool,
    /// The core spins (busy polling) for all but `1 - busy` of its time.
    pub spins: bool,
}

/// The rate of episodes that start on an idle core and the mean idle gap before them:
/// the chains of rounds of its rx NAPI (or wake-ups, or calls) each start after the core
/// slept, less those whose start finds the core busy with other work (its tx vector's
/// rounds, its application), in proportion to that work's share of the core.
pub fn idle_starts(rx: &Steady, other_busy: f64) -> (f64, f64) {
    (rx.chains_per_s * (1.0 - other_busy).clamp(0.0, 1.0), rx.idle_gap_s)
}

/// Everything a core's closed forms need besides its rates.
pub struct CoreInputs<'a> {
    pub mode: &'a ModeCosts,
    pub arrivals: Arrivals,
    /// Rx frames the core's stack processes per second, its own time per frame (ps,
    /// per-event costs left out), the frame's bytes as the driver counts them.
    pub rx_pps: f64,
    pub t_frame_ps: f64,
    /// The part of `t_frame_ps` drawn from an exponential distribution (`host.service =
    /// "exponential"`: the processing), ps; 0 with constant service.
    pub t_frame_exp_ps: f64,
    pub bytes: f64,
    /// Tx completions its vectors clean per second and their time on this core (a share).
    pub tx_pps: f64,
    pub clean_busy: f64,
    /// Frames its application reads per second.
    pub read_pps: f64,
    pub settle: Settle,
    pub xdp_consumes: bool,
    /// The core's idle states: what a round that starts on a sleeping core waits and pays.
    pub idle: &'a IdleModel,
}

/// The cores' idle states as the closed forms price them (`[cpu.idle]`, see
/// `engine::idle`): a core sleeps before each round that does not follow the last at once,
/// for the mean idle time `I` its rounds leave it; the state the governor picks for `I`
/// (menu and teo with regular idle times: the deepest enabled one whose target residency
/// fits; haltpoll: its poll while `I` is within the window it grows to, else the halt) adds
/// its exit latency to the round's wait and its refill to the round's CPU.
#[derive(Debug, Clone, Default)]
pub struct IdleModel {
    on: bool,
    governor: crate::scenario::Governor,
    states: Vec<crate::scenario::ResolvedState>,
    usable: Vec<bool>,
    halt_poll_ps: f64,
}

impl IdleModel {
    /// The idle states of the scenario's cores; off where the mode polls (server,
    /// busy-poll) or no usable state costs anything.
    pub fn of(sc: &ResolvedScenario) -> Self {
        let cpu = &sc.scenario.cpu;
        let states = cpu.idle.resolved(&cpu.caches, cpu.frequency);
        IdleModel {
            on: cpu.idle.costs_something(&states) && sc.scenario.host.io.kind().sleeps(),
            governor: cpu.idle.governor,
            usable: states.iter().map(|s| cpu.idle.usable(s)).collect(),
            states,
            halt_poll_ps: cpu.idle.guest_halt_poll.ps as f64,
        }
    }

    /// (exit latency, refill), ps, of a wake-up after a mean idle time of `idle_ps`.
    pub fn exit_ps(&self, idle_ps: f64) -> (f64, f64) {
        use crate::scenario::Governor;
        if !self.on {
            return (0.0, 0.0);
        }
        let i = match self.governor {
            Governor::Haltpoll if idle_ps <= self.halt_poll_ps => 0,
            Governor::Haltpoll => crate::scenario::halt_state(&self.usable),
            Governor::Menu | Governor::Teo => {
                crate::scenario::deepest_within(&self.states, &self.usable, idle_ps as u64)
            }
        };
        self.states.get(i).map_or((0.0, 0.0), |s| (s.latency_ps as f64, s.refill_after_ps(idle_ps as u64) as f64))
    }
}

/// One core's events and load below saturation.
pub fn core_events(i: &CoreInputs) -> CoreEvents {
    let ps = 1e-12;
    let mut e = CoreEvents { holds: true, rx_pps: i.rx_pps, ..Default::default() };
    let lambda = i.rx_pps;
    let frame_s = i.t_frame_ps * ps;
    let poisson = i.arrivals == Arrivals::Poisson;
    // A round that starts on a sleeping core waits for its idle state's exit and pays its
    // refill: priced from the mean idle time the rounds leave, found in a few passes.
    let (mut exit_ps, mut refill_ps) = (0.0, 0.0);
    let mut pass = 0;
    let (rx, tx, tx_cost_ps) = loop {
        let (rx, tx, tx_cost_ps) = match &i.mode.events {
            Events::None => {
                e.busy = lambda * frame_s + i.clean_busy;
                e.busy_max = e.busy;
                (Steady::NONE, Steady::NONE, 0.0)
            }
            Events::Recheck { t_start_ps, t_round_ps, latency_ps, weight, defer, t_timer_ps } => {
                // With deferral each later round is the timer's: it wakes the thread again.
                let r = Rounds {
                    rate_pps: lambda,
                    arrivals: i.arrivals,
                    t_frame_ps: i.t_frame_ps,
                    t_start_ps: t_start_ps + t_round_ps + refill_ps,
                    t_next_ps: if defer.is_some() {
                        t_timer_ps + t_start_ps + t_round_ps + refill_ps
                    } else {
                        *t_round_ps
                    },
                    latency_start_ps: latency_ps + exit_ps,
                    latency_next_ps: if defer.is_some() { latency_ps + exit_ps } else { 0.0 },
                    takes_late_frames: false,
                    weight: *weight,
                    t_poll_ps: 0.0,
                    next: match defer {
                        Some((polls, timeout_ps)) => Next::Deferral { polls: *polls, timeout_ps: *timeout_ps },
                        None => Next::Recheck,
                    },
                    woken: *latency_ps > 0.0,
                };
                let s = steady(&r);
                e.polls_per_s = s.polls_per_s;
                e.rx_polls_per_s = s.polls_per_s;
                e.wakeups_per_s = if defer.is_some() { s.rounds_per_s } else { s.chains_per_s };
                e.irq_per_s = if *latency_ps > 0.0 { 0.0 } else { s.chains_per_s };
                // Alone, a frame pays its wake-up's round and the deferral's empty ones.
                let deferred = defer.map_or(0.0, |(polls, _)| polls as f64 * (t_timer_ps + t_start_ps + t_round_ps));
                e.busy_max = lambda * (frame_s + (t_start_ps + t_round_ps + deferred) * ps) + i.clean_busy;
                (s, Steady::NONE, 0.0)
            }
            Events::Napi(n) => {
                let (lat, wake) = n.thread.unwrap_or((0.0, 0.0));
                let lat = lat + exit_ps;
                let round_ps = n.t_irq_ps + wake + n.t_poll_ps + refill_ps;
                let rx_round = |level: Level| Rounds {
                    rate_pps: lambda,
                    arrivals: i.arrivals,
                    t_frame_ps: i.t_frame_ps,
                    t_start_ps: round_ps,
                    t_next_ps: if n.defer.is_some() { n.t_timer_ps + wake + n.t_poll_ps } else { round_ps },
                    latency_start_ps: lat,
                    latency_next_ps: lat,
                    takes_late_frames: true,
                    weight: n.weight,
                    t_poll_ps: n.t_poll_ps,
                    next: match n.defer {
                        Some((polls, timeout_ps)) => Next::Deferral { polls, timeout_ps },
                        None => Next::Interrupt { level, tx_cause: n.shared_tx },
                    },
                    woken: n.thread.is_some(),
                };
                let level = if n.defer.is_some() || lambda <= 0.0 {
                    Level::NONE
                } else {
                    (i.settle)(&n.itr, true, i.xdp_consumes, n.shared_tx, i.bytes, poisson, &|l| {
                        let s = steady(&rx_round(*l));
                        (s.rounds_per_s, s.frames_per_round, lambda * frame_s)
                    })
                };
                let s = steady(&rx_round(level));
                // A vector of the tx queue's own: its completions' rounds (cleaning is priced per
                // frame, in `clean_busy`). Where the core sends no more than it receives, the
                // completions come in bursts, one per rx round, a little after it: each rx round
                // that sent frames is followed by one round of the tx vector (throttled alike),
                // and one that was latched by a completion the last round took by an empty one,
                // as on the rx vector: as many rounds as the rx vector's, in the share of the
                // frames it sends (the simulator gives 0.99-1.03 of them up to 70% load, fewer
                // nearer saturation, where they are a few hundredths of the CPU).
                let tx = if n.tx_vector && i.tx_pps > 0.0 && i.tx_pps <= lambda && s.rounds_per_s > 0.0 {
                    let share = i.tx_pps / lambda;
                    let rounds = s.rounds_per_s * share;
                    Steady {
                        rounds_per_s: rounds,
                        chains_per_s: s.chains_per_s * share,
                        frames_per_round: i.tx_pps / rounds,
                        polls_per_s: rounds,
                        idle_gap_s: s.idle_gap_s,
                        busy: rounds * round_ps * ps,
                        holds: true,
                    }
                } else if n.tx_vector && i.tx_pps > 0.0 {
                    let tx_round = |level: Level| Rounds {
                        rate_pps: i.tx_pps,
                        arrivals: i.arrivals,
                        t_frame_ps: 0.0,
                        t_start_ps: round_ps,
                        t_next_ps: round_ps,
                        latency_start_ps: lat,
                        latency_next_ps: lat,
                        takes_late_frames: true,
                        weight: f64::INFINITY,
                        t_poll_ps: 0.0,
                        next: Next::Interrupt { level, tx_cause: false },
                        woken: n.thread.is_some(),
                    };
                    let level = (i.settle)(&n.itr, false, false, true, i.bytes, poisson, &|l| {
                        let s = steady(&tx_round(*l));
                        (s.rounds_per_s, s.frames_per_round, 0.0)
                    });
                    steady(&tx_round(level))
                } else {
                    Steady::NONE
                };
                let timer_polls = if n.defer.is_some() { s.rounds_per_s - s.chains_per_s } else { 0.0 };
                e.irq_per_s = s.rounds_per_s - timer_polls + tx.rounds_per_s;
                e.polls_per_s = s.polls_per_s + tx.polls_per_s;
                e.rx_polls_per_s = s.polls_per_s;
                e.wakeups_per_s = if n.thread.is_some() { s.rounds_per_s + tx.rounds_per_s } else { 0.0 };
                // Alone, a frame pays its interrupt's round, the round its completion starts on a
                // shared vector (or its tx vector's), and the deferral's empty polls.
                let rounds_alone = 1.0 + if n.shared_tx || (n.tx_vector && i.tx_pps > 0.0) { 1.0 } else { 0.0 };
                let deferred = n.defer.map_or(0.0, |(polls, _)| polls as f64 * (n.t_timer_ps + wake + n.t_poll_ps));
                e.busy_max = lambda * (frame_s + (rounds_alone * round_ps + deferred) * ps) + i.clean_busy;
                (s, tx, 0.0)
            }
        };
        // The mean idle time before a round, and what waking from it costs.
        let rounds = rx.rounds_per_s + tx.rounds_per_s;
        let asleep = (1.0 - rx.busy - tx.busy - i.clean_busy).max(0.0);
        let (x, r) = if rounds > 0.0 { i.idle.exit_ps(asleep / rounds / ps) } else { (0.0, 0.0) };
        pass += 1;
        if (x, r) == (exit_ps, refill_ps) || pass >= 4 {
            break (rx, tx, tx_cost_ps);
        }
        (exit_ps, refill_ps) = (x, r);
    };
    e.holds = rx.holds && tx.holds;
    e.busy = rx.busy + tx.busy + tx_cost_ps + i.clean_busy;
    if matches!(i.mode.events, Events::None) {
        e.busy = lambda * frame_s + i.clean_busy;
    }
    // The application: the stack hands it each round's frames; one that finds it asleep
    // wakes it (after its latency, idle, then t_wakeup), and it reads in calls of up to
    // `batch` frames until its socket is empty, then blocks (or busy polls first). It is
    // asleep at a round that brings frames if the next round came after its run A: rounds
    // come V apart within a chain (q of them then wait an idle gap more, Poisson: e^-λ(A-V)
    // that it outlasts A), so the share it sleeps through is 1 below A < V.
    let mut other = tx.busy;
    if let (Some(a), true) = (&i.mode.app, i.read_pps > 0.0) {
        let rounds = if rx.rounds_per_s > 0.0 { rx.rounds_per_s.min(i.read_pps) } else { i.read_pps };
        let n = i.read_pps / rounds;
        let with_frames = match i.arrivals {
            Arrivals::Poisson if rx.rounds_per_s > 0.0 => rounds * (1.0 - (-n).exp()),
            _ => rounds,
        };
        let n_wake = i.read_pps / with_frames.max(1e-12);
        let calls_per_round = (n_wake / a.batch).ceil().max(1.0);
        let run_s = (a.wake_latency_ps + a.t_wakeup_ps + calls_per_round * a.t_call_ps + n_wake * a.t_packet_ps) * ps;
        let q = if rx.rounds_per_s > 0.0 { rx.chains_per_s / rx.rounds_per_s } else { 1.0 };
        let v = (1.0 / rounds - q * rx.idle_gap_s).max(0.0);
        let m = i.t_frame_exp_ps * ps * n;
        let busy_at_next = if a.same_core && i.arrivals == Arrivals::Cbr && m > 0.0 {
            // Evenly spaced rounds of random length (`host.service = "exponential"`): on
            // the stack's core the reader runs after the round, in the idle time it leaves
            // before the next (a round within a chain leaves none), and it is still reading
            // when the next comes if its run A outlasts that gap: the round's time X varies
            // about its mean m, so it does with P(X - m > gap - A) = e^-(gap - A + m)/m.
            let d = rx.idle_gap_s - run_s;
            let outlasts = if d + m >= 0.0 { (-(d + m) / m).exp() } else { 1.0 };
            (1.0 - q) + q * outlasts
        } else if run_s <= v {
            0.0
        } else {
            (1.0 - q) + q * (1.0 - i.arrivals.p_none(i.read_pps * (run_s - v)))
        };
        // A thread that spins never sleeps.
        let wakes = if a.spin { 0.0 } else { with_frames * (1.0 - busy_at_next) };
        let per_wake = if wakes > 0.0 { i.read_pps / wakes } else { f64::INFINITY };
        let calls = if wakes > 0.0 { wakes * (per_wake / a.batch).ceil().max(1.0) } else { i.read_pps / a.batch };
        let mut app_busy = i.read_pps * a.t_packet_ps * ps + calls * a.t_call_ps * ps + wakes * a.t_wakeup_ps * ps;
        if let Some((kick_ps, napi_ps)) = a.kick_per_sleep_ps {
            // Each sleep follows a kick, whose interrupt and poll the NAPI's core runs.
            app_busy += wakes * kick_ps * ps;
            e.busy += wakes * napi_ps * ps;
            e.irq_per_s += wakes;
        }
        e.wakeups_per_s += wakes;
        let alone = i.read_pps * (a.t_packet_ps + a.t_wakeup_ps + a.t_call_ps) * ps;
        if a.same_core {
            e.busy += app_busy;
            e.busy_max += alone;
            other += app_busy;
        } else {
            e.app_busy = app_busy;
        }
        if a.spin {
            if a.same_core {
                e.busy = 1.0;
                e.busy_max = 1.0;
                e.spins = true;
            } else {
                e.app_busy = 1.0;
            }
        } else if a.busy_poll_ps > 0.0 && a.same_core {
            // It spins up to busy_poll on an empty socket: the core sleeps only after a
            // frame's gap longer than that (Poisson: e^(-λ B) of the gaps, mean gap 1/λ
            // beyond it; evenly spaced: never if the gap is shorter).
            let b = a.busy_poll_ps * ps;
            let idle = match i.arrivals {
                Arrivals::Poisson => (-i.read_pps * b).exp(),
                Arrivals::Cbr => (1.0 - i.read_pps * b).max(0.0),
            };
            e.busy = e.busy.max(1.0 - idle);
            e.busy_max = 1.0;
            e.spins = true;
        }
    }
    let (starts, gap) = idle_starts(&rx, other);
    e.idle_starts_per_s = starts;
    e.idle_gap_s = gap;
    e.busy = e.busy.min(1.0);
    e.busy_max = e.busy_max.max(e.busy).min(1.0);
    e
}

#[cfg(test)]
mod tests {
    use super::{lock_round, IdleModel};

    /// A frame beside a shared lock: its own work, or a round of the holds of the cores that
    /// are in their frames, averaged over how many are.
    #[test]
    fn a_round_of_the_lock_counts_the_holds_of_the_cores_in_their_frames() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b;
        assert!(close(lock_round(1.0, 0.5, &[]), 1.0), "its own hold at least");
        assert!(close(lock_round(1.0, 3.0, &[0.0, 0.0]), 3.0), "idle cores hold nothing");
        // Three cores always in their frames: four holds a round (400 ns held: 1.6 us).
        assert!(close(lock_round(400e-9, 1e-6, &[1.0, 1.0, 1.0]), 1.6e-6));
        // ... unless the core's own work is longer.
        assert!(close(lock_round(400e-9, 2e-6, &[1.0, 1.0, 1.0]), 2e-6));
        // Two others each half the time: K = 0, 1, 2 with 1/4, 1/2, 1/4; own 2.5 h.
        assert!(close(lock_round(1.0, 2.5, &[0.5, 0.5]), 0.75 * 2.5 + 0.25 * 3.0));
        // 250 ns held, 835 ns own, three others in their frames 73% of the time: only all
        // three make a round longer than the frame (1 us): 0.73^3 x 165 ns more.
        let t = lock_round(250e-9, 835e-9, &[0.73; 3]);
        assert!(close(t, 835e-9 + 0.73f64.powi(3) * 165e-9), "{t}");
    }
    use crate::scenario::Scenario;
    use std::path::Path;

    fn idle(cpu_idle: &str) -> IdleModel {
        let toml = format!(
            "[cpu]\nfrequency = \"3.3GHz\"\n[cpu.idle]\n{cpu_idle}\n[link]\nrate = \"10Gbit/s\"\n[traffic]\nrate = \"1Mpps\"\n\
             [host]\nt_proc = \"500ns\""
        );
        IdleModel::of(&Scenario::load_toml(&toml, "t.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}")))
    }

    /// menu on intel-skx: 50 us of idle is C1E (10 us exit, caches kept), 700 us C6 (133 us,
    /// the L2 refetched: 3.72 us), 1 us POLL; haltpoll polls within its 200 us window and
    /// halts (1 us) beyond it; a polling table or a polling mode costs nothing.
    #[test]
    fn a_wake_up_pays_the_state_the_governor_picks_for_the_mean_idle_time() {
        let us = 1e6;
        let skx = idle("table = \"intel-skx\"");
        assert_eq!(skx.exit_ps(50.0 * us), (10.0 * us, 0.0));
        assert_eq!(skx.exit_ps(700.0 * us), (133.0 * us, 3_723_636.0));
        assert_eq!(skx.exit_ps(1.0 * us), (0.0, 0.0));
        let limited = idle("latency_limit = \"50us\"");
        assert_eq!(limited.exit_ps(700.0 * us), (10.0 * us, 0.0));
        let hp = idle("governor = \"haltpoll\"\ntable = \"kvm-haltpoll\"");
        assert_eq!(hp.exit_ps(100.0 * us), (0.0, 0.0));
        assert_eq!(hp.exit_ps(300.0 * us), (1.0 * us, 0.0));
        assert_eq!(idle("table = \"poll\"").exit_ps(700.0 * us), (0.0, 0.0));
        // A refill that grows over 200 us of idle: half of it after a mean 100 us.
        let ramp = idle(
            "states = [{ name = \"halt\", latency = \"1us\", residency = \"1us\", refill = \"4us\", refill_time = \"200us\" }]",
        );
        assert_eq!(ramp.exit_ps(100.0 * us), (1.0 * us, 2.0 * us));
        assert_eq!(ramp.exit_ps(900.0 * us), (1.0 * us, 4.0 * us));
    }
}
