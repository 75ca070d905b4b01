"""How much of a run is not generation: the line every run with drift tasks ends with
(``drift_eval.plugin.progress``: "drift tasks: W s, of which generation G s (...); scoring:
...") read from a run's log, with the run's progress lines (how many answers had been scored
by the scoring processes when the last batch was generated).

    drift-eval sweep --output out --settings none --tasks drift_fr_single --limit 36 > hf.log
    python benchmarks/scoring_overlap.py hf.log --label hf-drift --command "drift-eval sweep ..." --json FILE

The figures: the run's wall clock inside lm-eval's ``evaluate`` (W), the time inside the
model's generation calls (G), the share (W - G) / W that is not generation, the main
process's time over the drift tasks' ``process_results`` after generation, and the CPU
seconds the scoring processes spent while the run went on.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from drift_eval.files import write_json_atomic

SUMMARY = re.compile(
    r"drift tasks: (?P<wall>[\d.]+) s, of which generation (?P<generation>[\d.]+) s \((?P<answers>\d+) answers, "
    r"(?P<tokens>[\d,]+) tokens(?: in the \d+ of known length)?\); scoring: (?P<documents>\d+) documents, (?P<aside>[\d.]+) s of CPU in the scoring "
    r"processes while the run went on, and (?P<main>[\d.]+) s in the main process after generation")
PROGRESS = re.compile(r": (?P<done>\d+) of (?P<total>\d+) answers generated.*?; (?P<scored>\d+) of \d+ scored "
                      r"while generating")


def read_log(path: str) -> dict:
    """The last summary line of a run's log, and its last progress line."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    found = list(SUMMARY.finditer(text))
    if not found:
        raise SystemExit(f"error: {path} holds no line 'drift tasks: ... s, of which generation ...'")
    m = found[-1]
    out = {k: float(m[k]) for k in ("wall", "generation", "aside", "main")}
    out.update(answers=int(m["answers"]), tokens=int(m["tokens"].replace(",", "")), documents=int(m["documents"]))
    out["not_generation_share"] = round((out["wall"] - out["generation"]) / out["wall"], 4)
    out["main_scoring_share"] = round(out["main"] / out["wall"], 5)
    out["tokens_per_s"] = round(out["tokens"] / out["generation"], 1) if out["generation"] else None
    lines = list(PROGRESS.finditer(text))
    if lines:
        last = lines[-1]
        out["scored_while_generating"] = f"{last['scored']} of {last['done']}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="a run's log (stdout and stderr)")
    ap.add_argument("--label", required=True)
    ap.add_argument("--command", required=True, help="the command that made the log")
    ap.add_argument("--json", help="results file to add this run to (by label)")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.log):
        print(f"error: {args.log} is not a file", file=sys.stderr)
        return 2
    row = {"label": args.label, "command": args.command, **read_log(args.log)}
    print(json.dumps(row))
    if args.json:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

        rows = []
        if os.path.isfile(args.json):
            with open(args.json, encoding="utf-8") as fh:
                rows = [r for r in json.load(fh)["rows"] if r["label"] != args.label]
        write_json_atomic(args.json, {"rows": [*rows, row]}, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
