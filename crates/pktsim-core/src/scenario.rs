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
//! Reading the text, key paths in errors and `--set` are in [`crate::loader`].

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::cost::{self, CostProfile, Groups};
use crate::error::{join_path, ConfigError, Error, Result, VALUE_SEP};
use crate::fib::{Caches, FibParams};
use crate::units::{BitRate, Bytes, Cycles, CyclesPerByte, Duration, Frequency, OfferedRate, Percent, TimePerByte};

pub use crate::loader::{apply_sets, deserialize_toml, deserialize_value, parse_set_value, parse_toml_table, split_sets};

/// Smallest and largest Ethernet frame pktsim accepts (FCS included).
pub const MIN_FRAME_BYTES: u64 = 64;
pub const MAX_FRAME_BYTES: u64 = 9216;

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
    /// What the simulator measures, and for how long.
    #[serde(default)]
    pub measure: MeasureSpec,
    /// A sweep over scenario keys (read by `pktsim sweep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSpec>,
}

/// Keys to sweep and how often to repeat each point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Scenario key -> values: "START:STOP:STEP" with units, or a list.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, SweepValues>,
    /// Runs per point, with seeds seed, seed + 1, ...
    #[serde(default = "one_u32")]
    pub replications: u32,
}

/// Values of a swept key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SweepValues {
    Range(String),
    List(Vec<serde_json::Value>),
}

// ---------------------------------------------------------------------------------------
// Simulator sections

/// Which vector completes transmitted descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TxVector {
    /// The egress port's own vector (a router forwarding from one port to another): tx
    /// completions raise their own IRQs and NAPI polls (002, 003).
    #[default]
    Separate,
    /// The same TxRx vector as the rx ring (forwarding out of the ingress port).
    Shared,
}

/// Interrupt moderation policy of a vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ItrMode {
    /// No throttling: every cause interrupts at once (`rx-usecs 0`).
    Off,
    /// A fixed interval (`rx-usecs N`, in 2.048 us steps).
    Static,
    /// ixgbe's dynamic ITR: states lowest / low / bulk, smoothed by 002 Eq. 1.
    #[default]
    Dynamic,
}

/// Interrupt throttling (ITR) of the NIC's vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItrSpec {
    #[serde(default)]
    pub mode: ItrMode,
    /// Static interval (`ethtool -C rx-usecs`); the NIC rounds down to 2.048 us steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Interrupt rate of the dynamic "bulk" state: 8000 (ixgbe 3.14, 002) or 12000 (Linux >= 4.4).
    #[serde(default = "default_bulk_rate")]
    pub bulk_rate: u32,
}

fn default_bulk_rate() -> u32 {
    8000
}

impl Default for ItrSpec {
    fn default() -> Self {
        ItrSpec { mode: ItrMode::Dynamic, interval: None, bulk_rate: default_bulk_rate() }
    }
}

/// The NIC: rx and tx rings, refill and interrupt generation (ixgbe semantics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// Rx descriptors per ring (one is always left empty, as in ixgbe).
    #[serde(default = "default_ring")]
    pub rx_ring: u32,
    /// Tx descriptors per ring.
    #[serde(default = "default_ring")]
    pub tx_ring: u32,
    /// From the frame's last bit on the wire to its descriptor written back (DMA).
    #[serde(default)]
    pub dma_delay: Duration,
    #[serde(default)]
    pub tx_vector: TxVector,
    /// Rx descriptors are returned to the NIC in batches of at least this many
    /// (`IXGBE_RX_BUFFER_WRITE` = 16), at the top of each rx-clean iteration.
    #[serde(default = "default_refill_batch")]
    pub refill_batch: u32,
    /// Also return the remainder at the end of every rx clean (ixgbe 3.14; modern drivers
    /// leave it for the next poll).
    #[serde(default = "yes")]
    pub refill_at_poll_end: bool,
    /// Most completed tx packets one poll cleans (`IXGBE_DEFAULT_TX_WORK`).
    #[serde(default = "default_tx_work")]
    pub tx_work_limit: u32,
    /// Packets the qdisc holds while the tx ring is full (`txqueuelen`).
    #[serde(default = "default_qdisc")]
    pub qdisc_len: u32,
    #[serde(default)]
    pub itr: ItrSpec,
    /// Rx queues per core, highest priority first (filters name them; one ring each).
    #[serde(default = "default_queues")]
    pub queues: Vec<String>,
    /// Queue for packets no filter matches (default: the last of `queues`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_queue: Option<String>,
    /// n-tuple / priority rules, first match wins (after RSS has chosen the core).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Filter>,
    /// Tx queues on the egress port (default: one per core). Cores share queue
    /// `core % tx_queues` and pay host.tx_lock per packet for its lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_queues: Option<u32>,
}

/// One classification rule; every given field must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Queue (a name in nic.queues) matching packets go to.
    pub queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_pcp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<Proto>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    /// Source address prefix, e.g. "198.18.1.0/24".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination address prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
}

fn default_queues() -> Vec<String> {
    vec!["default".to_string()]
}

fn default_ring() -> u32 {
    512
}
fn default_refill_batch() -> u32 {
    16
}
fn default_tx_work() -> u32 {
    256
}
fn default_qdisc() -> u32 {
    1000
}
fn yes() -> bool {
    true
}

