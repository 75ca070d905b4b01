"""drift_decode (free-generation decodability, one task per variant axis): docs, requests
and aggregation.

Each doc is one scene of the drift_alpha scene set. Its request asks ``hf-drift`` to sample
free generations from the scene's base prompt and from its variant, probe the hidden states
and the text at ``t = 16, 32, …``, and identify each trajectory's language
(``drift_eval.measure.decode``); the answer (in the logged sample) holds the scene's correct
held-out predictions per layer and t, and the languages. The aggregation pools the scenes
(``drift_eval.metrics.decode.summarise``).

Options (``--metadata``): ``num_scenes`` (20, shared with drift_alpha), ``samples`` (32
trajectories per prompt), ``generation_length`` (512), ``temperature`` (1.0), ``seed`` (0),
``folds`` (5), ``text_window`` (64), ``first_centre`` (16), ``segment`` (128).
"""
from __future__ import annotations

import json
import math
from dataclasses import fields

import datasets

from drift_eval.errors import DriftUsageError
from drift_eval.metrics import decode as dm
from drift_eval.metrics.values import ListValue
from drift_eval.plugin.request_types import FREE_GENERATION
from drift_eval.plugin.task_base import YamlTask
from drift_eval.taskdata.alpha import AXES, read_scenes


def _settings(metadata: dict) -> dict:
    """The decode settings named in ``--metadata``, checked (one line for a bad value); the
    other keys (other tasks' options, lm-eval's ``version``) are left alone."""
    from drift_eval.measure.decode import Settings  # deferred, start-up: loads torch

    names = {f.name for f in fields(Settings)}
    return Settings.from_options(**{k: v for k, v in metadata.items() if k in names}).as_dict()


def load_axis(axis: str, num_scenes=20, **metadata):
    """``custom_dataset``: one doc per scene, holding its base prompt, the ``axis`` variant
    and the sampling settings."""
    if axis not in AXES:
        raise DriftUsageError(f"unknown axis '{axis}': use one of {', '.join(AXES)}")
    scenes = read_scenes()
    try:
        n = int(num_scenes)
    except (TypeError, ValueError):
        n = 0
    if not 1 <= n <= len(scenes):
        raise DriftUsageError(f"num_scenes must be between 1 and {len(scenes)}, got {num_scenes}")
    settings = json.dumps(_settings(metadata))
    return {"test": datasets.Dataset.from_list([{"scene": s["id"], "axis": axis, "base": s["base"],
                                                  "variant": s[axis], "settings": settings} for s in scenes[:n]])}


class DecodeTask(YamlTask):
    """One ``free_generation`` request per scene."""

    def construct_requests(self, doc, ctx, **kwargs):
        spec = {"scene": doc["scene"], "axis": doc["axis"], "base": doc["base"], "variant": doc["variant"],
                "settings": json.loads(doc["settings"])}
        return self.request(doc, FREE_GENERATION, spec, **kwargs)


def process_decode(doc, results):
    """Every metric gets the scene's whole answer; the aggregations pool the scenes."""
    res = json.loads(results[0])
    return {m: res for m in METRICS}


_cache: dict = {}


def _summary(items) -> dict:
    """``metrics.decode.summarise`` of one task's scenes, once for all of its metrics."""
    key = tuple(id(x) for x in items)
    hit = _cache.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], items)):
        try:
            summary = dm.summarise(list(items))
        except ValueError as exc:
            raise DriftUsageError(str(exc)) from None
        _cache.clear()
        hit = _cache[key] = (list(items), summary)
    return hit[1]


def _se(p, n):
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


def hidden_accuracy(items):
    """Headline: at the last t, the accuracy of the median layer (lower median over layers)."""
    return _summary(items)["hidden_accuracy"]


def hidden_accuracy_se(items):
    """Binomial standard error of ``hidden_accuracy`` (the Wilson interval is in the
    samples' summary and the report)."""
    s = _summary(items)
    return _se(s["hidden_accuracy"], s["predictions"])


def hidden_accuracy_best(items):
    """At the last t, the best layer's accuracy (chosen after the fact: biased upward)."""
    return _summary(items)["hidden_accuracy_best"]


def text_accuracy(items):
    """At the last t, the accuracy of the bag-of-tokens probe."""
    return _summary(items)["text_accuracy"]


def text_accuracy_se(items):
    s = _summary(items)
    return _se(s["text_accuracy"], s["predictions"])


def switches_base(items):
    """Mean number of the base prompt's trajectories per scene whose majority language is
    not the prompt's."""
    return _summary(items)["switches_base"]["mean"]


def switches_variant(items):
    """The same for the variant prompt's trajectories."""
    return _summary(items)["switches_variant"]["mean"]


def hidden_accuracy_grid(items):
    """Accuracy per layer (rows) and t (columns)."""
    return ListValue(tuple(row) for row in _summary(items)["hidden"]["accuracy"])


def hidden_accuracy_by_t(items):
    """Per t, the median over layers."""
    return ListValue(_summary(items)["hidden_accuracy_by_t"])


def text_accuracy_by_t(items):
    return ListValue(_summary(items)["text"]["accuracy"])


def t_centres(items):
    """The generated-token positions t of the tables' columns."""
    return ListValue(_summary(items)["centres"])


def trajectories(items):
    """Held-out predictions behind every accuracy (2 × samples × scenes)."""
    return _summary(items)["predictions"]


def samples_per_prompt(items):
    return _summary(items)["switches_base"]["of"]


METRICS = ("hidden_accuracy", "hidden_accuracy_se", "hidden_accuracy_best", "text_accuracy", "text_accuracy_se",
           "switches_base", "switches_variant", "trajectories", "samples_per_prompt", "hidden_accuracy_grid",
           "hidden_accuracy_by_t", "text_accuracy_by_t", "t_centres")
