"""position_bias: rollout-predicted vs gradient influence profiles, served by hf-drift."""
from __future__ import annotations

import json

import datasets
import numpy as np

from drift_eval.errors import DriftUsageError
from drift_eval.plugin.request_types import POSITION_PROFILE
from drift_eval.plugin.task_base import YamlTask
from drift_eval.settings import int_option

ROLLOUTS = ("residual_aware", "attention_only", "abnar_zuidema")


def load_settings(length: int = 64, sequences: int = 8, **_metadata):
    """One doc: the sequence length and count (``--metadata '{"length": 32}'``)."""
    length, sequences = int_option("position_bias length", length, 2), int_option("position_bias sequences", sequences, 1)
    return {"test": datasets.Dataset.from_list([{"length": length, "sequences": sequences}])}


class PositionBiasTask(YamlTask):
    def construct_requests(self, doc, ctx, **kwargs):
        return self.request(doc, POSITION_PROFILE, {"length": doc["length"], "sequences": doc["sequences"]}, **kwargs)


PROFILES = (*ROLLOUTS, "gradient")


class Profile(tuple):
    """An influence profile as a metric value: a JSON array in lm-eval's results file, and a
    short summary in lm-eval's printed table (which would print every position)."""

    def __str__(self):
        if not self:
            return "profile (empty)"
        peak = max(range(len(self)), key=self.__getitem__)
        return f"profile of {len(self)}, peak {self[peak]:.3f} at {peak}"

    def __format__(self, spec):
        return str(self)


def mean_profile(profiles):
    """lm-eval aggregation of per-doc profiles: the position-wise mean (a ``Profile``)."""
    profiles = [list(p) for p in profiles]
    if not profiles:
        return Profile()
    if len({len(p) for p in profiles}) != 1:
        raise DriftUsageError("position_bias docs gave profiles of different lengths; use one --metadata length")
    return Profile(float(v) for v in np.mean(np.asarray(profiles, dtype=float), axis=0))


def process_results(doc, results):
    res = json.loads(results[0])
    out = {f"profile_{name}": res["profiles"][name] for name in ROLLOUTS}
    out["profile_gradient"] = res["gradient"]
    for name in ROLLOUTS:
        c = res["comparison"][name]
        out[f"wasserstein_{name}"] = c["with_position_0"]["wasserstein"]
        out[f"wasserstein_{name}_no_pos0"] = c["without_position_0"]["wasserstein"]
        out[f"spearman_{name}"] = c["with_position_0"]["spearman"]
    return out
