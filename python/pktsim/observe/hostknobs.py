"""The knobs an observed host runs with, in scenario keys: what ``pktsim import-host`` reads
of the interface (``ethtool -g`` rings, ``-l`` queues, ``-c`` coalescing, the NAPI sysfs
files, ``net.core`` sysctls, the kernel's release, the cpuidle states and governor),
read-only, each with where it came from.
``pktsim observe --model`` runs the scenario with them."""

from __future__ import annotations

from collections.abc import Sequence

# What import-host reads for them: the host's settings (what an operator sets with ethtool,
# sysfs and sysctl: rings, queues, coalescing, NAPI threads and deferral, budgets, the idle
# governor and states, and the kernel's softirq rule), not what describes the machine
# (clock, caches, link), which the scenario keeps. The driver first: coalescing means
# different things per driver.
FILES = ("ethtool-i.txt", "ethtool-g.txt", "ethtool-l.txt", "ethtool-c.txt", "sysctl.txt", "napi.txt", "cpuidle.txt")


def of_host(host) -> dict[str, dict[str, str]]:
    """The knobs of an imported host (:class:`pktsim.hostimport.Host`): every key it read,
    key -> value (as ``--set`` takes it) and source."""
    return {f"{section}.{name}": {"value": v.toml, "source": v.source} for section, values in host.sections.items() for name, v in values.items()}


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