impl Default for NicSpec {
    fn default() -> Self {
        NicSpec {
            rx_ring: default_ring(),
            tx_ring: default_ring(),
            dma_delay: Duration::default(),
            tx_vector: TxVector::default(),
            refill_batch: default_refill_batch(),
            refill_at_poll_end: true,
            tx_work_limit: default_tx_work(),
            qdisc_len: default_qdisc(),
            itr: ItrSpec::default(),
            queues: default_queues(),
            default_queue: None,
            filters: Vec::new(),
            tx_queues: None,
        }
    }
}

/// How a core moves packets between rings and the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IoModeKind {
    /// Linux NAPI with an ixgbe-style driver: hard IRQ, poll list, tx clean + rx clean.
    #[default]
    Napi,
    /// A plain single server: FIFO service from the rx ring, no IRQ or NAPI effects (for
    /// checks against queueing theory).
    Server,
    /// DPDK-style: the core spins on its rings, each call moves up to `host.batch.size`
    /// frames; no interrupts; an empty call costs `t_empty`.
    BusyPoll,
    /// netmap / libpcap style: a system call moves up to `host.batch.size` frames; with
    /// nothing to move the thread sleeps until an interrupt wakes it (`t_wakeup`).
    BatchedSyscall,
    /// Threaded NAPI on a software device (veth): no hard IRQ; the sender schedules the
    /// NAPI, whose kernel thread wakes after `host.thread.wake_latency`, pays
    /// `host.thread.t_wakeup`, then polls up to `host.weight` packets per poll until the
    /// ring is empty and sleeps again.
    ThreadedNapi,
}

/// The NAPI kernel thread of io = "threaded-napi".
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadSpec {
    /// From the sender's napi_schedule (wake_up_process) to the thread running on its CPU:
    /// scheduler and idle-exit latency, during which the CPU does none of this thread's work.
    #[serde(default)]
    pub wake_latency: Duration,
    /// CPU time the thread spends per wake-up besides polling (switching in and out, the
    /// thread loop), charged to the thread like its packet work.
    #[serde(default)]
    pub t_wakeup: Duration,
}

/// Costs of batched packet I/O (io = "busy-poll" or "batched-syscall"). A call that moves
/// n frames costs t_call + n t_packet + bytes t_byte, then each frame its t_proc; the n
/// frames go to the tx ring together at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchSpec {
    /// Most frames one call moves (rx burst size).
    #[serde(default = "default_batch")]
    pub size: u32,
    /// Fixed cost of one call (rx_burst, poll/ioctl system call, pcap_dispatch).
    #[serde(default)]
    pub t_call: Duration,
    /// I/O cost per frame moved (descriptor handling, buffer hand-over).
    #[serde(default)]
    pub t_packet: Duration,
    /// Copy cost per byte (libpcap copies frames; netmap and DPDK do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_byte: Option<TimePerByte>,
    /// Cost of a call that finds nothing (busy-poll).
    #[serde(default)]
    pub t_empty: Duration,
    /// From the interrupt to the sleeping thread running again (batched-syscall).
    #[serde(default)]
    pub t_wakeup: Duration,
}

fn default_batch() -> u32 {
    32
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec { size: default_batch(), t_call: Duration::default(), t_packet: Duration::default(), t_byte: None, t_empty: Duration::default(), t_wakeup: Duration::default() }
    }
}

/// Which `net_rx_action` loop the kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetRxAction {
    /// Linux >= 4.x: the per-CPU list is spliced; a NAPI that used its whole weight is
    /// polled again in the next softirq run.
    #[default]
    Modern,
    /// Linux 2.6 - 3.x (002, 003): the per-CPU list is iterated in place until the budget
    /// or the time limit runs out.
    Legacy,
}

/// Distribution of the per-packet service time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceDist {
    #[default]
    Constant,
    Exponential,
}

/// Host-side costs and NAPI limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    #[serde(default)]
    pub io: IoModeKind,
    /// Cost of one hard IRQ (it preempts softirq work).
    #[serde(default)]
    pub t_irq: Duration,
    /// Rx-clean cost per packet (driver rx to descriptor in the tx ring). Default: the cost
    /// profile's C_total minus C_free, at the CPU frequency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_proc: Option<Duration>,
    /// Tx-clean cost per completed packet. Default: the profile's C_free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_clean: Option<Duration>,
    /// Fixed cost of one poll() call.
    #[serde(default)]
    pub t_poll: Duration,
    /// Distribution of t_proc around its mean.
    #[serde(default)]
    pub service: ServiceDist,
    /// NAPI poll weight (packets per poll).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// `netdev_budget`: packets per net_rx_action.
    #[serde(default = "default_budget")]
    pub budget: u32,
    /// `netdev_budget_usecs`: time limit of one net_rx_action (checked in jiffies).
    #[serde(default = "default_budget_time")]
    pub budget_time: Duration,
    /// Kernel tick rate (CONFIG_HZ), for jiffy-granular time limits.
    #[serde(default = "default_hz")]
    pub hz: u32,
    #[serde(default)]
    pub net_rx_action: NetRxAction,
    /// Per-byte part of t_proc: x = a*S + b + c (001 V-B: a ~ 2ns/B).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_proc_per_byte: Option<TimePerByte>,
    /// Lock hold time per packet on a tx queue shared by several cores.
    #[serde(default)]
    pub tx_lock: Duration,
    /// How a core chooses among its rx rings (io = "server").
    #[serde(default)]
    pub strategy: StrategySpec,
    /// One strategy per core, overriding `strategy` (as many entries as cpu.cores).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_strategies: Vec<StrategySpec>,
    /// Batched I/O costs (io = "busy-poll" or "batched-syscall").
    #[serde(default)]
    pub batch: BatchSpec,
    /// The NAPI thread's wake-up (io = "threaded-napi").
    #[serde(default)]
    pub thread: ThreadSpec,
}

