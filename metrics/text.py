"""Word-level text helpers shared by the metrics: accent folding, word tokens, n-grams and
repetition. Python's strings and regular expressions, and NumPy for one check over a
text's code points (``_may_repeat``)."""
from __future__ import annotations

import functools
import itertools
import re
import unicodedata

#: Han characters and kana: scripts written without spaces, where each character is one
#: metric token (a documented stand-in for word segmentation; docs/metrics.md, "Tokens")
CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
#: the vowel signs and other combining marks of Devanagari, Arabic and Cyrillic, which ``\w``
#: leaves out: inside a word they belong to it
MARKS = "\u0483-\u0489\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed" \
        "\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"
#: words: a run of word characters (with the marks inside them), or one Han or kana character
WORD_RE = re.compile(rf"[{CJK}]|[^\W{CJK}][^\W{CJK}{MARKS}]*(?:[{MARKS}]+[^\W{CJK}]*)*", re.UNICODE)
REPEAT_N = 4
#: the run of words (numbers aside) that ``stretch_shares`` counts as said before
STRETCH_N = 8
#: one character this many times in a row (spaces aside) is a run (``run_shares``)
RUN_LEAST = 8
#: characters whose runs are markup (table rules, separators, ellipses), not a loop
RUN_MARKUP = "-=_*#~|.:·`+"
_RUN_RE = re.compile(r"(\S)\1{%d,}" % (RUN_LEAST - 1))
#: a unit of two to four characters written this many times in a row, with a letter and no
#: markup in it, is a run too (rule 2.3: "unuzunuzunuzunuz"; not "|无|无|无|无", table cells)
UNIT_LEAST = 4
_UNIT_RE = re.compile(r"(\S{2,4}?)\1{%d,}" % (UNIT_LEAST - 1))

#: the letters of each script the rule counts (``languages.SCRIPTS``): a word counts for the
#: script of its first letter (``langid.script_counts``, ``lexicon.known_share``)
SCRIPT_LETTERS = {
    "Latn": re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]"),
    "Cyrl": re.compile(r"[\u0400-\u04ff\u0500-\u052f]"),
    "Arab": re.compile(r"[\u0620-\u064a\u066e-\u06d3\u06fa-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufefc]"),
    "Deva": re.compile(r"[\u0900-\u0963\u0972-\u097f]"),
    "Hang": re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3131-\u318e]"),
    "Kana": re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u31f0-\u31ff\uff66-\uff9d]"),
    "Hani": re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
}


@functools.lru_cache(maxsize=1 << 16)
def script_of(char: str) -> str | None:
    """The script (a key of ``SCRIPT_LETTERS``) of one character, the first that holds it,
    or None."""
    return next((name for name, r in SCRIPT_LETTERS.items() if r.match(char)), None)


@functools.lru_cache(maxsize=1 << 10)
def fold(text: str) -> str:
    """Lower-case and strip accents, so that patterns match "Français" and "francais" (and
    Turkish dotless ı is i, as lower-casing "I" gives). A mark stays only where it makes
    another letter of a script whose words the metrics read: a Devanagari, Arabic or
    Cyrillic mark of ``MARKS``, or one that composes with a non-Latin letter into a single
    character (Japanese で, Cyrillic й); every other mark goes, as it always did (Latin
    accents, Hebrew points, Thai tone marks, a stress accent on a Cyrillic vowel). Each run
    of marks is read against the letter before it; the last texts folded are remembered
    (a segment is folded by several measures)."""
    decomposed = unicodedata.normalize("NFKD", (text or "").lower().replace("ı", "i"))
    marks = "".join(sorted(c for c in set(decomposed) if unicodedata.combining(c)))
    if not marks:
        return unicodedata.normalize("NFC", decomposed)
    after_latin, runs = _mark_runs(marks)
    decomposed = after_latin.sub("", decomposed)  # a Latin letter keeps no mark
    out, last = [], 0
    for m in runs.finditer(decomposed):
        a, b = m.span()
        out.append(decomposed[last:a])
        base = decomposed[a - 1] if a else ""
        if base:
            out += [c for c in m.group() if _keeps_mark(base, c)]
        last = b
    out.append(decomposed[last:])
    return unicodedata.normalize("NFC", "".join(out))


