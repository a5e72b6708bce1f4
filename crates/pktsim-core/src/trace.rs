//! Packet traces: pcap and pcapng files read as a stream of frames, and a trace's summary.
//!
//! ```text
//!   file --(1 MiB buffer)--> records: pcap-file (the pcap file header, pcapng blocks;
//!                            a pcap record's 16-byte header is read in place)
//!        --> frame: timestamp (ps), size on the wire, headers: etherparse (Ethernet, VLAN,
//!            IPv4, IPv6, UDP, TCP) --> flow key (the 5-tuple), TOS, VLAN PCP
//! ```
//!
//! The reader holds one buffer, never the trace: memory does not grow with the number of
//! frames. A [`TraceSummary`] is one pass over a trace (or a time window of it): frames,
//! duration, sizes, and its flows in the order they first appear, which is what the
//! scenario (`traffic.pcap`), the analytical model and the classifier need; its memory grows
//! with the number of distinct flows, not of frames.
//!
//! Sizes: a capture holds a frame without its FCS, so a frame's size on the wire is its
//! original length + 4 B, padded to the 64 B minimum (captures taken on the sending host
//! hold unpadded frames). Raw IP captures (link types 101, 228, 229) get an Ethernet header
//! (14 B) added. Other link types are refused.
//!
//! Flows: IPv4 or IPv6 frames with a TCP or UDP header (not a later fragment) are keyed by
//! their 5-tuple; other IP frames (ICMP, fragments, ...) by protocol and addresses, as a
//! NIC's RSS hashes them (2-tuple); frames that are not IP (ARP, LLDP, ...) all belong to
//! one flow of their own, which RSS sends to the first entry of its table (hash 0) and
//! no address, port or TOS filter matches.
//!
//! Bad input is an error naming the file, the packet's number (from 1) and the byte offset
//! of its record.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use byteorder_slice::{BigEndian, ByteOrder, LittleEndian};
use etherparse::{
    Ethernet2Header, Ethernet2HeaderSlice, Ipv4HeaderSlice, Ipv6Header, Ipv6HeaderSlice, LaxIpv6Slice,
    SingleVlanHeader, SingleVlanHeaderSlice,
};
use pcap_file::pcap::PcapHeader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, RawBlock};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use serde::Serialize;

use crate::error::{ConfigError, Error, Result};
use crate::units::Duration;

/// Smallest and largest frame on the wire (FCS included), as `[traffic]` accepts them.
const MIN_WIRE_BYTES: u64 = 64;
const MAX_WIRE_BYTES: u64 = 9216;
/// Bytes a capture leaves out of each frame: the FCS.
pub const FCS_BYTES: u64 = 4;
/// Ethernet header added to a raw IP capture's frames.
const ETHERNET_HEADER_BYTES: u64 = 14;
/// The reader's buffer (grown for a larger record).
const BUFFER_BYTES: usize = 1 << 20;
/// Largest record (pcap packet or pcapng block) the reader accepts.
const MAX_RECORD_BYTES: u64 = 1 << 26;

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_OPB: u32 = 2;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;

/// A frame's flow: its 5-tuple (addresses, ports, protocol), or a flow of all non-IP
/// frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// 0: not IP; 4: IPv4 (addresses in the first 4 bytes); 6: IPv6.
    pub family: u8,
    /// IP protocol (6 TCP, 17 UDP, ...).
    pub proto: u8,
    /// Whether the ports are known (TCP or UDP, not a later fragment).
    pub ports: bool,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
}

impl FlowKey {
    /// Toeplitz input as a NIC forms it: IPv4 src(4) dst(4) [sport dport], IPv6 src(16)
    /// dst(16) [sport dport]; empty for a non-IP frame (hash 0).
    pub fn rss_input(&self, out: &mut [u8; 36]) -> usize {
        let a = match self.family {
            4 => 4,
            6 => 16,
            _ => return 0,
        };
        out[..a].copy_from_slice(&self.src[..a]);
        out[a..2 * a].copy_from_slice(&self.dst[..a]);
        if !self.ports {
            return 2 * a;
        }
        out[2 * a..2 * a + 2].copy_from_slice(&self.src_port.to_be_bytes());
        out[2 * a + 2..2 * a + 4].copy_from_slice(&self.dst_port.to_be_bytes());
        2 * a + 4
    }
    /// IPv4 addresses as numbers (for prefix filters), if IPv4.
    pub fn ipv4(&self) -> Option<(u32, u32)> {
        (self.family == 4).then(|| {
            (
                u32::from_be_bytes([self.src[0], self.src[1], self.src[2], self.src[3]]),
                u32::from_be_bytes([self.dst[0], self.dst[1], self.dst[2], self.dst[3]]),
            )
        })
    }
}

/// A flow of a trace: its key, what filters read from its first frame, and its frames.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceFlow {
    #[serde(skip)]
    pub key: FlowKey,
    /// IPv4 TOS or IPv6 traffic class (None: not IP).
    pub tos: Option<u8>,
    /// The outer 802.1Q tag's priority code point, if tagged.
    pub vlan_pcp: Option<u8>,
    /// Frames of the flow in the trace (or its window).
    pub packets: u64,
}

