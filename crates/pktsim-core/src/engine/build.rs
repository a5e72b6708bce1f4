//! Assembly: a validated scenario becomes a [`SimNode`] — its topology, costs, ingress,
//! NIC (rings, vectors with their moderation policies, classifier), I/O mode and
//! statistics. No simulation happens here; `mod.rs` runs the node and `report.rs` reads
//! its figures.

use crate::scenario::{BatchCalls, ResolvedScenario, TrafficKind, TxVector};

use super::costs::Costs;
use super::ingress::Ingress;
use super::io;
use super::moderation;
use super::nic::classify::Classifier;
use super::nic::rx::RxRing;
use super::nic::tx::TxRing;
use super::nic::vector::Vector;
use super::nic::{Nic, NicParts};
use super::queue::EventQueue;
use super::stats::{self, Stats, StatsConfig};
use super::time::{Instant, Span};
use super::trace::TraceReplay;
use super::traffic::Traffic;
use super::{ReportInfo, SimNode};
use crate::topology::Topology;

/// The node's rings, queues and cores, and the classifier that places frames on them.
pub fn layout(sc: &ResolvedScenario) -> (Topology, Classifier) {
    let (s, nic) = (&sc.scenario, &sc.scenario.nic);
    let cores = s.cpu.cores as usize;
    let topo = Topology::new(
        cores,
        nic.queues.len(),
        nic.tx_queues.map_or(cores, |q| q as usize),
        nic.tx_vector == TxVector::Shared,
    );
    let default_queue = nic
        .default_queue
        .as_ref()
        .and_then(|d| nic.queues.iter().position(|q| q == d))
        .unwrap_or(topo.queues_per_core() - 1);
    let mut classifier = Classifier::new(topo, &nic.queues, default_queue, &nic.filters, &sc.sources);
    if let Some(t) = &sc.trace {
        classifier.use_trace_flows(&t.flows);
    }
    (topo, classifier)
}

impl SimNode {
    /// The node a scenario describes, fed by the scenario's traffic (its trace, if it
    /// replays one).
    pub fn build(sc: &ResolvedScenario) -> SimNode {
        let s = &sc.scenario;
        let (rate_pps, link_bps, overhead) = (sc.offered_pps(), s.link.rate.bps, s.link.overhead.bytes);
        let ingress: Box<dyn Ingress> = match (&s.traffic.kind, &sc.trace) {
            (TrafficKind::Pcap(p), Some(t)) => {
                Box::new(TraceReplay::new(t.clone(), rate_pps, p.looped, link_bps, overhead))
            }
            (TrafficKind::Synthetic(syn), _) => Box::new(
                Traffic::new(&sc.sources, rate_pps, link_bps, overhead, s.seed)
                    .with_schedule(&syn.schedule_points())
                    .with_stalls(&syn.stalls, s.seed),
            ),
            _ => Box::new(Traffic::new(&sc.sources, rate_pps, link_bps, overhead, s.seed)),
        };
        Self::with_ingress(sc, ingress)
    }

