"""The segment rule for "left French", validated on the hand-labelled set, and its parts."""
import os

import pytest

from support.places import DATA

from drift_eval.files import read_jsonl
from drift_eval.metrics import langid
from drift_eval.metrics.stats import precision_recall

DATA = os.path.join(DATA, "langid_segments.jsonl")


def test_rule_reaches_precision_and_recall_of_095_on_the_labelled_set():
    rows = read_jsonl(DATA, required=("text", "left_french", "category"))
    assert len(rows) >= 150 and {r["category"] for r in rows} >= {
        "french_named_entities", "french_lists_tables", "french_code", "french_degenerate", "english_switch",
        "other_language_switch", "mixed"}
    res = precision_recall([langid.left_language(r["text"]) for r in rows], [r["left_french"] for r in rows])
    assert res["precision"] >= 0.95 and res["recall"] >= 0.95, res


def test_precision_recall_known_counts():
    res = precision_recall([True, True, False, False, True], [True, False, True, False, True])
    assert (res["tp"], res["fp"], res["fn"], res["tn"]) == (2, 1, 1, 1)
    assert res["precision"] == pytest.approx(2 / 3) and res["recall"] == pytest.approx(2 / 3)


def test_names_code_and_quotes_are_not_what_decides():
    text = ('Pour le dîner, préparez un risotto alla Milanese, puis des "Arancini di Riso" et une Torta '
            'Caprese. Le code `for item in menu: print(item)` affiche la liste.')
    cleaned = langid.clean_for_lid(text)
    assert "Milanese" not in cleaned and "Arancini" not in cleaned and "print" not in cleaned
    assert "préparez" in cleaned and cleaned.startswith("Pour le dîner")


def test_french_grammar_overrules_a_foreign_top_label():
    [label] = langid.label_segments(["les pizza margherita et les spaghetti alla carbonara avec des "
                                     "tagliatelle al ragù dans une osteria pour les amis"])
    assert label.lang == "fr"


def test_a_low_confidence_third_language_inside_a_loop_is_unknown():
    """A French loop from a SmolLM2 answer is Spanish to fastText (0.22): a loop, so unknown,
    not a switch."""
    loop = "La nourir de la mer cérébro:\n\n" * 12
    [label] = langid.label_segments([loop])
    assert label.fasttext == "es" and label.score < langid.SegmentRule.low_confidence
    assert label.degenerate >= langid.SegmentRule.degenerate
    assert (label.lang, label.reason) == (langid.UNKNOWN, "loop")


def test_english_grammar_overrules_a_third_language_top_label():
    """An English list repeated is Cebuano to fastText (0.52): English by its function words,
    so the answer counts as having left French, loop or not."""
    loop = "- 200g of fresh basil leaves\n" * 12
    [label] = langid.label_segments([loop])
    assert label.fasttext == "ceb" and label.degenerate >= langid.SegmentRule.degenerate
    assert (label.lang, label.reason) == ("en", "function_words")
    [fresh] = langid.label_segments(["- 200g of fresh basil leaves\n- 3 cloves of garlic, crushed\n"
                                     "- 50g of toasted pine nuts\n- 100ml of good olive oil\n"])
    assert fresh.lang == "en"


@pytest.mark.parametrize("text, lang", [
    ("The cat sleeps on the sofa while the rain falls on the city and the dog barks at the door.", "en"),
    ("Il gatto dorme sul divano mentre la pioggia cade sulla città e il cane abbaia alla porta.", "it"),
    ("Le chat dort sur le canapé pendant que la pluie tombe sur la ville et le chien aboie.", "fr"),
])
def test_plain_sentences_keep_their_language(text, lang):
    assert langid.label_segments([text])[0].lang == lang


def test_segments_are_cut_from_the_text_itself():
    text = "Bonjour le monde.\n\nCeci est un test, vraiment."
    pieces = langid.segments(text, 3)
    assert "".join(pieces) == text[text.index("B"):] and pieces[1].startswith(".\n\nCeci")
