"""A UDP reader on the core that receives its packets: what it reads as the load grows, for
each way the kernel shares that core (examples/udp-receiver.toml), the simulator's points
and the model's lines.

    python examples/shared-core.py                   # writes docs/shared-core.png
    python examples/shared-core.py -o shared.svg

- host.softirq = "inline" (Linux 6.5 on): each datagram a receive call takes first runs a
  whole __do_softirq;
- host.softirq = "defer" (4.9 - 6.4, 5.10 / 5.15 / 6.1 stable): ksoftirqd has the work and
  shares the core with the reader by weight;
- a NAPI thread (nic.napi.threaded) as SCHED_OTHER shares it by weight; as SCHED_FIFO it
  keeps the core whenever it has work.
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
EXAMPLE = HERE / "udp-receiver.toml"
SETTINGS = {
    'softirq, host.softirq = "inline" (6.5 on)': {"host.softirq": "inline"},
    'softirq, host.softirq = "defer" (4.9 - 6.4)': {"host.softirq": "defer"},
    "NAPI thread, SCHED_OTHER": {"nic.napi.threaded": "true", "host.thread.policy": "other"},
    "NAPI thread, SCHED_FIFO": {"nic.napi.threaded": "true", "host.thread.policy": "fifo"},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(HERE.parent / "docs" / "shared-core.png"))
    args = ap.parse_args()
    sim_mpps = np.array([0.3, 0.6, 0.9, 1.2, 1.6, 1.8, 2.0, 2.2, 2.4, 2.8, 3.5, 5.0])
    model_mpps = np.linspace(0.1, 5.0, 99)
    fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True, sharey=True, layout="constrained")
    for ax, (label, sets), colour in zip(axes.flat, SETTINGS.items(), ["C3", "C0", "C2", "C1"]):
        read = []
        for r in sim_mpps:
            res = pktsim.run(EXAMPLE, {**sets, "traffic.rate": f"{r}Mpps"})
            read.append(res["consumed_packets"] / 0.1 / 1e6)  # measure.duration = 100 ms
        line = [pktsim.predict(EXAMPLE, {**sets, "traffic.rate": f"{r}Mpps"})["predicted_pps"] / 1e6 for r in model_mpps]
        ax.plot([0, 5], [0, 5], color="0.75", lw=0.8, ls=":", zorder=0, label="everything offered")
        ax.plot(model_mpps, line, color=colour, lw=1.5, label="model")
        ax.plot(sim_mpps, read, "o", color=colour, ms=5, mfc="none", label="simulator (100 ms)")
        ax.set_title(label, fontsize=9.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7.5, loc="upper right")
    for ax in axes[1]:
        ax.set_xlabel("offered load [Mpps]")
    for ax in axes[:, 0]:
        ax.set_ylabel("read by the application [Mpps]")
    axes[0, 0].set_xlim(0, 5.1)
    axes[0, 0].set_ylim(0, 1.0)
    fig.suptitle("A UDP reader on its NAPI's core (examples/udp-receiver.toml): who gets the core in overload", fontsize=10.5)
    fig.savefig(args.output, dpi=150)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
