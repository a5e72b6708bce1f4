//! Test support: a scripted ingress (frames at given times), an egress port that records
//! every departure, and a node built from a TOML snippet — for hand-traced unit tests of
//! the NIC and of each I/O mode.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::scenario::{ResolvedScenario, Scenario};

use super::ingress::{Ingress, Packet};
use super::nic::Egress;
use super::report::SimResult;
use super::time::Instant;
use super::SimNode;

/// Frames at given times: (last bit received, in ns; size in bytes), all of flow 0 of
/// source 0.
pub struct Scripted {
    frames: VecDeque<Packet>,
    delivered: u64,
}

impl Scripted {
    pub fn new(frames: &[(u64, u16)]) -> Self {
        let frames: Vec<(u64, u16, u16)> = frames.iter().map(|&(ns, size)| (ns, size, 0)).collect();
        Self::from_sources(&frames)
    }
    /// Frames (last bit received, in ns; size in bytes; source index), each source's flow 0.
    pub fn from_sources(frames: &[(u64, u16, u16)]) -> Self {
        let frames = frames
            .iter()
            .map(|&(ns, size, source)| Packet::arriving(Instant::from_ps(ns * 1_000), size, source, 0))
            .collect();
        Scripted { frames, delivered: 0 }
    }
}

impl Ingress for Scripted {
    fn next_packet(&mut self) -> Option<Packet> {
        let p = self.frames.pop_front()?;
        self.delivered += 1;
        Some(p)
    }
    fn delivered(&self) -> u64 {
        self.delivered
    }
}

/// Departures as the egress port saw them: (descriptor posted, last bit left), in ns,
/// and each frame's origin time (ns), which a next node would carry on.
#[derive(Clone, Default)]
pub struct Departures(Arc<Mutex<DepartureLog>>);

/// (posted, done) times in ns, and origin times in ns.
type DepartureLog = (Vec<(f64, f64)>, Vec<f64>);

impl Departures {
    pub fn get(&self) -> (Vec<(f64, f64)>, Vec<f64>) {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Egress for Departures {
    fn depart(&mut self, p: &Packet, t_tx: Instant, t_done: Instant) {
        if let Ok(mut v) = self.0.lock() {
            v.0.push((t_tx.ps() as f64 / 1e3, t_done.ps() as f64 / 1e3));
            v.1.push(p.t_origin.ps() as f64 / 1e3);
        }
    }
}

/// A scenario from TOML (panics on a bad snippet: tests only).
pub fn scenario(toml: &str) -> ResolvedScenario {
    Scenario::load_toml(toml, "trace.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// Run the node `toml` describes on `frames` (ns, bytes): its report and its departures.
pub fn trace(toml: &str, frames: &[(u64, u16)]) -> (SimResult, Vec<(f64, f64)>) {
    let (r, departures, _) = trace_origins(toml, frames);
    (r, departures)
}

/// [`trace`], with the origin time of each departed frame.
pub fn trace_origins(toml: &str, frames: &[(u64, u16)]) -> (SimResult, Vec<(f64, f64)>, Vec<f64>) {
    run_scripted(toml, Scripted::new(frames))
}

/// [`trace`] with frames of several sources (ns, bytes, source index): the scenario's
/// `traffic.sources` (their TOS, ...) steer them to rings.
pub fn trace_sources(toml: &str, frames: &[(u64, u16, u16)]) -> (SimResult, Vec<(f64, f64)>) {
    let (r, departures, _) = run_scripted(toml, Scripted::from_sources(frames));
    (r, departures)
}

fn run_scripted(toml: &str, ingress: Scripted) -> (SimResult, Vec<(f64, f64)>, Vec<f64>) {
    let sc = scenario(toml);
    let mut node = SimNode::with_ingress(&sc, Box::new(ingress));
    let departures = Departures::default();
    node.connect_egress(Box::new(departures.clone()));
    node.run().unwrap_or_else(|e| panic!("{e}"));
    let (departed, origins) = departures.get();
    (node.report(0.0), departed, origins)
}

/// A 1-core node at 10 Gbit/s (64 B frames: 67.2 ns on the wire), no DMA delay, measured
/// from 0 for 1 ms; `host` is the body of its [host] table, `extra` more tables. A hand
/// trace prices only what it gives: an interrupt or a poll its mode has costs nothing
/// unless `host` gives `t_irq` or `t_poll`, nor an application's call or wake-up unless
/// `extra` gives `app.t_call` or `app.t_wakeup` (the format's defaults are a measured machine's),
/// and its cores never leave C0 unless `extra` gives `[cpu.idle]`.
pub fn node_toml(host: &str, extra: &str) -> String {
    let io = host.lines().find_map(|l| l.trim().strip_prefix("io = ")).map_or("napi", |v| v.trim_matches('"'));
    let mut host = host.to_string();
    if matches!(io, "napi" | "xdp" | "af-xdp" | "batched-syscall") && !host.contains("t_irq") {
        host.insert_str(0, "t_irq = \"0ns\"\n");
    }
    if matches!(io, "napi" | "xdp" | "af-xdp" | "threaded-napi") && !host.contains("t_poll") {
        host.insert_str(0, "t_poll = \"0ns\"\n");
    }
    let idle = if extra.contains("[cpu.idle]") { "" } else { "[cpu.idle]\ntable = \"poll\"" };
    // An application's calls and wake-ups cost what the trace gives, too.
    let mut extra = extra.to_string();
    for key in ["t_call", "t_wakeup"] {
        if extra.contains("[app]") && !extra.contains(key) {
            extra = extra.replacen("[app]", &format!("[app]\n{key} = \"0ns\""), 1);
        }
    }
    format!(
        r#"
        [cpu]
        frequency = "1GHz"
        [link]
        rate = "10Gbit/s"
        [traffic]
        rate = "100kpps"
        [host]
        {host}
        [measure]
        warmup = "0s"
        duration = "1ms"
        {extra}
        {idle}
        "#
    )
}

/// A result as JSON without what depends on how it was computed (wall time, events), and
/// its events: for tests that hold two ways of computing a run equal.
pub fn figures_of(r: SimResult) -> (serde_json::Value, u64) {
    let events = r.events;
    let mut v = serde_json::to_value(r).unwrap_or_default();
    for k in ["wall_s", "events"] {
        v.as_object_mut().map(|o| o.remove(k));
    }
    (v, events)
}
