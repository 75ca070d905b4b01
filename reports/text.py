"""How the report writes numbers (shared by the templates' filters and the sentences the
sections write): short values, signed differences, intervals, p-values."""
from __future__ import annotations

import math

MINUS = "−"


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _decimals(scale: float) -> int:
    """Two decimals, or two significant digits of ``scale`` below 0.01 (0.0018)."""
    if scale == 0 or scale >= 0.0095:
        return 2
    return 1 - math.floor(math.log10(scale))


def short(v, signed: bool = False, scale: float | None = None, percent: bool = False) -> str:
    """``v`` with two decimals, or two significant digits below 0.01 (of ``scale`` when given,
    so that the numbers of one interval share their decimals); ``—`` when not a number; a
    true minus sign, and a plus sign when ``signed``."""
    if not _finite(v):
        return "—"
    if percent:  # a relative change: +6.7%, one decimal (two significant digits below 1%)
        v, scale = 100 * float(v), 100 * float(scale) if _finite(scale) else None
        body = f"{abs(v):.{max(1, _decimals(abs(scale if _finite(scale) else v) / 100) - 2)}f}%"
    else:
        body = f"{abs(float(v)):.{_decimals(abs(float(scale if _finite(scale) else v)))}f}"
    sign = MINUS if v < 0 and float(body.rstrip("%")) != 0 else ("+" if signed else "")
    return sign + body


def signed(v) -> str:
    return short(v, signed=True)


def interval(lo, hi, signed_: bool = False) -> str:
    """``[lo, hi]``, or empty when the interval is unknown."""
    if not (_finite(lo) and _finite(hi)):
        return ""
    scale = max(abs(lo), abs(hi))
    return f"[{short(lo, signed_, scale)}, {short(hi, signed_, scale)}]"


def pvalue(p) -> str:
    """``0.29``, ``0.0002``, ``1``; ``< 0.0001`` below that."""
    if not _finite(p):
        return "—"
    if p < 1e-4:
        return "< 0.0001"
    return f"{p:.2g}" if p < 0.995 else "1"


def p_both(d) -> str:
    """A comparison's p-value, with its family-adjusted one when it has one:
    ``p 0.041, adjusted 0.52``."""
    adjusted = f", adjusted {pvalue(d.p_adjusted)}" if getattr(d, "adjusted", False) else ""
    return f"p {pvalue(d.p_value)}{adjusted}"


def change(d, percent: bool = False) -> str:
    """A paired difference as ``+0.11 [−0.03, +0.25] (p 0.29, adjusted 0.6)``."""
    numbers = [abs(x) for x in (d.difference, d.lower, d.upper) if _finite(x)]
    scale = max(numbers) if numbers else None
    ci = (f" [{short(d.lower, True, scale, percent)}, {short(d.upper, True, scale, percent)}]"
          if _finite(d.lower) and _finite(d.upper) else "")
    return f"{delta(d, percent)}{ci} ({p_both(d)})"


def detectable(mde, percent: bool = False) -> str:
    """What a minimum detectable effect allows (80% power), as a clause."""
    if isinstance(mde, float) and math.isnan(mde):
        return "the size of a difference this sample detects is not estimable (no value varies in either run)"
    if not _finite(mde):
        return "this sample cannot reliably detect a difference of any size (80% power)"
    return f"this sample detects differences of about {short(mde, percent=percent)} or more (80% power)"


def estimate(value, lo, hi, percent: bool = False) -> str:
    """A value with its interval, sharing decimals: ``0.83 [0.68, 0.92]``."""
    numbers = [abs(x) for x in (value, lo, hi) if _finite(x)]
    scale = max(numbers) if numbers else None
    ci = (f" [{short(lo, False, scale, percent)}, {short(hi, False, scale, percent)}]"
          if _finite(lo) and _finite(hi) else "")
    return short(value, percent, scale, percent) + ci


def delta(d, percent: bool = False) -> str:
    """A paired difference alone, with the decimals of its interval: ``+0.11``."""
    numbers = [abs(x) for x in (d.difference, d.lower, d.upper) if _finite(x)]
    return short(d.difference, True, max(numbers) if numbers else None, percent)
