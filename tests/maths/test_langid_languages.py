"""Language ID for every target language of drift_languages: the rule's precision and
recall for "left the target" on the held-out part of each language's hand-labelled set
(tests/data/langid/), and the parts the rule is made of, on cases with known answers."""
import glob
import os
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.places import DATA, REPO

from drift_eval.files import read_jsonl
from drift_eval.metrics import drift, langid, text, wordcut
from drift_eval.metrics.languages import TARGETS, language
from drift_eval.metrics.stats import precision_recall
from support.prose import RUSSIAN

DATA = os.path.join(DATA, "langid")
KEYS = ("id", "lang", "split", "category", "left_target", "text")
CATEGORIES = {"target_plain", "target_named_entities", "target_lists_tables", "target_code", "target_degenerate",
              "english_switch", "other_language_switch", "english_loop", "mixed"}


def rows(lang: str, split: str | None = None) -> list:
    out = read_jsonl(os.path.join(DATA, f"{lang}.jsonl"), "segment file", required=KEYS)
    return [r for r in out if split is None or r["split"] == split]


@pytest.mark.parametrize("lang", TARGETS)
def test_every_target_has_a_tuning_set_of_40_and_a_held_out_set_covering_every_category(lang):
    heldout = rows(lang, "heldout")
    assert all(r["lang"] == lang for r in rows(lang))
    assert len(heldout) >= 30 and {r["category"] for r in heldout} >= CATEGORIES
    assert sum(r["left_target"] for r in heldout) >= 12 and sum(not r["left_target"] for r in heldout) >= 12
    if lang == "fr":  # French is tuned on the older, larger set
        assert len(read_jsonl(os.path.join(DATA, "..", "langid_segments.jsonl"), "segment file")) >= 150
    else:
        tune = rows(lang, "tune")
        assert len(tune) >= 40 and {r["category"] for r in tune} >= CATEGORIES
    ids = [r["id"] for r in rows(lang)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("lang", TARGETS)
def test_rule_reaches_precision_and_recall_of_095_on_the_held_out_segments(lang):
    held = [r for r in rows(lang, "heldout") if r["category"] != "real_output"]
    res = precision_recall([langid.left_language(r["text"], lang) for r in held], [r["left_target"] for r in held])
    assert res["precision"] >= 0.95 and res["recall"] >= 0.95, res


#: the rule's known mistakes on the held-out segments of real answers (docs/metrics.md, "Every
#: target language"): both are false "left" calls, and both are open
KNOWN_REAL_MISTAKES = {"ja-r003": "a loop of quoted English nouns joined by が",
                       "ru-r005": "JavaScript cut from its code fence, whose Latin words outvote its Russian comments"}


def test_on_real_answers_held_out_the_rule_makes_only_its_two_documented_mistakes():
    """Segments of Qwen2.5-Coder's answers (zh ja hi ar ru), drawn and labelled before they
    were scored (benchmarks/langid_real_segments.py): every call is right but two."""
    real = [r for lang in TARGETS for r in rows(lang, "heldout") if r["category"] == "real_output"]
    assert len(real) >= 35 and {r["lang"] for r in real} == {"zh", "ja", "hi", "ar", "ru"}
    assert sum(r["left_target"] for r in real) >= 15 and sum(not r["left_target"] for r in real) >= 15
    wrong = {r["id"] for r in real if langid.left_language(r["text"], r["lang"]) != r["left_target"]}
    assert wrong == set(KNOWN_REAL_MISTAKES)


REAL_NOTE = re.compile(r"Qwen2\.5-Coder-0\.5B-Instruct, drift_(\w+)_single doc (\d+), segment (\d+)$")
RUNS = os.path.join(REPO, "docs", "results", "languages", "qwen_single")


def in_its_answer(r) -> bool:
    """Whether a real held-out segment left its target as drift_languages scores it: the
    segment's label within its whole answer (``langid.label_answer``), read from the
    committed run its ``note`` names."""
    lang, doc, k = REAL_NOTE.search(r["note"]).groups()
    [path] = glob.glob(os.path.join(RUNS, lang, "none", "*", f"samples_drift_{lang}_single_*.jsonl"))
    [answer] = [s["resps"][0][0] for s in read_jsonl(path, "samples file") if s["doc_id"] == int(doc)]
    assert langid.segments(answer, 128)[int(k) - 1] == r["text"], r["id"]  # the very segment
    label = langid.label_answer(answer, lang)[int(k) - 1]
    return label.known and label.lang != lang


@pytest.mark.parametrize("lang", TARGETS)
def test_on_the_whole_held_out_part_as_the_task_scores_it_precision_and_recall_reach_095(lang):
    """Written segments alone, real ones within their answers (drift_languages 1.1): both
    documented mistakes above are made by the cut, and in their answers they are right."""
    held = rows(lang, "heldout")
    got = [in_its_answer(r) if r["category"] == "real_output" else langid.left_language(r["text"], lang) for r in held]
    res = precision_recall(got, [r["left_target"] for r in held])
    assert res["precision"] >= 0.95 and res["recall"] >= 0.95, res
    real = [(g, r["left_target"]) for g, r in zip(got, held) if r["category"] == "real_output"]
    assert all(g == want for g, want in real)


def test_kana_makes_japanese_and_han_alone_is_chinese():
    ja = "東京都の経済政策について、専門家は慎重な見方を示している。物価の上昇が続く中で、家計への影響が懸念される。"
    zh = "北京市的经济政策引起了专家的关注。物价持续上涨，家庭支出的压力越来越大，政府正在研究新的措施。"
    assert langid.label_segments([ja], "ja")[0].lang == "ja"
    assert langid.label_segments([zh], "ja")[0].lang == "zh"        # Chinese inside a Japanese answer: left
    assert langid.label_segments([zh], "zh")[0].lang == "zh"
    assert langid.label_segments([ja], "zh")[0].lang == "ja"        # Japanese inside a Chinese answer: left


def test_latin_names_in_chinese_prose_weigh_one_word_each_not_one_letter_each():
    seg = ("在巴黎的 bistro 里，常见的主菜有 boeuf bourguignon、coq au vin 和 soupe à l'oignon gratinée。"
           "甜点推荐 crème brûlée，饮料可以点一杯 café crème。")
    counts = langid.script_counts(langid.clean_for_lid(seg))
    assert counts["Hani"] > counts["Latn"]
    assert langid.label_segments([seg], "zh")[0].lang == "zh"


def test_romanised_hindi_has_left_hindi_in_devanagari():
    seg = ("Aaj mausam bahut accha hai, isliye hum log park mein ghoomne jaayenge. Mummy ne khana bana diya hai "
           "aur papa gaadi saaf kar rahe hain. Shaam ko hum sab saath mein chai peeyenge aur baatein karenge.")
    label = langid.label_segments([seg], "hi")[0]
    assert label.reason == "script" and label.lang != "hi" and label.known


def test_a_neighbour_in_the_same_script_is_a_switch():
    uk = "Сьогодні ми поговоримо про те, як правильно готувати борщ удома. Спочатку треба зварити бульйон."
    assert langid.label_segments([uk], "ru")[0].lang == "uk"
    ru = "Сегодня мы поговорим о том, как правильно готовить борщ дома. Сначала нужно сварить бульон."
    assert langid.label_segments([ru], "ru")[0].lang == "ru"


def test_words_split_han_and_kana_by_character_and_keep_devanagari_vowel_signs():
    assert text.words("東京で寿司") == ["東", "京", "で", "寿", "司"]
    assert text.words("हिंदी में जवाब दो") == ["हिंदी", "में", "जवाब", "दो"]
    assert text.words("Ceci est français") == ["ceci", "est", "francais"]
    assert text.fold("YALNIZCA") == text.fold("yalnızca")


def test_lcb_counts_chinese_and_japanese_lines_in_words_as_lcb_does():
    """LCB keeps a line of at least five tokens: jieba's words for Chinese, fugashi's for
    Japanese. A five-character Chinese line of two words is too short; whitespace would call
    a whole Chinese sentence one token."""
    assert drift.lcb_tokens("我今天在北京吃了烤鸭", "zh") == ["我", "今天", "在", "北京", "吃", "了", "烤鸭"]
    assert drift.lcb_tokens("私は東京で寿司を食べました", "ja")[:4] == ["私", "は", "東京", "で"]
    assert drift.lcb_lines("我今天在北京吃了烤鸭\n你好世界", lang="zh") == ["我今天在北京吃了烤鸭"]
    assert drift.lcb_lines("我今天在北京吃了烤鸭", lang="fr") == []   # one whitespace token
    assert drift.lcb_line_pass("我今天在北京吃了烤鸭。然后我们去了公园散步，天气非常好。", "zh") == 1.0


def _committed_chinese() -> list[str]:
    root = os.path.join(os.path.dirname(DATA), "..", "..", "docs", "results")
    out = []
    for path in glob.glob(os.path.join(root, "**", "samples_drift_zh_*.jsonl"), recursive=True):
        out += [s["resps"][0][0] for s in read_jsonl(path, "samples file")]
    return out


def test_chinese_words_are_jiebas_on_every_committed_chinese_answer_and_line():
    """``wordcut.chinese_words`` cuts each jieba block once and remembers it: on every
    committed Chinese answer (single turns and whole conversations), and on each of LCB's
    lines of it, the words are ``jieba.cut``'s, and the line count that stops early agrees
    with counting them all."""
    import jieba  # deferred, start-up: loads jieba

    answers = _committed_chinese()
    assert len(answers) >= 350
    for answer in answers:
        assert wordcut.chinese_words(answer) == list(jieba.cut(answer))
        normal = answer.split("\nQ:")[0].strip().translate(drift._LCB_TABLE)
        for line in normal.split("\n"):
            counted = len([w for w in jieba.cut(line) if w.strip()])
            assert drift.lcb_tokens(line, "zh") == [w for w in jieba.cut(line) if w.strip()]
            assert drift._has_tokens(line, "zh", 5) == (counted >= 5)


#: a string where the two routes through "等等等" ("等" "等等" or "等等" "等": the same two words)
#: score the same up to rounding, and jieba and a Rust port of it take different ones
_TIED = "等等等零用金四七年先悉必具趸船直溜繄习与性成密得兰顺序排列軳不利因素琣歉打盐水飣"


def _jieba_words(text: str) -> list[str]:
    import jieba  # deferred, start-up: loads jieba

    return list(jieba.cut(text))


def test_chinese_blocks_are_cut_as_jieba_cuts_them_on_seeded_random_text():
    """``wordcut``'s own route through a block (``_cut_han``) gives ``jieba.cut``'s words on
    10 000 seeded random strings of jieba's dictionary words, parts of them, lone Han
    characters and repeated characters, letters and digits (where routes tie), each cut
    afresh, and on a string where two routes tie."""
    wordcut._jieba().dt.check_initialized()
    words = sorted(w for w, n in wordcut._jieba().dt.FREQ.items() if n)
    chars = [chr(c) for c in range(0x4E00, 0x9FD6)]
    repeated = ["等", "哈", "的", "了", "是", "一", "十", "a", "B", "1", "2.5", "%", "-", "#", "&", "_", ".", "+"]
    rng = random.Random(0)
    for _ in range(10_000):
        parts = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            parts.append(rng.choice(words) if r < 0.5 else rng.choice(chars) if r < 0.65
                         else rng.choice(repeated) * rng.randint(1, 4) if r < 0.85 else rng.choice(words)[:rng.randint(1, 3)])
        sentence = "".join(parts)
        wordcut.clear_cache()
        assert wordcut.chinese_words(sentence) == _jieba_words(sentence), sentence
    wordcut.clear_cache()
    assert wordcut.chinese_words(_TIED)[:2] == ["等", "等等"] == _jieba_words(_TIED)[:2]
    assert wordcut.chinese_words("等等等") == ["等等", "等"] == _jieba_words("等等等")  # an exact tie


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.lists(st.sampled_from(["等", "等等", "哈哈", "的", "是", "一", "十五", "三十", "中国", "北京大学", "研究生命",
                                 "龘", "a", "B2", "3.5", "%", "-", "Problem-Solving", "，", "。", " ", "\n", "「", "」",
                                 "優質", "テスト"]) | st.text(max_size=3), max_size=40).map("".join))
