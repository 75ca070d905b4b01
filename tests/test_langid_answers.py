"""The segment rule judged on whole answers it was not tuned on: the held-out answer set
(tests/data/langid_answers.jsonl, drawn by benchmarks/answer_set.py from the committed runs
of both models, labelled by reading). The full rule must do at least as well as every
ablation of it (one step switched off), and every step must earn its place: on some
held-out answer, the rule with the step is right where the rule without it is wrong."""
import os
import sys

import pytest

from drift_eval.files import read_jsonl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import answer_set  # noqa: E402


@pytest.fixture(scope="module")
def scored():
    rows = read_jsonl(answer_set.OUT, "answer set", required=("id", "source", "segments", "label", "leaves_at"))
    return rows, answer_set.score(rows)


def test_the_answer_set_is_whole_answers_of_both_models_every_one_labelled(scored):
    rows, _ = scored
    assert len(rows) >= 120 and all(r["label"] in answer_set.LABELS for r in rows)
    assert {r["source"].split("/")[0] for r in rows} >= {"smollm2_multiturn", "qwen_multiturn"}
    assert all((r["leaves_at"] is not None) == (r["label"] == "leaves") for r in rows)
    assert all(r["leaves_at"] is None or 1 <= r["leaves_at"] <= len(r["segments"]) for r in rows)
    assert all("".join(r["segments"]) in r["text"] for r in rows)  # the segments are the answer's own


def test_the_full_rule_does_no_worse_than_any_ablation_and_every_step_changes_a_verdict_for_the_better(scored):
    rows, res = scored
    full = res["rule"]
    assert full["accuracy"] >= 0.95, full
    for name, r in res.items():
        if name.startswith("without "):
            assert full["accuracy"] >= r["accuracy"], (name, r["accuracy"], full["accuracy"])
            better = set(r["wrong"]) - set(full["wrong"])
            assert better, f"{name}: the step changes no held-out verdict for the better"
