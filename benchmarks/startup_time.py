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

It also starts whole interpreters (``python -c pass``, ``site`` and every ``.pth`` file
included) of this environment and of a bare virtual environment made from the same Python
in a temporary folder, alternating which goes first in each round, and reports the median of
the per-round differences: what this environment, as installed, costs every program.

    python benchmarks/startup_time.py [--rounds 40] [--json benchmarks/results/startup_time.json]

Goal: the hook, and this environment against a bare one, under 5 ms per interpreter start
(median).
"""
from __future__ import annotations

import argparse
import json
import os
import site
import statistics
import subprocess
import sys
import tempfile
import time

from drift_eval.files import write_text_atomic

EDITABLE = "__editable___lm_eval_drift"


PTH = "lm_eval_drift.pth"
TIME_THE_LINE = (
    "import site, sys, time\n"
    "t = time.perf_counter(); site.addpackage(sys.argv[1], sys.argv[2], set()); t = time.perf_counter() - t\n"
    "assert 'drift_eval._startup' in sys.modules, 'the line did not load the hook'\n"
    "print(t * 1000)")


def installed_folder() -> str | None:
    """The site-packages folder that holds the installed ``.pth`` (None: not installed)."""
    return next((d for d in site.getsitepackages() if os.path.isfile(os.path.join(d, PTH))), None)


def _user_env(*also: str) -> dict:
    """This environment as a user's program starts with it: without import-time profiling,
    with byte-code caches written and read, and without ``also``."""
    drop = ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE", *also)
    return {k: v for k, v in os.environ.items() if k not in drop}


def one_start(folder: str) -> dict:
    """Milliseconds of the hook's start-up line (the ``.pth`` in ``folder``), and of the
    editable finder's import, in fresh interpreters."""
    env = _user_env()
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


def _start_ms(python: str, env: dict) -> float:
    t = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=env, check=True, timeout=60)
    return (time.perf_counter() - t) * 1000


def against_bare(rounds: int) -> dict:
    """Whole interpreter starts of this environment and of a bare virtual environment made
    from the same base Python, alternating which goes first; the median of the per-round
    differences, and each side's median."""
    env = _user_env("PYTHONPATH", "PYTHONSTARTUP")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", tmp], check=True, timeout=120)
        bare = os.path.join(tmp, "bin", "python")
        for python in (sys.executable, bare):
            _start_ms(python, env)  # byte-code caches written, not counted
        ours, theirs = [], []
        for k in range(rounds):
            if k % 2:
                theirs.append(_start_ms(bare, env))
                ours.append(_start_ms(sys.executable, env))
            else:
                ours.append(_start_ms(sys.executable, env))
                theirs.append(_start_ms(bare, env))
    diffs = sorted(a - b for a, b in zip(ours, theirs))
    return {"this_environment_median_ms": round(statistics.median(ours), 2),
            "bare_environment_median_ms": round(statistics.median(theirs), 2),
            "difference_median_ms": round(statistics.median(diffs), 2),
            "difference_p90_ms": round(diffs[int(0.9 * (len(diffs) - 1))], 2)}


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
    res["whole_start"] = whole = against_bare(max(1, args.rounds))
    print(f"python -c pass: this environment {whole['this_environment_median_ms']:.1f} ms, a bare one "
          f"{whole['bare_environment_median_ms']:.1f} ms (medians); per-round difference: median "
          f"{whole['difference_median_ms']:.2f} ms, 90th percentile {whole['difference_p90_ms']:.2f} ms")
    if args.json:
        write_text_atomic(args.json, json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