@functools.lru_cache(maxsize=1 << 10)
def _mark_runs(marks: str) -> tuple[re.Pattern, re.Pattern]:
    """Patterns matching runs of the combining ``marks``: those that follow a Latin letter
    (or any character before Greek: ``_keeps_mark`` keeps none of their marks), and all."""
    mark = f"[{re.escape(marks)}]"
    # a run's first mark, searched for first (the fast way), then the character before it
    return re.compile(f"{mark}(?<!{mark}.)(?<=[\x00-\u036f\u1e00-\u1eff].){mark}*"), re.compile(f"{mark}+")


_MARK_RE = re.compile(f"[{MARKS}]")


@functools.lru_cache(maxsize=1 << 14)
def _keeps_mark(base: str, mark: str) -> bool:
    if base < "\u0370" or "\u1e00" <= base <= "\u1eff":  # Latin (and everything before Greek)
        return False
    return bool(_MARK_RE.match(mark)) or len(unicodedata.normalize("NFC", base + mark)) == 1


def words(text: str) -> list[str]:
    """Accent-folded, lower-cased word tokens."""
    return WORD_RE.findall(fold(text))


@functools.lru_cache(maxsize=1 << 8)
def word_tokens(text: str) -> tuple[str, ...]:
    """``WORD_RE``'s words of ``text`` as it is (not folded), for the last few texts asked (a
    segment's words are read by several steps of the rule)."""
    return tuple(WORD_RE.findall(text or ""))


def ngrams(ws: list, n: int) -> list[tuple]:
    """Every run of ``n`` consecutive items of ``ws``, in order, as tuples."""
    return list(zip(*(ws[i:] for i in range(n))))


def repeated_shares(pieces: list[str], n: int = REPEAT_N) -> list[float]:
    """Per piece of one text (in order), the share of its word ``n``-grams that already
    occurred earlier in the text (in an earlier piece or earlier in the same piece);
    0 for a piece with no ``n``-gram. A piece's n-grams include those that start in it
    and run into the next one, so that the pieces' n-grams are exactly the text's."""
    return _repeated([words(p) for p in pieces], n)


def _repeated(all_words: list[list[str]], n: int) -> list[float]:
    flat = [w for ws in all_words for w in ws]
    seen: set = set()
    out, start = [], 0
    for ws in all_words:
        # the piece's n-grams: those that start in it, running on into the next pieces
        grams = ngrams(flat[start : start + len(ws) + n - 1], n)[: len(ws)] if ws else []
        start += len(ws)
        repeats = 0
        for g in grams:
            repeats += g in seen
            seen.add(g)
        out.append(repeats / len(grams) if grams else 0.0)
    return out


def repetition(text: str, n: int = REPEAT_N) -> float:
    """The share of the text's word ``n``-grams that already occurred earlier in it."""
    return repeated_shares([text], n)[0]


def stretch_shares(pieces: list[str], n: int = STRETCH_N) -> list[float]:
    """Per piece of one text (in order), the share of its words, numbers aside, that lie
    inside a run of ``n`` words said before in the text (in an earlier piece, or earlier in
    the same piece); 0 for a piece without such words. A list item or a paragraph copied
    with a word or a name swapped, or renumbered, still repeats here, where the 4-grams
    around each swap and each number do not (``repeated_shares``). A run's first occurrence
    does not count; a run that starts in a piece and goes on into the next covers words of
    both."""
    return _stretch([words(p) for p in pieces], n)


def _stretch(all_words: list[list[str]], n: int) -> list[float]:
    pieces_words = [[w for w in ws if not w.isdigit()] for ws in all_words]
    flat = [w for ws in pieces_words for w in ws]
    inside = [False] * len(flat)
    seen: set = set()
    for i, g in enumerate(ngrams(flat, n)):
        if g in seen:
            inside[i : i + n] = [True] * n
        seen.add(g)
    out, start = [], 0
    for ws in pieces_words:
        own = inside[start : start + len(ws)]
        out.append(sum(own) / len(own) if own else 0.0)
        start += len(ws)
    return out


def line_shares(pieces: list[str]) -> list[float]:
    """Per piece of one text (in order), the share of its words, numbers aside, that lie in a
    line said before in the text (in an earlier piece, or earlier in the same piece): a list
    item, a table row or a heading written again, however short (renumbered, or with other
    symbols, it is the same line: lines are compared by their words, numbers aside). A line
    that a piece boundary cuts is two lines; a line's first occurrence does not count."""
    return _lines([_line_words(fold(p)) for p in pieces])


def _line_words(folded: str) -> list[list[str]]:
    """The words of each line of a folded piece (folding keeps every line break where it
    was; no word runs over a line break, so a piece's words are its lines' in order)."""
    return [WORD_RE.findall(line) for line in folded.split("\n")]


