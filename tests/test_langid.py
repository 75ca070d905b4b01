from drift_eval.metrics import langid

FR = "Le chat dort paisiblement sur le canapé pendant que la pluie tombe sur la ville."
EN = "The cat sleeps peacefully on the sofa while the rain falls on the city."


def test_french_and_english_sentences():
    fr, en = langid.identify_many([FR, EN])
    assert fr.lang == "fr" and fr.score > 0.9
    assert en.lang == "en" and en.score > 0.9


def test_empty_and_short_text_is_unknown():
    for text in ["", "   ", None, "ok", "oui non"]:
        pred = langid.identify(text)
        assert pred.lang == langid.UNKNOWN and not pred.known


def test_multiline_text_is_flattened():
    assert langid.identify(FR.replace(" ", "\n", 3)).lang == "fr"


def test_segments_and_halves_count_metric_tokens():
    text = " ".join(["mot"] * 300)
    segs = langid.segments(text, 128)
    assert [len(s.split()) for s in segs] == [128, 128, 44]
    first, second = langid.halves("a b c d, e")  # tokens: a b c d , e
    assert first == "a b c" and second == "d , e"


def test_mixed_text_segments_switch_language():
    text = (FR + " ") * 20 + (EN + " ") * 20
    timeline = [p.lang for p in langid.identify_many(langid.segments(text, 64))]
    assert timeline[0] == "fr" and timeline[-1] == "en"


def test_langdetect_cross_check_is_seeded_and_agrees():
    assert langid.langdetect_lang(FR) == "fr"
    assert langid.langdetect_lang(EN) == "en"
    assert langid.langdetect_lang("") == langid.UNKNOWN


def test_missing_model_file_is_a_clear_error(tmp_path):
    langid.set_model_path(str(tmp_path / "nope.ftz"))
    try:
        try:
            langid.identify(FR)
        except langid.LanguageModelMissing as exc:
            assert "nope.ftz" in str(exc) and "DRIFT_LID_MODEL" in str(exc)
        else:
            raise AssertionError("expected LanguageModelMissing")
    finally:
        langid.set_model_path(None)
    assert langid.identify(FR).lang == "fr"
