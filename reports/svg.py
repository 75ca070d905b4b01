"""SVG plots for the comparison report: line plots with interval bands, and audit strips
(one coloured cell per answer segment, its language and probability in a ``<title>``
tooltip). No scripts, no external assets; every text that goes into the SVG (titles, axis
and series names, languages) is escaped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup
from markupsafe import escape as _markup_escape

from drift_eval import inert


def escape(text) -> Markup:
    """Text from results files (names, labels, languages) as SVG text: control and format
    characters shown as visible escapes on one line (``inert.terminal``), then escaped."""
    return _markup_escape(inert.terminal(str(text), one_line=True))


PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def _ticks(lo: float, hi: float, n: int = 5) -> list:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step - 1e-9) * step
    out, v = [], start
    while v <= hi + 1e-9 * step:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _fit(text: str, width: float, char_px: float = 7.5) -> str:
    """A bold 13 px title longer than ``width``: squeezed to fit (``textLength``), never cut."""
    return (f' textLength="{width:.0f}" lengthAdjust="spacingAndGlyphs"' if len(text) * char_px > width else "")


LEGEND_CHAR_PX = 7
LEGEND_MIN_PX = 150  # the legend column of a default-width plot


@dataclass(frozen=True)
class Style:
    """How a ``line_plot`` looks: its size in pixels, point markers, colours by series name,
    fixed axes, the legend's place and least width (see ``line_plot``)."""
    width: int = 600
    height: int = 300
    markers: bool = True
    colours: dict | None = None
    x_range: tuple | None = None
    y_range: tuple | None = None
    legend_px: int = LEGEND_MIN_PX
    legend: str = "right"


def line_plot(series: dict, title: str, x_label: str, y_label: str, bands: dict | None = None,
              style: Style = Style()) -> Markup:
    """``series``: name -> list of (x, y). Points with a non-finite y are skipped.
    ``bands``: name -> list of (x, low, high), drawn as a shaded area behind that series
    (points without a finite interval are left out). ``style``: ``colours``: name -> colour (else the
    palette in series order), so that small multiples give one setting one colour in every
    panel; ``x_range`` / ``y_range``: fixed axes (shared by the panels); ``legend_px``: the
    legend column's least width (narrower for panels); ``legend="below"``: the legend under
    the plot, one line a series, the picture as wide as asked (for long names). Bands are
    15% opaque, fainter when more than three overlap."""
    width, height, markers, colours = style.width, style.height, style.markers, style.colours
    x_range, y_range, legend_px, legend = style.x_range, style.y_range, style.legend_px, style.legend
    pts = {name: [(float(x), float(y)) for x, y in xy if y is not None and math.isfinite(float(y))]
           for name, xy in series.items()}
    pts = {k: v for k, v in pts.items() if v}
    # the legend sits right of the plot; its column is as wide as the longest name needs
    # (about 7 px a character at 12 px), and the picture grows by what it adds
    left, top, bottom = 58, 30, 44
    if legend == "below":
        pw, ph = width - left - 16, height - top - bottom
        height += 18 * len(pts) + 4
    else:
        right = max(legend_px, 40 + LEGEND_CHAR_PX * max((len(n) for n in pts), default=0))
        pw, ph = width - left - legend_px, height - top - bottom
        width = left + pw + right
    opacity = 0.15 if len(pts) <= 3 else round(0.45 / len(pts), 3)
    xs = [x for v in pts.values() for x, _ in v] or [0.0, 1.0]
    ys = [y for v in pts.values() for _, y in v] or [0.0, 1.0]
    x0, x1 = x_range if x_range else (min(xs), max(xs))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = y_range if y_range else (min(ys), max(ys))
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def sx(x):
        return left + (x - x0) / (x1 - x0) * pw

    def sy(y):
        return top + (1 - (y - y0) / (y1 - y0)) * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" class="plot">',
             f'<title>{escape(title)}</title>',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fff" stroke="#999"/>',
             f'<text x="{(width / 2 if _fit(title, width - 8) else left + pw / 2):.1f}" y="18" text-anchor="middle" '
             f'font-size="13" font-weight="bold"{_fit(title, width - 8)}>{escape(title)}</text>']
    for t in _ticks(y0, y1):
        y = sy(t)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>')
    xt = sorted(set(xs)) if not x_range else [float(x) for x in range(math.ceil(x0), math.floor(x1) + 1)]
    if len(xt) > 12 or any(x != int(x) for x in xt):
        xt = _ticks(x0, x1, 6)
    for t in xt:
        x = sx(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#999"/>'
                     f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle" font-size="11">{_fmt(t)}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + bottom - 8}" text-anchor="middle" font-size="12">'
                 f'{escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" font-size="12" '
                 f'transform="rotate(-90 14 {top + ph / 2:.1f})">{escape(y_label)}</text>')
    for i, (name, xy) in enumerate(pts.items()):
        color = (colours or {}).get(name) or PALETTE[i % len(PALETTE)]
        band = [(float(x), float(lo), float(hi)) for x, lo, hi in (bands or {}).get(name, [])
                if lo is not None and hi is not None and math.isfinite(float(lo)) and math.isfinite(float(hi))]
        if len(band) > 1:
            outline = [(x, hi) for x, _, hi in band] + [(x, lo) for x, lo, _ in reversed(band)]
            parts.append(f'<polygon fill="{color}" fill-opacity="{opacity}" stroke="none" class="band" '
                         f'points="{" ".join(f"{sx(x):.1f},{sy(min(max(y, y0), y1)):.1f}" for x, y in outline)}">'
                         f'<title>{escape(name)}: 95% interval</title></polygon>')
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in xy)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        if markers and len(xy) <= 40:
            parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>' for x, y in xy]
        lx, ly = (left, top + ph + bottom + 14 + 18 * i) if legend == "below" else (left + pw + 10, top + 14 + 18 * i)
        parts.append(f'<line x1="{lx}" x2="{lx + 18}" y1="{ly - 4}" y2="{ly - 4}" '
                     f'stroke="{color}" stroke-width="3"/>'
                     f'<text x="{lx + 22}" y="{ly}" font-size="12">{escape(name)}</text>')
    if not pts:
        parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" text-anchor="middle" '
                     f'font-size="12">no data</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


