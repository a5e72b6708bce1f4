//! Trace replay: a pcap or pcapng file's frames behind the ingress link (an [`Ingress`]).
//!
//! ```text
//!   trace file --> reader (crate::trace: records, headers, flow key) --> window
//!     --> time: (pass * period + t - window start) / scale --> link (line rate + framing) --> NIC
//! ```
//!
//! A frame's timestamp, relative to the first frame of the window, is when it starts on
//! the ingress link; the link serialises frames as it does synthetic ones (a frame's last
//! bit arrives `(size + overhead) * 8 / rate` after it starts, and no earlier than the
//! previous frame's last bit plus that time). `scale` divides the gaps (`traffic.rate_scale`,
//! or `traffic.rate` over the trace's rate). Looping (`traffic.loop`), pass `k` starts `k`
//! periods after the first (a period: the window's span plus one mean gap, so the rate
//! stays the trace's). Each frame's flow is its number in the trace summary (flows in
//! order of first appearance), which the classifier maps to the flow's real tuple; the
//! source is 0. Frames are read one at a time: memory does not grow with the trace.

use std::path::Path;
use std::sync::Arc;

use crate::trace::{TraceReader, TraceSummary};

use super::ingress::{Ingress, Packet};
use super::time::{Instant, Span, WireTime};

/// Later than any run ends ([`crate::scenario::limits::MAX_RUN_PS`]) with room to add
/// times to it: frames that would start after it are never read.
const HORIZON_PS: f64 = 4.0e18;

/// A trace's window replayed behind the ingress link.
pub struct TraceReplay {
    summary: Arc<TraceSummary>,
    /// None if the file can no longer be read (removed since the scenario was loaded, which
    /// read it): nothing is replayed.
    reader: Option<TraceReader>,
    /// Gaps are divided by this.
    scale: f64,
    looped: bool,
    /// Passes completed, and where this pass starts (`pass` periods in, ps; one
    /// multiplication per pass, not per frame).
    pass: u64,
    pass_start_ps: f64,
    /// Frames read in this pass.
    in_pass: u64,
    wire: WireTime,
    link_free: Instant,
    delivered: u64,
}

impl TraceReplay {
    /// Replay `summary`'s window at `rate_pps` (its gaps scaled to that mean rate), behind a
    /// link of `link_bps` with `overhead` bytes of framing per frame.
    pub fn new(summary: Arc<TraceSummary>, rate_pps: f64, looped: bool, link_bps: f64, overhead: u64) -> Self {
        let reader =
            TraceReader::open(Path::new(&summary.path)).and_then(|mut r| r.rewind(&summary.start).map(|()| r)).ok();
        let own = summary.rate_pps();
        let scale = if own > 0.0 && rate_pps > 0.0 { rate_pps / own } else { 1.0 };
        TraceReplay {
            summary,
            reader,
            scale,
            looped,
            pass: 0,
            pass_start_ps: 0.0,
            in_pass: 0,
            wire: WireTime::new(overhead, link_bps),
            link_free: Instant::ZERO,
            delivered: 0,
        }
    }
}

impl Ingress for TraceReplay {
    fn next_packet(&mut self) -> Option<Packet> {
        let mut p = Packet::default();
        self.next_into(&mut p).then_some(p)
    }

    fn next_into(&mut self, out: &mut Packet) -> bool {
        let s = &*self.summary;
        let Some(reader) = self.reader.as_mut() else { return false };
        loop {
            // The window's frames were all read once without error: a frame past them (or
            // an error, if the file changed since) ends the pass.
            let frame = if self.in_pass < s.packets { reader.next_frame().ok().flatten() } else { None };
            let Some(f) = frame else {
                if !self.looped || self.in_pass == 0 || reader.rewind(&s.start).is_err() {
                    return false;
                }
                self.pass += 1;
                self.pass_start_ps = self.pass as f64 * s.period_ps();
                self.in_pass = 0;
                continue;
            };
            self.in_pass += 1;
            let start_ps = (self.pass_start_ps + (f.t_ps - s.start_t_ps) as f64) / self.scale;
            if !(start_ps < HORIZON_PS) {
                return false;
            }
            let Some(&flow) = s.flow_of.get(&f.key) else { continue };
            // Below the horizon, so below 2^62 ps: the short conversion.
            let t_wire = (Instant::ZERO + Span::from_ps_f64_small(start_ps)).max(self.link_free) + self.wire.of(f.size);
            self.link_free = t_wire;
            self.delivered += 1;
            *out = Packet::arriving(t_wire, f.size, 0, flow);
            return true;
        }
    }

