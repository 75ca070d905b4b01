"""Kept in the language means written in the language (docs/metrics.md, "Kept: written in
the language"): through lm-eval's own task API, a forced answer of real text in L scores 1,
and a phrase loop, made-up words in L's script and text with no language each score 0 and
stay in the sample; what the rule does with Malay, Hindi in Latin letters, kanji-only
Japanese and gibberish in Hangul or Han."""
import dataclasses
import json
import random

import pytest
from lm_eval.tasks import get_task_dict
from support.prose import CHINESE, ENGLISH, FRENCH, HINDI, RUSSIAN, numbered_list, text

from drift_eval.metrics import conversation, drift, langid, lexicon
from drift_eval.metrics.languages import language
from drift_eval.plugin.answers import Answer
from drift_eval.tasks import common
from drift_eval.tasks.drift_french import utils

#: a forced answer of real text in each language (paragraphs written for the tests, no loop)
REAL = {"drift_ru_single": text(RUSSIAN, 4), "drift_hi_single": text(HINDI, 4), "drift_zh_single": text(CHINESE, 4),
        "drift_french_single": text(FRENCH, 8)}
LOOPS = {"drift_ru_single": "Я не знаю. ", "drift_hi_single": "मुझे नहीं पता। ", "drift_zh_single": "我不知道。",
         "drift_french_single": "Je ne sais pas. "}
LETTERS = {"drift_ru_single": "абвгдежзиклмнопрстуфхцчшыэюя", "drift_french_single": "abcdefghijlmnopqrstuvéèàç"}
HEADLINE = {"drift_french_single": "fully_french"}


def made_up(task: str, seed: int = 0) -> str:
    """Words that are no words, in the task's script: random letters (Cyrillic, Latin),
    random consonants with vowel signs (Devanagari), random Han characters."""
    rng = random.Random(seed)
    if task == "drift_zh_single":
        return "".join(chr(rng.randint(0x4E00, 0x9FFF)) + ("，" if i % 9 == 8 else "") for i in range(700))
    if task == "drift_hi_single":
        consonants, signs = "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह", "ािीुूेैो"
        return " ".join("".join(rng.choice(consonants) + rng.choice(signs) for _ in range(rng.randint(1, 3)))
                        for _ in range(400))
    return " ".join("".join(rng.choice(LETTERS[task]) for _ in range(rng.randint(3, 9))) for _ in range(400))


UNREADABLE = " ".join(f"{n} ; {n % 7}.{n % 97} % = {n * 31 % 1000}" for n in range(300, 700))


@pytest.fixture(scope="module")
def tasks(task_manager):
    return get_task_dict(list(REAL), task_manager)


@pytest.mark.parametrize("task", list(REAL))
def test_through_lm_evals_task_api_only_real_text_in_the_language_is_kept(tasks, task):
    t = tasks[task]
    doc = t.test_docs()[0]
    headline = HEADLINE.get(task, "fully_target")
    real = t.process_results(doc, [REAL[task]])
    assert real["drift_score"] == real[headline] == 1.0, real["language_timeline"]
    for kind, answer, cause in [("phrase loop", LOOPS[task] * 300, "degenerate"),
                                ("made-up words", made_up(task), "degenerate"),
                                ("no language", UNREADABLE, "unreadable"), ("empty", "", "unreadable")]:
        scores = t.process_results(doc, [answer])
        assert "drift_score" in scores and scores["drift_score"] == 0.0, (kind, scores["language_timeline"][:4])
        assert scores[headline] == 0.0 and scores[f"not_kept_{cause}"] == 1.0, kind
        assert sum(scores[f"not_kept_{c}"] for c in drift.CAUSES) == 1.0, kind  # one cause each


