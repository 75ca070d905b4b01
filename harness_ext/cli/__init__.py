"""``drift-eval``: the project's command line.

    drift-eval demo          run drift_french_single on the bundled SmolLM2-135M-Instruct
                             through the real ``lm_eval`` command, without and with
                             compensation, print lm-eval's results tables, and write the
                             HTML report comparing them (its path is printed last)
    drift-eval model-path    print the safetensors folder of the bundled demo model
                             (converted from its GGUF file on first use)
    drift-eval position-bias predicted (rollout) vs gradient influence profiles of a model
    drift-eval sweep         lm-eval tasks under several compensation settings, model loaded once
    drift-eval report        comparison report (HTML / Markdown / JSON / CSV) of a results folder
    drift-eval gate          release rules on a results folder (exit 0 pass, 1 fail, 2 unusable)
    drift-eval compare       a candidate model against a baseline: paired tests, detectable effects
    drift-eval leaderboard   one ranked row per (model, setting) from lm-eval results
    drift-eval alpha         hidden-state prompt-forgetting exponents per layer
    drift-eval decode        what free generations still carry of the prompt: probe and
                             text decodability per layer and t, language switches
    drift-eval accessibility cramming capacity: n50 against soft-prompt size m, and the bound

One module per command (``drift_eval.cli.demo``, ``.model_path``, ``.position_bias``,
``.sweep``, ``.report``, ``.gate``, ``.compare``, ``.leaderboard``, ``.alpha``, ``.decode``,
``.accessibility``), each with its ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> exit status``; what several share (the parser's error contract, the
validated option types, the model options and loading, the bundled scenes, the
compensation install) is in ``drift_eval.cli.shared``. Parsing imports no torch: a command
imports its heavy modules when it runs.
"""
from __future__ import annotations

import argparse
import os
import sys

from drift_eval.cli import (accessibility, alpha, compare, decode, demo, gate, leaderboard, model_path, position_bias,
                            report, sweep)
from drift_eval import inert
from drift_eval.cli.shared import Parser
from drift_eval.errors import USAGE_EXIT, DriftUsageError

#: the commands, in the order ``drift-eval --help`` lists them
COMMANDS = (demo, model_path, position_bias, accessibility, sweep, report, gate, compare, leaderboard, alpha, decode)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="drift-eval", description="Instruction-drift evaluation for lm-eval.")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        sp = sub.add_parser(command.NAME, help=command.HELP)
        command.add_arguments(sp)
        sp.set_defaults(func=command.run, interrupted=getattr(command, "interrupted", None))
    return p


class _InertOutput:
    """Standard output with every control character escaped (``drift_eval.inert.terminal``):
    model names, labels and answers read from results files reach the terminal as text."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(inert.terminal(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv=None) -> int:
    stdout, sys.stdout = sys.stdout, _InertOutput(sys.stdout)
    try:
        return _main(argv)
    except BrokenPipeError:
        # whatever read the output stopped reading (``drift-eval leaderboard ... | head``):
        # stop without a traceback, standard output pointed at nothing so that the flush at
        # exit does not fail again (the recipe of Python's documentation of SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        return 1
    finally:
        sys.stdout = stdout


def _main(argv) -> int:
    interrupted = None
    try:
        args = build_parser().parse_args(argv)
        interrupted = args.interrupted
        return args.func(args)
    except DriftUsageError as exc:
        print(f"drift-eval: error: {inert.terminal(exc.message, one_line=True)}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        pass
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    import gc

    gc.collect()  # progress bars held by the interrupted frames close now, before the last line
    print(f"drift-eval: interrupted{': ' + interrupted() if interrupted else ''}", file=sys.stderr)
    return 130
