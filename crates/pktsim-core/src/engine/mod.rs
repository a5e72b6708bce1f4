//! The discrete-event simulator of one node.
//!
//! ```text
//!   ingress ──> NIC: DMA, classify, rx rings ──> I/O mode: cores (IRQ, NAPI, polling)
//!   (traffic)        vectors + moderation            │  costs, ring strategies
//!                                                    v
//!   egress  <── NIC: qdisc, tx rings, egress link <──┘            stats: measurement
//! ```
//!
//! Components, in the order a packet meets them: [`ingress`] ([`traffic`]: sources, the sender's [`stalls`] and the
//! ingress link), [`nic`] (classifier, rx and tx rings, vectors with their [`moderation`]),
//! [`io`] (the host's I/O mode, with [`costs`] and ring [`strategy`]s), [`app`] (a socket
//! and the application reading it, where the stack delivers frames locally), [`stats`]
//! (measurement). [`crate::topology`] numbers rings, queues, cores and vectors for all of
//! them (the analytical model too).
//!
//! A [`SimNode`] is assembled from a scenario ([`build`]), runs its event loop ([`mod@run`]:
//! [`SimNode::run`]) and reports ([`report`]). Time is typed ([`time`]: instants and spans in integer
//! picoseconds); events run in (time, insertion) order and components own keyed,
//! cancellable timers ([`queue`]); each component draws from its own seeded random stream
//! ([`rng`]). Same scenario + same seed = identical results.

pub mod app;
pub mod build;
pub mod chain;
pub mod costs;
pub mod idle;
pub mod ingress;
pub mod interference;
pub mod io;
pub mod moderation;
pub mod nic;
pub mod queue;
pub mod report;
pub mod rng;
pub mod run;
pub mod sched;
pub mod stalls;
pub mod stats;
pub mod strategy;
#[cfg(test)]
pub mod testing;
pub mod time;
pub mod trace;
pub mod traffic;
pub mod xsk;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::error::Result;
use crate::scenario::ResolvedScenario;

use crate::topology::Topology;
use costs::Costs;
use io::IoMode;
use nic::{Egress, Nic, Wire};
use queue::EventQueue;
use stats::Stats;
use time::{Instant, Span};

pub use report::{PerPoll, RingSummary, SimResult};
pub use stats::LatencySummary;

/// Why a run stopped early.
pub const INTERRUPTED: &str = "interrupted";

/// A simulated node: its NIC (with the ingress and egress ports), the I/O mode running its
/// cores, their costs, and the statistics of the measurement window.
pub struct SimNode {
    queue: EventQueue,
    nic: Nic,
    mode: Box<dyn IoMode>,
    stats: Stats,
    costs: Costs,
    topo: Topology,
    /// End of the measurement window.
    stop: Instant,
    /// Set (from any thread) to stop the run.
    cancel: Arc<AtomicBool>,
    info: ReportInfo,
    /// `[cpu.interference]`, if anything interferes.
    interference: Option<interference::Interference>,
    /// `[cpu.idle]`: the cores' idle states.
    idle: idle::Idle,
    /// How far a core may run ahead of the others' work units (see [`io::Ctx::horizon`]).
    run_ahead: Option<Span>,
}

/// How far a core of independent cores runs ahead of the earliest end of another's work
/// unit: long enough that a busy core meets the event queue once per hundreds of frames,
/// short enough that the frames waiting for cores that are behind stay few.
pub const RUN_AHEAD: Span = Span::from_us(100);

/// What the report names and scales by.
struct ReportInfo {
    name: String,
    seed: u64,
    duration: Span,
    interval: Option<Span>,
    queue_names: Vec<String>,
    class_names: Vec<String>,
    mean_frame_bytes: f64,
    /// The clock the cores run at (`[cpu.freq]`'s steady state, else `cpu.frequency`).
    frequency_hz: f64,
    notes: Vec<String>,
}

impl SimNode {
    /// Send every transmitted frame to `port` too (the next node, a collector).
    pub fn connect_egress(&mut self, port: Box<dyn Egress>) {
        // The port hears of departures in time order: no core runs ahead.
        self.run_ahead = None;
        self.nic.wire(Wire::Port(port));
    }

    /// Tests: every step through the general path (see [`IoMode::general_path_only`]).
    #[cfg(test)]
    pub fn general_path_only(&mut self) {
        self.mode.general_path_only();
    }

    /// Stop the run when `flag` is set (from any thread: a signal handler, a watchdog).
    /// The engine looks at it between events, between work units and between frames, so a
    /// run stops within microseconds of wall time, whatever the scenario.
    pub fn cancel_on(&mut self, flag: Arc<AtomicBool>) {
        self.nic.wire(Wire::Cancel(flag.clone()));
        self.cancel = flag;
    }
}

