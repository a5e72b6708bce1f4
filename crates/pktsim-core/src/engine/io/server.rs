//! Cores as plain servers of their rx rings: no interrupts, no NAPI (001's resource-manager
//! model, and pktsim's queueing-theory checks).
//!
//! ```text
//!   core c: rings [q0 (highest priority), q1, ...] --strategy--> serve the head frame for
//!           t_proc (x = a S + b + c), or until the turn's budget runs out
//!           --> frame done: [tx lock if the queue is shared] --> tx ring
//!           --> budget out first: the frame stays at its ring's head with the rest of
//!               its service, resumed at the ring's next turn
//! ```
//!
//! Before each unit of service the core asks its [`Strategy`] which ring to serve and for
//! how long: time-sliced strategies (`rr`, contended `priowfq`) revoke the core mid-frame
//! at the end of a slice; the others serve whole frames. Each ring has at most one frame in
//! service (preempted or running); the CPU time of every unit is charged as it ends, and a
//! frame goes on to its tx ring (where its latency is taken) only after its last unit. A
//! frame keeps its descriptor until its service ends, so a ring of N descriptors holds at
//! most N - 1 frames in the system (one descriptor always stays empty): one core with one
//! ring is an M/G/1/K queue with K = N - 1. An idle core waits for the next write-back on
//! any of its rings (without the event queue when that comes before its horizon).

use super::units::{self, Units, Worker};
use super::{Ctx, IoMode};
use crate::engine::ingress::Packet;
use crate::engine::queue::Key;
use crate::engine::stats::Activity;
use crate::engine::strategy::{RingView, Strategy};
use crate::engine::time::{Instant, Span};
use crate::scenario::ResolvedScenario;
use crate::topology::Topology;

/// A core's unit of work. The frame it concerns is the core's `frame` (units stay small:
/// see `units::run`).
pub enum Unit {
    /// Serving a frame of ring `ring` (the core's `i`-th), `rest` of its service left
    /// when the unit ends (above zero: preempted).
    Serve { ring: usize, i: usize, rest: Span },
    /// Waiting for and holding the shared tx queue's lock, then posting the frame.
    Lock,
    /// Idle until the next write-back on one of the core's rings (no CPU time).
    Idle,
}

struct Core {
    strategy: Box<dyn Strategy>,
    worker: Worker<Unit>,
    /// The frame of the running unit.
    frame: Packet,
    /// The served frame (`frame`) waits for its shared tx queue's lock, this long.
    lock: Option<Span>,
    /// Per ring of the core: a frame taken from it whose service was revoked, and the
    /// service it still needs. It counts as the ring's head.
    preempted: Vec<Option<(Packet, Span)>>,
    /// The ring whose frame the last unit left unfinished (its slice ran out).
    cut: Option<usize>,
    /// Times the core went to another ring from an unfinished frame, in the measurement
    /// window (a slice that ends with no other ring waiting is not one).
    preemptions: u64,
    views: Vec<RingView>,
    /// One ring, which the strategy serves in order, whole frames: the core takes its head
    /// without views or a strategy to ask.
    lone: bool,
}

pub struct Server {
    cores: Vec<Core>,
    topo: Topology,
}

impl Server {
    pub fn new(sc: &ResolvedScenario, topo: &Topology) -> Self {
        Self::with_strategies(*topo, super::core_strategies(sc, topo))
    }

    /// One strategy per core.
    pub fn with_strategies(topo: Topology, strategies: Vec<Box<dyn Strategy>>) -> Self {
        let cores = strategies
            .into_iter()
            .map(|strategy| Core {
                lone: topo.queues_per_core() == 1 && strategy.serves_a_lone_ring_in_order(),
                strategy,
                worker: Worker::default(),
                frame: Packet::default(),
                lock: None,
                preempted: vec![None; topo.queues_per_core()],
                cut: None,
                preemptions: 0,
                views: vec![RingView::default(); topo.queues_per_core()],
            })
            .collect();
        Server { cores, topo }
    }

