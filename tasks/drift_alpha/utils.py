"""drift_alpha (hidden-state prompt forgetting, one task per variant axis) and drift_ppl
(perplexity of the continuations after the prompt): docs, requests and aggregation.

Each doc is one scene. Its request asks ``hf-drift`` to teacher-force the scene's base
prompt and its variant with the shared continuations (under the run's compensation) and
answers with the scene's signal and noise curves (in the logged sample). The aggregation
pools the scenes and fits α and β per layer (``drift_eval.metrics.alpha``).

Options (``--metadata``): ``continuations`` (``bundled``, ``wikitext`` or a file),
``n_continuations`` (16), ``continuation_length`` (1031 tokens: 7 octave windows), ``num_scenes`` (20),
``bootstrap_iters`` (1000), ``decompose`` (false: with true, the direct / relay decomposition
per layer, which needs ``attention=eager``; README.md).
"""
from __future__ import annotations

import json
import math

import datasets

from drift_eval.errors import DriftUsageError
from drift_eval.measure.continuations import read_continuations
from drift_eval.metrics import alpha as am
from drift_eval.metrics.values import ListValue
from drift_eval.plugin.request_types import CONTINUATION_NLL, PROMPT_OFFSETS
from drift_eval.plugin.task_base import YamlTask
from drift_eval.settings import int_option
from drift_eval.taskdata.alpha import AXES, read_scenes
from drift_eval.taskdata.alpha import read_continuations as bundled_continuations  # the "bundled" source

DEFAULTS = {"continuations": "bundled", "n_continuations": 16, "continuation_length": am.length_for(7), "num_scenes": 20,
            "bootstrap_iters": 1000, "decompose": False}
#: the decomposition's headline metrics (medians over layers, and the largest |α_predicted − α_measured|)
DECOMPOSITION_METRICS = ("alpha_direct", "alpha_relay", "alpha_predicted", "alpha_gap", "relay_share")


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise DriftUsageError(f"{name} must be true or false, got {value!r}")


def _scenes(num_scenes) -> list[dict]:
    scenes = read_scenes()
    return scenes[:int_option("num_scenes", num_scenes, 2, len(scenes))]


def load_axis(axis: str, num_scenes=DEFAULTS["num_scenes"], bootstrap_iters=DEFAULTS["bootstrap_iters"],
              decompose=DEFAULTS["decompose"], **_metadata):
    """``custom_dataset``: one doc per scene, holding its base prompt and ``axis`` variant."""
    if axis not in AXES:
        raise DriftUsageError(f"unknown axis '{axis}': use one of {', '.join(AXES)}")
    _flag(decompose, "decompose")
    docs = [{"scene": s["id"], "axis": axis, "base": s["base"], "variant": s[axis],
             "bootstrap_iters": int_option("bootstrap_iters", bootstrap_iters, 0)} for s in _scenes(num_scenes)]
    return {"test": datasets.Dataset.from_list(docs)}


def load_prompts(num_scenes=DEFAULTS["num_scenes"], **_metadata):
    """``custom_dataset`` for drift_ppl: one doc per scene (its base prompt)."""
    return {"test": datasets.Dataset.from_list([{"scene": s["id"], "prompt": s["base"]}
                                                 for s in _scenes(num_scenes)])}


class _OptionsTask(YamlTask):
    def option(self, name):
        meta = self.config.metadata or {}
        return meta.get(name, DEFAULTS[name])

    def continuations(self) -> list[str]:
        """The shared continuations, read once per task (every doc's request carries them)."""
        key = (self.option("continuations"), int_option("n_continuations", self.option("n_continuations"), 2))
        if getattr(self, "_continuations", (None,))[0] != key:
            self._continuations = (key, read_continuations(*key, bundled=bundled_continuations))
        return self._continuations[1]

    def length(self):
        v = self.option("continuation_length")
        return None if v in (None, "", "shortest") else int_option("continuation_length", v, am.length_for(2))



class _ByName(dict):
    """lm-eval's metric tables plus the per-layer entries (``alpha_l07``, ...), which are
    known only once the model's depth is: lm-eval looks every metric up by name."""

    def __init__(self, base, fn):
        super().__init__(base)
        self._fn = fn

    def __missing__(self, key):
        return self._fn(key)


_summaries: dict = {}


def _summary(items) -> dict:
    """The pooled fits of one task's scenes, computed once for all of its metrics (lm-eval
    hands every metric the same per-scene answers); with the decomposition's terms in the
    answers, also ``decomposition`` (``drift_eval.metrics.alpha.decomposition``)."""
    key = tuple(id(x) for x in items)
    hit = _summaries.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], items)):
        centres = items[0]["centres"]
        if any(x["centres"] != centres for x in items):
            raise DriftUsageError("scenes were measured with different windows; rerun them together")
        iters = int(items[0].get("bootstrap_iters", DEFAULTS["bootstrap_iters"]))
        _summaries.clear()
        summary = am.summarise([x["signal"] for x in items], [x["noise"] for x in items], centres, iters=iters)
        if all("parts" in x for x in items):
            summary["decomposition"] = am.decomposition([x["parts"]["signal"] for x in items],
                                                        [x["signal"] for x in items], centres,
                                                        items[0]["parts"]["names"], iters=iters)
        hit = _summaries[key] = (list(items), summary)
    return hit[1]