/// One frame as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frame {
    /// Timestamp in picoseconds since the first frame of the file (never before it, never
    /// earlier than the previous frame's: a capture's rare steps back in time become 0 gaps).
    pub t_ps: u64,
    /// Size on the wire in bytes, FCS included.
    pub size: u16,
    pub key: FlowKey,
    pub tos: Option<u8>,
    pub vlan_pcp: Option<u8>,
}

/// A trace's file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Pcap,
    Pcapng,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Ethernet,
    RawIp,
}

impl Link {
    fn of(d: DataLink) -> Option<Link> {
        match d {
            DataLink::ETHERNET => Some(Link::Ethernet),
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Some(Link::RawIp),
            _ => None,
        }
    }
}

/// Ticks of a timestamp to picoseconds: `ticks * mul / div`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Clock {
    mul: u128,
    div: u128,
}

impl Clock {
    /// `resol`: pcapng's `if_tsresol` (high bit 0: 10^-n s per tick; 1: 2^-n s).
    fn of_tsresol(resol: u8) -> Option<Clock> {
        let n = (resol & 0x7f) as u32;
        if resol & 0x80 == 0 {
            if n <= 12 {
                Some(Clock { mul: 10u128.pow(12 - n), div: 1 })
            } else if n <= 30 {
                Some(Clock { mul: 1, div: 10u128.pow(n - 12) })
            } else {
                None
            }
        } else if n <= 64 {
            Some(Clock { mul: 1_000_000_000_000, div: 1u128 << n })
        } else {
            None
        }
    }
    #[inline]
    fn ps(&self, ticks: u64) -> u128 {
        if self.div == 1 {
            ticks as u128 * self.mul
        } else {
            ticks as u128 * self.mul / self.div
        }
    }
    /// "1us", "1ns", "10ns", "2^-20s"...
    fn name(&self) -> String {
        if self.div == 1 {
            crate::units::Duration::from_ps(self.mul as u64).to_string()
        } else if self.div.is_power_of_two() && self.mul == 1_000_000_000_000 {
            format!("2^-{}s", self.div.trailing_zeros())
        } else {
            format!("{}ps", 1.0 / self.div as f64)
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Iface {
    link: DataLink,
    clock: Clock,
    snaplen: u32,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Pcap { big: bool, link: DataLink, clock: Clock, snaplen: u32 },
    PcapNg { big: bool, ifaces: Vec<Iface> },
}

/// Where to come back to: a record's byte offset and the reader's state there.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    offset: u64,
    packets: u64,
    state: State,
    first_ps: Option<u128>,
    last_ps: u128,
}

/// A pcap or pcapng file, read frame by frame.
pub struct TraceReader {
    path: String,
    file: File,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Offset in the file of `buf[0]`.
    base: u64,
    eof: bool,
    state: State,
    format: Format,
    /// Frames read so far (the next one's number is this + 1).
    packets: u64,
    /// The first frame's timestamp (ps since the epoch) and the latest one's.
    first_ps: Option<u128>,
    last_ps: u128,
}

fn invalid(path: &str, what: String) -> Error {
    ConfigError::new(path, "", None, what).into()
}

impl TraceReader {
    /// Open `path` and read its file header.
    pub fn open(path: &Path) -> Result<TraceReader> {
        let name = path.display().to_string();
        let file = crate::input::open_regular(path)?;
        let mut r = TraceReader {
            path: name,
            file,
            buf: vec![0; BUFFER_BYTES],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            state: State::PcapNg { big: false, ifaces: Vec::new() },
            format: Format::Pcapng,
            packets: 0,
            first_ps: None,
            last_ps: 0,
        };
        r.fill()?;
        let head = &r.buf[..r.end];
        if head.len() < 4 {
            return Err(invalid(&r.path, format!("not a pcap or pcapng file: {} bytes long", head.len())));
        }
        let magic = [head[0], head[1], head[2], head[3]];
        if u32::from_be_bytes(magic) == PCAPNG_SHB {
            // The section header block is read like any other block.
            r.format = Format::Pcapng;
            return Ok(r);
        }
        if !matches!(u32::from_be_bytes(magic), 0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1) {
            return Err(invalid(
                &r.path,
                format!("not a pcap or pcapng file: it starts with bytes {:02x} {:02x} {:02x} {:02x}, not a pcap (a1 b2 c3 d4, a1 b2 3c 4d, either byte order) or pcapng (0a 0d 0d 0a) magic number", magic[0], magic[1], magic[2], magic[3]),
            ));
        }
        let header = match PcapHeader::from_slice(head) {
            Ok((_, h)) => h,
            Err(PcapError::IncompleteBuffer) => {
                return Err(invalid(
                    &r.path,
                    format!("byte 0: truncated pcap file header ({} of 24 bytes)", head.len()),
                ))
            }
            Err(e) => return Err(invalid(&r.path, format!("byte 0: bad pcap file header ({e})"))),
        };
        r.format = Format::Pcap;
        let clock = if header.ts_resolution == TsResolution::NanoSecond {
            Clock { mul: 1_000, div: 1 }
        } else {
            Clock { mul: 1_000_000, div: 1 }
        };
        r.check_link(header.datalink, 0)?;
        r.state = State::Pcap {
            big: header.endianness == Endianness::Big,
            link: header.datalink,
            clock,
            snaplen: header.snaplen,
        };
        r.pos = 24;
        Ok(r)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Timestamp resolution ("1us", "1ns", ...) and link type of the (first) interface.
    pub fn clock_and_link(&self) -> Option<(String, String)> {
        match &self.state {
            State::Pcap { link, clock, .. } => Some((clock.name(), format!("{link:?}"))),
            State::PcapNg { ifaces, .. } => ifaces.first().map(|i| (i.clock.name(), format!("{:?}", i.link))),
        }
    }

    /// Where the next record starts, to come back to with [`TraceReader::rewind`].
    pub fn mark(&self) -> Mark {
        Mark {
            offset: self.base + self.pos as u64,
            packets: self.packets,
            state: self.state.clone(),
            first_ps: self.first_ps,
            last_ps: self.last_ps,
        }
    }

    /// Read again from `mark` (of this file).
    pub fn rewind(&mut self, mark: &Mark) -> Result<()> {
        self.file.seek(SeekFrom::Start(mark.offset)).map_err(|e| Error::Io { path: self.path.clone(), source: e })?;
        self.base = mark.offset;
        self.pos = 0;
        self.end = 0;
        self.eof = false;
        self.packets = mark.packets;
        self.state = mark.state.clone();
        self.first_ps = mark.first_ps;
        self.last_ps = mark.last_ps;
        self.fill()
    }

    fn check_link(&self, link: DataLink, offset: u64) -> Result<()> {
        if Link::of(link).is_none() {
            return Err(invalid(
                &self.path,
                format!("byte {offset}: link type {link:?} ({}) is not supported: expected Ethernet (1) or raw IP (101, 228, 229)", u32::from(link)),
            ));
        }
        Ok(())
    }

    /// Move what is left to the front and read more (up to a full buffer, or the end).
    fn fill(&mut self) -> Result<()> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end < self.buf.len() && !self.eof {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io { path: self.path.clone(), source: e }),
            }
        }
        Ok(())
    }

