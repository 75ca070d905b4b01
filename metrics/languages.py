"""What the language-ID rule and the echo patterns know about each target language: its
script, the fastText labels that count as it, its function words (Latin-script languages)
and the phrases that restate "answer only in <language>". The facts are in
``languages.json`` beside this file (one place); docs/metrics.md ("Every target language")
says where each comes from. Pure Python: no model is loaded here."""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass

from drift_eval.metrics.text import fold

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "languages.json")

#: the target languages of the Language Confusion Benchmark's cross-lingual setting
TARGETS = ("fr", "de", "es", "pt", "it", "tr", "id", "vi", "ja", "zh", "ko", "ar", "hi", "ru")
#: ISO 15924 scripts the rule can count (``langid.script_counts``)
SCRIPTS = ("Latn", "Cyrl", "Arab", "Deva", "Hang", "Kana", "Hani")
#: a target language's script, as the letters that make up its prose
PROSE_SCRIPTS = {"Latn": ("Latn",), "Cyrl": ("Cyrl",), "Arab": ("Arab",), "Deva": ("Deva",),
                 "Kore": ("Hang",), "Jpan": ("Kana", "Hani"), "Hans": ("Hani",)}


class LanguageDataError(ValueError):
    """``languages.json`` is damaged or lacks a field (a one-line message)."""


@dataclass(frozen=True)
class Language:
    code: str                       # ISO 639-1, as lid.176 labels it
    name: str                       # English name, as the English instruction names it
    native_name: str
    script: str                     # ISO 15924: Latn, Cyrl, Arab, Deva, Kore, Jpan, Hans
    function_words: frozenset       # Latin-script languages: words only its grammar uses this often (folded)
    aliases: frozenset              # other lid.176 labels that count as this language
    near: tuple                     # lid.176 labels it is confused with (documented, not counted)
    echo_phrases: tuple             # restatements of the instruction in the language itself
    echo_phrases_en: tuple          # ... in English
    known_min: float                # the share of a segment's words in L's word list below which they are made up

    @property
    def prose_scripts(self) -> tuple:
        return PROSE_SCRIPTS[self.script]

    @property
    def latin(self) -> bool:
        return self.script == "Latn"


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    try:
        with open(DATA, encoding="utf-8") as fh:
            rows = json.load(fh)
    except (OSError, ValueError) as exc:
        raise LanguageDataError(f"{DATA} cannot be read ({exc})") from None
    out = {}
    for row in rows if isinstance(rows, list) else []:
        try:
            out[row["code"]] = Language(
                code=row["code"], name=row["name"], native_name=row["native_name"], script=row["script"],
                function_words=frozenset(fold(w) for w in row["function_words"]), aliases=frozenset(row["aliases"]),
                near=tuple(row["near_languages"]), echo_phrases=tuple(row["echo_phrases"]),
                echo_phrases_en=tuple(row["echo_phrases_en"]), known_min=float(row["known_min"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise LanguageDataError(f"{DATA}: an entry lacks {exc} or is not an object") from None
        if out[row["code"]].script not in PROSE_SCRIPTS:
            raise LanguageDataError(f"{DATA}: {row['code']} has unknown script {row['script']!r}")
    missing = [c for c in TARGETS if c not in out]
    if missing:
        raise LanguageDataError(f"{DATA} lacks the target languages {', '.join(missing)}")
    return out


def language(code: str) -> Language:
    """The facts about target language ``code``; ``KeyError`` (with the known codes) otherwise."""
    table = _table()
    if code not in table:
        raise KeyError(f"unknown target language {code!r}; the targets are {', '.join(TARGETS)}")
    return table[code]


def known(code: str) -> bool:
    return code in _table()
