"""Writing a report file: its format from the name (or ``--format``), the results read
through the one loader, a Markdown report's plots as SVG files in ``<name>-plots/`` beside
it (stale ones removed), every file written atomically."""
from __future__ import annotations

import os

from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError
from drift_eval.files import write_text_atomic
from drift_eval.reports.formats import FORMATS, render_text


def report_format(path: str, fmt: str | None = None) -> str:
    fmt = fmt or FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise DriftUsageError(f"cannot tell the report format from '{path}': end it in .html, .md, .json or .csv, "
                              f"or pass --format")
    return fmt


def write(results, path: str, fmt: str | None = None, allow_partial: bool = False, policy: str | None = None,
          baseline: str | None = None) -> str:
    from drift_eval.reports.context import build_context  # deferred, start-up: loads numpy

    fmt = report_format(path, fmt)
    roots = [results] if isinstance(results, (str, os.PathLike)) else list(results)
    output = load_output(*roots, allow_partial=allow_partial)
    ctx = build_context(output, policy, baseline)
    plot_dir = os.path.splitext(os.path.basename(path))[0] + "-plots"
    text = render_text(ctx, fmt, plot_dir)
    if fmt == "md":
        folder = os.path.join(os.path.dirname(os.path.abspath(path)), plot_dir)
        written = {write_text_atomic(os.path.join(folder, f"{p['slug']}.svg"), str(p["svg"])) for p in ctx["plots"]}
        for stale in (os.listdir(folder) if os.path.isdir(folder) else []):
            if stale.endswith(".svg") and os.path.join(folder, stale) not in written:
                os.remove(os.path.join(folder, stale))
    return write_text_atomic(path, text)
