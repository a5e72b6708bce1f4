//! The NIC's classifier: which rx ring a frame goes to.
//!
//! ```text
//!   frame --> RSS: Toeplitz hash of (src IP, dst IP, src port, dst port) with the
//!             standard 40-byte key; its low 7 bits index a 128-entry indirection
//!             table whose entry i names core i mod k                 --> core
//!         --> filters (n-tuple, TOS/DSCP, VLAN PCP), first match wins --> queue
//!   ring = the topology's ring of (core, queue)
//! ```
//!
//! Every frame of a flow has the same tuple, so a flow stays on one ring, in order.
//! A replayed trace's flows are placed by their real headers ([`Classifier::use_trace_flows`]).
//! Flows get deterministic addresses from the benchmarking range: source `s` sends from
//! 198.18.s.1, flow `f` goes to 198.19.0.0 + (f mod 65536) with source port
//! 1024 + (f / 65536) mod 64512, to the source's destination port.

use crate::scenario::{parse_prefix, Filter, Proto, ResolvedSource};

use crate::engine::ingress::Packet;
use crate::topology::Topology;
use crate::trace::TraceFlow;

/// The Toeplitz key most NICs and drivers default to (Microsoft's RSS verification key).
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Toeplitz hash of `input` under `key`.
pub fn toeplitz(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut result = 0u32;
    // The 32-bit window of the key that lines up with the current input bit.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            // Shift the window left by one key bit.
            let next_byte = key.get(i + 4).copied().unwrap_or(0);
            window = (window << 1) | ((next_byte >> (7 - bit)) & 1) as u32;
        }
    }
    result
}

/// The longest input the 40-byte key hashes: IPv6 addresses and ports.
const RSS_INPUT_MAX: usize = 36;

/// [`toeplitz`] under [`RSS_KEY`] a byte at a time: entry `[i][b]` is the hash of byte
/// value `b` at input position `i` alone. The hash is linear over GF(2), so an input's is
/// the XOR of its bytes' entries: a lookup per byte where the definition takes a branch
/// and a shift per bit (500 instructions for an IPv4 tuple). Built at compile time.
static RSS_TABLE: [[u32; 256]; RSS_INPUT_MAX] = rss_table();

const fn rss_table() -> [[u32; 256]; RSS_INPUT_MAX] {
    let mut table = [[0u32; 256]; RSS_INPUT_MAX];
    let mut i = 0;
    while i < RSS_INPUT_MAX {
        // The key's 32-bit window at each bit of byte i: key bits k .. k + 32 for input bit k.
        let mut windows = [0u32; 8];
        let mut bit = 0;
        while bit < 8 {
            let k = i * 8 + bit;
            let mut j = 0;
            while j < 32 {
                let kb = k + j;
                let byte = if kb / 8 < RSS_KEY.len() { RSS_KEY[kb / 8] } else { 0 };
                windows[bit] = (windows[bit] << 1) | ((byte >> (7 - kb % 8)) & 1) as u32;
                j += 1;
            }
            bit += 1;
        }
        let mut b = 0;
        while b < 256 {
            let mut h = 0u32;
            let mut bit = 0;
            while bit < 8 {
                if b & (0x80 >> bit) != 0 {
                    h ^= windows[bit];
                }
                bit += 1;
            }
            table[i][b] = h;
            b += 1;
        }
        i += 1;
    }
    table
}

/// The RSS hash of `input` (at most 36 bytes): [`toeplitz`] under [`RSS_KEY`], by table.
#[inline]
pub fn rss_hash(input: &[u8]) -> u32 {
    debug_assert!(input.len() <= RSS_INPUT_MAX, "{} input bytes, the key covers {RSS_INPUT_MAX}", input.len());
    input.iter().zip(&RSS_TABLE).fold(0, |h, (&b, row)| h ^ row[b as usize])
}

/// The 5-tuple of flow `flow` of source `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuple {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub src_port: u16,
    pub dst_port: u16,
}

