//! `pktsim-tb softirq`: the time one CPU spends in NET_RX softirqs and in
//! call-function-single IPIs (through which RPS hands frames to a remote CPU), exactly,
//! counted by the span programs of [`crate::bpf`] on the tracepoints
//! `irq:softirq_entry`/`irq:softirq_exit` (NET_RX only) and
//! `irq_vectors:call_function_single_entry`/`_exit` (x86; reported as null where the
//! kernel has none).
//!
//! NET_RX time is split by the task the softirq ran on: the idle task (an interrupt on an
//! idle CPU), ksoftirqd (`--ksoftirqd-pid`), each task of `--tasks`, any other task (an
//! interrupt on a busy CPU, or a task re-enabling bottom halves). The programs stay
//! attached while this process holds their perf events; they are removed when it exits,
//! however it exits.
//!
//! The task is `bpf_get_current_pid_tgid()`'s: the record's `common_pid` sits in the first
//! 8 bytes, which a tracepoint program may not read. The kernel runs one tracing program
//! at a time per CPU, so an IPI that arrives while a softirq program runs (a few hundred
//! ns per softirq) goes uncounted; a span in progress at either end of the window is not
//! counted.
//!
//! On-CPU time (`oncpu`) is timed by a program on `sched:sched_switch` with the same task
//! classes, from the switch to a task to the switch away from it: interrupts and softirqs
//! that ran meanwhile count as the task's, as they do for perf's samples, whatever
//! `/proc/PID/schedstat` makes of them (without CONFIG_IRQ_TIME_ACCOUNTING its
//! `sum_exec_runtime` can split a shared CPU between two tasks far from what they ran).
//! The task running when the program was attached and the one running at the end are
//! not counted for those spans: the sums cover the window less its two ends. Switches run
//! with interrupts off, so no span program is ever under way when this one runs.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use serde_json::{json, Value};

use crate::args::SoftirqArgs;
use crate::bpf::{
    self, Program, SpanSums, TaskPids, CLASS_IDLE, CLASS_KSOFTIRQD, CLASS_OTHER, CLASS_TASKS, NET_RX_SOFTIRQ,
};
use crate::sys::{self, failed, SysError};

/// Where tracefs keeps the tracepoints: its own mount, or under debugfs.
const TRACEFS_EVENTS: [&str; 2] = ["/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"];
/// Poll period of the wait for a stop (a stop is seen within this).
const TICK_NS: u64 = 10_000_000;

/// The id of tracepoint `group:name` (its tracefs `id` file); None when no tracefs has it.
fn tracepoint_id(group: &str, name: &str) -> Result<Option<u64>, SysError> {
    for root in TRACEFS_EVENTS {
        let path = format!("{root}/{group}/{name}/id");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                return text.trim().parse().map(Some).map_err(|_| SysError {
                    call: format!("read {path}"),
                    err: io::Error::other(format!("not a tracepoint id: {:?}", text.trim())),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(format!("read {path}"))(e)),
        }
    }
    Ok(None)
}

/// A tracepoint that must exist.
fn required_tracepoint(group: &str, name: &str) -> Result<u64, SysError> {
    tracepoint_id(group, name)?.ok_or_else(|| SysError {
        call: format!("tracepoint {group}:{name}"),
        err: io::Error::other(format!("not found under {} (is tracefs mounted?)", TRACEFS_EVENTS.join(" or "))),
    })
}

/// A span being counted: its map, and the programs and perf events that feed it.
struct Span {
    map: OwnedFd,
    _progs: [OwnedFd; 2],
    _events: [OwnedFd; 2],
}

/// The two tracepoints (`group:name`, id) of a span.
type Tracepoints<'a> = [(&'a str, u64); 2];

/// Loads the span programs for `cpu` and attaches them to the `[entry, exit]`
/// tracepoints (the exit first: an entry is then always followed by a counted exit).
fn attach_span(tracepoints: Tracepoints, cpu: u32, vec: Option<u32>, pids: TaskPids) -> Result<Span, SysError> {
    let [(entry_name, entry_id), (exit_name, exit_id)] = tracepoints;
    let map = bpf::span_map_create().map_err(failed(format!("bpf(BPF_MAP_CREATE) for {entry_name}")))?;
    let map_fd = map.as_raw_fd();
    let exit = bpf::prog_load(Program::SpanExit { map_fd, cpu, vec })
        .map_err(failed(format!("bpf(BPF_PROG_LOAD) of the {exit_name} program")))?;
    let entry = bpf::prog_load(Program::SpanEntry { map_fd, cpu, vec, pids })
        .map_err(failed(format!("bpf(BPF_PROG_LOAD) of the {entry_name} program")))?;
    let exit_event = bpf::tracepoint_attach(exit_id, cpu, &exit)
        .map_err(failed(format!("attach to {exit_name} (perf_event_open, cpu {cpu})")))?;
    let entry_event = bpf::tracepoint_attach(entry_id, cpu, &entry)
        .map_err(failed(format!("attach to {entry_name} (perf_event_open, cpu {cpu})")))?;
    Ok(Span { map, _progs: [entry, exit], _events: [entry_event, exit_event] })
}

