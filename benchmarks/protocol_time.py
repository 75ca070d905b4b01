"""Time one whole ``drift-eval sweep`` (the full protocol as one run) and write its figures.

    python benchmarks/protocol_time.py --out benchmarks/results/NAME.json -- \\
        drift-eval sweep --output OUT --settings none --tasks drift_french --batch-size 18 \\
        --model-args conversation_cache=on

runs the command after ``--`` in a fresh process, its output (stdout and stderr) written to
``NAME.log`` beside the JSON, and records the wall clock, the CPU time and the peak resident memory of the
process and its children, each setting's ``done in`` line, the single-turn task's
progress bar and the seconds of each conversation turn (from the executor's
``Running N conversations, turn by turn`` bar). ``--from-log LOG [LOG ...]`` reads the same
figures instead from the output of GNU ``time -v COMMAND``, running nothing.

Run it with nothing else on the machine: the figure is the whole run's, not a ratio.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time

from drift_eval.files import read_text, write_json_atomic

TURN_BAR = re.compile(r"Running (\d+) conversations, turn by turn:\s+\d+%\|[^|]*\|\s*(\d+)/(\d+) \[([0-9:]+)<")
SINGLE_BAR = re.compile(r"Running generate_until requests: 100%\|[^|]*\|\s*(\d+)/(\d+) \[([0-9:]+)<")
DONE = re.compile(r"\[\d+/\d+\] (\S+): done in ([0-9.]+) s")
TIME_V = {"user": r"User time \(seconds\): ([0-9.]+)", "system": r"System time \(seconds\): ([0-9.]+)",
          "max_rss_kib": r"Maximum resident set size \(kbytes\): (\d+)",
          "wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)"}


def seconds(clock: str) -> float:
    """``[h:]mm:ss[.ff]`` in seconds."""
    value = 0.0
    for part in clock.split(":"):
        value = value * 60 + float(part)
    return value


def progress(text: str) -> dict:
    """The batches of conversations (turn seconds each) and the single-turn bar's total."""
    batches = []
    for m in TURN_BAR.finditer(text.replace("\r", "\n")):
        n, done, turns, clock = int(m[1]), int(m[2]), int(m[3]), seconds(m[4])
        if done == 0:
            batches.append({"conversations": n, "turns": turns, "elapsed": [0.0]})
        elif batches and done == len(batches[-1]["elapsed"]):
            batches[-1]["elapsed"].append(clock)
    for b in batches:
        e = b.pop("elapsed")
        b["turn_seconds"] = [round(e[i + 1] - e[i], 1) for i in range(len(e) - 1)]
        b["seconds"] = e[-1]
    single = [{"requests": int(m[2]), "seconds": seconds(m[3])} for m in SINGLE_BAR.finditer(text)]
    return {"settings_done_in_s": {m[1]: float(m[2]) for m in DONE.finditer(text)}, "single_turn": single,
            "conversation_batches": batches}


def from_log(paths: list[str]) -> dict:
    text = "\n".join(read_text(p, "timing log") for p in paths)
    found = {k: re.search(p, text) for k, p in TIME_V.items()}
    missing = [k for k, m in found.items() if m is None]
    if missing:
        raise SystemExit(f"{', '.join(paths)}: no GNU time -v output (no {', '.join(missing)} line)")
    return {"wall_s": seconds(found["wall"][1]), "cpu_user_s": float(found["user"][1]),
            "cpu_system_s": float(found["system"][1]), "max_rss_gib": round(int(found["max_rss_kib"][1]) / 2**20, 2),
            **progress(text)}


def run(command: list[str], log_path: str) -> dict:
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the command exited {os.waitstatus_to_exitcode(status)}: see {log_path}")
    return {"wall_s": round(wall, 1), "cpu_user_s": round(usage.ru_utime, 1), "cpu_system_s": round(usage.ru_stime, 1),
            "max_rss_gib": round(usage.ru_maxrss / 2**20, 2), **progress(read_text(log_path, "timing log"))}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--note", help="what else ran on the machine, and anything else the figures need beside them")
    ap.add_argument("--from-log", nargs="+", help="read the output of GNU time -v COMMAND instead of running it")
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if not command:
        ap.error("give the command after --")
    if args.from_log:
        figures = from_log(args.from_log)
    else:
        figures = run(command, os.path.splitext(args.out)[0] + ".log")
    figures = {"command": shlex.join(command), "cpus": os.cpu_count(), **({"note": args.note} if args.note else {}),
               **figures}
    write_json_atomic(args.out, figures, indent=1)
    print(f"{args.out}: {figures['wall_s']:.0f} s wall, {figures['cpu_user_s'] + figures['cpu_system_s']:.0f} s CPU, "
          f"{figures['max_rss_gib']} GiB at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
