"""Word-level text helpers shared by the metrics: accent folding, word tokens, n-grams and
repetition. Pure Python."""
from __future__ import annotations

import re
import unicodedata

WORD_RE = re.compile(r"\w+", re.UNICODE)
REPEAT_N = 4


def fold(text: str) -> str:
    """Lower-case and strip accents, so that patterns match "Français" and "francais"."""
    decomposed = unicodedata.normalize("NFKD", (text or "").lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """Accent-folded, lower-cased word tokens."""
    return WORD_RE.findall(fold(text))


def ngrams(ws: list, n: int) -> list[tuple]:
    return [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]


def repeated_shares(pieces: list[str], n: int = REPEAT_N) -> list[float]:
    """Per piece of one text (in order), the share of its word ``n``-grams that already
    occurred earlier in the text (in an earlier piece or earlier in the same piece);
    0 for a piece with no ``n``-gram. A piece's n-grams include those that start in it
    and run into the next one, so that the pieces' n-grams are exactly the text's."""
    seen: set = set()
    out = []
    all_words = [words(p) for p in pieces]
    for i, ws in enumerate(all_words):
        following = [w for later in all_words[i + 1:] for w in later][: n - 1]
        grams = ngrams(ws + following, n)[: len(ws)] if ws else []
        repeats = 0
        for g in grams:
            repeats += g in seen
            seen.add(g)
        out.append(repeats / len(grams) if grams else 0.0)
    return out


def repetition(text: str, n: int = REPEAT_N) -> float:
    """The share of the text's word ``n``-grams that already occurred earlier in it."""
    return repeated_shares([text], n)[0]