def test_the_causes_and_the_kept_share_add_up_to_one_and_left_comes_first():
    entries = {"kept": ["fr", "fr"], "left": ["fr", langid.DEGENERATE, "en"], "degenerate": ["fr", langid.DEGENERATE],
               "unreadable": ["fr", langid.UNREADABLE], "code only": [langid.CODE]}
    expected = {"kept": None, "left": "left", "degenerate": "degenerate", "unreadable": "unreadable",
                "code only": "unreadable"}
    for name, e in entries.items():
        assert drift.loss_cause(e, "fr") == expected[name], name
        split = drift.cause_scores(e, "fr")
        assert float(drift.kept(e, "fr")) + sum(split[f"not_kept_{c}"] for c in drift.CAUSES) == 1.0
    assert drift.cause_scores(entries["left"], "fr")["left_for"] == "en"
    assert drift.left_languages(["en", None, "zh", "en", None]) == "en 2, zh 1"
    assert drift.left_languages([None]) == "none"


def test_time_in_the_language_is_measured_in_each_answers_own_length():
    # an answer kept for its first two of four segments reads 0.5 whatever its segments hold,
    # so a dense script or a loop with few words per model token does not end the count early
    assert drift.time_kept(["ru", "ru", "en", "ru"], "ru", [128, 128, 128, 100]) == pytest.approx(256 / 484)
    assert drift.time_kept(["ru"] * 3, "ru", [128, 128, 90]) == 1.0
    assert drift.time_kept([langid.DEGENERATE, "ru"], "ru", [128, 128]) == 0.0
    assert drift.time_kept(["ru", langid.CODE, "ru"], "ru", [128, 128, 128]) == 1.0  # code does not end it
    assert drift.time_kept([langid.CODE], "ru", [128]) == 0.0  # nor is it time in the language
    assert drift.time_kept([langid.CODE, langid.DEGENERATE], "ru", [128, 82]) == 0.0  # code, then a loop of code
    assert drift.time_kept([langid.CODE, "en", "ru"], "ru", [128, 128, 128]) == 0.0
    assert drift.time_kept([langid.CODE, "ru", "en"], "ru", [128, 128, 128]) == pytest.approx(2 / 3)
    assert drift.time_kept(["fr", "fr", "en", "fr", "fr", "fr", "fr", "fr"], "fr") == pytest.approx(2 / 8)  # turns


def test_a_short_last_piece_joins_the_segment_before_it():
    answer = text(FRENCH, 3)
    n = len(langid.tokens(answer))
    size = n - 10  # a last piece of 10 tokens: too short to read alone
    assert len(langid.segment_spans(answer, size)) == 2
    assert len(langid.segment_spans(answer, size, whole_tail=True)) == 1
    assert drift.score_response(answer, segment_size=size)["language_timeline"] == ["fr"]


def test_a_conversation_of_loops_or_made_up_words_is_not_kept():
    loop = "Я не знаю, что сказать. " * 30
    madeup = made_up("drift_ru_single", seed=1)[:600]
    real = RUSSIAN[0]
    for turns, cause in [([real, loop] * 4, "degenerate"), ([madeup] * 8, "degenerate"), ([real] * 7 + [""], "unreadable")]:
        s = conversation.score_conversation(turns, lang="ru")
        assert s["all_turns_french"] == 0.0 and s[f"not_kept_{cause}"] == 1.0, cause
    s = conversation.score_conversation(RUSSIAN + RUSSIAN, lang="ru")  # real replies (each one alone is no loop)
    assert s["all_turns_french"] == 1.0 and s["last3_french"] == 1.0 and s["time_in_french"] == 1.0


def _label(segment: str, target: str):
    return langid.label_segments([segment], target)[0]


def test_malay_counts_as_indonesian():
    """lid.176 often calls Indonesian Malay; the two are one macrolanguage (ISO 639 ``ms``),
    so ``ms`` counts as Indonesian, and Malaysian Malay prose is kept under an Indonesian
    instruction (docs/metrics.md)."""
    malay = ("Kalau awak nak pergi ke Kuala Lumpur pada hujung minggu, lebih baik naik kereta api kerana "
             "jalan raya selalu sesak. Tiket boleh dibeli di kaunter stesen atau melalui aplikasi telefon. "
             "Selepas sampai, awak boleh berjalan kaki ke pasar malam yang terkenal dengan makanan tempatan.")
    label = _label(malay, "id")
    assert label.lang == "id" and label.status == langid.KEPT and label.fasttext in ("ms", "id")