def _lines(all_lines: list[list[list[str]]]) -> list[float]:
    seen: set = set()
    out = []
    for lines in all_lines:
        total = repeated = 0
        for line in lines:
            ws = tuple(w for w in line if not w.isdigit())
            if not ws:
                continue
            total += len(ws)
            repeated += len(ws) if ws in seen else 0
            seen.add(ws)
        out.append(repeated / total if total else 0.0)
    return out


def run_shares(pieces: list[str]) -> list[float]:
    """Per piece, the share of its characters (spaces aside) inside a run of one character
    written ``RUN_LEAST`` or more times in a row ("тттттттт", "－－－－－－－－",
    "0.000000000000"), runs of markup (``RUN_MARKUP``: table rules, separators) aside, or
    inside a run of one unit of two to four characters, a letter among them and no markup,
    written ``UNIT_LEAST`` or more times in a row (rule 2.3: "sunucusunuzunuzunuzunuz").
    Only a piece that holds such a repetition at all (``_may_repeat``) is searched."""
    all_chars = ["".join((piece or "").split()) for piece in pieces]
    out = []
    for chars, search in zip(all_chars, _may_repeat(all_chars)):
        inside = [False] * len(chars)
        for m in _RUN_RE.finditer(chars) if search else ():
            if m.group(1) not in RUN_MARKUP:
                inside[m.start():m.end()] = [True] * (m.end() - m.start())
        for m in _UNIT_RE.finditer(chars) if search else ():
            unit = m.group(1)
            if any(c.isalpha() for c in unit) and len(set(unit)) > 1 and not set(unit) & set(RUN_MARKUP):
                inside[m.start():m.end()] = [True] * (m.end() - m.start())
        out.append(sum(inside) / len(chars) if chars else 0.0)
    return out


#: (unit length, how many of its characters in a row equal the one a unit later): what a
#: run of ``_RUN_RE`` (one character ``RUN_LEAST`` times) and of ``_UNIT_RE`` (a unit of two
#: to four ``UNIT_LEAST`` times) needs
_PERIODS = ((1, RUN_LEAST - 1), *((n, n * (UNIT_LEAST - 1)) for n in (2, 3, 4)))


def code_points(text: str):
    """The code points of ``text`` as a NumPy array of unsigned 32-bit integers, one per
    character (a lone surrogate as its own code point)."""
    import numpy  # deferred, start-up: loads numpy

    return numpy.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _may_repeat(all_chars: list[str]) -> list[bool]:
    """For consecutive pieces of one text (spaces removed), whether each holds a stretch that
    repeats with a period of one to four characters as long as a run of ``run_shares``
    needs: a piece without one has no run, and its regular expressions need not search it.
    Read once over the whole text, by code points."""
    import numpy  # deferred, start-up: loads numpy

    ends = numpy.cumsum([len(chars) for chars in all_chars])
    codes = code_points("".join(all_chars))
    found = numpy.zeros(len(all_chars), dtype=bool)
    for period, same in _PERIODS:
        if len(codes) < period + same:
            continue
        equal = numpy.concatenate(([0], numpy.cumsum(codes[period:] == codes[:-period])))
        starts = numpy.flatnonzero(equal[same:] - equal[:-same] == same)  # ``same`` equal in a row from each
        piece = numpy.searchsorted(ends, starts, side="right")  # a start lies before the last end
        found[piece[starts + same + period <= ends[piece]]] = True
    return found.tolist()


def loop_shares(pieces: list[str]) -> list[float]:
    """The segment rule's loop measure (rule 2.3), per piece of one text: the largest of the
    share of its word 4-grams said before (``repeated_shares``: phrase loops, numbers and
    symbols included), the share of its words inside an 8-word run said before
    (``stretch_shares``: items and paragraphs copied with a word swapped), the share of its
    words in lines said before (``line_shares``: short items and rows written again) and the
    share of its characters in runs of one character, or of one short unit (``run_shares``).
    Each piece is folded, and its lines' words read, once for the three word measures."""
    all_lines = [_line_words(fold(p)) for p in pieces]
    all_words = [list(itertools.chain.from_iterable(lines)) for lines in all_lines]
    return [max(shares) for shares in zip(_repeated(all_words, REPEAT_N), _stretch(all_words, STRETCH_N),
                                          _lines(all_lines), run_shares(pieces))]
