"""``drift-eval model-path``: the safetensors folder of the bundled demo model (converted from
its GGUF file on first use)."""
from __future__ import annotations

from drift_eval.plugin import local_models

NAME = "model-path"
HELP = "print the bundled demo model's safetensors folder"


def add_arguments(p) -> None:
    pass


def run(args) -> int:
    print(local_models.smollm2_dir())
    return 0