    /// Core `c`'s rings are empty at `t`: idle until the next write-back to any of them,
    /// without the event queue if it comes before anything else can happen to the core
    /// (what a wake-up by it would do), else armed to be woken by it.
    #[inline]
    fn idle(&mut self, c: usize, t: Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        let rings = self.topo.rings_of_core(c);
        let horizon = ctx.horizon(c);
        if self.cores[c].worker.is_free_at(t) {
            if let Some(at) = ctx.nic.next_arrival(rings.clone(), horizon, ctx.stats).filter(|&at| at > t) {
                return Some((Unit::Idle, at - t));
            }
        }
        super::arm_rings(rings, ctx);
        None
    }
}

impl Server {
    /// Core `c` serving its one ring `r` in order from `*t` (what the strategy would pick:
    /// the ring's head, whole): frames served one after another, and waits for the next
    /// write-back, run here while they end by the horizon (each frame's effects at its end,
    /// as `finish` applies them: its descriptor back, completions reclaimed, sent). Nothing
    /// here can raise an event where [`crate::engine::nic::Nic::runs_alone`] holds, so the
    /// horizon stays. The
    /// first frame that would end after it is returned as a unit; an empty ring whose next
    /// frame comes after it leaves the core idle.
    #[inline]
    fn serve_lone(&mut self, c: usize, r: usize, t: &mut Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        let tx = self.topo.tx_of_core(c);
        let core = &mut self.cores[c];
        let inline = core.worker.is_free_at(*t) && ctx.nic.runs_alone(tx, ctx.costs.tx_lock) && !ctx.cancelled();
        let horizon = ctx.horizon(c);
        let (mut from, mut served) = (*t, 0u32);
        loop {
            // (A core that keeps up finds one frame due: it comes straight off the ingress.)
            if ctx.nic.take(r, *t, ctx.stats, &mut core.frame) == 0 {
                ctx.stats.busy(c, Activity::RxClean, from, *t);
                if inline {
                    if let Some(at) = ctx.nic.next_arrival(r..r + 1, horizon, ctx.stats).filter(|&at| at > *t) {
                        (*t, from) = (at, at);
                        continue;
                    }
                }
                return self.idle(c, *t, ctx);
            }
            let d = ctx.costs.t_proc(&core.frame);
            served = served.wrapping_add(1);
            let stop = served % 1024 == 0 && ctx.cancelled();
            if !inline || *t + d > horizon || stop {
                ctx.stats.busy(c, Activity::RxClean, from, *t);
                return Some((Unit::Serve { ring: r, i: 0, rest: Span::ZERO }, d));
            }
            *t += d;
            ctx.nic.refill(r, *t, 1, ctx.stats);
            ctx.nic.xmit(tx, &core.frame, *t, true, ctx.queue, ctx.stats);
        }
    }
}

impl Units for Server {
    type Unit = Unit;

    #[inline]
    fn worker(&mut self, core: usize) -> &mut Worker<Unit> {
        &mut self.cores[core].worker
    }

    #[inline]
    fn account(&mut self, c: usize, unit: &Unit, start: Instant, end: Instant, ctx: &mut Ctx) {
        let a = match unit {
            Unit::Serve { .. } => Activity::RxClean,
            Unit::Lock => Activity::TxLock,
            Unit::Idle => return,
        };
        ctx.stats.busy(c, a, start, end);
    }

    #[inline]
    fn finish(&mut self, c: usize, unit: Unit, _start: Instant, t: Instant, ctx: &mut Ctx) {
        let tx = self.topo.tx_of_core(c);
        match unit {
            Unit::Serve { ring: r, i, rest } => {
                if rest > Span::ZERO {
                    // Revoked: the frame stays at its ring's head, descriptor and all.
                    let core = &mut self.cores[c];
                    core.preempted[i] = Some((core.frame, rest));
                    core.cut = Some(i);
                    return;
                }
                // The frame's descriptor comes back now; frames that arrived during the
                // service saw the ring without it.
                ctx.nic.refill(r, t, 1, ctx.stats);
                let lock = ctx.nic.tx(tx).lock(t, ctx.costs.tx_lock);
                if lock > Span::ZERO {
                    self.cores[c].lock = Some(lock);
                    return;
                }
                ctx.nic.xmit(tx, &self.cores[c].frame, t, true, ctx.queue, ctx.stats);
            }
            Unit::Lock => {
                ctx.nic.xmit(tx, &self.cores[c].frame, t, true, ctx.queue, ctx.stats);
            }
            Unit::Idle => {}
        }
    }