    fn delivered(&self) -> u64 {
        self.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::{pcap, udp4, write_temp};
    use crate::trace::Window;

    fn trace(n: u64, gap_ns: u64) -> Arc<TraceSummary> {
        let frames: Vec<(u64, Vec<u8>)> = (0..n)
            .map(|i| {
                (
                    i * gap_ns,
                    udp4(
                        [198, 18, 0, 1],
                        [198, 19, 0, (i % 4) as u8],
                        1024,
                        5001,
                        0,
                        60 + 10 * (i % 5) as usize,
                        false,
                    ),
                )
            })
            .collect();
        Arc::new(
            TraceSummary::scan(
                &write_temp(&format!("replay-{n}-{gap_ns}.pcap"), &pcap(&frames, true)),
                Window::default(),
            )
            .unwrap(),
        )
    }

    fn all(r: &mut TraceReplay, max: usize) -> Vec<Packet> {
        std::iter::from_fn(|| r.next_packet()).take(max).collect()
    }

    #[test]
    fn frames_come_at_their_times_behind_the_link() {
        let t = trace(10, 1_000);
        let own = t.rate_pps();
        assert_eq!(own, 1e6);
        // 10 Gbit/s, 20 B framing: a 64 B frame takes 67.2 ns.
        let mut r = TraceReplay::new(t.clone(), own, false, 1e10, 20);
        let p = all(&mut r, 100);
        assert_eq!(p.len(), 10);
        assert_eq!(p[0].t_wire, Instant::from_ps(67_200));
        assert_eq!(p[1].t_wire, Instant::from_ps(1_000_000 + (74 + 20) * 800));
        assert_eq!(p.iter().map(|p| p.flow).collect::<Vec<_>>(), vec![0, 1, 2, 3, 0, 1, 2, 3, 0, 1]);
        assert_eq!(p.iter().map(|p| p.size).collect::<Vec<_>>(), vec![64, 74, 84, 94, 104, 64, 74, 84, 94, 104]);
        // Twice the rate: half the gaps, the last frame starts at 4.5 us.
        let mut r = TraceReplay::new(t.clone(), 2.0 * own, false, 1e10, 20);
        let p = all(&mut r, 100);
        assert_eq!(p[9].t_wire, Instant::from_ps(4_500_000 + 104 * 800 + 20 * 800));
        // A slow link: frames queue behind each other (1 Mbit/s: 64 B + 20 B take 672 us).
        let mut r = TraceReplay::new(t, own, false, 1e6, 20);
        let p = all(&mut r, 3);
        assert_eq!(p[1].t_wire - p[0].t_wire, Span::from_ps((74 + 20) * 8_000_000));
    }

    #[test]
    fn a_looped_trace_repeats_one_period_later() {
        let t = trace(10, 1_000);
        // Period: 9 us of span + a mean gap of 1 us.
        assert_eq!(t.period_ps(), 10_000_000.0);
        let mut r = TraceReplay::new(t, 1e6, true, 1e10, 20);
        let p = all(&mut r, 35);
        assert_eq!(p.len(), 35);
        for i in 10..35 {
            assert_eq!(p[i].t_wire - p[i - 10].t_wire, Span::from_ps(10_000_000), "frame {i}");
            assert_eq!((p[i].size, p[i].flow), (p[i - 10].size, p[i - 10].flow));
        }
        assert_eq!(r.delivered(), 35);
    }

    /// Sizes and rings of every departed frame.
    #[derive(Clone, Default)]
    struct Sizes(std::sync::Arc<std::sync::Mutex<Vec<(u16, u16)>>>);

    impl crate::engine::nic::Egress for Sizes {
        fn depart(&mut self, p: &Packet, _: Instant, _: Instant) {
            if let Ok(mut v) = self.0.lock() {
                v.push((p.size, p.ring));
            }
        }
    }

    /// Run a node on the trace at `path` (`extra`: more scenario text): its report and the
    /// (size, ring) of each departed frame.
    fn run_node(
        path: &std::path::Path,
        traffic: &str,
        extra: &str,
    ) -> (crate::engine::SimResult, Vec<(u16, u16)>, f64) {
        let toml = format!(
            "[cpu]\nfrequency = \"1GHz\"\n{extra}\n[link]\nrate = \"10Gbit/s\"\n[traffic]\npcap = {:?}\n{traffic}\n[host]\nt_proc = \"500ns\"\n[measure]\nwarmup = \"0s\"\nduration = \"100ms\"\n",
            path.display().to_string()
        );
        let sc = crate::engine::testing::scenario(&toml);
        let mut node = crate::engine::SimNode::build(&sc);
        let sizes = Sizes::default();
        node.connect_egress(Box::new(sizes.clone()));
        node.run().unwrap();
        let departed = sizes.0.lock().unwrap().clone();
        (node.report(0.0), departed, sc.offered_pps())
    }

    /// 2,000 frames of 16 flows at 100 kpps, sizes 60 to 1,514 B (64 to 1,518 B on the wire).
    fn imix_trace(name: &str) -> (std::path::PathBuf, Vec<(u64, Vec<u8>)>) {
        let frames: Vec<(u64, Vec<u8>)> = (0..2_000u64)
            .map(|i| {
                let len = [60usize, 60, 60, 572, 572, 1514, 60, 300][(i * 7 % 8) as usize];
                (
                    i * 10_000,
                    udp4(
                        [198, 18, 0, (i % 4) as u8],
                        [198, 19, 1, (i % 16) as u8],
                        1024 + (i % 3) as u16,
                        5001,
                        0,
                        len,
                        i % 5 == 0,
                    ),
                )
            })
            .collect();
        (write_temp(name, &pcap(&frames, true)), frames)
    }

    #[test]
    fn an_uncongested_node_forwards_the_trace_as_it_is() {
        let (path, frames) = imix_trace("node.pcap");
        let (r, departed, pps) = run_node(&path, "", "");
        assert_eq!((r.offered_packets, r.forwarded_packets), (2_000, 2_000));
        let mut want: Vec<u16> = frames.iter().map(|(_, f)| f.len() as u16 + 4).collect();
        let mut got: Vec<u16> = departed.iter().map(|d| d.0).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "the size distribution on the wire");
        assert!((pps - 100_000.0).abs() < 1e-6, "{pps}");
        assert_eq!(r.per_class.keys().collect::<Vec<_>>(), vec!["node"]);
        // Twice the rate: the trace lasts half as long (every frame still forwarded).
        let (r2, _, pps2) = run_node(&path, "rate_scale = 2.0", "");
        assert_eq!(r2.forwarded_packets, 2_000);
        assert!((pps2 - 200_000.0).abs() < 1e-6);
        assert!((r2.sim_time_s - 0.1).abs() < 1e-9);
        let (r3, _, pps3) = run_node(&path, "rate = \"200kpps\"", "");
        assert_eq!((r3.forwarded_packets, pps3), (2_000, pps2));
        // Looped: five passes of 20 ms in the 100 ms run.
        let (r4, _, _) = run_node(&path, "loop = true", "");
        assert_eq!(r4.offered_packets, 10_000);
        assert!(r4.forwarded_packets >= 9_990, "the last frames may still be in the node at the end");
        // A window: 5 ms from 2 ms on, 500 frames.
        let (r5, _, _) = run_node(&path, "pcap_start = \"2ms\"\npcap_length = \"5ms\"", "");
        assert_eq!(r5.forwarded_packets, 500);
    }

