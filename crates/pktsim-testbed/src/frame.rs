//! The probe frames pktsim-tb sends and recognises.
//!
//! Layout (offsets in bytes from the start of the Ethernet header, no FCS):
//!
//! | offset | size | field                                                      |
//! |-------:|-----:|------------------------------------------------------------|
//! |      0 |   14 | Ethernet II: dst MAC, src MAC, ethertype 0x0800            |
//! |     14 |   20 | IPv4: no options, TTL 64, DF clear, protocol UDP, checksum |
//! |     34 |    8 | UDP: src port 9000, dst port 9001, checksum 0 (none)       |
//! |     42 |    4 | magic `0x706b7473` (u32, little-endian)                    |
//! |     46 |    4 | run id (u32, little-endian)                                |
//! |     50 |    8 | sequence number (u64, little-endian), 0, 1, 2, ...         |
//! |     58 |    8 | `tx_mono_ns`: CLOCK_MONOTONIC at send (u64, little-endian) |
//! |     66 |    8 | `tx_real_ns`: CLOCK_REALTIME at send (u64, little-endian)  |
//! |     74 |  ... | zero padding up to the frame size                          |
//!
//! The probe ends at byte 74, so that is the smallest frame that carries it
//! ([`MIN_FRAME_LEN`]). The magic is stored little-endian like every other field, so on
//! the wire its bytes read `73 74 6b 70`.

use std::net::Ipv4Addr;

/// Ethertype of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// UDP source port of every probe.
pub const UDP_SRC_PORT: u16 = 9000;
/// UDP destination port of every probe; the sink only looks at this port.
pub const UDP_DST_PORT: u16 = 9001;
/// First four payload bytes of a probe (as a little-endian u32).
pub const MAGIC: u32 = 0x706b_7473;

/// Length of the Ethernet II header.
pub const ETH_HEADER_LEN: usize = 14;
/// Length of the IPv4 header pktsim-tb writes (no options).
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// Offset of the probe payload in the frame.
pub const PAYLOAD_OFFSET: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
/// Length of the probe payload (magic, run id, seq, two timestamps).
pub const PROBE_LEN: usize = 32;
/// Smallest frame size (without FCS) that carries a whole probe.
pub const MIN_FRAME_LEN: usize = PAYLOAD_OFFSET + PROBE_LEN;
/// Largest frame size (without FCS): a 1500-byte IP MTU plus the Ethernet header.
pub const MAX_FRAME_LEN: usize = 1514;

const IP_OFFSET: usize = ETH_HEADER_LEN;
const IP_CHECKSUM_OFFSET: usize = IP_OFFSET + 10;
const IP_DST_OFFSET: usize = IP_OFFSET + 16;
const UDP_OFFSET: usize = IP_OFFSET + IPV4_HEADER_LEN;
const MAGIC_OFFSET: usize = PAYLOAD_OFFSET;
const RUN_ID_OFFSET: usize = PAYLOAD_OFFSET + 4;
const SEQ_OFFSET: usize = PAYLOAD_OFFSET + 8;
const TX_MONO_OFFSET: usize = PAYLOAD_OFFSET + 16;
const TX_REAL_OFFSET: usize = PAYLOAD_OFFSET + 24;

/// Everything that is fixed for all frames of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// Frame size in bytes without FCS, `MIN_FRAME_LEN..=MAX_FRAME_LEN`.
    pub frame_len: usize,
    pub run_id: u32,
}

/// Builds a complete frame for `spec` with sequence number 0 and zero timestamps.
///
/// `spec.frame_len` must be within `MIN_FRAME_LEN..=MAX_FRAME_LEN` (the argument parser
/// guarantees it); shorter or longer values are clamped into that range.
pub fn build(spec: &FrameSpec) -> Vec<u8> {
    let frame_len = spec.frame_len.clamp(MIN_FRAME_LEN, MAX_FRAME_LEN);
    let mut f = vec![0u8; frame_len];

    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());

    let ip_total_len = (frame_len - ETH_HEADER_LEN) as u16;
    let ip = &mut f[IP_OFFSET..IP_OFFSET + IPV4_HEADER_LEN];
    ip[0] = 0x45; // version 4, IHL 5 (20 bytes)
    ip[1] = 0; // DSCP/ECN
    ip[2..4].copy_from_slice(&ip_total_len.to_be_bytes());
    // ip[4..6] identification 0, ip[6..8] flags/fragment offset 0 (DF clear).
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&spec.src_ip.octets());
    ip[16..20].copy_from_slice(&spec.dst_ip.octets());

    let udp_len = (frame_len - UDP_OFFSET) as u16;
    let udp = &mut f[UDP_OFFSET..UDP_OFFSET + UDP_HEADER_LEN];
    udp[0..2].copy_from_slice(&UDP_SRC_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&UDP_DST_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    // udp[6..8] checksum 0: not computed.

    f[MAGIC_OFFSET..MAGIC_OFFSET + 4].copy_from_slice(&MAGIC.to_le_bytes());
    f[RUN_ID_OFFSET..RUN_ID_OFFSET + 4].copy_from_slice(&spec.run_id.to_le_bytes());

    update_ipv4_checksum(&mut f);
    f
}

