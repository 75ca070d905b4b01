"""What the lm-eval start-up hook costs a Python process that never uses lm-eval.

``lm_eval_drift.pth`` imports ``drift_eval._startup`` in every interpreter start. This
measures that import with ``python -X importtime -c pass`` (self + cumulative time of the
hook's own modules, median of N starts), next to the whole ``python -c pass`` wall time of
the same starts for scale. Goal: < 20 ms.

    python benchmarks/startup_cost.py [--runs 20]
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time


def hook_import_us() -> tuple[int, float]:
    t0 = time.perf_counter()
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True).stderr
    wall = time.perf_counter() - t0
    cumulative = 0
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and m.group(4).strip() in ("drift_eval", "drift_eval._startup"):
            cumulative = max(cumulative, int(m.group(2)))
    return cumulative, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    samples = [hook_import_us() for _ in range(args.runs)]
    hook_ms = statistics.median(s[0] for s in samples) / 1000
    wall_ms = statistics.median(s[1] for s in samples) * 1000
    if hook_ms == 0:
        sys.exit("the start-up hook was not imported: is lm-eval-drift installed?")
    print(f"start-up hook import: {hook_ms:.2f} ms (median of {args.runs}); "
          f"whole 'python -X importtime -c pass': {wall_ms:.1f} ms; share {hook_ms / wall_ms:.1%}")


if __name__ == "__main__":
    main()
