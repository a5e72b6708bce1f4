//! The discrete-event simulator of one node.
//!
//! Components, in the order a packet meets them: [`traffic`] (sources and the ingress
//! link), [`nic`] (rings, vectors, [`moderation`]), [`io`] (the host's I/O mode: NAPI or a
//! plain server), [`stats`] (measurement). Time is an integer number of picoseconds
//! ([`time`]); events run in (time, insertion) order ([`queue`]); each component draws from
//! its own seeded random stream ([`rng`]). Same scenario + same seed = identical results.

pub mod io;
pub mod classify;
pub mod moderation;
pub mod nic;
pub mod queue;
pub mod rng;
pub mod stats;
pub mod strategy;
pub mod time;
pub mod traffic;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost::Group;
use crate::error::{Error, Result};
use crate::model;
use crate::scenario::{IoModeKind, ItrMode, ResolvedScenario, TxVector};

use io::batched::{Batched, CallCosts, Wait};
use io::napi::{Napi, NapiParams};
use io::server::Server;
use io::threaded::{ThreadParams, ThreadedNapi};
use classify::Classifier;
use io::{Costs, Ctx, IoMode};
use moderation::{Fixed, IxgbeDynamic, Moderation, NoThrottle};
use nic::{Nic, RxRing, TxRing, Vector};
use queue::{EventKind, EventQueue};
use rng::Stream;
use stats::{GroupSummary, Stats, StatsConfig, ACTIVITY_NAMES};
use time::{Ps, PS_PER_S};
use traffic::Traffic;

pub use stats::LatencySummary;

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
    /// CPU busy with packets (all but spinning on empty rings), 0..1.
    pub cpu_useful: f64,
    pub cpu_by_activity: BTreeMap<String, f64>,
    /// Busy polls that found nothing.
    pub empty_polls: u64,
    pub drops: BTreeMap<String, u64>,
    pub offered_packets: u64,
    pub forwarded_packets: u64,
    /// 95% confidence half-width of latency_ns.mean (batch means).
    pub latency_mean_ci95_ns: Option<f64>,
    /// The fields above for each traffic class.
    pub per_class: BTreeMap<String, GroupSummary>,
    /// The fields above for each rx ring.
    pub per_ring: Vec<RingSummary>,
    /// Utilisation of each core (0..1).
    pub cpu_per_core: Vec<f64>,
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

/// One rx ring's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RingSummary {
    pub ring: usize,
    pub core: usize,
    pub queue: String,
    #[serde(flatten)]
    pub summary: GroupSummary,
}

/// Why a run stopped early.
pub const INTERRUPTED: &str = "interrupted";