def test_chinese_words_are_jiebas_on_generated_text(sentence):
    wordcut.clear_cache()
    assert wordcut.chinese_words(sentence) == _jieba_words(sentence)


@pytest.mark.parametrize("lang, restated, plain", [
    ("ja", "はい、日本語だけで答えます。東京の天気は晴れです。", "東京の天気は晴れです。明日も晴れるでしょう。"),
    ("de", "Wie gewünscht antworte ich nur auf Deutsch: Berlin ist groß.", "Berlin ist eine große Stadt mit vielen Parks."),
    ("hi", "मैं केवल हिंदी में जवाब दूँगा। दिल्ली बड़ा शहर है।", "दिल्ली भारत की राजधानी है और बहुत बड़ा शहर है।"),
    ("zh", "I will answer only in Chinese. 北京是中国的首都。", "北京是中国的首都，也是一座历史名城。"),
])
def test_restating_the_instruction_is_an_echo_in_every_language(lang, restated, plain):
    assert drift.restates_instruction(restated, lang=lang)
    assert not drift.restates_instruction(plain, lang=lang)


def test_french_patterns_are_unchanged_for_french():
    assert drift.echo_regexes("fr") == tuple(drift._ECHO_RE)


@pytest.mark.parametrize("lang", TARGETS)
def test_each_echo_pattern_is_searched_only_where_its_word_is(lang):
    """A pattern is searched only in a text that holds its word: the word is a part of the
    pattern that every match holds, written in it as it is."""
    searches = drift.echo_searches(lang)
    assert [r for _, r in searches] == list(drift.echo_regexes(lang))
    for need, r in searches:
        assert need and re.escape(need) in r.pattern, (lang, need, r.pattern)


