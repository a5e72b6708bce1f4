//! What a run measured, as the `pktsim run --json` contract: [`SimResult`], read from a
//! node's statistics after its run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::stats::{self, Activity, GroupSummary, LatencySummary, ACTIVITY_NAMES, TASK_NAMES};
use super::SimNode;

/// Rx packets per poll.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PerPoll {
    pub mean: f64,
    /// Count of polls that cleaned 0, 1, ..., N rx packets, N the most a poll may take (the
    /// NAPI weight, or a busy poll's budget); the last counts N or more.
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
    /// CPU by context where NAPI runs (0..1 of all cores' time, like `mpstat`'s %irq and
    /// %soft and `pidstat`'s tasks): `hardirq`, `softirq` (run on interrupt exit or
    /// `local_bh_enable`), `ksoftirqd`, `napi_threads`, `app`; the idle-state refill and
    /// interference are left out. Empty for the other I/O modes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_by_context: BTreeMap<String, f64>,
    /// Busy polls that found nothing.
    pub empty_polls: u64,
    pub drops: BTreeMap<String, u64>,
    /// Frames that reached the NIC in the window (forwarded, dropped or still queued at
    /// its end).
    pub offered_packets: u64,
    /// Frames whose descriptor was posted to a tx ring in the window: at most
    /// offered_packets + carried_in_packets.
    pub forwarded_packets: u64,
    /// Frames the host consumed in the window (XDP_DROP; read by an application):
    /// throughput counts them with the forwarded ones.
    pub consumed_packets: u64,
    /// Forwarded frames that reached the NIC before the window (queued at its start).
    pub carried_in_packets: u64,
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
    /// The clock the cores ran at, Hz: `cpu.frequency`, or where `[cpu.freq]`'s governor
    /// settles at the run's load (every cost then scaled to it).
    pub cpu_freq_hz: f64,
    pub io: super::io::IoReport,
    /// Each idle state's entries and share of the time (`[cpu.idle]`), like `cpupower
    /// monitor`; absent when the cores never sleep at a cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_states: Option<super::idle::IdleReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<stats::Bucket>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series_interval_s: Option<f64>,
    /// What the figures leave out or assume, in words (e.g. interrupts that cost nothing).
    pub notes: Vec<String>,
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

impl SimNode {
    /// The figures of the run so far (`wall_s`: the wall-clock time it took).
    pub fn report(&self, wall_s: f64) -> SimResult {
        let (st, info, topo) = (&self.stats, &self.info, &self.topo);
        // Every core the node's work ran on (an application's own cores included).
        let k = st.busy_core.len();
        let duration_s = info.duration.as_secs_f64();
        let all = st.all.summary(duration_s);
        let fwd = st.all.finished().max(1) as f64;
        let cpu_window = info.duration.ps() as f64 * k as f64;
        let share = |busy: u64| busy as f64 / cpu_window;
        let busy_total: u64 = st.busy.iter().map(|b| b.ps()).sum();
        let cpu_by_activity: BTreeMap<String, f64> = ACTIVITY_NAMES
            .iter()
            .zip(st.busy.iter())
            .map(|(n, b)| (n.to_string(), share(b.ps())))
            .chain(std::iter::once(("idle".to_string(), 1.0 - share(busy_total))))
            .collect();
        let cpu_by_context: BTreeMap<String, f64> = if st.tasks {
            let hardirq = st.busy[Activity::Irq as usize].ps();
            let tasks: u64 = st.by_task.iter().map(|b| b.ps()).sum();
            let aside =
                [Activity::Interference, Activity::Refill].iter().map(|&a| st.busy[a as usize].ps()).sum::<u64>();
            let softirq = busy_total.saturating_sub(hardirq + tasks + aside);
            TASK_NAMES
                .iter()
                .zip(st.by_task.iter())
                .map(|(n, b)| (n.to_string(), share(b.ps())))
                .chain([("hardirq".to_string(), share(hardirq)), ("softirq".to_string(), share(softirq))])
                .collect()
        } else {
            BTreeMap::new()
        };
        let polls_with_rx: u64 = st.rx_per_poll.iter().sum();
        let per_poll_mean = if polls_with_rx == 0 { 0.0 } else { st.rx_polled as f64 / polls_with_rx as f64 };
        let per_class: BTreeMap<String, GroupSummary> = if st.classes.is_empty() {
            info.class_names.iter().map(|c| (c.clone(), all.clone())).collect()
        } else {
            info.class_names.iter().cloned().zip(st.classes.iter().map(|g| g.summary(duration_s))).collect()
        };
        let per_ring: Vec<RingSummary> = (0..topo.rings())
            .map(|r| RingSummary {
                ring: r,
                core: topo.core_of_ring(r),
                queue: info.queue_names[topo.queue_of_ring(r)].clone(),
                summary: st.rings.get(r).map_or_else(|| all.clone(), |g| g.summary(duration_s)),
            })
            .collect();
        SimResult {
            name: info.name.clone(),
            seed: info.seed,
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
            cpu_utilization: share(busy_total),
            cpu_useful: share(busy_total - st.busy[Activity::Spin as usize].ps()),
            empty_polls: st.empty_polls,
            cpu_by_activity,
            cpu_by_context,
            drops: all.drops.clone(),
            offered_packets: all.offered_packets,
            forwarded_packets: all.forwarded_packets,
            consumed_packets: all.consumed_packets,
            carried_in_packets: st.carried_in,
            latency_mean_ci95_ns: all.latency_mean_ci95_ns,
            per_class,
            per_ring,
            cpu_per_core: st.busy_core.iter().map(|b| b.ps() as f64 / info.duration.ps() as f64).collect(),
            sim_packets: self.nic.generated(),
            events: self.queue.scheduled,
            sim_time_s: self.stop.as_secs_f64(),
            wall_s,
            t_proc_ns: self.costs.t_proc_mean(info.mean_frame_bytes.round() as u64).as_ns_f64(),
            t_clean_ns: self.costs.t_clean.as_ns_f64(),
            t_irq_ns: self.costs.t_irq.as_ns_f64(),
            cpu_freq_hz: info.frequency_hz,
            io: self.mode.report(&self.nic),
            idle_states: self.idle.report(info.duration, k),
            series: info.interval.map(|_| st.series.clone()),
            series_interval_s: info.interval.map(|i| i.as_secs_f64()),
            notes: info.notes.iter().cloned().chain(edge_note(&all, info.duration)).collect(),
        }
    }
}