    #[test]
    fn rss_spreads_the_trace_flows_by_their_real_tuples() {
        // One flow per frame size class... 16 flows of real tuples on 4 cores.
        let (path, frames) = imix_trace("rss.pcap");
        let (r, departed, _) = run_node(&path, "", "cores = 4");
        assert_eq!(r.forwarded_packets, 2_000);
        let mut want = [0u64; 4];
        for (_, f) in &frames {
            let t = crate::engine::nic::classify::Tuple {
                src_ip: u32::from_be_bytes([f[26], f[27], f[28], f[29]]),
                dst_ip: u32::from_be_bytes([f[30], f[31], f[32], f[33]]),
                src_port: u16::from_be_bytes([f[34], f[35]]),
                dst_port: u16::from_be_bytes([f[36], f[37]]),
            };
            let h = crate::engine::nic::classify::toeplitz(&crate::engine::nic::classify::RSS_KEY, &t.rss_input());
            want[(h & 127) as usize % 4] += 1;
        }
        let mut got = [0u64; 4];
        for (_, ring) in &departed {
            got[*ring as usize] += 1;
        }
        assert_eq!(got, want);
        assert!(want.iter().filter(|&&n| n > 0).count() >= 3, "{want:?}");
        let per_ring: Vec<u64> = r.per_ring.iter().map(|g| g.summary.forwarded_packets).collect();
        assert_eq!(per_ring, want.to_vec());
    }

