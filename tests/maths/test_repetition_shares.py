"""The repetition shares behind "degenerate" (docs/metrics.md, "Kept: written in the
language"): stretches said before (numbers aside), short lines written again, one
character or a short unit written over and over, and the repeated share counted over a
text's pieces as one text."""
import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from support.prose import FRENCH, numbered_list

from drift_eval.metrics import langid
from drift_eval.metrics.text import MARKS, fold, line_shares, loop_shares, repeated_shares, run_shares, stretch_shares
from drift_eval.metrics.text import _RUN_RE as RUN_RE
from drift_eval.metrics.text import _UNIT_RE as UNIT_RE
from drift_eval.metrics.text import RUN_MARKUP, _repeated, ngrams


def test_the_stretch_share_counts_runs_said_before_numbers_aside():
    words = "un deux trois quatre cinq six sept huit neuf dix"
    assert stretch_shares([words]) == [0.0]  # said once: nothing repeats
    assert stretch_shares([words, words]) == [0.0, 1.0]  # said again, in the next piece
    assert stretch_shares([f"1. {words}", f"2. {words}"]) == [0.0, 1.0]  # renumbered: still said before
    assert repeated_shares([f"1. {words}", f"2. {words}"])[1] < 1.0  # the 4-grams that hold a number do not repeat
    swapped = words.replace("cinq", "zéro")
    assert stretch_shares([words + " " + swapped]) == [0.0]  # a swap in the middle leaves no run of eight
    assert stretch_shares([f"{words} onze douze", f"{words} treize"])[1] == 10 / 11  # "treize" is new
    assert loop_shares([words, words])[1] == 1.0


def test_the_line_share_counts_short_lines_written_again():
    """Rule 2.2: a list item, a table row or a heading written again is said before however
    short it is (three words have no 8-word run and few 4-grams), renumbered or not."""
    days = ["Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag"]
    answer = "Hier ist Ihre Liste:\n\n" + "\n".join(f"{k}. **{day}**:\n   - Kaffee mit Milch" for k, day in enumerate(days, 1))
    share = line_shares([answer])[0]
    assert share == 15 / (4 + 6 + 18)  # five of the six items are said before; the intro and the days are new
    assert stretch_shares([answer]) == [0.0] and repeated_shares([answer]) == [0.0]  # each day breaks the runs
    assert loop_shares([answer]) == [share]
    assert line_shares(["1. Äpfel kaufen\n2. Brot backen", "3. Äpfel kaufen"]) == [0.0, 1.0]  # renumbered, next piece
    assert line_shares(["| a | 1 |\n|---|---|\n| a | 2 |"]) == [0.5]  # the rule line has no words; numbers aside
    real = numbered_list([p.split(". ")[0] + "." for p in FRENCH[:8]])
    assert line_shares([real]) == [0.0]


@given(st.text(max_size=200))
def test_folding_a_text_keeps_its_lines(piece):
    """``line_shares`` folds each piece once and cuts the folded text into lines: the same
    lines as folding each line of it on its own."""
    assert fold(piece).split("\n") == [fold(line) for line in piece.split("\n")]


def _fold_one_character_at_a_time(text: str) -> str:
    """``text.fold`` as rule 2.3 was frozen with it: every character in turn, each mark read
    against the last letter before it (the reference for the faster fold)."""
    decomposed = unicodedata.normalize("NFKD", (text or "").lower().replace("ı", "i"))
    out, base = [], ""
    for c in decomposed:
        if unicodedata.combining(c):
            if base and (not (base < "\u0370" or "\u1e00" <= base <= "\u1eff")) and (
                    re.match(f"[{MARKS}]", c) or len(unicodedata.normalize("NFC", base + c)) == 1):
                out.append(c)
            continue
        out.append(c)
        base = c
    return unicodedata.normalize("NFC", "".join(out))


#: letters and marks of every script the rule reads, and some it does not: Latin accents,
#: Cyrillic (й, stress accents), Arabic and Devanagari signs, kana voicing marks, Hebrew
#: points, Thai tone marks, Hangul, and marks with no letter before them
_FOLD_ALPHABET = ("aeiouAEIOUıIçéèêëàâîïôûüÿñœ\u0301\u0300\u0308\u0327 \n-\t"
                  "йЙёЁиИаеоу\u0306\u0301\u0483\u0489бвгд"
                  "مرحباكتب\u064b\u064e\u0650\u0651\u0652\u0670\u06d6\u06e4"
                  "नमस्तेकखग\u093c\u0941\u094d\u0902\u0951\u0962"
                  "かがはばぱカガハ\u3099\u309a漢字한국어\u1100\u1161"
                  "שלום\u05b0\u05b8\u05bcสวัสดี\u0e48\u0e49ᾳἀ\u0345ﬁ①")


@settings(max_examples=500)
@given(st.text(alphabet=_FOLD_ALPHABET, max_size=80) | st.text(max_size=80))
def test_folding_reads_each_mark_against_the_letter_before_it_as_it_always_did(text):
    assert fold(text) == _fold_one_character_at_a_time(text)


