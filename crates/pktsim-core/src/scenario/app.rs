//! `[socket]` and `[app]`: an application that receives the frames the stack delivers
//! (instead of forwarding them), through a socket; and their checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check_range;
use super::host::{default_t_syscall, default_t_wakeup, HostSpec, IoSpec, XdpAction};
use crate::error::{ConfigError, Result};
use crate::units::{Bytes, Duration};

/// Where the application thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AppCore {
    /// On the core whose NAPI feeds its socket (`SO_INCOMING_CPU`, IRQ affinity = app
    /// affinity): interrupts and softirq processing run before it.
    #[default]
    Same,
    /// On a core of its own, one per NAPI core (`cpu.cores` more cores in the CPU figures).
    Other,
}

/// How the application waits for frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AppWait {
    /// `epoll_wait`, then the reads: busy polls for `socket.busy_poll` (`ep_busy_loop`).
    #[default]
    Epoll,
    /// A blocking `recvmsg`: busy polls for `socket.busy_read` (`sk_busy_loop`).
    Recvmsg,
}

/// The application: one thread per core with a NAPI, reading its socket.
///
/// With nothing to read the thread blocks (`recvmsg` / `epoll_wait`); the stack's
/// `sk_data_ready` wakes it, and it runs `wake_latency` later, pays `t_wakeup`, then
/// reads: each call (`recvmmsg`) takes up to `batch` frames for `t_call`, then `t_packet`
/// per frame; it blocks again when the socket is empty. Latency runs to the frame's read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    /// The application's own work per frame (the copy to user space included).
    #[serde(default)]
    pub t_packet: Duration,
    /// Fixed cost of one receive call (the system call; with AF_XDP the ring handling of
    /// one batch). Default 78 ns: a null system call (`getppid`), measured by `pktsim
    /// testbed probe` on a KVM guest on an Intel Xeon at 2.6 GHz, Linux 6.18 (VALIDATION.md);
    /// a call that moves frames costs more.
    #[serde(default = "default_t_syscall")]
    pub t_call: Duration,
    /// Most frames one call reads (`recvmmsg` vlen; 1: `recvmsg`).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 65536), extend("x-quantity" = "a number of frames per call"))]
    pub batch: u32,
    /// "same": the NAPI's core; "other": a core of its own.
    #[serde(default)]
    pub core: AppCore,
    /// From `sk_data_ready` waking the blocked thread to it running, during which its CPU
    /// does none of its work: the wake-up's IPI when the thread sleeps on another CPU.
    /// Default 0: the switch is `t_wakeup`, leaving an idle state `[cpu.idle]`'s.
    #[serde(default)]
    pub wake_latency: Duration,
    /// CPU time of one wake-up (switching in, returning from `epoll_wait`). Default 0.74 us:
    /// a wake-up and a context switch on one CPU (half a futex round trip between two
    /// threads pinned there), measured by `pktsim testbed probe` on a KVM guest on an Intel
    /// Xeon at 2.6 GHz, Linux 6.18 (VALIDATION.md).
    #[serde(default = "default_t_wakeup")]
    pub t_wakeup: Duration,
    /// "epoll" (`epoll_wait`, busy polling for `socket.busy_poll`) or "recvmsg" (a
    /// blocking read, busy polling for `socket.busy_read`).
    #[serde(default)]
    pub wait: AppWait,
    /// The thread's nice level (-20 ... 19): its weight against ksoftirqd (nice 0) when
    /// they share a core (`sched_prio_to_weight`).
    #[serde(default)]
    #[schemars(range(min = -20, max = 19), extend("x-quantity" = "a nice level"))]
    #[schemars(extend("x-linux" = "nice / setpriority"))]
    pub nice: i32,
}

fn one() -> u32 {
    1
}

impl Default for AppSpec {
    fn default() -> Self {
        AppSpec {
            t_packet: Duration::default(),
            t_call: default_t_syscall(),
            batch: 1,
            core: AppCore::Same,
            wake_latency: Duration::default(),
            t_wakeup: default_t_wakeup(),
            wait: AppWait::Epoll,
            nice: 0,
        }
    }
}

