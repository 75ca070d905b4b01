"""What several ``drift-eval`` commands share, written once: the parser with the project's
error contract, the validated option types, the model options and the model loading, the
bundled scene selection and the compensation install (with the per-head calibration).

Nothing here imports torch, transformers or lm-eval at import time: parsing stays cheap.
"""
from __future__ import annotations

import argparse
import math
import os

from drift_eval.errors import DriftUsageError


class Parser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line, exit status 2."""

    def error(self, message):
        raise DriftUsageError(f"{message} (see '{self.prog} --help')")


def whole(minimum: int, maximum: int | None = None):
    """An argparse type: a whole number in ``[minimum, maximum]``."""
    def parse(text):
        # deferred, start-up: drift-eval imports every command's module to read the arguments
        from drift_eval.settings import int_option

        try:
            return int_option("", text, minimum, maximum)
        except DriftUsageError as exc:
            raise argparse.ArgumentTypeError(exc.message.strip()) from None

    parse.__name__ = "whole number"
    return parse


def positive(text):
    """An argparse type: a finite number > 0, in ASCII digits (``settings.parse_number``)."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.settings import parse_number

    v = parse_number(text)
    v = math.nan if v is None else float(v)
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return v


def model_options(p, random_init: bool = False) -> None:
    """The options naming the model a measurement loads (one place for every subcommand)."""
    p.add_argument("--model", help="model folder (default: the bundled SmolLM2-135M-Instruct)")
    p.add_argument("--gguf-file", help="GGUF file inside --model")
    if random_init:
        p.add_argument("--random-init", action="store_true", help="measure the untrained twin (same config, seed 0)")


def threads_option(p) -> None:
    p.add_argument("--threads", type=whole(0), default=0, help="torch threads (default: torch's choice)")


def compensation_option(p) -> None:
    """``--compensation`` of the measuring commands (the span is the whole prompt)."""
    p.add_argument("--compensation", default="none", help="none, log:S, const:S or head:S (default none)")


def scene_options(p) -> None:
    """The bundled scene set's options (alpha, decode)."""
    p.add_argument("--scenes", type=whole(1), default=20, help="bundled scenes to use (default 20)")
    p.add_argument("--axes", default="detail,paraphrase,genre,translation", help="bundled variant axes (default: all four)")


def bundled_scenes(args) -> tuple[list, list]:
    """(the first ``--scenes`` bundled scenes, the ``--axes`` names), checked."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.taskdata.alpha import AXES, read_scenes

    all_scenes = read_scenes()
    if not 1 <= args.scenes <= len(all_scenes):
        raise DriftUsageError(f"--scenes must be between 1 and {len(all_scenes)}")
    axes = [a.strip() for a in args.axes.split(",") if a.strip()]
    if not axes or any(a not in AXES for a in axes):
        raise DriftUsageError(f"--axes takes names from {', '.join(AXES)}")
    return all_scenes[:args.scenes], axes


def read_text(path: str, what: str) -> str:
    """The text of a UTF-8 file given on the command line, stripped."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.files import read_text as read

    return read(path, what).strip()


def model_dir(args) -> str:
    """``--model`` (with ``--gguf-file``), or the bundled SmolLM2-135M-Instruct."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.plugin.local_models import cached_from_gguf, smollm2_dir

    if args.model is None:
        return smollm2_dir()
    if args.gguf_file:
        if not os.path.isdir(args.model):
            raise DriftUsageError(f"--model {args.model} is not a folder: give the folder that holds --gguf-file")
        return cached_from_gguf(args.model, args.gguf_file)
    if os.path.lexists(args.model) and not os.path.isdir(args.model):
        raise DriftUsageError(f"--model {args.model} is a file: give a model folder (with --gguf-file for a GGUF "
                              f"file in it)")
    if os.path.isdir(args.model) and not os.path.isfile(os.path.join(args.model, "config.json")):
        raise DriftUsageError(f"--model {args.model} is not a model folder (no config.json there): give a "
                              f"transformers model folder, or the folder of a GGUF file with --gguf-file")
    if not os.path.isdir(args.model) and (os.path.isabs(args.model) or args.model.startswith((".", "~"))):
        raise DriftUsageError(f"--model {args.model} not found: give a model folder")
    return args.model  # a folder, or a Hugging Face hub name (cached, or downloaded where the network allows)


def load_model(args, random_init: bool = False):
    """(model, tokenizer) in float32 for the measuring commands; ``random_init`` builds the
    untrained twin (same config, freshly initialised weights, seed 0)."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.plugin.local_models import untrained_twin

    if getattr(args, "threads", 0):
        torch.set_num_threads(args.threads)
    folder = model_dir(args)
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        if random_init:
            model = untrained_twin(folder)
        else:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    except (OSError, ValueError) as exc:  # a hub name not cached offline, a folder transformers cannot read
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise DriftUsageError(f"cannot load the model {folder} ({first})") from None
    return model.eval(), tok


def install_compensation(model, tok, cfg, base: str | None = None):
    """The bias of ``cfg`` installed on ``model``; ``head`` gets its per-head strengths
    (calibrated once per model, then cached)."""
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.compensation import bias

    state = bias.install(model, cfg, base=base)
    if cfg.mode == "head":
        # deferred, start-up: drift-eval imports every command's module to read the arguments
        from drift_eval.measure.calibration import head_gammas
        from drift_eval.taskdata.french import calibration_prompt

        state.head_gammas = head_gammas(model, tok, calibration_prompt())
    return state
