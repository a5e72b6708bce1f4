"""``pktsim import-host``, ``schema``, ``profiles``, ``trace-info`` and ``examples``: the
files around a scenario (a host's settings written as one, the format's JSON Schema, the
bundled cost profiles, a trace at a glance, the bundled examples)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import _core
from ..errors import ScenarioError, UsageError
from ..parse import resolve
from ..textio import bytes_h, si, table
from .common import _write_file


def cmd_import_host(args) -> int:
    from .. import hostimport

    host = hostimport.from_dir(args.from_dir, args.iface) if args.from_dir else hostimport.from_live(args.iface)
    source = args.from_dir or "this machine"
    text = hostimport.to_toml(host, source)
    # Read back as pktsim reads a scenario: what it would refuse is not written.
    try:
        resolve(text, "toml", f"<import-host from {source}>", ".", [])
    except ScenarioError as e:
        raise ScenarioError(f"import-host: the scenario made from {source} is not valid, so it is not written: {e}") from None
    from ..hostload import light_load

    text, note = light_load(host, source, text)
    if args.output:
        _write_file("-o", args.output, text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    print(f"pktsim import-host: {note}", file=sys.stderr)
    return 0


def cmd_schema(args) -> int:
    text = json.dumps(json.loads(_core.schema("profile" if args.profile else "scenario")), indent=2) + "\n"
    if args.output:
        _write_file("-o", args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_profiles(args) -> int:
    names = _core.bundled_profiles()
    if args.name:
        if args.name not in names:
            raise UsageError(f"profiles: no bundled profile {args.name!r} (have: {', '.join(names)})")
        sys.stdout.write(_core.bundled_profile_text(args.name))
        return 0
    for n in names:
        print(n)
    return 0


def cmd_examples(args) -> int:
    from .. import bundled

    if args.copy:
        try:
            written = bundled.copy(args.copy)
        except FileExistsError as e:
            raise UsageError(f"--copy {e}") from None
        except OSError as e:
            raise UsageError(f"--copy {args.copy}: cannot copy the examples there ({e.strerror or e})") from None
        print(f"copied {len(written)} examples into {args.copy}; try: pktsim run {Path(args.copy) / 'linux-router-64B.toml'}")
        return 0
    print(f"pktsim's examples ({bundled.DIR}); pktsim examples --copy DIR to edit and run them")
    print(table([[n, about] for n, about in bundled.listing()], ["example", "what it is"], "ll"))
    return 0


def cmd_trace_info(args) -> int:
    info = json.loads(_core.trace_info(args.file))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['file']}: {info['format']}, timestamps to {info['resolution']}, link type {info['link_type']}")
    print(f"packets   {info['packets']}  ({info['non_ip_packets']} not IP)")
    print(f"duration  {info['duration_s']:.6f} s")
    print(f"rate      {si(info['rate_pps'], 'pps')}, {si(info['rate_bps'], 'bit/s')} (frames with FCS, without preamble and gap)")
    print(f"frames    {info['mean_frame_bytes']:.1f} B mean on the wire (captured length + 4 B FCS), {bytes_h(info['bytes'])} in all")
    print(f"flows     {info['flows']} (distinct 5-tuples)")
    total = max(info["packets"], 1)
    rows = [
        [
            f"{b['from_bytes']} B" if b["from_bytes"] == b["to_bytes"] else f"{b['from_bytes']}-{b['to_bytes']} B",
            b["packets"],
            f"{100 * b['packets'] / total:.1f}%",
        ]
        for b in info["sizes"]
    ]
    print(table(rows, ["size", "packets", "share"], align="lrr"))
    return 0
