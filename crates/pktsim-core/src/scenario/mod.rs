//! The scenario format, defined once.
//!
//! A scenario describes one node (CPU, link, traffic, costs, FIB) in TOML, or the same
//! structure as JSON from Python. These serde types are the only definition of the format:
//! the JSON Schema (`pktsim schema`) is generated from them, and Python passes its dicts
//! through them.
//!
//! ```toml
//! name = "Linux router, 64 B"
//! seed = 1
//!
//! [cpu]
//! frequency = "3.3GHz"
//! cores = 1
//!
//! [link]
//! rate = "10Gbit/s"
//!
//! [traffic]
//! rate = "1.5Mpps"
//! size = "64B"
//! flows = 1
//!
//! [cost]
//! profile = "raumer2015-64B"
//! ```
//!
//! Each section is defined in its own file, next to its defaults and its checks:
//! `cpu.rs` (`[cpu]`), `link.rs` (`[link]`), `traffic.rs` (`[traffic]` and its sources),
//! `nic.rs` (`[nic]`: rings, interrupt throttling, queues and filters), `host.rs`
//! (`[host]`: I/O mode, NAPI limits, ring strategies), `measure.rs` (`[measure]`),
//! `stalls.rs` (`[traffic.stalls]`: the sender's stalls), `sweep.rs` (`[sweep]`), `cost.rs` (`[cost]` and the cost profile it resolves to) and
//! `fib.rs` (the checks of `[fib]`, whose parameters are [`crate::fib::FibParams`]). Every
//! public item is re-exported here. [`Scenario::resolve`] runs the sections' checks in a
//! fixed order, so that of several problems the same one is always reported. Reading the
//! text, key paths in errors and `--set` are in [`crate::loader`].

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cost::{CostProfile, CostProfileFile, Group, GroupCycles};
use crate::error::{ConfigError, Error, Result};
use crate::fib::{FibModel, FibParams, FibReport};

mod app;
pub mod chain;
mod cost;
mod cpu;
mod fib;
mod freq;
mod host;
mod idle;
pub mod limits;
mod link;
mod measure;
mod nic;
mod ranges;
mod stalls;
mod sweep;
pub mod tagged;
mod traffic;

pub use self::app::{AppCore, AppSpec, AppWait, SocketSpec};
pub use self::cost::{BufferSpec, CostSpec, PagePoolSpec};
pub use self::cpu::{Cpu, Interference, Sched};
pub use self::freq::{Freq, FreqGovernor, HEADROOM};
pub use self::host::{
    AfXdpIo, AfXdpSpec, BatchCalls, BatchedSyscallIo, BusyPollBatch, BusyPollIo, DeviceNapi, EmptyCall, GroBatch,
    HostSpec, IoModeKind, IoSpec, Irq, NapiIo, NetRxAction, Poll, Rings, ServerIo, ServiceDist, Softirq, SoftirqRun,
    StackSpec, StrategyKind, StrategySpec, SyscallBatch, ThreadPolicy, ThreadSpec, ThreadedNapiIo, TxLock, Wakeup,
    XdpAction, XdpIo, XdpMode, XdpSpec, XskRole, XskRxFull, XskWait,
};
pub use self::idle::{deepest_within, halt_state, Governor, Idle, IdleState, IdleTable, ResolvedState};
pub use self::link::{line_rate_pps, Link};
pub use self::measure::{LatencyFrom, LatencyTo, MeasureSpec, TPlus};
pub use self::nic::{
    parse_prefix, DimProfile, Filter, ItrDim, ItrDynamic, ItrOff, ItrSpec, ItrStatic, NicSpec, TxVector,
};
pub use self::stalls::Stalls;
pub use self::sweep::{SweepSpec, SweepValues};
pub use self::traffic::{
    mean_frame_bytes, PacketSize, Pattern, PcapReplay, Proto, RatePoint, ResolvedSource, Source, Synthetic, Traffic,
    TrafficKind, MAX_FRAME_BYTES, MIN_FRAME_BYTES,
};
pub use crate::loader::{
    apply_sets, deserialize_toml, deserialize_value, parse_set_value, parse_toml_table, split_sets,
};

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name for tables and plots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Seed of every random stream (same scenario + same seed = identical results).
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub cpu: Cpu,
    pub link: Link,
    pub traffic: Traffic,
    /// Cycles per packet: a profile, per-group cycles, or both. May be left out when the
    /// host's times (host.t_proc, host.t_clean) are given.
    #[serde(default)]
    pub cost: CostSpec,
    /// FIB size and lookup-cost model (000 V-C, V-D).
    #[serde(default)]
    pub fib: FibParams,
    /// NIC rings, descriptor refill and interrupt moderation (simulator).
    #[serde(default)]
    pub nic: NicSpec,
    /// Host-side packet I/O: IRQ and NAPI costs and limits (simulator).
    #[serde(default)]
    pub host: HostSpec,
    /// The receiving socket of `[app]` (simulator).
    #[serde(default)]
    pub socket: SocketSpec,
    /// An application that reads the frames the stack delivers instead of forwarding them
    /// (simulator; without it the node forwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppSpec>,
    /// What the simulator measures, and for how long.
    #[serde(default)]
    pub measure: MeasureSpec,
    /// A sweep over scenario keys (read by `pktsim sweep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSpec>,
}