/// On-CPU time being counted: its map, and the program and perf event that feed it.
struct Switches {
    map: OwnedFd,
    _prog: OwnedFd,
    _event: OwnedFd,
}

/// Loads the switch program for `cpu` and attaches it to `sched:sched_switch` (id `tp_id`).
fn attach_switch(tp_id: u64, cpu: u32, pids: TaskPids) -> Result<Switches, SysError> {
    let map = bpf::span_map_create().map_err(failed("bpf(BPF_MAP_CREATE) for sched:sched_switch"))?;
    let prog = bpf::prog_load(Program::Switch { map_fd: map.as_raw_fd(), cpu, pids })
        .map_err(failed("bpf(BPF_PROG_LOAD) of the sched:sched_switch program"))?;
    let event = bpf::tracepoint_attach(tp_id, cpu, &prog)
        .map_err(failed(format!("attach to sched:sched_switch (perf_event_open, cpu {cpu})")))?;
    Ok(Switches { map, _prog: prog, _event: event })
}

/// The JSON object printed at the end of a run. `oncpu` holds the switch program's sums
/// (None without a sched_switch tracepoint).
pub fn report(
    a: &SoftirqArgs,
    window_ns: u64,
    net_rx: &SpanSums,
    ipi: Option<&SpanSums>,
    oncpu: Option<&SpanSums>,
    interrupted: bool,
) -> Value {
    let class = |c: usize| json!({"ns": net_rx.ns[c], "count": net_rx.count[c]});
    // Every task but the idle task and ksoftirqd: the named ones and the others, the
    // last classes.
    let task_ns: u64 = net_rx.ns[CLASS_TASKS..].iter().sum();
    let task_count: u64 = net_rx.count[CLASS_TASKS..].iter().sum();
    // One object per --tasks pid, in order, its count under the name `count`.
    let named = |s: &SpanSums, count: &str| -> Vec<Value> {
        let entry =
            |(i, pid): (usize, &u32)| json!({"pid": pid, "ns": s.ns[CLASS_TASKS + i], count: s.count[CLASS_TASKS + i]});
        a.tasks.iter().enumerate().map(entry).collect()
    };
    let switched = |s: &SpanSums, c: usize| json!({"ns": s.ns[c], "switches": s.count[c]});
    json!({
        "cpu": a.cpu,
        "ksoftirqd_pid": a.ksoftirqd_pid,
        "window_ns": window_ns,
        "net_rx": {
            "idle": class(CLASS_IDLE),
            "ksoftirqd": class(CLASS_KSOFTIRQD),
            "task": {"ns": task_ns, "count": task_count},
            "tasks": named(net_rx, "count"),
            "other": class(CLASS_OTHER),
            "ns": net_rx.ns.iter().sum::<u64>(),
            "count": net_rx.count.iter().sum::<u64>(),
        },
        "ipi": ipi.map(|s| json!({"ns": s.ns.iter().sum::<u64>(), "count": s.count.iter().sum::<u64>()})),
        "oncpu": oncpu.map(|s| json!({
            "idle": switched(s, CLASS_IDLE),
            "ksoftirqd": a.ksoftirqd_pid.map(|_| switched(s, CLASS_KSOFTIRQD)),
            "tasks": named(s, "switches"),
            "other": switched(s, CLASS_OTHER),
        })),
        "interrupted": interrupted,
    })
}

