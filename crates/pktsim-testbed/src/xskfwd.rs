//! `pktsim-tb xskfwd`: a user-space forwarder between two AF_XDP sockets in copy mode.
//!
//! The ingress interface gets an XDP program that redirects every frame to the socket of
//! its queue (an XSKMAP; [`crate::bpf`]); the kernel copies each frame into the ingress
//! socket's umem. The forwarder takes up to `--batch` frames from the rx ring, copies each
//! into a free frame of the egress socket's umem, puts them on the egress tx ring, gives
//! the rx frames back to the fill ring and calls `sendto`, which in copy mode transmits
//! the tx ring's frames through the egress interface (`xsk_generic_xmit`, at most 32 per
//! call; the forwarder calls again while the kernel has more). Completed tx frames come
//! back on the completion ring and are reused.
//!
//! Modes: `busy` polls the rx ring without sleeping and, before each batch, calls
//! `recvfrom`, which with `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` and a NAPI budget of the
//! batch size runs the ingress queue's NAPI in this thread; `sleep` blocks in `poll(2)`
//! while the rx ring is empty and the NAPI's kernel thread fills it.

use std::fs::File;

use serde_json::json;

use crate::args::{XskFwdArgs, XskMode};
use crate::bpf;
use crate::sys::{self, failed, SysError};
use crate::xsk::{XdpDesc, Xsk, XskConfig, FRAME_SIZE};

/// Entries of the rx and tx rings. The ingress umem has twice as many frames, all on its
/// fill ring (of as many entries), so that in overload the rx ring fills before the fill
/// ring runs dry (drops count as rx_ring_full); the egress umem has as many as its tx ring.
const RING: u32 = 2048;
/// How long `sleep` mode blocks before it checks for a stop.
const WAIT_MS: i32 = 10;
/// Most `sendto` calls for one batch (each transmits up to 32 frames).
const MAX_KICKS: u32 = 64;

