//! AF_XDP (`host.io = "af-xdp"`, `[host.af_xdp]`): a native XDP program redirects every
//! frame to the AF_XDP socket of its queue (`bpf_redirect_map` on an XSKMAP), and a user
//! thread (`[app]`) reads the socket's rx ring (`net/xdp/xsk.c`: `xsk_rcv`,
//! `__xsk_rcv_zc`, `xsk_flush`; libxdp's `xsk_ring_cons__peek`).
//!
//! ```text
//!  NAPI poll (napi/): descriptor -> program -> XSKMAP redirect:
//!      zero copy: the descriptor onto the rx ring (t_xsk); copy mode: xsk_rcv copies
//!      the frame into a umem frame first (t_copy + t_copy_per_byte)
//!      rx ring full (rx_size entries): drop, XDP_STATISTICS rx_ring_full
//!  end of the poll: xsk_flush publishes the ring (host.xdp.t_flush) and wakes a reader
//!      asleep in poll() (app.wake_latency, app.t_wakeup)
//!  user thread: peek up to `batch` descriptors (app.t_call per batch, plus a kick
//!      system call t_syscall without need_wakeup), app.t_packet per frame, give the
//!      umem frames back to the fill ring; an empty ring: sleep in poll(), or with
//!      busy_poll drive the NAPI with recvfrom (SO_PREFER_BUSY_POLL, budget = batch)
//! ```
//!
//! The fill ring is kept full (the thread gives every frame back as it reads it; umem
//! and fill ring sizes are not modelled) and frames are consumed by the thread: an
//! `l2fwd` thread's transmit path is not modelled.

use crate::engine::app::{AppParams, DropKind};
use crate::engine::costs::Costs;
use crate::engine::time::Span;
use crate::price::ModeCosts;
use crate::scenario::{AppCore, ResolvedScenario};

/// A busy-polling AF_XDP thread never sleeps: its loop has no timeout.
const FOREVER: Span = Span::from_ps(u64::MAX / 4);

/// Kernel time per frame onto the socket's rx ring (the copy in copy mode), ps, for a
/// frame of `bytes` bytes.
pub fn xsk_ps(sc: &ResolvedScenario, bytes: f64) -> f64 {
    let a = &sc.scenario.host.io.af_xdp().cloned().unwrap_or_default();
    let copy = if a.zero_copy {
        0.0
    } else {
        a.t_copy.ps as f64 + a.t_copy_per_byte.map_or(0.0, |b| b.fs_per_byte as f64) * bytes / 1e3
    };
    a.t_xsk.ps as f64 + copy
}

/// Per-byte part of the kernel's per-frame time (copy mode), fs per byte.
pub fn xsk_fs_per_byte(sc: &ResolvedScenario) -> u64 {
    let a = &sc.scenario.host.io.af_xdp().cloned().unwrap_or_default();
    if a.zero_copy {
        0
    } else {
        a.t_copy_per_byte.map_or(0, |b| b.fs_per_byte)
    }
}

/// The user thread as the application the NAPI delivers to: the rx ring is its socket
/// (`rx_size` entries), its batch and busy polling are `[host.af_xdp]`'s.
pub fn app_params(sc: &ResolvedScenario) -> Option<AppParams> {
    let (a, x) = (sc.scenario.app.as_ref()?, &sc.scenario.host.io.af_xdp().cloned().unwrap_or_default());
    let kick = if x.need_wakeup { Span::ZERO } else { x.t_syscall.into() };
    Some(AppParams {
        t_packet: a.t_packet.into(),
        t_call: Span::from(a.t_call) + kick,
        batch: x.batch,
        wake_latency: a.wake_latency.into(),
        t_wakeup: a.t_wakeup.into(),
        rcvbuf: x.rx_size as u64,
        truesize: 1,
        same_core: a.core == AppCore::Same,
        busy: if x.busy_poll { FOREVER } else { Span::ZERO },
        drop_kind: DropKind::XskRing,
        weight: crate::engine::sched::weight_of(a.nice),
    })
}

