"""``drift-eval leaderboard``: one ranked row per (model, setting) from lm-eval results."""
from __future__ import annotations

NAME = "leaderboard"
HELP = "one row per (model, setting), ranked, ties marked"


def add_arguments(p) -> None:
    p.add_argument("results", nargs="+", help="results folders (sweeps or lm_eval --output_path folders)")
    p.add_argument("-o", "--output", help="board.md, board.csv or board.json (default: Markdown to stdout)")
    p.add_argument("--format", choices=("md", "csv", "json"), help="override the format implied by the file name")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.reports.leaderboard import write_leaderboard

    if args.output:
        # deferred, start-up: drift-eval imports every command's module to read the arguments
        from drift_eval.files import check_output_file

        check_output_file(args.output, "-o")
    text = write_leaderboard(args.results, args.output, args.format)
    print(args.output if args.output else text)
    return 0