def test_neutral_names_rename_every_french_metric():
    assert drift.neutral_names({"fully_french": 1, "french_turn_3": 0, "last3_french": 1, "echo_rate": 0}) == {
        "fully_target": 1, "target_turn_3": 0, "last3_target": 1, "echo_rate": 0}


def test_every_target_has_its_facts():
    for code in TARGETS:
        spec = language(code)
        assert spec.name and spec.echo_phrases and spec.echo_phrases_en
        assert spec.latin == (spec.script == "Latn")
        assert spec.function_words or not spec.latin or code == "fr"
    with pytest.raises(KeyError, match="unknown target language 'xx'"):
        language("xx")


def test_a_real_neighbour_looping_is_still_a_switch_and_a_shaky_loop_is_unknown():
    uk = "Сьогодні ми поговоримо про те, як правильно готувати борщ удома. Спочатку треба зварити бульйон. " * 6
    assert langid.label_segments([uk], "ru")[0].lang == "uk"
    fa = "امروز درباره این صحبت می کنیم که چگونه در خانه غذا درست کنیم. اول باید آب را گرم کنیم. " * 6
    assert langid.label_segments([fa], "ar")[0].lang == "fa"
    gibberish = "Садары и газары " + "газары " * 60  # SmolLM2's: Kyrgyz to fastText at 0.2
    assert langid.label_segments([gibberish], "ru")[0].lang == langid.UNKNOWN


