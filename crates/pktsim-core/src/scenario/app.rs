//! `[socket]` and `[app]`: an application that receives the frames the stack delivers
//! (instead of forwarding them), through a socket; and their checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check_range;
use super::host::{HostSpec, IoModeKind, XdpAction};
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
    /// Fixed cost of one receive call (the system call).
    #[serde(default)]
    pub t_call: Duration,
    /// Most frames one call reads (`recvmmsg` vlen; 1: `recvmsg`).
    #[serde(default = "one")]
    pub batch: u32,
    /// "same": the NAPI's core; "other": a core of its own.
    #[serde(default)]
    pub core: AppCore,
    /// From `sk_data_ready` waking the blocked thread to it running (scheduler, idle exit).
    #[serde(default)]
    pub wake_latency: Duration,
    /// CPU time of one wake-up (switching in, returning from `epoll_wait`).
    #[serde(default)]
    pub t_wakeup: Duration,
}

fn one() -> u32 {
    1
}

impl Default for AppSpec {
    fn default() -> Self {
        AppSpec { t_packet: Duration::default(), t_call: Duration::default(), batch: 1, core: AppCore::Same, wake_latency: Duration::default(), t_wakeup: Duration::default() }
    }
}

/// The application's socket (`[socket]`, read with `[app]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SocketSpec {
    /// `SO_RCVBUF` / `net.core.rmem_default` (212992 B): the queue holds frames while the
    /// sum of their `truesize` stays within it; a frame that would exceed it is dropped
    /// and counted as the kernel counts it (`RcvbufErrors`, `rcvbuf_errors` here).
    #[serde(default = "default_rcvbuf")]
    pub rcvbuf: Bytes,
    /// `skb->truesize` of one queued frame: its buffer and skb, not its length.
    #[serde(default = "default_truesize")]
    pub truesize: Bytes,
}

fn default_rcvbuf() -> Bytes {
    Bytes::new(212_992)
}
fn default_truesize() -> Bytes {
    Bytes::new(768)
}

impl Default for SocketSpec {
    fn default() -> Self {
        SocketSpec { rcvbuf: default_rcvbuf(), truesize: default_truesize() }
    }
}

/// `[app]` needs an I/O mode whose stack delivers frames (napi, xdp passing them); batch
/// and the socket's sizes in range; `[socket]` only with `[app]`.
pub(super) fn validate(origin: &str, app: Option<&AppSpec>, socket: &SocketSpec, host: &HostSpec) -> Result<()> {
    let Some(app) = app else {
        if *socket != SocketSpec::default() {
            return Err(ConfigError::new(origin, "socket", None, "no [socket] without an [app] reading it").into());
        }
        return Ok(());
    };
    let delivers = match host.io {
        IoModeKind::Napi => true,
        IoModeKind::Xdp => host.xdp.action == XdpAction::Pass,
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
    check_range(origin, "app.batch", app.batch as u64, 1, 1 << 16, "a number of frames per call")?;
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
        let napi = HostSpec::default();
        let app = AppSpec::default();
        assert!(validate("t", Some(&app), &SocketSpec::default(), &napi).is_ok());
        let busy = HostSpec { io: IoModeKind::BusyPoll, ..HostSpec::default() };
        assert_eq!(config_error(validate("t", Some(&app), &SocketSpec::default(), &busy)).path, "app");
        let small = SocketSpec { rcvbuf: Bytes::new(100), ..SocketSpec::default() };
        assert_eq!(config_error(validate("t", Some(&app), &small, &napi)).to_string(), "t: socket.rcvbuf = \"100B\": expected at least one frame's truesize (768B)");
        assert_eq!(config_error(validate("t", None, &small, &napi)).path, "socket");
        assert_eq!(config_error(validate("t", Some(&AppSpec { batch: 0, ..app }), &SocketSpec::default(), &napi)).path, "app.batch");
    }
}
