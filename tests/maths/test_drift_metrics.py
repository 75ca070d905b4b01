import json
import pickle
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.prose import ENGLISH, FRENCH, text

from drift_eval.catalogue import _hint, conditional_partner
from drift_eval.metrics import drift, langid, lid_model, stats
from drift_eval.metrics.values import ListValue
from drift_eval.taskdata.french import system_prompt
from drift_eval.tasks import metric_catalogue
from drift_eval.tasks.drift_french import utils

FR = "Le chat dort paisiblement sur le canapé pendant que la pluie tombe sur la ville. "
EN = "The cat sleeps peacefully on the sofa while the rain falls on the city. "
INSTRUCTION = system_prompt("en")
#: real answers: prose that is no loop (``FR * 30`` is one sentence thirty times: degenerate)
FRENCH_ANSWER = text(FRENCH, 8)
HALF_FRENCH = text(FRENCH, 4)
HALF_ENGLISH = text(ENGLISH, 4)


def test_all_french_answer():
    s = drift.score_response(FRENCH_ANSWER, INSTRUCTION)
    assert s["fully_french"] == 1.0 and s["french_fraction"] == 1.0 and s["time_in_french"] == 1.0
    assert s["second_half_french"] == 1.0 and s["echo_rate"] == 0.0
    assert s["langdetect_french"] == 1.0
    assert set(s["language_timeline"]) == {"fr"}
    assert [s[f"not_kept_{c}"] for c in drift.CAUSES] == [0.0, 0.0, 0.0] and s["left_for"] is None


def test_drift_to_english_half_way():
    s = drift.score_response(HALF_FRENCH + "\n\n" + HALF_ENGLISH, INSTRUCTION, segment_size=64)
    assert s["fully_french"] == 0.0
    assert 0.3 < s["french_fraction"] < 0.7 and 0.3 < s["time_in_french"] < 0.7
    assert s["second_half_french"] == 0.0
    assert s["not_kept_left"] == 1.0 and s["left_for"] == "en"


def test_an_empty_answer_is_not_kept_and_stays_in_the_headline():
    s = drift.score_response("", INSTRUCTION)
    assert s["fully_french"] == s["french_fraction"] == s["starts_french"] == s["time_in_french"] == 0.0
    assert s["not_kept_unreadable"] == 1.0 and s["not_kept_left"] == s["not_kept_degenerate"] == 0.0
    assert s["language_timeline"] == [langid.UNREADABLE]
    for metric in ("drift_given_start", "second_half_french", "line_pass_rate", "langdetect_french", "lcb_lpr"):
        assert s[metric] is None, metric  # nothing there to measure: these are not the headline


def _tokens(text):
    return len(langid.tokens(text))


def test_an_answer_of_punctuation_only_is_unreadable_not_kept():
    # punctuation marks are metric tokens but no words: every segment is unreadable
    s = drift.score_response("! " * 300, INSTRUCTION, segment_size=100)
    assert s["language_timeline"] == [langid.UNREADABLE] * 3
    assert s["fully_french"] == s["starts_french"] == s["french_fraction"] == s["time_in_french"] == 0.0
    assert s["not_kept_unreadable"] == 1.0


def test_an_unreadable_segment_after_a_french_one_ends_the_time_in_french():
    french = FRENCH[0]
    n = _tokens(french)
    s = drift.score_response(french + " " + "! " * (3 * n), INSTRUCTION, segment_size=n)
    assert s["language_timeline"] == ["fr"] + [langid.UNREADABLE] * 3
    assert s["fully_french"] == 0.0 and s["starts_french"] == 1.0 and s["french_fraction"] == 0.25
    assert s["time_in_french"] == pytest.approx(0.25) and s["not_kept_unreadable"] == 1.0
    english = ENGLISH[0]
    m = _tokens(english)
    t = drift.score_response(english + " " + "! " * m, INSTRUCTION, segment_size=m)
    assert t["language_timeline"] == ["en", langid.UNREADABLE]
    assert t["fully_french"] == 0.0 and t["starts_french"] == 0.0 and t["time_in_french"] == 0.0
    assert t["not_kept_left"] == 1.0 and t["not_kept_unreadable"] == 0.0 and t["left_for"] == "en"  # left comes first


@pytest.mark.parametrize("text", [
    "Je vais répondre uniquement en français, comme demandé.",
    "Comme demandé, voici la suite en français.",
    "I will answer in French as requested.",
    "Remember: French only.",
    "Je dois répondre en français.",
    "Answer only in French, whatever language the user writes in.",  # 5-gram of the prompt
])
def test_echo_detects_restated_instruction(text):
    assert drift.restates_instruction(text, INSTRUCTION)


