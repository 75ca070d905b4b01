"""Inline SVG line plots for the comparison report: no scripts, no external assets.

Every text that goes into the SVG (titles, axis and series names) is escaped.
"""
from __future__ import annotations

import math

from markupsafe import Markup, escape

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


def line_plot(series: dict, title: str, x_label: str, y_label: str, y_range=None, width: int = 600,
              height: int = 300, markers: bool = True) -> Markup:
    """``series``: name -> list of (x, y). Points with a non-finite y are skipped."""
    pts = {name: [(float(x), float(y)) for x, y in xy if y is not None and math.isfinite(float(y))]
           for name, xy in series.items()}
    pts = {k: v for k, v in pts.items() if v}
    left, right, top, bottom = 58, 150, 30, 44
    pw, ph = width - left - right, height - top - bottom
    xs = [x for v in pts.values() for x, _ in v] or [0.0, 1.0]
    ys = [y for v in pts.values() for _, y in v] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
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
             f'<text x="{left + pw / 2:.1f}" y="18" text-anchor="middle" font-size="13" '
             f'font-weight="bold">{escape(title)}</text>']
    for t in _ticks(y0, y1):
        y = sy(t)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>')
    xt = sorted(set(xs))
    if len(xt) > 12 or any(x != int(x) for x in xt):
        xt = _ticks(x0, x1, 6)
    for t in xt:
        x = sx(t)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#999"/>'
                     f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle" font-size="11">{_fmt(t)}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle" font-size="12">'
                 f'{escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" font-size="12" '
                 f'transform="rotate(-90 14 {top + ph / 2:.1f})">{escape(y_label)}</text>')
    for i, (name, xy) in enumerate(pts.items()):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in xy)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        if markers and len(xy) <= 40:
            parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>' for x, y in xy]
        ly = top + 14 + 18 * i
        parts.append(f'<line x1="{left + pw + 10}" x2="{left + pw + 28}" y1="{ly - 4}" y2="{ly - 4}" '
                     f'stroke="{color}" stroke-width="3"/>'
                     f'<text x="{left + pw + 32}" y="{ly}" font-size="12">{escape(name)}</text>')
    if not pts:
        parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" text-anchor="middle" '
                     f'font-size="12">no data</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