/// Ring-scheduling strategy of a core (001 V-C and friends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StrategyKind {
    /// Single queue: first come, first served across the core's rings (001 SQ).
    #[default]
    Sq,
    /// Round robin with a packet quota per turn (NAPI's weight).
    Quota,
    /// Round robin with a time slice per turn (001 RR).
    Rr,
    /// Strict priority, non-preemptive (001 Prio).
    Prio,
    /// Priority when uncontended, per-queue time slices under contention (001 PrioWFQ).
    Priowfq,
    /// Deficit round robin with per-queue weights.
    Drr,
}

/// Strategy and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrategySpec {
    #[serde(default)]
    pub kind: StrategyKind,
    /// Packets per turn (quota).
    #[serde(default = "default_weight")]
    pub quota: u32,
    /// Time slice per turn (rr).
    #[serde(default = "default_slice")]
    pub slice: Duration,
    /// Time slice per queue, in nic.queues order (priowfq).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<Duration>,
    /// Weight per queue, in nic.queues order (drr).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<u32>,
    /// Bytes per weight unit and turn (drr).
    #[serde(default = "default_quantum")]
    pub quantum: Bytes,
}

fn default_slice() -> Duration {
    Duration::from_ps(1_500_000)
}
fn default_quantum() -> Bytes {
    Bytes::new(1518)
}

impl Default for StrategySpec {
    fn default() -> Self {
        StrategySpec { kind: StrategyKind::Sq, quota: default_weight(), slice: default_slice(), slices: Vec::new(), weights: Vec::new(), quantum: default_quantum() }
    }
}

fn default_weight() -> u32 {
    64
}
fn default_budget() -> u32 {
    300
}
fn default_budget_time() -> Duration {
    Duration::from_ps(2_000_000_000)
}
fn default_hz() -> u32 {
    1000
}

impl Default for HostSpec {
    fn default() -> Self {
        HostSpec {
            io: IoModeKind::default(),
            t_irq: Duration::default(),
            t_proc: None,
            t_clean: None,
            t_poll: Duration::default(),
            service: ServiceDist::default(),
            weight: default_weight(),
            budget: default_budget(),
            budget_time: default_budget_time(),
            hz: default_hz(),
            net_rx_action: NetRxAction::default(),
            t_proc_per_byte: None,
            tx_lock: Duration::default(),
            strategy: StrategySpec::default(),
            core_strategies: Vec::new(),
            batch: BatchSpec::default(),
            thread: ThreadSpec::default(),
        }
    }
}

/// Where a latency measurement starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyFrom {
    /// The frame's last bit received.
    WireIn,
    /// Its descriptor written to the rx ring (002 marker A).
    #[default]
    RxRing,
}

/// Where a latency measurement ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyTo {
    /// Its descriptor written to the tx ring (002 marker B).
    #[default]
    TxRing,
    /// Its last bit sent on the egress link.
    WireOut,
}

/// What to measure and for how long (simulated time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    /// Simulated time before statistics start.
    #[serde(default = "default_warmup")]
    pub warmup: Duration,
    /// Simulated time measured after the warm-up.
    #[serde(default = "default_duration")]
    pub duration: Duration,
    /// Constant added to every latency (hardware not modelled: 002 t_off, 001 T+).
    #[serde(default)]
    pub t_off: Duration,
    #[serde(default)]
    pub latency_from: LatencyFrom,
    #[serde(default)]
    pub latency_to: LatencyTo,
    /// Width of the time-series buckets (none: no time series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// 001's latency adder T+ = 4 T_DMA + 2 nic_batch x (x: the packet's service time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_plus: Option<TPlus>,
    /// Batches for the 95% confidence interval of mean latencies (batch means).
    #[serde(default = "default_batches")]
    pub batches: u32,
}

/// Parameters of 001's T+.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TPlus {
    /// One DMA transfer (001: 2.56us); four per packet.
    pub t_dma: Duration,
    /// Packets batched by the NIC on average on each side (001: 8).
    pub nic_batch: u32,
}

fn default_batches() -> u32 {
    20
}

fn default_warmup() -> Duration {
    Duration::from_ps(10_000_000_000)
}
fn default_duration() -> Duration {
    Duration::from_ps(100_000_000_000)
}

impl Default for MeasureSpec {
    fn default() -> Self {
        MeasureSpec {
            warmup: default_warmup(),
            duration: default_duration(),
            t_off: Duration::default(),
            latency_from: LatencyFrom::default(),
            latency_to: LatencyTo::default(),
            interval: None,
            t_plus: None,
            batches: default_batches(),
        }
    }
}

fn default_seed() -> u64 {
    1
}

/// The processor of the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// Core clock (turbo and power saving off, as in 000 V-A).
    pub frequency: Frequency,
    /// Cores forwarding packets, each with its own rx and tx rings.
    #[serde(default = "one_u32")]
    pub cores: u32,
    /// Extra cycles per packet for each additional core contending for shared state (a
    /// shared tx-queue lock, the allocator). 0 gives 000's linear scaling.
    #[serde(default)]
    pub contention: Cycles,
    #[serde(default)]
    pub caches: Caches,
}

