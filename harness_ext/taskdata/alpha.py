"""The drift_alpha data, for the tasks and for ``drift-eval alpha``: the 20 scenes with their
four variants and the 16 shared continuations, written for this project (see tasks/drift_alpha/README.md)."""
from __future__ import annotations

import os

from drift_eval.files import read_jsonl

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alpha")
AXES = ("detail", "paraphrase", "genre", "translation")


def read_scenes() -> list[dict]:
    """Scenes: ``id``, ``base`` and one variant per axis (``detail``, ``paraphrase``,
    ``genre``, ``translation``), plus ``detail_change`` and ``genre_name``."""
    return read_jsonl(os.path.join(HERE, "scenes.jsonl"), "scene file")


def read_continuations() -> list[str]:
    """The 16 shared continuation texts."""
    return [c["text"] for c in read_jsonl(os.path.join(HERE, "continuations.jsonl"), "continuation file")]
