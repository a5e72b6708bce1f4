"""``pktsim tune``: the knobs to set for a target, with the files that apply them."""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..textio import json_text
from .common import _writable_dir


def cmd_tune(args) -> int:
    from ..scenario import Scenario
    from ..tune import knobs as knob_registry
    from ..tune import output

    if args.list_knobs:
        data = Scenario.load(args.file, args.set).data if args.file else {"app": {}, "nic": {"itr": {"profile": "mlx5-eqe"}}}
        print(knob_registry.describe(data))
        return 0
    if not args.file:
        raise UsageError("tune: give a scenario FILE")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a whole number of local processes, at least 1")
    sets = list(args.set)
    if args.from_observed:
        from ..observe import hostknobs

        observed, knobs = _observed(args.from_observed)
        if not args.load and not args.load_range:
            args.load = observed["traffic.rate"]
        # The observed configuration is the one to start from: the host's knobs (those the
        # scenario's I/O mode reads), then the observed frame size, then --set.
        sc, applied, left = hostknobs.apply(Scenario.load(args.file), knobs)
        sc = sc.with_sets([tuple(x.split("=", 1)) for x in [f"{k}={v}" for k, v in observed.items() if k == "traffic.size"] + sets])
        if applied:
            print(f"pktsim tune: starting from the observed knobs: {', '.join(f'{k}={v}' for k, v in applied)}", file=sys.stderr)
        for k, v, why in left:
            print(f"pktsim tune: observed {k}={v} not applied: {why}", file=sys.stderr)
    else:
        sc = Scenario.load(args.file, sets)
    drawer = None
    if args.output:
        _writable_dir("-o", args.output)
        drawer = output.Drawer()
    try:
        return _tune(args, sc, drawer)
    finally:
        if drawer is not None:
            drawer.close()


def _tune(args, sc, drawer) -> int:
    from ..tune import GoalError, KnobError, TuneError, output, tune

    spec = [k for item in (args.knobs or []) for k in _split_knobs(item)] or None
    bar = None
    progress = None
    if not args.json and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=args.budget, unit="cand", file=sys.stderr, leave=False)

        def show(done, total, label):
            bar.total = total
            bar.n = done
            bar.set_postfix_str(label, refresh=False)
            bar.refresh()

        progress = show
    elif not sys.stderr.isatty():
        # A log or CI: a line at each tenth of the candidates, and the time so far.
        import time

        start, said = time.monotonic(), [-1]

        def lines(done, total, label):
            tenth = 10 * done // max(total, 1)
            if tenth > said[0]:
                said[0] = tenth
                print(f"pktsim tune: {done} of {total} candidates ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)

        progress = lines

    try:
        t = tune(
            sc,
            load=args.load,
            load_range=args.load_range,
            loads=args.loads,
            minimize=args.minimize,
            maximize=args.maximize,
            subject_to=args.subject_to,
            knobs=spec,
            budget=args.budget,
            **({} if args.patience is None else {"patience": args.patience}),  # (else tune's own default)
            replications=args.replications,
            seed=args.seed,
            jobs=args.jobs,
            dask=args.dask,
            node=args.node,
            progress=progress,
        )
    except (GoalError, KnobError, TuneError) as e:
        raise UsageError(str(e)) from None
    finally:
        if bar is not None:
            bar.close()
    if args.output:
        try:
            written = output.write(t, sc, args.output, drawer)
        except OSError as e:
            raise UsageError(f"-o {args.output}: cannot write the tune's files ({e.strerror or e})") from None
    if args.json:
        print(json_text(t))
    else:
        print(output.text(t))
        if args.output:
            print("\nwrote " + ", ".join(str(p) for p in written))
    if not t["recommended"]:
        print(f"pktsim tune: no recommendation: {t.get('why_none', 'no candidate meets the constraints')}", file=sys.stderr)
        return 1
    return 0


def _split_knobs(item: str) -> list:
    """``--knobs a,b`` (commas between knobs; a key's value list ``k=v1,v2`` keeps its commas)."""
    out: list = []
    for part in item.split(","):
        part = part.strip()
        if not part:
            continue
        if out and "=" in out[-1] and "=" not in part and not _looks_like_knob(part):
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def _looks_like_knob(text: str) -> bool:
    return "." in text and text.split(".")[0] in ("nic", "host", "socket", "cpu", "app", "traffic")


def _observed(path: str) -> tuple[dict, dict]:
    """What ``pktsim observe -o`` saw, as ``--set`` values (``traffic.rate``, ``traffic.size``),
    and the knobs of its first interface."""
    from ..observe import ObserveError, load

    try:
        op, row = load(path)
    except ObserveError as e:
        raise UsageError(f"--from-observed {e}") from None
    if not op.get("offered_pps", 0) > 0:
        raise UsageError(f"--from-observed {path}: no traffic in its window (offered 0 pps); expected an observation of a loaded host")
    return row, next(iter((op.get("knobs") or {}).values()), {})
