"""``drift-eval model-path``: the safetensors folder of the bundled demo model (converted from
its GGUF file on first use)."""
from __future__ import annotations

NAME = "model-path"
HELP = "print the bundled demo model's safetensors folder"


def add_arguments(p) -> None:
    pass


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.plugin.local_models import smollm2_dir

    print(smollm2_dir())
    return 0
