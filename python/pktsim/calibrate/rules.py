"""The rules that sort a sample into one of 000's groups: ordered, user-editable, read from a
TOML file (the bundled ``linux-forwarding.toml`` by default); a sample belongs to the
group of its innermost frame that a rule counts for, following the packet through
shared entry points and helpers (:meth:`Rules.classify`)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from ..model import GROUPS
from ..textio import InputFileError, read_input_bytes
from ..tomlread import tomllib
from .profiles import ProfileError, _error, decode_utf8

RULES_DIR = Path(__file__).resolve().parent


BUNDLED_RULES = RULES_DIR / "linux-forwarding.toml"


GROUP_NAMES = (*GROUPS, "idle")


PACKET_GROUPS = tuple(g for g in GROUPS if g != "other")


ROLES = ("packet", "entry", "helper")


PATTERN_KEYS = ("exact", "prefix", "glob", "regex")


@dataclass
class Rule:
    """Function-name patterns of one group.

    ``role`` says where a match counts:

    - ``packet`` (the default): the function is work of ``group`` wherever it appears.
    - ``entry``: a shared kernel entry point (softirq, ksoftirqd, interrupt entry and exit,
      syscall entry, scheduler, kworker loops). It never makes a sample packet work by
      itself: a sample under it counts for a packet group only through a packet frame
      below it (``net_rx_action`` -> driver poll -> ``__netif_receive_skb`` ...); other
      work under it (RCU callbacks, timers, tasklets, an idle ksoftirqd) is C_other, and
      is reported as work outside the packet path, not as unmatched.
    - ``helper``: a function shared with the rest of the kernel (the slab and page
      allocators, ...). It counts for ``group`` only when a packet frame calls it (with
      no entry point in between), or when the sample has no call stack (perf report);
      elsewhere the search goes on to its callers.
    """

    group: str
    exact: frozenset = frozenset()
    prefix: tuple = ()
    glob: tuple = ()
    regex: tuple = ()
    role: str = "packet"

    def matches(self, name: str) -> bool:
        return (
            name in self.exact
            or any(name.startswith(x) for x in self.prefix)
            or any(fnmatch.fnmatchcase(name, g) for g in self.glob)
            or any(r.search(name) for r in self.regex)
        )

    @property
    def is_packet_frame(self) -> bool:
        return self.role == "packet" and self.group in PACKET_GROUPS


def _rule_error(origin: str, key: str, value, expected: str) -> ProfileError:
    shown = _toml_value(value)
    e = _error(origin, None, f"{key} = {shown}: expected {expected}")
    e.path, e.value, e.expected = key, shown, expected
    return e


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v[:4]) + (", ..." if len(v) > 4 else "") + "]"
    if isinstance(v, dict):
        return "{...} (a table)"
    return str(v)


def _names(origin: str, key: str, value) -> tuple:
    """A pattern list: a TOML array of strings (a lone string would match letter by letter)."""
    if not isinstance(value, list):
        hint = f" (write {key.rsplit('.', 1)[1]} = [{_toml_value(value)}])" if isinstance(value, str) else ""
        raise _rule_error(origin, key, value, f"an array of function-name strings{hint}")
    for i, x in enumerate(value):
        if not isinstance(x, str) or not x:
            raise _rule_error(origin, f"{key}[{i}]", x, "a function name or pattern as a non-empty string")
    return tuple(value)


class Rules:
    """Ordered rules: a function's rule is the first one matching its name."""

    def __init__(self, rules: list[Rule], origin: str):
        self.rules = rules
        self.origin = origin
        self._cache: dict[str, Rule | None] = {}

    @classmethod
    def load(cls, path: str | Path | None = None) -> Rules:
        path = Path(path) if path else BUNDLED_RULES
        origin = str(path)
        try:
            data = tomllib.loads(decode_utf8(read_input_bytes(path, "rules file"), origin, "a rules file"))
        except InputFileError as e:
            raise _error(origin, None, f"a readable rules file ({str(e).split(': ', 1)[-1]})") from None
        except tomllib.TOMLDecodeError as e:
            raise _error(origin, getattr(e, "lineno", None), f"valid TOML ({e})") from None
        unknown = set(data) - {"rule"}
        if unknown:
            raise _error(origin, None, "only [[rule]] tables", ", ".join(sorted(unknown)))
        if not isinstance(data.get("rule", []), list):
            raise _rule_error(origin, "rule", data["rule"], "an array of tables, written [[rule]]")
        rules = []
        for i, r in enumerate(data.get("rule", [])):
            key = f"rule[{i}]"
            if not isinstance(r, dict):
                raise _rule_error(origin, key, r, "a table, written [[rule]]")
            allowed = ("group", "role", *PATTERN_KEYS)
            extra = set(r) - set(allowed)
            if extra:
                raise _error(origin, None, f"keys {', '.join(allowed)}", f"{key}.{sorted(extra)[0]}")
            role = r.get("role", "packet")
            if role not in ROLES:
                raise _rule_error(origin, f"{key}.role", role, f"one of {', '.join(ROLES)}")
            if role == "entry":
                # An entry point has no group of its own: its samples go to the packet frame below it.
                group = r.get("group", "other")
                if group != "other":
                    raise _rule_error(
                        origin,
                        f"{key}.group",
                        group,
                        'no group (or "other") for role = "entry": its samples count for the group of the '
                        "packet frame below it, or for C_other when there is none",
                    )
            else:
                if "group" not in r:
                    raise _error(origin, None, f'{key}.group: a group for every rule but role = "entry" (one of {", ".join(GROUP_NAMES)})')
                group = r["group"]
                if not isinstance(group, str) or group not in GROUP_NAMES:
                    raise _rule_error(origin, f"{key}.group", group, f"one of {', '.join(GROUP_NAMES)}")
            pats = {k: _names(origin, f"{key}.{k}", r[k]) for k in PATTERN_KEYS if k in r}
            regex = []
            for j, x in enumerate(pats.get("regex", ())):
                try:
                    regex.append(re.compile(x))
                except re.error as e:
                    raise _rule_error(origin, f"{key}.regex[{j}]", x, f"a valid regular expression ({e})") from None
            rules.append(Rule(group, frozenset(pats.get("exact", ())), pats.get("prefix", ()), pats.get("glob", ()), tuple(regex), role))
        if not rules:
            raise _error(origin, None, "at least one [[rule]]")
        return cls(rules, origin)

    def rule_of(self, name: str) -> Rule | None:
        if name not in self._cache:
            self._cache[name] = next((r for r in self.rules if r.matches(name)), None)
        return self._cache[name]

    def group_of(self, name: str) -> str | None:
        """The group of the first rule matching ``name`` (entry points: "other"), ignoring the stack."""
        r = self.rule_of(name)
        return None if r is None else r.group

    def classify(self, stack: tuple) -> tuple[str | None, str, str]:
        """(group or None, how, function) for one stack, root first.

        The innermost frame (closest to the leaf) that counts decides: a packet rule always
        counts; a helper counts when a packet frame calls it with no entry point in between;
        an entry point ends the search, and the sample is C_other (work outside the packet
        path). ``how`` is "rule", "entry" or "unmatched"; ``function`` is the leaf, or for
        "entry" the frame the entry point called (what the work was: rcu_core,
        run_timer_softirq, ...), or the entry point itself when it is the leaf.
        """
        rules = [self.rule_of(f) for f in stack]
        # packet_ctx[i]: a packet frame lies above frame i (towards the root) with no entry point in between.
        packet_ctx, inside = [], False
        for r in rules:
            packet_ctx.append(inside)
            if r is not None:
                if r.role == "entry":
                    inside = False
                elif r.is_packet_frame:
                    inside = True
        for i in range(len(stack) - 1, -1, -1):
            r = rules[i]
            if r is None:
                continue
            if r.role == "helper":
                if packet_ctx[i] or len(stack) == 1:  # a sample without a call stack: nothing to judge by
                    return r.group, "rule", stack[-1]
                continue
            if r.role == "entry":
                return "other", "entry", stack[i + 1] if i + 1 < len(stack) else stack[i]
            return r.group, "rule", stack[-1]
        return None, "unmatched", stack[-1]

    def attribute(self, stack: tuple) -> tuple[str | None, str]:
        """(group of the frame that decides, or None when no rule matched; the leaf function)."""
        g, how, _ = self.classify(stack)
        return (None if how == "unmatched" else g), stack[-1]
