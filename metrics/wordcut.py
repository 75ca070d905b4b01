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
``tests/maths/test_langid_languages.py`` checks it against ``jieba.cut`` on every committed
Chinese answer.
"""
from __future__ import annotations

import functools
import logging
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
    return tuple(_jieba().cut(block))


def clear_cache() -> None:
    """Forget the blocks cut so far (benchmarks time a cold start with it)."""
    _block_words.cache_clear()


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
