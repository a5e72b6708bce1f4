//! XDP: a BPF program on every received frame of a NAPI device (`host.io = "xdp"`), native
//! in the driver's rx clean or generic in the stack. The NAPI machinery (interrupts, polls,
//! deferral, tx clean) is [`super::napi`]'s; this file decides what a frame costs and where
//! it goes.
//!
//! ```text
//!  native (driver rx clean: ixgbe_run_xdp, mlx5e_xdp_handle; bpf_prog_run_xdp)
//!    descriptor -> xdp_buff (t_driver) -> program (t_prog) ->
//!      XDP_DROP      buffer recycled: the frame ends here (consumed)
//!      XDP_PASS      build the skb, on to the stack: t_proc, forwarded as without XDP
//!      XDP_TX        onto this port's XDP tx ring (t_xmit); the tail is written once, at
//!                    the end of the rx clean (t_flush)
//!      XDP_REDIRECT  xdp_do_redirect -> devmap bulk queue (t_xmit, bq_enqueue); 16 frames
//!                    (DEV_MAP_BULK_SIZE) or the poll's end (xdp_do_flush) send the bulk
//!                    (t_flush, ndo_xdp_xmit)
//!  generic (net/core/dev.c do_xdp_generic, after the driver built the skb: t_skb)
//!    program (t_prog) ->
//!      XDP_DROP      kfree_skb (t_clean)
//!      XDP_PASS      on through the stack: the rest of t_proc
//!      XDP_TX / REDIRECT  generic_xdp_tx / xdp_do_generic_redirect: sent at once (t_xmit),
//!                    through the tx queue's lock like the stack's own transmit
//! ```
//!
//! XDP_TX and redirect frames go to the egress tx queue of the core that received them
//! (native XDP tx rings are per CPU and take no lock); their completions are cleaned by the
//! NAPI poll's tx phase at `t_clean` each. XDP_PASS costs `t_prog` on top of the stack's
//! processing in either mode (the XDP paper's 13.3 ns pass-through cost).

use crate::cost::Group;
use crate::engine::costs::Costs;
use crate::engine::ingress::Packet;
use crate::engine::time::Span;
use crate::price::ModeCosts;
use crate::scenario::{ResolvedScenario, XdpAction, XdpMode};

/// `DEV_MAP_BULK_SIZE` (kernel/bpf/devmap.c): frames a devmap bulk queue holds before it
/// sends them.
pub const DEV_MAP_BULK_SIZE: usize = 16;

/// Where a frame goes after the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It ends in the host (XDP_DROP).
    Consume,
    /// On to the stack, forwarded as without XDP (XDP_PASS).
    Stack,
    /// Into the poll's bulk, posted at the next flush (native XDP_TX and redirect).
    Bulk,
    /// Sent at once through the tx queue (generic XDP_TX and redirect).
    Send,
}

/// The program and its path's costs.
#[derive(Debug, Clone)]
pub struct Xdp {
    pub mode: XdpMode,
    pub action: XdpAction,
    t_prog: Span,
    t_driver: Span,
    t_xmit: Span,
    pub t_flush: Span,
    t_skb: Span,
    /// Bulked frames that make a flush before the poll ends (None: only at its end).
    pub bulk_limit: Option<usize>,
    /// The redirect goes to an AF_XDP socket: its cost per frame (fixed, fs per byte), and
    /// the flush publishes its rx ring to the user thread instead of transmitting.
    pub xsk: Option<(Span, u64)>,
}

/// The part of a frame's stack processing before the generic hook: `host.xdp.t_skb`, else
/// the cost profile's RX and alloc groups, ps.
fn t_skb_ps(sc: &ResolvedScenario) -> f64 {
    let s = &sc.scenario;
    match s.host.io.xdp().and_then(|x| x.t_skb) {
        Some(d) => d.ps as f64,
        None if s.host.stack.t_proc.is_some() => 0.0,
        None => {
            let (groups, _) = sc.group_cycles();
            (groups.get(Group::Rx) + groups.get(Group::Alloc)) / s.cpu.frequency.hz * 1e12
        }
    }
}

