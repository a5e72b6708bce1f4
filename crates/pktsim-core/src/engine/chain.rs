//! A chain of nodes: each node's egress is the next node's ingress.
//!
//! ```text
//!   traffic --> node 0 --egress--> link 0 (rate, delay) --ingress--> node 1 --> ... --> collector
//!               thread 0           bounded channel                   thread 1          (end to end)
//! ```
//!
//! Every node runs on a thread of its own, as it would alone; node i hands the frames it
//! transmits (their last bit out, at the link's rate) to node i + 1 through a bounded
//! channel, in batches, in the order they left: node i + 1 takes them as its ingress
//! (arriving `delay` later), waiting for node i when it is ahead. A node's figures depend
//! only on its input, so a chain is as deterministic as a node, and memory stays bounded
//! (a few batches per link). Frames keep their origin time: the collector at the last
//! node's egress counts the frames whose last bit leaves the chain in the measurement
//! window, as a tester at the far end would, and their latency from the first node's
//! ingress.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::ingress::{Ingress, Packet};
use super::nic::{Egress, Wire};
use super::report::SimResult;
use super::stats::Group;
use super::time::{Instant, Span, WireTime};
use super::SimNode;
use crate::error::{Error, Result};
use crate::scenario::chain::ResolvedChain;

/// Frames per message between nodes.
const BATCH: usize = 1024;
/// Messages a link holds before the node feeding it waits.
const LINK_MESSAGES: usize = 64;

/// Where a frame was lost, by node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeLoss {
    pub node: usize,
    pub name: String,
    /// Frames the node dropped in the window (every cause).
    pub dropped_packets: u64,
    /// Those as a share of the frames offered to the chain.
    pub share_of_offered: f64,
}

/// A chain's figures: end to end (also at the top level, so a chain reads as a node in
/// sweeps, plots and tunes), where frames were lost, and each node's own.
#[derive(Debug, Clone, Serialize)]
pub struct ChainResult {
    #[serde(flatten)]
    pub top: SimResult,
    pub end_to_end: SimResult,
    pub loss_by_node: Vec<NodeLoss>,
    pub node_names: Vec<String>,
    pub nodes: Vec<SimResult>,
}

/// Node i's egress: frames leave, `delay` later they arrive at node i + 1.
struct LinkOut {
    tx: SyncSender<Vec<Packet>>,
    buf: Vec<Packet>,
    delay: Span,
}

impl Egress for LinkOut {
    fn depart(&mut self, p: &Packet, _t_tx: Instant, t_done: Instant) {
        let t = t_done + self.delay;
        self.buf.push(Packet { t_wire: t, t_ring: t, ring: 0, ..*p });
        if self.buf.len() >= BATCH {
            // The next node gone (stopped): nothing more to tell it.
            let _ = self.tx.send(std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH)));
        }
    }
}

impl Drop for LinkOut {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.buf));
        }
    }
}

/// Node i + 1's ingress: what node i transmitted, in order.
struct LinkIn {
    rx: Receiver<Vec<Packet>>,
    buf: Vec<Packet>,
    next: usize,
    delivered: u64,
}

impl Ingress for LinkIn {
    fn next_packet(&mut self) -> Option<Packet> {
        while self.next >= self.buf.len() {
            self.buf = self.rx.recv().ok()?;
            self.next = 0;
        }
        self.next += 1;
        self.delivered += 1;
        Some(self.buf[self.next - 1])
    }

    fn delivered(&self) -> u64 {
        self.delivered
    }
}

/// The end-to-end figures the collector gathers.
struct EndToEnd {
    all: Group,
    classes: Vec<Group>,
    class_of_source: Vec<usize>,
    warm: Instant,
    stop: Instant,
    batch_len: Span,
    batches: usize,
    /// Frames that left in the window but entered the chain before it.
    carried_in: u64,
}