/// The application's socket (`[socket]`, read with `[app]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SocketSpec {
    /// The socket's receive buffer as the kernel holds it (`sk_rcvbuf`): `net.core.rmem_default`
    /// (212992 B), or twice what `setsockopt(SO_RCVBUF)` was given (the kernel doubles it
    /// for its overhead). The queue holds frames while the sum of their `truesize` stays
    /// within it; a frame that would exceed it is dropped and counted as the kernel counts
    /// it (`RcvbufErrors`, `rcvbuf_errors` here).
    #[serde(default = "default_rcvbuf")]
    pub rcvbuf: Bytes,
    /// `skb->truesize` of one queued frame: its buffer and skb, not its length.
    #[serde(default = "default_truesize")]
    pub truesize: Bytes,
    /// `net.core.busy_read` / `SO_BUSY_POLL`: how long a blocking read (`app.wait =
    /// "recvmsg"`) busy polls the NAPI before it sleeps; 0: no busy polling.
    #[serde(default)]
    #[schemars(extend("x-linux" = "net.core.busy_read"))]
    pub busy_read: Duration,
    /// `net.core.busy_poll`: how long `epoll_wait` (`app.wait = "epoll"`) busy polls.
    #[serde(default)]
    #[schemars(extend("x-linux" = "net.core.busy_poll"))]
    pub busy_poll: Duration,
    /// `SO_PREFER_BUSY_POLL`: with `nic.napi.defer_hard_irqs` and `gro_flush_timeout`, the
    /// interrupt stays masked after a busy poll (the timer is armed instead), and the
    /// softirq completes a full poll instead of polling again: the application drives the
    /// NAPI. With `app.wait = "epoll"` and `busy_poll` 0, epoll polls the NAPI once before
    /// it sleeps (Linux 6.13, `ep_busy_loop_on`).
    #[serde(default)]
    #[schemars(extend("x-linux" = "SO_PREFER_BUSY_POLL"))]
    pub prefer_busy_poll: bool,
    /// `SO_BUSY_POLL_BUDGET`: frames per busy poll (`BUSY_POLL_BUDGET` = 8).
    #[serde(default = "default_busy_budget")]
    #[schemars(range(min = 1, max = 65536), extend("x-quantity" = "a number of frames per busy poll"))]
    #[schemars(extend("x-linux" = "SO_BUSY_POLL_BUDGET"))]
    pub busy_poll_budget: u32,
}

fn default_busy_budget() -> u32 {
    8
}

fn default_rcvbuf() -> Bytes {
    Bytes::new(212_992)
}
fn default_truesize() -> Bytes {
    Bytes::new(768)
}

impl Default for SocketSpec {
    fn default() -> Self {
        SocketSpec {
            rcvbuf: default_rcvbuf(),
            truesize: default_truesize(),
            busy_read: Duration::default(),
            busy_poll: Duration::default(),
            prefer_busy_poll: false,
            busy_poll_budget: default_busy_budget(),
        }
    }
}

