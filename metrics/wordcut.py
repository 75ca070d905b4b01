"""The word segmenters of Chinese and Japanese, loaded once per process: jieba (as LCB and
the word lists read Chinese) and fugashi with the unidic-lite dictionary its wheel bundles
(Japanese), for the LCB line pass (``drift.lcb_lines``) and the word-list check
(``lexicon.known_share``). What they cut decides a segment's status, so this file is one of
the segment rule's (``langid.RULE_FILES``).

``chinese_words`` is ``jieba.cut`` (accurate mode, HMM on: jieba's defaults) with a memory:
jieba cuts a text block by block, between its own separators (``jieba.re_han_default``), and
each block's words depend on that block alone, so each distinct block is cut once and
remembered (``BLOCKS_CACHED`` of them, least recently used first out): the turns of a
loop, and the answers of one prompt, repeat sentences, whose second reading costs a lookup.

A block of Han characters, letters and digits is cut by ``_cut_han``: jieba's own steps
(``Tokenizer.get_DAG``, ``calc`` and ``__cut_DAG``, 0.42.1) with its dictionary and its HMM
(``jieba.finalseg``), in less time. jieba builds the graph of dictionary words, then scores
every route through it from the right, taking the logarithm of a word's count each time it
meets it, in a generator for ``max``. Here the graph is scored as it is built, from the
right, and each word's score (the logarithm of its count less that of the total: the same
float, by the same two operations) is kept once computed. A route's score is the same sum in
the same order, and of two routes from a character that score the same, the one whose first
word is longer wins, as ``max`` over (score, end) settles it ("等等等" alone is "等等" "等").
Every other block (punctuation, spaces) goes to ``jieba.cut``.
``tests/maths/test_langid_languages.py`` checks the words against ``jieba.cut`` on every
committed Chinese answer and on generated text (dictionary words, repeated characters,
letters and digits between them).
"""
from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterator

#: distinct jieba blocks (runs of Han, letters and digits, or the text between them) whose
#: words are kept; a block is a clause or a line, so this holds a few MB at most
BLOCKS_CACHED = 1 << 15


@functools.lru_cache(maxsize=1)
def _jieba():
    import jieba  # deferred, start-up: loads jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@functools.lru_cache(maxsize=BLOCKS_CACHED)
def _block_words(block: str) -> tuple[str, ...]:
    jieba = _jieba()
    if jieba.re_han_default.match(block):
        return tuple(_cut_han(block, jieba))
    return tuple(jieba.cut(block))


@functools.lru_cache(maxsize=1)
def _scores(total: int) -> dict:
    """Each dictionary word's (and lone character's) score met so far, ``log(count or 1) -
    log(total)``, for one dictionary total (a dictionary changed in between starts afresh);
    bounded by the dictionary and the script."""
    return {}


def _cut_han(sentence: str, jieba) -> list[str]:
    """``list(jieba.dt._Tokenizer__cut_DAG(sentence))`` for one block of Han characters,
    letters and digits (the module's docstring says how)."""
    tokenizer = jieba.dt
    tokenizer.check_initialized()
    freq, n, scores = tokenizer.FREQ, len(sentence), _scores(tokenizer.total)
    logtotal = math.log(tokenizer.total)
    score, end = [0.0] * n + [0], [0] * n
    for k in range(n - 1, -1, -1):
        best, at, i, frag = None, k, k, sentence[k]
        count = freq.get(frag)
        while count is not None:  # the dictionary's words that begin at k, shortest first
            if count:
                s = scores.get(frag)
                if s is None:
                    s = scores[frag] = math.log(count) - logtotal
                s += score[i + 1]
                if best is None or s >= best:  # max over (score, end): a tie goes to the later end
                    best, at = s, i
            i += 1
            if i == n:
                break
            frag = sentence[k:i + 1]
            count = freq.get(frag)
        if best is None:  # no dictionary word begins here: the character alone, as jieba scores it
            s = scores.get(sentence[k])
            if s is None:
                s = scores[sentence[k]] = math.log(freq.get(sentence[k]) or 1) - logtotal
            best = s + score[k + 1]
        score[k], end[k] = best, at
    words: list[str] = []
    x, buf = 0, ""
    while x < n:  # jieba's walk along the best route
        y = end[x] + 1
        if y - x == 1:
            buf += sentence[x]
        else:
            _single(buf, words, freq, jieba)
            buf = ""
            words.append(sentence[x:y])
        x = y
    _single(buf, words, freq, jieba)
    return words


def _single(buf: str, words: list[str], freq: dict, jieba) -> None:
    """jieba's single characters in a row, added to ``words``: one alone as it is, a run that
    the dictionary holds character by character, any other run as its HMM cuts it."""
    if len(buf) == 1:
        words.append(buf)
    elif buf:
        words.extend(buf if freq.get(buf) else jieba.finalseg.cut(buf))


def clear_cache() -> None:
    """Forget the blocks cut so far and the words' scores (benchmarks time a cold start with it)."""
    _block_words.cache_clear()
    _scores.cache_clear()


def chinese_blocks(text: str) -> Iterator[tuple[str, ...]]:
    """The words of ``text`` as ``jieba.cut`` gives them, one block's at a time."""
    for block in _jieba().re_han_default.split(text):
        if block:
            yield _block_words(block)


def chinese_words(text: str) -> list[str]:
    """``list(jieba.cut(text))``, each distinct block cut once per process."""
    return [w for words in chinese_blocks(text) for w in words]


@functools.lru_cache(maxsize=1)
def japanese_tagger():
    """fugashi's tagger with unidic-lite, as LCB runs it (``-O wakati``): ``parse(line)``
    gives a line's words as one space-separated string, and calling it the nodes (each
    word's surface, and whether the dictionary knows it)."""
    from fugashi import Tagger  # deferred, start-up: loads fugashi

    return Tagger("-O wakati -b 50000")


def problem(lang: str) -> str | None:
    """Why ``lang``'s words cannot be segmented here (one line), or None when they can."""
    if lang not in ("zh", "ja"):
        return None
    try:
        _jieba() if lang == "zh" else japanese_tagger()
    except (ImportError, RuntimeError) as exc:
        package = "jieba" if lang == "zh" else "fugashi and unidic-lite"
        return f"scoring {lang} needs {package} (LCB's word segmenter): pip install {package.replace(' and ', ' ')} ({exc})"
    return None