def test_hindi_in_latin_letters_left_hindi():
    """The target is Hindi in Devanagari: romanised Hindi is written in a language (Hindi),
    in another script, so it left the target (``hi-Latn``), and is not degenerate."""
    romanised = ("Aap kaise hain? Main aaj bazaar gaya tha aur maine bahut saare phal kharide. Mere dost ne "
                 "kaha ki shaam ko hum saath mein khana khayenge, phir film dekhne chalenge.")
    label = _label(romanised, "hi")
    assert label.status == langid.LEFT and label.lang != "hi" and label.lang in ("hi-Latn", "en")


def test_kanji_only_japanese_is_decided_by_fasttext_and_chinese_left_japanese():
    """Without kana, only fastText tells Japanese from Chinese: it gives kanji-only Japanese
    (place names, a law's headings, a shop's opening hours) to Japanese, and the segment is
    kept; a segment fastText gives to Chinese, with no kana, is Chinese and left Japanese
    (the kana step); Japanese prose with kana is kept."""
    for kanji in ["東京都庁舎。大阪城公園。京都御所。奈良公園。広島平和記念公園。名古屋城。",
                  "第一章 総則 第一条 目的 本法律 国民生活 安定 向上 寄与 目的",
                  "日本料理店営業時間午前十一時午後十時定休日毎週月曜日"]:
        label = _label(kanji, "ja")
        assert label.fasttext == "ja" and label.status == langid.KEPT, kanji
    chinese = _label(CHINESE[0], "ja")
    assert chinese.status == langid.LEFT and chinese.lang == "zh"
    prose = "東京は日本の首都で、たくさんの人が住んでいます。春には桜が咲き、多くの観光客が公園を訪れます。"
    assert _label(prose, "ja").status == langid.KEPT


def test_gibberish_in_hangul_or_han_is_degenerate_not_korean_or_chinese():
    rng = random.Random(3)
    hangul = " ".join("".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(rng.randint(2, 4))) for _ in range(60))
    label = _label(hangul, "ko")
    assert label.status == langid.DEGENERATE and label.reason == "made_up"
    korean = ("지진은 땅속 깊은 곳에서 암석이 갑자기 부서지면서 생기는 현상입니다. 지구의 겉부분은 여러 개의 커다란 판으로 "
              "이루어져 있는데, 이 판들은 아주 천천히 움직이고 있습니다.")
    assert _label(korean, "ko").status == langid.KEPT
    han = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(120))
    label = _label(han, "zh")
    assert label.status == langid.DEGENERATE and label.reason == "made_up"
    shuffled = list(CHINESE[2])
    rng.shuffle(shuffled)  # common characters in no order: no words
    assert _label("".join(shuffled), "zh").status == langid.DEGENERATE


def test_an_english_answer_under_a_french_instruction_left_for_english():
    s = drift.score_response(text(ENGLISH, 6))
    assert s["fully_french"] == 0.0 and s["not_kept_left"] == 1.0 and s["left_for"] == "en"


@pytest.mark.parametrize("lang, segment", [
    ("de", "Für Ihre Feier können Sie dem Veranstalter diese Fragen stellen:\n\n"
           "1. **What is the price of the room?**: Wie viel kostet der Raum?\n"
           "2. **How many guests can it hold?**: Wie viele Gäste passen hinein?\n"
           "3. **Is there a kitchen for the caterer?**: Gibt es eine Küche?\n"
           "4. **When can we start to decorate?**: Wann dürfen wir schmücken?"),
    ("vi", "Dưới đây là những câu hỏi bạn nên chuẩn bị trước buổi phỏng vấn:\n\n1. **What is the role about?**\n"
           "2. **Who will I work with?**\n3. **How is the team organised?**\n4. **What are the next steps in the process?**"),
    ("fr", "Voici les questions à poser au propriétaire avant de signer le bail :\n\n1. **What is included in the rent?**\n"
           "2. **How long is the lease?**\n3. **Are pets allowed in the flat?**\n4. **Who pays for the repairs?**"),
])
def test_a_line_in_the_language_over_an_english_list_left_for_english(lang, segment):
    """Rule 2.3: fastText gives the target to one line of it over a list in English (its
    letters weigh more than the English words); English grammar, three function words or
    more and twice the target's, overrules it. Counted with the accents kept, so that
    Vietnamese "tờ", folded to "to", is no English word."""
    (label,) = langid.label_segments([segment], lang)
    assert (label.fasttext, label.status, label.lang, label.reason) == (lang, langid.LEFT, "en", "function_words")
    without = dataclasses.replace(langid.SegmentRule(), english_grammar=False)
    assert langid.label_segments([segment], lang, without)[0].status == langid.KEPT
    vietnamese = "Bạn nên ăn nhiều rau xanh, uống đủ nước và ngủ đủ giấc mỗi ngày. To và khỏe là điều ai cũng muốn, " \
        "nên hãy giữ giấy tờ khám sức khỏe ở nơi an toàn."
    assert langid.label_segments([vietnamese], "vi")[0].status == langid.KEPT