/// `[app]` needs an I/O mode whose stack delivers frames (napi, xdp passing them); batch
/// and the socket's sizes in range; `[socket]` only with `[app]`; busy polling with the
/// application on the NAPI's core and a poll that costs time; IRQ suspension with epoll's
/// preferred busy polling and deferral.
pub(super) fn validate(
    origin: &str,
    app: Option<&AppSpec>,
    socket: &SocketSpec,
    host: &HostSpec,
    napi: &super::nic::NapiSpec,
) -> Result<()> {
    if napi.irq_suspend_timeout.ps > 0 {
        // (socket.busy_poll may be 0: epoll busy polls once with prefer_busy_poll, 6.13.)
        let ok = app.is_some_and(|a| a.wait == AppWait::Epoll) && socket.prefer_busy_poll && napi.defers();
        if !ok {
            return Err(ConfigError::new(
                origin,
                "nic.napi.irq_suspend_timeout",
                Some(format!("\"{}\"", napi.irq_suspend_timeout)),
                "0, unless an [app] waits in epoll with socket.prefer_busy_poll, nic.napi.defer_hard_irqs and gro_flush_timeout set (IRQ suspension is epoll's preferred busy polling)",
            )
            .into());
        }
    }
    if host.io.thread().policy != super::ThreadPolicy::default()
        && !(napi.threaded && app.is_some_and(|a| a.core == AppCore::Same))
    {
        return Err(ConfigError::new(
            origin,
            "host.thread.policy",
            Some("\"fifo\"".into()),
            "\"other\" unless an [app] shares the core of a device's NAPI thread (nic.napi.threaded, app.core = \"same\"): the policy decides only between the two",
        )
        .into());
    }
    let Some(app) = app else {
        if *socket != SocketSpec::default() {
            return Err(ConfigError::new(origin, "socket", None, "no [socket] without an [app] reading it").into());
        }
        return Ok(());
    };
    if !(-20..=19).contains(&app.nice) {
        return Err(
            ConfigError::new(origin, "app.nice", Some(app.nice.to_string()), "a nice level from -20 to 19").into()
        );
    }
    if app.nice != 0 && app.core != AppCore::Same {
        return Err(ConfigError::new(
            origin,
            "app.nice",
            Some(app.nice.to_string()),
            "0 unless app.core = \"same\" (the nice level weighs the thread against ksoftirqd or the NAPI thread on its core)",
        )
        .into());
    }
    if let IoSpec::AfXdp(io) = &host.io {
        // The AF_XDP thread reads the socket's rx ring: its batch and busy polling are
        // host.af_xdp's, and there is no socket buffer.
        if app.batch != 1 {
            return Err(ConfigError::new(
                origin,
                "app.batch",
                Some(app.batch.to_string()),
                "no key with host.io = \"af-xdp\": host.af_xdp.batch is the thread's batch",
            )
            .into());
        }
        if *socket != SocketSpec::default() {
            return Err(ConfigError::new(
                origin,
                "socket",
                None,
                "no [socket] with host.io = \"af-xdp\": [host.af_xdp] describes the AF_XDP socket",
            )
            .into());
        }
        let busy = io.af_xdp.busy_poll.ps > 0;
        if busy && app.core != AppCore::Same {
            return Err(ConfigError::new(
                origin,
                "app.core",
                Some("\"other\"".into()),
                "\"same\" with host.af_xdp.busy_poll: pktsim busy polls from the NAPI's core",
            )
            .into());
        }
        // A loop that costs nothing never lets time pass: each that can loop has a cost.
        let zero = |key: &str, why: &str| -> Result<()> {
            Err(ConfigError::new(
                origin,
                key,
                Some("\"0ns\"".into()),
                format!("a cost above 0 {why}, and a loop that costs nothing never lets time pass"),
            )
            .into())
        };
        if io.af_xdp.wait == crate::scenario::XskWait::Spin && !busy && app.t_call.ps == 0 {
            return zero(
                "app.t_call",
                "with host.af_xdp.wait = \"spin\": each empty look at the ring costs app.t_call",
            );
        }
        if io.af_xdp.role == crate::scenario::XskRole::L2fwd && app.t_call.ps == 0 && io.af_xdp.t_syscall.ps == 0 {
            return zero(
                "app.t_call",
                "(or host.af_xdp.t_syscall above 0) with role = \"l2fwd\": a thread whose tx ring is full kicks and looks again",
            );
        }
        if busy && io.napi.poll.t_poll.ps == 0 {
            return zero("host.t_poll", "with host.af_xdp.busy_poll: the thread's busy polls");
        }
        return Ok(());
    }
    let delivers = match &host.io {
        IoSpec::Napi(_) => true,
        IoSpec::Xdp(x) => x.xdp.action == XdpAction::Pass,
        _ => false,
    };
    if !delivers {
        return Err(ConfigError::new(
            origin,
            "app",
            None,
            "host.io = \"napi\" (or \"xdp\" with action = \"pass\"): the application reads what the kernel's stack delivers",
        )
        .into());
    }
    let (busy, other) = match app.wait {
        AppWait::Epoll => (("socket.busy_poll", socket.busy_poll), ("socket.busy_read", socket.busy_read)),
        AppWait::Recvmsg => (("socket.busy_read", socket.busy_read), ("socket.busy_poll", socket.busy_poll)),
    };
    if other.1.ps > 0 {
        return Err(ConfigError::new(
            origin,
            other.0,
            Some(format!("\"{}\"", other.1)),
            format!(
                "0 with app.wait = {:?}: that wait busy polls for {}",
                format!("{:?}", app.wait).to_lowercase(),
                busy.0
            ),
        )
        .into());
    }
    // epoll with prefer_busy_poll busy polls once even with busy_poll_usecs 0 (Linux 6.13,
    // `ep_busy_loop_on`); a socket's busy_read has no such pass.
    let polls_once = app.wait == AppWait::Epoll && socket.prefer_busy_poll;
    if (busy.1.ps > 0 || polls_once) && app.core != AppCore::Same {
        let what = if busy.1.ps > 0 { busy.0 } else { "socket.prefer_busy_poll (epoll's busy poll)" };
        return Err(ConfigError::new(
            origin,
            "app.core",
            Some("\"other\"".into()),
            format!("\"same\" with {what}: pktsim busy polls from the NAPI's core"),
        )
        .into());
    }
    if busy.1.ps > 0 && host.io.poll().t_poll.ps == 0 {
        return Err(ConfigError::new(
            origin,
            "host.t_poll",
            Some("\"0ns\"".into()),
            format!("a cost above 0 with {}: a busy-poll loop that costs nothing never lets time pass", busy.0),
        )
        .into());
    }
    if socket.prefer_busy_poll && busy.1.ps == 0 && !polls_once {
        return Err(ConfigError::new(
            origin,
            "socket.prefer_busy_poll",
            Some("true".into()),
            format!("false unless {} is set or app.wait = \"epoll\": only a busy-polling socket prefers it", busy.0),
        )
        .into());
    }
    check_range(origin, "socket.truesize", socket.truesize.bytes, 1, 1 << 20, "a size in bytes")?;
    if socket.rcvbuf.bytes < socket.truesize.bytes {
        return Err(ConfigError::new(
            origin,
            "socket.rcvbuf",
            Some(format!("\"{}\"", socket.rcvbuf)),
            format!("at least one frame's truesize ({})", socket.truesize),
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    #[test]
    fn the_app_reads_what_the_stack_delivers() {
        let n = super::super::nic::NapiSpec::default();
        let napi = HostSpec::default();
        let app = AppSpec::default();
        assert!(validate("t", Some(&app), &SocketSpec::default(), &napi, &n).is_ok());
        let busy = super::super::host::host("io = \"busy-poll\"\n[batch]\nt_empty = \"50ns\"");
        assert_eq!(config_error(validate("t", Some(&app), &SocketSpec::default(), &busy, &n)).path, "app");
        let small = SocketSpec { rcvbuf: Bytes::new(100), ..SocketSpec::default() };
        assert_eq!(
            config_error(validate("t", Some(&app), &small, &napi, &n)).to_string(),
            "t: socket.rcvbuf = \"100B\": expected at least one frame's truesize (768B)"
        );
        assert_eq!(config_error(validate("t", None, &small, &napi, &n)).path, "socket");
    }

    #[test]
    fn busy_polling_is_checked_against_the_wait_the_core_and_the_poll_cost() {
        let us = |n: u64| Duration::from_ps(n * 1_000_000);
        let n = super::super::nic::NapiSpec::default();
        let host = super::super::host::host("t_poll = \"200ns\"");
        let app = AppSpec::default();
        let sock = SocketSpec { busy_poll: us(50), prefer_busy_poll: true, ..SocketSpec::default() };
        assert!(validate("t", Some(&app), &sock, &host, &n).is_ok());
        assert_eq!(
            config_error(validate("t", Some(&AppSpec { wait: AppWait::Recvmsg, ..app.clone() }), &sock, &host, &n))
                .path,
            "socket.busy_poll"
        );
        assert_eq!(
            config_error(validate("t", Some(&AppSpec { core: AppCore::Other, ..app.clone() }), &sock, &host, &n)).path,
            "app.core"
        );
        let free_polls = super::super::host::host("t_poll = \"0ns\"");
        assert_eq!(config_error(validate("t", Some(&app), &sock, &free_polls, &n)).path, "host.t_poll");
        assert!(validate("t", Some(&app), &sock, &HostSpec::default(), &n).is_ok(), "a poll costs 180 ns by default");
        // epoll with prefer_busy_poll polls once even with busy_poll 0 (Linux 6.13); a
        // recvmsg reader without busy_read does not busy poll at all.
        let prefer_only = SocketSpec { prefer_busy_poll: true, ..SocketSpec::default() };
        assert_eq!(app.wait, AppWait::Epoll);
        assert!(validate("t", Some(&app), &prefer_only, &host, &n).is_ok());
        let recvmsg = AppSpec { wait: AppWait::Recvmsg, ..app.clone() };
        assert_eq!(
            config_error(validate("t", Some(&recvmsg), &prefer_only, &host, &n)).path,
            "socket.prefer_busy_poll"
        );
        let other_core = AppSpec { core: AppCore::Other, ..app.clone() };
        assert_eq!(config_error(validate("t", Some(&other_core), &prefer_only, &host, &n)).path, "app.core");
        let suspend = super::super::nic::NapiSpec { irq_suspend_timeout: us(1000), ..n.clone() };
        assert_eq!(
            config_error(validate("t", Some(&app), &sock, &host, &suspend)).path,
            "nic.napi.irq_suspend_timeout",
            "needs deferral"
        );
        let with_defer = super::super::nic::NapiSpec { defer_hard_irqs: 100, gro_flush_timeout: us(20), ..suspend };
        assert!(validate("t", Some(&app), &sock, &host, &with_defer).is_ok());
        // ... with busy_poll 0 too, as the feature's own measurements ran it.
        assert!(validate("t", Some(&app), &prefer_only, &host, &with_defer).is_ok());
        assert_eq!(
            config_error(validate("t", Some(&app), &SocketSpec::default(), &host, &with_defer)).path,
            "nic.napi.irq_suspend_timeout",
            "needs prefer_busy_poll"
        );
    }
}
