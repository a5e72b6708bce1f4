//! `[host]`: host-side packet I/O and its checks. `host.io` is a tagged section
//! (`scenario/tagged.rs`): each I/O mode is a type of its own ([`IoSpec`]), made of parts
//! that each declare their keys once ([`Irq`], [`Poll`], [`Softirq`], [`TxLock`],
//! [`Rings`], [`GroBatch`], and the tables `[host.batch]`, `[host.thread]`, `[host.xdp]`,
//! `[host.af_xdp]`), so a mode reads exactly its parts' keys and refuses the others'. Keys
//! of `[nic]` only some modes read (`nic.itr`, deferral, `nic.napi.threaded`) are declared
//! with the mode too ([`IoSpec`]'s `elsewhere`). What every mode reads is [`StackSpec`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nic::ItrSpec;
#[cfg(test)]
use super::tagged::keys_of;
use super::tagged::{self, Elsewhere, Key, Keys, Tagged};
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
    #[schemars(range(min = 1, max = 65536), extend("x-quantity" = "a number of frames"))]
    pub batch: u32,
    /// Busy polling by the user thread (`SO_BUSY_POLL` on the socket, with
    /// `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` = batch; xdpsock `-B`); 0: none. With
    /// `wait = "poll"`: how long `poll()` busy polls the NAPI on an empty rx ring before it
    /// sleeps (`net.core.busy_poll`); with `wait = "spin"` any value above 0 makes every
    /// turn of the loop poll the NAPI once (`recvfrom` with `MSG_DONTWAIT`: `sk_busy_loop`
    /// without a loop end), so the thread drives the NAPI and never sleeps.
    #[serde(default)]
    #[schemars(extend("x-linux" = "net.core.busy_poll, setsockopt SO_BUSY_POLL"))]
    pub busy_poll: Duration,
    /// How the user thread waits on an empty rx ring: `"poll"` sleeps in `poll()` until
    /// `xsk_flush` wakes it (xdpsock `-p`); `"spin"` loops on the ring in user space and
    /// never sleeps (xdpsock's default loop), each empty look costing `app.t_call`.
    #[serde(default)]
    pub wait: XskWait,
    /// What the thread does with each frame, as xdpsock: `"rxdrop"` (`-r`) gives it back to
    /// the fill ring; `"l2fwd"` (`-l`) swaps its MAC addresses and puts it on the socket's
    /// tx ring (`tx_size`), which the driver's NAPI poll transmits (zero copy: `i40e_xmit_zc`
    /// before the rx clean, `t_xmit_zc` a frame, as many as the NIC queue and the completion
    /// ring have room for) or a kick system call does (copy mode: `xsk_generic_xmit`,
    /// `t_xmit_copy` a frame); a later poll's tx clean puts it on the completion ring, from
    /// where the thread gives it back to the fill ring.
    #[serde(default)]
    pub role: XskRole,
    /// With `need_wakeup`, what a zero-copy driver does with a frame that finds the
    /// socket's rx ring full: `"stop"` ends its rx clean there (i40e, ice, ixgbe since
    /// Linux 5.19, "stop NAPI Rx processing on full XSK RQ"): it sets the fill ring's
    /// `need_wakeup` flag, the NIC's ring backs up and the NIC drops what it cannot hold,
    /// and the thread's next kick schedules the NAPI again; `"drop"` drops the frame
    /// (`rx_ring_full`) and goes on (mlx5, and always in copy mode or without
    /// `need_wakeup`, where "stop" is refused). Default "stop" with zero copy and
    /// `need_wakeup`. The stopping frame is left on the NIC's ring, as 5.19 to 6.5 did (6.6
    /// and later recycle that one frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_full: Option<XskRxFull>,
    /// Entries of the socket's rx ring (`XSK_RING_CONS__DEFAULT_NUM_DESCS` = 2048); a frame
    /// that finds it full is dropped (`rx_ring_full` in `XDP_STATISTICS`), or in zero-copy
    /// mode with `need_wakeup` left on the NIC's ring: the driver stops its rx clean (i40e,
    /// ice, ixgbe since Linux 5.19) and the NIC drops what its ring cannot hold.
    #[serde(default = "default_xsk_ring")]
    #[schemars(range(min = 2, max = 16777216), extend("x-quantity" = "a number of ring entries"))]
    pub rx_size: u32,
    /// Frames of the umem (xdpsock's `NUM_FRAMES` = 4096); all of them start on the fill
    /// ring, up to its size, and each goes back there once the thread has read it.
    #[serde(default = "default_umem_frames")]
    #[schemars(range(min = 1, max = 16777216), extend("x-quantity" = "a number of umem frames"))]
    pub umem_frames: u32,
    /// Entries of the umem's fill ring (xdpsock: `XSK_RING_PROD__DEFAULT_NUM_DESCS` x 2 =
    /// 4096). The kernel takes a fill-ring frame for every frame it receives: in zero-copy
    /// mode when the driver refills the NIC's ring (with none left the ring runs dry and the
    /// NIC drops, `rx_missed_errors`; `rx_fill_ring_empty_descs` counts the attempts), in
    /// copy mode when it copies (with none left the frame is dropped, `rx_dropped`).
    #[serde(default = "default_fill_size")]
    #[schemars(range(min = 2, max = 16777216), extend("x-quantity" = "a number of ring entries"))]
    pub fill_size: u32,
    /// Entries of the socket's tx ring (l2fwd; xdpsock: `XSK_RING_PROD__DEFAULT_NUM_DESCS`
    /// = 2048 when not given). The driver sends no more than the completion ring has room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 16777216), extend("x-quantity" = "a number of ring entries"))]
    pub tx_size: Option<u32>,
    /// Entries of the umem's completion ring (l2fwd; xdpsock: `XSK_RING_CONS__DEFAULT_NUM_DESCS`
    /// = 2048 when not given): the driver sends a frame only while it has room for the
    /// frame's completion, which the thread gives back to the fill ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 16777216), extend("x-quantity" = "a number of ring entries"))]
    pub comp_size: Option<u32>,
    /// Kernel time per frame to put its descriptor on the rx ring (`__xsk_rcv_zc`).
    #[serde(default)]
    pub t_xsk: Duration,
    /// Copy mode: the fixed time of copying a frame into the umem (`xsk_rcv`).
    #[serde(default)]
    pub t_copy: Duration,
    /// Copy mode: the time per byte of that copy, on top of `t_copy` (none when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_copy_per_byte: Option<TimePerByte>,
    /// l2fwd, zero copy: the driver's time per frame it takes from the tx ring and posts
    /// to the NIC (`xsk_tx_peek_desc`, the descriptor write), in its NAPI poll. Required
    /// there: pktsim has no measured default for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_xmit_zc: Option<Duration>,
    /// l2fwd, copy mode: the kernel's time per frame the thread's kick sends
    /// (`xsk_generic_xmit`: an skb built and copied, `dev_direct_xmit`), in the thread's
    /// system call. Required there: pktsim has no measured default for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_xmit_copy: Option<Duration>,
    /// One kick system call (`sendto` / `recvfrom` / `poll`). Default 78 ns: a null system
    /// call (`getppid`), measured by `pktsim testbed probe` on a KVM guest on an Intel Xeon at
    /// 2.6 GHz, Linux 6.18 (VALIDATION.md); a kick that does work costs more.
    #[serde(default = "default_t_syscall")]
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
fn default_umem_frames() -> u32 {
    4096
}
fn default_fill_size() -> u32 {
    4096
}

