//! A run stops when its cancel flag is set from another thread, within milliseconds, even
//! where a single simulated millisecond holds millions of frames.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktsim_core::engine::{run, INTERRUPTED};
use pktsim_core::Error;

/// Run `sc` with its cancel flag set from another thread `after` a while: how long after
/// the flag the run returned (interrupted, as it must).
fn stopped_after_flag(sc: &pktsim_core::scenario::ResolvedScenario, after: Duration, name: &str) -> Duration {
    let flag = Arc::new(AtomicBool::new(false));
    let setter = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            flag.store(true, Ordering::Relaxed);
            Instant::now()
        })
    };
    let result = run(sc, flag);
    let stopped = Instant::now();
    let set_at = setter.join().unwrap();
    match result {
        Err(Error::Invalid(m)) => assert_eq!(m, INTERRUPTED, "{name}"),
        other => panic!("{name}: expected an interrupted run, got {:?}", other.map(|r| r.forwarded_packets)),
    }
    stopped.saturating_duration_since(set_at)
}

#[test]
fn a_flag_set_from_another_thread_stops_a_run_at_15_gpps() {
    let sc = common::load(
        r#"
        [cpu]
        frequency = "3.3GHz"
        [link]
        rate = "10Tbit/s"
        [traffic]
        size = "64B"
        [cost]
        profile = "raumer2015-64B"
        [measure]
        warmup = "0s"
        duration = "10s"
        "#,
        "fast.toml",
        &[],
    );
    let late = stopped_after_flag(&sc, Duration::from_millis(200), "15 Gpps");
    assert!(late < Duration::from_millis(100), "stopped {late:?} after the flag was set");
}

/// The same for modes whose cores serve frames in runs without the event queue: a server
/// saturated or mostly idle, a busy poller, batched system calls, NAPI at low load.
#[test]
fn a_flag_stops_runs_of_every_mode_within_100ms() {
    let hosts = [
        ("server, saturated", "io = \"server\"\nt_proc = \"10ns\"", "1Tbit/s", "150Mpps"),
        ("server, mostly idle", "io = \"server\"\nt_proc = \"10ns\"", "1Tbit/s", "20Mpps"),
        ("busy-poll", "io = \"busy-poll\"\nt_proc = \"10ns\"\n[host.batch]\nsize = 32\nt_empty = \"5ns\"", "1Tbit/s", "50Mpps"),
        ("batched-syscall", "io = \"batched-syscall\"\nt_proc = \"10ns\"\n[host.batch]\nsize = 8\nt_call = \"50ns\"", "1Tbit/s", "50Mpps"),
        ("napi, low load", "io = \"napi\"\nt_irq = \"100ns\"\nt_proc = \"100ns\"", "1Tbit/s", "2Mpps"),
    ];
    for (name, host, link, rate) in hosts {
        let toml = format!("[cpu]\nfrequency = \"3.3GHz\"\n[link]\nrate = \"{link}\"\n[traffic]\nrate = \"{rate}\"\nsize = \"64B\"\n[host]\n{host}\n[measure]\nwarmup = \"0s\"\nduration = \"100s\"\n");
        let sc = common::load(&toml, "modes.toml", &[]);
        let late = stopped_after_flag(&sc, Duration::from_millis(150), name);
        assert!(late < Duration::from_millis(100), "{name}: stopped {late:?} after the flag was set");
    }
}
