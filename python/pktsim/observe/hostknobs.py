"""The knobs an observed host runs with, in scenario keys: what ``pktsim import-host`` reads
of the interface (``ethtool -g`` rings, ``ethtool -c`` coalescing, the NAPI sysfs files,
``net.core`` sysctls, the kernel's release), read-only, each with where it came from.
``pktsim observe --model`` runs the scenario with them."""

from __future__ import annotations

from collections.abc import Sequence

# The keys that are the host's settings (what an operator sets with ethtool, sysfs and
# sysctl), as opposed to what describes the machine (cores, clock, idle states, link):
# the scenario keeps those.
KNOBS = (
    "nic.rx_ring",
    "nic.tx_ring",
    "nic.itr.mode",
    "nic.itr.interval",
    "nic.itr.profile",
    "nic.napi.threaded",
    "nic.napi.defer_hard_irqs",
    "nic.napi.gro_flush_timeout",
    "host.budget",
    "host.budget_time",
    "host.softirq",
)


# What import-host reads for them (the driver first: coalescing means different things per driver).
FILES = ("ethtool-i.txt", "ethtool-g.txt", "ethtool-c.txt", "sysctl.txt", "napi.txt")


def of_host(host) -> dict[str, dict[str, str]]:
    """The knobs of an imported host (:class:`pktsim.hostimport.Host`): key -> value (as
    ``--set`` takes it) and source."""
    out = {}
    for key in KNOBS:
        section, _, name = key.rpartition(".")
        v = host.sections.get(section, {}).get(name)
        if v is not None:
            out[key] = {"value": v.toml, "source": v.source}
    return out


def read(ifaces: Sequence[str]) -> dict[str, dict[str, dict[str, str]]]:
    """Each interface's knobs on this machine (tools that are missing give none)."""
    from ..hostimport import from_live

    return {i: of_host(from_live(i, files=FILES)) for i in ifaces}


def apply(scenario, knobs: dict[str, dict[str, str]]):
    """``scenario`` with the knobs it takes, a section's together (``nic.itr``'s mode and
    interval go as one; one the scenario's I/O mode does not read, or refuses, is left out):
    (the scenario, [(key, value)] applied, [(key, value, why)] left out)."""
    from ..errors import ScenarioError

    applied: list[tuple[str, str]] = []
    left: list[tuple[str, str, str]] = []
    sections: dict[str, list[tuple[str, str]]] = {}
    for key, k in knobs.items():
        sections.setdefault(key.rpartition(".")[0], []).append((key, k["value"]))
    for group in sections.values():
        try:
            scenario = scenario.with_sets(group)
        except ScenarioError as e:
            left += [(key, value, str(e).rsplit(": ", 1)[-1]) for key, value in group]
            continue
        applied += group
    return scenario, applied, left
