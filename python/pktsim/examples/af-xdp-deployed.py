"""AF_XDP as deployed (examples/af-xdp-rxdrop.toml): what the user thread reads as the load
grows, for each way the socket is run, the simulator's points and the model's lines.

    python examples/af-xdp-deployed.py               # writes docs/af-xdp.png
    python examples/af-xdp-deployed.py -o af-xdp.svg

- the thread on the NAPI's core, sleeping in poll(): a driver that drops a frame its full
  rx ring refuses (mlx5) leaves ksoftirqd and the thread sharing the core; one that stops
  there (i40e, ice: rx_full = "stop"), or a umem too small for the rings, holds the stack
  back to what the thread reads;
- the thread spinning in user space on the NAPI's core keeps it for its slices while
  ksoftirqd waits; busy polling lets the thread drive the NAPI itself;
- l2fwd on a core of its own: zero copy (the driver sends in its poll) and copy mode (the
  thread's kicks send).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import pktsim  # noqa: E402

HERE = Path(__file__).absolute().parent  # examples/ as named (not the package directory it links to)
EXAMPLE = HERE / "af-xdp-rxdrop.toml"
PANELS = {
    "poll(), NAPI's core: the driver at a full rx ring": {
        'drops (mlx5, rx_full = "drop")': ({}, "C3"),
        'stops (i40e, rx_full = "stop")': ({"host.af_xdp.rx_full": "stop"}, "C0"),
        "drops, umem of 1024 frames": ({"host.af_xdp.umem_frames": "1024"}, "C2"),
    },
    "how the thread waits, NAPI's core (driver stops)": {
        "sleeps in poll()": ({"host.af_xdp.rx_full": "stop"}, "C0"),
        "spins in user space": ({"host.af_xdp.rx_full": "stop", "host.af_xdp.wait": "spin"}, "C1"),
        "spins, busy polling": ({"host.af_xdp.busy_poll": "20us", "host.af_xdp.wait": "spin"}, "C4"),
    },
    "l2fwd, the thread on a core of its own": {
        "zero copy (20 ns a send, in the poll)": (
            {"host.af_xdp.role": "l2fwd", "host.af_xdp.t_xmit_zc": "20ns", "app.core": "other"},
            "C0",
        ),
        "copy mode (200 ns a send, in kicks)": (
            {"host.af_xdp.role": "l2fwd", "host.af_xdp.zero_copy": "false", "host.af_xdp.t_xmit_copy": "200ns", "app.core": "other"},
            "C3",
        ),
        "rxdrop, for comparison": ({"app.core": "other"}, "0.4"),
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(HERE.parent / "docs" / "af-xdp.png"))
    args = ap.parse_args()
    sim_mpps = np.array([2.0, 6.0, 10.0, 12.0, 14.0, 16.0, 20.0, 30.0, 40.0])
    model_mpps = np.linspace(0.5, 40.0, 80)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4), sharey=True, layout="constrained")
    for ax, (title, curves) in zip(axes, PANELS.items()):
        for label, (sets, colour) in curves.items():
            read = []
            for r in sim_mpps:
                res = pktsim.run(EXAMPLE, {**sets, "traffic.rate": f"{r}Mpps"})
                read.append(res["throughput_pps"] / 1e6)
            line = [pktsim.predict(EXAMPLE, {**sets, "traffic.rate": f"{r}Mpps"})["predicted_pps"] / 1e6 for r in model_mpps]
            ax.plot(model_mpps, line, color=colour, lw=1.4, label=f"{label}: model")
            ax.plot(sim_mpps, read, "o", color=colour, ms=5, mfc="none", label="simulator")
        ax.plot([0, 40], [0, 40], color="0.75", lw=0.8, ls=":", zorder=0)
        ax.set_title(title, fontsize=9.5)
        ax.set_xlabel("offered load [Mpps]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("read (rxdrop) or forwarded (l2fwd) [Mpps]")
    axes[0].set_xlim(0, 41)
    axes[0].set_ylim(0, 18)
    fig.suptitle("AF_XDP as deployed (examples/af-xdp-rxdrop.toml: 60.9 ns a frame in the kernel, 10.9 ns in the thread)", fontsize=10.5)
    fig.savefig(args.output, dpi=150)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