    /// Make sure `need` bytes from `pos` are in the buffer; false at a clean end of file
    /// (nothing left), an error when the file ends inside the record.
    fn have(&mut self, need: usize, what: &str) -> Result<bool> {
        if self.end - self.pos >= need {
            return Ok(true);
        }
        if need > self.buf.len() {
            self.buf.resize(need, 0);
        }
        self.fill()?;
        if self.end - self.pos >= need {
            return Ok(true);
        }
        let left = self.end - self.pos;
        if left == 0 && self.eof {
            return Ok(false);
        }
        Err(self.error(format!("truncated {what}: it needs {need} bytes, the file ends {left} bytes after its start")))
    }

    fn error(&self, what: String) -> Error {
        invalid(&self.path, format!("packet {} at byte {}: {what}", self.packets + 1, self.base + self.pos as u64))
    }

    /// The next frame, or None at the end of the file.
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            match self.state {
                State::Pcap { big, link, clock, snaplen } => {
                    if !self.have(16, "pcap record header")? {
                        return Ok(None);
                    }
                    let h = &self.buf[self.pos..self.pos + 16];
                    let incl = if big { BigEndian::read_u32(&h[8..12]) } else { LittleEndian::read_u32(&h[8..12]) };
                    if incl as u64 > MAX_RECORD_BYTES || (snaplen > 0 && incl > snaplen.max(262_144)) {
                        return Err(self.error(format!("captured length {incl} B is larger than the file's snapshot length ({snaplen} B): not a pcap record")));
                    }
                    if !self.have(16 + incl as usize, "pcap record")? {
                        return Ok(None);
                    }
                    let h = &self.buf[self.pos..self.pos + 16];
                    let rd = |b: &[u8]| if big { BigEndian::read_u32(b) } else { LittleEndian::read_u32(b) };
                    let (ts_sec, ts_frac, orig_len) = (rd(&h[0..4]), rd(&h[4..8]), rd(&h[12..16]));
                    let used = 16 + incl as usize;
                    if incl > orig_len {
                        return Err(self.error(format!(
                            "captured length {incl} B is larger than the original length {orig_len} B"
                        )));
                    }
                    let frac_limit = if clock.mul == 1_000 { 1_000_000_000 } else { 1_000_000 };
                    if ts_frac >= frac_limit {
                        return Err(self.error(format!("timestamp fraction {ts_frac} is not below {frac_limit}")));
                    }
                    let ticks = ts_sec as u64 * frac_limit as u64 + ts_frac as u64;
                    let data = &self.buf[self.pos + 16..self.pos + used];
                    let mut frame = decode(link, orig_len, data).map_err(|e| self.error(e))?;
                    self.stamp(&mut frame, clock.ps(ticks))?;
                    self.pos += used;
                    self.packets += 1;
                    return Ok(Some(frame));
                }
                State::PcapNg { big, .. } => {
                    if !self.have(12, "pcapng block header")? {
                        return Ok(None);
                    }
                    let h = &self.buf[self.pos..self.pos + 12];
                    let kind_be = BigEndian::read_u32(&h[0..4]);
                    let big = if kind_be == PCAPNG_SHB {
                        // The byte-order magic after the block length says how the section is written.
                        match BigEndian::read_u32(&h[8..12]) {
                            0x1A2B_3C4D => true,
                            0x4D3C_2B1A => false,
                            m => {
                                return Err(self.error(format!("bad pcapng section header: byte-order magic {m:#010x}")))
                            }
                        }
                    } else {
                        big
                    };
                    let rd = |b: &[u8]| if big { BigEndian::read_u32(b) } else { LittleEndian::read_u32(b) };
                    let kind = rd(&h[0..4]);
                    let len = rd(&h[4..8]) as u64;
                    if len < 12 || !len.is_multiple_of(4) || len > MAX_RECORD_BYTES {
                        return Err(self.error(format!("bad pcapng block length {len} (block type {kind:#x})")));
                    }
                    if !self.have(len as usize, "pcapng block")? {
                        return Ok(None);
                    }
                    let slice = &self.buf[self.pos..self.pos + len as usize];
                    let parsed = if big {
                        RawBlock::from_slice::<BigEndian>(slice)
                    } else {
                        RawBlock::from_slice::<LittleEndian>(slice)
                    };
                    let raw = match parsed {
                        Ok((_, raw)) => raw,
                        Err(e) => return Err(self.error(format!("bad pcapng block of type {kind:#x} ({e})"))),
                    };
                    match kind {
                        PCAPNG_SHB => {
                            self.state = State::PcapNg { big, ifaces: Vec::new() };
                        }
                        PCAPNG_IDB => {
                            let block = if big {
                                raw.try_into_block::<BigEndian>()
                            } else {
                                raw.try_into_block::<LittleEndian>()
                            };
                            let idb = match block {
                                Ok(Block::InterfaceDescription(idb)) => idb,
                                Ok(_) => unreachable!("an interface description block"),
                                Err(e) => return Err(self.error(format!("bad pcapng interface description ({e})"))),
                            };
                            let mut clock = Clock { mul: 1_000_000, div: 1 };
                            for o in &idb.options {
                                if let InterfaceDescriptionOption::IfTsResol(r) = o {
                                    clock = match Clock::of_tsresol(*r) {
                                        Some(c) => c,
                                        None => {
                                            return Err(self.error(format!(
                                                "unsupported pcapng timestamp resolution if_tsresol = {r:#x}"
                                            )))
                                        }
                                    };
                                }
                            }
                            self.check_link(idb.linktype, self.base + self.pos as u64)?;
                            if let State::PcapNg { ifaces, .. } = &mut self.state {
                                ifaces.push(Iface { link: idb.linktype, clock, snaplen: idb.snaplen });
                            }
                        }
                        PCAPNG_EPB => {
                            let b = &raw.body;
                            if b.len() < 20 {
                                return Err(
                                    self.error(format!("bad pcapng enhanced packet block: {} bytes of body", b.len()))
                                );
                            }
                            let (iface, ts_hi, ts_lo, cap, orig) =
                                (rd(&b[0..4]), rd(&b[4..8]), rd(&b[8..12]), rd(&b[12..16]), rd(&b[16..20]));
                            if 20 + cap as usize > b.len() {
                                return Err(self.error(format!("bad pcapng enhanced packet block: captured length {cap} B does not fit its {len}-byte block")));
                            }
                            let (link, clock) = match &self.state {
                                State::PcapNg { ifaces, .. } => match ifaces.get(iface as usize) {
                                    Some(i) => (i.link, i.clock),
                                    None => return Err(self.error(format!("packet of interface {iface}, which no interface description block before it describes"))),
                                },
                                State::Pcap { .. } => unreachable!("a pcapng reader"),
                            };
                            let ticks = (ts_hi as u64) << 32 | ts_lo as u64;
                            let mut frame =
                                decode(link, orig.max(cap), &b[20..20 + cap as usize]).map_err(|e| self.error(e))?;
                            self.stamp(&mut frame, clock.ps(ticks))?;
                            self.pos += len as usize;
                            self.packets += 1;
                            return Ok(Some(frame));
                        }
                        PCAPNG_SPB | PCAPNG_OPB => {
                            return Err(self.error(format!(
                                "pcapng {} block: not supported (expected enhanced packet blocks, which carry a timestamp)",
                                if kind == PCAPNG_SPB { "simple packet" } else { "obsolete packet" }
                            )));
                        }
                        // Statistics, name resolution, custom blocks...: nothing to replay.
                        _ => {}
                    }
                    self.pos += len as usize;
                }
            }
        }
    }

    /// Set a decoded frame's time from its timestamp (ps since the epoch); refused when it
    /// lies further from the first frame's than pktsim's clock reaches (2^64 ps, 213 days).
    #[inline]
    fn stamp(&mut self, f: &mut Frame, abs_ps: u128) -> Result<()> {
        let first = *self.first_ps.get_or_insert(abs_ps);
        let t = abs_ps.max(self.last_ps).max(first);
        self.last_ps = t;
        f.t_ps = u64::try_from(t - first).map_err(|_| {
            self.error(format!(
                "its timestamp is {:.0} days after the first packet's, more than the 213 days (2^64 ps) a trace may span",
                (t - first) as f64 / 86_400e12
            ))
        })?;
        Ok(())
    }
}