/// The XDP path of `xdp.rs` (driver, program, a flush per poll) with the socket's cost per
/// frame, the user thread as the application, and with busy polling and deferral the
/// NAPI left to the deferral timer while the thread is busy reading.
pub fn mode_costs(sc: &ResolvedScenario, costs: &Costs, mut m: ModeCosts) -> ModeCosts {
    let (x, n) = (&sc.scenario.host.io.af_xdp().cloned().unwrap_or_default(), &sc.scenario.nic);
    let per_poll = sc.scenario.host.io.poll().weight.min(n.rx_ring).max(1) as f64;
    // xdp.rs prices a redirect's flush per devmap bulk; the socket's is per poll.
    m.terms =
        m.terms
            .into_iter()
            .filter(|t| t.name != "xdp xmit")
            .map(|t| {
                if t.name == "xdp flush" {
                    crate::price::IoCost::per_event("xdp flush", t.ps, per_poll, 1.0)
                } else {
                    t
                }
            })
            .collect();
    m.terms.push(crate::price::IoCost {
        fs_per_byte: xsk_fs_per_byte(sc) as f64,
        ..crate::price::IoCost::per_frame("xsk rx ring", xsk_ps(sc, 0.0))
    });
    m.tx_clean_ps = 0.0;
    m.tx_lock = false;
    m.notes.clear();
    let p = app_params(sc);
    let extra = costs.t_poll.ps() as f64 * (1.0 / x.batch.max(1) as f64 - 1.0 / per_poll);
    m.app = p.map(|p| crate::price::AppCosts {
        frame_ps: p.t_packet.ps() as f64 + p.t_call.ps() as f64 / p.batch.max(1) as f64,
        same_core: p.same_core,
        drives: None,
        busy_extra_ps: extra,
        t_call_ps: p.t_call.ps() as f64,
        t_packet_ps: p.t_packet.ps() as f64,
        batch: p.batch.max(1) as f64,
        wake_latency_ps: p.wake_latency.ps() as f64,
        t_wakeup_ps: p.t_wakeup.ps() as f64,
        busy_poll_ps: p.busy.ps() as f64,
    });
    if let crate::price::Events::Napi(e) = &mut m.events {
        // Nothing is sent: the socket's frames end at the reader.
        (e.shared_tx, e.tx_vector) = (false, false);
    }
    if x.busy_poll && n.napi.defers() {
        m.poll_gap_ps = n.napi.gro_flush_timeout.ps as f64;
    }
    m
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    fn toml(af_xdp: &str, app: &str) -> String {
        let host = "io = \"af-xdp\"\nt_irq = \"1us\"\nt_poll = \"200ns\"\nt_proc = \"1us\"";
        let extra = format!(
            "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[host.xdp]\naction = \"redirect\"\nt_driver = \"40ns\"\nt_prog = \"10ns\"\nt_flush = \"100ns\"\n[host.af_xdp]\nt_xsk = \"30ns\"\nt_syscall = \"800ns\"\nbatch = 4\n{af_xdp}\n[app]\nt_packet = \"50ns\"\nt_call = \"20ns\"\nwake_latency = \"2us\"\nt_wakeup = \"1us\"\n{app}"
        );
        node_toml(host, &extra)
    }

    /// Zero copy, need_wakeup, the thread asleep in poll(). Frames at 10, 10.01, 10.02 us:
    /// IRQ 10-11; poll 11-11.2; three frames of 40 + 10 + 30 ns to 11.44; xsk_flush
    /// 11.44-11.54 publishes them and wakes the thread (runs at 13.54): wake-up to 14.54,
    /// a batch (20 ns) and three frames of 50 ns: read at 14.61, 14.66, 14.71.
    #[test]
    fn the_ring_is_published_at_the_end_of_the_poll_and_the_thread_reads_in_batches() {
        let (r, dep) = trace(&toml("", ""), &[(10_000, 64), (10_010, 64), (10_020, 64)]);
        assert!(dep.is_empty());
        assert_eq!(r.consumed_packets, 3);
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (4_610.0, 4_690.0));
        assert_eq!(r.io.json()["xdp"]["flushes"], 1);
        assert_eq!(r.io.json()["app"]["wakeups"], 1);
    }

    /// Without need_wakeup each batch kicks the kernel with a system call (800 ns).
    #[test]
    fn without_need_wakeup_every_batch_makes_a_system_call() {
        let (r, _) = trace(&toml("need_wakeup = false", ""), &[(10_000, 64), (10_010, 64), (10_020, 64)]);
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (5_410.0, 5_490.0));
    }

    /// An rx ring of 2 entries: the third frame of the poll is dropped.
    #[test]
    fn a_full_rx_ring_drops() {
        let (r, _) = trace(&toml("rx_size = 2", ""), &[(10_000, 64), (10_010, 64), (10_020, 64)]);
        assert_eq!((r.consumed_packets, r.drops["xsk_rx_ring_full"]), (2, 1));
    }

    /// Copy mode adds the copy (100 ns + 1 ns/B x 64 B) to each frame in the kernel.
    #[test]
    fn copy_mode_copies_each_frame_into_the_umem() {
        let (r, _) =
            trace(&toml("zero_copy = false\nt_copy = \"100ns\"\nt_copy_per_byte = \"1ns/B\"", ""), &[(10_000, 64)]);
        // IRQ 10-11, poll to 11.2, frame 40 + 10 + 30 + 164 ns to 11.444, flush to 11.544,
        // thread at 13.544, wake-up to 14.544, batch to 14.564, frame to 14.614.
        assert_eq!(r.latency_ns.min, 4_614.0);
    }
}