TARGET_COLOUR = "#2ca02c"
#: English, and what a segment is when it is written in no language (``langid.STATUSES``):
#: a loop or made-up words, unreadable, code; ``unknown`` is the older tasks' word for both
LANGUAGE_COLOURS = {"en": "#d62728", "unknown": "#d9d9d9", "degenerate": "#9467bd", "unreadable": "#d9d9d9",
                    "code": "#aec7e8"}
OTHER_LANGUAGE = "#ff7f0e"
CELL, GAP = 14, 2


def _cells(cells: list, y: int = 0, x0: int = 0, target: str = "fr") -> list:
    """Green: the target language; red: English; orange: any other; purple: a loop or
    made-up words; grey: unreadable (unknown); light blue: code."""
    parts = []
    for k, (lang, prob) in enumerate(cells):
        colour = TARGET_COLOUR if lang == target else LANGUAGE_COLOURS.get(lang, OTHER_LANGUAGE)
        p = "" if not isinstance(prob, (int, float)) else f", fastText probability {float(prob):.2f}"
        parts.append(f'<rect x="{x0 + k * (CELL + GAP)}" y="{y}" width="{CELL}" height="{CELL}" fill="{colour}">'
                     f'<title>segment {k + 1}: {escape(str(lang))}{p}</title></rect>')
    return parts


def strip(cells: list, target: str = "fr") -> Markup:
    """One answer's segments: ``cells`` is a list of (language, probability or None)."""
    width = max(1, len(cells)) * (CELL + GAP)
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{CELL}" '
                  f'viewBox="0 0 {width} {CELL}" role="img" class="strip">' + "".join(_cells(cells, target=target))
                  + "</svg>")


def strips(rows: list, title: str, target: str = "fr") -> Markup:
    """Several answers' strips in one SVG: ``rows`` is a list of (label, cells)."""
    label_w, top = 70, 24
    width = label_w + max([len(c) for _, c in rows] or [1]) * (CELL + GAP) + 10
    height = top + len(rows) * (CELL + GAP) + 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" class="plot">',
             f'<title>{escape(title)}</title>',
             f'<text x="0" y="14" font-size="12" font-weight="bold">{escape(title)}</text>']
    for i, (label, cells) in enumerate(rows):
        y = top + i * (CELL + GAP)
        parts.append(f'<text x="0" y="{y + CELL - 3}" font-size="11">{escape(str(label))}</text>')
        parts += _cells(cells, y, label_w, target)
    parts.append("</svg>")
    return Markup("".join(parts))


def heat_map(rows: list, columns: list, values: list, title: str, lower: float = 0.0, upper: float = 1.0) -> Markup:
    """A grid of ``values[i][j]`` (row label ``rows[i]``, column label ``columns[j]``), each
    cell shaded from white (``lower``) to dark green (``upper``) with its value written in
    it; a missing value is a grey cell with a dash."""
    cw, ch, label_w, top = 96, 22, 150, 40
    width = label_w + max(1, len(columns)) * cw + 10
    height = top + len(rows) * ch + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" class="plot">',
             f'<title>{escape(title)}</title>',
             f'<text x="0" y="14" font-size="12" font-weight="bold"{_fit(title, width)}>{escape(title)}</text>']
    for j, col in enumerate(columns):
        parts.append(f'<text x="{label_w + j * cw + cw / 2:.1f}" y="{top - 6}" font-size="10" text-anchor="middle"'
                     f'{_fit(str(col), cw - 4, 5.5)}>{escape(str(col))}</text>')
    span = (upper - lower) or 1.0
    for i, row in enumerate(rows):
        y = top + i * ch
        parts.append(f'<text x="0" y="{y + ch - 7}" font-size="11"{_fit(str(row), label_w - 4, 6)}>{escape(str(row))}</text>')
        for j in range(len(columns)):
            v = values[i][j] if j < len(values[i]) else None
            x = label_w + j * cw
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                parts.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="#eeeeee"/>'
                             f'<text x="{x + cw / 2:.1f}" y="{y + ch - 7}" font-size="11" text-anchor="middle">—</text>')
                continue
            share = min(1.0, max(0.0, (float(v) - lower) / span))
            shade = tuple(round(255 - share * (255 - c)) for c in (0x1a, 0x7f, 0x37))
            ink = "#ffffff" if share > 0.6 else "#000000"
            parts.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="rgb{shade}">'
                         f'<title>{escape(str(row))}, {escape(str(columns[j]))}: {float(v):.3f}</title></rect>'
                         f'<text x="{x + cw / 2:.1f}" y="{y + ch - 7}" font-size="11" text-anchor="middle" '
                         f'fill="{ink}">{float(v):.2f}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
