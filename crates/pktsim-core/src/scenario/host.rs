//! `[host]`: host-side packet I/O (the I/O mode, IRQ and NAPI costs and limits, batched I/O,
//! the NAPI thread) and how each core schedules its rx rings; and their checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check_range;
use crate::error::{ConfigError, Result};
use crate::units::{Bytes, Duration, TimePerByte};

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
    /// NAPI with an XDP program (`[host.xdp]`): native, in the driver's rx clean before any
    /// skb exists, or generic, after the skb is built; its action decides each frame's fate.
    Xdp,
    /// AF_XDP: an XDP program (`[host.xdp]`, action "redirect") sends every frame to an
    /// AF_XDP socket of its queue, read by the `[app]` thread in user space
    /// (`[host.af_xdp]`).
    AfXdp,
}

/// The AF_XDP socket and its user-space thread's ring handling (io = "af-xdp").
///
/// Per frame in the kernel, besides the program's path (`host.xdp.t_driver + t_prog`):
/// `t_xsk` (the descriptor onto the socket's rx ring), and in copy mode `t_copy` plus
/// `t_copy_per_byte` (`xsk_rcv` copies into a umem frame). The rx ring is published at
/// the end of each poll (`xsk_flush`, `host.xdp.t_flush`). The user thread (`[app]`: its
/// per-frame work `t_packet`, ring handling per batch `t_call`, wake-up) takes up to
/// `batch` frames a time; without `need_wakeup` it makes a system call (`t_syscall`)
/// every batch to kick the kernel, with it only when it slept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AfXdpSpec {
    /// `XDP_ZEROCOPY` (else `XDP_COPY`).
    #[serde(default = "yes")]
    pub zero_copy: bool,
    /// `XDP_USE_NEED_WAKEUP`.
    #[serde(default = "yes")]
    pub need_wakeup: bool,
    /// Frames the user thread takes from the rx ring at a time (and its busy-poll budget).
    #[serde(default = "default_xsk_batch")]
    pub batch: u32,
    /// The user thread busy polls its NAPI with `recvfrom` (`SO_BUSY_POLL`,
    /// `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL_BUDGET` = batch) instead of sleeping in `poll()`.
    #[serde(default)]
    pub busy_poll: bool,
    /// Entries of the socket's rx ring (`XSK_RING_CONS__DEFAULT_NUM_DESCS` = 2048); a frame
    /// that finds it full is dropped (`rx_ring_full` in `XDP_STATISTICS`).
    #[serde(default = "default_xsk_ring")]
    pub rx_size: u32,
    /// Kernel time per frame to put its descriptor on the rx ring (`__xsk_rcv_zc`).
    #[serde(default)]
    pub t_xsk: Duration,
    /// Copy mode: fixed and per-byte time of copying a frame into the umem.
    #[serde(default)]
    pub t_copy: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_copy_per_byte: Option<TimePerByte>,
    /// One kick system call (`sendto` / `recvfrom` / `poll`).
    #[serde(default)]
    pub t_syscall: Duration,
}

fn yes() -> bool {
    true
}
fn default_xsk_batch() -> u32 {
    64
}
fn default_xsk_ring() -> u32 {
    2048
}

impl Default for AfXdpSpec {
    fn default() -> Self {
        AfXdpSpec {
            zero_copy: true,
            need_wakeup: true,
            batch: default_xsk_batch(),
            busy_poll: false,
            rx_size: default_xsk_ring(),
            t_xsk: Duration::default(),
            t_copy: Duration::default(),
            t_copy_per_byte: None,
            t_syscall: Duration::default(),
        }
    }
}

/// Where the XDP program runs (`ip link set dev X xdp` / `xdpgeneric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    /// In the driver's rx clean, on the raw buffer (`XDP_FLAGS_DRV_MODE`).
    #[default]
    Native,
    /// In the stack after the skb is built (`do_xdp_generic`, `XDP_FLAGS_SKB_MODE`).
    Generic,
}

