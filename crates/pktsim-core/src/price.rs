//! What the node's work costs in time, priced once for the analytical model and the
//! simulator alike:
//!
//! - [`CostTerms`]: a frame's processing before it is rounded to integer time, from the
//!   host's times where the scenario gives them (`host.t_proc`, `host.t_clean`), else the
//!   cost profile's cycles per group (with the FIB model applied) at the CPU frequency. The
//!   simulator runs these in integer time (`engine/costs.rs`); the model prices a frame with
//!   them.
//! - [`ModeCosts`]: what an I/O mode's own work costs per frame: per-frame terms, and
//!   per-event terms (a poll, a call, an interrupt, a wake-up) with how many frames share
//!   one event when the rings never run dry. Each mode states its own, beside its
//!   simulation (`engine/io/<mode>.rs`, `mode_costs`), with the numbers that simulation
//!   runs.

use crate::cost::Group;
use crate::scenario::ResolvedScenario;

/// The scenario's times before they are rounded to integer time: what the simulator runs
/// (`engine::costs::Costs`) and what the analytical model prices a frame with.
#[derive(Debug, Clone, PartialEq)]
pub struct CostTerms {
    /// Fixed part of a frame's processing (without contention or a folded tx clean), ps.
    pub proc_ps: f64,
    /// Per-byte part of a frame's processing, fs per byte.
    pub proc_fs_per_byte: f64,
    /// Tx clean per frame (`host.t_clean`, else C_free), ps.
    pub clean_ps: f64,
    /// The mode has no tx-clean stage: the clean is part of each frame's processing.
    pub clean_in_proc: bool,
    /// `cpu.contention` for each other core, per frame, ps.
    pub contention_ps: f64,
    /// Routing time the FIB model adds to explicit host times, ps (in `proc_ps`).
    pub routing_extra_ps: f64,
    /// `host.t_proc` is given (the time is not split into 000's groups).
    pub explicit: bool,
    /// A frame's share of a NAPI poll at full weight (`t_poll / weight`), taken out of a
    /// profile's RX cycles (measured at saturation, where it is inside them): the node pays
    /// it as `t_poll` per poll instead. 0 with `host.t_proc` given.
    pub poll_share_ps: f64,
}

impl CostTerms {
    pub fn of(sc: &ResolvedScenario) -> CostTerms {
        let s = &sc.scenario;
        let f = s.cpu.frequency.hz;
        let (groups, _) = sc.group_cycles();
        let ps = |c: f64| c / f * 1e12;
        let clean_ps = match s.host.stack.t_clean {
            Some(d) => d.ps as f64,
            None if s.host.stack.t_proc.is_some() => 0.0,
            None => ps(groups.get(Group::Free)),
        };
        let routing_extra_ps = ps((groups.get(Group::Routing) - sc.cost.fixed.get(Group::Routing)).max(0.0));
        // A profile is measured at saturation, where every NAPI poll carries its whole
        // weight: its cycles hold each frame's share of a poll.
        let poll_share_ps = match s.host.stack.t_proc {
            Some(_) => 0.0,
            None => s.host.io.napi_poll().map_or(0.0, |p| p.t_poll.ps as f64 / p.weight.max(1) as f64),
        };
        let (proc_ps, proc_fs_per_byte) = match s.host.stack.t_proc {
            // Explicit times still see the FIB model: a bigger FIB adds its routing cycles.
            // x = a S + b + c (001): t_proc = b + c, t_proc_per_byte = a.
            Some(d) => {
                (d.ps as f64 + routing_extra_ps, s.host.stack.t_proc_per_byte.map_or(0, |a| a.fs_per_byte) as f64)
            }
            None => {
                // group_cycles is at the mean size; take the per-byte part out again.
                let per_byte = sc.cost.per_byte.0.iter().sum::<f64>() - sc.cost.per_byte.get(Group::Free);
                let fixed_cycles = groups.total() - groups.get(Group::Free) - per_byte * sc.mean_frame_bytes();
                ((ps(fixed_cycles) - poll_share_ps).max(0.0), per_byte / f * 1e15)
            }
        };
        CostTerms {
            proc_ps,
            proc_fs_per_byte,
            clean_ps,
            // (A device's NAPI cleans completions in its poll's tx phase.)
            clean_in_proc: s.host.io.device_napi().is_none(),
            contention_ps: ps(s.cpu.contention.cycles * (s.cpu.cores.max(1) - 1) as f64),
            routing_extra_ps: if s.host.stack.t_proc.is_some() { routing_extra_ps } else { 0.0 },
            explicit: s.host.stack.t_proc.is_some(),
            poll_share_ps,
        }
    }