def test_a_confident_fasttext_label_is_not_overruled_by_the_kana_share():
    kanji = "第一章 概要 経済成長率 物価上昇率 失業率 国内総生産 貿易収支 財政赤字 金利政策 為替相場 の一覧"
    assert langid.label_segments([kanji], "ja")[0].lang == "ja"      # one kana in 45 characters
    zh = "日本語で「ありがとう」是感谢的意思。我们学习日语的时候，首先要学会这句话，然后再学习其他的问候语。"
    assert langid.label_segments([zh], "zh")[0].lang == "zh"         # a quoted Japanese word


def test_a_segment_without_letters_is_unknown_in_every_script():
    for lang in ("ja", "zh", "ko", "ar", "hi", "ru"):
        assert langid.label_segments(["1 2 3 4 5 6 7 8 9 10 | 11 | 12"], lang)[0].lang == langid.UNKNOWN


def _code_answer():
    ru = ("Рекурсия позволяет функции вызывать саму себя. Это удобно, когда задача делится на "
          "похожие подзадачи меньшего размера. Ниже пример на JavaScript, который переводит меры "
          "продуктов в граммы, с комментариями на русском языке. ")
    code = "```javascript\n" + "".join(
        f"function convert{i}(item, value) {{\n  // переводим в граммы\n"
        f"  if (value === 'eggs') {{ return value * 1000; }} else {{ return item.weight + {i}; }}\n}}\n"
        for i in range(8)) + "```\n"
    return ru * 2 + code + ru * 2


