//! The discrete-event simulator of one node.
//!
//! Components, in the order a packet meets them: [`traffic`] (sources and the ingress
//! link), [`nic`] (rings, vectors, [`moderation`]), [`io`] (the host's I/O mode: NAPI or a
//! plain server), [`stats`] (measurement). Time is an integer number of picoseconds
//! ([`time`]); events run in (time, insertion) order ([`queue`]); each component draws from
//! its own seeded random stream ([`rng`]). Same scenario + same seed = identical results.

pub mod io;
pub mod moderation;
pub mod nic;
pub mod queue;
pub mod rng;
pub mod stats;
pub mod time;
pub mod traffic;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost::Group;
use crate::error::{Error, Result};
use crate::model;
use crate::scenario::{IoModeKind, ItrMode, Node, TxVector};

use io::napi::{Napi, NapiParams};
use io::server::Server;
use io::{Costs, Ctx, IoMode};
use moderation::{Fixed, IxgbeDynamic, Moderation, NoThrottle};
use nic::{Nic, RxRing, TxRing, Vector};
use queue::{EventKind, EventQueue};
use rng::Stream;
use stats::{Stats, ACTIVITY_NAMES};
use time::{Ps, PS_PER_S};
use traffic::Traffic;

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub min: f64,
    pub mean: f64,
}

/// Rx packets per poll.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PerPoll {
    pub mean: f64,
    /// Count of polls that cleaned 0, 1, ..., weight rx packets.
    pub histogram: Vec<u64>,
}

/// What one run measured (the `pktsim run --json` contract).
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub name: String,
    pub seed: u64,
    pub offered_pps: f64,
    pub throughput_pps: f64,
    pub throughput_bps: f64,
    pub loss_ratio: f64,
    pub latency_ns: LatencySummary,
    pub irq_per_s: f64,
    pub irqs_per_packet: f64,
    pub polls_per_packet: f64,
    pub softirqs_per_packet: f64,
    pub packets_per_poll: PerPoll,
    pub time_squeeze: u64,
    pub ksoftirqd_wakeups: u64,
    pub cpu_utilization: f64,
    pub cpu_by_activity: BTreeMap<String, f64>,
    pub drops: BTreeMap<String, u64>,
    pub offered_packets: u64,
    pub forwarded_packets: u64,
    /// Frames the simulator generated (warm-up included).
    pub sim_packets: u64,
    pub events: u64,
    pub sim_time_s: f64,
    pub wall_s: f64,
    pub t_proc_ns: f64,
    pub t_clean_ns: f64,
    pub t_irq_ns: f64,
    pub io: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<stats::Bucket>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series_interval_s: Option<f64>,
}

/// Why a run stopped early.
pub const INTERRUPTED: &str = "interrupted";

fn moderation_for(node: &Node) -> Box<dyn Moderation> {
    let itr = &node.scenario.nic.itr;
    match itr.mode {
        ItrMode::Off => Box::new(NoThrottle),
        ItrMode::Static => Box::new(Fixed::from_usecs((itr.interval.map_or(0, |d| d.ps) / 1_000_000) as u32)),
        ItrMode::Dynamic => Box::new(IxgbeDynamic::new(itr.bulk_rate)),
    }
}

/// Per-packet costs for the simulator: the host's times where given, else the cost profile
/// (with the FIB model applied) at the CPU frequency — the same numbers the analytical
/// model uses. t_clean takes C_free (skbs are freed when tx completions are cleaned) and
/// t_proc the rest.
fn costs_for(node: &Node) -> Costs {
    let s = &node.scenario;
    let f = s.cpu.frequency.hz;
    let (groups, _) = model::group_cycles(node);
    let mean_size = node.mean_frame_bytes();
    let per_byte_free = node.cost.per_byte.get(Group::Free);
    let per_byte_total: f64 = node.cost.per_byte.0.iter().sum();
    let cyc_ps = |c: f64| (c / f * 1e12).round() as Ps;
    let t_clean = match s.host.t_clean {
        Some(d) => d.ps,
        None if s.host.t_proc.is_some() => 0,
        None => cyc_ps(groups.get(Group::Free)),
    };
    let (fixed, per_byte_fs) = match s.host.t_proc {
        // Explicit times still see the FIB model: a bigger FIB adds its routing cycles.
        Some(d) => (d.ps + cyc_ps((groups.get(Group::Routing) - node.cost.fixed.get(Group::Routing)).max(0.0)), 0),
        None => {
            // group_cycles is at the mean size; take the per-byte part out again.
            let per_byte = per_byte_total - per_byte_free;
            let fixed_cycles = groups.total() - groups.get(Group::Free) - per_byte * mean_size;
            (cyc_ps(fixed_cycles), (per_byte / f * 1e15).round() as u64)
        }
    };
    Costs {
        t_irq: s.host.t_irq.ps,
        t_poll: s.host.t_poll.ps,
        t_clean,
        proc_fixed_ps: fixed,
        proc_per_byte_fs: per_byte_fs,
        dist: s.host.service,
        rng: Stream::new(s.seed, "service"),
    }
}

