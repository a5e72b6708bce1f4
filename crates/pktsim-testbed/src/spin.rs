//! `pktsim-tb spin`: the CPU time everything else takes from one CPU, measured by what is
//! left. A SCHED_IDLE thread pinned to the CPU turns an empty loop whenever nothing else
//! wants the CPU (any woken thread preempts it at once, and it never lets the CPU halt);
//! the time it did not get is what the rest took: tasks, and the interrupts and softirqs
//! that came while it ran, with their entry and exit, which no tracepoint brackets.
//!
//! The loop is [`crate::udprecv::work`]'s, timed at startup (the fastest of a few 1 ms
//! runs: the others were interrupted). The loop runs in chunks of about 100 µs, between
//! which it looks at the clock, the deadline and a stop signal.

use std::fs::File;

use serde_json::{json, Value};

use crate::args::SpinArgs;
use crate::sys::{self, failed, SysError};
use crate::udprecv::{ns_per_turn, work};

/// Turns of a timing run at startup (about a millisecond), and how many runs.
const TIMING_TURNS: u32 = 4_000_000;
const TIMING_RUNS: usize = 7;
/// Time per chunk of turns between looks at the clock.
const CHUNK_NS: f64 = 100_000.0;

/// The JSON object printed at the end: the window, the turns, what they took undisturbed,
/// and the rest (`taken_ns`).
pub fn report(cpu: usize, window_ns: u64, turns: u64, ns_per_turn: f64, interrupted: bool) -> Value {
    let work_ns = (turns as f64 * ns_per_turn).round() as u64;
    json!({
        "cpu": cpu,
        "window_ns": window_ns,
        "turns": turns,
        "ns_per_turn": ns_per_turn,
        "work_ns": work_ns,
        "taken_ns": window_ns.saturating_sub(work_ns),
        "interrupted": interrupted,
    })
}

pub fn run(a: &SpinArgs) -> Result<Value, SysError> {
    sys::pin_to_cpu(a.cpu).map_err(failed(format!("sched_setaffinity(cpu {})", a.cpu)))?;
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    // Timed before SCHED_IDLE, while the CPU is still the thread's as much as it can be.
    let per_turn = ns_per_turn(TIMING_TURNS, TIMING_RUNS).max(0.01);
    sys::set_idle_policy().map_err(failed("sched_setscheduler(SCHED_IDLE)"))?;
    let chunk = (CHUNK_NS / per_turn).clamp(1.0, f64::from(u32::MAX)) as u32;
    if let Some(path) = &a.ready_file {
        File::create(path).map_err(failed(format!("create ready file {}", path.display())))?;
    }
    let t0 = sys::mono_ns();
    let end = t0.saturating_add(a.duration_ns);
    let mut turns = 0u64;
    while !sys::stop_requested() && sys::mono_ns() < end {
        work(chunk);
        turns += u64::from(chunk);
    }
    Ok(report(a.cpu, sys::mono_ns() - t0, turns, per_turn, sys::stop_requested()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_taken_is_the_window_less_the_work() {
        let j = report(1, 1_000_000, 3_000_000, 0.25, false);
        assert_eq!(j["work_ns"], 750_000);
        assert_eq!(j["taken_ns"], 250_000);
        // Work timed a little fast never makes the rest negative.
        assert_eq!(report(1, 1_000, 5_000, 0.25, true)["taken_ns"], 0);
    }
}