    /// The node a scenario describes, fed by `ingress` (the scenario's traffic keys then
    /// only name the classes and flows the classifier and statistics expect).
    pub fn with_ingress(sc: &ResolvedScenario, ingress: Box<dyn Ingress>) -> SimNode {
        let s = &sc.scenario;
        let (m, nic_spec) = (&s.measure, &s.nic);
        let costs = Costs::of(sc);
        let cores = s.cpu.cores as usize;
        let (topo, classifier) = layout(sc);
        let mode = io::build(sc, &topo);
        let kind = mode.rx_ring_kind();
        let xdp_consumes = io::xdp::native_consumes(sc);
        let nic = Nic::new(NicParts {
            rx: (0..topo.rings()).map(|r| RxRing::new(nic_spec.rx_ring, topo.vector_of_ring(r), kind)).collect(),
            tx: (0..topo.tx_queues())
                .map(|q| TxRing::new(nic_spec.tx_ring, nic_spec.qdisc_len, topo.vector_of_tx(q), topo.sharers(q)))
                .collect(),
            vectors: (0..topo.vectors())
                .map(|v| {
                    Vector::new(
                        topo.vector(v),
                        moderation::build(&nic_spec.itr, topo.vector(v).rx.is_some(), xdp_consumes),
                    )
                })
                .collect(),
            classifier,
            ingress,
            dma: nic_spec.dma_delay.into(),
            irq_delay: nic_spec.irq_delay.into(),
            egress_bps: s.link.rate.bps,
            overhead_bytes: s.link.overhead.bytes,
        });

        let (class_names, class_of_source) = classes(sc);
        let t_plus = m.t_plus.as_ref().map(|tp| stats::TPlus {
            dma4: Span::from(tp.t_dma) * 4,
            batch2: 2 * tp.nic_batch as u64,
            proc_fixed: costs.proc_fixed,
            proc_per_byte_fs: costs.proc_per_byte_fs,
        });
        let warm = Instant::ZERO + m.warmup.into();
        let stats = Stats::new(StatsConfig {
            warm,
            duration: m.duration.into(),
            t_off: m.t_off.into(),
            t_plus,
            from: m.latency_from,
            to: m.latency_to,
            // The most one poll takes: the weight, or a busy poll's budget (batched I/O's
            // calls, an AF_XDP thread's batch, a socket's SO_BUSY_POLL_BUDGET).
            max_per_poll: (s.host.io.poll().weight as usize)
                .max(s.host.io.batch().map_or(BatchCalls::default().size, |b| b.size) as usize)
                .max(s.host.io.af_xdp().map_or(0, |a| a.batch) as usize)
                .max(if s.app.is_some() { s.socket.busy_poll_budget as usize } else { 0 }),
            interval: m.interval.map(Into::into),
            batches: m.batches as usize,
            classes: class_names.len(),
            class_of_source,
            rings: topo.rings(),
            // An application with cores of its own adds one per NAPI core.
            cores: cores
                * if s.app.as_ref().is_some_and(|a| a.core == crate::scenario::AppCore::Other) { 2 } else { 1 },
        });
        let info = ReportInfo {
            name: s.name.clone().unwrap_or_else(|| sc.origin.clone()),
            seed: s.seed,
            duration: m.duration.into(),
            interval: m.interval.map(Into::into),
            queue_names: nic_spec.queues.clone(),
            class_names,
            mean_frame_bytes: sc.mean_frame_bytes(),
            frequency_hz: s.cpu.frequency.hz,
            notes: notes(sc),
        };
        let interference =
            super::interference::Interference::new(&sc.scenario.cpu.interference, topo.cores(), sc.scenario.seed);
        // A core that runs out of work sleeps, unless the mode polls (its cores spin).
        let sleeps = s.host.io.kind().sleeps();
        let stop = warm + m.duration.into();
        let idle = super::idle::Idle::new(
            &s.cpu.idle,
            s.cpu.idle.resolved(&s.cpu.caches, s.cpu.frequency),
            sleeps,
            warm,
            stop,
        );
        // Cores with their own rings, tx queue and vectors run ahead of each other.
        let run_ahead =
            (cores > 1 && topo.tx_queues() >= cores && mode.independent_cores()).then_some(super::RUN_AHEAD);
        SimNode {
            queue: EventQueue::new(),
            nic,
            mode,
            stats,
            costs,
            topo,
            stop,
            cancel: Default::default(),
            info,
            interference,
            idle,
            run_ahead,
        }
    }
}

/// The traffic classes, in the order the sources first name them, and each source's class.
pub fn classes(sc: &ResolvedScenario) -> (Vec<String>, Vec<usize>) {
    let mut names: Vec<String> = Vec::new();
    let of_source = sc
        .sources
        .iter()
        .map(|src| match names.iter().position(|c| *c == src.class) {
            Some(i) => i,
            None => {
                names.push(src.class.clone());
                names.len() - 1
            }
        })
        .collect();
    (names, of_source)
}

/// What a scenario's figures assume that a reader might not expect.
fn notes(sc: &ResolvedScenario) -> Vec<String> {
    let h = &sc.scenario.host;
    let mut out = sc.notes.clone();
    if h.io.irq().is_some_and(|i| i.t_irq.ps == 0) {
        out.push("host.t_irq is 0: hard interrupts cost no CPU time (set host.t_irq to charge them)".to_string());
    }
    out
}