/// The verdict the program returns for every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum XdpAction {
    /// `XDP_DROP`: the buffer is recycled (native) or the skb freed (generic).
    Drop,
    /// `XDP_PASS`: on to the stack, which forwards the frame as without XDP.
    #[default]
    Pass,
    /// `XDP_TX`: back out of the port it came in on.
    Tx,
    /// `XDP_REDIRECT` through a devmap to the egress port.
    Redirect,
}

/// The XDP program and what its path costs (io = "xdp").
///
/// Per frame: native drop `t_driver + t_prog`; native tx and redirect `t_driver + t_prog +
/// t_xmit`, posted in bulk (`t_flush` per bulk: at the end of the poll, and for redirect
/// whenever 16 frames wait, as `xdp_do_flush` and the devmap bulk queue do); generic drop
/// `t_skb + t_prog + t_clean` (the skb is freed); generic tx and redirect `t_skb + t_prog +
/// t_xmit`, sent at once; pass, either mode, `t_prog` plus the stack's `t_proc`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct XdpSpec {
    #[serde(default)]
    pub mode: XdpMode,
    #[serde(default)]
    pub action: XdpAction,
    /// Running the program on one frame (with its maps and helpers).
    #[serde(default)]
    pub t_prog: Duration,
    /// Native: the driver's own work for one frame on the XDP path (descriptor, DMA sync,
    /// `xdp_buff`, buffer recycling), without an skb.
    #[serde(default)]
    pub t_driver: Duration,
    /// Tx and redirect: putting one frame on the tx ring (`XDP_TX`, `ndo_xdp_xmit`).
    #[serde(default)]
    pub t_xmit: Duration,
    /// Native tx and redirect: one bulk flush (the tx doorbell; `xdp_do_flush`).
    #[serde(default)]
    pub t_flush: Duration,
    /// Generic: the part of a frame's processing before the hook (driver rx and skb
    /// allocation). Default: the cost profile's RX and alloc groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_skb: Option<Duration>,
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
        BatchSpec {
            size: default_batch(),
            t_call: Duration::default(),
            t_packet: Duration::default(),
            t_byte: None,
            t_empty: Duration::default(),
            t_wakeup: Duration::default(),
        }
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
    /// `net.core.gro_normal_batch`: frames GRO hands to the stack together. On a veth with
    /// threaded NAPI (`host.io = "threaded-napi"`) a poll consumes frames from the ring one
    /// by one and processes them in lists of this many; frames that come while a list
    /// shorter than this (the ring ran empty) is processed wait for the next poll.
    #[serde(default = "default_gro_normal_batch")]
    pub gro_normal_batch: u32,
    /// `net.core.netdev_budget`: packets per net_rx_action (also accepted as
    /// `netdev_budget`).
    #[serde(default = "default_budget", alias = "netdev_budget")]
    pub budget: u32,
    /// `net.core.netdev_budget_usecs`: time limit of one net_rx_action, checked in jiffies
    /// (also accepted as `netdev_budget_usecs`, with a unit: "2000us").
    #[serde(default = "default_budget_time", alias = "netdev_budget_usecs")]
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
    /// The XDP program (io = "xdp", "af-xdp").
    #[serde(default)]
    pub xdp: XdpSpec,
    /// The AF_XDP socket (io = "af-xdp").
    #[serde(default)]
    pub af_xdp: AfXdpSpec,
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
    /// Round robin with a time slice per turn, preemptive: a slice may end mid-frame (001 RR).
    Rr,
    /// Strict priority, non-preemptive (001 Prio).
    Prio,
    /// Priority when uncontended, per-queue preemptive time slices under contention (001 PrioWFQ).
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
    /// Time slice per turn (rr); the core is revoked at its end, mid-frame if need be.
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
        StrategySpec {
            kind: StrategyKind::Sq,
            quota: default_weight(),
            slice: default_slice(),
            slices: Vec::new(),
            weights: Vec::new(),
            quantum: default_quantum(),
        }
    }
}