    #[inline]
    fn next(&mut self, c: usize, tx_time: &mut Instant, ctx: &mut Ctx) -> Option<(Unit, Span)> {
        let t = *tx_time;
        if let Some(lock) = self.cores[c].lock.take() {
            return Some((Unit::Lock, lock));
        }
        let rings = self.topo.rings_of_core(c);
        if self.cores[c].lone {
            return self.serve_lone(c, rings.start, tx_time, ctx);
        }
        let core = &mut self.cores[c];
        // Choose the next frame.
        ctx.nic.advance(rings.clone(), t, ctx.stats);
        super::ring_views(rings.clone(), &mut core.views, ctx);
        for (v, pre) in core.views.iter_mut().zip(&core.preempted) {
            if let Some((p, rest)) = pre {
                *v = RingView { len: v.len + 1, head_arrival: p.t_ring, head_size: p.size, head_service: *rest };
            }
        }
        let Some(turn) = core.strategy.pick(&core.views, t) else {
            return self.idle(c, t, ctx);
        };
        let i = turn.ring;
        if core.cut.take().is_some_and(|j| j != i) {
            core.preemptions += ctx.stats.in_window(t) as u64;
        }
        let r = rings.start + i;
        let (p, need) = match core.preempted[i].take() {
            Some(resumed) => resumed,
            None => {
                let mut p = Packet::default();
                if ctx.nic.take(r, t, ctx.stats, &mut p) == 0 {
                    return None;
                }
                core.strategy.served(i, p.size);
                let d = ctx.costs.t_proc(&p);
                (p, d)
            }
        };
        let d = turn.budget.map_or(need, |b| b.min(need));
        core.frame = p;
        Some((Unit::Serve { ring: r, i, rest: need - d }, d))
    }
}

impl IoMode for Server {
    fn start(&mut self, ctx: &mut Ctx) {
        super::arm_rings(0..self.topo.rings(), ctx);
    }

    fn on_timer(&mut self, key: Key, gen: u32, ctx: &mut Ctx) {
        if let Key::Step(c) = key {
            units::on_step(self, c as usize, gen, ctx);
        }
    }

    fn end(&mut self, t: Instant, ctx: &mut Ctx) {
        for c in 0..self.cores.len() {
            units::end(self, c, t, ctx);
        }
    }

    fn preempt(&mut self, core: usize, t: Instant, d: Span, ctx: &mut Ctx) {
        units::preempt(self, core, t, d, ctx);
    }

    fn on_rx_wake(&mut self, ring: usize, t: Instant, ctx: &mut Ctx) {
        let c = self.topo.core_of_ring(ring);
        if self.cores[c].worker.is_idle() {
            super::disarm_rings(self.topo.rings_of_core(c), ctx);
            units::run(self, c, t, ctx);
        }
    }

    fn independent_cores(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn general_path_only(&mut self) {
        for core in &mut self.cores {
            core.lone = false;
        }
    }

    fn report(&self, _nic: &crate::engine::nic::Nic) -> super::IoReport {
        let names: Vec<&'static str> = self.cores.iter().map(|c| c.strategy.name()).collect();
        super::IoReport::Server(ServerReport {
            preemptions: self.cores.iter().map(|c| c.preemptions).sum(),
            strategy: names.first().copied(),
            strategy_per_core: names,
        })
    }
}

/// A server's figures in a run's result (`io`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerReport {
    /// Frames whose service a time slice cut (rr, priowfq).
    pub preemptions: u64,
    /// The ring strategy of core 0.
    pub strategy: Option<&'static str>,
    /// Each core's ring strategy.
    pub strategy_per_core: Vec<&'static str>,
}

