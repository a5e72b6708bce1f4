"""The load an imported host is offered first: light, a share of what the model says the
host forwards without loss with the costs the import wrote (``pktsim import-host``)."""

from __future__ import annotations

from . import hostimport
from .model import predict
from .scenario import Scenario

# The share of the model's loss-free capacity an imported host is offered at first.
LIGHT_LOAD = 0.3


def light_load(host, source: str, text: str) -> tuple[str, str]:
    """The imported scenario offered LIGHT_LOAD of the loss-free capacity the model gives
    it (at most the line rate), and a line that says so and names the default costs; the
    text as it is when the model gives no capacity."""
    sc = Scenario.from_toml(text, origin=f"<import-host from {source}>")
    p = predict(sc)
    cap = p.get("capacity_pps")
    defaults, section = [], ""
    for ln in text.splitlines():
        if ln.startswith("["):
            section = ln.strip("[] ")
        elif "# the default" in ln or "# guessed" in ln or (section == "cost" and ln.startswith("profile")):
            defaults.append(f"{section}.{ln.split('=', 1)[0].strip()}")
    named = f"; not this host's but a published machine's or guessed (calibrate them: pktsim calibrate, pktsim fit): {', '.join(defaults)}" if defaults else ""
    if not cap or cap != cap or cap == float("inf"):
        return text, f"traffic.rate = 10% of the line rate (the model gives no capacity for this host){named}"
    line = 10 * p["offered_pps"]  # the placeholder offers 10% of the line rate
    rate = min(LIGHT_LOAD * cap, line)
    shown = f"{rate / 1e6:.3g}Mpps" if rate >= 1e6 else f"{rate / 1e3:.3g}kpps"
    why = f"a light load: {100 * LIGHT_LOAD:.0f}% of the loss-free capacity the model gives this host ({cap / 1e6:.3g} Mpps, from the costs below); sweep it"
    out = hostimport.to_toml(host, source, hostimport.Value(f'"{shown}"', why))
    return out, f"traffic.rate = {shown}: {why}{named}"