/// A frame from its record: its length on the link and the captured bytes (time not set).
/// Headers are read layer by layer with etherparse's header slices (Ethernet, up to three
/// VLAN tags, IPv4 or IPv6 with its extension headers), then the ports.
#[inline]
fn decode(link: DataLink, orig_len: u32, data: &[u8]) -> std::result::Result<Frame, String> {
    let link = Link::of(link).ok_or_else(|| format!("link type {link:?} is not supported"))?;
    let size = orig_len as u64 + FCS_BYTES + if link == Link::RawIp { ETHERNET_HEADER_BYTES } else { 0 };
    if size > MAX_WIRE_BYTES {
        return Err(format!(
            "a frame of {size} B on the wire (original length {orig_len} B + FCS): larger than {MAX_WIRE_BYTES} B (a capture taken with segmentation offloads, GRO or TSO, on?)"
        ));
    }
    let mut f = Frame { size: size.max(MIN_WIRE_BYTES) as u16, ..Frame::default() };
    let (mut ether_type, mut off) = match link {
        Link::Ethernet => match Ethernet2HeaderSlice::from_slice(data) {
            Ok(h) => (h.ether_type().0, Ethernet2Header::LEN),
            Err(_) => return Ok(f),
        },
        Link::RawIp => match data.first().map(|b| b >> 4) {
            Some(4) => (0x0800, 0),
            Some(6) => (0x86dd, 0),
            _ => return Ok(f),
        },
    };
    // 802.1Q, 802.1ad and 0x9100 tags: the outer one's PCP is the frame's.
    for _ in 0..3 {
        if !matches!(ether_type, 0x8100 | 0x88a8 | 0x9100) {
            break;
        }
        let Ok(v) = SingleVlanHeaderSlice::from_slice(&data[off..]) else { return Ok(f) };
        f.vlan_pcp = f.vlan_pcp.or(Some(v.priority_code_point().value()));
        ether_type = v.ether_type().0;
        off += SingleVlanHeader::LEN;
    }
    let (proto, transport) = match ether_type {
        0x0800 => {
            let Ok(h) = Ipv4HeaderSlice::from_slice(&data[off..]) else { return Ok(f) };
            f.key.family = 4;
            f.key.src[..4].copy_from_slice(&h.source());
            f.key.dst[..4].copy_from_slice(&h.destination());
            f.tos = Some(h.slice()[1]);
            let fragment = h.more_fragments() || h.fragments_offset().value() != 0;
            (h.protocol().0, (!fragment).then(|| &data[off + h.slice().len()..]))
        }
        0x86dd => {
            let Ok(h) = Ipv6HeaderSlice::from_slice(&data[off..]) else { return Ok(f) };
            f.key.family = 6;
            f.key.src = h.source();
            f.key.dst = h.destination();
            f.tos = Some(h.traffic_class());
            if h.next_header().is_ipv6_ext_header_value() {
                // Extension headers (rare): etherparse walks them.
                match LaxIpv6Slice::from_slice(&data[off..]) {
                    Ok((ip, _)) => {
                        let p = ip.payload();
                        (p.ip_number.0, (!p.fragmented).then_some(p.payload))
                    }
                    Err(_) => (h.next_header().0, None),
                }
            } else {
                (h.next_header().0, Some(&data[off + Ipv6Header::LEN..]))
            }
        }
        _ => return Ok(f),
    };
    f.key.proto = proto;
    if let Some(b) = transport.filter(|b| matches!(proto, 6 | 17) && b.len() >= 4) {
        f.key.ports = true;
        f.key.src_port = u16::from_be_bytes([b[0], b[1]]);
        f.key.dst_port = u16::from_be_bytes([b[2], b[3]]);
    }
    Ok(f)
}