fn default_gro_normal_batch() -> u32 {
    8
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
            gro_normal_batch: default_gro_normal_batch(),
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
            xdp: XdpSpec::default(),
            af_xdp: AfXdpSpec::default(),
        }
    }
}

impl HostSpec {
    /// The strategies' parameters, batched I/O, the NAPI thread and the NAPI limits.
    ///
    /// Strategies are checked against the neighbouring sections, passed in: `queues` is the
    /// number of rx queues per core (`nic.queues`; priowfq and drr give one slice or weight
    /// per queue) and `cores` is `cpu.cores` (one entry of `core_strategies` per core).
    pub(super) fn validate(&self, origin: &str, queues: usize, cores: u32, napi: &super::nic::NapiSpec) -> Result<()> {
        let range = |path: &str, v: u64, lo: u64, hi: u64, what: &str| check_range(origin, path, v, lo, hi, what);
        // (Other modes' keys are refused by check_mode_keys, after these checks.)
        self.validate_xdp(origin)?;
        range(
            "nic.napi.defer_hard_irqs",
            napi.defer_hard_irqs as u64,
            0,
            i32::MAX as u64,
            "a number of empty polls (the kernel's s32)",
        )?;
        if !self.core_strategies.is_empty() && self.core_strategies.len() != cores as usize {
            return Err(ConfigError::new(
                origin,
                "host.core_strategies",
                Some(format!("{} entries", self.core_strategies.len())),
                format!("one strategy per core ({cores})"),
            )
            .into());
        }
        let specs = std::iter::once(("host.strategy".to_string(), &self.strategy))
            .chain(self.core_strategies.iter().enumerate().map(|(i, st)| (format!("host.core_strategies[{i}]"), st)));
        for (base, st) in specs {
            let key = |k: &str| format!("{base}.{k}");
            match st.kind {
                StrategyKind::Quota => range(&key("quota"), st.quota as u64, 1, 1 << 20, "a number of packets")?,
                StrategyKind::Rr if st.slice.ps == 0 => {
                    return Err(
                        ConfigError::new(origin, key("slice"), Some("\"0ps\"".into()), "a time slice above 0").into()
                    )
                }
                StrategyKind::Priowfq if st.slices.len() != queues || st.slices.iter().any(|d| d.ps == 0) => {
                    return Err(ConfigError::new(
                        origin,
                        key("slices"),
                        Some(format!("{} slices", st.slices.len())),
                        format!("one time slice above 0 per queue in nic.queues ({queues}), highest priority first"),
                    )
                    .into())
                }
                StrategyKind::Drr if st.weights.len() != queues || st.weights.contains(&0) || st.quantum.bytes == 0 => {
                    return Err(ConfigError::new(
                        origin,
                        key("weights"),
                        Some(format!("{:?}", st.weights)),
                        format!("one weight above 0 per queue in nic.queues ({queues}), and a quantum above 0 B"),
                    )
                    .into())
                }
                _ => {}
            }
        }
        range("host.batch.size", self.batch.size as u64, 1, 1 << 16, "a number of frames per call")?;
        if self.io == IoModeKind::BusyPoll && self.batch.t_empty.ps == 0 && self.batch.t_call.ps == 0 {
            return Err(ConfigError::new(
                origin,
                "host.batch.t_empty",
                Some("\"0ns\"".into()),
                "a cost above 0 for an empty poll (or host.batch.t_call): a core spinning for free never lets time pass",
            )
            .into());
        }
        range("host.weight", self.weight as u64, 1, 1 << 16, "a number of packets")?;
        range("host.gro_normal_batch", self.gro_normal_batch as u64, 1, 1 << 16, "a number of frames")?;
        range("host.budget", self.budget as u64, 1, 1 << 24, "a number of packets")?;
        range("host.hz", self.hz as u64, 100, 10_000, "a tick rate in Hz")?;
        if self.budget_time.ps == 0 {
            return Err(ConfigError::new(origin, "host.budget_time", Some("\"0ps\"".into()), "a time above 0").into());
        }
        Ok(())
    }
}

