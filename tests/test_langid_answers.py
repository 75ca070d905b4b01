"""The segment rule judged on whole answers it was not tuned on: the held-out answer set
(tests/data/langid_answers.jsonl, drawn by benchmarks/answer_set.py from the committed runs
of both models, labelled by reading)."""
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


def test_the_rule_is_right_on_at_least_93_percent_of_held_out_answers_and_no_worse_than_plain_fasttext(scored):
    """Measured: the rule 0.940, plain fastText 0.933 (126 and 125 of 134). The ablations
    (benchmarks/results/langid_answers.json) do not all pass the bar of keeping a step only
    where it helps: without the English-grammar step 0.948, without cleaning or the margin
    step no verdict changes (docs/metrics.md, "Validation on whole answers"); the steps
    stay until the rule is revised against this set, with a task version of its own."""
    _, res = scored
    assert res["rule"]["accuracy"] >= 0.93, res["rule"]
    assert res["rule"]["accuracy"] >= res["plain fastText"]["accuracy"]
    assert res["rule"]["n"] == res["plain fastText"]["n"] >= 120
