"""The report's decodability and direct / relay panels, from a hand-made results file with
known values (and, slow, from a real lm_eval run)."""
import json
import os

import pytest

from drift_eval.decide.results import load_output
from drift_eval.metrics import stats
from drift_eval.reports.render import build_context, render
from support.handmade_results import write_output


def _write(root):
    folder = os.path.join(root, "none", "__models__tiny")
    os.makedirs(folder)
    grid = [[0.5, 0.7, 0.8125], [0.5, 0.9, 0.95]]
    results = {
        "drift_decode_translation": {
            "alias": "drift_decode_translation", "hidden_accuracy,none": 0.8125, "hidden_accuracy_best,none": 0.95,
            "text_accuracy,none": 0.75, "switches_base,none": 1.5, "switches_variant,none": 7.5,
            "trajectories,none": 1280, "samples_per_prompt,none": 32, "hidden_accuracy_grid,none": grid,
            "hidden_accuracy_by_t,none": [0.5, 0.7, 0.8125], "text_accuracy_by_t,none": [0.6, 0.7, 0.75],
            "t_centres,none": [16, 32, 64]},
        "drift_alpha_detail": {
            "alias": "drift_alpha_detail", "alpha,none": 0.55, "alpha_se,none": 0.02, "alpha_predicted,none": 0.57,
            "alpha_gap,none": 0.04, "alpha_direct,none": 0.9, "alpha_relay,none": 0.3, "relay_share,none": 0.25,
            "alpha_predicted_layers,none": [0.6, 0.57], "alpha_measured_layers,none": [0.58, 0.55],
            "alpha_direct_layers,none": [0.95, 0.9], "alpha_relay_layers,none": [0.2, 0.3]},
        "drift_alpha_translation": {
            "alias": "drift_alpha_translation", "alpha,none": 0.45, "alpha_predicted,none": 0.6, "alpha_gap,none": 0.15,
            "alpha_predicted_layers,none": [0.6, 0.6], "alpha_measured_layers,none": [0.45, 0.45]},
    }
    doc = {"results": results, "configs": {t: {} for t in results}, "higher_is_better": {},
           "n-samples": {t: {"original": 20, "effective": 20} for t in results},
           "config": {"model": "hf-drift", "model_args": {"pretrained": "/models/tiny"}}}
    with open(os.path.join(folder, "results_2026-01-01T00-00-00.000000.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return root


def test_panels_hold_the_figures_next_to_the_published_ones(tmp_path):
    ctx = build_context(load_output(_write(str(tmp_path / "out"))))
    sections = {sec["id"]: sec for sec in ctx["sections"]}
    [dec] = sections["decodability"]["panels"]
    [row] = dec["rows"]
    assert row["axis"] == "translation" and row["t"] == 64 and row["best_layer"] == 1
    assert (row["lower"], row["upper"]) == pytest.approx(stats.wilson_interval(1040, 1280))
    assert "0.81 (Qwen2.5-0.5B), 0.84 (Pythia-160m)" in row["published"]
    assert "4–11 of 32" in dec["switches_published"]
    [rel] = sections["direct-relay"]["panels"]
    rows = {r["axis"]: r for r in rel["rows"]}
    assert rows["detail"]["within"] and not rows["translation"]["within"]
    html = render(load_output(str(tmp_path / "out")), "html")
    assert 'id="decodability"' in html and 'id="direct-relay"' in html
    assert "0.812 [0.790, 0.833]" in html and "<svg" in html
    exported = {(r["task"], r["metric"], r["statistic"]): r["value"] for r in ctx["records"]}
    assert exported[("drift_decode_translation", "hidden_accuracy", "layer 1, t=32")] == 0.9
    assert exported[("drift_alpha_detail", "alpha_predicted", "value")] == 0.57
    assert "<td>1</td><td>0.500 [0.473, 0.527]</td><td>0.900 [0.882, 0.915]</td>" in html  # layer 1, every t
    md = render(load_output(str(tmp_path / "out")), "md")
    assert "## What free generation still carries (decodability)" in md
    assert "| `detail` | 0.550 | 0.570 | 0.040 | 0.900 | 0.300 | 0.250 | yes |" in md
    assert "| `translation` | 0.450 | 0.600 | 0.150 | — | — | — | no |" in md
    assert "| 0 | 0.500 [0.473, 0.527] | 0.700 [0.674, 0.724] | 0.812 [0.790, 0.833] |" in md
    assert "](plots/" in md and "<svg" not in md  # curves as separate files (GitHub strips inline SVG)


def test_no_panels_without_their_tasks(tmp_path):
    ctx = build_context(load_output(write_output(str(tmp_path / "out"), settings=("none",))))
    assert not {"decodability", "direct-relay"} & {sec["id"] for sec in ctx["sections"]}
    assert 'id="decodability"' not in render(load_output(str(tmp_path / "out")), "html")
