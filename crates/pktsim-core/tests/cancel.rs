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
        (
            "busy-poll",
            "io = \"busy-poll\"\nt_proc = \"10ns\"\n[host.batch]\nsize = 32\nt_empty = \"5ns\"",
            "1Tbit/s",
            "50Mpps",
        ),
        (
            "batched-syscall",
            "io = \"batched-syscall\"\nt_proc = \"10ns\"\n[host.batch]\nsize = 8\nt_call = \"50ns\"",
            "1Tbit/s",
            "50Mpps",
        ),
        ("napi, low load", "io = \"napi\"\nt_irq = \"100ns\"\nt_proc = \"100ns\"", "1Tbit/s", "2Mpps"),
    ];
    for (name, host, link, rate) in hosts {
        let toml = format!("[cpu]\nfrequency = \"3.3GHz\"\n[link]\nrate = \"{link}\"\n[traffic]\nrate = \"{rate}\"\nsize = \"64B\"\n[host]\n{host}\n[measure]\nwarmup = \"0s\"\nduration = \"100s\"\n");
        let sc = common::load(&toml, "modes.toml", &[]);
        let late = stopped_after_flag(&sc, Duration::from_millis(150), name);
        assert!(late < Duration::from_millis(100), "{name}: stopped {late:?} after the flag was set");
    }
}

/// The same for the modes the test above leaves out: threaded NAPI (a kernel thread
/// polling without interrupts, 90 Mpps against 10 ns a frame: busy 99.99%), XDP dropping
/// in the driver and AF_XDP with its reader on the NAPI's core (150 Mpps against 10 and
/// 9 ns a frame: overloaded, the NAPI never completes and a run of 100 ms holds under ten
/// events). Their cores run on without the event queue, so only the checks every 1,024
/// inline units see the flag. Each run would take 100 simulated seconds (minutes of wall
/// time); the flag set 150 ms in must stop it within 100 ms.
#[test]
fn a_flag_stops_threaded_napi_xdp_and_af_xdp_runs_within_100ms() {
    let hosts = [
        (
            "threaded-napi",
            "[host]\nio = \"threaded-napi\"\nt_proc = \"10ns\"\nt_poll = \"50ns\"\nweight = 64\n[host.thread]\nwake_latency = \"1us\"\nt_wakeup = \"100ns\"",
            "90Mpps",
        ),
        (
            "xdp",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[host]\nio = \"xdp\"\nt_irq = \"100ns\"\n[host.xdp]\nmode = \"native\"\naction = \"drop\"\nt_driver = \"10ns\"",
            "150Mpps",
        ),
        (
            "af-xdp",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[host]\nio = \"af-xdp\"\nt_irq = \"100ns\"\nt_poll = \"20ns\"\n[host.xdp]\naction = \"redirect\"\nt_driver = \"5ns\"\nt_prog = \"2ns\"\nt_flush = \"20ns\"\n[host.af_xdp]\nzero_copy = true\nneed_wakeup = true\nbatch = 64\nrx_size = 2048\nt_xsk = \"2ns\"\nt_syscall = \"100ns\"\n[app]\nt_packet = \"2ns\"\nt_call = \"20ns\"\ncore = \"same\"\nwake_latency = \"1us\"\nt_wakeup = \"100ns\"",
            "150Mpps",
        ),
        (
            "af-xdp, a spinning thread of its own",
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[host]\nio = \"af-xdp\"\nt_irq = \"100ns\"\nt_poll = \"20ns\"\n[host.xdp]\naction = \"redirect\"\nt_driver = \"5ns\"\nt_prog = \"2ns\"\nt_flush = \"20ns\"\n[host.af_xdp]\nwait = \"spin\"\nt_xsk = \"2ns\"\n[app]\nt_packet = \"2ns\"\nt_call = \"20ns\"\ncore = \"other\"",
            "1Mpps",
        ),
    ];
    for (name, host, rate) in hosts {
        let toml = format!("[cpu]\nfrequency = \"3.3GHz\"\n[link]\nrate = \"1Tbit/s\"\n[traffic]\nrate = \"{rate}\"\nsize = \"64B\"\n{host}\n[measure]\nwarmup = \"0s\"\nduration = \"100s\"\n");
        let sc = common::load(&toml, "modes.toml", &[]);
        let late = stopped_after_flag(&sc, Duration::from_millis(150), name);
        assert!(late < Duration::from_millis(100), "{name}: stopped {late:?} after the flag was set");
    }
}