/// What an AF_XDP thread does with each frame (`host.af_xdp.role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum XskRole {
    /// Gives it back to the fill ring (xdpsock `-r`).
    #[default]
    Rxdrop,
    /// Sends it back out on the socket's tx ring (xdpsock `-l`).
    L2fwd,
}

/// What a zero-copy driver does with a frame that finds the socket's rx ring full, with
/// `need_wakeup` (`host.af_xdp.rx_full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum XskRxFull {
    /// Ends the rx clean and asks for a wake-up (i40e, ice, ixgbe since 5.19).
    #[default]
    Stop,
    /// Drops it and goes on (mlx5).
    Drop,
}

/// How an AF_XDP thread waits on an empty rx ring (`host.af_xdp.wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum XskWait {
    /// `poll()` on the socket: the thread sleeps until `xsk_flush` wakes it.
    #[default]
    Poll,
    /// A loop on the ring in user space: the thread never sleeps.
    Spin,
}

impl Default for AfXdpSpec {
    fn default() -> Self {
        AfXdpSpec {
            zero_copy: true,
            need_wakeup: true,
            batch: default_xsk_batch(),
            busy_poll: Duration::default(),
            wait: XskWait::Poll,
            role: XskRole::Rxdrop,
            rx_full: None,
            rx_size: default_xsk_ring(),
            tx_size: None,
            comp_size: None,
            t_xmit_zc: None,
            t_xmit_copy: None,
            umem_frames: default_umem_frames(),
            fill_size: default_fill_size(),
            t_xsk: Duration::default(),
            t_copy: Duration::default(),
            t_copy_per_byte: None,
            t_syscall: default_t_syscall(),
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

/// The NAPI's kernel thread: io = "threaded-napi"'s, or a device NAPI's with
/// `nic.napi.threaded = true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadSpec {
    /// From the sender's napi_schedule (wake_up_process) to the thread running on its CPU,
    /// during which the CPU does none of this thread's work: the wake-up's IPI when the
    /// sender runs on another CPU. Default 0: the switch itself is `t_wakeup` and leaving an
    /// idle state is `[cpu.idle]`'s (a futex wake-up across the CPUs of a KVM guest took
    /// 18-29 us: VALIDATION.md, "wake").
    #[serde(default)]
    pub wake_latency: Duration,
    /// CPU time the thread spends per wake-up besides polling (switching in and out, the
    /// thread loop), charged to the thread like its packet work. Default 0.74 us: a wake-up
    /// and a context switch on one CPU (half a futex round trip between two threads pinned
    /// there), measured by `pktsim testbed probe` on a KVM guest on an Intel Xeon at 2.6 GHz,
    /// Linux 6.18 (VALIDATION.md: the median of six probes, 711-786 ns).
    #[serde(default = "default_t_wakeup")]
    pub t_wakeup: Duration,
    /// CPU time the thread spends on its way to sleep after a poll that left its ring empty
    /// (`local_bh_enable`'s softirqs, `napi_thread_wait`, `schedule()` switching out). A
    /// frame whose napi_schedule comes meanwhile finds it awake: it polls again with no
    /// wake-up, and the rest of this time is not spent. Default 0: the whole switch is paid
    /// at the wake-up (`t_wakeup`). A device's NAPI thread (`nic.napi.threaded`) goes to sleep
    /// at once where an application shares its core; the analytical model adds it to every
    /// wake-up's cost (it does not see the frames it catches).
    #[serde(default)]
    pub t_sleep: Duration,
    /// The thread's scheduling policy against an application on its core: "other"
    /// (SCHED_OTHER at nice 0, the kernel's default for `napi/...` threads: the two share
    /// the core by weight) or "fifo" (SCHED_FIFO, `chrt -f`: the thread runs whenever it has
    /// work).
    #[serde(default)]
    #[schemars(extend("x-linux" = "chrt -p PID"))]
    pub policy: ThreadPolicy,
}

/// A NAPI thread's scheduling policy (`sched_setscheduler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadPolicy {
    /// SCHED_OTHER (SCHED_NORMAL), nice 0: the fair class.
    #[default]
    Other,
    /// SCHED_FIFO: before every fair-class task on its core.
    Fifo,
}

impl Default for ThreadSpec {
    fn default() -> Self {
        ThreadSpec {
            wake_latency: Duration::default(),
            t_wakeup: default_t_wakeup(),
            t_sleep: Duration::default(),
            policy: ThreadPolicy::default(),
        }
    }
}

/// CPU time of one wake-up: half a futex round trip between two threads pinned to one CPU
/// (a wake-up and a context switch), 0.74 us, measured by `pktsim testbed probe`
/// (`pktsim-tb wake`) on a KVM guest on an Intel Xeon at 2.6 GHz, Linux 6.18 (VALIDATION.md,
/// "wake").
pub fn default_t_wakeup() -> Duration {
    Duration::from_ps(740_000)
}

/// One null system call (`getppid`): 78 ns, measured as [`default_t_wakeup`] was. A real
/// call that moves frames costs more; this is its floor.
pub fn default_t_syscall() -> Duration {
    Duration::from_ps(78_000)
}

/// Costs of batched packet I/O (io = "busy-poll" or "batched-syscall"). A call that moves
/// n frames costs t_call + n t_packet + bytes t_byte, then each frame its t_proc; the n
/// frames go to the tx ring together at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchCalls {
    /// Most frames one call moves (rx burst size).
    #[serde(default = "default_batch")]
    #[schemars(range(min = 1, max = 65536), extend("x-quantity" = "a number of frames per call"))]
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
}

fn default_batch() -> u32 {
    32
}

impl Default for BatchCalls {
    fn default() -> Self {
        BatchCalls { size: default_batch(), t_call: Duration::default(), t_packet: Duration::default(), t_byte: None }
    }
}

/// A busy poller's call that finds nothing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyCall {
    /// Cost of a call that finds nothing.
    #[serde(default)]
    pub t_empty: Duration,
}