pub fn run(a: &XskFwdArgs) -> Result<serde_json::Value, SysError> {
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    if let Some(cpu) = a.cpu {
        sys::pin_to_cpu(cpu).map_err(failed(format!("sched_setaffinity(CPU {cpu})")))?;
    }
    let in_idx = sys::if_index(&a.iface_in).map_err(failed(format!("if_nametoindex({})", a.iface_in)))?;
    let out_idx = sys::if_index(&a.iface_out).map_err(failed(format!("if_nametoindex({})", a.iface_out)))?;
    let rx = retry_busy(|| {
        Xsk::new(in_idx, 0, &XskConfig { frames: 2 * RING, ring: RING, fill: 2 * RING, rx: true, tx: false })
    })
    .map_err(failed(format!("AF_XDP socket on {} queue 0 (copy mode)", a.iface_in)))?;
    let mut tx =
        retry_busy(|| Xsk::new(out_idx, 0, &XskConfig { frames: RING, ring: RING, fill: RING, rx: false, tx: true }))
            .map_err(failed(format!("AF_XDP socket on {} queue 0 (copy mode)", a.iface_out)))?;
    // The whole ingress umem onto the fill ring: frames for the kernel to copy into.
    let (fi, n) = rx.fill.reserve(2 * RING);
    for j in 0..n {
        rx.fill.write(fi.wrapping_add(j), u64::from(j) * u64::from(FRAME_SIZE));
    }
    rx.fill.submit(n);
    let mut free: Vec<u64> = (0..tx.frames).map(|j| u64::from(j) * u64::from(FRAME_SIZE)).collect();
    let (xskmap, _attached) = bpf::attach_xsk(in_idx, 1, a.loops)
        .map_err(failed(format!("attach the XSKMAP redirect to {} (native mode)", a.iface_in)))?;
    bpf::map_update(&xskmap, 0, std::os::fd::AsRawFd::as_raw_fd(&rx.fd) as u32)
        .map_err(failed("put the socket into the XSKMAP"))?;
    let busy = a.mode == XskMode::Busy;
    if busy {
        rx.busy_poll(a.busy_poll_us as i32, a.batch as i32)
            .map_err(failed("setsockopt(SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET)"))?;
    }
    if let Some(path) = &a.ready_file {
        File::create(path).map_err(failed(format!("create ready file {}", path.display())))?;
    }
    let rxr = rx.rx.as_ref().expect("the ingress socket has an rx ring");
    let t0 = sys::mono_ns();
    let end = t0.saturating_add(a.duration_ns);
    let (mut forwarded, mut no_frame, mut batches, mut empty, mut rx_calls, mut tx_calls, mut waits) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut hist = [0u64; 9]; // batch sizes by power of two: 1, 2-3, 4-7, ..., 256
    let mut loops = 0u64;
    while !sys::stop_requested() {
        loops += 1;
        if loops.is_multiple_of(64) && sys::mono_ns() >= end {
            break;
        }
        if busy {
            rx.kick_rx();
            rx_calls += 1;
        }
        let (ri, n) = rxr.peek(a.batch as u32);
        if n == 0 {
            reap(&tx, &mut free);
            empty += 1;
            if !busy {
                rx.wait_rx(WAIT_MS);
                waits += 1;
                if sys::mono_ns() >= end {
                    break;
                }
            }
            continue;
        }
        batches += 1;
        hist[(31 - n.leading_zeros()).min(8) as usize] += 1;
        reap(&tx, &mut free);
        let (ti, room) = tx.tx.as_ref().expect("the egress socket has a tx ring").reserve(n);
        let k = room.min(free.len() as u32);
        let mut descs = [XdpDesc::default(); 256];
        for j in 0..n {
            descs[j as usize] = rxr.read(ri.wrapping_add(j));
        }
        let mut out = [XdpDesc::default(); 256];
        for (d, o) in descs[..k as usize].iter().zip(out.iter_mut()) {
            let addr = free.pop().expect("k <= free frames");
            let src = rx.frame(d.addr, d.len.min(FRAME_SIZE));
            tx.frame_mut(addr)[..src.len()].copy_from_slice(src);
            *o = XdpDesc { addr, len: src.len() as u32, options: 0 };
        }
        let txr = tx.tx.as_ref().expect("the egress socket has a tx ring");
        for (j, o) in out[..k as usize].iter().enumerate() {
            txr.write(ti.wrapping_add(j as u32), *o);
        }
        txr.submit(k);
        no_frame += u64::from(n - k);
        rxr.release(n);
        // The rx frames go back to the fill ring (the kernel aligns each address to its frame).
        let (fi, m) = rx.fill.reserve(n);
        for j in 0..m {
            rx.fill.write(fi.wrapping_add(j), descs[j as usize].addr);
        }
        rx.fill.submit(m);
        // Copy mode transmits only in sendto (the tx ring always asks for a wake-up).
        for _ in 0..MAX_KICKS {
            if !txr.needs_wakeup() {
                break;
            }
            tx_calls += 1;
            if !tx.kick_tx() {
                break;
            }
        }
        forwarded += u64::from(k);
    }
    let elapsed_ns = sys::mono_ns() - t0;
    let st = rx.statistics().unwrap_or_default();
    let tst = tx.statistics().unwrap_or_default();
    Ok(json!({
        "mode": if busy { "busy" } else { "sleep" },
        "batch": a.batch,
        "forwarded": forwarded,
        "no_tx_frame": no_frame,
        "batches": batches,
        "frames_per_batch": if batches > 0 { forwarded as f64 / batches as f64 } else { 0.0 },
        "batch_sizes_log2": hist,
        "empty_polls": empty,
        "rx_calls": rx_calls,
        "tx_calls": tx_calls,
        "waits": waits,
        "elapsed_ns": elapsed_ns,
        "xsk_rx_dropped": st.rx_dropped,
        "xsk_rx_ring_full": st.rx_ring_full,
        "xsk_fill_ring_empty": st.rx_fill_ring_empty_descs,
        "xsk_tx_invalid": tst.tx_invalid_descs,
        "napi_id": rx.napi_id(),
        "interrupted": sys::stop_requested(),
    }))
}

/// `make`, tried again for up to a second while binding says EBUSY (a veth whose NAPI was
/// just reconfigured refuses a socket for a moment).
fn retry_busy(mut make: impl FnMut() -> std::io::Result<Xsk>) -> std::io::Result<Xsk> {
    let mut tries = 0;
    loop {
        match make() {
            Err(e) if sys::is_errno(&e, &[libc::EBUSY]) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// Completed tx frames back to the free list.
fn reap(tx: &Xsk, free: &mut Vec<u64>) {
    let (ci, n) = tx.comp.peek(RING);
    for j in 0..n {
        free.push(tx.comp.read(ci.wrapping_add(j)) & !(u64::from(FRAME_SIZE) - 1));
    }
    tx.comp.release(n);
}