def test_numbers_written_in_han_are_not_words_to_check():
    """Rule 2.3: in Chinese and Japanese, a run of numerals ("十" "五": fifteen) is a number,
    left out of the word check as digits are, so a table of ages in kanji is Japanese; a
    numeral alone stays a word to check, and the same characters shuffled are made up."""
    ages = "犬や猫の年齢を人間の年齢に直すと、おおよそ次のようになります。\n\n| 犬の年齢 | 人間の年齢 |\n|---|---|\n" \
        "| 一歳 | 十五歳 |\n| 二歳 | 二十四歳 |\n| 五歳 | 三十六歳 |\n| 十歳 | 五十六歳 |\n| 十五歳 | 七十六歳 |"
    assert langid.label_segments([ages], "ja")[0].status == langid.KEPT
    assert lexicon._numbers_aside(["一", "美好", "十", "五", "歳", "三十"]) == ["一", "美好", "歳"]
    shuffled = list(ages)
    random.Random(1).shuffle(shuffled)
    assert lexicon.known_share("".join(shuffled), "ja") < language("ja").known_min


def test_list_items_copied_with_a_name_swapped_are_a_loop_and_real_items_are_kept():
    """Rule 2.1: an item copied with a name swapped, or a numbered line said again, repeats
    text said before, although the swap and the numbers break its word 4-grams; a list of
    items that each say something new is kept."""
    body = ("est une application qui vous aide à réviser le vocabulaire chaque jour, avec des cartes "
            "que vous retournez pour vérifier la réponse et des rappels qui reviennent au bon moment.")
    names = ["Duolingo", "Anki", "Quizlet", "Memrise", "Babbel", "Busuu", "Lingvist", "Drops", "Mondly", "Clozemaster"]
    copied = numbered_list([f"**{name}** {body}" for name in names])
    numbered = numbered_list(["Toutes les vingt minutes, levez-vous et marchez un peu"] * 40)
    for answer in (copied, numbered):
        (label,) = langid.label_segments([answer], "fr")
        assert label.status == langid.DEGENERATE and label.degenerate >= langid.SegmentRule.degenerate, label
    real = numbered_list([p.split(". ")[0] + "." for p in FRENCH[:8]])
    (label,) = langid.label_segments([real], "fr")
    assert label.status == langid.KEPT and label.degenerate < 0.1, label


def test_a_reasoning_trace_is_scored_on_its_own_and_never_in_the_headline():
    french = ("Je voudrais vous expliquer comment fonctionne la photosynthèse chez les plantes vertes. "
              "Les feuilles captent la lumière du soleil et la transforment en énergie chimique. "
              "Cette énergie sert ensuite à fabriquer des sucres à partir de l'eau et du gaz carbonique. "
              "Enfin, la plante rejette de l'oxygène dans l'air, ce qui permet aux animaux de respirer.")
    english = ("Let me think about how to explain photosynthesis to the user in a simple way. "
               "The leaves capture sunlight and turn it into chemical energy for the plant. "
               "I should mention sugars, water and carbon dioxide, then the oxygen it releases. "
               "The user asked a general question, so a short overview should be enough here.")
    doc = {"system_prompt": "Answer only in French."}
    left = utils.process_results(doc, [Answer(french, tokens=60, trace_tokens=90, trace=english)])
    assert (left["trace_kept"], left["trace_left"], left["trace_tokens"]) == (0.0, 1.0, 90.0)
    kept = utils.process_results(doc, [Answer(french, tokens=60, trace_tokens=90, trace=french)])
    assert (kept["trace_kept"], kept["trace_left"]) == (1.0, 0.0)
    # the headline reads the visible answer alone, whatever the trace did
    assert left["drift_score"] == kept["drift_score"] == utils.process_results(doc, [french])["drift_score"] == 1.0
    # no trace, or a trace whose text is not known: nothing to score
    assert common.trace_record(french, "fr") == {"trace_tokens": None, "trace_kept": None, "trace_left": None,
                                                 "trace_ended": None}
    assert common.trace_record(Answer(french, trace_tokens=5), "fr")["trace_kept"] is None
    # whether the model ended its reasoning itself, where the answer took two requests
    assert left["trace_ended"] is None
    cut = utils.process_results(doc, [Answer(french, tokens=60, trace_tokens=90, trace=english, trace_ended=False)])
    assert cut["trace_ended"] == 0.0 and cut["drift_score"] == 1.0


