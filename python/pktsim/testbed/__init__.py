"""A real-kernel testbed: Linux forwarding between network namespaces, measured.

``pktsim testbed run`` builds generator -> device under test -> sink namespaces joined by
veth pairs (addresses from 198.18.0.0/15), offers bounded traffic from the compiled
``pktsim-tb`` generator, and measures rates, the dut's exact CPU time per frame, wake-ups,
polls, latency percentiles and foreign CPU load. ``pktsim testbed validate`` calibrates
the threaded-NAPI model from two loads and predicts the rest.
"""

from .errors import TestbedError

__all__ = ["TestbedError"]