/// Every tagged section of a scenario, the one place they are registered (see
/// [`tagged`]).
pub const TAGGED: &[tagged::Section] = &[
    tagged::Section::of::<IoSpec>("host"),
    tagged::Section::of::<ItrSpec>("nic.itr"),
    tagged::Section::of::<TrafficKind>("traffic"),
];

fn default_seed() -> u64 {
    1
}

/// A validated scenario with its cost profile loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedScenario {
    pub scenario: Scenario,
    pub origin: String,
    pub cost: CostProfile,
    pub sources: Vec<ResolvedSource>,
    /// The trace `traffic.pcap` replays (its window read once), if any.
    pub trace: Option<std::sync::Arc<crate::trace::TraceSummary>>,
    /// What loading changed that the file did not say (see [`Scenario::load_table`]): a
    /// note of the run's and the model's report each.
    pub notes: Vec<String>,
}

impl ResolvedScenario {
    /// Processing cycles per group for the node's traffic: per-byte terms at each source's
    /// sizes weighted by packet share, routing moved to the scenario's FIB, the buffer variant
    /// applied. Packet I/O of the batched modes is not included (the simulator charges it per
    /// call; [`crate::model::predict`] adds its share per packet).
    pub fn group_cycles(&self) -> (GroupCycles, FibReport) {
        let sc = self;
        let mut cycles = GroupCycles::default();
        for src in &sc.sources {
            for (size, p) in src.size.distribution() {
                let c = sc.cost.cycles_for_size(size as f64);
                for i in 0..8 {
                    cycles.0[i] += src.share * p * c.0[i];
                }
            }
        }
        let s = &sc.scenario;
        let fib = FibModel::new(&s.fib, &s.cpu.caches, s.cpu.frequency.hz);
        let flows = sc.total_flows();
        let routes = s.fib.routes.unwrap_or(flows);
        let routing = fib.routing_cycles(
            cycles.get(Group::Routing),
            sc.cost.reference_routes,
            sc.cost.reference_flows,
            routes,
            flows,
        );
        cycles.set(Group::Routing, routing);
        // Buffer management: recycling replaces allocation and free; a shared allocator's lock
        // costs more with each core contending for it.
        let b = &s.cost.buffers;
        if let Some(pp) = &b.page_pool {
            // A buffer goes back through the ring where it is released off the pool's
            // NAPI: read by an application, or cleaned by another core's tx queue.
            let (k, h) =
                (s.cpu.cores.max(1) as f64, s.nic.tx_queues.map_or(s.cpu.cores, |q| q.min(s.cpu.cores)).max(1) as f64);
            let ring_share = if s.app.is_some() { 1.0 } else { (k - h) / k };
            let per_buffer =
                (1.0 - ring_share) * pp.fast.cycles + ring_share * pp.ring.cycles + pp.alloc_share * pp.alloc.cycles;
            cycles.set(Group::Alloc, per_buffer);
            cycles.set(Group::Free, 0.0);
        } else if b.recycling {
            cycles.set(Group::Alloc, b.recycle.map_or(0.0, |c| c.cycles));
            cycles.set(Group::Free, 0.0);
        } else if s.cpu.cores > 1 {
            cycles.set(Group::Alloc, cycles.get(Group::Alloc) + b.shared_lock.cycles * (s.cpu.cores - 1) as f64);
        }
        (cycles, fib.report(routes, flows, &s.cpu.caches))
    }