/// The last node's egress: frames that leave the chain in the window, and their latency.
struct Collector {
    e2e: Option<EndToEnd>,
    out: Arc<Mutex<Option<EndToEnd>>>,
}

impl Egress for Collector {
    fn depart(&mut self, p: &Packet, _t_tx: Instant, t_done: Instant) {
        let Some(e) = self.e2e.as_mut() else { return };
        if t_done < e.warm || t_done >= e.stop {
            return;
        }
        let batch = (((t_done - e.warm).ps() / e.batch_len.ps().max(1)) as usize).min(e.batches - 1);
        let latency = t_done - p.t_origin;
        e.carried_in += (p.t_origin < e.warm) as u64;
        e.all.record(p.size, latency, batch);
        if let Some(&c) = e.class_of_source.get(p.source as usize) {
            e.classes[c].record(p.size, latency, batch);
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let (Some(mut e), Ok(mut out)) = (self.e2e.take(), self.out.lock()) {
            e.all.flush();
            e.classes.iter_mut().for_each(Group::flush);
            *out = Some(e);
        }
    }
}

/// Run a chain to the end of its window (plus the drain time); a cancelled run returns
/// `Error::Invalid("interrupted")`.
pub fn run(chain: &ResolvedChain, cancel: Arc<AtomicBool>) -> Result<ChainResult> {
    let wall = std::time::Instant::now();
    let n = chain.nodes.len();
    let m = &chain.nodes[0].scenario.measure;
    let warm = Instant::ZERO + m.warmup.into();
    let duration: Span = m.duration.into();
    let batches = (m.batches as usize).max(1);

    // The first node's classes, as its statistics count them.
    let (class_names, class_of_source) = super::build::classes(&chain.nodes[0]);
    let collected = Arc::new(Mutex::new(None));

    // The links' channels first: a node built with its ingress asks it for a frame at once,
    // so each node is built on its own thread, once the node before it can run.
    let mut ins: Vec<Option<Receiver<Vec<Packet>>>> = vec![None];
    let mut outs: Vec<Option<SyncSender<Vec<Packet>>>> = Vec::new();
    for _ in 1..n {
        let (tx, rx) = sync_channel(LINK_MESSAGES);
        outs.push(Some(tx));
        ins.push(Some(rx));
    }
    outs.push(None);
    let make_e2e = || EndToEnd {
        all: Group::new(batches),
        classes: (0..class_names.len()).map(|_| Group::new(batches)).collect(),
        class_of_source: class_of_source.clone(),
        warm,
        stop: warm + duration,
        batch_len: Span::from_ps((duration.ps() / batches as u64).max(1)),
        batches,
        carried_in: 0,
    };

    // One thread per node; a node that fails stops the others.
    let results: Vec<Result<SimResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chain
            .nodes
            .iter()
            .enumerate()
            .zip(ins.into_iter().zip(outs))
            .map(|((i, sc), (input, output))| {
                let cancel = cancel.clone();
                let collector = output.is_none().then(|| Collector { e2e: Some(make_e2e()), out: collected.clone() });
                let link = chain.links[i];
                scope.spawn(move || {
                    let t0 = std::time::Instant::now();
                    let mut node = match input {
                        None => SimNode::build(sc),
                        Some(rx) => {
                            SimNode::with_ingress(sc, Box::new(LinkIn { rx, buf: Vec::new(), next: 0, delivered: 0 }))
                        }
                    };
                    node.set_egress_rate(link.rate_bps, sc.scenario.link.overhead.bytes);
                    match (output, collector) {
                        (Some(tx), _) => node.connect_egress(Box::new(LinkOut {
                            tx,
                            buf: Vec::with_capacity(BATCH),
                            delay: Span::from_ps(link.delay_ps),
                        })),
                        (None, Some(c)) => node.connect_egress(Box::new(c)),
                        (None, None) => {}
                    }
                    node.cancel_on(cancel.clone());
                    let r = node.run().map(|()| node.report(t0.elapsed().as_secs_f64()));
                    if r.is_err() {
                        cancel.store(true, Ordering::Relaxed);
                    }
                    // Dropping the node closes its link: the next node sees the end of its input.
                    drop(node);
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Err(Error::Invalid("a node of the chain stopped unexpectedly".into())))
            })
            .collect()
    });
    let mut reports = Vec::with_capacity(n);
    for r in results {
        reports.push(r?);
    }
    let e2e = collected
        .lock()
        .ok()
        .and_then(|mut g| g.take())
        .ok_or_else(|| Error::Invalid("the chain's collector saw no end".into()))?;
    let end_to_end =
        end_to_end(chain, &reports, &e2e, &class_names, duration.as_secs_f64(), wall.elapsed().as_secs_f64());
    let offered = end_to_end.offered_packets.max(1) as f64;
    let loss_by_node = reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let dropped: u64 = r.drops.values().sum();
            NodeLoss {
                node: i,
                name: chain.node_names[i].clone(),
                dropped_packets: dropped,
                share_of_offered: dropped as f64 / offered,
            }
        })
        .collect();
    Ok(ChainResult {
        top: end_to_end.clone(),
        end_to_end,
        loss_by_node,
        node_names: chain.node_names.clone(),
        nodes: reports,
    })
}

