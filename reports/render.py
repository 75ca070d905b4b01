"""``drift-eval report DIR -o report.html`` (or ``.md``, ``--format json|csv``): the entry
points. The report is built in rooms of its own:

* ``state.py``: what the sections share (``Report``: results, catalogue, comparisons,
  plots, records);
* ``sections/``: one module per section kind or task family, ``SECTIONS`` in page order;
* ``context.py``: the sections built into one context;
* ``templating.py`` and ``templates/``: the Jinja environment (autoescaping on in every
  format) and the HTML and Markdown templates;
* ``formats.py``: the context as HTML, Markdown, JSON or CSV;
* ``writing.py``: the report file (and a Markdown report's plot files beside it);
* ``svg.py`` (plots) and ``text.py`` (how numbers are written).

Metric names, directions and roles come from the runs' recorded task definitions
(``Output.catalogue``); no section names a task.
"""
from __future__ import annotations

from drift_eval.reports.context import build_context
from drift_eval.reports.formats import FORMATS, render_text
from drift_eval.reports.writing import write

__all__ = ["FORMATS", "build_context", "render", "write_report"]


def render(output, fmt: str = "html", policy: str | None = None, baseline: str | None = None,
           plot_dir: str | None = None) -> str:
    """The report as text: ``fmt`` is ``html``, ``md``, ``json`` or ``csv``. For Markdown,
    ``plot_dir`` is the folder name (relative to the report) its SVG files are linked from."""
    return render_text(build_context(output, policy, baseline), fmt, plot_dir)


def write_report(results, path: str, fmt: str | None = None, allow_partial: bool = False,
                 policy: str | None = None, baseline: str | None = None) -> str:
    """Write the report of one results folder or a list of them (a Markdown report's plots
    go to ``<name>-plots/`` beside it); returns the path written."""
    return write(results, path, fmt, allow_partial, policy, baseline)
