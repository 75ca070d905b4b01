"""The segment rule judged on whole answers it was not tuned on: the held-out answer set
(tests/data/langid_answers.jsonl, drawn by benchmarks/answer_set.py from the committed runs
of both models, labelled by reading)."""
import sys

import pytest

from support.places import BENCHMARKS

from drift_eval.files import read_jsonl
from drift_eval.metrics.languages import TARGETS

sys.path.insert(0, str(BENCHMARKS))
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
    """Measured: the rule 0.940, plain fastText 0.933 (126 and 125 of 134). On these French
    answers alone not every step helps (without the English-grammar step 0.948, without
    cleaning or the margin step no verdict changes); each is judged over both held-out sets
    below (docs/metrics.md, "Validation on whole answers")."""
    _, res = scored
    assert res["rule"]["accuracy"] >= 0.93, res["rule"]
    assert res["rule"]["accuracy"] >= res["plain fastText"]["accuracy"]
    assert res["rule"]["n"] == res["plain fastText"]["n"] >= 120


# ---------------------------------------------------------------------------- every target language
@pytest.fixture(scope="module")
def languages():
    rows = read_jsonl(answer_set.OUT_LANGUAGES, "answer set",
                      required=("id", "stratum", "target", "source", "segments", "segment_labels", "label", "leaves_at"))
    return rows, answer_set.score_languages(rows)


def test_the_languages_answer_set_is_labelled_segment_by_segment_in_every_language(languages):
    rows, _ = languages
    random = [r for r in rows if r["stratum"] == "random"]
    assert len(rows) >= 120 and {r["stratum"] for r in rows} == {"random", "contested"}
    assert sorted(r["target"] for r in random) == sorted(TARGETS * answer_set.RANDOM_PER_LANGUAGE)
    assert {r["source"].split("/")[1] for r in rows} == {"smollm2_single", "qwen_single", "smollm2_multiturn",
                                                         "qwen_multiturn"}
    for r in rows:
        assert len(r["segment_labels"]) == len(r["segments"]) and "".join(r["segments"]) in r["text"], r["id"]
        assert (r["label"], r["leaves_at"]) == answer_set.verdict(r["segment_labels"], r["target"]), r["id"]
    assert len({r["text"].strip() for r in rows}) == len(rows)


def test_the_rule_on_held_out_answers_of_every_language(languages):
    """Measured on the random stratum (112 answers, 8 a language): the rule 0.973 (109),
    plain fastText 0.938 (105) (docs/metrics.md, "Held out, on whole answers in every
    language")."""
    _, res = languages
    acc = res["random"]["accuracy"]
    assert acc["rule"] >= 0.93 and acc["rule"] >= acc["plain fastText"], acc


def test_every_step_of_the_rule_earns_its_place_on_held_out_answers(scored, languages):
    """Pooled over both held-out answer sets (French, scored as drift_french scores; every
    language, as drift_languages does), the full rule is right on at least as many answers
    as each ablation, and each step turns at least one verdict right that leaving it out
    gets wrong."""
    _, french = scored
    _, res = languages
    for step in answer_set.STEPS:
        fr_wins = set(french[f"without {step}"]["wrong"]) - set(french["rule"]["wrong"])
        fr_losses = set(french["rule"]["wrong"]) - set(french[f"without {step}"]["wrong"])
        wins = len(fr_wins) + len(res["steps"][step]["wins"])
        losses = len(fr_losses) + len(res["steps"][step]["losses"])
        assert wins >= losses and wins >= 1, (step, wins, losses)
