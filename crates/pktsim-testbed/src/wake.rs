//! `pktsim-tb wake`: what waking a sleeping thread costs on one CPU, and what leaving the
//! CPU's idle state (a VM's halt: an exit to the hypervisor) adds to it.
//!
//! A sleeper thread pinned to `--cpu` (SCHED_FIFO `--priority`, as the NAPI thread runs)
//! blocks on a futex; a waker pinned to `--from-cpu` waits `gap` after the sleeper last
//! blocked, notes the time and wakes it (`FUTEX_WAKE`: what `wake_up_process` does for a
//! NAPI thread). The sleeper notes when it runs (**wake latency**), then walks a working
//! set of `--work-kib` twice, timing each walk: the first walk after the sleep minus the
//! second (warm) one is the **refill**, the CPU time cold caches cost after `gap` asleep.
//!
//! Two passes over the gaps: with the CPU free to enter its idle state (`halting`), and
//! with a SCHED_IDLE spinner keeping it busy (`awake`: the sleeper preempts it at once, so
//! the CPU never idles). Their difference is what the idle state costs: on a KVM guest
//! without halt polling, the halt's exit to the hypervisor and back.
//!
//! Also measured, on `--cpu`: a null system call (`getppid`), and a same-CPU switch (two
//! threads there handing a futex back and forth: half a round trip is one wake-up and one
//! context switch, the CPU a woken thread costs its CPU).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::args::WakeArgs;
use crate::sys::{self, failed, SysError};

/// Null system calls timed.
const SYSCALLS: u64 = 200_000;
/// Same-CPU futex round trips timed.
const ROUND_TRIPS: u64 = 20_000;

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAIT without a timeout only reads it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE wakes at most one waiter.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
}

/// Blocks until `word` differs from `seen` (or a stop); returns its new value.
fn wait_past(word: &AtomicU32, seen: u32, stop: &AtomicBool) -> u32 {
    loop {
        let v = word.load(Ordering::Acquire);
        if v != seen || stop.load(Ordering::Relaxed) {
            return v;
        }
        futex_wait(word, seen);
    }
}

/// Walks `buf` a cache line at a time; the sum keeps the reads.
fn walk(buf: &[u64]) -> u64 {
    buf.iter().step_by(8).fold(0u64, |a, &x| a.wrapping_add(x))
}

/// One wake-up: (wake latency, cold walk, warm walk), ns.
type Sample = [u64; 3];

struct Shared {
    seq: AtomicU32,
    sent_ns: AtomicU64,
    blocked: AtomicU32,
    stop: AtomicBool,
}

fn quantiles(mut v: Vec<u64>) -> Value {
    v.sort_unstable();
    let q = |p: f64| if v.is_empty() { 0 } else { v[((v.len() - 1) as f64 * p).round() as usize] };
    json!({"p10": q(0.1), "p50": q(0.5), "p90": q(0.9)})
}

