"""Whether a segment is words of a language or made-up words in its script: the share of its
words found in the language's word list (docs/metrics.md, "Kept: written in the language").

The word lists are wordfreq's (``best``: its large list where it has one), pinned to one
release (``WORDFREQ_VERSION``) so that a verdict cannot move with a new release; each is
folded as the metrics fold words (``text.fold``) and loaded once per process. How a
language's words are found:

* **space-separated languages**: the words (``text.WORD_RE``) of the language's script,
  digits left out; a word is known when it is in the list (for a Latin-script language, in
  its list or English's: an English word inside the prose is a word, and whether the
  segment left the language is language ID's question, not this one's);
* **Korean**: a space-separated word (a stem with its particles and endings) is known when
  it is in the list, or splits once into a known stem of at least two syllables and a
  known ending (the list holds morphemes);
* **Chinese**: the share of Han characters inside words of two or more characters that
  jieba finds (``wordcut``) and the list holds (Traditional characters are read as Simplified, as
  wordfreq does): single characters are nearly all in the list, so they prove nothing;
* **Japanese**: the same, with fugashi's words (the unidic-lite dictionary, ``wordcut``),
  Han and kana.

In Chinese and Japanese a word of numerals alone ("三十", "十五") is a number and is left out,
as digits are (rule 2.3).

Pure Python over the word lists: no model is loaded here.
"""
from __future__ import annotations

import functools
import os
import re
from importlib.metadata import version

from drift_eval.metrics import wordcut
from drift_eval.metrics.text import SCRIPT_LETTERS, fold, word_tokens

#: the one wordfreq release whose lists the rule was frozen with (pyproject pins it)
WORDFREQ_VERSION = "3.1.1"
#: fewer checked words (characters in Chinese and Japanese) than this: no verdict (None)
MIN_CHECKED = 3

_HAN = SCRIPT_LETTERS["Hani"]
_HAN_KANA = re.compile(f"{SCRIPT_LETTERS['Hani'].pattern}|{SCRIPT_LETTERS['Kana'].pattern}")
_DIGIT = re.compile(r"\d")
#: Chinese and Japanese numerals: a word of these alone is a number, left out as digits are
#: (rule 2.3: "十五歳", "三十六")
_NUMERAL = re.compile(r"[〇零一二三四五六七八九十百千万萬億亿兆两兩]+")


def _numbers_aside(words: list, surface=lambda w: w) -> list:
    """The words of a Chinese or Japanese segment without its numbers: a run of words made of
    numerals alone, two characters or more in all ("十" "五": fifteen), is left out as digits
    are; a numeral alone ("一" of "一美好") stays a word to check (rule 2.3). ``surface``:
    a word's text."""
    out, run = [], []
    for word in [*words, None]:
        if word is not None and _numeral(surface(word)):
            run.append(word)
            continue
        if run:
            if sum(len(surface(w)) for w in run) < 2:
                out += run
            run = []
        if word is not None:
            out.append(word)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _numeral(word: str) -> bool:
    """Whether ``word`` is made of Chinese and Japanese numerals alone (each distinct word
    read once, for the last many asked)."""
    return bool(_NUMERAL.fullmatch(word))


@functools.lru_cache(maxsize=1 << 16)
def _han_count(word: str) -> int:
    """The Han characters in ``word`` (each distinct word read once, for the last many asked)."""
    return len(_HAN.findall(word))


class WordListMissing(RuntimeError):
    """wordfreq is not installed, or is another release than the rule was frozen with."""


def _wordfreq():
    try:
        import wordfreq  # deferred, optional: without wordfreq, scoring says so in one line (WordListMissing)
    except ImportError as exc:
        raise WordListMissing(f"the word lists of language ID need wordfreq: pip install "
                              f"wordfreq=={WORDFREQ_VERSION} ({exc})") from None
    have = version("wordfreq")
    if have != WORDFREQ_VERSION:
        raise WordListMissing(f"language ID was frozen with wordfreq {WORDFREQ_VERSION}'s word lists, but "
                              f"wordfreq {have} is installed: pip install wordfreq=={WORDFREQ_VERSION}")
    return wordfreq