@settings(max_examples=300)
@given(st.lists(st.text(alphabet="ab1 \n\t.-é漢\u0301", max_size=40) | st.sampled_from(["a b a b\n", "1. a b\n"]),
                max_size=10))
def test_the_loop_share_is_the_largest_of_the_four_measures_each_read_on_its_own(pieces):
    assert loop_shares(pieces) == [max(x) for x in zip(repeated_shares(pieces), stretch_shares(pieces),
                                                       line_shares(pieces), run_shares(pieces))]


def _run_shares_searching_every_piece(pieces: list[str]) -> list[float]:
    """``text.run_shares`` as rule 2.3 was frozen with it: both patterns searched in every
    piece (the reference for the search that skips pieces with no repetition in them)."""
    out = []
    for piece in pieces:
        chars = "".join((piece or "").split())
        inside = [False] * len(chars)
        for m in RUN_RE.finditer(chars):
            if m.group(1) not in RUN_MARKUP:
                inside[m.start():m.end()] = [True] * (m.end() - m.start())
        for m in UNIT_RE.finditer(chars):
            unit = m.group(1)
            if any(c.isalpha() for c in unit) and len(set(unit)) > 1 and not set(unit) & set(RUN_MARKUP):
                inside[m.start():m.end()] = [True] * (m.end() - m.start())
        out.append(sum(inside) / len(chars) if chars else 0.0)
    return out


#: short units, their repetitions and the markup around them, cut into pieces anywhere
_RUN_PIECES = st.lists(st.text(alphabet="ab-|. \nтあ\ud800", max_size=30) | st.sampled_from(
    ["ab" * 4, "abc" * 4, "abcd" * 4, "a" * 8, "a" * 7, "-" * 9, "unuz" * 5, "无|" * 5, "ababab", "т" * 12]), max_size=12)


@settings(max_examples=500)
@given(_RUN_PIECES, st.lists(st.integers(0, 400), max_size=6))
def test_the_run_share_searches_only_pieces_with_a_repetition_and_finds_what_searching_all_does(parts, cuts):
    text = "".join(parts)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])] or [text]
    assert run_shares(pieces) == _run_shares_searching_every_piece(pieces)


def test_the_run_share_counts_one_character_written_over_and_over():
    """Rule 2.2: a run of one character (eight or more, spaces aside) is a loop of
    characters; table rules and separators are markup, not a loop."""
    stuck = "Сравните их структуру и темы" + "т" * 60
    assert run_shares([stuck]) == [60 / (60 + 24)]
    assert run_shares(["你可以拼凑一封钱" + "－" * 40]) == [40 / 48]
    assert run_shares(["| a | b |\n|--------|--------|\n| 1 | 2 |", "Mais...... non"]) == [0.0, 0.0]
    assert run_shares(["ttttttt ok"]) == [0.0]  # seven in a row is not a run
    (label,) = langid.label_segments([stuck], "ru")
    assert label.status == langid.DEGENERATE and label.reason == "loop" and loop_shares([stuck])[0] > 0.45


def test_the_run_share_counts_a_short_unit_written_over_and_over():
    """Rule 2.3: a unit of two to four characters, a letter among them, written four or more
    times in a row is a loop of characters ("sunucusunuzunuzunuz..."); a table's cells that
    repeat one value ("|无|无|无|无") are markup around a word, and reduplication ("anak-anak",
    "どんどん", "hahaha") is too short to be a run."""
    stuck = "Web adreslerinizi bir web sunucusuna aktarmak ve bu sunucusunuz" + "unuz" * 20
    (share,) = run_shares([stuck])
    assert share > 0.45
    (label,) = langid.label_segments([stuck], "tr")
    assert label.status == langid.DEGENERATE and label.reason == "loop"
    assert run_shares(["| 选项 | 无 | 无 | 无 | 无 | 无 |", "Anak-anak bermain di taman bersama orang-orang tua mereka.",
                       "雨がどんどん降ってきました。", "hahaha, das ist lustig", "0-1 | 0-1 | 0-1 | 0-1 | 0-1"]) == [0.0] * 5


@given(st.lists(st.lists(st.sampled_from(["a", "b", "c"]), max_size=12), max_size=6), st.integers(2, 5))
def test_the_repeated_share_is_counted_over_the_pieces_as_one_text(all_words, n):
    """``_repeated`` (rule 2.3 counts it in one pass) gives each piece the share of its
    n-grams, those that start in it and run on into the next pieces, said before in the text."""
    flat = [w for ws in all_words for w in ws]
    seen, start, expected = set(), 0, []
    grams = ngrams(flat, n)
    for ws in all_words:
        mine = grams[start : start + len(ws)]
        start += len(ws)
        repeats = 0
        for g in mine:
            repeats += g in seen
            seen.add(g)
        expected.append(repeats / len(mine) if mine else 0.0)
    assert _repeated(all_words, n) == expected


@given(st.lists(st.sampled_from("abc"), max_size=30), st.integers(1, 10))
def test_ngrams_are_every_run_of_n_words_in_order(ws, n):
    assert ngrams(ws, n) == [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]