fn pass(a: &WakeArgs, awake: bool) -> Result<(Vec<Value>, u64), SysError> {
    let sh = Arc::new(Shared {
        seq: AtomicU32::new(0),
        sent_ns: AtomicU64::new(0),
        blocked: AtomicU32::new(0),
        stop: AtomicBool::new(false),
    });
    let total = (a.gaps_ns.len() * a.count) as u32;
    let (cpu, prio, words) = (a.cpu, a.priority, (a.work_kib * 1024 / 8).max(8));
    let spin_stop = Arc::new(AtomicBool::new(false));
    let spinner = if awake {
        let stop = spin_stop.clone();
        Some(std::thread::spawn(move || -> std::io::Result<()> {
            sys::pin_to_cpu(cpu)?;
            sys::set_idle_policy()?;
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            Ok(())
        }))
    } else {
        None
    };
    let s2 = sh.clone();
    let sleeper = std::thread::spawn(move || -> std::io::Result<Vec<Sample>> {
        sys::pin_to_cpu(cpu)?;
        if let Some(p) = prio {
            sys::set_fifo(p)?;
        }
        let buf: Vec<u64> = (0..words as u64).collect();
        let mut sink = walk(&buf);
        let mut out = Vec::with_capacity(total as usize);
        let mut seen = 0;
        while seen < total {
            s2.blocked.store(seen + 1, Ordering::Release);
            seen = wait_past(&s2.seq, seen, &s2.stop);
            let woke = sys::mono_ns();
            if s2.stop.load(Ordering::Relaxed) {
                break;
            }
            let t0 = sys::mono_ns();
            sink = sink.wrapping_add(walk(&buf));
            let t1 = sys::mono_ns();
            sink = sink.wrapping_add(walk(&buf));
            let t2 = sys::mono_ns();
            out.push([woke.saturating_sub(s2.sent_ns.load(Ordering::Acquire)), t1 - t0, t2 - t1]);
        }
        std::hint::black_box(sink);
        s2.blocked.store(u32::MAX, Ordering::Release);
        Ok(out)
    });
    // The waker.
    let mut i = 0u32;
    let mut run = || -> Result<(), SysError> {
        sys::pin_to_cpu(a.from_cpu).map_err(failed(format!("sched_setaffinity(CPU {})", a.from_cpu)))?;
        for &gap in &a.gaps_ns {
            for _ in 0..a.count {
                // Wait for the sleeper to block on the next word, then `gap` more.
                loop {
                    let b = sh.blocked.load(Ordering::Acquire);
                    if b == u32::MAX || sys::stop_requested() {
                        return Ok(());
                    }
                    if b == i + 1 {
                        break;
                    }
                    std::hint::spin_loop();
                }
                let due = sys::mono_ns() + gap;
                while sys::mono_ns() < due {
                    std::hint::spin_loop();
                }
                i += 1;
                sh.sent_ns.store(sys::mono_ns(), Ordering::Release);
                sh.seq.store(i, Ordering::Release);
                futex_wake(&sh.seq);
            }
        }
        Ok(())
    };
    let result = run();
    sh.stop.store(true, Ordering::Relaxed);
    sh.seq.fetch_add(1, Ordering::Release);
    futex_wake(&sh.seq);
    let samples = sleeper.join().map_err(|_| SysError::other("the sleeper thread panicked"))?;
    spin_stop.store(true, Ordering::Relaxed);
    if let Some(s) = spinner {
        s.join()
            .map_err(|_| SysError::other("the spinner thread panicked"))?
            .map_err(failed(format!("sched_setscheduler(SCHED_IDLE) on CPU {cpu}")))?;
    }
    result?;
    let samples = samples.map_err(failed(format!("the sleeper on CPU {cpu} (affinity, SCHED_FIFO)")))?;
    let warm = {
        let mut w: Vec<u64> = samples.iter().map(|s| s[2]).collect();
        w.sort_unstable();
        w.get(w.len() / 2).copied().unwrap_or(0)
    };
    let rows = a
        .gaps_ns
        .iter()
        .enumerate()
        .filter_map(|(k, &gap)| {
            let part = samples.get(k * a.count..((k + 1) * a.count).min(samples.len()))?;
            if part.is_empty() {
                return None;
            }
            Some(json!({
                "gap_ns": gap,
                "n": part.len(),
                "wake_latency_ns": quantiles(part.iter().map(|s| s[0]).collect()),
                "work_ns": quantiles(part.iter().map(|s| s[1]).collect()),
                "refill_ns": quantiles(part.iter().map(|s| s[1].saturating_sub(s[2])).collect()),
            }))
        })
        .collect();
    Ok((rows, warm))
}

/// A null system call on `cpu`, ns.
fn syscall_ns() -> u64 {
    let t0 = sys::mono_ns();
    for _ in 0..SYSCALLS {
        // SAFETY: getppid takes no arguments and cannot fail.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    }
    (sys::mono_ns() - t0) / SYSCALLS
}

/// Half a futex round trip between two threads on `cpu`, ns.
fn switch_ns(cpu: usize) -> Result<u64, SysError> {
    let word = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (w2, s2) = (word.clone(), stop.clone());
    let peer = std::thread::spawn(move || -> std::io::Result<()> {
        sys::pin_to_cpu(cpu)?;
        let mut v = 0;
        while !s2.load(Ordering::Relaxed) {
            v = wait_past(&w2, v, &s2);
            if v % 2 == 1 {
                v += 1;
                w2.store(v, Ordering::Release);
                futex_wake(&w2);
            }
        }
        Ok(())
    });
    let t0 = sys::mono_ns();
    let mut v = 0u32;
    for _ in 0..ROUND_TRIPS {
        if sys::stop_requested() {
            break;
        }
        v += 1;
        word.store(v, Ordering::Release);
        futex_wake(&word);
        v = wait_past(&word, v, &stop);
    }
    let ns = (sys::mono_ns() - t0) / (2 * ROUND_TRIPS);
    stop.store(true, Ordering::Relaxed);
    word.fetch_add(1, Ordering::Release);
    futex_wake(&word);
    peer.join()
        .map_err(|_| SysError::other("the switch peer panicked"))?
        .map_err(failed(format!("sched_setaffinity(CPU {cpu})")))?;
    Ok(ns)
}

pub fn run(a: &WakeArgs) -> Result<Value, SysError> {
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    sys::pin_to_cpu(a.cpu).map_err(failed(format!("sched_setaffinity(CPU {})", a.cpu)))?;
    let syscall = syscall_ns();
    let switch = switch_ns(a.cpu)?;
    let (halting, warm) = pass(a, false)?;
    let (awake, _) = pass(a, true)?;
    Ok(json!({
        "cpu": a.cpu,
        "from_cpu": a.from_cpu,
        "priority": a.priority,
        "work_bytes": a.work_kib * 1024,
        "syscall_ns": syscall,
        "switch_ns": switch,
        "warm_work_ns": warm,
        "halting": halting,
        "awake": awake,
        "interrupted": sys::stop_requested(),
    }))
}