pub fn tuple(source: u16, flow: u32, dst_port: u16) -> Tuple {
    Tuple {
        src_ip: 0xC612_0001 | ((source as u32 & 0xff) << 8),
        dst_ip: 0xC613_0000 | (flow & 0xffff),
        src_port: 1024 + ((flow >> 16) % 64_512) as u16,
        dst_port,
    }
}

impl Tuple {
    /// RSS input for TCP/UDP over IPv4: addresses then ports, network byte order.
    pub fn rss_input(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.src_ip.to_be_bytes());
        b[4..8].copy_from_slice(&self.dst_ip.to_be_bytes());
        b[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        b[10..12].copy_from_slice(&self.dst_port.to_be_bytes());
        b
    }
}

struct Rule {
    queue: usize,
    tos: Option<u8>,
    dscp: Option<u8>,
    vlan_pcp: Option<u8>,
    proto: Option<Proto>,
    dst_port: Option<u16>,
    src: Option<(u32, u32)>,
    dst: Option<(u32, u32)>,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

struct SourceInfo {
    tos: u8,
    vlan_pcp: Option<u8>,
    proto: Proto,
    dst_port: u16,
    /// Queue when no rule looks at per-flow fields.
    queue: Option<usize>,
    /// Core per flow, filled on first sight (u16::MAX: not yet).
    core_cache: Vec<u16>,
}

pub struct Classifier {
    topo: Topology,
    reta: [u16; 128],
    rules: Vec<Rule>,
    default_queue: usize,
    sources: Vec<SourceInfo>,
    /// A replayed trace's flows: the ring of each (by its real headers), and the share of
    /// the trace's frames each ring gets.
    trace: Option<(Vec<u16>, Vec<f64>)>,
}

impl Classifier {
    pub fn new(
        topo: Topology,
        queue_names: &[String],
        default_queue: usize,
        filters: &[Filter],
        sources: &[ResolvedSource],
    ) -> Self {
        let cores = topo.cores();
        let idx = |name: &str| queue_names.iter().position(|q| q == name).unwrap_or(default_queue);
        let rules: Vec<Rule> = filters
            .iter()
            .map(|f| Rule {
                queue: idx(&f.queue),
                tos: f.tos,
                dscp: f.dscp,
                vlan_pcp: f.vlan_pcp,
                proto: f.proto,
                dst_port: f.dst_port,
                src: f.src.as_deref().and_then(parse_prefix).map(|(a, l)| (a & mask(l), mask(l))),
                dst: f.dst.as_deref().and_then(parse_prefix).map(|(a, l)| (a & mask(l), mask(l))),
            })
            .collect();
        let per_flow = rules.iter().any(|r| r.dst.is_some());
        let mut reta = [0u16; 128];
        for (i, e) in reta.iter_mut().enumerate() {
            *e = (i % cores.max(1)) as u16;
        }
        let mut c = Classifier { topo, reta, rules, default_queue, sources: Vec::new(), trace: None };
        c.sources = sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut info = SourceInfo {
                    tos: s.tos,
                    vlan_pcp: s.vlan_pcp,
                    proto: s.proto,
                    dst_port: s.dst_port,
                    queue: None,
                    core_cache: if cores > 1 { vec![u16::MAX; s.flows.min(1 << 20) as usize] } else { Vec::new() },
                };
                if !per_flow {
                    info.queue = Some(c.match_rules(&info, tuple(i as u16, 0, s.dst_port)));
                }
                info
            })
            .collect();
        c
    }

    fn match_rules(&self, s: &SourceInfo, t: Tuple) -> usize {
        for r in &self.rules {
            let ok = r.tos.is_none_or(|v| v == s.tos)
                && r.dscp.is_none_or(|v| v == s.tos >> 2)
                && r.vlan_pcp.is_none_or(|v| Some(v) == s.vlan_pcp)
                && r.proto.is_none_or(|v| v == s.proto)
                && r.dst_port.is_none_or(|v| v == t.dst_port)
                && r.src.is_none_or(|(a, m)| t.src_ip & m == a)
                && r.dst.is_none_or(|(a, m)| t.dst_ip & m == a);
            if ok {
                return r.queue;
            }
        }
        self.default_queue
    }

    /// Place a replayed trace's flows (source 0, flow `i` is `flows[i]`) by their real
    /// headers: RSS over the IPv4 or IPv6 tuple (2-tuple without ports, hash 0 for non-IP
    /// frames), filters on the flow's protocol, destination port, IPv4 addresses, TOS and
    /// VLAN PCP (its first frame's).
    pub fn use_trace_flows(&mut self, flows: &[TraceFlow]) {
        let total: u64 = flows.iter().map(|f| f.packets).sum();
        let mut shares = vec![0.0; self.topo.rings()];
        let rings = flows
            .iter()
            .map(|f| {
                let core = if self.topo.cores() == 1 {
                    0
                } else {
                    let mut input = [0u8; 36];
                    let n = f.key.rss_input(&mut input);
                    self.reta[(rss_hash(&input[..n]) & 127) as usize] as usize
                };
                let ring = self.topo.ring(core, self.match_flow(f));
                shares[ring] += f.packets as f64 / total.max(1) as f64;
                ring as u16
            })
            .collect();
        self.trace = Some((rings, shares));
    }

    fn match_flow(&self, f: &TraceFlow) -> usize {
        let k = &f.key;
        let v4 = k.ipv4();
        let proto = match k.proto {
            6 if k.family != 0 => Some(Proto::Tcp),
            17 if k.family != 0 => Some(Proto::Udp),
            _ => None,
        };
        for r in &self.rules {
            let ok = r.tos.is_none_or(|v| Some(v) == f.tos)
                && r.dscp.is_none_or(|v| f.tos.is_some_and(|t| t >> 2 == v))
                && r.vlan_pcp.is_none_or(|v| Some(v) == f.vlan_pcp)
                && r.proto.is_none_or(|v| Some(v) == proto)
                && r.dst_port.is_none_or(|v| k.ports && v == k.dst_port)
                && r.src.is_none_or(|(a, m)| v4.is_some_and(|(s, _)| s & m == a))
                && r.dst.is_none_or(|(a, m)| v4.is_some_and(|(_, d)| d & m == a));
            if ok {
                return r.queue;
            }
        }
        self.default_queue
    }

    /// Core RSS sends a flow to.
    pub fn core_of(&self, source: u16, flow: u32) -> usize {
        let t = tuple(source, flow, self.sources[source as usize].dst_port);
        let h = rss_hash(&t.rss_input());
        self.reta[(h & 127) as usize] as usize
    }

    /// Fraction of source `source`'s frames that reach each rx ring when its `flows` flows
    /// are used equally often (cbr cycles through them; poisson and bursts pick them
    /// uniformly), as [`Classifier::ring`] places them.
    ///
    /// Exact, without hashing every flow: the Toeplitz hash is linear over GF(2), so
    /// h(tuple) = h(fixed fields) ^ h(low 16 bits of dst IP) ^ h(src port). The low 7 bits
    /// of h(dst low) are counted once over the 65,536 values (per queue the filters pick),
    /// then shifted by each block's src-port term.
    pub fn ring_shares(&self, source: usize, flows: u64) -> Vec<f64> {
        if let Some((_, shares)) = &self.trace {
            // A trace: its flows as they are, weighted by their frames.
            return shares.clone();
        }
        let flows = flows.clamp(1, u32::MAX as u64);
        let info = &self.sources[source];
        let queues = self.topo.queues_per_core();
        let zero = Tuple { src_ip: 0, dst_ip: 0, src_port: 0, dst_port: 0 };
        let bit_terms =
            |f: &dyn Fn(u32) -> Tuple| -> [u32; 16] { std::array::from_fn(|b| rss_hash(&f(1 << b).rss_input())) };
        let dst_bits = bit_terms(&|v| Tuple { dst_ip: v, ..zero });
        let port_bits = bit_terms(&|v| Tuple { src_port: v as u16, ..zero });
        let xor_of = |bits: &[u32; 16], v: u32| (0..16).filter(|b| v >> b & 1 == 1).fold(0u32, |h, b| h ^ bits[b]);
        let base = Tuple { src_port: 0, ..tuple(source as u16, 0, info.dst_port) };
        let h_base = rss_hash(&base.rss_input());
        // Per queue and 7-bit hash term: how many of the 65,536 low dst values (and of the
        // last, partial block's) have it.
        let rem = (flows % 65_536) as u32;
        let mut full = vec![[0u64; 128]; queues];
        let mut part = vec![[0u64; 128]; queues];
        let mut h_lo = 0u32;
        for lo in 0u32..65_536 {
            if lo > 0 {
                // Gray-code step: one bit changes from lo - 1 to lo, in Gray order.
                h_lo ^= dst_bits[lo.trailing_zeros() as usize];
            }
            let g = lo ^ (lo >> 1);
            let q = match info.queue {
                Some(q) => q,
                None => self.match_rules(info, tuple(source as u16, g, info.dst_port)),
            };
            let x = (h_lo & 127) as usize;
            full[q][x] += 1;
            if g < rem {
                part[q][x] += 1;
            }
        }
        // How many blocks of 65,536 flows have each 7-bit src-port term.
        let blocks = flows / 65_536;
        let mut per_term = [0u64; 128];
        for hi in 0..blocks {
            let port = 1024 + (hi % 64_512) as u32;
            per_term[((h_base ^ xor_of(&port_bits, port)) & 127) as usize] += 1;
        }
        let mut counts = vec![0u64; self.topo.rings()];
        let spread = |counts: &mut Vec<u64>, term: usize, n: u64, hist: &[[u64; 128]]| {
            for (q, h) in hist.iter().enumerate() {
                for (x, &c) in h.iter().enumerate() {
                    if c > 0 {
                        counts[self.topo.ring(self.reta[x ^ term] as usize, q)] += c * n;
                    }
                }
            }
        };
        for (term, &n) in per_term.iter().enumerate() {
            if n > 0 {
                spread(&mut counts, term, n, &full);
            }
        }
        if rem > 0 {
            let port = 1024 + (blocks % 64_512) as u32;
            spread(&mut counts, ((h_base ^ xor_of(&port_bits, port)) & 127) as usize, 1, &part);
        }
        counts.iter().map(|&c| c as f64 / flows as f64).collect()
    }

    /// Rx ring of a frame.
    #[inline]
    pub fn ring(&mut self, p: &Packet) -> usize {
        if let Some((rings, _)) = &self.trace {
            return rings.get(p.flow as usize).map_or(0, |&r| r as usize);
        }
        let core = if self.topo.cores() == 1 {
            0
        } else {
            let s = p.source as usize;
            let cached = self.sources[s].core_cache.get(p.flow as usize).copied();
            match cached {
                Some(c) if c != u16::MAX => c as usize,
                _ => {
                    let c = self.core_of(p.source, p.flow);
                    if let Some(slot) = self.sources[s].core_cache.get_mut(p.flow as usize) {
                        *slot = c as u16;
                    }
                    c
                }
            }
        };
        let info = &self.sources[p.source as usize];
        let queue = match info.queue {
            Some(q) => q,
            None => self.match_rules(info, tuple(p.source, p.flow, info.dst_port)),
        };
        self.topo.ring(core, queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toeplitz_matches_the_published_verification_vector() {
        // Microsoft RSS verification suite, IPv4 with TCP ports:
        // 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178.
        let t = Tuple {
            src_ip: u32::from(std::net::Ipv4Addr::new(66, 9, 149, 187)),
            dst_ip: u32::from(std::net::Ipv4Addr::new(161, 142, 100, 80)),
            src_port: 2794,
            dst_port: 1766,
        };
        assert_eq!(toeplitz(&RSS_KEY, &t.rss_input()), 0x51cc_c178);
        // And without ports: 0x323e8fc2.
        assert_eq!(toeplitz(&RSS_KEY, &t.rss_input()[..8]), 0x323e_8fc2);
    }

    /// The table-driven hash is the definition's, for inputs of every length the key
    /// covers (random bytes, all zeros and all ones) and the verification vector's.
    #[test]
    fn the_rss_hash_by_table_is_toeplitz_under_the_rss_key() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in 0..=RSS_INPUT_MAX {
            for round in 0..200 {
                let input: Vec<u8> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        match round {
                            0 => 0,
                            1 => 0xff,
                            _ => x as u8,
                        }
                    })
                    .collect();
                assert_eq!(rss_hash(&input), toeplitz(&RSS_KEY, &input), "{input:02x?}");
            }
        }
        let t = Tuple {
            src_ip: u32::from(std::net::Ipv4Addr::new(66, 9, 149, 187)),
            dst_ip: u32::from(std::net::Ipv4Addr::new(161, 142, 100, 80)),
            src_port: 2794,
            dst_port: 1766,
        };
        assert_eq!(rss_hash(&t.rss_input()), 0x51cc_c178);
    }

    /// The closed-form shares are the per-flow placement counted flow by flow, for flow
    /// counts below, at and across the 65,536-flow blocks and with a per-flow filter.
    #[test]
    fn ring_shares_count_every_flow_exactly() {
        use crate::scenario::{PacketSize, Pattern};
        let queues = vec!["a".to_string(), "b".to_string()];
        let filter = Filter {
            queue: "a".into(),
            tos: None,
            dscp: None,
            vlan_pcp: None,
            proto: None,
            dst_port: None,
            src: None,
            dst: Some("198.19.0.0/17".into()),
        };
        for (cores, flows) in [(1usize, 1u64), (4, 1), (3, 1000), (4, 65_536), (6, 200_003)] {
            let src = ResolvedSource::simple("s", 1.0, Pattern::Poisson, PacketSize::default(), flows);
            let mut c = Classifier::new(
                Topology::new(cores, 2, cores, false),
                &queues,
                1,
                std::slice::from_ref(&filter),
                std::slice::from_ref(&src),
            );
            let shares = c.ring_shares(0, flows);
            let mut counted = vec![0u64; cores * 2];
            for f in 0..flows as u32 {
                counted[c.ring(&Packet::arriving(crate::engine::time::Instant::ZERO, 64, 0, f))] += 1;
            }
            for (r, (&s, &n)) in shares.iter().zip(&counted).enumerate() {
                assert!(
                    (s - n as f64 / flows as f64).abs() < 1e-12,
                    "{cores} cores, {flows} flows, ring {r}: {s} vs {n}"
                );
            }
        }
    }

    #[test]
    fn flows_spread_over_cores_and_filters_pick_queues() {
        use crate::scenario::{PacketSize, Pattern};
        let mut rt = ResolvedSource::simple("rt", 0.3, Pattern::Poisson, PacketSize::default(), 4096);
        rt.tos = 0xb8;
        let bulk = ResolvedSource::simple("bulk", 0.7, Pattern::Poisson, PacketSize::default(), 4096);
        let queues = vec!["rt".to_string(), "nrt".to_string()];
        let filter = Filter {
            queue: "rt".into(),
            tos: Some(0xb8),
            dscp: None,
            vlan_pcp: None,
            proto: None,
            dst_port: None,
            src: None,
            dst: None,
        };
        let mut c = Classifier::new(Topology::new(4, 2, 4, false), &queues, 1, &[filter], &[rt, bulk]);
        let mut per_ring = [0u32; 8];
        for source in 0..2u16 {
            for flow in 0..4096 {
                let p = Packet::arriving(crate::engine::time::Instant::ZERO, 64, source, flow);
                let r = c.ring(&p);
                assert_eq!(r % 2, if source == 0 { 0 } else { 1 }, "RT by TOS into queue 0 of its core");
                assert_eq!(c.ring(&p), r, "a flow stays on its ring");
                per_ring[r] += 1;
            }
        }
        for (r, n) in per_ring.iter().enumerate() {
            assert!((*n as i32 - 1024).abs() < 150, "ring {r}: {n} of 1024 flows");
        }
    }
}