/// The chain's figures in the shape of a node's: traffic and latency end to end, CPU and
/// events over every node's cores.
fn end_to_end(
    chain: &ResolvedChain,
    nodes: &[SimResult],
    e: &EndToEnd,
    class_names: &[String],
    duration_s: f64,
    wall_s: f64,
) -> SimResult {
    let first = &nodes[0];
    let mut all = e.all.summary(duration_s);
    let offered = first.offered_packets;
    all.offered_packets = offered;
    all.offered_pps = first.offered_pps;
    // Loss: the frames every node dropped in the window, of those offered to the chain (as a
    // node's loss is its drops; frames in flight at the window's edges are not lost).
    let mut drops: BTreeMap<String, u64> = BTreeMap::new();
    for r in nodes {
        for (k, v) in &r.drops {
            *drops.entry(k.clone()).or_default() += v;
        }
    }
    let dropped: u64 = drops.values().sum();
    all.loss_ratio = if offered == 0 { 0.0 } else { (dropped as f64 / offered as f64).min(1.0) };
    let cores: Vec<f64> = nodes.iter().map(|r| r.cpu_per_core.len().max(1) as f64).collect();
    let total_cores: f64 = cores.iter().sum();
    let weighted =
        |f: &dyn Fn(&SimResult) -> f64| nodes.iter().zip(&cores).map(|(r, k)| f(r) * k).sum::<f64>() / total_cores;
    let mut cpu_by_activity: BTreeMap<String, f64> = BTreeMap::new();
    for (r, k) in nodes.iter().zip(&cores) {
        for (a, v) in &r.cpu_by_activity {
            *cpu_by_activity.entry(a.clone()).or_default() += v * k / total_cores;
        }
    }
    let mut cpu_by_context: BTreeMap<String, f64> = BTreeMap::new();
    for (r, k) in nodes.iter().zip(&cores) {
        for (a, v) in &r.cpu_by_context {
            *cpu_by_context.entry(a.clone()).or_default() += v * k / total_cores;
        }
    }
    let throughput = all.throughput_pps.max(f64::MIN_POSITIVE);
    let irq_per_s: f64 = nodes.iter().map(|r| r.irq_per_s).sum();
    let per_class = class_names
        .iter()
        .zip(&e.classes)
        .map(|(name, g)| {
            let mut s = g.summary(duration_s);
            let c = first.per_class.get(name);
            s.offered_packets = c.map_or(0, |c| c.offered_packets);
            s.offered_pps = c.map_or(0.0, |c| c.offered_pps);
            let mut class_drops: BTreeMap<String, u64> = BTreeMap::new();
            for r in nodes {
                for (k, v) in r.per_class.get(name).map(|c| &c.drops).into_iter().flatten() {
                    *class_drops.entry(k.clone()).or_default() += v;
                }
            }
            let lost: u64 = class_drops.values().sum();
            s.loss_ratio = if s.offered_packets == 0 { 0.0 } else { (lost as f64 / s.offered_packets as f64).min(1.0) };
            s.drops = class_drops;
            (name.clone(), s)
        })
        .collect();
    let mut notes = vec![format!(
        "end to end: frames leaving the last node in the window, their latency from the first node's ingress, over {} nodes; loss is the frames the nodes dropped, of those offered to the first; CPU figures are over every node's cores",
        nodes.len()
    )];
    for (i, r) in nodes.iter().enumerate() {
        notes.extend(r.notes.iter().map(|t| format!("node {i} ({}): {t}", chain.node_names[i])));
    }
    SimResult {
        name: chain.name.clone(),
        seed: chain.seed,
        offered_pps: all.offered_pps,
        throughput_pps: all.throughput_pps,
        throughput_bps: all.throughput_bps,
        loss_ratio: all.loss_ratio,
        latency_ns: all.latency_ns.clone(),
        irq_per_s,
        irqs_per_packet: irq_per_s / throughput,
        polls_per_packet: nodes.iter().map(|r| r.polls_per_packet).sum(),
        softirqs_per_packet: nodes.iter().map(|r| r.softirqs_per_packet).sum(),
        packets_per_poll: first.packets_per_poll.clone(),
        time_squeeze: nodes.iter().map(|r| r.time_squeeze).sum(),
        ksoftirqd_wakeups: nodes.iter().map(|r| r.ksoftirqd_wakeups).sum(),
        cpu_utilization: weighted(&|r| r.cpu_utilization),
        cpu_useful: weighted(&|r| r.cpu_useful),
        cpu_by_activity,
        cpu_by_context,
        empty_polls: nodes.iter().map(|r| r.empty_polls).sum(),
        drops,
        offered_packets: offered,
        forwarded_packets: all.forwarded_packets,
        consumed_packets: all.consumed_packets,
        carried_in_packets: e.carried_in,
        latency_mean_ci95_ns: all.latency_mean_ci95_ns,
        per_class,
        per_ring: Vec::new(),
        cpu_per_core: nodes.iter().flat_map(|r| r.cpu_per_core.iter().copied()).collect(),
        sim_packets: first.sim_packets,
        events: nodes.iter().map(|r| r.events).sum(),
        sim_time_s: first.sim_time_s,
        wall_s,
        t_proc_ns: first.t_proc_ns,
        t_clean_ns: first.t_clean_ns,
        t_irq_ns: first.t_irq_ns,
        cpu_freq_hz: first.cpu_freq_hz,
        io: super::io::IoReport::Chain { chain: chain.nodes.len() },
        idle_states: None,
        series: None,
        series_interval_s: None,
        notes,
    }
}