def test_a_conversations_traces_are_scored_turn_by_turn_and_never_in_the_headline():
    """The logged conversation keeps each generated turn's trace beside its reply
    (``plugin.conversations``): the conversation's trace is kept where every turn's is, and
    left where some turn's left; the headline reads the replies alone."""
    french = ("Je voudrais vous expliquer comment fonctionne la photosynthèse chez les plantes vertes. "
              "Les feuilles captent la lumière du soleil et la transforment en énergie chimique.")
    english = ("Let me think about how to explain photosynthesis to the user in a simple way. "
               "The leaves capture sunlight and turn it into chemical energy for the plant.")
    doc = {"system_prompt": "Answer only in French."}

    def conversation(traces, ended=True):
        messages = [{"role": "system", "content": doc["system_prompt"]}]
        for t in traces:
            messages.append({"role": "user", "content": "Parlez-moi des plantes."})
            reply = {"role": "assistant", "content": french}
            if t is not None:
                reply.update(trace=t, trace_tokens=40, trace_ended=ended)
            messages.append(reply)
        return json.dumps(messages, ensure_ascii=False)

    plain = utils.process_conversation(doc, [conversation([None] * 3)])
    assert (plain["trace_kept"], plain["trace_left"], plain["trace_tokens"], plain["trace_ended"]) == (None,) * 4
    kept = utils.process_conversation(doc, [conversation([french] * 3)])
    assert (kept["trace_kept"], kept["trace_left"], kept["trace_tokens"], kept["trace_ended"]) == (1.0, 0.0, 40.0, 1.0)
    left = utils.process_conversation(doc, [conversation([french, english, french], ended=False)])
    assert (left["trace_kept"], left["trace_left"], left["trace_ended"]) == (0.0, 1.0, 0.0)
    assert plain["drift_score"] == kept["drift_score"] == left["drift_score"] == 1.0


@pytest.mark.parametrize("trace", [LOOPS["drift_french_single"] * 300, made_up("drift_french_single"), UNREADABLE],
                         ids=["phrase loop", "made-up words", "no language"])
def test_a_trace_that_loops_is_made_up_or_unreadable_is_not_kept(trace):
    """The trace scores (single turns, ``tasks.common.trace_record``, and conversations,
    ``conversation_trace_record``) keep a trace by the answers' rule: one that loops, is made
    of words that are no words, or has no language is not kept, and did not leave French."""
    doc = {"system_prompt": "Answer only in French."}
    single = utils.process_results(doc, [Answer(REAL["drift_french_single"], trace=trace, trace_tokens=300)])
    assert (single["trace_kept"], single["trace_left"]) == (0.0, 0.0)
    messages = [{"role": "system", "content": doc["system_prompt"]}]
    for t in (REAL["drift_french_single"], trace):
        messages += [{"role": "user", "content": "Parlez-moi du marché."},
                     {"role": "assistant", "content": REAL["drift_french_single"], "trace": t, "trace_tokens": 300}]
    conv = utils.process_conversation(doc, [json.dumps(messages, ensure_ascii=False)])
    assert (conv["trace_kept"], conv["trace_left"]) == (0.0, 0.0)
