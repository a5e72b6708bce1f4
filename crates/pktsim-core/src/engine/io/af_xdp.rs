//! AF_XDP (`host.io = "af-xdp"`, `[host.af_xdp]`): a native XDP program redirects every
//! frame to the AF_XDP socket of its queue (`bpf_redirect_map` on an XSKMAP), and a user
//! thread (`[app]`) reads the socket's rx ring (`net/xdp/xsk.c`: `xsk_rcv`,
//! `__xsk_rcv_zc`, `xsk_flush`; libxdp's `xsk_ring_cons__peek`).
//!
//! ```text
//!  NAPI poll (napi/): tx clean (l2fwd: the completions onto the completion ring), zero
//!      copy l2fwd: frames of the socket's tx ring sent (t_xmit_zc each, room permitting);
//!      rx clean: descriptor -> program -> XSKMAP redirect:
//!      zero copy: the NIC's ring refilled only from the fill ring (none left: the ring
//!      runs dry, the NIC drops; need_wakeup set); the descriptor onto the rx ring
//!      (t_xsk); copy mode: xsk_rcv takes a fill-ring frame (none: rx_dropped) and copies
//!      into it (t_copy + t_copy_per_byte)
//!      rx ring full (rx_size entries): drop (rx_ring_full), or with zero copy and
//!      need_wakeup (rx_full = "stop", i40e / ice / ixgbe since 5.19) the rx clean stops
//!      and need_wakeup is set
//!  end of the poll: xsk_flush publishes the ring (host.xdp.t_flush) and wakes a reader
//!      asleep in poll() (app.wake_latency, app.t_wakeup)
//!  user thread: peek up to `batch` descriptors (app.t_call per batch, plus a kick
//!      system call t_syscall without need_wakeup), app.t_packet per frame; rxdrop gives
//!      each frame back to the fill ring, l2fwd puts it on the tx ring; an empty ring:
//!      kick where need_wakeup is set (xsk_wakeup: a software interrupt), then sleep in
//!      poll() (wait = "poll"), look again (wait = "spin", t_call a look), or busy poll
//!      the NAPI (busy_poll: SO_BUSY_POLL, SO_PREFER_BUSY_POLL, budget = batch)
//! ```
//!
//! The socket's rings and umem are `engine/xsk.rs`'s; the NAPI's side of them is
//! `napi/xdp.rs`'s (`xsk_rx_refill`, `xsk_tx`, `xsk_kicked`). Kernel behaviour from
//! `net/xdp/xsk.c`, `xsk_buff_pool.c`, `i40e_xsk.c` (`i40e_clean_rx_irq_zc`: a short
//! `i40e_alloc_rx_buffers_zc` sets the fill ring's need_wakeup, or without it returns the
//! budget; `I40E_XDP_EXIT` on a full rx ring, 50ae06648073 / b8aef650e549 / c7dd09fd4628;
//! `i40e_xsk_wakeup`: `napi_if_scheduled_mark_missed` or `i40e_force_wb`; `i40e_xmit_zc`
//! in the NAPI poll, its completions published by a later poll's clean) and xdpsock
//! (`xdp-project/bpf-examples` AF_XDP-example: 4096 umem frames all on a fill ring of
//! 4096, rings of 2048, batch 64, `-B` with SO_BUSY_POLL 20 us).

use crate::engine::app::{AppParams, DropKind};
use crate::engine::costs::Costs;
use crate::engine::time::Span;
use crate::engine::xsk::{XskParams, COPY_TX_BATCH};
use crate::price::ModeCosts;
use crate::scenario::{AfXdpSpec, AppCore, ResolvedScenario, XskRole, XskRxFull, XskWait};

