"""The report's context as text, per format: ``html`` and ``md`` through the templates
(``drift_eval.reports.templating``), ``json`` and ``csv`` as the records of every number
the page shows (section, model, setting, task, metric, statistic, value)."""
from __future__ import annotations
import csv
import io

from drift_eval import inert
from drift_eval.reports.templating import environment

FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json", ".csv": "csv"}
TEMPLATE = {"html": "report.html.j2", "md": "report.md.j2"}


def render_text(ctx: dict, fmt: str, plot_dir: str | None = None) -> str:
    """For Markdown, ``plot_dir`` is the folder (relative to the report) its SVG files are
    linked from."""
    if fmt == "json":
        keep = {k: ctx[k] for k in ("root", "generated", "runs", "models", "gate", "records")}
        return inert.json_text(keep, indent=2, ensure_ascii=False, default=str)
    if fmt == "csv":
        buf = io.StringIO()
        fields = list(dict.fromkeys(k for r in ctx["records"] for k in r))
        writer = csv.DictWriter(buf, fieldnames=[inert.csv_cell(f) for f in fields])
        writer.writeheader()
        writer.writerows([{inert.csv_cell(k): inert.csv_cell(v) for k, v in r.items()} for r in ctx["records"]])
        return buf.getvalue()

    for p in ctx["plots"]:
        p["file"] = f"{plot_dir or 'plots'}/{p['slug']}.svg"
    return environment().get_template(TEMPLATE[fmt]).render(**ctx)
