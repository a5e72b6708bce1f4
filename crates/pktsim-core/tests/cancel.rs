//! A run stops when its cancel flag is set from another thread, within milliseconds, even
//! where a single simulated millisecond holds millions of frames.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktsim_core::engine::{run, INTERRUPTED};
use pktsim_core::Error;

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
    let flag = Arc::new(AtomicBool::new(false));
    let setter = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::Relaxed);
            Instant::now()
        })
    };
    let result = run(&sc, flag);
    let stopped = Instant::now();
    let set_at = setter.join().unwrap();
    match result {
        Err(Error::Invalid(m)) => assert_eq!(m, INTERRUPTED),
        other => panic!("expected an interrupted run, got {:?}", other.map(|r| r.forwarded_packets)),
    }
    let late = stopped.saturating_duration_since(set_at);
    assert!(late < Duration::from_millis(100), "stopped {late:?} after the flag was set");
}
