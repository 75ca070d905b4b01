"""drift_french_single: docs, requests and scoring for the forced-length French test.

lm-eval loads this file by path from the task YAML (``!function utils.NAME``); the maths
lives in ``drift_eval.metrics``.
"""
from __future__ import annotations

import json
import os
from copy import deepcopy

from lm_eval.api.task import ConfigurableTask

from drift_eval.errors import DriftUsageError
from drift_eval.metrics import drift, langid

HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM_PROMPTS = {
    "en": "You are a helpful assistant. Answer only in French, whatever language the user "
          "writes in. Never switch to another language.",
    "fr": "Tu es un assistant serviable. Réponds uniquement en français, quelle que soit la "
          "langue de l'utilisateur. Ne change jamais de langue.",
}


def read_requests() -> list[dict]:
    with open(os.path.join(HERE, "requests.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_single_turn(prompt_language: str = "en", **_metadata):
    """``custom_dataset`` for lm-eval: one doc per user request, with its system prompt."""
    import datasets

    if prompt_language not in SYSTEM_PROMPTS:
        raise DriftUsageError(f"prompt_language must be one of {', '.join(SYSTEM_PROMPTS)}, got '{prompt_language}'")
    docs = [dict(r, system_prompt=SYSTEM_PROMPTS[prompt_language], prompt_language=prompt_language)
            for r in read_requests()]
    return {"test": datasets.Dataset.from_list(docs)}


def process_results(doc, results):
    return drift.score_response(results[0], instruction=doc["system_prompt"], lang="fr")


mean_drift_onset = drift.mean_drift_onset


class ForcedLengthTask(ConfigurableTask):
    """A generation task whose answers run to ``max_gen_toks``: the end-of-sequence token is
    suppressed until then (``min_new_tokens = max_gen_toks`` unless the user sets
    ``min_new_tokens`` in ``--gen_kwargs``). It checks the language-ID model before any
    generation starts, so that a missing file cannot waste a run."""

    def __init__(self, config=None):
        config = dict(config or {})
        config.pop("class", None)
        try:
            langid.identify("Ceci est une phrase en français.")
        except langid.LanguageModelMissing as exc:
            raise DriftUsageError(str(exc)) from None
        super().__init__(config=config)

    def construct_requests(self, doc, ctx, **kwargs):
        inst = super().construct_requests(doc, ctx, **kwargs)
        for i in inst if isinstance(inst, list) else [inst]:
            gen = i.arguments[1]
            if "min_new_tokens" not in gen:
                gen["min_new_tokens"] = gen.get("max_gen_toks", 256)
        return inst
