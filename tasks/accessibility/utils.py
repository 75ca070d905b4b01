"""accessibility: cramming capacity (n50 against m) and its theoretical bound, served by hf-drift."""
from __future__ import annotations

import json
from dataclasses import asdict, fields

import datasets
from lm_eval.api.metrics import mean

from drift_eval.logs import log
from drift_eval.plugin.request_types import ACCESSIBILITY
from drift_eval.plugin.task_base import YamlTask



def _option_names():
    from drift_eval.measure.cramming import Settings  # deferred, start-up: loads torch

    return [f.name for f in fields(Settings)]


def load_settings(**metadata):
    """One doc: the cramming settings. ``--metadata`` keys named like ``Settings`` fields
    (``ms``, ``lengths``, ``strings``, ``max_steps``, ...) set them; lm-eval's other
    metadata (model arguments, ``version``) is left alone."""
    from drift_eval.measure.cramming import Settings  # deferred, start-up: loads torch

    options = {k: v for k, v in metadata.items() if k in _option_names()}
    settings = Settings.from_options(**options)  # bad values stop here, with one line
    return {"test": datasets.Dataset.from_list([{"settings": json.dumps(asdict(settings))}])}


class AccessibilityTask(YamlTask):
    def construct_requests(self, doc, ctx, **kwargs):
        return self.request(doc, ACCESSIBILITY, doc["settings"], **kwargs)

    def _ms(self):
        try:
            return json.loads(self.dataset["test"][0]["settings"])["ms"]
        except Exception:
            return []

    def aggregation(self):
        return {**super().aggregation(), **{f"n50_m{m}": mean for m in self._ms()}}

    def higher_is_better(self):
        return {**super().higher_is_better(), **{f"n50_m{m}": True for m in self._ms()}}


def process_results(doc, results):
    """The answer's numbers as metrics. ``n50_m<m>`` is left out for an ``m`` whose
    accessibility never crossed 50% over the lengths tried (the sample says on which side it
    lies); the line (``n50_slope``, ``n50_intercept``, ``n50_r2``) and ``slope_ratio`` need
    two such ``m`` and a positive slope."""
    res = json.loads(results[0])
    table = res["accessibility"]
    cells = [v for by_n in table.values() for v in by_n.values()]
    out = {"mean_accessibility": sum(cells) / len(cells), "bound_C": res["bound"]["C"],
           "radius_r": res["bound"]["r"], "eps": res["bound"]["eps"]}
    for m, fit in res["n50"].items():
        if fit["n50"] is None:
            log.warning("accessibility: n50 for m=%s is %s the lengths tried (%s)", m,
                        "above" if fit["status"] == "above_range" else "below", ", ".join(table[m]))
        else:
            out[f"n50_m{m}"] = fit["n50"]
    line = res["line"]
    if line["slope"] is not None:
        out.update(n50_slope=line["slope"], n50_intercept=line["intercept"], n50_r2=line["r2"])
    if res["slope_ratio"] is not None:
        out["slope_ratio"] = res["slope_ratio"]
    return out
