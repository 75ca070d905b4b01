import glob
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.places import REPO

from drift_eval.metrics import crosscheck, langid, lid_model
from drift_eval.metrics.text import SCRIPT_LETTERS, WORD_RE

FR = "Le chat dort paisiblement sur le canapé pendant que la pluie tombe sur la ville."
EN = "The cat sleeps peacefully on the sofa while the rain falls on the city."


def test_french_and_english_sentences():
    fr, en = lid_model.identify_many([FR, EN])
    assert fr.lang == "fr" and fr.score > 0.9
    assert en.lang == "en" and en.score > 0.9


def test_empty_and_short_text_is_unknown():
    for text in ["", "   ", None, "ok", "oui non"]:
        pred = lid_model.identify(text)
        assert pred.lang == langid.UNKNOWN and not pred.known


def test_multiline_text_is_flattened():
    assert lid_model.identify(FR.replace(" ", "\n", 3)).lang == "fr"


def test_segments_and_the_second_half_count_metric_tokens():
    text = " ".join(["mot"] * 300)
    segs = langid.segments(text, 128)
    assert [len(s.split()) for s in segs] == [128, 128, 44]
    assert langid.second_half("a b c d, e") == "d , e"  # tokens: a b c d , e


def test_mixed_text_segments_switch_language():
    text = (FR + " ") * 20 + (EN + " ") * 20
    timeline = [p.lang for p in lid_model.identify_many(langid.segments(text, 64))]
    assert timeline[0] == "fr" and timeline[-1] == "en"


def test_langdetect_cross_check_is_seeded_and_agrees():
    assert crosscheck.detect(FR) == "fr" == _stock_detect(FR)
    assert crosscheck.detect(EN) == "en" == _stock_detect(EN)
    assert crosscheck.detect("") == langid.UNKNOWN == crosscheck.detect("Bonjour")


def _stock_detect(text):
    """langdetect's own seeded verdict, as its documentation gives it."""
    from langdetect import DetectorFactory, detect  # deferred, start-up: loads langdetect

    DetectorFactory.seed = 0
    return detect(text)


def test_missing_model_file_is_a_clear_error(tmp_path):
    lid_model.set_model_path(str(tmp_path / "nope.ftz"))
    try:
        try:
            lid_model.identify(FR)
        except lid_model.LanguageModelMissing as exc:
            assert "nope.ftz" in str(exc) and "DRIFT_LID_MODEL" in str(exc)
        else:
            raise AssertionError("expected LanguageModelMissing")
    finally:
        lid_model.set_model_path(None)
    assert lid_model.identify(FR).lang == "fr"


# ---------------------------------------------------------------- the cross-check's speed-up
def _stock_and_ours(text):
    """langdetect's own Detector and ``crosscheck``'s, each given ``text`` (the same
    profiles, in the same order, seed 0)."""
    from langdetect.detector import Detector  # deferred, start-up: loads langdetect

    factory = crosscheck._factory()
    stock, ours = Detector(factory), crosscheck._detector_class()(factory)
    stock.append(text)
    ours.append(text)
    return stock, ours


def _same_steps(text):
    stock, ours = _stock_and_ours(text)
    assert ours.text == stock.text
    stock.cleaning_text()
    ours.cleaning_text()
    assert ours.text == stock.text
    assert ours._extract_ngrams() == stock._extract_ngrams()
    from langdetect.lang_detect_exception import LangDetectException  # deferred, start-up: loads langdetect

    def verdict(detector):  # every language's probability, each the same float
        try:
            return [(x.lang, float(x.prob)) for x in detector.get_probabilities()]
        except LangDetectException:
            return "unknown"

    stock, ours = _stock_and_ours(text)
    assert verdict(ours) == verdict(stock)


def test_the_cross_checks_faster_reading_gives_langdetects_own_steps_on_committed_answers():
    root = os.path.join(REPO, "docs", "results")
    texts = []
    for path in sorted(glob.glob(os.path.join(root, "**", "samples_*single*.jsonl"), recursive=True)):
        with open(path, encoding="utf-8") as fh:
            texts += [json.loads(line)["resps"][0][0] for line in fh]
    assert len(texts) > 1000
    for text in texts[::10]:  # every language and model of the committed runs
        _same_steps(text)