    #[test]
    fn the_rss_input_of_a_read_frame_hashes_to_the_published_vectors() {
        use crate::engine::nic::classify::{toeplitz, RSS_KEY};
        // Microsoft RSS verification suite: 66.9.149.187:2794 -> 161.142.100.80:1766 and
        // [3ffe:2501:200:1fff::7]:2794 -> [3ffe:2501:200:3::1]:1766, over TCP.
        let v4 = udp4([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766, 0, 60, true);
        let mut v6 = vec![0u8; 14 + 40 + 20];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14] = 0x60;
        v6[18..20].copy_from_slice(&20u16.to_be_bytes());
        v6[20] = 6;
        let src: std::net::Ipv6Addr = "3ffe:2501:200:1fff::7".parse().unwrap();
        let dst: std::net::Ipv6Addr = "3ffe:2501:200:3::1".parse().unwrap();
        v6[22..38].copy_from_slice(&src.octets());
        v6[38..54].copy_from_slice(&dst.octets());
        v6[54..56].copy_from_slice(&2794u16.to_be_bytes());
        v6[56..58].copy_from_slice(&1766u16.to_be_bytes());
        let t = TraceSummary::scan(&write_temp("msrss.pcap", &pcap(&[(0, v4), (1_000, v6)], true)), Window::default())
            .unwrap();
        let hash = |i: usize| {
            let mut input = [0u8; 36];
            let n = t.flows[i].key.rss_input(&mut input);
            (toeplitz(&RSS_KEY, &input[..n]), toeplitz(&RSS_KEY, &input[..n - 4]))
        };
        assert_eq!(hash(0), (0x51cc_c178, 0x323e_8fc2));
        assert_eq!(hash(1), (0x4020_7d3d, 0x2cc1_8cd5));
    }

    #[test]
    fn filters_read_the_trace_headers() {
        // Two queues per core; filters on DSCP, protocol and port, destination prefix and
        // VLAN PCP send four flows to "rt", the fifth goes to "bulk".
        let plain = udp4([198, 18, 0, 1], [198, 19, 1, 1], 1024, 5001, 0, 60, false);
        let ef = udp4([198, 18, 0, 1], [198, 19, 1, 2], 1024, 5001, 0xb8, 60, false);
        let https = udp4([198, 18, 0, 1], [198, 19, 1, 3], 1024, 443, 0, 60, true);
        let prefix = udp4([198, 18, 0, 1], [198, 19, 200, 7], 1024, 5001, 0, 60, false);
        let mut tagged = udp4([198, 18, 0, 1], [198, 19, 1, 4], 1024, 5001, 0, 60, false);
        tagged.splice(12..12, [0x81, 0x00, 5 << 5, 7]);
        let flows = [plain, ef, https, prefix, tagged];
        let frames: Vec<(u64, Vec<u8>)> = (0..100u64).map(|i| (i * 10_000, flows[(i % 5) as usize].clone())).collect();
        let path = write_temp("filters.pcap", &pcap(&frames, true));
        let nic = "[nic]\nqueues = [\"rt\", \"bulk\"]\ndefault_queue = \"bulk\"\n\
                   [[nic.filters]]\nqueue = \"rt\"\ndscp = 46\n\
                   [[nic.filters]]\nqueue = \"rt\"\nproto = \"tcp\"\ndst_port = 443\n\
                   [[nic.filters]]\nqueue = \"rt\"\ndst = \"198.19.200.0/24\"\n\
                   [[nic.filters]]\nqueue = \"rt\"\nvlan_pcp = 5\n";
        let (r, _, _) = run_node(&path, "", nic);
        let per_queue: Vec<(&str, u64)> =
            r.per_ring.iter().map(|g| (g.queue.as_str(), g.summary.forwarded_packets)).collect();
        assert_eq!(per_queue, vec![("rt", 80), ("bulk", 20)]);
    }
}