pub fn run(a: &SoftirqArgs) -> Result<Value, SysError> {
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    let cpu = a.cpu as u32;
    let softirq = [
        ("irq:softirq_entry", required_tracepoint("irq", "softirq_entry")?),
        ("irq:softirq_exit", required_tracepoint("irq", "softirq_exit")?),
    ];
    let ipi = match (
        tracepoint_id("irq_vectors", "call_function_single_entry")?,
        tracepoint_id("irq_vectors", "call_function_single_exit")?,
    ) {
        (Some(entry), Some(exit)) => {
            Some([("irq_vectors:call_function_single_entry", entry), ("irq_vectors:call_function_single_exit", exit)])
        }
        _ => None,
    };

    let switch = tracepoint_id("sched", "sched_switch")?;

    let pids = TaskPids::new(a.ksoftirqd_pid, &a.tasks);
    let net_rx = attach_span(softirq, cpu, Some(NET_RX_SOFTIRQ), pids)?;
    let ipi = ipi.map(|tp| attach_span(tp, cpu, None, TaskPids::default())).transpose()?;
    let switches = switch.map(|id| attach_switch(id, cpu, pids)).transpose()?;
    let t0 = sys::mono_ns();
    if let Some(path) = &a.ready_file {
        File::create(path).map_err(failed(format!("create ready file {}", path.display())))?;
    }
    let end = t0.saturating_add(a.duration_ns);
    while !sys::stop_requested() {
        let now = sys::mono_ns();
        if now >= end {
            break;
        }
        // EINTR (a stop signal) ends the sleep early; the loop then sees the flag.
        let _ = sys::sleep_until_mono_ns(now + TICK_NS.min(end - now));
    }
    let window_ns = sys::mono_ns() - t0;
    let net_rx_sums = bpf::span_read(&net_rx.map).map_err(failed("bpf(BPF_MAP_LOOKUP_ELEM), NET_RX"))?;
    let ipi_sums = match &ipi {
        Some(span) => Some(bpf::span_read(&span.map).map_err(failed("bpf(BPF_MAP_LOOKUP_ELEM), IPI"))?),
        None => None,
    };
    let oncpu_sums = match &switches {
        Some(s) => Some(bpf::span_read(&s.map).map_err(failed("bpf(BPF_MAP_LOOKUP_ELEM), sched_switch"))?),
        None => None,
    };
    Ok(report(a, window_ns, &net_rx_sums, ipi_sums.as_ref(), oncpu_sums.as_ref(), sys::stop_requested()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> SoftirqArgs {
        SoftirqArgs { cpu: 1, duration_ns: 1_000_000_000, ksoftirqd_pid: Some(22), tasks: vec![], ready_file: None }
    }

    #[test]
    fn report_sums_the_classes() {
        let net = SpanSums { ns: [100, 20, 0, 0, 0, 0, 3], count: [4, 2, 0, 0, 0, 0, 1] };
        let ipi = SpanSums { ns: [7, 0, 0, 0, 0, 0, 5], count: [1, 0, 0, 0, 0, 0, 1] };
        let oncpu = SpanSums { ns: [900, 50, 0, 0, 0, 0, 40], count: [9, 5, 0, 0, 0, 0, 4] };
        let j = report(&args(), 1_000_000_123, &net, Some(&ipi), Some(&oncpu), false);
        assert_eq!(
            j,
            json!({
                "cpu": 1,
                "ksoftirqd_pid": 22,
                "window_ns": 1_000_000_123u64,
                "net_rx": {
                    "idle": {"ns": 100, "count": 4},
                    "ksoftirqd": {"ns": 20, "count": 2},
                    "task": {"ns": 3, "count": 1},
                    "tasks": [],
                    "other": {"ns": 3, "count": 1},
                    "ns": 123,
                    "count": 7,
                },
                "ipi": {"ns": 12, "count": 2},
                "oncpu": {
                    "idle": {"ns": 900, "switches": 9},
                    "ksoftirqd": {"ns": 50, "switches": 5},
                    "tasks": [],
                    "other": {"ns": 40, "switches": 4},
                },
                "interrupted": false,
            })
        );
    }

    #[test]
    fn report_splits_the_named_tasks() {
        let a = SoftirqArgs { ksoftirqd_pid: None, tasks: vec![300, 77], ..args() };
        let net = SpanSums { ns: [100, 0, 30, 7, 0, 0, 5], count: [4, 0, 3, 1, 0, 0, 2] };
        let oncpu = SpanSums { ns: [10, 0, 600, 200, 0, 0, 90], count: [1, 0, 6, 2, 0, 0, 9] };
        let j = report(&a, 1000, &net, None, Some(&oncpu), false);
        assert_eq!(
            j["net_rx"],
            json!({
                "idle": {"ns": 100, "count": 4},
                "ksoftirqd": {"ns": 0, "count": 0},
                "task": {"ns": 42, "count": 6},
                "tasks": [{"pid": 300, "ns": 30, "count": 3}, {"pid": 77, "ns": 7, "count": 1}],
                "other": {"ns": 5, "count": 2},
                "ns": 142,
                "count": 10,
            })
        );
        assert_eq!(
            j["oncpu"],
            json!({
                "idle": {"ns": 10, "switches": 1},
                "ksoftirqd": null,
                "tasks": [{"pid": 300, "ns": 600, "switches": 6}, {"pid": 77, "ns": 200, "switches": 2}],
                "other": {"ns": 90, "switches": 9},
            })
        );
    }

    #[test]
    fn report_without_ipi_and_switch_tracepoints() {
        let j = report(&args(), 5, &SpanSums::default(), None, None, true);
        assert!(j["ipi"].is_null());
        assert!(j["oncpu"].is_null());
        assert_eq!(j["net_rx"]["ns"], 0);
        assert_eq!(j["net_rx"]["idle"], json!({"ns": 0, "count": 0}));
        assert_eq!(j["interrupted"], true);
    }

    #[test]
    fn a_missing_tracepoint_is_none() {
        assert_eq!(tracepoint_id("pktsim_no_such_group", "nothing").unwrap(), None);
    }
}