@functools.lru_cache(maxsize=1)
def available() -> frozenset:
    """The languages wordfreq has a word list for (ISO 639-1 codes, as lid.176 labels them)."""
    return frozenset(_wordfreq().available_languages(wordlist="best"))


def has_list(lang: str) -> bool:
    """Whether wordfreq has a word list for ``lang``."""
    return lang in available()


@functools.lru_cache(maxsize=None)
def word_list(lang: str) -> frozenset:
    """``lang``'s words, folded (``text.fold``); ``KeyError`` when wordfreq has no list."""
    if not has_list(lang):
        raise KeyError(f"wordfreq has no word list for {lang!r}")
    return frozenset(fold(w) for w in _wordfreq().iter_wordlist(lang, wordlist="best"))


def list_files(langs) -> list[str]:
    """The wordfreq data files that hold the lists of ``langs`` (for the rule's fingerprint)."""
    data = os.path.join(os.path.dirname(_wordfreq().__file__), "data")
    out = []
    for lang in sorted(set(langs)):
        for size in ("large", "small"):
            path = os.path.join(data, f"{size}_{lang}.msgpack.gz")
            if os.path.exists(path):
                out.append(path)
                break
    return out


@functools.lru_cache(maxsize=1)
def _simplify():
    _wordfreq()  # one line when wordfreq is missing or another release
    from wordfreq.chinese import simplify_chinese  # deferred, optional: needs wordfreq (above)

    return simplify_chinese


def _chinese(text: str) -> tuple[int, int]:
    known_words = word_list("zh")
    checked = known = 0
    for word in _numbers_aside(wordcut.chinese_words(_simplify()(text))):
        n = _han_count(word)
        checked += n
        known += n if n >= 2 and word in known_words else 0
    return known, checked


def _japanese(text: str) -> tuple[int, int]:
    known_words = word_list("ja")
    checked = known = 0
    nodes = [(n.surface, n.is_unk) for n in wordcut.japanese_tagger()(text)]
    for surface, unknown in _numbers_aside(nodes, lambda w: w[0]):
        n = len(_HAN_KANA.findall(surface))
        checked += n
        known += n if n >= 2 and not unknown and surface in known_words else 0
    return known, checked


def _korean_known(word: str, known_words: frozenset) -> bool:
    if word in known_words:
        return True
    return any(word[:i] in known_words and word[i:] in known_words for i in range(len(word) - 1, 1, -1))


@functools.lru_cache(maxsize=1 << 16)
def _checked(word: str, script: str) -> bool:
    """Whether ``word`` is one to check in ``script``: it begins with a letter of that script
    and holds no digit (each distinct word is read once, for the last many asked)."""
    return bool(SCRIPT_LETTERS[script].match(word)) and not _DIGIT.search(word)


def _spaced(text: str, lang: str, script: str) -> tuple[int, int]:
    words = [w for w in word_tokens(fold(text)) if _checked(w, script)]
    known_words = word_list(lang)
    if lang == "ko":
        return sum(_korean_known(w, known_words) for w in words), len(words)
    extra = word_list("en") if script == "Latn" and lang != "en" else frozenset()
    return sum(w in known_words or w in extra for w in words), len(words)


def known_share(text: str, lang: str, script: str = "Latn") -> float | None:
    """The share of ``text``'s words (characters, for Chinese and Japanese) that are words of
    ``lang`` (the module's docstring says how each language is read); ``script``: the script
    (a key of ``text.SCRIPT_LETTERS``) whose words are checked (Hangul for Korean, Han and
    kana for Chinese and Japanese, whatever it says); None when fewer than ``MIN_CHECKED``
    are there to check, or wordfreq has no list for ``lang``."""
    if not has_list(lang):
        return None
    if lang == "zh":
        known, checked = _chinese(text)
    elif lang == "ja":
        known, checked = _japanese(text)
    else:
        known, checked = _spaced(text, lang, "Hang" if lang == "ko" else script)
    return known / checked if checked >= MIN_CHECKED else None