/// libxdp's and xdpsock's ring size (`XSK_RING_CONS__DEFAULT_NUM_DESCS`).
const DEFAULT_RING: u32 = 2048;

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
/// (`rx_size` entries), its batch, busy polling and waiting are `[host.af_xdp]`'s, and its
/// socket's rings and umem ([`XskParams`]) hold the frames.
pub fn app_params(sc: &ResolvedScenario) -> Option<AppParams> {
    let (a, x) = (sc.scenario.app.as_ref()?, &sc.scenario.host.io.af_xdp().cloned().unwrap_or_default());
    let kick = if x.need_wakeup { Span::ZERO } else { x.t_syscall.into() };
    let spin = x.wait == XskWait::Spin;
    let busy = match (x.busy_poll.ps > 0, spin) {
        (false, _) => Span::ZERO,
        (true, true) => FOREVER,
        (true, false) => x.busy_poll.into(),
    };
    Some(AppParams {
        t_packet: a.t_packet.into(),
        t_call: Span::from(a.t_call) + kick,
        batch: x.batch,
        wake_latency: a.wake_latency.into(),
        t_wakeup: a.t_wakeup.into(),
        rcvbuf: x.rx_size as u64,
        truesize: 1,
        same_core: a.core == AppCore::Same,
        busy,
        busy_once: false,
        drop_kind: DropKind::XskRing,
        weight: crate::engine::sched::weight_of(a.nice),
        spin,
        t_kick: x.t_syscall.into(),
        xsk: Some(xsk_params(x)),
    })
}

/// The socket's rings and umem.
pub fn xsk_params(x: &AfXdpSpec) -> XskParams {
    XskParams {
        zero_copy: x.zero_copy,
        need_wakeup: x.need_wakeup,
        stop_on_full: x.zero_copy && x.need_wakeup && x.rx_full.unwrap_or_default() == XskRxFull::Stop,
        umem_frames: x.umem_frames,
        fill_size: x.fill_size,
        rx_size: x.rx_size,
        tx_size: x.tx_size.unwrap_or(DEFAULT_RING),
        comp_size: x.comp_size.unwrap_or(DEFAULT_RING),
        l2fwd: x.role == XskRole::L2fwd,
        t_xmit_copy: x.t_xmit_copy.unwrap_or_default().into(),
    }
}

