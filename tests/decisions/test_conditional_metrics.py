"""Conditional metrics and metrics without a direction, as compare, the gate's messages and
the report show them: a conditional metric is labelled with its unconditional partner and
the partner is compared beside it; a metric without a direction is never better or worse."""
import glob
import json
import os

import pytest

from drift_eval.decide.compare import compare_models
from drift_eval.decide.results import load_output
from drift_eval.reports.render import build_context, render
from support.handmade_results import _task_block, write_output

N = 20


def _run(root, model, per_metric: dict, setting="none", task="drift_french_single", hib=None):
    """One run of ``task`` whose per-sample values are ``per_metric`` (None: not defined on
    that document, left out of the metric's mean as lm-eval's defined mean does)."""
    folder = os.path.join(root, model)
    os.makedirs(folder, exist_ok=True)
    samples = []
    for i in range(N):
        s = {"doc_id": i, "doc": {"id": f"req{i:02d}"}, "doc_hash": f"hash-req{i:02d}", "filter": "none",
             "resps": [["Bonjour."]], "filtered_resps": ["Bonjour."]}
        s.update({m: vs[i] for m, vs in per_metric.items()})
        samples.append(s)
    block = {"alias": task, "sample_len": N}
    for m, vs in per_metric.items():
        defined = [{m: v} for v in vs if v is not None]
        block.update(_task_block(task, defined, [m]))
    block["alias"] = task
    doc = {"results": {task: block}, "configs": {task: {}}, "higher_is_better": {task: hib or {}},
           "n-samples": {task: {"original": N, "effective": N}},
           "config": {"model": "hf-drift", "model_args": {"pretrained": f"/models/{model}"}}}
    with open(os.path.join(folder, "results_2026-02-01T00-00-00.000000.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    with open(os.path.join(folder, f"samples_{task}_2026-02-01T00-00-00.000000.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(s) + "\n" for s in samples)
    return folder


def test_a_conditional_metric_is_labelled_and_its_partner_compared(tmp_path):
    # baseline: 10 answers start French, 2 of them leave (drift_given_start 2/10, started_then_left 2/20);
    # candidate: 16 start French, 4 leave (4/16 given the start, 4/20 of all)
    base_start = [1] * 10 + [0] * 10
    cand_start = [1] * 16 + [0] * 4
    base_left = [1, 1] + [0] * 18
    cand_left = [1, 1, 1, 1] + [0] * 16
    for model, start, left in (("base", base_start, base_left), ("cand", cand_start, cand_left)):
        _run(str(tmp_path), model, {
            "drift_given_start": [float(l) if s else None for s, l in zip(start, left)],
            "started_then_left": [float(l) for l in left],
            "starts_french": [float(s) for s in start]})
    out = load_output(str(tmp_path))
    rows = {c.metric: c for c in compare_models(out, out, "cand", "base")}
    given, partner = rows["drift_given_start"], rows["started_then_left"]
    # compared on the 10 documents that started French in both runs: the runs' outcomes chose them
    assert given.n == 10 and given.conditional_on == "started_then_left"
    assert partner.n == N and partner.conditional_on is None
    assert partner.difference.difference == pytest.approx(2 / 20)
    assert "(conditional: on the documents where it is defined in both runs" in given.where()
    assert "on every document: started_then_left)" in given.describe()
    assert "conditional" not in partner.where()
    md = render(out, "md", baseline="base")
    assert "`drift_given_start` (conditional; on every document: `started_then_left`)" in md
    html = render(out, "html", baseline="base")
    assert "conditional; on every document: started_then_left" in html


def test_a_metric_without_a_direction_is_neither_better_nor_worse(tmp_path):
    # words_last_turn has no direction (higher_is_better: null): half the candidate's last turns are
    # 10 words longer, none shorter (10 differences of one sign: the exact sign-flip p is 2/1024)
    task = "drift_french_multiturn_fixed"
    _run(str(tmp_path), "base", {"words_last_turn": [50.0] * N}, task=task, hib={"words_last_turn": None})
    _run(str(tmp_path), "cand", {"words_last_turn": [60.0] * 10 + [50.0] * 10}, task=task,
         hib={"words_last_turn": None})
    out = load_output(str(tmp_path))
    [c] = [c for c in compare_models(out, out, "cand", "base") if c.metric == "words_last_turn"]
    assert c.higher_is_better is None and c.difference.p_value == pytest.approx(2 / 1024)
    assert c.difference.verdict == "significant"
    ctx = build_context(out, baseline="base")
    [row] = [r for s in ctx["sections"] if s["id"] == "baseline" for r in s["rows"]
             if r["metric"] == "words_last_turn"]
    assert row["reading"] == "significant difference" and row["significant"]


def test_the_audit_shows_an_answer_with_no_known_segment_as_undetermined(tmp_path):
    write_output(str(tmp_path), settings=("none",))
    [path] = glob.glob(str(tmp_path / "none" / "*" / "samples_drift_french_single_*.jsonl"))
    rows = [json.loads(x) for x in open(path, encoding="utf-8")]
    rows[3]["language_timeline"] = ["unknown"] * 4  # a French answer (doc 3) whose segments are all unknown
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    out = load_output(str(tmp_path))
    [block] = [b for s in build_context(out)["sections"] if s["id"] == "audit" for b in s["blocks"]]
    # 10 of 20 answers left French (docs 10-19); doc 3 is neither one that left nor one that stayed
    assert block["left"] == 10 and block["undetermined"] == 1 and block["answers"] == 20
    assert "10 of 20 answers not kept in French, 1 undetermined" in render(out, "html")