/// A served frame costs its processing only; a shared tx queue adds its lock.
pub fn mode_costs() -> crate::price::ModeCosts {
    crate::price::ModeCosts { tx_lock: true, ..Default::default() }
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace, trace_sources};

    /// One core with an RT ring (source 0, TOS 0xb8) and an n-RT ring (source 1), 4 us of
    /// service per frame, `strategy` the body of [host.strategy].
    fn two_rings(strategy: &str) -> String {
        let tables = format!(
            "[[traffic.sources]]\nclass = \"rt\"\ntos = 0xb8\nshare = \"50%\"\n\
             [[traffic.sources]]\nclass = \"nrt\"\nshare = \"50%\"\n\
             [nic]\nqueues = [\"rt\", \"nrt\"]\n[[nic.filters]]\ntos = 0xb8\nqueue = \"rt\"\n\
             [host.strategy]\n{strategy}"
        );
        node_toml("io = \"server\"\nt_proc = \"4us\"", &tables)
    }

    fn posted(dep: &[(f64, f64)]) -> Vec<f64> {
        dep.iter().map(|d| d.0).collect()
    }

    /// CPU time: exactly `frames` x 4 us of rx cleaning in the 1 ms window.
    fn assert_cpu_exact(r: &crate::engine::SimResult, frames: u32) {
        let busy = frames as f64 * 4e-6 / 1e-3;
        assert!((r.cpu_utilization - busy).abs() < 1e-15, "{} vs {busy}", r.cpu_utilization);
        assert!((r.cpu_by_activity["rx_clean"] - busy).abs() < 1e-15, "{:?}", r.cpu_by_activity);
    }

    /// RR, slices of 1.5 us, two always-busy rings: RT frames at 10.0 and 10.2 us, n-RT at
    /// 10.1 and 10.3 us. The slices alternate from 10 us on (RT first: alone then), each
    /// frame resuming where its last slice stopped:
    ///
    /// ```text
    ///   10.0-11.5 RT1 (2.5 left)   11.5-13.0 NRT1 (2.5)   13.0-14.5 RT1 (1.0)   14.5-16.0 NRT1 (1.0)
    ///   16.0-17.0 RT1 done, 17.0-17.5 RT2 (3.5)            17.5-18.5 NRT1 done, 18.5-19.0 NRT2 (3.5)
    ///   19.0-20.5 RT2 (2.0)   20.5-22.0 NRT2 (2.0)   22.0-23.5 RT2 (0.5)   23.5-25.0 NRT2 (0.5)
    ///   25.0-25.5 RT2 done; RT empty: 25.5-26.0 NRT2 done
    /// ```
    ///
    /// Whole frames would leave at 14, 18, 22, 26 us instead.
    #[test]
    fn rr_revokes_the_core_at_the_end_of_a_slice_and_resumes_the_frame_later() {
        let toml = two_rings("kind = \"rr\"\nslice = \"1.5us\"");
        let (r, dep) = trace_sources(&toml, &[(10_000, 64, 0), (10_100, 64, 1), (10_200, 64, 0), (10_300, 64, 1)]);
        assert_eq!(posted(&dep), [17_000.0, 18_500.0, 25_500.0, 26_000.0]);
        assert_eq!(r.io.json()["preemptions"], 10, "each slice end but the last while both rings wait");
        assert_cpu_exact(&r, 4);
        // Latency when the frame leaves: RT 7.0 and 15.3 us, n-RT 8.4 and 15.7 us.
        let mean = |ring: usize| r.per_ring[ring].summary.latency_ns.mean;
        assert!((mean(0) - 11_150.0).abs() < 12.0 && (mean(1) - 12_050.0).abs() < 13.0, "{} {}", mean(0), mean(1));
    }

    /// PrioWFQ, slices 6 us (RT) and 1.5 us (n-RT). RT1 is alone at 10 us: served whole,
    /// 10-14. Then contention (RT2, RT3, NRT1, NRT2 wait): RT's slice 14-20 finishes RT2 at
    /// 18 and stops RT3 2 us in; NRT1's slice 20-21.5; RT's next slice finishes RT3 at 23.5;
    /// then n-RT alone: NRT1's last 2.5 us whole (26), NRT2 (30). Whole frames would leave
    /// RT3 at 26 and NRT1 at 22.
    #[test]
    fn priowfq_slices_end_mid_frame_under_contention_only() {
        let toml = two_rings("kind = \"priowfq\"\nslices = [\"6us\", \"1.5us\"]");
        let frames = [(10_000, 64, 0), (10_100, 64, 1), (10_200, 64, 0), (10_300, 64, 0), (10_400, 64, 1)];
        let (r, dep) = trace_sources(&toml, &frames);
        assert_eq!(posted(&dep), [14_000.0, 18_000.0, 23_500.0, 26_000.0, 30_000.0]);
        assert_eq!(r.io.json()["preemptions"], 2, "RT3 at 20 us, NRT1 at 21.5 us");
        assert_cpu_exact(&r, 5);
    }

    /// Prio never preempts: the n-RT frame in service when RT frames arrive finishes first.
    #[test]
    fn prio_serves_whole_frames() {
        let toml = two_rings("kind = \"prio\"");
        let (r, dep) = trace_sources(&toml, &[(10_000, 64, 1), (10_100, 64, 0), (10_200, 64, 0), (10_300, 64, 1)]);
        assert_eq!(posted(&dep), [14_000.0, 18_000.0, 22_000.0, 26_000.0]);
        assert_eq!(r.io.json()["preemptions"], 0);
        assert_cpu_exact(&r, 4);
    }

    /// A ring alone keeps the core across slice ends: under RR and PrioWFQ, frames on one
    /// ring (a burst, then gaps) leave exactly when they do under FCFS, at the same CPU cost.
    #[test]
    fn an_uncontended_ring_keeps_the_core_across_slice_ends() {
        let frames: Vec<(u64, u16, u16)> =
            [10_000, 10_500, 11_000, 11_700, 30_000, 50_300, 52_000].iter().map(|&t| (t, 64, 1)).collect();
        let (sq, fcfs) = trace_sources(&two_rings("kind = \"sq\""), &frames);
        assert_eq!(posted(&fcfs), [14_000.0, 18_000.0, 22_000.0, 26_000.0, 34_000.0, 54_300.0, 58_300.0]);
        for strategy in [
            "kind = \"rr\"\nslice = \"1.5us\"",
            "kind = \"priowfq\"\nslices = [\"6us\", \"1.5us\"]",
            "kind = \"rr\"\nslice = \"1ns\"",
        ] {
            let (r, dep) = trace_sources(&two_rings(strategy), &frames);
            assert_eq!(dep, fcfs, "{strategy}");
            assert_eq!(r.io.json()["preemptions"], 0, "{strategy}");
            assert_eq!(r.cpu_utilization, sq.cpu_utilization, "{strategy}");
            assert_eq!(r.latency_ns.mean, sq.latency_ns.mean, "{strategy}");
        }
        assert_cpu_exact(&sq, 7);
    }

    /// t_proc 2 us; a ring of 4 descriptors holds 3 frames, and a frame in service keeps
    /// its descriptor: of 4 frames 100 ns apart, the fourth is dropped.
    #[test]
    fn frames_are_served_in_turn_and_a_full_ring_drops() {
        let toml = node_toml("io = \"server\"\nt_proc = \"2us\"", "[nic]\nrx_ring = 4\nrefill_batch = 1");
        let frames = [(10_000, 64), (11_000, 64), (20_000, 64), (30_000, 64), (30_100, 64), (30_200, 64), (30_300, 64)];
        let (r, dep) = trace(&toml, &frames);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [12_000.0, 14_000.0, 22_000.0, 32_000.0, 34_000.0, 36_000.0]);
        assert!(dep.iter().all(|(tx, done)| (done - tx - 67.2).abs() < 1e-9), "{dep:?}");
        assert_eq!((r.offered_packets, r.forwarded_packets, r.drops["rx_ring_full"]), (7, 6, 1));
        assert!(
            (r.latency_ns.max - 5_800.0).abs() < 6.0,
            "the third of the burst: 3.8 us waiting + 2 us: {}",
            r.latency_ns.max
        );
    }

    /// Ties: a descriptor freed at t is available to a frame arriving at t. Frames every
    /// 0.5 us, 1 us of service, one usable descriptor: every other frame is served.
    #[test]
    fn a_descriptor_freed_at_t_takes_the_frame_arriving_at_t() {
        let toml = node_toml("io = \"server\"\nt_proc = \"1us\"", "[nic]\nrx_ring = 2\nrefill_batch = 1");
        let frames: Vec<(u64, u16)> = (0..20).map(|i| (10_000 + 500 * i, 64)).collect();
        let (r, dep) = trace(&toml, &frames);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, (0..10).map(|i| 11_000.0 + 1_000.0 * i as f64).collect::<Vec<_>>());
        assert_eq!((r.forwarded_packets, r.drops["rx_ring_full"]), (10, 10));
    }

    /// One core serving its one ring whole frames in order takes the lone loop: the same
    /// figures as through the general path, which asks the strategy before each service
    /// and runs it as a unit. M/M/1/K and M/D/1/K near and past saturation (on a ring of 16,
    /// so that frames are dropped; the lone loop's refills write back in runs there) and
    /// CBR (one by one), the window opening and closing while frames are served.
    #[test]
    fn the_lone_loop_is_the_general_path() {
        for (pattern, service, rate) in [
            ("poisson", "exponential", "0.95"),
            ("poisson", "exponential", "1.3"),
            ("poisson", "constant", "0.9"),
            ("cbr", "constant", "0.8"),
        ] {
            let toml = format!(
                "seed = 5\n[cpu]\nfrequency = \"1GHz\"\n[link]\nrate = \"100Gbit/s\"\n\
                 [traffic]\nrate = \"{rate}Mpps\"\npattern = \"{pattern}\"\nsize = \"64B\"\n\
                 [nic]\nrx_ring = 17\nrefill_batch = 1\n\
                 [host]\nio = \"server\"\nt_proc = \"1us\"\nservice = \"{service}\"\n\
                 [measure]\nwarmup = \"0.3ms\"\nduration = \"2ms\"\n"
            );
            let figures = |general: bool| {
                let mut node = crate::engine::SimNode::build(&crate::engine::testing::scenario(&toml));
                if general {
                    node.general_path_only();
                }
                node.run().unwrap_or_else(|e| panic!("{e}"));
                crate::engine::testing::figures_of(node.report(0.0))
            };
            let ((lone, lone_events), (general, general_events)) = (figures(false), figures(true));
            let what = format!("{pattern} arrivals, {service} service, {rate} Mpps");
            assert_eq!(lone, general, "{what}");
            assert!(lone["forwarded_packets"].as_u64() > Some(1_000), "{what}: {}", lone["forwarded_packets"]);
            if rate != "0.8" && rate != "0.9" {
                assert!(lone["drops"]["rx_ring_full"].as_u64() > Some(10), "{what}: {}", lone["drops"]);
            }
            assert!(lone_events <= general_events, "{what}: {lone_events} vs {general_events} events");
        }
    }

    /// A frame in service past the end of the window: frames that reached the NIC in the
    /// window still count as offered (or dropped), and the CPU is charged to the end.
    #[test]
    fn the_window_closes_on_work_under_way() {
        let toml = node_toml("io = \"server\"\nt_proc = \"2ms\"", "[nic]\nrx_ring = 4\nrefill_batch = 1");
        let (r, dep) = trace(&toml, &[(10_000, 64), (20_000, 64), (30_000, 64), (40_000, 64)]);
        assert!(dep.is_empty());
        assert_eq!((r.offered_packets, r.forwarded_packets, r.drops["rx_ring_full"]), (4, 0, 1));
        assert!((r.cpu_utilization - 0.99).abs() < 1e-12, "busy from 10 us to the end of 1 ms: {}", r.cpu_utilization);
    }
}