fn one_u32() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}

/// The link packets arrive on (and leave by).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Line rate.
    pub rate: BitRate,
    /// Per-frame overhead on the wire: preamble + SFD (8 B) and inter-frame gap (12 B).
    #[serde(default = "default_overhead")]
    pub overhead: Bytes,
}

fn default_overhead() -> Bytes {
    Bytes::new(20)
}

/// Arrival process of a traffic source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Constant bit rate: evenly spaced packets.
    #[default]
    Cbr,
    /// Poisson arrivals (exponential gaps).
    Poisson,
    /// Gaps drawn from a normal distribution around the mean (coefficient of variation
    /// `cv`), clipped at 0.
    Normal,
    /// Bursts of `burst` frames back to back at the line rate, burst starts spaced by
    /// normally distributed gaps (`cv`), at the source's mean rate (001 VI-A).
    Burst,
}

/// Frame sizes: one size, or a weighted mix (`[["64B", 7], ["576B", 4], ["1500B", 1]]`),
/// or `"imix"` (that 7:4:1 mix).
#[derive(Debug, Clone, PartialEq)]
pub enum PacketSize {
    Fixed(Bytes),
    Mix(Vec<(Bytes, f64)>),
}

impl Default for PacketSize {
    fn default() -> Self {
        PacketSize::Fixed(Bytes::new(64))
    }
}

impl PacketSize {
    pub fn imix() -> Self {
        PacketSize::Mix(vec![(Bytes::new(64), 7.0), (Bytes::new(576), 4.0), (Bytes::new(1500), 1.0)])
    }
    /// `(size, probability)` pairs.
    pub fn distribution(&self) -> Vec<(u64, f64)> {
        match self {
            PacketSize::Fixed(b) => vec![(b.bytes, 1.0)],
            PacketSize::Mix(m) => {
                let total: f64 = m.iter().map(|(_, w)| w).sum();
                m.iter().map(|(b, w)| (b.bytes, w / total)).collect()
            }
        }
    }
    pub fn mean_bytes(&self) -> f64 {
        self.distribution().iter().map(|(b, p)| *b as f64 * p).sum()
    }
}