/// Simulate the node a scenario describes: build, run, report. Setting `cancel` (from
/// another thread) stops the run with `Error::Invalid("interrupted")`.
pub fn run(sc: &ResolvedScenario, cancel: Arc<AtomicBool>) -> Result<SimResult> {
    let wall = std::time::Instant::now();
    let mut node = SimNode::build(sc);
    node.cancel_on(cancel);
    node.run()?;
    Ok(node.report(wall.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::ingress::Packet;
    use super::nic::Egress;
    use super::time::Instant;
    use super::SimNode;
    use crate::scenario::Scenario;

    /// An egress port that drops what it hears of: connecting it keeps every core in step
    /// with the event queue (no core runs ahead).
    struct Lockstep;
    impl Egress for Lockstep {
        fn depart(&mut self, _: &Packet, _: Instant, _: Instant) {}
    }

    /// The result as JSON without what depends on how it was computed (wall time, events).
    fn result(toml: &str, lockstep: bool) -> (serde_json::Value, u64) {
        let sc = Scenario::load_toml(toml, "t.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"));
        let mut node = SimNode::build(&sc);
        let ahead = node.run_ahead.is_some();
        if lockstep {
            node.connect_egress(Box::new(Lockstep));
        }
        node.run().unwrap_or_else(|e| panic!("{e}"));
        assert!(ahead || lockstep, "independent cores run ahead");
        super::testing::figures_of(node.report(0.0))
    }

    /// Cores that share nothing but the ingress run ahead of each other's events (each up
    /// to its own next event, the next arrival while one of its rings is armed, and the
    /// next barrier): the figures are those of the same run kept in step with the event
    /// queue, bit for bit, with fewer events. Poisson traffic over many flows, exponential
    /// service, dynamic ITR and deferral, every I/O mode with cores; at high load, and at
    /// low load (where every core's interrupts, arrivals and timers would otherwise stop
    /// the others) with tx completions on the rx vector or on their own, and with
    /// interference (a barrier). (The cores never sleep at a cost: a core that does not
    /// look at its ring for long enough that it overflows, as one leaving C6 at 1.5 Mpps,
    /// is not yet bit for bit the same run ahead: one frame's latency moves by a handler.)
    #[test]
    fn cores_running_ahead_give_the_figures_of_cores_in_step() {
        for (rate, duration, nic) in [
            ("6Mpps", "4ms", ""),
            ("0.4Mpps", "30ms", ""),
            ("0.4Mpps", "30ms", "tx_vector = \"shared\""),
            ("0.4Mpps", "30ms", "tx_vector = \"shared\"\n[cpu.interference]\ntick_period = \"1ms\"\nt_tick = [\"5us\", \"20us\"]\nrate = \"2kHz\"\nt_preempt = [\"1us\", \"30us\"]"),
        ] {
            cores_run_ahead_in_step(rate, duration, nic);
        }
    }

    fn cores_run_ahead_in_step(rate: &str, duration: &str, nic: &str) {
        let head = format!(
            r#"
            seed = 3
            [cpu]
            frequency = "3.3GHz"
            cores = 4
            [link]
            rate = "100Gbit/s"
            [traffic]
            rate = "{rate}"
            pattern = "poisson"
            size = "64B"
            flows = 256
            [measure]
            warmup = "1ms"
            duration = "{duration}"
            interval = "1ms"
            [cpu.idle]
            table = "poll"
            [nic]
            rx_ring = 256
            {nic}
        "#
        );
        let hosts = [
            "io = \"napi\"\nt_irq = \"200ns\"\nt_proc = \"600ns\"\nt_clean = \"50ns\"\nservice = \"exponential\"\n[nic.itr]\nmode = \"dynamic\"",
            "io = \"napi\"\nt_proc = \"500ns\"\nt_poll = \"1us\"\n[nic.napi]\ndefer_hard_irqs = 2\ngro_flush_timeout = \"20us\"",
            "io = \"server\"\nt_proc = \"700ns\"\nservice = \"exponential\"",
            "io = \"busy-poll\"\nt_proc = \"500ns\"\n[host.batch]\nsize = 32\nt_call = \"100ns\"\nt_empty = \"50ns\"",
            "io = \"threaded-napi\"\nt_proc = \"650ns\"\nservice = \"exponential\"\n[host.thread]\nwake_latency = \"5us\"\nt_wakeup = \"2us\"",
            "io = \"xdp\"\nt_irq = \"1us\"\nservice = \"exponential\"\n[host.xdp]\nmode = \"native\"\naction = \"tx\"\nt_driver = \"300ns\"",
            "io = \"af-xdp\"\nt_irq = \"1us\"\nt_poll = \"200ns\"\n[host.xdp]\naction = \"redirect\"\nt_driver = \"100ns\"\nt_flush = \"50ns\"\n[host.af_xdp]\nzero_copy = true",
        ];
        for host in hosts {
            let toml = format!("{head}\n[host]\n{host}\n");
            let (ahead, ahead_events) = result(&toml, false);
            let (step, step_events) = result(&toml, true);
            assert_eq!(ahead, step, "{rate}, {nic}: {host}");
            assert!(
                ahead["forwarded_packets"].as_u64().unwrap_or(0) > 10_000,
                "{host}: {}",
                ahead["forwarded_packets"]
            );
            eprintln!("{rate}, {nic:?}, {host:?}: events {ahead_events} ahead, {step_events} in step");
            assert!(ahead_events < step_events, "{rate}, {nic}: {host}: {ahead_events} vs {step_events}");
        }
    }
}
