"""Trace replay: ``traffic.pcap`` and ``pktsim trace-info`` on pcap files written here by hand."""

import json
import struct

import pytest
from conftest import EXAMPLES, run_cli


def udp_frame(flow: int, length: int) -> bytes:
    """An Ethernet/IPv4/UDP frame of `length` bytes (no FCS) of flow `flow`."""
    ip_len = length - 14
    eth = bytes(6) + bytes(6) + struct.pack("!H", 0x0800)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0, bytes([198, 18, 0, 1]), bytes([198, 19, flow >> 8, flow & 0xFF]))
    udp = struct.pack("!HHHH", 1024 + flow, 5001, ip_len - 20, 0)
    return (eth + ip + udp).ljust(length, b"\0")


def write_pcap(path, frames, ns=True):
    """frames: (time in ns, frame bytes)."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D if ns else 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for t, f in frames:
        t += 1_700_000_000 * 10**9
        frac = t % 10**9 if ns else t % 10**9 // 1000
        out.append(struct.pack("<IIII", t // 10**9, frac, len(f), len(f)) + f)
    path.write_bytes(b"".join(out))
    return path


SIZES = [60, 60, 60, 572, 572, 1514, 60, 300]


@pytest.fixture
def trace(tmp_path):
    # 3,000 frames of 32 flows at 100 kpps (30 ms).
    frames = [(i * 10_000, udp_frame(i % 32, SIZES[i * 5 % 8])) for i in range(3000)]
    return write_pcap(tmp_path / "t.pcap", frames), frames


def scenario(tmp_path, traffic="", extra=""):
    p = tmp_path / "s.toml"
    p.write_text(
        f'[cpu]\nfrequency = "3GHz"\n{extra}\n[link]\nrate = "10Gbit/s"\n[traffic]\npcap = "t.pcap"\n{traffic}\n'
        '[cost]\nprofile = "raumer2015-64B"\n[measure]\nwarmup = "0s"\nduration = "40ms"\n'
    )
    return p


def test_trace_info_counts_packets_sizes_and_flows(trace):
    path, frames = trace
    info = json.loads(run_cli("trace-info", path, "--json").stdout)
    assert (info["packets"], info["flows"], info["format"], info["resolution"], info["link_type"]) == (3000, 32, "pcap", "1ns", "ETHERNET")
    assert info["duration_s"] == pytest.approx(2999 * 10e-6)
    assert info["rate_pps"] == pytest.approx(100e3)
    sizes = {b["from_bytes"]: b["packets"] for b in info["sizes"]}
    want = {}
    for _, f in frames:
        want[len(f) + 4] = want.get(len(f) + 4, 0) + 1
    assert sizes == want
    text = run_cli("trace-info", path).stdout
    assert "3000" in text and "32 (distinct 5-tuples)" in text


def test_microsecond_timestamps_read_as_microseconds(tmp_path):
    frames = [(i * 2_500, udp_frame(0, 60)) for i in range(5)]
    us = json.loads(run_cli("trace-info", write_pcap(tmp_path / "us.pcap", frames, ns=False), "--json").stdout)
    ns = json.loads(run_cli("trace-info", write_pcap(tmp_path / "ns.pcap", frames), "--json").stdout)
    assert (us["resolution"], ns["resolution"]) == ("1us", "1ns")
    assert ns["duration_s"] == pytest.approx(10e-6)
    assert us["duration_s"] == pytest.approx(10e-6)  # 2.5 us steps kept to the microsecond: 0, 2, 5, 7, 10


def test_a_replayed_trace_is_forwarded_as_it_is(tmp_path, trace):
    path, frames = trace
    r = json.loads(run_cli("run", scenario(tmp_path), "--json").stdout)
    assert (r["offered_packets"], r["forwarded_packets"], r["loss_ratio"]) == (3000, 3000, 0.0)
    assert list(r["per_class"]) == ["t"]
    mean = sum(len(f) + 4 for _, f in frames) / len(frames)
    assert r["throughput_bps"] == pytest.approx(r["throughput_pps"] * mean * 8)
    # Scaled to twice the rate: over in half the time (the last frame at 14.995 ms); looped:
    # 59 ms of frames.
    fast = json.loads(run_cli("run", scenario(tmp_path, "rate_scale = 2.0"), "--json", "--set", "measure.duration=15ms").stdout)
    assert fast["offered_packets"] == 3000
    fast = json.loads(run_cli("run", scenario(tmp_path, "rate_scale = 2.0"), "--json", "--set", "measure.duration=14.9ms").stdout)
    assert fast["offered_packets"] == 2980
    looped = json.loads(run_cli("run", scenario(tmp_path, "loop = true"), "--json", "--set", "measure.duration=59ms").stdout)
    assert looped["offered_packets"] == 5900
    model = json.loads(run_cli("model", scenario(tmp_path, 'rate = "200kpps"'), "--json").stdout)
    assert model["offered_pps"] == pytest.approx(200e3)
    assert model["mean_frame_bytes"] == pytest.approx(mean)


def test_rss_places_the_trace_flows_on_cores(tmp_path, trace):
    r = json.loads(run_cli("run", scenario(tmp_path, extra="cores = 4"), "--json").stdout)
    per_ring = [g["forwarded_packets"] for g in r["per_ring"]]
    assert sum(per_ring) == 3000 and sum(1 for n in per_ring if n) >= 3


def test_bad_traces_are_clear_errors_with_packet_and_byte(tmp_path, trace):
    path, _ = trace
    data = path.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:1000])
    for args in (["trace-info", cut], ["run", scenario(tmp_path, "").with_name("s.toml")]):
        if args[0] == "run":
            (tmp_path / "t.pcap").write_bytes(data[:1000])
        p = run_cli(*args, check=False)
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr and "panicked" not in p.stderr
        # Records: the 24-byte file header, then 16 + 60 bytes, then 16 + 1,514 bytes (cut).
        assert "packet 2 at byte 100: truncated pcap record" in p.stderr, p.stderr
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"GIF89a" + bytes(100))
    p = run_cli("trace-info", junk, check=False)
    assert p.returncode == 2 and "not a pcap or pcapng file" in p.stderr and str(junk) in p.stderr


def test_trace_keys_are_checked(tmp_path, trace):
    p = run_cli("run", scenario(tmp_path, 'rate = "1Mpps"\nrate_scale = 2.0'), check=False)
    assert p.returncode == 2 and "traffic.rate_scale" in p.stderr
    p = run_cli("run", scenario(tmp_path, 'size = "1500B"'), check=False)
    assert p.returncode == 2 and 'traffic.size = "1500B": expected no traffic.size with traffic.kind = "pcap"' in p.stderr
    p = run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "traffic.rate_scale=2", check=False)
    assert p.returncode == 2 and 'only traffic.kind = "pcap" reads it' in p.stderr


def test_the_bundled_trace_is_what_its_script_writes(tmp_path):
    import subprocess
    import sys

    subprocess.run([sys.executable, str(EXAMPLES / "make-trace.py"), str(tmp_path / "again.pcap")], check=True, capture_output=True)
    assert (tmp_path / "again.pcap").read_bytes() == (EXAMPLES / "trace-small.pcap").read_bytes()
    assert (EXAMPLES / "trace-small.pcap").stat().st_size < 1_000_000