impl SimNode {
    /// Transmit at `bps` (the link into the next node of a chain).
    pub fn set_egress_rate(&mut self, bps: f64, overhead_bytes: u64) {
        self.nic.wire(Wire::Link(WireTime::new(overhead_bytes, bps)));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::loader;
    use crate::scenario::chain;

    fn run_text(text: &str) -> ChainResult {
        let t = loader::parse_toml_table(text, "c.toml").unwrap();
        let c = chain::resolve(&t, "c.toml", Path::new(".")).unwrap();
        run(&c, Arc::new(AtomicBool::new(false))).unwrap()
    }

    fn node(t_proc: &str) -> String {
        format!("[[nodes]]\n[nodes.cpu]\nfrequency = \"3GHz\"\n[nodes.link]\nrate = \"10Gbit/s\"\n[nodes.host]\nio = \"server\"\nt_proc = \"{t_proc}\"\nservice = \"exponential\"\n[nodes.nic]\nrx_ring = 4096\ntx_ring = 4096\n")
    }

    /// Two M/M/1 stations in tandem (Poisson arrivals, exponential service, queues long
    /// enough never to fill): by Burke's theorem the first station's departures are
    /// Poisson, so each is M/M/1 and the mean time through both is 1/(mu - lambda) twice.
    #[test]
    fn two_mm1_stations_in_tandem_give_twice_the_mm1_sojourn() {
        // mu = 1 / 1 us, lambda = 0.5 Mpps: 2 us per station, 4 us end to end.
        let text = format!("seed = 3\n[traffic]\nrate = \"500kpps\"\npattern = \"poisson\"\n[measure]\nwarmup = \"20ms\"\nduration = \"400ms\"\nlatency_from = \"rx-ring\"\nlatency_to = \"tx-ring\"\n{}{}", node("1us"), node("1us"));
        let r = run_text(&text);
        let e = &r.end_to_end;
        assert!(e.loss_ratio < 1e-4, "{}", e.loss_ratio);
        // Mean sojourn per station in the node's own figures, and end to end: 2 and 4 us
        // plus what each node's egress wire adds (a 64 B frame at 10 Gbit/s: 67.2 ns), within 3% (400 ms: 200,000 frames; the batch-means CI says how close).
        let wire_ns = 84.0 * 8.0 / 10.0;
        let want_station = 2000.0;
        for n in &r.nodes {
            assert!((n.latency_ns.mean - 2000.0).abs() < 0.03 * 2000.0, "station mean {}", n.latency_ns.mean);
        }
        let want = 2.0 * (want_station + wire_ns);
        assert!(
            (e.latency_ns.mean - want).abs() < 0.03 * want,
            "end to end {} vs {want} (ci {:?})",
            e.latency_ns.mean,
            e.latency_mean_ci95_ns
        );
        assert_eq!(r.top.latency_ns.mean, e.latency_ns.mean);
    }

    #[test]
    fn a_slower_second_node_saturates_the_chain_at_its_capacity() {
        // 1 us then 2 us per frame: the chain carries 0.5 Mpps of the 0.8 offered (after a
        // warm-up that fills the second node's 4096-frame ring: 14 ms).
        let text = format!(
            "[traffic]\nrate = \"800kpps\"\n[measure]\nwarmup = \"30ms\"\nduration = \"50ms\"\n{}{}",
            node("1us").replace("exponential", "constant"),
            node("2us").replace("exponential", "constant")
        );
        let r = run_text(&text);
        let e = &r.end_to_end;
        assert!((e.throughput_pps - 500_000.0).abs() < 0.01 * 500_000.0, "{}", e.throughput_pps);
        assert!((e.loss_ratio - 0.375).abs() < 0.01, "{}", e.loss_ratio);
        assert!(
            r.loss_by_node[0].dropped_packets == 0 && r.loss_by_node[1].dropped_packets > 0,
            "{:?}",
            r.loss_by_node
        );
        assert!((r.loss_by_node[1].share_of_offered - 0.375).abs() < 0.01);
    }

    /// CBR at 300 kpps through two constant-service nodes (1 us, then 1 us; nothing
    /// queues): every frame takes the same time end to end. A 10 us delay on the link
    /// between them adds exactly 10,000 ns to each: the end-to-end minimum and mean both
    /// rise by 10,000 ns (2 x (1000 + 67.2 ns on the egress wire) = 2134.4 ns, then
    /// 12,134.4 ns), while each node's own figures (its frames from its own ingress) do not
    /// change, but for the frames the second node simulated by the end of the run (those
    /// still on the delayed link then never arrive).
    #[test]
    fn a_links_delay_adds_to_every_frames_end_to_end_latency_and_to_nothing_else() {
        let run_with = |delay: &str| {
            let first = node("1us").replace("exponential", "constant").replace(
                "[nodes.link]\nrate = \"10Gbit/s\"\n",
                &format!("[nodes.link]\nrate = \"10Gbit/s\"\ndelay = \"{delay}\"\n"),
            );
            assert!(first.contains("delay"));
            let text = format!(
                "seed = 4\n[traffic]\nrate = \"300kpps\"\n[measure]\nwarmup = \"1ms\"\nduration = \"10ms\"\n{first}{}",
                node("1us").replace("exponential", "constant")
            );
            run_text(&text)
        };
        let (a, b) = (run_with("0us"), run_with("10us"));
        let (ea, eb) = (&a.end_to_end.latency_ns, &b.end_to_end.latency_ns);
        assert_eq!(eb.min - ea.min, 10_000.0, "{ea:?} vs {eb:?}");
        assert_eq!(eb.mean - ea.mean, 10_000.0, "{ea:?} vs {eb:?}");
        assert_eq!(ea.min, ea.max, "every frame alike");
        let strip = |v: &SimResult| {
            let mut j = serde_json::to_value(v).unwrap();
            for k in ["wall_s", "name", "sim_packets"] {
                j.as_object_mut().map(|o| o.remove(k));
            }
            j
        };
        assert_eq!(ea.mean, 2134.4, "{ea:?}");
        for (na, nb) in a.nodes.iter().zip(&b.nodes) {
            assert_eq!(strip(na), strip(nb));
        }
    }

    /// End to end, frames that entered the chain before the window and leave in it are
    /// carried in, as a node counts them: overloaded, the first node's queue holds hundreds
    /// of frames when the window opens, and what leaves is at most what was offered plus
    /// what was carried in.
    #[test]
    fn the_chain_counts_the_frames_it_carries_into_the_window() {
        let text = format!(
            "seed = 3\n[traffic]\nrate = \"1.2Mpps\"\n[measure]\nduration = \"5ms\"\nwarmup = \"2ms\"\n{}{}",
            node("1us"),
            node("500ns")
        );
        let r = run_text(&text);
        let e = &r.end_to_end;
        assert!(e.carried_in_packets > 100, "{}", e.carried_in_packets);
        assert!(e.forwarded_packets <= e.offered_packets + e.carried_in_packets, "{e:?}");
    }

    /// A node in a chain gives the figures it gives alone.
    #[test]
    fn a_one_node_chain_gives_the_nodes_own_figures() {
        let scen = "seed = 5\n[cpu]\nfrequency = \"3GHz\"\n[link]\nrate = \"10Gbit/s\"\n[traffic]\nrate = \"300kpps\"\npattern = \"poisson\"\n[host]\nt_proc = \"1us\"\n[measure]\nduration = \"20ms\"\n";
        let sc: crate::Scenario = loader::deserialize_toml(scen, "s.toml").unwrap();
        let sc = sc.resolve("s.toml", Path::new(".")).unwrap();
        let alone = super::super::run(&sc, Arc::new(AtomicBool::new(false))).unwrap();
        let text = format!("seed = 5\n[traffic]\nrate = \"300kpps\"\npattern = \"poisson\"\n[measure]\nduration = \"20ms\"\n[[nodes]]\n{}", &scen.replace("seed = 5\n", "").replace("[traffic]\nrate = \"300kpps\"\npattern = \"poisson\"\n", "").replace("[measure]\nduration = \"20ms\"\n", "").replace("[", "[nodes."));
        let r = run_text(&text);
        let strip = |v: &SimResult| {
            let mut j = serde_json::to_value(v).unwrap();
            for k in ["wall_s", "name"] {
                j.as_object_mut().map(|o| o.remove(k));
            }
            j
        };
        assert_eq!(strip(&r.nodes[0]), strip(&alone));
        // End to end through one node: its frames, from ingress to egress.
        assert_eq!(r.end_to_end.forwarded_packets, alone.forwarded_packets);
    }
}