/// A sleeping thread's wake-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Wakeup {
    /// CPU time from the interrupt to the sleeping thread running again. Default 0.74 us:
    /// a wake-up and a context switch on one CPU, measured by `pktsim testbed probe` on a
    /// KVM guest on an Intel Xeon at 2.6 GHz, Linux 6.18 (VALIDATION.md).
    #[serde(default = "default_t_wakeup")]
    pub t_wakeup: Duration,
}

impl Default for Wakeup {
    fn default() -> Self {
        Wakeup { t_wakeup: default_t_wakeup() }
    }
}

/// `[host.batch]`: batched I/O's calls (io = "busy-poll": and what an empty one costs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct BusyPollBatch {
    #[serde(flatten)]
    pub calls: BatchCalls,
    #[serde(flatten)]
    pub empty: EmptyCall,
}

/// `[host.batch]`: batched I/O's calls (io = "batched-syscall": and the sleeping thread's
/// wake-up).
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct SyscallBatch {
    #[serde(flatten)]
    pub calls: BatchCalls,
    #[serde(flatten)]
    pub wake: Wakeup,
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

/// Where a pending softirq runs while ksoftirqd is runnable (`invoke_softirq`,
/// `do_softirq`; kernel/softirq.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SoftirqRun {
    /// On interrupt exit and `local_bh_enable`, whether ksoftirqd runs or not: Linux before
    /// 4.9 and from 6.5 (d15121be7485, `Revert "softirq: Let ksoftirqd do its job"`).
    #[default]
    Inline,
    /// Left to ksoftirqd while it is runnable (`ksoftirqd_running`): Linux 4.9 (4cd13c21b207,
    /// "softirq: Let ksoftirqd do its job") to 6.4, and the 5.10, 5.15 and 6.1 stable trees.
    Defer,
}

/// Distribution of the per-packet service time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceDist {
    #[default]
    Constant,
    Exponential,
}

/// `[host]`: what the stack does with a frame, whatever the I/O mode (`stack`), and the
/// I/O mode (`io`) with its own keys.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct HostSpec {
    #[serde(flatten)]
    pub stack: StackSpec,
    #[serde(flatten)]
    pub io: IoSpec,
}

impl<'de> Deserialize<'de> for HostSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(d)?;
        let stack = tagged::part(tagged::take(&mut table, &tagged::leaves::<StackSpec>())).map_err(D::Error::custom)?;
        let io = tagged::read_tagged(table).map_err(D::Error::custom)?;
        Ok(HostSpec { stack, io })
    }
}

/// The stack's work on a frame: every I/O mode reads these.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StackSpec {
    /// Rx-clean cost per packet (driver rx to descriptor in the tx ring). Default: the cost
    /// profile's C_total minus C_free, at the CPU frequency, minus a frame's share of a NAPI
    /// poll at full weight (`t_poll / weight`: the profile was measured at saturation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_proc: Option<Duration>,
    /// Tx-clean cost per completed packet. Default: the profile's C_free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_clean: Option<Duration>,
    /// Distribution of t_proc around its mean.
    #[serde(default)]
    pub service: ServiceDist,
    /// Per-byte part of t_proc: x = a*S + b + c (001 V-B: a ~ 2ns/B).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_proc_per_byte: Option<TimePerByte>,
}

/// A hard IRQ (io = "napi", "xdp", "af-xdp", "batched-syscall": the others take none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Irq {
    /// CPU time of one hard IRQ: entry, handler (`ixgbe_msix_clean_rings`, `napi_schedule`)
    /// and exit; it preempts softirq work. Default 202 ns: measured by profiling an 82599
    /// (ixgbe 3.14.5) on a Xeon E3-1230 v2 at 3.3 GHz, Linux 3.7 (002 §IV-B, Table I: about
    /// 667 cycles). "0ns" makes interrupts free.
    #[serde(default = "default_t_irq")]
    pub t_irq: Duration,
    /// CPU time an interrupt costs on top of `t_irq` when it finds its core running (a task,
    /// a softirq, a poll) rather than idle: on a KVM guest whose interrupts are not posted,
    /// it makes the running vCPU exit to the hypervisor and enter again (about 13 us an RPS
    /// IPI on the testbed's guest, `pktsim testbed validate --path share` measures it with
    /// `pktsim-tb spin`), where one that finds the vCPU halted is part of the halt's exit
    /// (`[cpu.idle]`). Default 0: a bare-metal core, where `t_irq` is the whole of it. Only
    /// the simulator charges it.
    #[serde(default)]
    pub t_irq_busy: Duration,
}

impl Default for Irq {
    fn default() -> Self {
        Irq { t_irq: default_t_irq(), t_irq_busy: Duration::default() }
    }
}

/// A NAPI poll (io = "napi", "xdp", "af-xdp", "threaded-napi").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Poll {
    /// Fixed CPU time of one poll besides its frames (`net_rx_action`'s list handling,
    /// `napi_poll`, `napi_complete_done`; the softirq's entry). Default 180 ns, derived from
    /// the same machine as `t_irq`'s default (002 §IV-B): at saturation, where polls take
    /// their whole weight of 64 frames, 0.5 % of the 567 ns a frame costs lies outside
    /// `ixgbe_poll`'s tx and rx clean: 0.005 x 567 ns x 64 = 181 ns per poll. "0ns" makes
    /// polls free.
    #[serde(default = "default_t_poll")]
    pub t_poll: Duration,
    /// CPU time of a NAPI's deferral timer (`napi->timer`, armed by `napi_complete_done` for
    /// `nic.napi.gro_flush_timeout`, or `irq_suspend_timeout`): arming it (`hrtimer_start`,
    /// reprogramming the clock event) and the expiry that follows (the local timer
    /// interrupt, `hrtimer_interrupt`, `napi_watchdog`). Charged once per arming, when a
    /// softirq's or NAPI thread's poll arms it, as poll time: it delays no frame that poll
    /// took. (Re-arming by a preferred busy poller's `busy_poll_stop` or by epoll's
    /// `napi_suspend_irqs` is not charged.) Default 202 ns,
    /// taken as `t_irq`'s (002 §IV-B, Table I: one hard interrupt's entry, handler and exit
    /// on a Xeon E3-1230 v2 at 3.3 GHz). On a KVM guest each arming and expiry also exits to
    /// the hypervisor: 9-15 us a timer on the testbed's guest (VALIDATION.md,
    /// defer). "0ns" makes the timer free.
    #[serde(default = "default_t_irq")]
    pub t_timer: Duration,
    /// NAPI poll weight (packets per poll).
    #[serde(default = "default_weight")]
    #[schemars(range(min = 1, max = 65536), extend("x-quantity" = "a number of packets"))]
    #[schemars(extend("x-linux" = "NAPI_POLL_WEIGHT (netif_napi_add)"))]
    pub weight: u32,
}