def test_a_segment_cut_from_inside_a_code_block_or_quotation_gets_its_opening_mark_back():
    text = _code_answer()
    starts = [a for a, _ in langid.segment_spans(text)]
    assert langid.opened_at(text, starts) == ["", "```", "```", "```"]  # segments 2-4 begin inside the code
    quoted = "mot " * 10 + '"le chat dort" puis "le chien court"'
    at = quoted.index("chat")
    assert langid.opened_at(quoted, [0, at, quoted.index("puis"), quoted.index("chien")]) == ["", '"', "", '"']
    assert langid.opened_at("`a b` c", [1, 6]) == ["`", ""]


def test_code_without_its_fence_is_no_switch_when_the_answer_is_read_whole():
    """JavaScript with Russian comments, cut by the segment boundaries: alone, its Latin
    keywords outvote the comments (the ``ru-r005`` mistake); read with the whole answer the
    code is code, and no segment leaves Russian."""
    text = _code_answer()
    alone = [x.lang for x in langid.label_segments(langid.segments(text), "ru")]
    whole = [x.lang for x in langid.label_answer(text, "ru")]
    assert any(lang not in ("ru", langid.UNKNOWN) for lang in alone)
    assert whole[0] == whole[-1] == "ru" and all(lang in ("ru", langid.UNKNOWN) for lang in whole)


def test_a_code_block_neither_keeps_nor_loses_the_answers_language():
    """Russian prose around a fenced code block whose comments are Russian: the segments of
    code are code, and the answer is kept; code alone is no answer in any language."""
    code = "```javascript\n" + "".join(
        f"function {name}(item, value) {{\n  // {comment}\n  if (value === '{key}') {{ return value * {k}; }}\n"
        f"  return item.{field} + {k};\n}}\n"
        for name, comment, key, k, field in [
            ("toGrams", "переводим в граммы", "eggs", 1000, "weight"), ("toLitres", "объём в литрах", "milk", 3, "volume"),
            ("toCups", "чашки для муки", "flour", 125, "cups"), ("toSpoons", "ложки сахара", "sugar", 12, "spoons"),
            ("toPieces", "штуки для яблок", "apples", 7, "count"), ("toPacks", "пачки масла", "butter", 200, "packs"),
            ("toSlices", "ломтики хлеба", "bread", 25, "slices"), ("toBottles", "бутылки воды", "water", 500, "bottles"),
            ("toCans", "банки фасоли", "beans", 400, "cans"), ("toBags", "мешки картофеля", "potatoes", 50, "bags")]) \
        + "```\n\n"
    text = RUSSIAN[0] + "\n\n" + RUSSIAN[1] + "\n\n" + code + RUSSIAN[2] + "\n\n" + RUSSIAN[3]
    s = drift.score_response(text, lang="ru", segment_size=64)
    assert langid.CODE in s["language_timeline"] and set(s["language_timeline"]) == {"ru", langid.CODE}
    assert s["fully_french"] == 1.0 and s["time_in_french"] == 1.0 and s["french_fraction"] == 1.0
    only_code = drift.score_response(code, lang="ru", segment_size=64)
    assert only_code["fully_french"] == 0.0 and only_code["not_kept_unreadable"] == 1.0
    assert only_code["time_in_french"] == 0.0