def alpha_median(items):
    """Headline: the median over layers of α_l (lower = the prompt is remembered longer)."""
    return _summary(items)["alpha_median"]


def alpha_median_se(items):
    """Bootstrap-over-scenes standard error of ``alpha``."""
    return _summary(items)["alpha_median_se"]


def beta_median(items):
    return _summary(items)["beta_median"]


def beta_median_se(items):
    return _summary(items)["beta_median_se"]


#: the decomposition's per-layer lists, by metric name
DECOMPOSITION_LAYERS = {
    "alpha_direct_layers": lambda d: d["alpha"]["direct"], "alpha_relay_layers": lambda d: d["alpha"]["relay"],
    "alpha_residual_layers": lambda d: d["alpha"]["residual"], "alpha_mlp_layers": lambda d: d["alpha"]["mlp"],
    "alpha_predicted_layers": lambda d: d["alpha_predicted"], "alpha_measured_layers": lambda d: d["alpha_measured"],
    "difference_layers": lambda d: d["difference"], "difference_se_layers": lambda d: d["difference_se"],
    "relay_share_layers": lambda d: d["relay_share"]}


def _decomposition_metric(name):
    """The decomposition's metrics: headlines (medians over layers; ``alpha_gap`` is the
    largest |α_predicted − α_measured| over layers) and per-layer lists."""

    def agg(items):
        dec = _summary(items)["decomposition"]
        if name in DECOMPOSITION_LAYERS:
            return ListValue(DECOMPOSITION_LAYERS[name](dec))
        return dec["max_abs_difference"] if name == "alpha_gap" else dec["medians"][name]
    return agg


def _layer_metric(name):
    """``alpha_l07`` / ``beta_l07``: the fit of that layer's scene-pooled signal / noise (and
    the decomposition's metrics, see ``_decomposition_metric``)."""
    if name in DECOMPOSITION_METRICS or name in DECOMPOSITION_LAYERS:
        return _decomposition_metric(name)
    prefix, _, layer = name.rpartition("_l")
    if prefix not in ("alpha", "beta") or not layer.isdigit():
        raise KeyError(name)

    def agg(items):
        exponent, _, _ = am.power_law_fit(items[0]["centres"], am.pool([x["curve"] for x in items]))
        return float(exponent)
    return agg


def process_alpha(doc, results):
    """The headline metrics get the scene's whole answer (all layers' curves; the
    aggregation pools the scenes and bootstraps over them); ``alpha_lNN`` / ``beta_lNN`` get
    only that layer's signal / noise curve."""
    res = dict(json.loads(results[0]), bootstrap_iters=doc.get("bootstrap_iters", DEFAULTS["bootstrap_iters"]))
    n = int(res["layers"])
    out = {name: res for name in ("alpha", "alpha_se", "beta", "beta_se")}
    if "parts" in res:
        out.update({name: res for name in (*DECOMPOSITION_METRICS, *DECOMPOSITION_LAYERS)})
    for prefix, curves in (("alpha", res["signal"]), ("beta", res["noise"])):
        for layer in range(n):
            out[am.layer_key(prefix, layer, n)] = {"curve": curves[layer], "centres": res["centres"]}
    return out


class AlphaTask(_OptionsTask):
    """One ``prompt_offsets`` request per scene; α and β per layer from the pooled scenes."""

    def construct_requests(self, doc, ctx, **kwargs):
        spec = {"scene": doc["scene"], "axis": doc["axis"], "base": doc["base"], "variant": doc["variant"],
                "continuations": self.continuations(), "length": self.length(),
                "decompose": _flag(self.option("decompose"), "decompose")}
        return self.request(doc, PROMPT_OFFSETS, spec, **kwargs)

    def aggregation(self):
        return _ByName(super().aggregation(), _layer_metric)

    def higher_is_better(self):
        return _ByName(super().higher_is_better(),
                       lambda name: False if name.startswith("alpha_l") or name in ("alpha_direct", "alpha_relay",
                                                                                   "alpha_predicted", "alpha_gap")
                       else None)


class PerplexityTask(_OptionsTask):
    """One ``continuation_nll`` request per scene: the continuations after its base prompt."""

    def construct_requests(self, doc, ctx, **kwargs):
        spec = {"scene": doc["scene"], "prompt": doc["prompt"], "continuations": self.continuations(),
                "length": self.length()}
        return self.request(doc, CONTINUATION_NLL, spec, **kwargs)


def process_perplexity(doc, results):
    res = json.loads(results[0])
    nll, n = sum(res["nll"]), res["tokens"] * len(res["nll"])
    base = sum(res.get("nll_none", res["nll"]))
    item = (nll, base, n)
    return {"perplexity": item, "perplexity_none": item, "perplexity_change": item, "nll_per_token": nll / n}


def perplexity(items):
    return math.exp(sum(i[0] for i in items) / sum(i[2] for i in items))


def perplexity_none(items):
    return math.exp(sum(i[1] for i in items) / sum(i[2] for i in items))


def perplexity_change(items):
    """Relative change against no compensation (0 when the run has none)."""
    return perplexity(items) / perplexity_none(items) - 1.0
