"""What the plugin's start-up line costs every Python process on the machine.

The installed ``lm_eval_drift.pth`` loads ``drift_eval/_startup.py`` at every interpreter
start. This starts fresh interpreters without ``site`` (``python -S``), ``--rounds`` times,
and in each one times exactly what ``site`` does with that file at start-up:
``site.addpackage`` on the installed ``.pth`` (its line, the hook's module, the finder it
installs). On an editable install (``setup.sh``) setuptools' editable finder is imported
at start-up too, for the folder mapping of ``pyproject.toml``; its import time
(``python -X importtime``) is reported beside, as it is setuptools' and not the hook's.
The interpreters write and read byte-code caches as a user's do (``PYTHONDONTWRITEBYTECODE``
is dropped from their environment), and a first, uncounted start writes them.

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

EDITABLE = "__editable___lm_eval_drift"


PTH = "lm_eval_drift.pth"
TIME_THE_LINE = (
    "import site, sys, time\n"
    "t = time.perf_counter(); site.addpackage(sys.argv[1], sys.argv[2], set()); t = time.perf_counter() - t\n"
    "assert 'drift_eval._startup' in sys.modules, 'the line did not load the hook'\n"
    "print(t * 1000)")


def installed_folder() -> str | None:
    """The site-packages folder that holds the installed ``.pth`` (None: not installed)."""
    import site

    return next((d for d in site.getsitepackages() if os.path.isfile(os.path.join(d, PTH))), None)


def one_start(folder: str) -> dict:
    """Milliseconds of the hook's start-up line (the ``.pth`` in ``folder``), and of the
    editable finder's import, in fresh interpreters."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE")}
    r = subprocess.run([sys.executable, "-S", "-c", TIME_THE_LINE, folder, PTH], capture_output=True, text=True,
                       env=env, timeout=60)
    out = {"hook": float(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None,
           "editable_finder": None}
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True, env=env,
                       timeout=60)
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
            if cumulative.isdigit() and name.startswith(EDITABLE):
                out["editable_finder"] = int(cumulative) / 1000
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--json", help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    folder = installed_folder()
    if folder:
        one_start(folder)  # writes the byte-code caches a user's interpreter starts from (not counted)
    starts = [one_start(folder) for _ in range(max(1, args.rounds))] if folder else [{"hook": None}]
    if any(s["hook"] is None for s in starts):
        print(f"{PTH} was not found or did not load the hook: is lm-eval-drift installed in this interpreter?",
              file=sys.stderr)
        return 1
    res = {"python": sys.version.split()[0], "rounds": len(starts)}
    for key in ("hook", "editable_finder"):
        values = sorted(s[key] for s in starts if s[key] is not None)
        if values:
            res[key] = {"median_ms": round(statistics.median(values), 2),
                        "p90_ms": round(values[int(0.9 * (len(values) - 1))], 2),
                        "max_ms": round(values[-1], 2)}
    for key, label in (("hook", f"{PTH} (the start-up hook)"), ("editable_finder", "setuptools' editable finder")):
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