impl IoModeKind {
    /// The `host.io` value, as the scenario format writes it.
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}

/// A key that only some I/O modes read, as a scenario gives it (see
/// [`HostSpec::unread_mode_keys`]).
pub struct ModeKey {
    /// Its path (`host.t_irq`, `nic.itr`).
    pub key: &'static str,
    /// Its Linux names, also accepted (`host.netdev_budget`).
    aliases: &'static [&'static str],
    /// Its value where it is given, not at its default (a table: ""); None where it is not.
    value: Option<String>,
    /// The modes that read it, and why the others do not.
    modes: &'static [IoModeKind],
    why: &'static str,
    /// Put it back to its default.
    reset: fn(&mut HostSpec, &mut super::nic::NicSpec),
}

impl ModeKey {
    /// Its path and its Linux names.
    pub fn paths(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.key).chain(self.aliases.iter().copied())
    }

    /// Back to its default: as if the scenario had not given it.
    pub fn reset(&self, host: &mut HostSpec, nic: &mut super::nic::NicSpec) {
        (self.reset)(host, nic)
    }
}

impl HostSpec {
    /// Keys that only some I/O modes read, given (not at their defaults) with another mode:
    /// each names the modes that read it and why the others do not (a value nothing reads
    /// would change nothing, silently). `nic` is `[nic]` (its `itr` and `napi`).
    pub fn unread_mode_keys(&self, nic: &super::nic::NicSpec) -> Vec<ModeKey> {
        use IoModeKind::*;
        const NAPI: &[IoModeKind] = &[Napi, Xdp, AfXdp];
        const NAPI_OR_THREAD: &[IoModeKind] = &[Napi, Xdp, AfXdp, ThreadedNapi];
        const PICKERS: &[IoModeKind] = &[Server, BusyPoll, BatchedSyscall];
        let (d, b) = (HostSpec::default(), BatchSpec::default());
        let napi = &nic.napi;
        let calls = BatchSpec { t_empty: b.t_empty, t_wakeup: b.t_wakeup, ..self.batch.clone() } != b;
        // (A value is written out only where it is given.)
        fn given(changed: bool, v: impl FnOnce() -> String) -> Option<String> {
            changed.then(v)
        }
        let time = |x: Duration, y: Duration| given(x != y, || format!("\"{x}\""));
        let table = |changed: bool| given(changed, String::new);
        let key = |key, value, modes, why, reset| ModeKey { key, aliases: &[], value, modes, why, reset };
        let keys = [
            key("host.t_irq", time(self.t_irq, d.t_irq), &[Napi, Xdp, AfXdp, BatchedSyscall], "the others take no hard IRQ (a server and a busy poller never sleep, a software device's sender schedules its NAPI thread)", |h, _| h.t_irq = HostSpec::default().t_irq),
            key("host.t_poll", time(self.t_poll, d.t_poll), NAPI_OR_THREAD, "only a NAPI is polled", |h, _| h.t_poll = HostSpec::default().t_poll),
            key("host.weight", given(self.weight != d.weight, || self.weight.to_string()), NAPI_OR_THREAD, "only a NAPI poll has a weight (a call moves up to host.batch.size frames)", |h, _| h.weight = HostSpec::default().weight),
            ModeKey { aliases: &["host.netdev_budget"], ..key("host.budget", given(self.budget != d.budget, || self.budget.to_string()), NAPI, "only net_rx_action has a budget (a NAPI thread polls by weight alone)", |h, _| h.budget = HostSpec::default().budget) },
            ModeKey { aliases: &["host.netdev_budget_usecs"], ..key("host.budget_time", time(self.budget_time, d.budget_time), NAPI, "only net_rx_action has a time limit", |h, _| h.budget_time = HostSpec::default().budget_time) },
            key("host.net_rx_action", given(self.net_rx_action != d.net_rx_action, || format!("\"{:?}\"", self.net_rx_action).to_lowercase()), NAPI, "only a device's softirq runs net_rx_action", |h, _| h.net_rx_action = HostSpec::default().net_rx_action),
            key("host.gro_normal_batch", given(self.gro_normal_batch != d.gro_normal_batch, || self.gro_normal_batch.to_string()), &[ThreadedNapi], "only the software device's poll hands frames on in gro_normal lists here", |h, _| h.gro_normal_batch = HostSpec::default().gro_normal_batch),
            key("host.strategy", table(self.strategy != d.strategy), PICKERS, "a NAPI polls its core's rings in poll-list order", |h, _| h.strategy = HostSpec::default().strategy),
            key("host.core_strategies", table(!self.core_strategies.is_empty()), PICKERS, "a NAPI polls its core's rings in poll-list order", |h, _| h.core_strategies.clear()),
            key("host.batch.t_empty", time(self.batch.t_empty, b.t_empty), &[BusyPoll], "only a busy poller makes empty calls (batched-syscall sleeps)", |h, _| h.batch.t_empty = BatchSpec::default().t_empty),
            key("host.batch.t_wakeup", time(self.batch.t_wakeup, b.t_wakeup), &[BatchedSyscall], "only a sleeping thread wakes up", |h, _| h.batch.t_wakeup = BatchSpec::default().t_wakeup),
            key("host.batch", table(calls), &[BusyPoll, BatchedSyscall], "only batched I/O makes calls", |h, _| h.batch = BatchSpec { t_empty: h.batch.t_empty, t_wakeup: h.batch.t_wakeup, ..BatchSpec::default() }),
            key("nic.itr", table(nic.itr != super::nic::ItrSpec::default()), NAPI, "moderation throttles a device's NAPI interrupts; the others take none, or wake on the first write-back (batched-syscall)", |_, n| n.itr = super::nic::ItrSpec::default()),
            ModeKey { aliases: &["nic.napi.napi_defer_hard_irqs"], ..key("nic.napi.defer_hard_irqs", given(napi.defer_hard_irqs > 0, || napi.defer_hard_irqs.to_string()), NAPI_OR_THREAD, "deferral belongs to a NAPI", |_, n| n.napi.defer_hard_irqs = 0) },
            key("nic.napi.gro_flush_timeout", time(napi.gro_flush_timeout, Duration::default()), NAPI_OR_THREAD, "deferral belongs to a NAPI", |_, n| n.napi.gro_flush_timeout = Duration::default()),
            key("nic.napi.threaded", given(napi.threaded, || "true".into()), NAPI, "a NAPI thread polls a device's NAPI (threaded-napi's is one already)", |_, n| n.napi.threaded = false),
            // (Read by a threaded device NAPI too: nic.napi.threaded, itself refused where
            // no device NAPI is.)
            key("host.thread", table(self.thread != ThreadSpec::default() && !napi.threaded), &[ThreadedNapi], "only a NAPI thread has a wake-up (with a device's NAPI: nic.napi.threaded = true)", |h, _| h.thread = ThreadSpec::default()),
            key("host.xdp", table(self.xdp != XdpSpec::default()), &[Xdp, AfXdp], "only these run an XDP program", |h, _| h.xdp = XdpSpec::default()),
            key("host.af_xdp", table(self.af_xdp != AfXdpSpec::default()), &[AfXdp], "only an AF_XDP socket has these rings and costs", |h, _| h.af_xdp = AfXdpSpec::default()),
            key("host.tx_lock", time(self.tx_lock, d.tx_lock), &[Napi, Server, Xdp], "only these take a shared tx queue's lock", |h, _| h.tx_lock = HostSpec::default().tx_lock),
        ];
        keys.into_iter().filter(|k| k.value.is_some() && !k.modes.contains(&self.io)).collect()
    }

