"""What a metric value is: a real number, a finite one, and a list-valued aggregate.

The one definition of each, for everything that checks a value (the results loader, the
gate, the answer cache, reports) and for the tasks' list-valued metrics. Pure Python,
imports nothing (not even numpy), so the lightest module may use it.
"""
from __future__ import annotations

import math


def is_number(v) -> bool:
    """A real number: an ``int`` or a ``float`` (NaN and infinities included), never a
    ``bool`` (JSON's ``true`` is not a value of 1)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_finite(v) -> bool:
    """A real number (``is_number``) that is neither NaN nor infinite."""
    return is_number(v) and math.isfinite(v)


class ListValue(tuple):
    """A list-valued lm-eval metric (a curve, a per-layer list, a table as a tuple of rows):
    a JSON array in lm-eval's results file, one short cell in lm-eval's printed table
    (which would otherwise print every entry).

    ``along``: what the entries run along, for a curve read at its end:
    ``ListValue(curve, along="segments")`` prints ``N segments, X at the end`` (``no
    segments`` when empty). Without it the size and range print: ``N values, a to b``, or
    ``R x C values, a to b`` for a table of rows."""

    along: str | None = None

    def __new__(cls, values=(), along: str | None = None):
        self = super().__new__(cls, values)
        if along is not None:
            self.along = along
        return self

    def __str__(self):
        if self.along is not None:
            return f"{len(self)} {self.along}, {self[-1]:.3f} at the end" if self else f"no {self.along}"
        flat = [v for row in self for v in (row if isinstance(row, (list, tuple)) else [row])
                if is_number(v) and not math.isnan(v)]
        size = f"{len(self)} x {len(self[0])}" if self and isinstance(self[0], (list, tuple)) else f"{len(self)}"
        return f"{size} values, {min(flat):.3f} to {max(flat):.3f}" if flat else f"{size} values"

    def __format__(self, spec):
        return str(self)
