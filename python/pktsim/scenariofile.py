"""A scenario written back as a file: the user's own file, with some keys given new values
(what ``pktsim tune`` recommends, what ``pktsim fit`` fitted), checked by reading it back."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from . import _core, schema_info
from .parse import read_scenario_file
from .scenario import Scenario
from .tomlread import tomllib
from .tune.knobs import get_path


def scenario_file(scenario: Scenario, keys: Sequence[str], sets: Sequence[tuple[str, str]], result: Scenario, header: Sequence[str], path: Path) -> str:
    """TOML text of ``scenario``'s own file (its tables and keys as written) with ``keys``
    removed in every spelling the format accepts (the Linux names too), the scenario's
    ``--set`` overrides of other keys and ``sets`` written as ``result`` resolves them, and
    ``header`` (comment lines) on top. A relative cost-profile path is rewritten for the
    file's directory. Read back, the text must resolve to ``result``: RuntimeError if not."""
    import tomli_w

    if scenario.format == "toml":
        src = read_scenario_file(scenario.origin)[0] if Path(scenario.origin).is_file() else scenario.text
        doc = tomllib.loads(src)
    else:
        doc = json.loads(scenario.text)
    for key in keys:
        for spelling in (key, *schema_info.aliases(key)):
            *parts, last = spelling.split(".")
            parent = get_path(doc, ".".join(parts)) if parts else doc
            if isinstance(parent, dict):
                parent.pop(last, None)
    overrides = [(k, v) for k, v in scenario.sets if k not in keys] + list(sets)
    for key, _ in overrides:
        value = get_path(result.data, key)
        if value is None:
            continue
        *parts, last = key.split(".")
        node = doc
        for p in parts:
            node = node.setdefault(p, {})
        node[last] = value
        for other in schema_info.aliases(key):
            parent = get_path(doc, other.rsplit(".", 1)[0])
            if isinstance(parent, dict):
                parent.pop(other.rsplit(".", 1)[1], None)
    out_dir = Path(path).parent
    prof = get_path(doc, "cost.profile")
    if isinstance(prof, str) and prof not in _core.bundled_profiles() and not Path(prof).is_absolute():
        doc["cost"]["profile"] = os.path.relpath(Path(scenario.base_dir, prof).resolve(), out_dir.resolve())
    text = "\n".join(header) + "\n\n" + tomli_w.dumps(doc)
    back = Scenario.from_toml(text, origin=str(path), base_dir=out_dir)
    if json.dumps(back.data, sort_keys=True) != json.dumps(result.data, sort_keys=True):
        raise RuntimeError(f"{path} does not read back as the scenario it should be")
    return text