/// Simulate a node. `cancel` is asked every simulated millisecond whether to stop (for
/// Ctrl-C); a cancelled run returns `Error::Invalid("interrupted")`.
pub fn run(node: &Node, cancel: &mut dyn FnMut() -> bool) -> Result<SimResult> {
    let wall = std::time::Instant::now();
    let s = &node.scenario;
    let m = &s.measure;
    let warm = m.warmup.ps;
    let stop = warm + m.duration.ps;
    let overhead = s.link.overhead.bytes;
    let offered_pps = node.offered_pps();

    let traffic = Traffic::new(&node.sources, offered_pps, s.link.rate.bps, overhead, s.nic.dma_delay.ps, s.seed);
    let mut costs = costs_for(node);
    let weight = s.host.weight;

    // Topology of one core: ingress rx ring 0 -> tx queue 0 on the egress port.
    let shared = s.nic.tx_vector == TxVector::Shared;
    let mut vectors = vec![Vector {
        rx: Some(0),
        tx: if shared { Some(0) } else { None },
        core: 0,
        masked: false,
        armed: false,
        last_fire: None,
        counter_zero: 0,
        gen: 0,
        moderation: moderation_for(node),
    }];
    if !shared {
        vectors.push(Vector { rx: None, tx: Some(0), core: 0, masked: false, armed: false, last_fire: None, counter_zero: 0, gen: 0, moderation: moderation_for(node) });
    }
    let tx_vec = if shared { 0 } else { 1 };
    let rx = vec![RxRing::new(s.nic.rx_ring, 0)];
    let tx = vec![TxRing::new(s.nic.tx_ring, s.nic.qdisc_len, tx_vec)];
    let mut nic = Nic::new(rx, tx, traffic, s.link.rate.bps, overhead);

    let mut stats = Stats::new(warm, m.duration.ps, m.t_off.ps, m.latency_from, m.latency_to, weight as usize, m.interval.map(|i| i.ps));
    let mut mode: Box<dyn IoMode> = match s.host.io {
        IoModeKind::Napi => Box::new(Napi::new(
            vectors,
            1,
            vec![0],
            NapiParams {
                weight,
                budget: s.host.budget,
                budget_time_ps: s.host.budget_time.ps,
                hz: s.host.hz,
                tx_work_limit: s.nic.tx_work_limit,
                refill_batch: s.nic.refill_batch,
                refill_at_poll_end: s.nic.refill_at_poll_end,
                net_rx_action: s.host.net_rx_action,
            },
        )),
        IoModeKind::Server => Box::new(Server::new(&[(0, 0)])),
    };

    let mut queue = EventQueue::new();
    queue.schedule(stop, EventKind::End);
    const TICK: Ps = 1_000_000_000; // 1 ms
    queue.schedule(TICK, EventKind::Tick);
    let mut arrival_at: Option<Ps> = None;

    {
        let mut ctx = Ctx { now: 0, queue: &mut queue, nic: &mut nic, stats: &mut stats, costs: &mut costs };
        mode.start(&mut ctx);
        after_handler(&mut *mode, &mut ctx, &mut arrival_at);
    }

    while let Some((t, kind)) = queue.pop() {
        let mut ctx = Ctx { now: t, queue: &mut queue, nic: &mut nic, stats: &mut stats, costs: &mut costs };
        match kind {
            EventKind::End => break,
            EventKind::Tick => {
                if cancel() {
                    return Err(Error::Invalid(INTERRUPTED.into()));
                }
                ctx.queue.schedule(t + TICK, EventKind::Tick);
            }
            EventKind::Arrival => {
                if arrival_at == Some(t) {
                    arrival_at = None;
                }
                ctx.nic.advance_to(t, ctx.stats);
            }
            EventKind::Mode { tag, index, gen } => mode.on_event(tag, index, gen, &mut ctx),
        }
        after_handler(&mut *mode, &mut ctx, &mut arrival_at);
    }

    let duration_s = m.duration.as_secs();
    let st = &stats;
    let fwd = st.forwarded.max(1) as f64;
    let pct = |q: f64| if st.forwarded == 0 { 0.0 } else { st.latency.value_at_quantile(q) as f64 };
    let busy_total: u64 = st.busy_ps.iter().sum();
    let cpu_by_activity: BTreeMap<String, f64> = ACTIVITY_NAMES
        .iter()
        .zip(st.busy_ps.iter())
        .map(|(n, b)| (n.to_string(), *b as f64 / m.duration.ps as f64))
        .chain(std::iter::once(("idle".to_string(), 1.0 - busy_total as f64 / m.duration.ps as f64)))
        .collect();
    let polls_with_rx: u64 = st.rx_per_poll.iter().sum();
    let per_poll_mean = if polls_with_rx == 0 {
        0.0
    } else {
        st.rx_per_poll.iter().enumerate().map(|(i, n)| i as f64 * *n as f64).sum::<f64>() / polls_with_rx as f64
    };
    let mut drops = BTreeMap::new();
    drops.insert("rx_ring_full".to_string(), st.drop_rx_ring);
    drops.insert("qdisc_full".to_string(), st.drop_qdisc);
    let dropped = st.drop_rx_ring + st.drop_qdisc;
    Ok(SimResult {
        name: s.name.clone().unwrap_or_else(|| node.origin.clone()),
        seed: s.seed,
        offered_pps: st.offered as f64 / duration_s,
        throughput_pps: st.forwarded as f64 / duration_s,
        throughput_bps: st.forwarded_bytes as f64 * 8.0 / duration_s,
        loss_ratio: if st.offered == 0 { 0.0 } else { dropped as f64 / st.offered as f64 },
        latency_ns: LatencySummary {
            p25: pct(0.25),
            p50: pct(0.50),
            p75: pct(0.75),
            p90: pct(0.90),
            p99: pct(0.99),
            p999: pct(0.999),
            max: if st.forwarded == 0 { 0.0 } else { st.latency.max() as f64 },
            min: if st.forwarded == 0 { 0.0 } else { st.latency.min() as f64 },
            mean: st.latency_mean_ns(),
        },
        irq_per_s: st.irqs as f64 / duration_s,
        irqs_per_packet: st.irqs as f64 / fwd,
        polls_per_packet: st.polls as f64 / fwd,
        softirqs_per_packet: st.softirqs as f64 / fwd,
        packets_per_poll: PerPoll { mean: per_poll_mean, histogram: st.rx_per_poll.clone() },
        time_squeeze: st.time_squeeze,
        ksoftirqd_wakeups: st.ksoftirqd_wakeups,
        cpu_utilization: busy_total as f64 / m.duration.ps as f64,
        cpu_by_activity,
        drops,
        offered_packets: st.offered,
        forwarded_packets: st.forwarded,
        sim_packets: nic.generated(),
        events: queue.scheduled,
        sim_time_s: stop as f64 / PS_PER_S as f64,
        wall_s: wall.elapsed().as_secs_f64(),
        t_proc_ns: costs.t_proc_mean(node.mean_frame_bytes().round() as u64) as f64 / 1e3,
        t_clean_ns: costs.t_clean as f64 / 1e3,
        t_irq_ns: costs.t_irq as f64 / 1e3,
        io: mode.report(),
        series: m.interval.map(|_| stats.series.clone()),
        series_interval_s: m.interval.map(|i| i.as_secs()),
    })
}

/// Deliver wake-ups of rings that received frames, and keep an arrival event pending while
/// any ring wants to hear of the next frame.
fn after_handler(mode: &mut dyn IoMode, ctx: &mut Ctx, arrival_at: &mut Option<Ps>) {
    while !ctx.nic.woken.is_empty() {
        let woken = std::mem::take(&mut ctx.nic.woken);
        for (ring, t) in woken {
            mode.on_rx_wake(ring, t, ctx);
        }
    }
    if ctx.nic.any_wake() {
        let next = ctx.nic.next_arrival();
        if arrival_at.is_none_or(|a| a > next) {
            *arrival_at = Some(next);
            ctx.queue.schedule(next, EventKind::Arrival);
        }
    }
}