impl Default for Poll {
    fn default() -> Self {
        Poll { t_poll: default_t_poll(), t_timer: default_t_irq(), weight: default_weight() }
    }
}

/// The NET_RX softirq's `net_rx_action` (io = "napi", "xdp", "af-xdp": a NAPI thread polls
/// by weight alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Softirq {
    /// `net.core.netdev_budget`: packets per net_rx_action (also accepted as
    /// `netdev_budget`).
    #[serde(default = "default_budget", alias = "netdev_budget")]
    #[schemars(extend("x-aliases" = ["netdev_budget"]))]
    #[schemars(range(min = 1, max = 16777216), extend("x-quantity" = "a number of packets"))]
    #[schemars(extend("x-linux" = "net.core.netdev_budget"))]
    pub budget: u32,
    /// `net.core.netdev_budget_usecs`: time limit of one net_rx_action, checked in jiffies
    /// (also accepted as `netdev_budget_usecs`, with a unit: "2000us").
    #[serde(default = "default_budget_time", alias = "netdev_budget_usecs")]
    #[schemars(extend("x-aliases" = ["netdev_budget_usecs"]))]
    #[schemars(extend("x-linux" = "net.core.netdev_budget_usecs"))]
    pub budget_time: Duration,
    /// Kernel tick rate (CONFIG_HZ): the jiffy-granular time limits, and the scheduler tick,
    /// whose interrupt runs a pending softirq on its exit.
    #[serde(default = "default_hz")]
    #[schemars(range(min = 100, max = 10000), extend("x-quantity" = "a tick rate in Hz"))]
    pub hz: u32,
    #[serde(default)]
    pub net_rx_action: NetRxAction,
    /// Where softirqs raised while ksoftirqd is runnable run: "inline" (on interrupt exit and
    /// `local_bh_enable`, as ever; Linux before 4.9 and from 6.5) or "defer" (left to
    /// ksoftirqd, a fair-class task: Linux 4.9 - 6.4 and the 5.10, 5.15 and 6.1 stable
    /// trees).
    #[serde(default)]
    pub softirq: SoftirqRun,
}

impl Default for Softirq {
    fn default() -> Self {
        Softirq {
            budget: default_budget(),
            budget_time: default_budget_time(),
            hz: default_hz(),
            net_rx_action: NetRxAction::default(),
            softirq: SoftirqRun::default(),
        }
    }
}

/// A tx queue's lock, where several cores share it (io = "napi", "server", "xdp").
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TxLock {
    /// Lock hold time per packet on a tx queue shared by several cores.
    #[serde(default)]
    pub tx_lock: Duration,
}

/// How a core chooses among its rx rings (io = "server", "busy-poll", "batched-syscall": a
/// NAPI polls its core's rings in poll-list order).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rings {
    /// How a core chooses among its rx rings.
    #[serde(default)]
    pub strategy: StrategySpec,
    /// One strategy per core, overriding `strategy` (as many entries as cpu.cores).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_strategies: Vec<StrategySpec>,
}

/// GRO's lists on a software device (io = "threaded-napi").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroBatch {
    /// `net.core.gro_normal_batch`: frames GRO hands to the stack together. On a veth with
    /// threaded NAPI a poll consumes frames from the ring one by one and processes them in
    /// lists of this many; frames that come while a list shorter than this (the ring ran
    /// empty) is processed wait for the next poll.
    #[serde(default = "default_gro_normal_batch")]
    #[schemars(range(min = 1, max = 65536), extend("x-quantity" = "a number of frames"))]
    #[schemars(extend("x-linux" = "net.core.gro_normal_batch"))]
    pub gro_normal_batch: u32,
}

impl Default for GroBatch {
    fn default() -> Self {
        GroBatch { gro_normal_batch: default_gro_normal_batch() }
    }
}

/// A device's NAPI: its interrupt, its polls, the softirq that runs them and, with
/// `nic.napi.threaded`, the kernel thread that polls it instead (`[host.thread]`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct DeviceNapi {
    #[serde(flatten)]
    pub irq: Irq,
    #[serde(flatten)]
    pub poll: Poll,
    #[serde(flatten)]
    pub softirq: Softirq,
    /// The NAPI thread's wake-up (only with nic.napi.threaded = true).
    #[serde(default, skip_serializing_if = "is_default")]
    pub thread: ThreadSpec,
}

/// Linux NAPI with an ixgbe-style driver: hard IRQ, poll list, tx clean + rx clean.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct NapiIo {
    #[serde(flatten)]
    pub napi: DeviceNapi,
    #[serde(flatten)]
    pub lock: TxLock,
}

/// A plain single server: FIFO service from the rx ring, no IRQ or NAPI effects (for checks
/// against queueing theory).
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct ServerIo {
    #[serde(flatten)]
    pub rings: Rings,
    #[serde(flatten)]
    pub lock: TxLock,
}

/// DPDK-style: the core spins on its rings, each call moves up to `host.batch.size` frames;
/// no interrupts; an empty call costs `host.batch.t_empty`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct BusyPollIo {
    #[serde(flatten)]
    pub rings: Rings,
    /// Batched I/O costs.
    #[serde(default)]
    pub batch: BusyPollBatch,
}

/// netmap / libpcap style: a system call moves up to `host.batch.size` frames; with nothing
/// to move the thread sleeps until an interrupt wakes it (`host.batch.t_wakeup`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct BatchedSyscallIo {
    #[serde(flatten)]
    pub irq: Irq,
    #[serde(flatten)]
    pub rings: Rings,
    /// Batched I/O costs.
    #[serde(default)]
    pub batch: SyscallBatch,
}

/// Threaded NAPI on a software device (veth): no hard IRQ; the sender schedules the NAPI,
/// whose kernel thread wakes after `host.thread.wake_latency`, pays `host.thread.t_wakeup`,
/// then polls up to `host.weight` packets per poll until the ring is empty and sleeps again.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct ThreadedNapiIo {
    #[serde(flatten)]
    pub poll: Poll,
    #[serde(flatten)]
    pub gro: GroBatch,
    /// The NAPI thread's wake-up.
    #[serde(default)]
    pub thread: ThreadSpec,
}

/// NAPI with an XDP program (`[host.xdp]`): native, in the driver's rx clean before any skb
/// exists, or generic, after the skb is built; its action decides each frame's fate.
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct XdpIo {
    #[serde(flatten)]
    pub napi: DeviceNapi,
    #[serde(flatten)]
    pub lock: TxLock,
    /// The XDP program.
    #[serde(default)]
    pub xdp: XdpSpec,
}