    /// The offered rate in packets per second (the line rate when none is given; a trace's
    /// own rate, times `traffic.rate_scale`, when it replays one).
    pub fn offered_pps(&self) -> f64 {
        let line = self.line_rate_pps();
        if let (Some(t), None) = (&self.trace, self.scenario.traffic.rate) {
            let scale = self.scenario.traffic.pcap().and_then(|p| p.rate_scale);
            return t.rate_pps() * scale.unwrap_or(1.0);
        }
        match self.scenario.traffic.rate {
            Some(r) => r.to_pps(self.mean_frame_bytes(), line),
            None => line,
        }
    }
    pub fn mean_frame_bytes(&self) -> f64 {
        mean_frame_bytes(&self.sources)
    }
    pub fn line_rate_pps(&self) -> f64 {
        line_rate_pps(self.scenario.link.rate.bps, self.mean_frame_bytes(), self.scenario.link.overhead.bytes as f64)
    }
    /// Distinct flows over all sources.
    pub fn total_flows(&self) -> u64 {
        self.sources.iter().map(|s| s.flows).sum()
    }
}

// ---------------------------------------------------------------------------------------
// Loading and validation

impl Scenario {
    /// Load from TOML text. `origin` names the file in errors, `base_dir` resolves relative
    /// profile paths.
    pub fn load_toml(text: &str, origin: &str, base_dir: &Path, sets: &[(String, String)]) -> Result<ResolvedScenario> {
        let table = parse_toml_table(text, origin)?;
        Self::load_table(table, origin, base_dir, sets)
    }

    /// Load from JSON text (what Python sends).
    pub fn load_json(text: &str, origin: &str, base_dir: &Path, sets: &[(String, String)]) -> Result<ResolvedScenario> {
        let table = crate::loader::parse_json_table(text, origin)?;
        Self::load_table(table, origin, base_dir, sets)
    }

    /// Load a scenario file.
    pub fn load_path(path: &Path, sets: &[(String, String)]) -> Result<ResolvedScenario> {
        let text = crate::input::read_text(path)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Self::load_toml(&text, &path.display().to_string(), &base, sets)
    }

    /// Apply the `--set` overrides to a parsed table, deserialize and resolve it.
    ///
    /// Where an override switches the tag of a tagged section (`host.io`, comparing I/O
    /// modes on one file; `nic.itr.mode`), the file's keys the new alternative does not
    /// read are left out, each named in a note of the result ([`tagged::switch`]); an
    /// override that itself gives a key the alternative does not read is still refused.
    pub fn load_table(
        mut table: toml::Table,
        origin: &str,
        base_dir: &Path,
        sets: &[(String, String)],
    ) -> Result<ResolvedScenario> {
        // (What the overrides give, and the file's tags they may switch.)
        let given = (!sets.is_empty()).then(|| crate::loader::sets_table(sets));
        let tags = given.as_ref().map(|_| tagged::tags(TAGGED, &table));
        apply_sets(&mut table, sets)?;
        let notes = match (&given, &tags) {
            (Some(given), Some(tags)) => tagged::switch(TAGGED, tags, &mut table, given),
            _ => Vec::new(),
        };
        let scenario = Self::from_table(table, origin)?;
        let mut sc = scenario.resolve(origin, base_dir)?;
        sc.notes.extend(notes);
        Ok(sc)
    }

    /// Read a scenario's table (overrides applied): its keys, and those of other sections
    /// that only some alternatives of a tagged section read ([`tagged::check_elsewhere`]).
    pub(crate) fn from_table(table: toml::Table, origin: &str) -> Result<Scenario> {
        tagged::check_elsewhere(TAGGED, &table)
            .map_err(|(path, message)| Error::Config(ConfigError::from_serde(origin, path, &message)))?;
        ranges::check(&table, origin)?;
        deserialize_value(toml::Value::Table(table), origin)
    }

