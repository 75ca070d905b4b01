"""The report's Jinja environment: ``templates/`` (``report.<format>.j2`` and one template
per section in ``html/`` and ``md/``), autoescaping on in every format, and the filters the
templates format numbers and text with."""
from __future__ import annotations

import math
import os
import re

from markupsafe import Markup, escape

from drift_eval import inert
from drift_eval.reports import text

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _breakable(s) -> Markup:
    """Escaped text (control and format characters shown, ``_visible``) with a line-break
    opportunity after each ``_`` and ``/`` (long task and model names wrap instead of
    widening the page)."""
    return Markup(re.sub(r"([_/])", r"\1<wbr>", str(escape(_visible(s)))))


def _md(cell: bool = False):
    """Markdown filters for text from results files (``drift_eval.inert``), marked safe:
    autoescaping's entities would show literally inside a code span."""
    return lambda s: Markup(inert.markdown(s, cell=cell))


def _visible(value):
    """Every value a template writes: text (not markup the project built) with its control
    and format characters shown as visible escapes (``inert.terminal``), before
    autoescaping, so that a name or an answer cannot reorder or hide what the page shows,
    and the page always encodes."""
    return inert.terminal(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def pval(p) -> str:
    return "—" if not (isinstance(p, float) and math.isfinite(p)) else "< 0.0001" if p < 1e-4 else f"{p:.4f}"


def environment():
    import jinja2  # deferred, start-up: loads jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=_visible,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v, d=4: (f"{v:.{d}f}" if isinstance(v, (int, float)) and math.isfinite(v) else "—")
    env.filters["pval"] = pval
    env.filters["padj"] = lambda d: pval(d.p_adjusted) if d.adjusted else "—"
    env.filters["pct"] = lambda v: f"{v * 100:+.1f}%" if isinstance(v, float) and math.isfinite(v) else "—"
    env.filters["short"] = text.short
    env.filters["signed"] = text.signed
    env.filters["interval"] = text.interval
    env.filters["p"] = text.pvalue
    env.filters["pboth"] = text.p_both
    env.filters["estimate"] = lambda c: text.estimate(c["value"], c["lower"], c["upper"], c.get("percent", False))
    env.filters["delta"] = text.delta
    env.filters["breakable"] = _breakable
    # Markdown: names and text from results files as code spans (``md``, ``mdcell`` in a table
    # cell), prose the report writes around them as escaped text (``mdtext``); an image's
    # alt text with its brackets escaped (``mdalt``)
    env.filters["md"] = _md()
    env.filters["mdcell"] = _md(cell=True)
    env.filters["mdtext"] = lambda s: Markup(inert.markdown_text(s))
    env.filters["mdalt"] = lambda s: re.sub(r"([\[\]|\\])", r"\\\1", str(s)).replace("\n", " ")
    return env