/// AF_XDP: an XDP program (`[host.xdp]`, action "redirect") sends every frame to an AF_XDP
/// socket of its queue, read by the `[app]` thread in user space (`[host.af_xdp]`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, JsonSchema)]
pub struct AfXdpIo {
    #[serde(flatten)]
    pub napi: DeviceNapi,
    /// The XDP program.
    #[serde(default)]
    pub xdp: XdpSpec,
    /// The AF_XDP socket.
    #[serde(default)]
    pub af_xdp: AfXdpSpec,
}

crate::plain_keys!(
    StackSpec, Irq, Poll, Softirq, TxLock, Rings, GroBatch, BatchCalls, EmptyCall, Wakeup, ThreadSpec, XdpSpec,
    AfXdpSpec
);
crate::parts!(BusyPollBatch { groups: calls: BatchCalls, empty: EmptyCall; tables: });
crate::parts!(SyscallBatch { groups: calls: BatchCalls, wake: Wakeup; tables: });
crate::parts!(DeviceNapi { groups: irq: Irq, poll: Poll, softirq: Softirq; tables: thread: ThreadSpec where "nic.napi.threaded" });
crate::parts!(NapiIo { groups: napi: DeviceNapi, lock: TxLock; tables: });
crate::parts!(ServerIo { groups: rings: Rings, lock: TxLock; tables: });
crate::parts!(BusyPollIo { groups: rings: Rings; tables: batch: BusyPollBatch });
crate::parts!(BatchedSyscallIo { groups: irq: Irq, rings: Rings; tables: batch: SyscallBatch });
crate::parts!(ThreadedNapiIo { groups: poll: Poll, gro: GroBatch; tables: thread: ThreadSpec });
crate::parts!(XdpIo { groups: napi: DeviceNapi, lock: TxLock; tables: xdp: XdpSpec });
crate::parts!(AfXdpIo { groups: napi: DeviceNapi; tables: xdp: XdpSpec, af_xdp: AfXdpSpec });

fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}

/// How a core moves packets between rings and the stack (`host.io`): a tagged section,
/// each mode with its own keys of `[host]` and its own tables.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "io", rename_all = "kebab-case")]
#[schemars(transform = tagged::schema_default::<IoSpec>)]
pub enum IoSpec {
    /// Linux NAPI with an ixgbe-style driver: hard IRQ, poll list, tx clean + rx clean (the
    /// default).
    Napi(NapiIo),
    /// A plain single server: FIFO service from the rx ring, no IRQ or NAPI effects (for
    /// checks against queueing theory).
    Server(ServerIo),
    /// DPDK-style busy polling: the core spins on its rings in calls of up to
    /// `host.batch.size` frames.
    BusyPoll(BusyPollIo),
    /// netmap / libpcap style: system calls of up to `host.batch.size` frames, sleeping
    /// until an interrupt when there is nothing to move.
    BatchedSyscall(BatchedSyscallIo),
    /// Threaded NAPI on a software device (veth), polled by its kernel thread.
    ThreadedNapi(ThreadedNapiIo),
    /// NAPI with an XDP program (`[host.xdp]`).
    Xdp(XdpIo),
    /// AF_XDP: an XDP program redirects every frame to an AF_XDP socket read by the `[app]`
    /// thread (`[host.xdp]`, `[host.af_xdp]`).
    AfXdp(AfXdpIo),
}

impl Default for IoSpec {
    fn default() -> Self {
        IoSpec::Napi(NapiIo::default())
    }
}

impl<'de> Deserialize<'de> for IoSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

/// The modes whose device NAPI takes interrupts, polled by net_rx_action.
const DEVICE_NAPI: &[&str] = &["napi", "xdp", "af-xdp"];
/// Every mode with a NAPI.
const ANY_NAPI: &[&str] = &["napi", "xdp", "af-xdp", "threaded-napi"];

impl Tagged for IoSpec {
    const TAG: &'static str = "io";
    const DEFAULT: &'static str = "napi";
    fn alternatives() -> Vec<(&'static str, Vec<Key>)> {
        vec![
            ("napi", NapiIo::keys()),
            ("server", ServerIo::keys()),
            ("busy-poll", BusyPollIo::keys()),
            ("batched-syscall", BatchedSyscallIo::keys()),
            ("threaded-napi", ThreadedNapiIo::keys()),
            ("xdp", XdpIo::keys()),
            ("af-xdp", AfXdpIo::keys()),
        ]
    }
    fn build(name: &str, rest: toml::Table) -> std::result::Result<Self, String> {
        Ok(match name {
            "server" => IoSpec::Server(Keys::read(rest)?),
            "busy-poll" => IoSpec::BusyPoll(Keys::read(rest)?),
            "batched-syscall" => IoSpec::BatchedSyscall(Keys::read(rest)?),
            "threaded-napi" => IoSpec::ThreadedNapi(Keys::read(rest)?),
            "xdp" => IoSpec::Xdp(Keys::read(rest)?),
            "af-xdp" => IoSpec::AfXdp(Keys::read(rest)?),
            _ => IoSpec::Napi(Keys::read(rest)?),
        })
    }
    fn common() -> Vec<Key> {
        tagged::leaves::<StackSpec>()
    }
    fn elsewhere() -> Vec<Elsewhere> {
        vec![
            // Moderation throttles a device's NAPI interrupts; the others take none, or
            // wake on the first write-back (batched-syscall).
            Elsewhere {
                path: "nic.itr",
                aliases: &[],
                readers: DEVICE_NAPI,
                is_default: tagged::is_default::<ItrSpec>,
            },
            // Deferral belongs to a NAPI.
            Elsewhere {
                path: "nic.napi.defer_hard_irqs",
                aliases: &["nic.napi.napi_defer_hard_irqs"],
                readers: ANY_NAPI,
                is_default: tagged::is_default::<u32>,
            },
            Elsewhere {
                path: "nic.napi.gro_flush_timeout",
                aliases: &[],
                readers: ANY_NAPI,
                is_default: tagged::is_default::<Duration>,
            },
            // A NAPI thread polls a device's NAPI (threaded-napi's is one already).
            Elsewhere {
                path: "nic.napi.threaded",
                aliases: &[],
                readers: DEVICE_NAPI,
                is_default: tagged::is_default::<bool>,
            },
        ]
    }
}