@pytest.mark.parametrize("text", [
    "Le français est une langue parlée sur plusieurs continents.",
    "La recette demande trois oeufs et un peu de farine.",
    "The French revolution began in 1789.",
])
def test_echo_ignores_ordinary_mentions(text):
    assert not drift.restates_instruction(text, INSTRUCTION)


def test_echo_counts_only_the_second_half():
    first = "Je réponds uniquement en français. " + FR * 10
    assert drift.score_response(first + FR * 12, INSTRUCTION)["echo_rate"] == 0.0
    assert drift.score_response(FR * 12 + first, INSTRUCTION)["echo_rate"] == 1.0


def test_line_pass_rate_uses_eligible_lines_only():
    text = "\n".join([FR.strip(), EN.strip(), "ok merci", FR.strip()])
    assert drift.line_pass_rate(text) == pytest.approx(2 / 3)


def test_the_first_segment_not_kept_and_old_timelines():
    u = langid.UNKNOWN
    # task versions before 4.0 / 2.0 wrote "unknown" segments, passed over; code is passed over too
    assert [drift.first_foreign(t) for t in (["fr", "fr"], ["fr", u, "en"], [], [u, u])] == [None, 2, None, None]
    assert drift.first_foreign(["fr", langid.CODE, langid.DEGENERATE]) == 2
    assert not drift.determined([u, u]) and drift.determined([u, "en"])
def test_the_survival_curve_leaves_undetermined_answers_out():
    u = langid.UNKNOWN
    # two answers that say something: one leaves at segment 2, one stays; two undetermined
    timelines = [["fr", "en", "en"], ["fr", "fr", "fr"], [u, u, u], []]
    sv = drift.survival(timelines)
    assert sv.estimate == pytest.approx([1.0, 0.5, 0.5]) and sv.at_risk == [2, 2, 1]
    assert drift.survival([[u, u]]).estimate == []


def test_the_survival_curve_of_forced_length_answers_is_a_proportion_per_segment():
    # 10 answers of 4 segments: 1 never French, 2 leave at segment 2, 1 at segment 4, 6 stay
    timelines = [["en"] * 4] + [["fr", "en", "en", "en"]] * 2 + [["fr", "fr", "fr", "de"]] + [["fr"] * 4] * 6
    sv = drift.survival(timelines)
    assert sv.estimate == pytest.approx([0.9, 0.7, 0.7, 0.6])
    assert (sv.lower[1], sv.upper[1]) == pytest.approx(stats.wilson_interval(7, 10))
    assert sv.at_risk == [10, 9, 7, 7]
    agg = drift.french_survival(timelines)
    assert list(agg) == pytest.approx([0.9, 0.7, 0.7, 0.6]) and str(agg) == "4 segments, 0.600 at the end"


def test_list_values_print_as_one_short_cell_and_stay_arrays():
    layers = ListValue([0.5, float("nan"), 0.25, 1.0])
    assert str(layers) == "4 values, 0.250 to 1.000" and f"{layers:.4f}" == str(layers)
    assert str(ListValue([(0.1, 0.2), (0.3, 0.4), (0.5, 0.6)])) == "3 x 2 values, 0.100 to 0.600"  # rows
    assert str(ListValue([None, None])) == "2 values" and str(ListValue([], along="segments")) == "no segments"
    curve = ListValue([1.0, 0.75, 0.5], along="segments")
    assert str(curve) == "3 segments, 0.500 at the end" and curve == (1.0, 0.75, 0.5)
    assert json.dumps({"m": curve}) == '{"m": [1.0, 0.75, 0.5]}'  # lm-eval's results file: a JSON array
    again = pickle.loads(pickle.dumps(curve))  # gathered across ranks
    assert str(again) == str(curve) and str(pickle.loads(pickle.dumps(layers))) == str(layers)


def test_the_survival_curve_censors_answers_that_end_early():
    # Kaplan-Meier by hand: A leaves at segment 2 (index 1), B ends French after 2 segments,
    # C stays French through 4, D leaves at segment 4: S = 1, 0.75, 0.75, 0.375
    timelines = [["fr", "en", "en", "en"], ["fr", "fr"], ["fr"] * 4, ["fr", "fr", "fr", "en"]]
    sv = drift.survival(timelines)
    assert sv.estimate == pytest.approx([1.0, 0.75, 0.75, 0.375])
    assert sv.lower[3] < 0.375 < sv.upper[3]