impl Serialize for PacketSize {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            PacketSize::Fixed(b) => b.serialize(s),
            PacketSize::Mix(m) => {
                let v: Vec<(String, f64)> = m.iter().map(|(b, w)| (b.to_string(), *w)).collect();
                v.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for PacketSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "a frame size (\"64B\"), \"imix\", or a list of [size, weight] pairs ([[\"64B\", 7], [\"1500B\", 1]])";
        impl<'de> Visitor<'de> for V {
            type Value = PacketSize;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<PacketSize, E> {
                if v.trim().eq_ignore_ascii_case("imix") {
                    return Ok(PacketSize::imix());
                }
                Bytes::parse(v).map(PacketSize::Fixed).map_err(|e| {
                    let negative = if e.expected.contains("negative") { " (must not be negative)" } else { "" };
                    E::custom(format!("{:?}{VALUE_SEP}{EXPECTED}{negative}", e.value))
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<PacketSize, E> {
                Err(E::custom(format!("{v}{VALUE_SEP}{EXPECTED}, with its unit (a bare number has no unit)")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<PacketSize, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<PacketSize, E> {
                Err(E::custom(format!("{v}{VALUE_SEP}{EXPECTED}, with its unit (a bare number has no unit)")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<PacketSize, A::Error> {
                let mut out = Vec::new();
                while let Some((size, weight)) = seq.next_element::<(Bytes, f64)>()? {
                    if !(weight.is_finite() && weight > 0.0) {
                        return Err(de::Error::custom(format!("{weight}{VALUE_SEP}a positive, finite weight for {size}")));
                    }
                    out.push((size, weight));
                }
                if out.is_empty() {
                    return Err(de::Error::custom(format!("[]{VALUE_SEP}{EXPECTED} (the list is empty)")));
                }
                Ok(PacketSize::Mix(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for PacketSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PacketSize".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let bytes = g.subschema_for::<Bytes>();
        schemars::json_schema!({
            "description": "Frame size (FCS included): one size, \"imix\", or [[size, weight], ...]",
            "anyOf": [
                bytes,
                {"const": "imix"},
                {"type": "array", "minItems": 1, "items": {"type": "array", "prefixItems": [bytes, {"type": "number", "exclusiveMinimum": 0}], "minItems": 2, "maxItems": 2}}
            ]
        })
    }
}

/// The offered traffic. `rate` is the total of all sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    /// Total offered rate (default: the line rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<OfferedRate>,
    /// Arrival process (default for sources that do not say).
    #[serde(default)]
    pub pattern: Pattern,
    /// Frame size (FCS included).
    #[serde(default)]
    pub size: PacketSize,
    /// Distinct flows (5-tuples; each with its own destination).
    #[serde(default = "one_u64")]
    pub flows: u64,
    /// Several sources sharing the total rate; each inherits what it does not set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
}

/// One traffic source, receiving `share` of `traffic.rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Share of the total offered rate (the shares of all sources add up to 100%).
    pub share: Percent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<PacketSize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u64>,
    /// Traffic class for per-class statistics (default: the source's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// IP TOS byte of its packets (DSCP << 2 | ECN).
    #[serde(default)]
    pub tos: u8,
    /// 802.1Q priority code point, if tagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_pcp: Option<u8>,
    #[serde(default)]
    pub proto: Proto,
    /// Destination port of its flows (source ports vary per flow).
    #[serde(default = "default_dst_port")]
    pub dst_port: u16,
    /// Coefficient of variation of the gaps (patterns "normal" and "burst").
    #[serde(default = "default_cv")]
    pub cv: f64,
    /// Frames per burst (pattern "burst").
    #[serde(default = "default_burst")]
    pub burst: u32,
}

fn default_dst_port() -> u16 {
    5001
}
fn default_cv() -> f64 {
    0.25
}
fn default_burst() -> u32 {
    32
}

/// Transport protocol of a source's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    #[default]
    Udp,
    Tcp,
}

/// Where per-packet costs come from: a profile (bundled name or file), optionally with
/// some groups overridden.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Bundled profile name (e.g. "raumer2015-64B") or a profile file, relative to the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Cycles per packet per group (override the profile's, or give all without a profile).
    #[serde(default)]
    pub cycles: Groups<Cycles>,
    /// Cycles per byte per group.
    #[serde(default)]
    pub per_byte: Groups<CyclesPerByte>,
    /// Packet-buffer management: per-packet allocation and free, or recycling from a pool.
    #[serde(default)]
    pub buffers: BufferSpec,
}

/// How packet buffers are obtained (003 skb recycling, 004 Click packet pool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    /// Take buffers from a per-core pool instead of allocating and freeing each one: the
    /// alloc and free groups are replaced by `recycle`.
    #[serde(default)]
    pub recycling: bool,
    /// Cycles per packet to take a buffer from the pool and give it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recycle: Option<Cycles>,
    /// Cycles per packet added to alloc for each additional core sharing the allocator's
    /// lock (without recycling).
    #[serde(default)]
    pub shared_lock: Cycles,
}

/// One traffic source after inheritance: what the models use.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSource {
    pub name: String,
    pub share: f64,
    pub pattern: Pattern,
    pub size: PacketSize,
    pub flows: u64,
    pub class: String,
    pub tos: u8,
    pub vlan_pcp: Option<u8>,
    pub proto: Proto,
    pub dst_port: u16,
    pub cv: f64,
    pub burst: u32,
}

impl ResolvedSource {
    /// A single source with default packet attributes.
    pub fn simple(name: &str, share: f64, pattern: Pattern, size: PacketSize, flows: u64) -> Self {
        ResolvedSource {
            name: name.to_string(),
            share,
            pattern,
            size,
            flows,
            class: name.to_string(),
            tos: 0,
            vlan_pcp: None,
            proto: Proto::Udp,
            dst_port: default_dst_port(),
            cv: default_cv(),
            burst: default_burst(),
        }
    }
}

/// A validated scenario with its cost profile loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedScenario {
    pub scenario: Scenario,
    pub origin: String,
    pub cost: CostProfile,
    pub sources: Vec<ResolvedSource>,
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
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Self::load_toml(&text, &path.display().to_string(), &base, sets)
    }

    /// Apply the `--set` overrides to a parsed table, deserialize and resolve it.
    fn load_table(mut table: toml::Table, origin: &str, base_dir: &Path, sets: &[(String, String)]) -> Result<ResolvedScenario> {
        apply_sets(&mut table, sets)?;
        let scenario: Scenario = deserialize_value(toml::Value::Table(table), origin)?;
        scenario.resolve(origin, base_dir)
    }

    /// Validate and resolve the cost profile.
    pub fn resolve(self, origin: &str, base_dir: &Path) -> Result<ResolvedScenario> {
        let err = |path: &str, value: String, expected: String| -> Error { ConfigError::new(origin, path, Some(value), expected).into() };

        if !(self.cpu.frequency.hz > 0.0) {
            return Err(err("cpu.frequency", format!("{:?}", self.cpu.frequency.to_string()), "a frequency above 0 Hz".into()));
        }
        if self.cpu.cores == 0 || self.cpu.cores > 4096 {
            return Err(err("cpu.cores", self.cpu.cores.to_string(), "a number of cores from 1 to 4096".into()));
        }
        let c = &self.cpu.caches;
        if c.l1d.bytes == 0 || c.l2.bytes < c.l1d.bytes || c.l3.bytes < c.l2.bytes {
            return Err(err(
                "cpu.caches",
                format!("l1d {}, l2 {}, l3 {}", c.l1d, c.l2, c.l3),
                "cache sizes above 0 B with l1d <= l2 <= l3".into(),
            ));
        }
        if !(self.link.rate.bps > 0.0) {
            return Err(err("link.rate", format!("{:?}", self.link.rate.to_string()), "a line rate above 0 bit/s".into()));
        }
        if self.fib.entry_size.bytes == 0 {
            return Err(err("fib.entry_size", format!("{:?}", self.fib.entry_size.to_string()), "a size above 0 B".into()));
        }
        if !(self.fib.misses_per_lookup.is_finite() && self.fib.misses_per_lookup >= 0.0) {
            return Err(err("fib.misses_per_lookup", self.fib.misses_per_lookup.to_string(), "a finite number >= 0".into()));
        }
        if self.fib.routes == Some(0) {
            return Err(err("fib.routes", "0".into(), "at least 1 route".into()));
        }

        self.validate_simulator_sections(origin)?;
        let sources = self.resolve_sources(origin)?;

        // Line rate for the traffic's mean frame, and the offered rate against it.
        let mean_frame = mean_frame_bytes(&sources);
        let line_rate_pps = line_rate_pps(self.link.rate.bps, mean_frame, self.link.overhead.bytes as f64);
        if let Some(rate) = self.traffic.rate {
            let offered = rate.to_pps(mean_frame, line_rate_pps);
            if !(offered > 0.0) {
                return Err(err("traffic.rate", format!("{:?}", rate.to_string()), "an offered rate above 0".into()));
            }
            if offered > line_rate_pps * (1.0 + 1e-9) {
                return Err(err(
                    "traffic.rate",
                    format!("{:?}", rate.to_string()),
                    format!(
                        "at most the link's line rate of {:.6} Mpps ({} frames + {} framing on {}); an offered load above line rate cannot reach the node",
                        line_rate_pps / 1e6,
                        fmt_mean_frame(mean_frame),
                        self.link.overhead,
                        self.link.rate
                    ),
                ));
            }
        }

        // Cost profile: bundled or file, then overrides.
        let profile = match &self.cost.profile {
            Some(p) => cost::load_profile(p, base_dir, origin, "cost.profile")?,
            None => CostProfile::from_file(cost::CostProfileFile::default(), "inline"),
        };
        let mut cost = profile.with_overrides(&self.cost.cycles, &self.cost.per_byte);
        let groups_given = cost.fixed.get(cost::Group::Alloc) + cost.fixed.get(cost::Group::Free) > 0.0;
        if cost.fixed.total() == 0.0 && self.cost.profile.is_none() {
            // No cycle costs given: take them from the host's times, so that the analytical
            // model and the simulator describe the same node (t_clean frees the transmitted
            // skbs: C_free; the rest of the path is in t_proc, reported under C_other).
            let f = self.cpu.frequency.hz;
            if let Some(t) = self.host.t_proc {
                cost.fixed.set(cost::Group::Other, t.as_secs() * f);
                cost.fixed.set(cost::Group::Free, self.host.t_clean.map_or(0.0, |c| c.as_secs() * f));
                cost.name = "host times".into();
                // Times measured on this node already include its own FIB.
                let flows: u64 = sources.iter().map(|s| s.flows).sum();
                cost.reference_flows = flows;
                cost.reference_routes = self.fib.routes.unwrap_or(flows);
            }
        }
        let b = &self.cost.buffers;
        if b.recycling && b.recycle.is_none() {
            return Err(ConfigError::new(origin, "cost.buffers.recycle", None, "the cycles per packet of taking and returning a pooled buffer, e.g. \"40cycles\"").into());
        }
        if !b.recycling && b.recycle.is_some() {
            return Err(ConfigError::new(origin, "cost.buffers.recycle", b.recycle.map(|c| format!("{:?}", c.to_string())), "no recycle cost unless cost.buffers.recycling = true").into());
        }
        if (b.recycling || b.shared_lock.cycles > 0.0) && (self.host.t_proc.is_some() || !groups_given) {
            return Err(ConfigError::new(
                origin,
                "cost.buffers",
                None,
                "per-packet costs from a cost profile or [cost.cycles] (with alloc and free groups) for the buffer model to change; host.t_proc and host.t_clean are fixed times",
            )
            .into());
        }
        let batched = matches!(self.host.io, IoModeKind::BusyPoll | IoModeKind::BatchedSyscall);
        let batch_cost = batched && (self.host.batch.t_call.ps > 0 || self.host.batch.t_packet.ps > 0 || self.host.batch.t_byte.is_some());
        if !(cost.fixed.total() > 0.0) && !batch_cost {
            return Err(ConfigError::new(
                origin,
                "cost",
                None,
                "a cost profile (cost.profile), cycles per group ([cost.cycles]), host.t_proc or batched I/O costs (host.batch), giving more than 0 cycles per packet",
            )
            .into());
        }
        Ok(ResolvedScenario { scenario: self, origin: origin.to_string(), cost, sources })
    }

    fn validate_simulator_sections(&self, origin: &str) -> Result<()> {
        let range = |path: &str, v: u64, lo: u64, hi: u64, what: &str| -> Result<()> {
            if v < lo || v > hi {
                return Err(ConfigError::new(origin, path, Some(v.to_string()), format!("{what} from {lo} to {hi}")).into());
            }
            Ok(())
        };
        let n = &self.nic;
        range("nic.rx_ring", n.rx_ring as u64, 2, 65_536, "a number of descriptors")?;
        range("nic.tx_ring", n.tx_ring as u64, 2, 65_536, "a number of descriptors")?;
        range("nic.refill_batch", n.refill_batch as u64, 1, n.rx_ring as u64, "a number of descriptors (at most nic.rx_ring)")?;
        range("nic.tx_work_limit", n.tx_work_limit as u64, 1, 1 << 20, "a number of packets")?;
        range("nic.qdisc_len", n.qdisc_len as u64, 0, 1 << 24, "a number of packets")?;
        range("nic.itr.bulk_rate", n.itr.bulk_rate as u64, 956, 488_281, "an interrupt rate in interrupts per second (ixgbe's range)")?;
        match (n.itr.mode, n.itr.interval) {
            (ItrMode::Static, None) => {
                return Err(ConfigError::new(origin, "nic.itr.interval", None, "an interval for mode = \"static\", e.g. \"50us\"").into())
            }
            (ItrMode::Static, Some(i)) => {
                if i.ps > 1_022_000_000 {
                    return Err(ConfigError::new(origin, "nic.itr.interval", Some(format!("{:?}", i.to_string())), "at most 1022us (ixgbe's rx-usecs range)").into());
                }
            }
            (mode, Some(i)) => {
                return Err(ConfigError::new(
                    origin,
                    "nic.itr.interval",
                    Some(format!("{:?}", i.to_string())),
                    format!("no interval with mode = {:?} (only mode = \"static\" reads it)", format!("{mode:?}").to_lowercase()),
                )
                .into())
            }
            _ => {}
        }
        if n.queues.is_empty() {
            return Err(ConfigError::new(origin, "nic.queues", Some("[]".into()), "at least one queue name").into());
        }
        for (i, q) in n.queues.iter().enumerate() {
            if n.queues[..i].contains(q) {
                return Err(ConfigError::new(origin, format!("nic.queues[{i}]"), Some(format!("{q:?}")), "a name not used twice").into());
            }
        }
        let known = |path: String, q: &str| -> Result<()> {
            if n.queues.iter().any(|x| x == q) {
                Ok(())
            } else {
                Err(ConfigError::new(origin, path, Some(format!("{q:?}")), format!("one of nic.queues ({})", n.queues.join(", "))).into())
            }
        };
        if let Some(d) = &n.default_queue {
            known("nic.default_queue".into(), d)?;
        }
        for (i, f) in n.filters.iter().enumerate() {
            known(format!("nic.filters[{i}].queue"), &f.queue)?;
            for (key, v) in [("src", &f.src), ("dst", &f.dst)] {
                if let Some(v) = v {
                    if parse_prefix(v).is_none() {
                        return Err(ConfigError::new(origin, format!("nic.filters[{i}].{key}"), Some(format!("{v:?}")), "an IPv4 prefix such as \"198.18.0.0/15\"").into());
                    }
                }
            }
            if f.dscp.is_some_and(|d| d > 63) {
                return Err(ConfigError::new(origin, format!("nic.filters[{i}].dscp"), f.dscp.map(|d| d.to_string()), "a DSCP from 0 to 63").into());
            }
            if f.vlan_pcp.is_some_and(|d| d > 7) {
                return Err(ConfigError::new(origin, format!("nic.filters[{i}].vlan_pcp"), f.vlan_pcp.map(|d| d.to_string()), "a priority code point from 0 to 7").into());
            }
        }
        if let Some(q) = n.tx_queues {
            range("nic.tx_queues", q as u64, 1, 4096, "a number of tx queues")?;
        }
        let nq = n.queues.len();
        if !self.host.core_strategies.is_empty() && self.host.core_strategies.len() != self.cpu.cores as usize {
            return Err(ConfigError::new(
                origin,
                "host.core_strategies",
                Some(format!("{} entries", self.host.core_strategies.len())),
                format!("one strategy per core ({})", self.cpu.cores),
            )
            .into());
        }
        let specs = std::iter::once(("host.strategy".to_string(), &self.host.strategy))
            .chain(self.host.core_strategies.iter().enumerate().map(|(i, st)| (format!("host.core_strategies[{i}]"), st)));
        for (base, st) in specs {
            let key = |k: &str| format!("{base}.{k}");
            match st.kind {
                StrategyKind::Quota => range(&key("quota"), st.quota as u64, 1, 1 << 20, "a number of packets")?,
                StrategyKind::Rr if st.slice.ps == 0 => {
                    return Err(ConfigError::new(origin, key("slice"), Some("\"0ps\"".into()), "a time slice above 0").into())
                }
                StrategyKind::Priowfq if st.slices.len() != nq || st.slices.iter().any(|d| d.ps == 0) => {
                    return Err(ConfigError::new(
                        origin,
                        key("slices"),
                        Some(format!("{} slices", st.slices.len())),
                        format!("one time slice above 0 per queue in nic.queues ({nq}), highest priority first"),
                    )
                    .into())
                }
                StrategyKind::Drr if st.weights.len() != nq || st.weights.contains(&0) || st.quantum.bytes == 0 => {
                    return Err(ConfigError::new(
                        origin,
                        key("weights"),
                        Some(format!("{:?}", st.weights)),
                        format!("one weight above 0 per queue in nic.queues ({nq}), and a quantum above 0 B"),
                    )
                    .into())
                }
                _ => {}
            }
        }
        range("host.batch.size", self.host.batch.size as u64, 1, 1 << 16, "a number of frames per call")?;
        if self.host.io == IoModeKind::BusyPoll && self.host.batch.t_empty.ps == 0 && self.host.batch.t_call.ps == 0 {
            return Err(ConfigError::new(
                origin,
                "host.batch.t_empty",
                Some("\"0ns\"".into()),
                "a cost above 0 for an empty poll (or host.batch.t_call): a core spinning for free never lets time pass",
            )
            .into());
        }
        if self.host.io != IoModeKind::ThreadedNapi && self.host.thread != ThreadSpec::default() {
            return Err(ConfigError::new(origin, "host.thread", None, "no [host.thread] unless host.io = \"threaded-napi\" (only a NAPI thread has a wake-up)").into());
        }
        let h = &self.host;
        range("host.weight", h.weight as u64, 1, 1 << 16, "a number of packets")?;
        range("host.budget", h.budget as u64, 1, 1 << 24, "a number of packets")?;
        range("host.hz", h.hz as u64, 100, 10_000, "a tick rate in Hz")?;
        if h.budget_time.ps == 0 {
            return Err(ConfigError::new(origin, "host.budget_time", Some("\"0ps\"".into()), "a time above 0").into());
        }
        let m = &self.measure;
        range("measure.batches", m.batches as u64, 2, 1000, "a number of batches")?;
        if m.duration.ps == 0 {
            return Err(ConfigError::new(origin, "measure.duration", Some(format!("{:?}", m.duration.to_string())), "a simulated time above 0").into());
        }
        if let Some(i) = m.interval {
            if i.ps == 0 || m.duration.ps / i.ps > 1_000_000 {
                return Err(ConfigError::new(
                    origin,
                    "measure.interval",
                    Some(format!("{:?}", i.to_string())),
                    "a bucket width above 0 giving at most 1,000,000 buckets over measure.duration",
                )
                .into());
            }
        }
        Ok(())
    }

    fn resolve_sources(&self, origin: &str) -> Result<Vec<ResolvedSource>> {
        let t = &self.traffic;
        let check_size = |path: String, size: &PacketSize| -> Result<()> {
            for (b, _) in size.distribution() {
                if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&b) {
                    return Err(ConfigError::new(
                        origin,
                        path,
                        Some(format!("\"{b}B\"")),
                        format!("an Ethernet frame size from {MIN_FRAME_BYTES}B to {MAX_FRAME_BYTES}B (FCS included)"),
                    )
                    .into());
                }
            }
            Ok(())
        };
        let check_flows = |path: String, flows: u64| -> Result<()> {
            if flows == 0 {
                return Err(ConfigError::new(origin, path, Some("0".into()), "at least 1 flow").into());
            }
            Ok(())
        };
        check_size("traffic.size".into(), &t.size)?;
        check_flows("traffic.flows".into(), t.flows)?;
        if t.sources.is_empty() {
            return Ok(vec![ResolvedSource::simple("traffic", 1.0, t.pattern, t.size.clone(), t.flows)]);
        }
        let mut out = Vec::new();
        let mut total = 0.0;
        for (i, s) in t.sources.iter().enumerate() {
            let p = format!("traffic.sources[{i}]");
            total += s.share.fraction;
            let size = s.size.clone().unwrap_or_else(|| t.size.clone());
            check_size(join_path(&p, "size"), &size)?;
            let flows = s.flows.unwrap_or(t.flows);
            check_flows(join_path(&p, "flows"), flows)?;
            if !(s.cv.is_finite() && s.cv >= 0.0) {
                return Err(ConfigError::new(origin, join_path(&p, "cv"), Some(s.cv.to_string()), "a coefficient of variation >= 0").into());
            }
            if s.burst == 0 {
                return Err(ConfigError::new(origin, join_path(&p, "burst"), Some("0".into()), "at least 1 frame per burst").into());
            }
            let name = s.name.clone().unwrap_or_else(|| format!("source{i}"));
            out.push(ResolvedSource {
                class: s.class.clone().unwrap_or_else(|| name.clone()),
                name,
                share: s.share.fraction,
                pattern: s.pattern.unwrap_or(t.pattern),
                size,
                flows,
                tos: s.tos,
                vlan_pcp: s.vlan_pcp,
                proto: s.proto,
                dst_port: s.dst_port,
                cv: s.cv,
                burst: s.burst,
            });
        }
        if t.sources.iter().all(|s| s.share.fraction == 0.0) {
            return Err(ConfigError::new(origin, "traffic.sources", None, "at least one source with a share above 0%").into());
        }
        if (total - 1.0).abs() > 1e-6 {
            return Err(ConfigError::new(
                origin,
                "traffic.sources",
                Some(format!("shares adding up to {}%", (total * 1e8).round() / 1e6)),
                "shares adding up to 100%".to_string(),
            )
            .into());
        }
        Ok(out)
    }
}

fn fmt_mean_frame(mean: f64) -> String {
    if mean.fract() == 0.0 {
        format!("{mean}B")
    } else {
        format!("{mean:.1}B (mean)")
    }
}

/// `"198.18.0.0/15"` -> (address, prefix length).
pub fn parse_prefix(text: &str) -> Option<(u32, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, l.parse::<u8>().ok()?),
        None => (text, 32),
    };
    if len > 32 {
        return None;
    }
    let ip: std::net::Ipv4Addr = addr.trim().parse().ok()?;
    Some((u32::from(ip), len))
}

/// Mean frame size over all sources, weighted by their packet-rate shares.
pub fn mean_frame_bytes(sources: &[ResolvedSource]) -> f64 {
    sources.iter().map(|s| s.share * s.size.mean_bytes()).sum()
}

/// Packets per second a link carries at line rate: `rate / (8 * (frame + overhead))`.
/// 64 B frames at 10 Gbit/s with 20 B overhead: 14.880952 Mpps.
pub fn line_rate_pps(link_bps: f64, mean_frame_bytes: f64, overhead_bytes: f64) -> f64 {
    link_bps / (8.0 * (mean_frame_bytes + overhead_bytes))
}

impl ResolvedScenario {
    /// The offered rate in packets per second (the line rate when none is given).
    pub fn offered_pps(&self) -> f64 {
        let line = self.line_rate_pps();
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

/// JSON Schema of the scenario format (for editors and for Python-side validation).
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}

/// JSON Schema of the cost-profile file format.
pub fn profile_json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(cost::CostProfileFile);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}
