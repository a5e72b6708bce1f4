//! `pktsim-tb probe`: the interference a thread on one CPU suffers with nothing to do but
//! run, measured as cyclictest-style gaps: a thread pinned to the CPU (at the NAPI thread's
//! real-time priority, so that it sees what that thread sees) reads CLOCK_MONOTONIC in a
//! tight loop; two consecutive reads further apart than a threshold are a gap, the time
//! something else (the scheduler tick, timers, RCU, interrupts, the hypervisor) had the CPU.
//!
//! The loop spins for `--spin-ms`, then sleeps for `--rest-ms`, so that a real-time thread
//! stays below the kernel's real-time throttling (95% of each second); gaps are only seen
//! while it spins, and their rates are per spinning second.

use serde_json::json;

use crate::args::ProbeArgs;
use crate::sys::{self, failed, SysError};

/// Most gaps reported one by one (the rest are counted and in the histogram).
const MAX_LISTED: usize = 200_000;

pub fn run(a: &ProbeArgs) -> Result<serde_json::Value, SysError> {
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    if let Some(cpu) = a.cpu {
        sys::pin_to_cpu(cpu).map_err(failed(format!("sched_setaffinity(CPU {cpu})")))?;
    }
    if let Some(prio) = a.priority {
        sys::set_fifo(prio).map_err(failed(format!("sched_setscheduler(SCHED_FIFO {prio})")))?;
    }
    let mut hist =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("static histogram bounds");
    let mut gaps: Vec<[u64; 2]> = Vec::new();
    let (mut count, mut stolen_ns, mut spin_ns, mut reads) = (0u64, 0u64, 0u64, 0u64);
    let t0 = sys::mono_ns();
    let end = t0.saturating_add(a.duration_ns);
    let mut now = t0;
    while now < end && !sys::stop_requested() {
        let spin_end = (now + a.spin_ns).min(end);
        let start = sys::mono_ns();
        let mut prev = start;
        loop {
            let t = sys::mono_ns();
            reads += 1;
            let d = t - prev;
            if d > a.threshold_ns {
                count += 1;
                stolen_ns += d;
                let _ = hist.record(d);
                if gaps.len() < MAX_LISTED {
                    gaps.push([prev - t0, d]);
                }
            }
            prev = t;
            if t >= spin_end {
                break;
            }
        }
        spin_ns += prev - start;
        now = prev;
        if now < end && a.rest_ns > 0 {
            // EINTR (a stop) ends the rest early; the loop then sees the flag.
            let _ = sys::sleep_until_mono_ns((now + a.rest_ns).min(end));
            now = sys::mono_ns();
        }
    }
    let q = |p: f64| if count > 0 { hist.value_at_quantile(p) } else { 0 };
    Ok(json!({
        "cpu": a.cpu,
        "priority": a.priority,
        "threshold_ns": a.threshold_ns,
        "elapsed_ns": sys::mono_ns() - t0,
        "spin_ns": spin_ns,
        "reads": reads,
        "gaps": count,
        "stolen_ns": stolen_ns,
        "gap_ns": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": if count > 0 { hist.max() } else { 0 }},
        "listed": gaps,
        "unlisted": count - gaps.len() as u64,
        "interrupted": sys::stop_requested(),
    }))
}
