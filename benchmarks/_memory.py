"""Resident memory of this process while a measurement runs (for the benchmarks' memory
figures, each taken in a fresh process)."""
from __future__ import annotations

import os
import threading
import time


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def peak_growth(fn) -> dict:
    """Resident memory sampled every 2 ms while ``fn()`` runs, against the resident memory
    just before (loading a model peaks higher than anything after it, so the process's own
    high-water mark would hide the measurement)."""
    before = rss_mib()
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib())
            time.sleep(0.002)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        fn()
    finally:
        done.set()
        t.join()
    return {"rss_before_mib": round(before, 1), "peak_rss_mib": round(peak[0], 1),
            "growth_mib": round(peak[0] - before, 1)}