    /// Validate and resolve the cost profile.
    ///
    /// Each section checks itself, in this order (of several problems, the first one found
    /// is reported): cpu, link, fib, nic, host, socket and app, measure, traffic, cost.
    pub fn resolve(self, origin: &str, base_dir: &Path) -> Result<ResolvedScenario> {
        self.cpu.validate(origin)?;
        self.link.validate(origin)?;
        fib::validate(&self.fib, origin)?;
        self.nic.validate(origin)?;
        self.host.validate(origin, self.nic.queues.len(), self.cpu.cores, &self.nic.napi)?;
        app::validate(origin, self.app.as_ref(), &self.socket, &self.host, &self.nic.napi)?;
        self.measure.validate(origin)?;
        let ends = match (&self.app, &self.host.io) {
            (Some(_), _) => Some("an [app] reads every frame"),
            (None, IoSpec::AfXdp(_)) => Some("an AF_XDP socket takes every frame"),
            (None, IoSpec::Xdp(x)) if x.xdp.action == XdpAction::Drop => Some("XDP_DROP ends every frame"),
            _ => None,
        };
        self.measure.check_latency_end(origin, ends)?;
        let (trace, sources) = self.traffic.resolve(origin, base_dir, &self.link)?;
        let total_flows = sources.iter().map(|s| s.flows).sum();
        let cost = self.cost.resolve(origin, base_dir, self.cpu.frequency, &self.host, total_flows, self.fib.routes)?;
        let sc =
            ResolvedScenario { scenario: self, origin: origin.to_string(), cost, sources, trace, notes: Vec::new() };
        limits::check(&sc)?;
        Ok(sc)
    }
}

/// Reject `value` at `path` unless it lies in `lo..=hi`; `what` names the quantity
/// ("a number of packets"), the range is added to it.
fn check_range(origin: &str, path: &str, value: u64, lo: u64, hi: u64, what: &str) -> Result<()> {
    if value < lo || value > hi {
        return Err(ConfigError::new(origin, path, Some(value.to_string()), format!("{what} from {lo} to {hi}")).into());
    }
    Ok(())
}

/// JSON Schema of the scenario format (for editors and for Python-side validation).
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}

/// JSON Schema of the cost-profile file format.
pub fn profile_json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(CostProfileFile);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::tagged::keys_of;
    use super::*;

    /// A key's Linux names are declared beside it twice, for serde (`alias`) and for the
    /// schema (`x-aliases`, which the Python side reads): the two agree for every struct
    /// of the format.
    #[test]
    fn every_alias_serde_accepts_is_in_the_schema() {
        fn check<T: serde::de::DeserializeOwned + schemars::JsonSchema>() {
            let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
            let props = schema["properties"].as_object().cloned().unwrap_or_default();
            let mut declared: Vec<String> = props
                .values()
                .flat_map(|p| p["x-aliases"].as_array().cloned().unwrap_or_default())
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect();
            let mut accepted: Vec<String> =
                keys_of::<T>().iter().filter(|k| !props.contains_key(**k)).map(|k| k.to_string()).collect();
            declared.sort();
            accepted.sort();
            assert_eq!(declared, accepted, "{}", std::any::type_name::<T>());
        }
        macro_rules! each {
            ($($t:ty),*) => {$(check::<$t>();)*};
        }
        each!(
            Scenario,
            Cpu,
            Interference,
            Link,
            Synthetic,
            RatePoint,
            PcapReplay,
            Source,
            CostSpec,
            BufferSpec,
            PagePoolSpec,
            NicSpec,
            nic::NapiSpec,
            Filter,
            ItrStatic,
            ItrDynamic,
            ItrDim,
            StackSpec,
            Irq,
            Poll,
            Softirq,
            TxLock,
            Rings,
            GroBatch,
            BatchCalls,
            EmptyCall,
            Wakeup,
            ThreadSpec,
            XdpSpec,
            AfXdpSpec,
            StrategySpec,
            SocketSpec,
            AppSpec,
            MeasureSpec,
            TPlus
        );
        // (And the check sees an alias: one struct with one.)
        assert_eq!(keys_of::<Softirq>().len(), 7);
    }
}