    /// [`HostSpec::unread_mode_keys`], refused: the first one is the error.
    pub(super) fn check_mode_keys(&self, origin: &str, nic: &super::nic::NicSpec) -> Result<()> {
        let Some(k) = self.unread_mode_keys(nic).into_iter().next() else { return Ok(()) };
        let value = k.value.unwrap_or_default();
        let names: Vec<String> = k.modes.iter().map(|m| format!("\"{}\"", m.name())).collect();
        let expected =
            format!("no {} with host.io = \"{}\": only {} read it; {}", k.key, self.io.name(), names.join(", "), k.why);
        Err(ConfigError::new(origin, k.key, (!value.is_empty()).then_some(value), expected).into())
    }
}

impl HostSpec {
    /// `[host.xdp]` only with io = "xdp", and each of its times only where its mode and
    /// action read it.
    fn validate_xdp(&self, origin: &str) -> Result<()> {
        let x = &self.xdp;
        if self.io == IoModeKind::AfXdp {
            let a = &self.af_xdp;
            check_range(origin, "host.af_xdp.batch", a.batch as u64, 1, 1 << 16, "a number of frames")?;
            check_range(origin, "host.af_xdp.rx_size", a.rx_size as u64, 2, 1 << 24, "a number of ring entries")?;
            if !a.rx_size.is_power_of_two() {
                return Err(ConfigError::new(
                    origin,
                    "host.af_xdp.rx_size",
                    Some(a.rx_size.to_string()),
                    "a power of two (the kernel's rings are)",
                )
                .into());
            }
            if a.zero_copy && (a.t_copy.ps > 0 || a.t_copy_per_byte.is_some()) {
                return Err(
                    ConfigError::new(origin, "host.af_xdp.t_copy", None, "no copy cost with zero_copy = true").into()
                );
            }
            if x.mode != XdpMode::Native || x.action != XdpAction::Redirect {
                return Err(ConfigError::new(
                    origin,
                    "host.xdp.action",
                    Some(format!("{:?}", format!("{:?}", x.action).to_lowercase())),
                    "\"redirect\" in native mode with host.io = \"af-xdp\": the program redirects every frame to the socket (XSKMAP)",
                )
                .into());
            }
            if x.t_xmit.ps > 0 {
                return Err(ConfigError::new(
                    origin,
                    "host.xdp.t_xmit",
                    Some(format!("\"{}\"", x.t_xmit)),
                    "0 or no key with host.io = \"af-xdp\": host.af_xdp.t_xsk is the socket's cost",
                )
                .into());
            }
            return Ok(());
        }
        if self.io != IoModeKind::Xdp {
            // ([host.xdp] elsewhere: check_mode_keys.)
            return Ok(());
        }
        let native = x.mode == XdpMode::Native;
        let sends = matches!(x.action, XdpAction::Tx | XdpAction::Redirect);
        let action = format!("{:?}", x.action).to_lowercase();
        let unread = |key: &str, d: Duration, why: String| -> Result<()> {
            if d.ps > 0 {
                return Err(ConfigError::new(
                    origin,
                    format!("host.xdp.{key}"),
                    Some(format!("\"{d}\"")),
                    format!("0 or no key: {why}"),
                )
                .into());
            }
            Ok(())
        };
        if !native {
            unread("t_driver", x.t_driver, "generic XDP runs after the driver built the skb (host.xdp.t_skb)".into())?;
            unread("t_flush", x.t_flush, "generic XDP sends each frame at once, with no bulk to flush".into())?;
        } else if let Some(d) = x.t_skb {
            unread("t_skb", d, "native XDP runs before any skb exists".into())?;
        }
        if x.action == XdpAction::Pass {
            unread(
                "t_driver",
                x.t_driver,
                "XDP_PASS frames go on to the stack, whose t_proc includes the driver's work".into(),
            )?;
        }
        if !sends {
            unread("t_xmit", x.t_xmit, format!("action = \"{action}\" sends nothing"))?;
            unread("t_flush", x.t_flush, format!("action = \"{action}\" sends nothing"))?;
        }
        if !native && x.action != XdpAction::Pass && x.t_skb.is_none() && self.t_proc.is_some() {
            return Err(ConfigError::new(
                origin,
                "host.xdp.t_skb",
                None,
                "a time for generic XDP with host.t_proc given: the part of t_proc before the hook (driver rx and skb allocation), e.g. \"150ns\"",
            )
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    fn with_strategy(strategy: StrategySpec) -> HostSpec {
        HostSpec { strategy, ..HostSpec::default() }
    }

    #[test]
    fn priowfq_gives_one_slice_per_queue() {
        let slices = vec![Duration::from_ps(1_000_000); 2];
        let st = StrategySpec { kind: StrategyKind::Priowfq, slices, ..StrategySpec::default() };
        assert!(with_strategy(st.clone()).validate("t", 2, 1, &Default::default()).is_ok());
        let e = config_error(with_strategy(st.clone()).validate("t", 3, 1, &Default::default()));
        assert_eq!(e.to_string(), "t: host.strategy.slices = 2 slices: expected one time slice above 0 per queue in nic.queues (3), highest priority first");
        let zero = StrategySpec { slices: vec![Duration::from_ps(1_000_000), Duration::from_ps(0)], ..st };
        assert_eq!(
            config_error(with_strategy(zero).validate("t", 2, 1, &Default::default())).path,
            "host.strategy.slices"
        );
    }

    #[test]
    fn drr_gives_one_weight_per_queue_and_a_quantum() {
        let st = StrategySpec { kind: StrategyKind::Drr, weights: vec![3, 1], ..StrategySpec::default() };
        assert!(with_strategy(st.clone()).validate("t", 2, 1, &Default::default()).is_ok());
        assert_eq!(
            config_error(with_strategy(st.clone()).validate("t", 1, 1, &Default::default())).path,
            "host.strategy.weights"
        );
        let no_quantum = StrategySpec { quantum: Bytes::new(0), ..st };
        assert_eq!(
            config_error(with_strategy(no_quantum).validate("t", 2, 1, &Default::default())).path,
            "host.strategy.weights"
        );
    }

    #[test]
    fn core_strategies_give_one_per_core_and_are_checked_each() {
        let quota = StrategySpec { kind: StrategyKind::Quota, quota: 0, ..StrategySpec::default() };
        let host = HostSpec { core_strategies: vec![StrategySpec::default(), quota], ..HostSpec::default() };
        assert_eq!(
            config_error(host.validate("t", 1, 3, &Default::default())).to_string(),
            "t: host.core_strategies = 2 entries: expected one strategy per core (3)"
        );
        assert_eq!(config_error(host.validate("t", 1, 2, &Default::default())).path, "host.core_strategies[1].quota");
    }

    #[test]
    fn busy_polling_for_free_is_rejected() {
        let host = HostSpec { io: IoModeKind::BusyPoll, ..HostSpec::default() };
        assert_eq!(config_error(host.validate("t", 1, 1, &Default::default())).path, "host.batch.t_empty");
        let batch = BatchSpec { t_call: Duration::from_ps(10_000), ..BatchSpec::default() };
        assert!(HostSpec { batch, ..host }.validate("t", 1, 1, &Default::default()).is_ok());
    }

    #[test]
    fn only_threaded_napi_has_a_thread() {
        let thread = ThreadSpec { wake_latency: Duration::from_ps(1_000_000), t_wakeup: Duration::default() };
        let host = HostSpec { thread, ..HostSpec::default() };
        let nic = |threaded: bool| super::super::nic::NicSpec {
            napi: super::super::nic::NapiSpec { threaded, ..Default::default() },
            ..Default::default()
        };
        let check = |h: &HostSpec, threaded: bool| {
            h.validate("t", 1, 1, &nic(threaded).napi).and_then(|()| h.check_mode_keys("t", &nic(threaded)))
        };
        assert_eq!(config_error(check(&host, false)).path, "host.thread");
        assert!(check(&host, true).is_ok(), "a device's NAPI threads");
        assert_eq!(
            config_error(check(&HostSpec { io: IoModeKind::Server, ..host.clone() }, true)).path,
            "nic.napi.threaded"
        );
        assert_eq!(
            config_error(check(&HostSpec { io: IoModeKind::ThreadedNapi, ..host.clone() }, true)).path,
            "nic.napi.threaded"
        );
        assert!(check(&HostSpec { io: IoModeKind::ThreadedNapi, ..host }, false).is_ok());
    }

    #[test]
    fn xdp_keys_are_read_where_mode_and_action_use_them() {
        let ns = |n: u64| Duration::from_ps(n * 1000);
        let xdp = |x: XdpSpec| HostSpec { io: IoModeKind::Xdp, xdp: x, ..HostSpec::default() };
        let v = |h: HostSpec| h.validate("t", 1, 1, &Default::default());
        let drop = XdpSpec { action: XdpAction::Drop, t_prog: ns(5), t_driver: ns(35), ..XdpSpec::default() };
        assert!(v(xdp(drop.clone())).is_ok());
        assert_eq!(config_error(v(xdp(XdpSpec { t_xmit: ns(5), ..drop.clone() }))).path, "host.xdp.t_xmit");
        assert_eq!(config_error(v(xdp(XdpSpec { mode: XdpMode::Generic, ..drop.clone() }))).path, "host.xdp.t_driver");
        let generic = XdpSpec { mode: XdpMode::Generic, action: XdpAction::Tx, t_xmit: ns(10), ..XdpSpec::default() };
        assert!(v(xdp(generic.clone())).is_ok(), "t_skb from the cost profile");
        let explicit = HostSpec { t_proc: Some(ns(500)), ..xdp(generic.clone()) };
        assert_eq!(config_error(v(explicit.clone())).path, "host.xdp.t_skb");
        assert!(v(HostSpec { xdp: XdpSpec { t_skb: Some(ns(150)), ..generic.clone() }, ..explicit }).is_ok());
        assert_eq!(config_error(v(xdp(XdpSpec { t_flush: ns(10), ..generic }))).path, "host.xdp.t_flush");
        assert_eq!(
            config_error(v(xdp(XdpSpec { t_driver: ns(10), ..XdpSpec::default() }))).path,
            "host.xdp.t_driver",
            "pass"
        );
        let e = config_error(HostSpec { xdp: drop, ..HostSpec::default() }.check_mode_keys("t", &Default::default()));
        assert_eq!(e.to_string(), "t: host.xdp: no host.xdp with host.io = \"napi\": only \"xdp\", \"af-xdp\" read it; only these run an XDP program");
    }

    #[test]
    fn napi_limits_are_in_range() {
        assert!(HostSpec::default().validate("t", 1, 1, &Default::default()).is_ok());
        let e = config_error(HostSpec { weight: 0, ..HostSpec::default() }.validate("t", 1, 1, &Default::default()));
        assert_eq!(e.to_string(), "t: host.weight = 0: expected a number of packets from 1 to 65536");
        assert_eq!(
            config_error(HostSpec { hz: 99, ..HostSpec::default() }.validate("t", 1, 1, &Default::default())).path,
            "host.hz"
        );
        assert_eq!(
            config_error(HostSpec { budget_time: Duration::from_ps(0), ..HostSpec::default() }.validate(
                "t",
                1,
                1,
                &Default::default()
            ))
            .path,
            "host.budget_time"
        );
    }
}
