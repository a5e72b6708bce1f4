"""Write examples/trace-small.pcap: a small, deterministic trace for examples/router-trace.toml.

4,000 Ethernet/IPv4 frames over about 4 ms (about 1 Mpps, Poisson gaps) from 12 flows in the
benchmarking range 198.18.0.0/15: ten UDP and TCP flows with IMIX-like sizes (64, 576 and
1,518 B on the wire, 7:4:1), one voice flow (200 B, DSCP EF, VLAN PCP 5) and one large TCP
flow. Frames are captured 64 bytes deep (the headers; the original length is kept), with
nanosecond timestamps, so the file stays small (about 320 KB).

    python examples/make-trace.py [OUTPUT]     # default: trace-small.pcap next to this script

Pure Python, no dependencies; the same file every time (seeded).
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

FRAMES = 4000
RATE_PPS = 1e6
SNAPLEN = 64
START_NS = 1_764_028_800 * 1_000_000_000  # 2025-11-25 00:00:00 UTC
FCS = 4

# (src, dst, proto, sport, dport, tos, vlan pcp or None, sizes on the wire, weight)
IMIX = [(64, 7), (576, 4), (1518, 1)]
FLOWS = [(f"198.18.0.{1 + i}", f"198.19.{i}.1", 17 if i % 3 else 6, 40000 + i, 5001 + i % 4, 0, None, IMIX, 6) for i in range(10)] + [
    ("198.18.1.1", "198.19.100.1", 17, 16384, 16384, 0xB8, 5, [(200, 1)], 4),
    ("198.18.1.2", "198.19.100.2", 6, 443, 51000, 0, None, [(1518, 9), (64, 1)], 8),
]


def ip4(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(flow, wire: int) -> tuple[bytes, int]:
    """The first SNAPLEN bytes of the frame and its original length (without FCS)."""
    src, dst, proto, sport, dport, tos, pcp, _, _ = flow
    orig = wire - FCS
    eth = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")
    if pcp is not None:
        eth += struct.pack("!HH", 0x8100, pcp << 13 | 100)
    eth += struct.pack("!H", 0x0800)
    ip_len = orig - len(eth)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, ip_len, 0, 0x4000, 64, proto, 0, ip4(src), ip4(dst))
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    if proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, ip_len - 20, 0)
    else:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 0x10, 65535, 0, 0)
    data = eth + ip + l4
    data += bytes(max(0, orig - len(data)))
    return data[:SNAPLEN], orig


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("trace-small.pcap")
    rng = random.Random(1)
    weights = [f[8] for f in FLOWS]
    t_ns = START_NS
    chunks = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, SNAPLEN, 1)]
    for _ in range(FRAMES):
        flow = rng.choices(FLOWS, weights)[0]
        sizes = flow[7]
        wire = rng.choices([s for s, _ in sizes], [w for _, w in sizes])[0]
        data, orig = frame(flow, wire)
        chunks.append(struct.pack("<IIII", t_ns // 1_000_000_000, t_ns % 1_000_000_000, len(data), orig) + data)
        t_ns += max(1, round(rng.expovariate(RATE_PPS) * 1e9))
    out.write_bytes(b"".join(chunks))
    print(f"wrote {out} ({FRAMES} frames, {sum(map(len, chunks))} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