    /// Mean time of a frame of `bytes` bytes, everything per frame included, ps.
    pub fn frame_ps(&self, bytes: f64) -> f64 {
        self.proc_ps
            + self.contention_ps
            + if self.clean_in_proc { self.clean_ps } else { 0.0 }
            + self.proc_fs_per_byte * bytes / 1e3
    }
}

/// One kind of work a mode does for frames, priced.
#[derive(Debug, Clone, PartialEq)]
pub struct IoCost {
    /// What it is ("poll", "call", "wake-up", ...).
    pub name: &'static str,
    /// Time of one occurrence, in picoseconds, plus `fs_per_byte` for each byte it moves.
    pub ps: f64,
    pub fs_per_byte: f64,
    /// Frames sharing one occurrence when the rings never run dry (1: a per-frame term;
    /// infinite: the event does not happen then, as an interrupt while NAPI keeps polling).
    pub frames_at_saturation: f64,
    /// Occurrences per frame at most (at low load each frame may pay every event alone).
    pub max_per_frame: f64,
}

impl IoCost {
    pub fn per_frame(name: &'static str, ps: f64) -> Self {
        IoCost { name, ps, fs_per_byte: 0.0, frames_at_saturation: 1.0, max_per_frame: 1.0 }
    }
    pub fn per_event(name: &'static str, ps: f64, frames_at_saturation: f64, max_per_frame: f64) -> Self {
        IoCost { name, ps, fs_per_byte: 0.0, frames_at_saturation, max_per_frame }
    }
    /// The deferral timer (`host.t_timer`, `t_timer_ps` each time a poll arms it): a frame
    /// alone may pay `deferred` of them (its `napi_defer_hard_irqs` timer polls), none while
    /// polls use their whole weight; no term without deferral.
    pub fn deferral_timer(t_timer_ps: f64, deferred: f64) -> Option<Self> {
        (deferred > 0.0).then(|| IoCost::per_event("deferral timer", t_timer_ps, f64::INFINITY, deferred))
    }
}

/// What a mode's own work costs, besides each frame's processing ([`CostTerms`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ModeCosts {
    pub terms: Vec<IoCost>,
    /// Frames pass a shared tx queue's lock (`host.tx_lock`).
    pub tx_lock: bool,
    /// Tx clean per frame, ps, done by the core whose vector the frame's tx queue
    /// completes on (NAPI), not by the core that sent it.
    pub tx_clean_ps: f64,
    /// Most tx cleans per rx frame on a core busy with both: its polls alternate rx
    /// (`host.weight`) and tx clean (`nic.tx_work_limit`). Infinite where cleaning is not
    /// bounded per poll.
    pub cleans_per_rx: f64,
    /// The core never sleeps: it is fully busy at any load (useful work apart).
    pub always_busy: bool,
    /// How much of the stack's per-frame processing (`CostTerms::frame_ps` without
    /// contention) a frame pays: 1, or 0 where XDP ends it before the stack.
    pub proc_share: f64,
    /// An application reads what the stack delivers (`[app]`).
    pub app: Option<AppCosts>,
    /// At saturation each NAPI is polled only every this long after a poll ends (a
    /// preferred busy poller's NAPI, serviced by the deferral timer while the application
    /// is busy reading), ps; 0: polled back to back.
    pub poll_gap_ps: f64,
    /// Costs of this mode the terms leave out, said in the model's output.
    pub notes: Vec<String>,
    /// What starts the mode's rounds below saturation (interrupts, wake-ups, calls), for
    /// the model's closed forms ([`crate::rates`]).
    pub events: Events,
}

