"""The segment rule's "not kept" tested per language, out of sample (tests/data/langid_heldout):
sets drawn after the rule was frozen, each item labelled by two blind readings and a third
where they differ, each set with at least 80 segments that left the language, 80 that stayed
in it and 30 degenerate or made-up ones, at least half of them real model answers of both
models, single-turn and eight-turn. The bar: on every target language, the 95% Wilson lower
bound of both the precision and the recall of "not kept" is at least 0.93. The sets hold for
the rule they were drawn for: a changed rule fails here until it has a fresh draw. Code that
gives every output of the frozen rule on the 21 791 texts of its sets and fresh runs
(tests/data/langid_heldout/rule_outputs.json) is a revision of the same rule, not a change.

Rule 2.3 meets both bars in all 14 languages (docs/metrics.md, "Held out per language (rule
2.3)"). A language under a bar would be a strict expected failure here, so that one that
starts to pass fails and the docs and these lists are brought up to date."""
import sys

import pytest

from support.places import BENCHMARKS

from drift_eval.metrics import langid
from drift_eval.metrics.languages import TARGETS

sys.path.insert(0, str(BENCHMARKS))
import heldout_draw  # noqa: E402
import heldout_sets  # noqa: E402
import rule_outputs  # noqa: E402

# rule 2.3's recall and precision of "not kept" under the bar on these languages' held-out sets
RECALL_UNDER_BAR: set = set()
PRECISION_UNDER_BAR: set = set()


def _expected_failure(langs: set, reason: str) -> list:
    return [pytest.param(lang, marks=pytest.mark.xfail(strict=True, reason=reason)) if lang in langs else lang
            for lang in TARGETS]


@pytest.fixture(scope="module")
def results():
    answers: dict = {}
    return {lang: heldout_sets.score(lang, answers) for lang in TARGETS}


def test_the_sets_were_drawn_for_the_rule_in_use():
    """The rule's files are those the sets were drawn for, or a revision of them listed by
    ``rule_outputs.py revise`` (which lists it only when no recorded output differs)."""
    _, manifest = heldout_sets.read_set(TARGETS[0])
    record = rule_outputs.read_record()
    assert (record["rule_version"], record["rule_fingerprint"]) == (manifest["rule_version"], manifest["rule_fingerprint"])
    revisions = [r["fingerprint"] for r in record["revisions"]]
    assert manifest["rule_version"] == langid.RULE_VERSION
    assert langid.rule_fingerprint() in [manifest["rule_fingerprint"], *revisions], (
        "the segment rule's files changed since the held-out sets were drawn: if it still gives every recorded "
        "output, list it as a revision (python benchmarks/rule_outputs.py revise); otherwise it is a new rule, "
        "which needs a fresh draw (python benchmarks/heldout_draw.py draw) and new labels")
    assert sorted(manifest["languages"]) == sorted(TARGETS)


@pytest.mark.slow
def test_the_rule_in_use_gives_every_recorded_output_of_the_frozen_rule():
    """Every field of every segment label, on each of the 21 791 texts, is what the rule gave
    when the sets were drawn (a revision may change how the rule is computed, never what it
    says)."""
    record = rule_outputs.read_record()
    assert record["texts"] == sum(map(len, record["outputs"].values()))
    assert rule_outputs.differences(record["outputs"], rule_outputs.outputs()) == []


def test_every_set_is_what_the_seeded_script_draws():
    """The committed sets and draw.json are the seeded script's: the draw, then the later
    replies and the top-ups by count, each from the set as it stood (a set edited by hand, or
    drawn from other answers, fails here)."""
    all_units = {lang: heldout_draw.units(lang) for lang in TARGETS}
    for lang in TARGETS:
        items, manifest = heldout_sets.read_set(lang)
        texts, strata = heldout_draw.redraw(lang, all_units)
        assert texts == [i["text"] for i in items], lang
        assert strata == manifest["languages"][lang]["items"], lang


def test_each_label_follows_from_its_readings():
    """Every item was read twice, blind; where the two readings differ, a third decides."""
    assert heldout_sets.labels_not_from_readings() == []


def test_a_label_is_the_two_readings_or_the_third_where_they_differ():
    assert heldout_sets.adjudicated(["kept", "kept"]) == "kept"
    assert heldout_sets.adjudicated(["kept", "degenerate"]) is None  # the third is still to read
    assert heldout_sets.adjudicated(["kept", "degenerate", "degenerate"]) == "degenerate"
    assert heldout_sets.adjudicated(["left", "degenerate", "kept"]) == "kept"
    assert heldout_sets.adjudicated(["left"]) is None


@pytest.mark.parametrize("lang", TARGETS)
def test_each_set_is_labelled_large_enough_from_both_models(lang, results):
    items, manifest = heldout_sets.read_set(lang)
    assert all(i["label"] in heldout_sets.LABELS for i in items), "every item is labelled by reading"
    assert sorted(i["id"] for i in items) == sorted(manifest["languages"][lang]["items"])
    result = results[lang]
    for label, least in heldout_sets.MIN_COUNTS.items():
        assert result["labels"][label] >= least, (lang, label, result["labels"])
    real = [i["source"] for i in items if i["unit"] in ("segment", "reply")]
    assert {s.split("_")[0] for s in real} == {"smollm2", "qwen"}, "both bundled models' answers"
    assert {i["unit"] for i in items} >= {"segment", "reply"}, "single-turn segments and eight-turn replies"


@pytest.mark.parametrize("lang", TARGETS)
def test_at_least_half_of_each_set_is_real_model_answers(lang, results):
    assert results[lang]["real"] >= 0.5, (lang, results[lang]["real"])


@pytest.mark.parametrize("lang", _expected_failure(PRECISION_UNDER_BAR, "rule 2.3 calls some kept pieces not kept"))
def test_what_the_rule_calls_not_kept_is_not_kept(lang, results):
    assert results[lang]["precision_lower"] >= heldout_sets.BOUND, (lang, results[lang])


@pytest.mark.parametrize("lang", _expected_failure(RECALL_UNDER_BAR, "rule 2.3 keeps pieces readers call not kept"))
def test_what_readers_call_not_kept_the_rule_does_not_keep(lang, results):
    assert results[lang]["recall_lower"] >= heldout_sets.BOUND, (lang, results[lang])


def test_docs_give_each_languages_figures_as_scored(results):
    assert heldout_sets.documented() == heldout_sets.table(results), (
        "docs/metrics.md's held-out table differs from the sets: run python benchmarks/heldout_draw.py score")