def test_segment_scores_are_logged_beside_the_timeline():
    s = drift.score_response(HALF_FRENCH + "\n\n" + HALF_ENGLISH, INSTRUCTION, segment_size=64)
    assert len(s["language_scores"]) == len(s["language_timeline"])
    assert all(0.5 < p <= 1.0 for p in s["language_scores"])
    assert drift.mean_language_score([[0.5, 1.0], [0.75]]) == pytest.approx(0.75)




def test_start_and_drift_given_start():
    started_then_left = drift.score_response(HALF_FRENCH + "\n\n" + HALF_ENGLISH, segment_size=64)
    assert started_then_left["starts_french"] == 1.0 and started_then_left["drift_given_start"] == 1.0
    never = drift.score_response(HALF_ENGLISH + "\n\n" + HALF_FRENCH, segment_size=64)
    assert never["starts_french"] == 0.0 and never["drift_given_start"] is None  # not defined: never complied
    held = drift.score_response(FRENCH_ANSWER)
    assert held["starts_french"] == 1.0 and held["drift_given_start"] == 0.0
    looped = drift.score_response(FRENCH_ANSWER + " " + FR * 40)  # French, then a loop of one French sentence
    assert looped["starts_french"] == 1.0 and looped["drift_given_start"] == 1.0 and looped["fully_french"] == 0.0
    assert looped["not_kept_degenerate"] == 1.0 and looped["language_timeline"][-1] == langid.DEGENERATE


def test_natural_end_splits_the_answer_into_chosen_text_and_filler():
    text = HALF_FRENCH + "\n\n" + HALF_ENGLISH
    meta = {"tokens": 400, "natural_end": 100, "natural_end_chars": len(HALF_FRENCH)}
    s = drift.score_response(text, meta=meta)
    assert s["natural_end"] == 100 and s["natural_end_share"] == 0.25
    assert s["fully_french_before_end"] == 1.0 and s["french_after_end"] == 0.0 and s["fully_french"] == 0.0
    none = drift.score_response(text, meta={"tokens": 400, "natural_end": None, "natural_end_chars": None})
    assert none["natural_end"] is None and none["french_after_end"] is None
    assert none["fully_french_before_end"] == none["fully_french"] == 0.0  # the whole answer was chosen


def test_lcb_line_pass_follows_the_benchmark_rules():
    assert drift.lcb_line_pass("Oui.\nNon merci.") is None  # no line of 5 tokens: skipped, as LCB does
    assert drift.lcb_line_pass("Le chat dort sur le canapé ce soir.\nOk.") == 1.0
    assert drift.lcb_line_pass("Le chat dort sur le canapé ce soir.\nThe cat sleeps on the sofa tonight.") == 0.0


def test_degenerate_share_counts_looping_segments():
    assert drift.score_response(FR * 30)["degenerate_share"] == 1.0  # one sentence repeated: a loop
    varied = ("La photosynthèse est le processus par lequel les plantes fabriquent leur propre nourriture. "
              "Les feuilles captent la lumière du soleil grâce à un pigment vert appelé chlorophylle. Avec "
              "cette énergie, la plante transforme l'eau puisée par les racines et le dioxyde de carbone de "
              "l'air en sucre, qui sert de carburant pour grandir, et elle rejette de l'oxygène.")
    assert drift.score_response(varied)["degenerate_share"] == 0.0


def test_every_sample_is_in_the_group_headline():
    doc = {"system_prompt": INSTRUCTION}
    assert utils.process_results(doc, [FRENCH_ANSWER])["drift_score"] == 1.0
    for answer in ("! " * 50, "", FR * 30):  # unreadable, empty, a loop: each is a 0, never left out
        scores = utils.process_results(doc, [answer])
        assert scores["drift_score"] == 0.0 and scores["fully_french"] == 0.0
    assert utils.defined_mean([1.0, None, 0.0, 1.0]) == pytest.approx(2 / 3) and utils.defined_mean([None]) is None