/// A fast hasher for flow keys (multiply and rotate, 8 bytes at a time).
#[derive(Default)]
pub struct FlowHasher(u64);

impl Hasher for FlowHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        let mut tail = 0u64;
        for (i, b) in chunks.remainder().iter().enumerate() {
            tail |= (*b as u64) << (8 * i);
        }
        self.add(tail);
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.add(v as u64);
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.add(v as u64);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FlowHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub type FlowMap = HashMap<FlowKey, u32, BuildHasherDefault<FlowHasher>>;

/// Which part of a trace to use: from `start_ps` after its first frame, for `length_ps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Window {
    pub start_ps: u64,
    pub length_ps: Option<u64>,
}

impl Window {
    pub fn new(start: Option<Duration>, length: Option<Duration>) -> Self {
        Window { start_ps: start.map_or(0, |d| d.ps), length_ps: length.map(|d| d.ps) }
    }
    /// Before the window (Some(false)), in it (Some(true)), or past it (None).
    #[inline]
    pub fn place(&self, t_ps: u64) -> Option<bool> {
        if t_ps < self.start_ps {
            return Some(false);
        }
        match self.length_ps {
            Some(l) if t_ps - self.start_ps >= l => None,
            _ => Some(true),
        }
    }
}

/// One pass over a trace's window: what the scenario, the model and the classifier use.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSummary {
    pub path: PathBuf,
    pub window: Window,
    pub format: Format,
    /// Timestamp resolution ("1us", "1ns", ...).
    pub resolution: String,
    /// Link type ("ETHERNET", "RAW", ...).
    pub link: String,
    /// Frames in the window.
    pub packets: u64,
    /// From the window's first frame to its last, ps.
    pub span_ps: u64,
    /// Where the window's first frame starts, and its time since the file's first frame.
    pub start: Mark,
    pub start_t_ps: u64,
    /// Frames per size on the wire (FCS included).
    pub sizes: BTreeMap<u16, u64>,
    /// Bytes on the wire (FCS included) of all frames.
    pub bytes: u64,
    /// Frames that are not IPv4 or IPv6.
    pub non_ip: u64,
    /// Flows in the order of their first frame; `flow_of` numbers them.
    pub flows: Vec<TraceFlow>,
    pub flow_of: FlowMap,
}

