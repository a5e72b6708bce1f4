"""``pktsim reproduce all --report DIR``: one HTML page with, per paper, the scenario, the
predicted vs reported numbers with their errors, and the plots that correspond to the
paper's figures (PNG files beside the page, drawn by each paper's ``figures``: the papers,
their scenarios and figures are those of :data:`pktsim.reproduce.PAPERS`)."""

from __future__ import annotations

import html
from pathlib import Path

from . import __version__
from .reproduce.rows import html_table, summary, summary_text
from .textio import atomic_write

STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 3px 6px; text-align: left; }
tr.fitted td, tr.derived td { color: #777; }
tr.bad td { background: #fde2e2; }
p.summary { font-size: 13px; }
img { max-width: 520px; margin: 4px; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 8px; font-size: 12px; max-height: 300px; overflow: auto; }
"""

# Marks the page once every figure has loaded (read back by the report test in a browser).
CHECK = """
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-ok', ok);
});
</script>
"""


# The libraries whose versions a report names (what draws and computes its numbers).
LIBRARIES = ("numpy", "pandas", "matplotlib", "scipy", "pyarrow")


def provenance(command: str | None = None) -> dict:
    """What made a report: when (UTC), pktsim's version and git commit (when it runs from a
    checkout), the command, the host, Python's and the libraries' versions."""
    import datetime
    import os
    import platform
    import shlex
    import subprocess
    import sys
    from importlib import metadata

    commit = ""
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "-C", str(here), "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True, text=True, timeout=5)
        commit = out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        pass
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), "")
    except OSError:
        pass
    libs = {}
    for name in LIBRARIES:
        try:
            libs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libs[name] = "not installed"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "pktsim": __version__,
        "commit": commit or "not a git checkout",
        "command": command or "pktsim " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "host": f"{platform.node()}: {platform.system()} {platform.release()}, {cpu or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "libraries": libs,
    }


def provenance_html(p: dict) -> str:
    rows = [("made", p["date"]), ("pktsim", f"{p['pktsim']} ({p['commit']})"), ("command", p["command"]), ("host", p["host"])]
    rows.append(("Python", f"{p['python']}; " + ", ".join(f"{k} {v}" for k, v in p["libraries"].items())))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(v)}</code></td></tr>" for k, v in rows)
    return f"<table class='provenance' id='provenance'>{body}</table>"


def build(directory: str | Path, papers: list[str], results: list[dict] | None = None, command: str | None = None, drawn: dict | None = None) -> Path:
    """Write ``directory/index.html`` for `papers` (`results`: their reproductions, when the
    caller has them already; ``command``: the command line that made it, default this
    process's; ``drawn``: per paper, its figures already drawn elsewhere, as
    ``(directory, [(file name, caption), ...])``, moved here) and return its path."""
    import shutil

    from .reproduce import PAPERS, reproduce

    d = Path(directory)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>pktsim reproductions</title><style>{STYLE}</style>{CHECK}</head><body>"]
    parts.append(f"<h1>pktsim {html.escape(__version__)}: the seed papers, reproduced</h1>")
    parts.append(
        "<p>Each section: the scenario, every number the paper reports next to pktsim's prediction with the relative error "
        "and the row's kind: <em>predicted</em> (from inputs that did not use the row, a value that could have come out "
        "otherwise; <code>fitted_on</code> names the fitted rows it comes from), <em>fitted</em> (a calibration point or a "
        "row its own fit closes: its error says how well the fit closes), <em>derived</em> (true by construction: the "
        "paper's own arithmetic, a value of pktsim's inputs, never shown as reported, or one that could not have come out "
        "otherwise, such as a line rate or k times a fitted rate, beside the paper's figure) or <em>relation</em> (a claim "
        "that holds or not); then the summary of the predicted rows and the plots that correspond to the paper's figures.</p>"
    )
    parts.append(provenance_html(provenance(command)))
    if results is None:
        results = [reproduce(paper) for paper in papers]
    # Made once there is something to write: an interrupted run leaves no empty directory.
    d.mkdir(parents=True, exist_ok=True)
    everything = [r for res in results for r in res["rows"]]
    # The summary first, then a table of contents.
    label = "summary (all papers)" if len(papers) > 1 else "summary"
    parts.append(f"<p class='summary' id='summary'><strong>{html.escape(summary_text(summary(everything), label)).replace(chr(10), '<br>')}</strong></p>")
    toc = "".join(
        f"<li><a href='#p{res['paper']}'>{res['paper']}: {html.escape(PAPERS[res['paper']].title)}</a> — "
        f"{html.escape(summary_text(res['summary'], '').splitlines()[0].lstrip(': '))}</li>"
        for res in results
    )
    parts.append(f"<nav><ul>{toc}</ul></nav>")
    for paper, res in zip(papers, results):
        parts.append(f"<h2 id='p{paper}'>{paper}: {html.escape(PAPERS[paper].title)}</h2>")
        name, text = PAPERS[paper].scenario_text(res)
        if text:
            parts.append(f"<details><summary>scenario ({html.escape(name)})</summary><pre>{html.escape(text)}</pre></details>")
        parts.append(html_table(res["rows"]))
        parts.append(f"<p class='summary'>{html.escape(summary_text(res['summary'], 'summary')).replace(chr(10), '<br>')}</p>")
        if drawn and paper in drawn:
            where, figs = drawn[paper]
            for fname, _ in figs:
                shutil.move(str(Path(where) / fname), str(d / fname))
        else:
            figs = PAPERS[paper].figures(d, res)
        for fname, caption in figs:
            parts.append(
                f"<figure style='display:inline-block'><a href='{fname}' title='full size'><img src='{fname}' alt='{html.escape(caption)}'></a>"
                f"<figcaption>{html.escape(caption)} (<a href='{fname}'>full size</a>)</figcaption></figure>"
            )
    parts.append("</body></html>")
    index = d / "index.html"
    atomic_write(index, "\n".join(parts))
    return index