/// Where the socket holds the stack back on the reader's core (zero copy, the reader on
/// its NAPI's core): the driver stops at a full rx ring (`rx_full = "stop"`), or the umem
/// runs out before the rx ring fills (fewer frames than the NIC's ring and the rx ring
/// hold). Then the NAPI processes a cycle of R frames (the rx ring's, or the umem's) and
/// stops; the reader reads them, finds its ring empty and kicks: the kick, its software
/// interrupt and the one the frames written meanwhile raise (each with its poll), and
/// the reader's wake-up where it slept in poll(), per R frames.
fn back_pressure_ps(sc: &ResolvedScenario, costs: &Costs, p: &AppParams) -> Option<f64> {
    let (xp, n) = (p.xsk.as_ref()?, &sc.scenario.nic);
    if !xp.zero_copy || !p.same_core || !p.busy.is_zero() {
        return None;
    }
    let held = n.rx_ring - 1 + xp.rx_size + if xp.l2fwd { xp.tx_size } else { 0 };
    let umem_short = xp.umem_frames < held;
    if !xp.stop_on_full && !umem_short {
        return None;
    }
    let cycle = if xp.stop_on_full { xp.rx_size.min(xp.umem_frames) } else { xp.umem_frames } as f64;
    let wake = if p.spin { 0.0 } else { p.t_wakeup.ps() as f64 };
    let events = p.t_kick.ps() as f64 + 2.0 * (costs.t_irq.ps() + costs.t_poll.ps()) as f64 + wake;
    Some(events / cycle.max(1.0))
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
    let l2fwd = x.role == XskRole::L2fwd;
    // l2fwd sends every frame again: zero copy, the driver's send from the socket's tx ring
    // in its poll; either way the completion's tx clean on the NAPI's core.
    m.tx_clean_ps = if l2fwd { costs.t_clean.ps() as f64 } else { 0.0 };
    if !l2fwd {
        // rxdrop sends nothing: no tx_work_limit on what a poll takes.
        m.cleans_per_rx = f64::INFINITY;
    }
    if l2fwd && x.zero_copy {
        m.terms.push(crate::price::IoCost::per_frame("xsk xmit", x.t_xmit_zc.unwrap_or_default().ps as f64));
    }
    m.tx_lock = false;
    m.notes.clear();
    let p = app_params(sc);
    // A busy poll is a NAPI poll with a budget of the thread's batch: its fixed costs, the
    // poll's and the socket's flush (xsk_flush at its end), come per batch, not per weight.
    let flush_ps = m.terms.iter().find(|t| t.name == "xdp flush").map_or(0.0, |t| t.ps);
    let extra = (costs.t_poll.ps() as f64 + flush_ps) * (1.0 / x.batch.max(1) as f64 - 1.0 / per_poll);
    m.app = p.map(|p| {
        // A copy-mode l2fwd thread sends in its kicks, COPY_TX_BATCH frames each.
        let send_ps = if l2fwd && !x.zero_copy {
            x.t_xmit_copy.unwrap_or_default().ps as f64 + x.t_syscall.ps as f64 / COPY_TX_BATCH as f64
        } else {
            0.0
        };
        crate::price::AppCosts {
            frame_ps: p.t_packet.ps() as f64 + p.t_call.ps() as f64 / p.batch.max(1) as f64 + send_ps,
            same_core: p.same_core,
            drives: None,
            busy_extra_ps: extra,
            t_call_ps: p.t_call.ps() as f64,
            t_packet_ps: p.t_packet.ps() as f64 + send_ps,
            batch: p.batch.max(1) as f64,
            wake_latency_ps: p.wake_latency.ps() as f64,
            t_wakeup_ps: p.t_wakeup.ps() as f64,
            busy_poll_ps: p.busy.ps() as f64,
            spin: p.spin && p.busy.is_zero(),
            back_pressure_ps: back_pressure_ps(sc, costs, &p),
            kick_per_sleep_ps: (l2fwd && x.zero_copy && !p.spin && p.busy.is_zero())
                .then(|| (x.t_syscall.ps as f64, (costs.t_irq.ps() + costs.t_poll.ps()) as f64)),
        }
    });
    if let crate::price::Events::Napi(e) = &mut m.events {
        // rxdrop sends nothing: the socket's frames end at the reader.
        let shared = n.tx_vector == crate::scenario::TxVector::Shared;
        (e.shared_tx, e.tx_vector) = (l2fwd && shared, l2fwd && !shared);
    }
    if x.busy_poll.ps > 0 && n.napi.defers() {
        m.poll_gap_ps = n.napi.gro_flush_timeout.ps as f64;
    }
    m
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    fn toml(af_xdp: &str, app: &str) -> String {
        toml_nic("", af_xdp, app)
    }

    fn toml_nic(nic: &str, af_xdp: &str, app: &str) -> String {
        let host = "io = \"af-xdp\"\nt_irq = \"1us\"\nt_poll = \"200ns\"\nt_proc = \"1us\"";
        let extra = format!(
            "[nic]\ntx_vector = \"shared\"\n{nic}\n[nic.itr]\nmode = \"off\"\n[host.xdp]\naction = \"redirect\"\nt_driver = \"40ns\"\nt_prog = \"10ns\"\nt_flush = \"100ns\"\n[host.af_xdp]\nt_xsk = \"30ns\"\nt_syscall = \"800ns\"\nbatch = 4\n{af_xdp}\n[app]\nt_packet = \"50ns\"\nt_call = \"20ns\"\nwake_latency = \"2us\"\nt_wakeup = \"1us\"\n{app}"
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

    /// An rx ring of 2 entries, a driver that drops at a full ring: the third frame of the
    /// poll is dropped.
    #[test]
    fn a_full_rx_ring_drops() {
        let (r, _) = trace(&toml("rx_size = 2\nrx_full = \"drop\"", ""), &[(10_000, 64), (10_010, 64), (10_020, 64)]);
        assert_eq!((r.consumed_packets, r.drops["xsk_rx_ring_full"]), (2, 1));
    }

    /// Zero copy, a umem of 4 frames and a NIC ring of 8 (7 usable, refilled in batches of
    /// 8): only 4 descriptors are posted, so of 6 frames at 10.000-10.005 us the NIC drops
    /// 2 (rx_missed). IRQ 10-11, poll to 11.2, 4 frames of 80 ns to 11.52; the poll's end
    /// refill finds the fill ring empty (the frames are the socket's): short, need_wakeup.
    /// xsk_flush 11.52-11.62 wakes the thread (13.62). Frames written after the interrupt
    /// fired interrupt again at 11.62: poll 12.62-12.82, short again. The thread: wake-up
    /// to 14.62, call to 14.64, reads at 14.69, 14.74, 14.79, 14.84, each frame back on
    /// the fill ring; its ring empty and the flag set, it kicks (800 ns, to 15.64): a
    /// software interrupt, IRQ 15.64-16.64, poll to 16.84, whose end refill posts the 4
    /// frames and is short of the other 3 (a ring larger than the umem never fills: every
    /// refill is short). A frame at 50 us: IRQ 50-51, poll to 51.2 (short), frame to
    /// 51.28, flush to 51.38, thread at 53.38, wake-up to 54.38, call to 54.40, read at
    /// 54.45, kick to 55.25, IRQ, poll to 56.45 (short). Five interrupts, two kicks, five
    /// short refills.
    #[test]
    fn a_zero_copy_ring_is_posted_only_from_the_fill_ring() {
        let frames: Vec<(u64, u16)> = (0..6).map(|i| (10_000 + i, 64)).chain([(50_000, 64)]).collect();
        let (r, _) = trace(&toml_nic("rx_ring = 8\nrefill_batch = 8", "umem_frames = 4\nfill_size = 4", ""), &frames);
        assert_eq!((r.consumed_packets, r.drops["rx_ring_full"]), (5, 2));
        let app = &r.io.json()["app"];
        assert_eq!((app["kicks"].as_u64(), app["fill_ring_empty"].as_u64()), (Some(2), Some(5)));
        assert_eq!(r.irq_per_s * 1e-3, 5.0, "three device interrupts and two kicks' (a run of 1 ms)");
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (4_450.0, 4_837.0));
    }

    /// Copy mode takes a fill-ring frame per frame it copies: with a umem of 2, the third
    /// frame of a poll finds none and is dropped (rx_dropped); the NIC's own ring is not
    /// short.
    #[test]
    fn copy_mode_drops_a_frame_the_fill_ring_has_no_frame_for() {
        let (r, _) = trace(
            &toml("zero_copy = false\nt_copy = \"100ns\"\numem_frames = 2\nfill_size = 2", ""),
            &[(10_000, 64), (10_010, 64), (10_020, 64)],
        );
        assert_eq!((r.consumed_packets, r.drops["xsk_rx_dropped"], r.drops["rx_ring_full"]), (2, 1, 0));
        assert_eq!(r.io.json()["app"]["fill_ring_empty"], 1);
    }

    /// Zero copy with need_wakeup and an rx ring of 2: the driver stops its rx clean at the
    /// full ring ("stop", as i40e) and leaves the third frame on the NIC's ring: two frames
    /// to 11.36, flush to 11.46, thread at 13.46, wake-up to 14.46, call to 14.48, reads at
    /// 14.53 and 14.58; its ring empty and the flag set, it kicks (to 15.38): IRQ
    /// 15.38-16.38, poll to 16.58, the frame to 16.66, flush to 16.76, thread at 18.76,
    /// wake-up to 19.76, call to 19.78, read at 19.83 (9.81 us after it came).
    /// With "drop" (mlx5) the third frame is dropped instead.
    #[test]
    fn a_driver_that_stops_at_a_full_ring_leaves_the_frame_to_the_kick() {
        let frames = [(10_000, 64), (10_010, 64), (10_020, 64)];
        let (r, _) = trace(&toml("rx_size = 2\nrx_full = \"stop\"", ""), &frames);
        assert_eq!((r.consumed_packets, r.drops["xsk_rx_ring_full"]), (3, 0));
        assert_eq!(r.io.json()["app"]["kicks"], 1);
        assert_eq!(r.latency_ns.max, 9_810.0);
        let (r, _) = trace(&toml("rx_size = 2\nrx_full = \"drop\"", ""), &frames);
        assert_eq!((r.consumed_packets, r.drops["xsk_rx_ring_full"]), (2, 1));
        assert_eq!(r.io.json()["app"]["kicks"], 0);
    }

    /// A thread that spins in user space never sleeps: no wake-up; it finds a frame at the
    /// end of a look (t_call, 20 ns). Frame at 10 us: IRQ 10-11, poll to 11.2, frame to
    /// 11.28, flush to 11.38; the look that ends then (looks of 20 ns from 0) was before the
    /// flush, the next one, to 11.40, finds it: the call to 11.42, read at 11.47. On a
    /// core of its own it keeps that core busy.
    #[test]
    fn a_spinning_thread_reads_without_waking() {
        let (r, _) = trace(&toml("wait = \"spin\"", "core = \"other\""), &[(10_000, 64)]);
        assert_eq!(r.io.json()["app"]["wakeups"], 0);
        assert_eq!(r.latency_ns.min, 1_470.0);
        assert!((r.cpu_per_core[1] - 1.0).abs() < 1e-9, "{:?}", r.cpu_per_core);
    }

    /// l2fwd in zero copy: the thread puts the frame it read on the tx ring and, before
    /// poll() sleeps, kicks; the driver sends in its next poll. Frame at 10 us: IRQ 10-11,
    /// poll to 11.2, frame to 11.28, flush to 11.38, thread at 13.38, wake-up to 14.38,
    /// call to 14.40, read (MACs swapped, onto the tx ring) at 14.45; the kick to 15.25: a
    /// software interrupt, IRQ 15.25-16.25, poll to 16.45, whose tx phase sends the frame
    /// (20 ns): posted at 16.47.
    #[test]
    fn an_l2fwd_thread_sends_through_the_drivers_poll() {
        let (r, dep) = trace(&toml("role = \"l2fwd\"\nt_xmit_zc = \"20ns\"", ""), &[(10_000, 64)]);
        assert_eq!((r.consumed_packets, r.forwarded_packets), (0, 1));
        assert_eq!(dep[0].0, 16_470.0);
        assert_eq!(r.latency_ns.min, 6_470.0);
        assert_eq!(r.io.json()["app"]["kicks"], 1);
    }

    /// l2fwd in copy mode: the kick sends (xsk_generic_xmit, 200 ns a frame). The frame
    /// copied (180 ns) to 11.38, flush to 11.48, thread at 13.48, wake-up to 14.48, call to
    /// 14.50, read at 14.55; its ring empty and a frame to send, the kick (800 + 200 ns)
    /// posts it at 15.55.
    #[test]
    fn a_copy_mode_l2fwd_thread_sends_in_its_kick() {
        let a = "role = \"l2fwd\"\nzero_copy = false\nt_copy = \"100ns\"\nt_xmit_copy = \"200ns\"";
        let (r, dep) = trace(&toml(a, ""), &[(10_000, 64)]);
        assert_eq!((r.consumed_packets, r.forwarded_packets), (0, 1));
        assert_eq!(dep[0].0, 15_550.0);
        assert_eq!(r.latency_ns.min, 5_550.0);
    }

    /// busy_poll with poll(): the thread busy polls for that long on an empty ring, then
    /// sleeps, so a frame 100 us later wakes it; spinning, it busy polls on and is never
    /// woken.
    #[test]
    fn a_busy_poll_duration_ends_in_sleep_unless_the_thread_spins() {
        let frames = [(10_000, 64), (100_000, 64)];
        let (poll, _) = trace(&toml("busy_poll = \"10us\"", ""), &frames);
        let (spin, _) = trace(&toml("busy_poll = \"10us\"\nwait = \"spin\"", ""), &frames);
        assert_eq!(poll.consumed_packets, 2);
        assert_eq!(spin.consumed_packets, 2);
        assert!(poll.io.json()["app"]["wakeups"].as_u64().is_some_and(|w| w >= 1));
        assert_eq!(spin.io.json()["app"]["wakeups"], 0);
        assert!(spin.cpu_utilization > 0.999, "it never sleeps: {}", spin.cpu_utilization);
        assert!(poll.cpu_utilization < 0.5, "{}", poll.cpu_utilization);
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