impl IoSpec {
    /// The mode, as the engine tells modes apart.
    pub fn kind(&self) -> IoModeKind {
        match self {
            IoSpec::Napi(_) => IoModeKind::Napi,
            IoSpec::Server(_) => IoModeKind::Server,
            IoSpec::BusyPoll(_) => IoModeKind::BusyPoll,
            IoSpec::BatchedSyscall(_) => IoModeKind::BatchedSyscall,
            IoSpec::ThreadedNapi(_) => IoModeKind::ThreadedNapi,
            IoSpec::Xdp(_) => IoModeKind::Xdp,
            IoSpec::AfXdp(_) => IoModeKind::AfXdp,
        }
    }
    /// The `host.io` value, as the scenario format writes it.
    pub fn name(&self) -> String {
        self.kind().name()
    }
    /// A device's NAPI (napi, xdp, af-xdp).
    pub fn device_napi(&self) -> Option<&DeviceNapi> {
        match self {
            IoSpec::Napi(n) => Some(&n.napi),
            IoSpec::Xdp(x) => Some(&x.napi),
            IoSpec::AfXdp(a) => Some(&a.napi),
            _ => None,
        }
    }
    /// The mode's hard IRQ, where it takes one.
    pub fn irq(&self) -> Option<&Irq> {
        match self {
            IoSpec::BatchedSyscall(b) => Some(&b.irq),
            _ => self.device_napi().map(|n| &n.irq),
        }
    }
    /// A hard IRQ's cost (0 where the mode takes none).
    pub fn t_irq(&self) -> Duration {
        self.irq().map_or(Duration::default(), |i| i.t_irq)
    }
    /// A NAPI's poll, where the mode has a NAPI.
    pub fn napi_poll(&self) -> Option<&Poll> {
        match self {
            IoSpec::ThreadedNapi(t) => Some(&t.poll),
            _ => self.device_napi().map(|n| &n.poll),
        }
    }
    /// A NAPI's poll (free, at the default weight, where the mode has no NAPI: nothing
    /// polls).
    pub fn poll(&self) -> Poll {
        self.napi_poll().cloned().unwrap_or(Poll {
            t_poll: Duration::default(),
            t_timer: Duration::default(),
            weight: default_weight(),
        })
    }
    /// The NET_RX softirq's limits (their defaults where the mode runs none).
    pub fn softirq(&self) -> Softirq {
        self.device_napi().map_or(Softirq::default(), |n| n.softirq.clone())
    }
    /// A shared tx queue's lock (0 where the mode takes none).
    pub fn tx_lock(&self) -> Duration {
        match self {
            IoSpec::Napi(n) => n.lock.tx_lock,
            IoSpec::Server(s) => s.lock.tx_lock,
            IoSpec::Xdp(x) => x.lock.tx_lock,
            _ => Duration::default(),
        }
    }
    /// How the cores choose among their rings (server, busy-poll, batched-syscall).
    pub fn rings(&self) -> Option<&Rings> {
        match self {
            IoSpec::Server(s) => Some(&s.rings),
            IoSpec::BusyPoll(b) => Some(&b.rings),
            IoSpec::BatchedSyscall(b) => Some(&b.rings),
            _ => None,
        }
    }
    /// Batched I/O's calls (busy-poll, batched-syscall).
    pub fn batch(&self) -> Option<&BatchCalls> {
        match self {
            IoSpec::BusyPoll(b) => Some(&b.batch.calls),
            IoSpec::BatchedSyscall(b) => Some(&b.batch.calls),
            _ => None,
        }
    }
    /// A NAPI thread's wake-up (threaded-napi; a device's NAPI with nic.napi.threaded).
    pub fn thread(&self) -> ThreadSpec {
        match self {
            IoSpec::ThreadedNapi(t) => t.thread.clone(),
            _ => self.device_napi().map_or(ThreadSpec::default(), |n| n.thread.clone()),
        }
    }
    /// The XDP program (xdp, af-xdp).
    pub fn xdp(&self) -> Option<&XdpSpec> {
        match self {
            IoSpec::Xdp(x) => Some(&x.xdp),
            IoSpec::AfXdp(a) => Some(&a.xdp),
            _ => None,
        }
    }
    /// The AF_XDP socket (af-xdp).
    pub fn af_xdp(&self) -> Option<&AfXdpSpec> {
        match self {
            IoSpec::AfXdp(a) => Some(&a.af_xdp),
            _ => None,
        }
    }
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
    #[schemars(range(min = 1, max = 1048576), extend("x-quantity" = "a number of packets"))]
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
fn default_t_irq() -> Duration {
    Duration::from_ps(202_000)
}
fn default_t_poll() -> Duration {
    Duration::from_ps(180_000)
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

impl HostSpec {
    /// Each part of the mode in range: the strategies, batched I/O, the NAPI and its thread,
    /// the XDP program and the AF_XDP socket.
    ///
    /// Strategies are checked against the neighbouring sections, passed in: `queues` is the
    /// number of rx queues per core (`nic.queues`; priowfq and drr give one slice or weight
    /// per queue) and `cores` is `cpu.cores` (one entry of `core_strategies` per core).
    pub(super) fn validate(&self, origin: &str, queues: usize, cores: u32, napi: &super::nic::NapiSpec) -> Result<()> {
        self.validate_xdp(origin)?;
        if let IoSpec::BatchedSyscall(b) = &self.io {
            if b.irq.t_irq_busy.ps > 0 {
                return Err(ConfigError::new(
                    origin,
                    "host.t_irq_busy",
                    Some(format!("\"{}\"", b.irq.t_irq_busy)),
                    "0 with host.io = \"batched-syscall\": its interrupt wakes a sleeping thread, and nothing runs on the core when it comes",
                )
                .into());
            }
        }
        if let Some(rings) = self.io.rings() {
            rings.validate(origin, queues, cores)?;
        }
        if let IoSpec::BusyPoll(b) = &self.io {
            if b.batch.empty.t_empty.ps == 0 && b.batch.calls.t_call.ps == 0 {
                return Err(ConfigError::new(
                    origin,
                    "host.batch.t_empty",
                    Some("\"0ns\"".into()),
                    "a cost above 0 for an empty poll (or host.batch.t_call): a core spinning for free never lets time pass",
                )
                .into());
            }
        }
        if let Some(n) = self.io.device_napi() {
            let s = &n.softirq;
            if s.budget_time.ps == 0 {
                return Err(
                    ConfigError::new(origin, "host.budget_time", Some("\"0ps\"".into()), "a time above 0").into()
                );
            }
            if napi.threaded && s.softirq != SoftirqRun::default() {
                return Err(ConfigError::new(
                    origin,
                    "host.softirq",
                    Some("\"defer\"".into()),
                    "no host.softirq with nic.napi.threaded = true: a NAPI thread polls, not the NET_RX softirq",
                )
                .into());
            }
            // (Its thread's keys are read only where a thread polls it.)
            if !napi.threaded && n.thread != ThreadSpec::default() {
                return Err(ConfigError::new(
                    origin,
                    "host.thread",
                    None,
                    format!(
                        "no host.thread with host.io = \"{}\" unless nic.napi.threaded = true: only a NAPI thread has a wake-up (host.io = \"threaded-napi\", or a device's NAPI with nic.napi.threaded)",
                        self.io.name()
                    ),
                )
                .into());
            }
        }
        Ok(())
    }

    /// The XDP program's times only where its mode and action read them; the AF_XDP socket's
    /// rings in range, and its program a native redirect.
    fn validate_xdp(&self, origin: &str) -> Result<()> {
        if let IoSpec::AfXdp(io) = &self.io {
            let (a, x) = (&io.af_xdp, &io.xdp);
            for (key, n) in [
                ("host.af_xdp.rx_size", Some(a.rx_size)),
                ("host.af_xdp.fill_size", Some(a.fill_size)),
                ("host.af_xdp.tx_size", a.tx_size),
                ("host.af_xdp.comp_size", a.comp_size),
            ] {
                let Some(n) = n else { continue };
                if !n.is_power_of_two() {
                    return Err(ConfigError::new(
                        origin,
                        key,
                        Some(n.to_string()),
                        "a power of two (the kernel's rings are)",
                    )
                    .into());
                }
            }
            let l2fwd = a.role == XskRole::L2fwd;
            let unread: [(&str, bool, &str); 5] = [
                ("host.af_xdp.tx_size", a.tx_size.is_some() && !l2fwd, "no key with role = \"rxdrop\": only l2fwd sends"),
                ("host.af_xdp.comp_size", a.comp_size.is_some() && !l2fwd, "no key with role = \"rxdrop\": only l2fwd sends"),
                (
                    "host.af_xdp.t_xmit_zc",
                    a.t_xmit_zc.is_some() && (!l2fwd || !a.zero_copy),
                    "no key unless role = \"l2fwd\" with zero_copy = true (the driver's send in its NAPI poll)",
                ),
                (
                    "host.af_xdp.t_xmit_copy",
                    a.t_xmit_copy.is_some() && (!l2fwd || a.zero_copy),
                    "no key unless role = \"l2fwd\" with zero_copy = false (the kick's xsk_generic_xmit)",
                ),
                (
                    "host.af_xdp.rx_full",
                    a.rx_full == Some(XskRxFull::Stop) && !(a.zero_copy && a.need_wakeup),
                    "\"drop\" or no key unless zero_copy = true and need_wakeup = true (a copy-mode socket, or one without need_wakeup, drops a frame its full ring refuses)",
                ),
            ];
            if let Some((key, _, want)) = unread.iter().find(|u| u.1) {
                return Err(ConfigError::new(origin, *key, None, *want).into());
            }
            // l2fwd's send has no built-in cost: no measurement of it is at hand, and it
            // is not left to a silent 0.
            let send = if a.zero_copy {
                ("host.af_xdp.t_xmit_zc", a.t_xmit_zc)
            } else {
                ("host.af_xdp.t_xmit_copy", a.t_xmit_copy)
            };
            if l2fwd && send.1.is_none() {
                return Err(ConfigError::new(
                    origin,
                    send.0,
                    None,
                    "a time per frame sent with role = \"l2fwd\" (e.g. \"20ns\"; \"0ns\" leaves it out): pktsim has no measured default for it",
                )
                .into());
            }
            if a.zero_copy && !a.need_wakeup && self.io.poll().t_poll.ps == 0 {
                return Err(ConfigError::new(
                    origin,
                    "host.t_poll",
                    Some("\"0ns\"".into()),
                    "a cost above 0 with zero_copy = true and need_wakeup = false: a driver short of fill-ring frames polls again at once, and a poll that costs nothing never lets time pass",
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
        let IoSpec::Xdp(io) = &self.io else { return Ok(()) };
        let x = &io.xdp;
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
        if !native && x.action != XdpAction::Pass && x.t_skb.is_none() && self.stack.t_proc.is_some() {
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

impl Rings {
    /// One strategy per core where given per core, and each strategy's keys in range.
    fn validate(&self, origin: &str, queues: usize, cores: u32) -> Result<()> {
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
        Ok(())
    }
}

impl IoModeKind {
    /// Whether the mode's cores sleep when out of work (idle states apply); a polling mode's
    /// (`server`, `busy-poll`) spin.
    pub fn sleeps(self) -> bool {
        !matches!(self, IoModeKind::Server | IoModeKind::BusyPoll)
    }

    /// The `host.io` value, as the scenario format writes it.
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}

/// `[host]` from the text of its table (tests).
#[cfg(test)]
pub(crate) fn host(text: &str) -> HostSpec {
    crate::loader::deserialize_toml(text, "t").unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;
    use crate::scenario::nic::NapiSpec;

    /// `[host]` read and checked as a scenario's, with `queues` rx queues per core, `cores`
    /// cores and the device's NAPI threaded or not.
    fn check(text: &str, queues: usize, cores: u32, threaded: bool) -> Result<HostSpec> {
        #[derive(Deserialize)]
        struct File {
            host: HostSpec,
        }
        let text = format!("[host]\n{text}").replace("\n[", "\n[host.");
        let f: File = crate::loader::deserialize_toml(&text, "t")?;
        super::super::ranges::check(&toml::from_str(&text).expect("TOML"), "t")?;
        f.host.validate("t", queues, cores, &NapiSpec { threaded, ..NapiSpec::default() })?;
        Ok(f.host)
    }

    fn message(text: &str) -> String {
        check(text, 1, 1, false).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn each_mode_reads_its_parts_keys_and_refuses_the_others() {
        let server = check("io = \"server\"\ntx_lock = \"40ns\"\nt_proc = \"1us\"", 1, 1, false).unwrap();
        assert_eq!(server.io.kind(), IoModeKind::Server);
        assert_eq!(
            (server.io.tx_lock(), server.stack.t_proc),
            (Duration::from_ps(40_000), Some(Duration::from_ps(1_000_000)))
        );
        let napi = check("t_irq = \"1us\"\nnetdev_budget = 600\nhz = 250", 1, 1, false).unwrap();
        assert_eq!(
            (napi.io.t_irq(), napi.io.softirq().budget, napi.io.softirq().hz),
            (Duration::from_ps(1_000_000), 600, 250)
        );
        assert_eq!(
            message("io = \"server\"\nt_irq = \"1us\""),
            "t: host.t_irq = \"1us\": expected no host.t_irq with host.io = \"server\" (only host.io = \"napi\", host.io = \"batched-syscall\", host.io = \"xdp\", host.io = \"af-xdp\" read it)"
        );
        assert_eq!(
            message("io = \"napi\"\n[xdp]\naction = \"drop\""),
            "t: host.xdp: no host.xdp with host.io = \"napi\" (only host.io = \"xdp\", host.io = \"af-xdp\" read it)"
        );
        // In a part's own table too: an empty call is a busy poller's, a wake-up a sleeper's.
        assert_eq!(
            message("io = \"batched-syscall\"\n[batch]\nt_empty = \"5ns\""),
            "t: host.batch.t_empty = \"5ns\": expected no host.batch.t_empty with host.io = \"batched-syscall\" (only host.io = \"busy-poll\" reads it)"
        );
        assert!(message("io = \"busy-poll\"\n[batch]\nt_emptyy = \"5ns\"")
            .starts_with("t: host.batch.t_emptyy: no such key here: did you mean `t_empty`?"));
        assert!(message("io = \"server\"\nt_prc = \"5ns\"")
            .starts_with("t: host.t_prc: no such key here: did you mean `t_proc`?"));
        assert!(message("io = \"serve\"").starts_with("t: host.io = \"serve\": expected one of `napi`, `server`"));
        // Errors inside a part keep their whole path.
        assert!(message("io = \"busy-poll\"\n[batch]\nsize = \"x\"").starts_with("t: host.batch.size = string \"x\""));
        assert_eq!(message("weight = -1").split(" =").next(), Some("t: host.weight"));
    }

    #[test]
    fn a_mode_writes_out_what_it_reads() {
        let text = "io = \"busy-poll\"\nt_proc = \"1us\"\n[batch]\nsize = 8\nt_call = \"100ns\"\nt_empty = \"5ns\"\n";
        let h = host(text);
        let back = toml::to_string(&h).unwrap();
        assert_eq!(host(&back), h, "{back}");
        assert!(back.starts_with("t_proc = \"1us\"\nservice = \"constant\"\nio = \"busy-poll\""), "{back}");
        assert!(!back.contains("t_irq") && !back.contains("weight") && back.contains("t_empty = \"5ns\""), "{back}");
        assert_eq!(keys_of::<HostSpec>(), &[] as &[&str], "a HostSpec is read key by key, not as one struct");
    }

    #[test]
    fn priowfq_gives_one_slice_per_queue() {
        let st = "io = \"server\"\n[strategy]\nkind = \"priowfq\"\nslices = [\"1us\", \"1us\"]";
        assert!(check(st, 2, 1, false).is_ok());
        let e = check(st, 3, 1, false).err().unwrap();
        assert_eq!(e.to_string(), "t: host.strategy.slices = 2 slices: expected one time slice above 0 per queue in nic.queues (3), highest priority first");
        let zero = "io = \"server\"\n[strategy]\nkind = \"priowfq\"\nslices = [\"1us\", \"0us\"]";
        assert_eq!(config_error(check(zero, 2, 1, false)).path, "host.strategy.slices");
    }

    #[test]
    fn drr_gives_one_weight_per_queue_and_a_quantum() {
        let st = "io = \"server\"\n[strategy]\nkind = \"drr\"\nweights = [3, 1]";
        assert!(check(st, 2, 1, false).is_ok());
        assert_eq!(config_error(check(st, 1, 1, false)).path, "host.strategy.weights");
        assert_eq!(config_error(check(&format!("{st}\nquantum = \"0B\""), 2, 1, false)).path, "host.strategy.weights");
    }

    #[test]
    fn core_strategies_give_one_per_core_and_are_checked_each() {
        let st = "io = \"server\"\ncore_strategies = [{ kind = \"sq\" }, { kind = \"quota\", quota = 1 }]";
        assert_eq!(
            config_error(check(st, 1, 3, false)).to_string(),
            "t: host.core_strategies = 2 entries: expected one strategy per core (3)"
        );
        assert!(check(st, 1, 2, false).is_ok());
        assert_eq!(
            config_error(check(&st.replace("quota = 1", "quota = 0"), 1, 2, false)).path,
            "host.core_strategies[1].quota"
        );
    }

    #[test]
    fn busy_polling_for_free_is_rejected() {
        assert_eq!(config_error(check("io = \"busy-poll\"", 1, 1, false)).path, "host.batch.t_empty");
        assert!(check("io = \"busy-poll\"\n[batch]\nt_call = \"10ns\"", 1, 1, false).is_ok());
    }

    #[test]
    fn only_a_napi_thread_has_a_wake_up() {
        let thread = "[thread]\nwake_latency = \"1us\"";
        assert_eq!(config_error(check(thread, 1, 1, false)).path, "host.thread");
        assert!(check(thread, 1, 1, true).is_ok(), "a device's NAPI threads");
        assert_eq!(config_error(check(&format!("io = \"server\"\n{thread}"), 1, 1, false)).path, "host.thread");
        let t = check(&format!("io = \"threaded-napi\"\n{thread}"), 1, 1, false).unwrap();
        assert_eq!(t.io.thread().wake_latency, Duration::from_ps(1_000_000));
    }

    #[test]
    fn xdp_keys_are_read_where_mode_and_action_use_them() {
        let v = |xdp: &str, host: &str| check(&format!("io = \"xdp\"\n{host}\n[xdp]\n{xdp}"), 1, 1, false);
        let drop = "action = \"drop\"\nt_prog = \"5ns\"\nt_driver = \"35ns\"";
        assert!(v(drop, "").is_ok());
        assert_eq!(config_error(v(&format!("{drop}\nt_xmit = \"5ns\""), "")).path, "host.xdp.t_xmit");
        assert_eq!(config_error(v(&format!("{drop}\nmode = \"generic\""), "")).path, "host.xdp.t_driver");
        let generic = "mode = \"generic\"\naction = \"tx\"\nt_xmit = \"10ns\"";
        assert!(v(generic, "").is_ok(), "t_skb from the cost profile");
        assert_eq!(config_error(v(generic, "t_proc = \"500ns\"")).path, "host.xdp.t_skb");
        assert!(v(&format!("{generic}\nt_skb = \"150ns\""), "t_proc = \"500ns\"").is_ok());
        assert_eq!(config_error(v(&format!("{generic}\nt_flush = \"10ns\""), "")).path, "host.xdp.t_flush");
        assert_eq!(config_error(v("t_driver = \"10ns\"", "")).path, "host.xdp.t_driver", "pass");
    }

    #[test]
    fn napi_limits_are_in_range() {
        assert!(check("", 1, 1, false).is_ok());
        assert_eq!(message("weight = 0"), "t: host.weight = 0: expected a number of packets from 1 to 65536");
        assert_eq!(config_error(check("hz = 99", 1, 1, false)).path, "host.hz");
        assert_eq!(config_error(check("budget_time = \"0us\"", 1, 1, false)).path, "host.budget_time");
    }
}