fn moderation_for(node: &ResolvedScenario) -> Box<dyn Moderation> {
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
fn costs_for(node: &ResolvedScenario) -> Costs {
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
        // x = a S + b + c (001): t_proc = b + c, t_proc_per_byte = a.
        Some(d) => (
            d.ps + cyc_ps((groups.get(Group::Routing) - node.cost.fixed.get(Group::Routing)).max(0.0)),
            s.host.t_proc_per_byte.map_or(0, |a| a.fs_per_byte),
        ),
        None => {
            // group_cycles is at the mean size; take the per-byte part out again.
            let per_byte = per_byte_total - per_byte_free;
            let fixed_cycles = groups.total() - groups.get(Group::Free) - per_byte * mean_size;
            (cyc_ps(fixed_cycles), (per_byte / f * 1e15).round() as u64)
        }
    };
    Costs {
        t_irq: s.host.t_irq.ps,
        tx_lock: s.host.tx_lock.ps,
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
pub fn run(node: &ResolvedScenario, cancel: &mut dyn FnMut() -> bool) -> Result<SimResult> {
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

    // Topology: k cores, each with one rx ring per queue name (highest priority first);
    // ring r = core * queues + queue. Core c transmits on tx queue c mod tx_queues.
    let k = s.cpu.cores as usize;
    let qpc = s.nic.queues.len();
    let n_rings = k * qpc;
    let default_queue = s.nic.default_queue.as_ref().and_then(|d| s.nic.queues.iter().position(|q| q == d)).unwrap_or(qpc - 1);
    let classifier = Classifier::new(k, &s.nic.queues, default_queue, &s.nic.filters, &node.sources);
    let txq = s.nic.tx_queues.map_or(k, |q| q as usize);
    let tx_of_core = |c: usize| c % txq;
    let route: Vec<usize> = (0..n_rings).map(|r| tx_of_core(r / qpc)).collect();

    let vector = |rx: Option<usize>, tx: Option<usize>, core: usize| Vector {
        rx,
        tx,
        core,
        masked: false,
        armed: false,
        last_fire: None,
        counter_zero: 0,
        gen: 0,
        moderation: moderation_for(node),
    };
    let mut vectors: Vec<Vector> = (0..n_rings).map(|r| vector(Some(r), None, r / qpc)).collect();
    let mut tx_vec = vec![0; txq];
    for (q, tv) in tx_vec.iter_mut().enumerate() {
        let core = q % k;
        *tv = match s.nic.tx_vector {
            TxVector::Shared => {
                let v = core * qpc;
                vectors[v].tx = Some(q);
                v
            }
            TxVector::Separate => {
                vectors.push(vector(None, Some(q), core));
                vectors.len() - 1
            }
        };
    }
    let rx: Vec<RxRing> = (0..n_rings).map(|r| RxRing::new(s.nic.rx_ring, r)).collect();
    let mut tx: Vec<TxRing> = (0..txq).map(|q| TxRing::new(s.nic.tx_ring, s.nic.qdisc_len, tx_vec[q])).collect();
    for (q, ring) in tx.iter_mut().enumerate() {
        ring.sharers = (0..k).filter(|&c| tx_of_core(c) == q).count() as u32;
    }
    let mut nic = Nic::new(rx, tx, classifier, traffic, s.link.rate.bps, overhead);

    let mut class_names: Vec<String> = Vec::new();
    let class_of_source: Vec<usize> = node
        .sources
        .iter()
        .map(|src| match class_names.iter().position(|c| *c == src.class) {
            Some(i) => i,
            None => {
                class_names.push(src.class.clone());
                class_names.len() - 1
            }
        })
        .collect();
    let t_plus = m.t_plus.as_ref().map(|tp| stats::TPlus {
        dma4_ps: 4 * tp.t_dma.ps,
        batch2: 2 * tp.nic_batch as u64,
        proc_fixed_ps: costs.proc_fixed_ps,
        proc_per_byte_fs: costs.proc_per_byte_fs,
    });
    let mut stats = Stats::new(StatsConfig {
        warm,
        duration: m.duration.ps,
        t_off_ps: m.t_off.ps,
        t_plus,
        from: m.latency_from,
        to: m.latency_to,
        max_per_poll: (weight as usize).max(s.host.batch.size as usize),
        interval_ps: m.interval.map(|i| i.ps),
        batches: m.batches as usize,
        classes: class_names.len(),
        class_of_source,
        rings: n_rings,
        cores: k,
    });
    // Each core's rings (priority order), tx queue and strategy, for the polling modes.
    let core_rings = || -> Vec<(Vec<usize>, usize, Box<dyn strategy::Strategy>)> {
        (0..k)
            .map(|c| {
                let spec = s.host.core_strategies.get(c).unwrap_or(&s.host.strategy);
                ((c * qpc..(c + 1) * qpc).collect(), tx_of_core(c), strategy::build(spec, qpc))
            })
            .collect()
    };
    let mut mode: Box<dyn IoMode> = match s.host.io {
        IoModeKind::Napi => Box::new(Napi::new(
            vectors,
            k,
            route,
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
        IoModeKind::BusyPoll | IoModeKind::BatchedSyscall => {
            let b = &s.host.batch;
            let wait = match s.host.io {
                IoModeKind::BusyPoll => Wait::Spin { t_empty: if b.t_empty.ps > 0 { b.t_empty.ps } else { b.t_call.ps } },
                _ => Wait::Sleep { t_irq: s.host.t_irq.ps, t_wakeup: b.t_wakeup.ps },
            };
            Box::new(Batched::new(
                core_rings(),
                n_rings,
                wait,
                CallCosts { batch: b.size as usize, t_call: b.t_call.ps, t_packet: b.t_packet.ps, t_byte_fs: b.t_byte.map_or(0, |x| x.fs_per_byte) },
            ))
        }
        IoModeKind::Server => Box::new(Server::new(
            core_rings(),
            n_rings,
        )),
        IoModeKind::ThreadedNapi => Box::new(ThreadedNapi::new(
            (0..k).map(|c| ((c * qpc..(c + 1) * qpc).collect(), tx_of_core(c))).collect(),
            n_rings,
            ThreadParams { weight, wake_latency_ps: s.host.thread.wake_latency.ps, t_wakeup_ps: s.host.thread.t_wakeup.ps },
        )),
    };

    let mut queue = EventQueue::new();
    queue.schedule(stop, EventKind::End);
    const TICK: Ps = 1_000_000_000; // 1 ms
    queue.schedule(TICK, EventKind::Tick);

    {
        let mut ctx = Ctx { now: 0, queue: &mut queue, nic: &mut nic, stats: &mut stats, costs: &mut costs };
        mode.start(&mut ctx);
        after_handler(&mut *mode, &mut ctx);
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
            EventKind::Arrival => ctx.nic.on_arrival_event(t, ctx.queue, ctx.stats),
            EventKind::Mode { tag, index, gen } => mode.on_event(tag, index, gen, &mut ctx),
        }
        after_handler(&mut *mode, &mut ctx);
    }

    let duration_s = m.duration.as_secs();
    let st = &stats;
    let all = st.all.summary(duration_s);
    let fwd = st.all.forwarded.max(1) as f64;
    let window = m.duration.ps as f64;
    let busy_total: u64 = st.busy_ps.iter().sum();
    let cpu_by_activity: BTreeMap<String, f64> = ACTIVITY_NAMES
        .iter()
        .zip(st.busy_ps.iter())
        .map(|(n, b)| (n.to_string(), *b as f64 / (window * k as f64)))
        .chain(std::iter::once(("idle".to_string(), 1.0 - busy_total as f64 / (window * k as f64))))
        .collect();
    let polls_with_rx: u64 = st.rx_per_poll.iter().sum();
    let per_poll_mean = if polls_with_rx == 0 {
        0.0
    } else {
        st.rx_per_poll.iter().enumerate().map(|(i, n)| i as f64 * *n as f64).sum::<f64>() / polls_with_rx as f64
    };
    let per_class: BTreeMap<String, GroupSummary> = if st.classes.is_empty() {
        class_names.iter().map(|c| (c.clone(), all.clone())).collect()
    } else {
        class_names.iter().cloned().zip(st.classes.iter().map(|g| g.summary(duration_s))).collect()
    };
    let per_ring: Vec<RingSummary> = (0..n_rings)
        .map(|r| RingSummary {
            ring: r,
            core: r / qpc,
            queue: s.nic.queues[r % qpc].clone(),
            summary: st.rings.get(r).map_or_else(|| all.clone(), |g| g.summary(duration_s)),
        })
        .collect();
    Ok(SimResult {
        name: s.name.clone().unwrap_or_else(|| node.origin.clone()),
        seed: s.seed,
        offered_pps: all.offered_pps,
        throughput_pps: all.throughput_pps,
        throughput_bps: all.throughput_bps,
        loss_ratio: all.loss_ratio,
        latency_ns: all.latency_ns.clone(),
        irq_per_s: st.irqs as f64 / duration_s,
        irqs_per_packet: st.irqs as f64 / fwd,
        polls_per_packet: st.polls as f64 / fwd,
        softirqs_per_packet: st.softirqs as f64 / fwd,
        packets_per_poll: PerPoll { mean: per_poll_mean, histogram: st.rx_per_poll.clone() },
        time_squeeze: st.time_squeeze,
        ksoftirqd_wakeups: st.ksoftirqd_wakeups,
        cpu_utilization: busy_total as f64 / (window * k as f64),
        cpu_useful: (busy_total - st.busy_ps[stats::Activity::Spin as usize]) as f64 / (window * k as f64),
        empty_polls: st.empty_polls,
        cpu_by_activity,
        drops: all.drops.clone(),
        offered_packets: all.offered_packets,
        forwarded_packets: all.forwarded_packets,
        latency_mean_ci95_ns: all.latency_mean_ci95_ns,
        per_class,
        per_ring,
        cpu_per_core: st.busy_core_ps.iter().map(|b| *b as f64 / window).collect(),
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

/// Deliver wake-ups of rings that received frames (arming a ring keeps the arrival event
/// in the queue; see [`Nic::arm`]).
fn after_handler(mode: &mut dyn IoMode, ctx: &mut Ctx) {
    while !ctx.nic.woken.is_empty() {
        let woken = std::mem::take(&mut ctx.nic.woken);
        for (ring, t) in woken {
            mode.on_rx_wake(ring, t, ctx);
        }
    }
}