/// Where more frames ended in the window than arrived in it (by over 0.1%, where four
/// digits show it, and a frame): those queued at its start, counted where they leave. A
/// short window shows it; the throughput is still what left in the window.
fn edge_note(all: &GroupSummary, duration: crate::engine::time::Span) -> Option<String> {
    let (offered, ended) = (all.offered_packets, all.forwarded_packets + all.consumed_packets);
    (offered > 0 && ended > offered + 1 && ended as f64 > 1.001 * offered as f64).then(|| {
        format!(
            "{} more frames left the {} ms window than arrived in it (+{:.1}%): frames queued at its start leave in it, so the throughput is above the offered load; a longer measure.duration makes this edge smaller",
            ended - offered,
            duration.as_secs_f64() * 1e3,
            100.0 * (ended - offered) as f64 / offered as f64
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::trace;

    fn toml(host: &str) -> String {
        format!("[cpu]\nfrequency = \"1GHz\"\n[link]\nrate = \"10Gbit/s\"\n[traffic]\nrate = \"100kpps\"\n[host]\n{host}\n[measure]\nwarmup = \"5us\"\nduration = \"1ms\"\n")
    }

    /// A frame that reaches the NIC before the window and leaves in it is forwarded but not
    /// offered: it is counted as carried in, so forwarded <= offered + carried in.
    #[test]
    fn frames_queued_at_the_start_of_the_window_are_carried_in() {
        let (r, dep) = trace(&toml("io = \"server\"\nt_proc = \"2us\""), &[(4_000, 64), (10_000, 64)]);
        assert_eq!(dep.len(), 2);
        assert_eq!((r.offered_packets, r.forwarded_packets, r.carried_in_packets), (1, 2, 1));
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    /// Four frames queued before the window and one arriving in it: five leave in it, four
    /// more than arrived, which the report says (a single one, above, it does not).
    #[test]
    fn a_window_that_more_frames_leave_than_arrive_in_says_so() {
        let (r, dep) = trace(
            &toml("io = \"server\"\nt_proc = \"2us\""),
            &[(3_000, 64), (3_100, 64), (3_200, 64), (3_300, 64), (100_000, 64)],
        );
        assert_eq!(dep.len(), 5);
        assert_eq!((r.offered_packets, r.forwarded_packets, r.carried_in_packets), (1, 5, 4));
        assert_eq!(r.throughput_pps, 5_000.0);
        let notes: Vec<&String> = r.notes.iter().filter(|n| n.contains("more frames left")).collect();
        assert_eq!(notes.len(), 1, "{:?}", r.notes);
        assert!(
            notes[0].starts_with("4 more frames left the 1 ms window than arrived in it (+400.0%)"),
            "{}",
            notes[0]
        );
    }

    #[test]
    fn free_interrupts_are_said_out_loud() {
        let (r, _) = trace(&toml("io = \"napi\"\nt_proc = \"1us\"\nt_irq = \"0ns\""), &[(10_000, 64)]);
        assert!(r.notes.iter().any(|n| n.contains("host.t_irq is 0")), "{:?}", r.notes);
        // By default an interrupt costs what a measured machine's did (202 ns).
        let (charged, _) = trace(&toml("io = \"napi\"\nt_proc = \"1us\""), &[(10_000, 64)]);
        assert!(charged.notes.is_empty(), "{:?}", charged.notes);
        assert_eq!(crate::scenario::Irq::default().t_irq.ps, 202_000);
    }
}
