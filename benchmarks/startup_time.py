"""What the plugin's start-up line costs every Python process on the machine.

The installed ``lm_eval_drift.pth`` imports ``drift_eval._startup`` at every interpreter
start. This starts fresh interpreters (``python -X importtime -c pass``), ``--rounds``
times, and reads the cumulative import time of ``drift_eval._startup`` (the hook, with the
``drift_eval`` package it lives in) from Python's own import-time report. On an editable
install (``setup.sh``) setuptools' editable finder is imported at start-up too, for the
folder mapping of ``pyproject.toml``; its time is reported beside, as it is setuptools'
and not the hook's.

    python benchmarks/startup_time.py [--rounds 40] [--json benchmarks/results/startup_time.json]

Goal: the hook under 5 ms per interpreter start (median and 90th percentile).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HOOK = "drift_eval._startup"
EDITABLE = "__editable___lm_eval_drift"


def one_start() -> dict:
    """Cumulative import times (ms) of the hook and of the editable finder in one fresh
    interpreter."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}, timeout=60)
    out = {"hook": None, "editable_finder": None}
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
        if not cumulative.isdigit():
            continue
        if name == HOOK:
            out["hook"] = int(cumulative) / 1000
        elif name.startswith(EDITABLE):
            out["editable_finder"] = int(cumulative) / 1000
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--json", help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    starts = [one_start() for _ in range(max(1, args.rounds))]
    if any(s["hook"] is None for s in starts):
        print("the start-up hook was not imported: is lm-eval-drift installed in this interpreter?", file=sys.stderr)
        return 1
    res = {"python": sys.version.split()[0], "rounds": len(starts)}
    for key in ("hook", "editable_finder"):
        values = sorted(s[key] for s in starts if s[key] is not None)
        if values:
            res[key] = {"median_ms": round(statistics.median(values), 2),
                        "p90_ms": round(values[int(0.9 * (len(values) - 1))], 2),
                        "max_ms": round(values[-1], 2)}
    for key, label in (("hook", HOOK), ("editable_finder", "setuptools' editable finder")):
        if key in res:
            r = res[key]
            print(f"{label}: median {r['median_ms']:.2f} ms, 90th percentile {r['p90_ms']:.2f} ms, "
                  f"max {r['max_ms']:.2f} ms over {len(starts)} interpreter starts")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(res, fh, indent=2)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
