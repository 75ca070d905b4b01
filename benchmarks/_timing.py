"""CPU-time rounds for the speed benchmarks: every round runs each function once, in an
order rotated from round to round (the cores are shared, so a fixed order would favour
whichever runs first); the clock is the process's CPU time unless another is given."""
from __future__ import annotations

import time


def rotated_rounds(fns: list, rounds: int, report=None, clock=time.process_time) -> dict:
    """``fns``: (name, callable) pairs. Returns {name: [seconds of ``clock`` per round]};
    ``report`` gets each round's {name: seconds} as it ends."""
    times = {name: [] for name, _ in fns}
    for r in range(rounds):
        got = {}
        for name, fn in fns[r % len(fns):] + fns[:r % len(fns)]:
            t0 = clock()
            fn()
            got[name] = clock() - t0
            times[name].append(got[name])
        if report:
            report(r, got)
    return times
