"""The tuning sets of the segment rule (tests/data/langid_tuning: rule 2.0's held-out sets,
used to choose rules 2.1, 2.2 and 2.3; tests/data/langid_tuning_2.1: rule 2.1's, used to
choose rules 2.2 and 2.3; tests/data/langid_tuning_2.2: rule 2.2's, used to choose rule 2.3;
in-sample for the rules they chose): labelled by reading, rule 2.0's read a second time,
blind, where loops are a matter of degree (docs/metrics.md, "Two readers"), and rule 2.2's
read twice, blind, with a third reading where the two differ."""
import sys

from support.places import BENCHMARKS

from drift_eval.metrics.languages import TARGETS

sys.path.insert(0, str(BENCHMARKS))
import heldout_sets  # noqa: E402
import heldout_second_reading  # noqa: E402


def test_every_tuning_item_is_labelled():
    for rule, (_, sets) in heldout_sets.TUNING.items():
        for lang in TARGETS:
            items, manifest = heldout_sets.read_set(lang, sets)
            assert manifest["rule_version"] == rule
            assert all(i["label"] in heldout_sets.LABELS for i in items), (rule, lang)
            assert sorted(i["id"] for i in items) == sorted(manifest["languages"][lang]["items"]), (rule, lang)


def test_each_label_of_rule_2_2s_sets_follows_from_its_readings():
    """Rule 2.2's sets were read twice, blind; where the two readings differ, a third decides."""
    assert heldout_sets.labels_not_from_readings(heldout_sets.TUNING["2.2"][1]) == []


def test_the_second_reading_is_of_the_items_the_script_selects():
    """second_reading.json holds a label for exactly the items that the committed selection
    picks (the grey zone of loops), under the blind ids that the seeded shuffle gives them."""
    second = heldout_second_reading.read()
    for lang, chosen in heldout_second_reading.blind().items():
        assert {new: i["id"] for new, i in chosen} == {new: v["of"] for new, v in second[lang].items()}, lang
        assert all(v["label"] in heldout_sets.LABELS for v in second[lang].values()), lang


def test_docs_give_the_two_readings_as_scored():
    table = heldout_second_reading.table(heldout_second_reading.score())
    assert heldout_sets.documented(heldout_second_reading.TABLE) == table, (
        "run python benchmarks/heldout_second_reading.py score")