/// Whether a native program takes every received frame before the driver builds an skb
/// (drop, tx and redirect; io = "af-xdp"'s redirect to its socket included). An mlx5 driver
/// then never counts the frames in the ring statistics its DIM samples (`moderation::dim`);
/// generic XDP runs after the driver built and counted the skb.
pub fn native_consumes(sc: &ResolvedScenario) -> bool {
    let io = &sc.scenario.host.io;
    io.xdp().is_some_and(|x| x.mode == XdpMode::Native && (x.action != XdpAction::Pass || io.af_xdp().is_some()))
}

impl Xdp {
    pub fn new(sc: &ResolvedScenario) -> Self {
        let x = &sc.scenario.host.io.xdp().cloned().unwrap_or_default();
        let native = x.mode == XdpMode::Native;
        Xdp {
            mode: x.mode,
            action: x.action,
            t_prog: x.t_prog.into(),
            t_driver: x.t_driver.into(),
            t_xmit: x.t_xmit.into(),
            t_flush: x.t_flush.into(),
            t_skb: Span::from_ps(t_skb_ps(sc).round() as u64),
            bulk_limit: (native && x.action == XdpAction::Redirect).then_some(DEV_MAP_BULK_SIZE),
            xsk: None,
        }
    }

    /// The program of io = "af-xdp": native, redirecting to the queue's AF_XDP socket.
    pub fn to_xsk(sc: &ResolvedScenario) -> Self {
        let ps = super::af_xdp::xsk_ps(sc, 0.0).round() as u64;
        Xdp { bulk_limit: None, xsk: Some((Span::from_ps(ps), super::af_xdp::xsk_fs_per_byte(sc))), ..Self::new(sc) }
    }

    /// What happens to every frame.
    pub fn verdict(&self) -> Verdict {
        match (self.action, self.mode) {
            (XdpAction::Drop, _) => Verdict::Consume,
            (XdpAction::Pass, _) => Verdict::Stack,
            (XdpAction::Tx | XdpAction::Redirect, XdpMode::Native) => Verdict::Bulk,
            (XdpAction::Tx | XdpAction::Redirect, XdpMode::Generic) => Verdict::Send,
        }
    }

    /// CPU time of one frame from its descriptor to its verdict's end (a pass frame's
    /// stack processing included), drawn from the service distribution (`host.service`).
    pub fn frame_time(&self, p: &Packet, costs: &mut Costs) -> Span {
        let native = self.mode == XdpMode::Native;
        let front = if native { self.t_driver } else { self.t_skb } + self.t_prog + costs.contention;
        let mean = match self.action {
            XdpAction::Pass => return costs.t_proc(p) + self.t_prog,
            XdpAction::Drop if native => front,
            XdpAction::Drop => front + costs.t_clean,
            XdpAction::Redirect if self.xsk.is_some() => {
                let (fixed, fs) = self.xsk.unwrap_or_default();
                front + fixed + Span::from_ps(fs * p.size as u64 / 1000)
            }
            XdpAction::Tx | XdpAction::Redirect => front + self.t_xmit,
        };
        costs.draw(mean, p)
    }

    pub fn report(&self, flushes: u64) -> XdpReport {
        XdpReport { action: self.action, flushes, mode: self.mode }
    }
}

/// The XDP program's figures in a run's result (`io.xdp`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct XdpReport {
    /// Its verdict for every frame (`host.xdp.action`).
    pub action: XdpAction,
    /// Bulk flushes of frames it sent (`xdp_do_flush`).
    pub flushes: u64,
    /// Where it runs: native or generic (`host.xdp.mode`).
    pub mode: XdpMode,
}