impl TraceSummary {
    /// Read the window of the trace at `path`.
    pub fn scan(path: &Path, window: Window) -> Result<TraceSummary> {
        let mut r = TraceReader::open(path)?;
        let mut start = r.mark();
        let mut s = TraceSummary {
            path: path.to_path_buf(),
            window,
            format: r.format(),
            resolution: String::new(),
            link: String::new(),
            packets: 0,
            span_ps: 0,
            start: start.clone(),
            start_t_ps: 0,
            sizes: BTreeMap::new(),
            bytes: 0,
            non_ip: 0,
            flows: Vec::new(),
            flow_of: FlowMap::default(),
        };
        let mut first_t = None;
        while let Some(f) = r.next_frame()? {
            match window.place(f.t_ps) {
                Some(false) => {
                    start = r.mark();
                    continue;
                }
                None => break,
                Some(true) => {}
            }
            if first_t.is_none() {
                first_t = Some(f.t_ps);
                s.start = start.clone();
                s.start_t_ps = f.t_ps;
            }
            s.packets += 1;
            s.span_ps = f.t_ps - s.start_t_ps;
            *s.sizes.entry(f.size).or_insert(0) += 1;
            s.bytes += f.size as u64;
            s.non_ip += (f.key.family == 0) as u64;
            let n = s.flows.len() as u32;
            let i = *s.flow_of.entry(f.key).or_insert(n) as usize;
            if i == s.flows.len() {
                s.flows.push(TraceFlow { key: f.key, tos: f.tos, vlan_pcp: f.vlan_pcp, packets: 0 });
            }
            s.flows[i].packets += 1;
        }
        if let Some((res, link)) = r.clock_and_link() {
            s.resolution = res;
            s.link = link;
        }
        Ok(s)
    }

    /// A shared summary of the trace's window, read once per process for each file
    /// (size and modification time) and window.
    pub fn cached(path: &Path, window: Window) -> Result<Arc<TraceSummary>> {
        type Key = (PathBuf, u64, Option<std::time::SystemTime>, Window);
        static CACHE: Mutex<Vec<(Key, Arc<TraceSummary>)>> = Mutex::new(Vec::new());
        let meta = std::fs::metadata(path).map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
        let key: Key =
            (path.canonicalize().unwrap_or_else(|_| path.to_path_buf()), meta.len(), meta.modified().ok(), window);
        if let Some((_, s)) = CACHE.lock().ok().and_then(|c| c.iter().find(|(k, _)| *k == key).cloned()) {
            return Ok(s);
        }
        let s = Arc::new(Self::scan(path, window)?);
        if let Ok(mut c) = CACHE.lock() {
            // A few traces per process at most: keep the last 4.
            if c.len() >= 4 {
                c.remove(0);
            }
            c.push((key, s.clone()));
        }
        Ok(s)
    }

    /// Time from one pass's first frame to the next pass's (looping), ps: the span plus one
    /// mean gap, so that a looped trace keeps its rate.
    pub fn period_ps(&self) -> f64 {
        if self.packets < 2 {
            return 0.0;
        }
        self.span_ps as f64 * self.packets as f64 / (self.packets - 1) as f64
    }

    /// Mean frame rate: frames after the first over the span (pps).
    pub fn rate_pps(&self) -> f64 {
        if self.packets < 2 || self.span_ps == 0 {
            return 0.0;
        }
        (self.packets - 1) as f64 / (self.span_ps as f64 / 1e12)
    }

    pub fn mean_frame_bytes(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.bytes as f64 / self.packets as f64
        }
    }

    /// The name of the trace's traffic class: its file name without the extension.
    pub fn class_name(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "trace".into())
    }

    /// What `pktsim trace-info` prints.
    pub fn info(&self) -> TraceInfo {
        let rate_pps = self.rate_pps();
        // A few bins, or the exact sizes when there are few.
        let histogram = if self.sizes.len() <= 8 {
            self.sizes.iter().map(|(&s, &n)| SizeBin { from_bytes: s as u64, to_bytes: s as u64, packets: n }).collect()
        } else {
            let edges = [(64u64, 127u64), (128, 255), (256, 511), (512, 1023), (1024, 1518), (1519, MAX_WIRE_BYTES)];
            edges
                .iter()
                .map(|&(a, b)| SizeBin {
                    from_bytes: a,
                    to_bytes: b,
                    packets: self.sizes.range(a as u16..=b as u16).map(|(_, n)| n).sum(),
                })
                .filter(|b| b.packets > 0)
                .collect()
        };
        TraceInfo {
            file: self.path.display().to_string(),
            format: self.format,
            resolution: self.resolution.clone(),
            link_type: self.link.clone(),
            packets: self.packets,
            duration_s: self.span_ps as f64 / 1e12,
            rate_pps,
            rate_bps: rate_pps * self.mean_frame_bytes() * 8.0,
            mean_frame_bytes: self.mean_frame_bytes(),
            bytes: self.bytes,
            sizes: histogram,
            flows: self.flows.len() as u64,
            non_ip_packets: self.non_ip,
        }
    }
}