def test_the_cross_checks_faster_reading_gives_langdetects_own_steps_on_generated_text():
    pieces = st.sampled_from(["Le chat", "ÉCOLE", "NASA", "ＡＢ", "Привет мир", "你好世界", "こんにちは", "مرحبا",
                              "नमस्ते", "Việt Nam", "ş ţ ș ț", "https://x.org/a?b=c", "a.b@c.de", " ", "  ", "\n",
                              ",", "—", "…", "0123", "[]^_`", "\u0300", "\u1e00", "ǅ", "ß", "İ"])
    text = st.one_of(st.text(max_size=300), st.lists(pieces, max_size=60).map("".join),
                     st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=40).map("".join))

    @settings(max_examples=150, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(text)
    def check(t):
        _same_steps(t)

    check()


#: the code, URL and e-mail pattern and the name pattern as rule 2.3 was frozen with them (the
#: references for the pattern without the alternatives that cannot match, and for the name
#: pattern that finds the capital first)
_WHOLE_CODE_RE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`|https?://\S+|\S+@\S+\.\w+", re.S)
_FROZEN_NAME_RE = re.compile(r"(?<=[\w,;] )[A-ZÀ-Ý][\w'’-]*")
_CODE_PIECES = st.sampled_from(["```", "`", "``", "x`y`", "https://a.b/c`d`", "http://x.y", "http:/", "://", "a@b.c", "@", "a@b",
                                "`a@b.cd`", "\n", " ", "text", "«", "»", "\"", "é", "a Bc", ", Éd", "; X", "  Y", "\nZ", "D'Arc"])


@settings(max_examples=500, derandomize=True, database=None, deadline=None)
@given(st.lists(_CODE_PIECES | st.text(max_size=4), max_size=25).map("".join))
def test_the_cleaning_finds_the_code_and_names_that_the_frozen_patterns_find(text):
    found = langid._code_in(text)
    whole = [m.span() for m in _WHOLE_CODE_RE.finditer(text)]
    assert ([m.span() for m in found.finditer(text)] if found else []) == whole
    cleaned = " ".join(re.sub(r"[#*_|>\-=~`]+", " ", _FROZEN_NAME_RE.sub(" ", langid._QUOTED_RE.sub(
        " ", _WHOLE_CODE_RE.sub(" ", text)))).split())
    assert langid.clean_for_lid(text) == cleaned


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.text(alphabet="ab ,.\n漢字\u0301\u093f-", max_size=40) | st.text(max_size=40))
def test_the_second_half_is_the_tokens_from_the_middle_one_on(text):
    toks = langid.tokens(text)
    assert langid.second_half(text) == " ".join(toks[len(toks) // 2:])


def test_the_cross_check_leaves_langdetects_shared_factory_alone():
    from langdetect import DetectorFactory  # deferred, start-up: loads langdetect

    before = DetectorFactory.seed
    crosscheck.detect(FR)
    assert DetectorFactory.seed == before


@given(st.text(max_size=300))
def test_script_counts_count_each_word_for_the_script_of_its_first_letter(text):
    """``script_counts`` looks each word's first character up once (``text.script_of``): the
    same counts as matching every word against the scripts in order."""
    expected = dict.fromkeys(SCRIPT_LETTERS, 0)
    for word in WORD_RE.findall(text):
        name = next((n for n, r in SCRIPT_LETTERS.items() if r.match(word)), None)
        if name:
            expected[name] += 1
    assert langid.script_counts(text) == expected


# ---------------------------------------------------------------------- the language-ID model
@pytest.mark.parametrize("content, needle", [
    (b"", "is empty"),
    (b"\x00" * 938013, "is damaged (its checksum is not lid.176's)"),
])
def test_unusable_language_model_files_are_one_line(tmp_path, content, needle):
    path = tmp_path / "lid.bin"
    path.write_bytes(content)
    with pytest.raises(lid_model.LanguageModelMissing, match=needle.replace("(", r"\(").replace(")", r"\)")):
        lid_model.check_model_file(str(path))


def test_a_lid_176_ftz_of_another_size_is_damaged(tmp_path):
    real = lid_model.default_model_path()
    cut = tmp_path / "lid.176.ftz"
    cut.write_bytes(open(real, "rb").read()[:400_000])
    with pytest.raises(lid_model.LanguageModelMissing, match="is 400000 bytes, not lid.176.ftz's 938013"):
        lid_model.check_model_file(str(cut))
    assert lid_model.check_model_file(real) == real