/// Writes the sequence number into a frame made by [`build`].
#[inline]
pub fn set_seq(frame: &mut [u8], seq: u64) {
    frame[SEQ_OFFSET..SEQ_OFFSET + 8].copy_from_slice(&seq.to_le_bytes());
}

/// Writes the send timestamps into a frame made by [`build`].
#[inline]
pub fn set_tx_times(frame: &mut [u8], tx_mono_ns: u64, tx_real_ns: u64) {
    frame[TX_MONO_OFFSET..TX_MONO_OFFSET + 8].copy_from_slice(&tx_mono_ns.to_le_bytes());
    frame[TX_REAL_OFFSET..TX_REAL_OFFSET + 8].copy_from_slice(&tx_real_ns.to_le_bytes());
}

/// Changes the IPv4 destination of a frame made by [`build`] and fixes its header checksum.
#[inline]
pub fn set_dst_ip(frame: &mut [u8], dst_ip: Ipv4Addr) {
    frame[IP_DST_OFFSET..IP_DST_OFFSET + 4].copy_from_slice(&dst_ip.octets());
    update_ipv4_checksum(frame);
}

/// Recomputes the IPv4 header checksum of a frame made by [`build`].
#[inline]
fn update_ipv4_checksum(frame: &mut [u8]) {
    frame[IP_CHECKSUM_OFFSET..IP_CHECKSUM_OFFSET + 2].fill(0);
    let sum = ipv4_checksum(&frame[IP_OFFSET..IP_OFFSET + IPV4_HEADER_LEN]);
    frame[IP_CHECKSUM_OFFSET..IP_CHECKSUM_OFFSET + 2].copy_from_slice(&sum.to_be_bytes());
}

/// The Internet checksum (RFC 1071) of `header` with its checksum field zeroed: the
/// ones'-complement of the ones'-complement sum of its 16-bit big-endian words.
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    !ones_complement_sum(header)
}

/// The ones'-complement sum of the 16-bit big-endian words of `data` (an odd last byte
/// is padded with zero). A header with a valid checksum sums to `0xffff`.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The probe fields of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub run_id: u32,
    pub seq: u64,
    pub tx_mono_ns: u64,
    pub tx_real_ns: u64,
}

/// What a received frame is, as far as the sink is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classified {
    /// Not IPv4/UDP to port [`UDP_DST_PORT`] (or a non-first fragment): ignored.
    Other,
    /// IPv4/UDP to port [`UDP_DST_PORT`], but not a probe of this run (wrong magic,
    /// wrong run id, or too short to hold a probe).
    Foreign,
    /// A probe of this run.
    Probe(Probe),
}