/// `napi`'s costs (interrupts, polls, tx clean: the NAPI this program runs in) with each
/// frame priced on the XDP path: the stack's processing only for XDP_PASS, the program and
/// its action's costs per frame, a flush per bulk (native tx: one per poll; native
/// redirect: one per 16 frames).
pub fn mode_costs(sc: &ResolvedScenario, costs: &Costs, napi: ModeCosts) -> ModeCosts {
    let mut m = napi;
    let x = &sc.scenario.host.io.xdp().cloned().unwrap_or_default();
    let native = x.mode == XdpMode::Native;
    let per_poll = sc.scenario.host.io.poll().weight.min(sc.scenario.nic.rx_ring).max(1) as f64;
    m.terms.push(crate::price::IoCost::per_frame("xdp program", x.t_prog.ps as f64));
    if x.action != XdpAction::Pass {
        m.proc_share = 0.0;
        let front = if native { x.t_driver.ps as f64 } else { t_skb_ps(sc) };
        m.terms.push(crate::price::IoCost::per_frame(if native { "xdp driver" } else { "skb" }, front));
    }
    match x.action {
        XdpAction::Drop => {
            // Nothing is sent: no tx clean, no lock, and no tx_work_limit holding back
            // what a poll may take (a weight above it halved the model's rate).
            m.tx_clean_ps = 0.0;
            m.tx_lock = false;
            m.cleans_per_rx = f64::INFINITY;
            if let crate::price::Events::Napi(e) = &mut m.events {
                (e.shared_tx, e.tx_vector) = (false, false);
            }
            // Nothing is sent: no tx vector polls to leave out.
            m.notes.clear();
            if !native {
                m.terms.push(crate::price::IoCost::per_frame("skb free", costs.t_clean.ps() as f64));
            }
        }
        XdpAction::Pass => {}
        XdpAction::Tx | XdpAction::Redirect => {
            m.terms.push(crate::price::IoCost::per_frame("xdp xmit", x.t_xmit.ps as f64));
            if native {
                m.tx_lock = false;
                let per_flush =
                    if x.action == XdpAction::Redirect { per_poll.min(DEV_MAP_BULK_SIZE as f64) } else { per_poll };
                m.terms.push(crate::price::IoCost::per_event("xdp flush", x.t_flush.ps as f64, per_flush, 1.0));
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{node_toml, trace};

    const NIC: &str = "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"";

    fn xdp(host: &str, xdp: &str) -> String {
        node_toml(
            &format!("io = \"xdp\"\nt_irq = \"1us\"\nt_proc = \"2us\"\n{host}"),
            &format!("{NIC}\n[host.xdp]\n{xdp}"),
        )
    }

    /// Native XDP_DROP: t_driver 30 ns + t_prog 10 ns per frame, no skb, nothing sent.
    /// Frames at 10 and 10.01 us: IRQ 10-11, frames end at 11.04 and 11.08; both consumed,
    /// latency to the verdict.
    #[test]
    fn native_drop_ends_each_frame_in_the_driver() {
        let toml = xdp("", "action = \"drop\"\nt_prog = \"10ns\"\nt_driver = \"30ns\"");
        let (r, dep) = trace(&toml, &[(10_000, 64), (10_010, 64)]);
        assert!(dep.is_empty(), "nothing leaves: {dep:?}");
        assert_eq!((r.forwarded_packets, r.consumed_packets), (0, 2));
        assert_eq!(r.throughput_pps, 2e3, "consumed frames count as throughput");
        assert_eq!((r.latency_ns.min, r.latency_ns.max), (1_040.0, 1_070.0));
        assert!((r.cpu_by_activity["rx_clean"] - 80e-9 / 1e-3).abs() < 1e-12);
        assert_eq!(r.io.json()["xdp"]["action"], "drop");
    }

    /// Native XDP_REDIRECT of 17 frames that wait in the ring: each costs 30 + 10 + 20 ns;
    /// the devmap bulk sends 16 at once (flush 100 ns), the 17th at the poll's end.
    #[test]
    fn native_redirect_sends_in_bulks_of_16_and_at_the_end_of_the_poll() {
        let toml = xdp(
            "",
            "action = \"redirect\"\nt_prog = \"10ns\"\nt_driver = \"30ns\"\nt_xmit = \"20ns\"\nt_flush = \"100ns\"",
        );
        let frames: Vec<(u64, u16)> = (0..17).map(|i| (10_000 + i, 64)).collect();
        let (r, dep) = trace(&toml, &frames);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        // IRQ 10-11; 16 frames of 60 ns to 11.96, flush to 12.06: all 16 posted at 12.06;
        // the 17th 12.06-12.12, flush at the poll's end to 12.22.
        assert!(t_tx[..16].iter().all(|&t| t == 12_060.0), "{t_tx:?}");
        assert_eq!(t_tx[16], 12_220.0);
        assert_eq!(r.io.json()["xdp"]["flushes"], 2);
        assert_eq!(r.forwarded_packets, 17);
    }

    /// host.service = "exponential" draws each XDP frame's time around its mean, as it does
    /// the stack's t_proc: 2000 drops of mean 100 ns busy the core as long as constant ones
    /// (within 5%), and the frames' times differ.
    #[test]
    fn the_service_distribution_applies_to_xdp_frames() {
        let frames: Vec<(u64, u16)> = (0..2000).map(|i| (10_000 + i, 64)).collect();
        let (r, _) = trace(&xdp("service = \"exponential\"", "action = \"drop\"\nt_driver = \"100ns\""), &frames);
        let (c, _) = trace(&xdp("", "action = \"drop\"\nt_driver = \"100ns\""), &frames);
        let ratio = r.cpu_by_activity["rx_clean"] / c.cpu_by_activity["rx_clean"];
        assert!((ratio - 1.0).abs() < 0.05, "mean kept: {ratio}");
        assert_ne!(r.latency_ns.max, c.latency_ns.max, "drawn times change the queue");
    }

    /// Native XDP_TX flushes only at the end of the rx clean (one tail write per poll).
    #[test]
    fn native_tx_posts_the_polls_frames_at_its_end() {
        let toml =
            xdp("", "action = \"tx\"\nt_prog = \"10ns\"\nt_driver = \"30ns\"\nt_xmit = \"20ns\"\nt_flush = \"100ns\"");
        let frames: Vec<(u64, u16)> = (0..17).map(|i| (10_000 + i, 64)).collect();
        let (r, dep) = trace(&toml, &frames);
        assert!(dep.iter().all(|d| d.0 == 12_120.0), "17 x 60 ns from 11, one flush: {dep:?}");
        assert_eq!(r.io.json()["xdp"]["flushes"], 1);
    }

    /// Generic: XDP_DROP pays the skb (t_skb 150 ns), the program and the skb's free
    /// (t_clean 50 ns); XDP_PASS pays the program on top of t_proc (2 us).
    #[test]
    fn generic_xdp_runs_after_the_skb_and_pass_adds_the_program_to_the_stack() {
        let toml =
            xdp("t_clean = \"50ns\"", "mode = \"generic\"\naction = \"drop\"\nt_prog = \"10ns\"\nt_skb = \"150ns\"");
        let (r, _) = trace(&toml, &[(10_000, 64)]);
        assert_eq!((r.consumed_packets, r.latency_ns.min), (1, 1_210.0));
        let toml = xdp("", "mode = \"generic\"\naction = \"pass\"\nt_prog = \"10ns\"");
        let (r, dep) = trace(&toml, &[(10_000, 64)]);
        assert_eq!(dep[0].0, 13_010.0, "IRQ 10-11, 2 us + 10 ns");
        assert_eq!(r.forwarded_packets, 1);
        let toml = xdp(
            "",
            "mode = \"generic\"\naction = \"redirect\"\nt_prog = \"10ns\"\nt_skb = \"150ns\"\nt_xmit = \"40ns\"",
        );
        let (_, dep) = trace(&toml, &[(10_000, 64), (10_001, 64)]);
        let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
        assert_eq!(t_tx, [11_200.0, 11_400.0], "sent at once, 200 ns each");
    }
}