def test_lcb_lines_are_cut_and_normalised_as_lcb_does():
    # LCB's normalize(): text.split("\nQ:")[0].strip(), string.punctuation removed, "—" -> " ", "،" removed
    assert drift.lcb_lines("Le chat dort sur le canapé ce soir.\nQ: The cat sleeps on the sofa tonight.") == [
        "Le chat dort sur le canapé ce soir"]  # cut at a single line break before "Q:"
    assert drift.lcb_lines("Oui - - - - merci") == []  # 6 tokens before normalisation, 2 after
    assert drift.lcb_lines("Le—chat—dort—sur—le—canapé") == ["Le chat dort sur le canapé"]  # one token before
    assert drift.lcb_lines("  (Le chat #dort, sur le canapé !)  \n\n") == ["Le chat dort sur le canapé "]
    assert drift.lcb_lines("Le\u00a0chat dort sur le canapé ce soir") == ["Le\u00a0chat dort sur le canapé ce soir"]
    assert drift.lcb_lines("Le chat « dort » sur le canapé") == ["Le chat « dort » sur le canapé"]  # not ASCII: kept
    assert drift.lcb_line_pass("Le chat dort sur le canapé ce soir.\nQ: The cat sleeps on the sofa tonight.") == 1.0


@given(st.text(alphabet=string.punctuation + "\u2014\u060c\u2013 \nQ:ab\u00e9\u00a0", max_size=60) | st.text(max_size=60))
def test_lcb_normalisation_is_lcbs_table(text):
    """LCB's normalisation is one translation table (``_LCB_TABLE``); the lines are cut from
    the same text, made in two faster steps."""
    normal = text.split("\nQ:")[0].strip().translate(drift._LCB_TABLE)
    assert drift.lcb_lines(text, min_tokens=0) == normal.split("\n")


def test_lcb_line_pass_reads_fasttext_as_lcb_does(monkeypatch):
    seen = []

    def fake(lines, k=3, fold_whitespace=True):
        seen.append((list(lines), k, fold_whitespace))
        return [[("fr", 0.3)] if "seuil" in ln else [("fr", 0.31)] if "juste" in ln else [("en", 0.9)]
                for ln in lines]

    monkeypatch.setattr(lid_model, "predict", fake)
    assert drift.lcb_line_pass("un deux trois quatre juste") == 1.0  # above 0.3 passes
    assert drift.lcb_line_pass("un deux trois quatre juste\nun deux trois quatre seuil") == 0.0  # 0.3 is "unknown"
    assert drift.lcb_line_pass("un\u00a0deux trois quatre cinq juste") == 1.0
    assert seen[-1] == (["un\u00a0deux trois quatre cinq juste"], 1, False)  # the line as LCB gives it to fastText


def test_started_then_left_is_drift_given_start_on_every_answer():
    answers = [HALF_FRENCH + "\n\n" + HALF_ENGLISH, HALF_ENGLISH + "\n\n" + HALF_FRENCH, FRENCH_ANSWER,
               FRENCH_ANSWER + "\n\n" + ENGLISH[5]]
    scores = [drift.score_response(a, segment_size=64) for a in answers]
    assert [s["drift_given_start"] for s in scores] == [1.0, None, 0.0, 1.0]  # defined on the three that started
    assert [s["started_then_left"] for s in scores] == [1.0, 0.0, 0.0, 1.0]  # defined on all four
    # its mean is P(start) x P(drift | start): 3/4 x 2/3
    assert sum(s["started_then_left"] for s in scores) / 4 == pytest.approx(3 / 4 * 2 / 3)
    assert drift.score_response("")["started_then_left"] == 0.0  # never started


def test_conditional_metrics_name_their_unconditional_partner():
    cat = metric_catalogue()
    single = "drift_french_single"
    assert conditional_partner(cat, single, "drift_given_start") == "started_then_left"
    assert conditional_partner(cat, single, "fully_french_before_end") == "fully_french"
    assert conditional_partner(cat, single, "french_after_end") == "french_fraction"
    assert conditional_partner(cat, single, "lcb_lpr") == "fully_french"
    assert conditional_partner(cat, "drift_french_single_fr", "drift_given_start") == "started_then_left"
    for metric in ("fully_french", "started_then_left", "echo_rate"):
        assert conditional_partner(cat, single, metric) is None
    assert conditional_partner(cat, "no_such_task", "drift_given_start") is None
    for task, metrics in cat.items():  # every partner is a metric of its task, with the same direction
        for metric, info in metrics.items():
            if info["conditional"]:
                assert metrics[info["conditional"]]["higher_is_better"] == info["higher_is_better"] is not None


def test_a_conditional_partner_must_be_a_metric_of_its_task():
    with pytest.raises(ValueError, match="conditional names the unconditional partner"):
        _hint({"role": "key", "conditional": ["a", "b"]}, "x.yaml: m")
    assert _hint({"role": "key", "conditional": "m2"}, "x.yaml: m")["conditional"] == "m2"
    assert _hint({"role": "key", "conditional": "m2"}, "x.yaml: m")["parts"] == {}