/// Classifies a received Ethernet frame against the run id the sink expects.
pub fn classify(frame: &[u8], run_id: u32) -> Classified {
    if frame.len() < ETH_HEADER_LEN + IPV4_HEADER_LEN || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4 {
        return Classified::Other;
    }
    let ip = &frame[IP_OFFSET..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let fragment_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    if ip[0] >> 4 != 4 || ihl < IPV4_HEADER_LEN || ip[9] != 17 || fragment_offset != 0 {
        return Classified::Other;
    }
    let Some(udp) = ip.get(ihl..ihl + UDP_HEADER_LEN) else {
        return Classified::Other;
    };
    if u16::from_be_bytes([udp[2], udp[3]]) != UDP_DST_PORT {
        return Classified::Other;
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_HEADER_LEN + PROBE_LEN {
        return Classified::Foreign;
    }
    let payload_start = IP_OFFSET + ihl + UDP_HEADER_LEN;
    classify_payload(frame.get(payload_start..).unwrap_or(&[]), run_id)
}

/// Classifies a UDP payload (what follows the UDP header, as a UDP socket receives it)
/// against the expected run id: a probe of the run, or foreign (too short to hold a
/// probe, wrong magic, other run id). Never [`Classified::Other`].
pub fn classify_payload(payload: &[u8], run_id: u32) -> Classified {
    let Some(p) = payload.get(..PROBE_LEN) else {
        return Classified::Foreign;
    };
    let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&p[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let probe = Probe {
        run_id: u32_at(RUN_ID_OFFSET - PAYLOAD_OFFSET),
        seq: u64_at(SEQ_OFFSET - PAYLOAD_OFFSET),
        tx_mono_ns: u64_at(TX_MONO_OFFSET - PAYLOAD_OFFSET),
        tx_real_ns: u64_at(TX_REAL_OFFSET - PAYLOAD_OFFSET),
    };
    if u32_at(MAGIC_OFFSET - PAYLOAD_OFFSET) != MAGIC || probe.run_id != run_id {
        return Classified::Foreign;
    }
    Classified::Probe(probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(frame_len: usize) -> FrameSpec {
        FrameSpec {
            dst_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x02],
            src_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
            src_ip: Ipv4Addr::new(198, 18, 9, 1),
            dst_ip: Ipv4Addr::new(198, 18, 9, 2),
            frame_len,
            run_id: 7,
        }
    }

    fn ip_header(frame: &[u8]) -> &[u8] {
        &frame[ETH_HEADER_LEN..ETH_HEADER_LEN + IPV4_HEADER_LEN]
    }

    #[test]
    fn built_header_fields() {
        let f = build(&spec(100));
        assert_eq!(f.len(), 100);
        assert_eq!(&f[0..6], &[0x02, 0, 0, 0, 0, 0x02]);
        assert_eq!(&f[6..12], &[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = ip_header(&f);
        assert_eq!(ip[0], 0x45);
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 86);
        assert_eq!(&ip[6..8], &[0, 0], "DF and fragment offset clear");
        assert_eq!(ip[8], 64);
        assert_eq!(ip[9], 17);
        assert_eq!(&ip[12..16], &[198, 18, 9, 1]);
        assert_eq!(&ip[16..20], &[198, 18, 9, 2]);
        let udp = &f[34..42];
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 9000);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 9001);
        assert_eq!(u16::from_be_bytes([udp[4], udp[5]]), 66);
        assert_eq!(&udp[6..8], &[0, 0]);
        assert_eq!(&f[42..46], &MAGIC.to_le_bytes());
        assert!(f[MIN_FRAME_LEN..].iter().all(|&b| b == 0), "padding is zero");
    }

    #[test]
    fn checksum_of_built_header_is_valid() {
        for len in [MIN_FRAME_LEN, 100, 1000, MAX_FRAME_LEN] {
            let mut f = build(&spec(len));
            assert_eq!(ones_complement_sum(ip_header(&f)), 0xffff, "frame_len {len}");
            for i in 0..1000u32 {
                set_dst_ip(&mut f, Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + i * 7919));
                assert_eq!(ones_complement_sum(ip_header(&f)), 0xffff, "dst #{i}");
            }
        }
    }

    #[test]
    fn checksum_matches_rfc1071_example() {
        // The classic example header from RFC 1071 / Wikipedia: checksum 0xb861.
        let hdr: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&hdr), 0xb861);
    }

    #[test]
    fn build_parse_round_trip() {
        for len in [MIN_FRAME_LEN, 60 + PROBE_LEN, MAX_FRAME_LEN] {
            let mut f = build(&spec(len));
            set_seq(&mut f, 0x0102_0304_0506_0708);
            set_tx_times(&mut f, 123_456_789_012, 1_700_000_000_123_456_789);
            set_dst_ip(&mut f, Ipv4Addr::new(198, 18, 9, 3));
            assert_eq!(
                classify(&f, 7),
                Classified::Probe(Probe {
                    run_id: 7,
                    seq: 0x0102_0304_0506_0708,
                    tx_mono_ns: 123_456_789_012,
                    tx_real_ns: 1_700_000_000_123_456_789,
                })
            );
            assert_eq!(&f[30..34], &[198, 18, 9, 3]);
        }
    }

    #[test]
    fn classify_rejects_what_is_not_ours() {
        let f = build(&spec(MIN_FRAME_LEN));
        assert_eq!(classify(&f, 8), Classified::Foreign, "other run id");

        let mut bad_magic = f.clone();
        bad_magic[42] ^= 0xff;
        assert_eq!(classify(&bad_magic, 7), Classified::Foreign);

        let mut other_port = f.clone();
        other_port[36..38].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(classify(&other_port, 7), Classified::Other);

        let mut tcp = f.clone();
        tcp[23] = 6;
        assert_eq!(classify(&tcp, 7), Classified::Other);

        let mut ipv6 = f.clone();
        ipv6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(classify(&ipv6, 7), Classified::Other);

        assert_eq!(classify(&f[..50], 7), Classified::Foreign, "truncated probe");
        assert_eq!(classify(&f[..20], 7), Classified::Other, "truncated IP header");
        assert_eq!(classify(&[], 7), Classified::Other);
    }

    #[test]
    fn payloads_classify_like_their_frames() {
        let mut f = build(&spec(100));
        set_seq(&mut f, 42);
        set_tx_times(&mut f, 5, 6);
        let payload = &f[PAYLOAD_OFFSET..];
        let want = Probe { run_id: 7, seq: 42, tx_mono_ns: 5, tx_real_ns: 6 };
        assert_eq!(classify_payload(payload, 7), Classified::Probe(want));
        assert_eq!(classify_payload(&payload[..PROBE_LEN], 7), Classified::Probe(want), "exactly a probe");
        assert_eq!(classify_payload(payload, 8), Classified::Foreign, "other run id");
        assert_eq!(classify_payload(&payload[..PROBE_LEN - 1], 7), Classified::Foreign, "too short");
        assert_eq!(classify_payload(&[], 7), Classified::Foreign);
        let mut bad_magic = payload.to_vec();
        bad_magic[3] ^= 0x01;
        assert_eq!(classify_payload(&bad_magic, 7), Classified::Foreign);
        assert_eq!(classify(&f, 7), classify_payload(payload, 7));
    }
}