/// Frames of sizes `from_bytes..=to_bytes` (on the wire, FCS included).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeBin {
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub packets: u64,
}

/// A trace at a glance (`pktsim trace-info --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceInfo {
    pub file: String,
    pub format: Format,
    /// Timestamp resolution of the file ("1us", "1ns").
    pub resolution: String,
    pub link_type: String,
    pub packets: u64,
    /// From the first frame to the last, s.
    pub duration_s: f64,
    /// Frames after the first over the duration.
    pub rate_pps: f64,
    /// Bits of frames (FCS included; preamble and gap not) per second at that rate.
    pub rate_bps: f64,
    /// Mean size on the wire (original length + 4 B FCS).
    pub mean_frame_bytes: f64,
    pub bytes: u64,
    pub sizes: Vec<SizeBin>,
    /// Distinct flows (5-tuples; all non-IP frames count as one).
    pub flows: u64,
    pub non_ip_packets: u64,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// A frame for a test trace: Ethernet + IPv4 + UDP (or TCP), `len` bytes without FCS.
    pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, tos: u8, len: usize, tcp: bool) -> Vec<u8> {
        let mut f = vec![0u8; len.max(42)];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip_len = (len.max(42) - 14) as u16;
        f[14] = 0x45;
        f[15] = tos;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[22] = 64;
        f[23] = if tcp { 6 } else { 17 };
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        if !tcp {
            f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        } else if f.len() >= 54 {
            f[46] = 0x50;
        }
        f
    }

    /// A pcap file (little-endian; nanosecond timestamps if `ns`) of (time in ns, frame).
    pub fn pcap(frames: &[(u64, Vec<u8>)], ns: bool) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(if ns { 0xa1b2_3c4du32 } else { 0xa1b2_c3d4 }).to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&65_535u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        for (t_ns, f) in frames {
            let t = t_ns + 1_700_000_000_000_000_000;
            let (sec, frac) = (t / 1_000_000_000, t % 1_000_000_000);
            out.extend_from_slice(&(sec as u32).to_le_bytes());
            out.extend_from_slice(&(if ns { frac } else { frac / 1_000 } as u32).to_le_bytes());
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f);
        }
        out
    }

    /// A pcapng file written with pcap-file's writer, `tsresol` on its interface.
    pub fn pcapng(frames: &[(u64, Vec<u8>)], tsresol: u8) -> Vec<u8> {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::PcapNgWriter;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        let idb = InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(tsresol)],
        };
        w.write_pcapng_block(idb).unwrap();
        let per_tick = Clock::of_tsresol(tsresol).unwrap();
        for (t_ns, f) in frames {
            // pcap-file writes the timestamp's nanoseconds as the raw tick count.
            let ticks = (*t_ns as u128 * 1_000 * per_tick.div / per_tick.mul) as u64;
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_nanos(ticks),
                original_len: f.len() as u32,
                data: f.as_slice().into(),
                options: vec![],
            };
            w.write_pcapng_block(epb).unwrap();
        }
        w.into_inner()
    }

    pub fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pktsim-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    fn frames() -> Vec<(u64, Vec<u8>)> {
        (0..10u64)
            .map(|i| {
                (
                    i * 1_500,
                    udp4([198, 18, 0, 1], [198, 19, 0, (i % 3) as u8], 1024, 5001, 0, 60 + 100 * i as usize, false),
                )
            })
            .collect()
    }

    #[test]
    fn pcap_and_pcapng_at_each_resolution_read_the_same() {
        let want = TraceSummary::scan(&write_temp("ns.pcap", &pcap(&frames(), true)), Window::default()).unwrap();
        assert_eq!((want.packets, want.span_ps, want.flows.len()), (10, 13_500_000, 3));
        assert_eq!(want.sizes.keys().copied().collect::<Vec<_>>(), (0..10).map(|i| 64 + 100 * i).collect::<Vec<u16>>());
        assert_eq!((want.resolution.as_str(), want.format), ("1ns", Format::Pcap));
        // Microseconds: 1.5 us gaps survive (1500 ns is 1.5 us: rounded down to 1 us, 3 us...).
        let us = TraceSummary::scan(&write_temp("us.pcap", &pcap(&frames(), false)), Window::default()).unwrap();
        assert_eq!((us.span_ps, us.resolution.as_str()), (13_000_000, "1us"));
        for (resol, res_name) in [(9u8, "1ns"), (6, "1us")] {
            let ng = TraceSummary::scan(
                &write_temp(&format!("r{resol}.pcapng"), &pcapng(&frames(), resol)),
                Window::default(),
            )
            .unwrap();
            assert_eq!((ng.format, ng.resolution.as_str()), (Format::Pcapng, res_name));
            let expect = if resol == 9 { &want } else { &us };
            assert_eq!(
                (ng.packets, ng.span_ps, &ng.sizes, &ng.flows),
                (expect.packets, expect.span_ps, &expect.sizes, &expect.flows)
            );
        }
    }

    /// A trace that spans more than the clock holds (2^64 ps, 213 days) is refused at the
    /// packet that goes past it, not read with its times saturated.
    #[test]
    fn a_trace_longer_than_the_clock_is_refused() {
        let f = udp4([198, 18, 0, 1], [198, 19, 0, 1], 1024, 5001, 0, 60, false);
        let days = |d: u64| d * 86_400 * 1_000_000_000;
        let ok = write_temp("long-ok.pcap", &pcap(&[(0, f.clone()), (days(200), f.clone())], true));
        assert_eq!(TraceSummary::scan(&ok, Window::default()).unwrap().span_ps, days(200) * 1_000);
        let long = write_temp("long.pcap", &pcap(&[(0, f.clone()), (days(1), f.clone()), (days(300), f)], true));
        let e = TraceSummary::scan(&long, Window::default()).unwrap_err().to_string();
        assert!(e.contains("packet 3") && e.contains("300 days after the first packet's"), "{e}");
    }

    #[test]
    fn a_window_selects_by_time_from_the_first_frame() {
        let p = write_temp("w.pcap", &pcap(&frames(), true));
        let s = TraceSummary::scan(&p, Window { start_ps: 3_000_000, length_ps: Some(4_500_000) }).unwrap();
        // Frames at 3, 4.5, 6, 7.5 us (7.5 is past 3 + 4.5).
        assert_eq!((s.packets, s.span_ps, s.start_t_ps), (3, 3_000_000, 3_000_000));
        let mut r = TraceReader::open(&p).unwrap();
        r.rewind(&s.start).unwrap();
        assert_eq!(r.next_frame().unwrap().unwrap().t_ps, 3_000_000);
    }

    #[test]
    fn ipv6_vlan_and_non_ip_frames_are_decoded() {
        let mut v6 = vec![0u8; 14 + 4 + 40 + 8];
        v6[12..14].copy_from_slice(&[0x81, 0x00]);
        v6[14] = 5 << 5; // PCP 5
        v6[16..18].copy_from_slice(&[0x86, 0xdd]);
        v6[18] = 0x6b; // version 6, traffic class 0xb8
        v6[19] = 0x80;
        v6[22..24].copy_from_slice(&8u16.to_be_bytes());
        v6[24] = 17;
        v6[25] = 64;
        v6[26] = 0x20;
        v6[42] = 0x20;
        v6[57] = 1;
        v6[58..60].copy_from_slice(&1234u16.to_be_bytes());
        v6[60..62].copy_from_slice(&53u16.to_be_bytes());
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let p = write_temp("v6.pcap", &pcap(&[(0, v6), (100, arp.clone()), (200, arp)], true));
        let s = TraceSummary::scan(&p, Window::default()).unwrap();
        assert_eq!((s.flows.len(), s.non_ip), (2, 2));
        let f = &s.flows[0];
        assert_eq!(
            (f.key.family, f.key.proto, f.key.ports, f.key.src_port, f.key.dst_port, f.tos, f.vlan_pcp),
            (6, 17, true, 1234, 53, Some(0xb8), Some(5))
        );
        assert_eq!(f.key.dst[15], 1);
        assert_eq!((s.flows[1].key.family, s.flows[1].packets), (0, 2));
        // The unpadded 42-byte ARP frames are 64 B on the wire.
        assert_eq!(s.sizes.get(&64), Some(&2));
    }

    #[test]
    fn truncated_files_and_garbage_name_the_packet_and_the_byte() {
        let good = pcap(&frames(), true);
        let p = write_temp("cut.pcap", &good[..good.len() - 10]);
        let e = TraceSummary::scan(&p, Window::default()).unwrap_err().to_string();
        // Records: 24-byte header, then 16 + (60 + 100 i) bytes each.
        let offset = 24 + (0..9).map(|i| 16 + 60 + 100 * i).sum::<usize>();
        assert!(e.contains(&format!("packet 10 at byte {offset}: truncated pcap record")), "{e}");
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        let e = TraceSummary::scan(&write_temp("junk.pcap", b"hello, this is not a trace at all"), Window::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a pcap or pcapng file: it starts with bytes 68 65 6c 6c"), "{e}");
        let mut bad = good.clone();
        bad[24 + 16 + 60 + 8..24 + 16 + 60 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        let e = TraceSummary::scan(&write_temp("len.pcap", &bad), Window::default()).unwrap_err().to_string();
        assert!(e.contains("packet 2 at byte 100: captured length 2147483647 B"), "{e}");
        let ng = pcapng(&frames(), 9);
        let e = TraceSummary::scan(&write_temp("cut.pcapng", &ng[..ng.len() - 3]), Window::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("packet 10 at byte") && e.contains("truncated pcapng block"), "{e}");
    }
}