/// What starts a mode's rounds of work and what a round costs, below saturation.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Events {
    /// Every cost is a frame's, or the core spins (`always_busy`).
    #[default]
    None,
    /// NAPI on a device's interrupt vectors.
    Napi(NapiEvents),
    /// A round starts with a wake-up (`t_start_ps`, after `latency_ps` idle), takes what
    /// waits (up to `weight`, `t_round_ps` a round) and goes on at once while frames came
    /// meanwhile (a veth NAPI thread's polls; a batched system call's calls).
    /// With `defer` (`napi_defer_hard_irqs`, `gro_flush_timeout` ps: a veth NAPI's
    /// deferral), a round that took frames is followed by the timer's, `gro_flush_timeout`
    /// after it, which wakes the thread again (`t_timer_ps` more), until that many find none.
    Recheck {
        t_start_ps: f64,
        t_round_ps: f64,
        latency_ps: f64,
        weight: f64,
        defer: Option<(u32, f64)>,
        t_timer_ps: f64,
    },
}

/// A NAPI's interrupts and polls.
#[derive(Debug, Clone, PartialEq)]
pub struct NapiEvents {
    pub t_irq_ps: f64,
    pub t_poll_ps: f64,
    /// One expiry of the deferral timer (`host.t_timer`), before each timer poll.
    pub t_timer_ps: f64,
    pub weight: f64,
    pub itr: crate::scenario::ItrSpec,
    /// Frames sent are completed on the rx vector (`nic.tx_vector = "shared"`): a round that
    /// sent frames is followed by another.
    pub shared_tx: bool,
    /// Frames sent are completed on a vector of their own, with its own interrupts and polls.
    pub tx_vector: bool,
    /// Threaded NAPI: each interrupt wakes the NAPI's thread (latency, CPU), ps.
    pub thread: Option<(f64, f64)>,
    /// `napi_defer_hard_irqs` and `gro_flush_timeout` (ps).
    pub defer: Option<(u32, f64)>,
}

impl Default for ModeCosts {
    fn default() -> Self {
        ModeCosts {
            terms: Vec::new(),
            tx_lock: false,
            tx_clean_ps: 0.0,
            cleans_per_rx: f64::INFINITY,
            always_busy: false,
            proc_share: 1.0,
            app: None,
            poll_gap_ps: 0.0,
            notes: Vec::new(),
            events: Events::None,
        }
    }
}

/// The application's work per frame when its socket never runs dry (`t_packet`, and a
/// call's `t_call` shared by `batch` frames), and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct AppCosts {
    pub frame_ps: f64,
    /// On its NAPI's core, after the softirq work (else on a core of its own).
    pub same_core: bool,
    /// The application drives its NAPI (IRQ suspension): the stack processes only what
    /// its busy polls take, a poll (`extra_ps` per frame more than the softirq's) per
    /// `busy_poll_budget` frames.
    pub drives: Option<f64>,
    /// A busy poll's cost per frame more than the softirq's, ps (where the reader busy
    /// polls and may drive its NAPI).
    pub busy_extra_ps: f64,
    /// The thread's own parts below saturation: a call's and a frame's time, frames per
    /// call, its wake-up (latency idle, CPU), and how long it busy polls an empty socket
    /// before it blocks (0: never), ps.
    pub t_call_ps: f64,
    pub t_packet_ps: f64,
    pub batch: f64,
    pub wake_latency_ps: f64,
    pub t_wakeup_ps: f64,
    pub busy_poll_ps: f64,
    /// It never sleeps (an AF_XDP thread that spins on its ring): its core is always busy.
    pub spin: bool,
    /// Its socket holds the stack back once the reader falls behind on its NAPI's core (a
    /// zero-copy AF_XDP socket whose driver stops at a full rx ring, or whose fill ring
    /// runs dry first): the stack then processes only what the reader reads, at this much
    /// more per frame (the kick that restarts it, its interrupts, the reader's wake-up,
    /// shared by the frames of a cycle), ps.
    pub back_pressure_ps: Option<f64>,
    /// A kick before each sleep (a zero-copy l2fwd thread's `poll()` with frames on its tx
    /// ring): its system call on the reader's core and the software interrupt and poll it
    /// raises on the NAPI's, ps.
    pub kick_per_sleep_ps: Option<(f64, f64)>,
}
