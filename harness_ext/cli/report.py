"""``drift-eval report``: the comparison report (HTML, Markdown, JSON, CSV) of results folders."""
from __future__ import annotations

import os

from drift_eval.errors import DriftUsageError

NAME = "report"
HELP = "render the comparison of a results folder (HTML, Markdown, JSON, CSV)"


def add_arguments(p) -> None:
    p.add_argument("results", nargs="+", help="results folders (drift-eval sweep --output, or lm_eval --output_path)")
    p.add_argument("-o", "--output", help="report file, .html, .md, .json or .csv (default: report.html in the "
                   "first folder)")
    p.add_argument("--format", choices=("html", "md", "json", "csv"), help="override the format implied by the file name")
    p.add_argument("--partial", action="store_true", help="render an unfinished sweep with the settings it has")
    p.add_argument("--policy", help="gate policy: its outcome opens the report")
    p.add_argument("--baseline", help="baseline results folder, or a model name in RESULTS, to compare against")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.reports.render import write_report

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.files import check_output_file

    for folder in args.results:  # the input first: the default output goes inside the first folder
        if not os.path.isdir(folder):
            raise DriftUsageError(f"results folder not found: {folder}")
    out = check_output_file(args.output or os.path.join(args.results[0], "report.html"), "-o")
    print(write_report(args.results, out, fmt=args.format, allow_partial=args.partial, policy=args.policy,
                       baseline=args.baseline))
    return 0
