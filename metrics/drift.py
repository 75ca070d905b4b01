"""Scores for one forced-length answer that was told to stay in one language.

Definitions: docs/metrics.md ("Single turn"). ``score_response`` returns every per-sample
value of ``drift_french_single``.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import re
import string

from drift_eval.metrics import crosscheck, langid, lid_model, wordcut
from drift_eval.metrics.languages import language
from drift_eval.metrics.text import CJK, fold, ngrams
from drift_eval.metrics.values import ListValue

ECHO_PATTERNS = [
    r"\b(?:answer|answers|answering|respond|responding|reply|replying|write|writing|speak|speaking)\b[^.!?\n]{0,40}\bfrench\b",
    r"\b(?:only|solely|exclusively)\s+(?:in\s+)?french\b",
    r"\bfrench\s+only\b",
    r"\bin\s+french\s+as\s+(?:requested|instructed|asked)\b",
    r"\b(?:repondre|reponds|repondrai|reponse|reponses|ecrire|ecris|ecrirai|parler|parle)\b[^.!?\n]{0,40}\ben\s+francais\b",
    r"\b(?:uniquement|seulement|exclusivement)\s+en\s+francais\b",
    r"\ben\s+francais\s+(?:uniquement|seulement|exclusivement)\b",
    r"\bcomme\s+(?:demande|convenu|indique)\b[^.!?\n]{0,20}\ben\s+francais\b",
]
_ECHO_RE = [re.compile(p) for p in ECHO_PATTERNS]
#: a word that each pattern of ``ECHO_PATTERNS`` cannot match without (a text that lacks it
#: is not searched with that pattern)
ECHO_NEEDS = ("french",) * 4 + ("francais",) * 4
#: the English patterns above, for any language: ``{name}`` is its English name, lower-cased
ECHO_PATTERNS_EN = [
    r"\b(?:answer|answers|answering|respond|responding|reply|replying|write|writing|speak|speaking)\b[^.!?\n]{{0,40}}\b{name}\b",
    r"\b(?:only|solely|exclusively)\s+(?:in\s+)?{name}\b",
    r"\b{name}\s+only\b",
    r"\bin\s+{name}\s+as\s+(?:requested|instructed|asked)\b",
]
ECHO_NGRAM = 5
#: metric tokens per segment of a language timeline
SEGMENT_TOKENS = 128


@functools.lru_cache(maxsize=None)
def echo_regexes(lang: str = "fr") -> tuple:
    """The compiled restatement patterns of ``lang``, matched on accent-folded lower-case text:
    ``ECHO_PATTERNS`` for French; for any other target, ``ECHO_PATTERNS_EN`` with its English
    name and its phrases from ``languages.json`` (in the language and in English), each a
    whole-word match (a plain match in Chinese and Japanese, written without spaces)."""
    if lang == "fr":
        return tuple(_ECHO_RE)

    spec = language(lang)
    name = re.escape(fold(spec.name))
    out = [re.compile(p.format(name=name)) for p in ECHO_PATTERNS_EN]
    for phrase in (*spec.echo_phrases, *spec.echo_phrases_en):
        body = r"\s+".join(re.escape(w) for w in fold(phrase).split())
        if not body:
            continue
        out.append(re.compile(body if re.search(f"[{CJK}]", phrase) else rf"(?<!\w){body}(?!\w)"))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def echo_searches(lang: str = "fr") -> tuple:
    """Each pattern of ``echo_regexes(lang)`` with a word it cannot match without: the
    language's folded name in the English patterns, a phrase's first folded word, and
    ``ECHO_NEEDS`` for French. A pattern is searched only in a text holding its word."""
    if lang == "fr":
        needs = list(ECHO_NEEDS)
    else:
        spec = language(lang)
        phrases = [fold(p).split() for p in (*spec.echo_phrases, *spec.echo_phrases_en)]
        needs = [fold(spec.name)] * len(ECHO_PATTERNS_EN) + [words[0] for words in phrases if words]
    patterns = echo_regexes(lang)
    assert len(needs) == len(patterns), lang
    return tuple(zip(needs, patterns))


@functools.lru_cache(maxsize=64)
def _instruction_ngrams(instruction: str, n: int) -> frozenset:
    return frozenset(ngrams(langid.WORD_RE.findall(fold(instruction)), n))


def restates_instruction(text: str, instruction: str = "", n: int = ECHO_NGRAM, lang: str = "fr") -> bool:
    folded = fold(text)
    if any(need in folded and r.search(folded) for need, r in echo_searches(lang)):
        return True
    if instruction:  # the text's n-grams read until one is the instruction's
        return not _instruction_ngrams(instruction, n).isdisjoint(ngrams(langid.WORD_RE.findall(folded), n))
    return False


def restated_words(text: str, instruction: str = "", n: int = ECHO_NGRAM, lang: str = "fr") -> tuple[int, int]:
    """(words of ``text`` inside a restatement of the instruction, words of ``text``). After
    accent folding and lower-casing, a word is inside a restatement when it lies in a match
    of one of ``echo_regexes(lang)`` or in a word ``n``-gram that the text shares with
    ``instruction``. Words are ``text.words`` (the leak metrics' denominator)."""
    folded = fold(text)
    spans = [m.span() for m in langid.WORD_RE.finditer(folded)]
    covered = [False] * len(spans)
    for need, r in echo_searches(lang):
        if need not in folded:
            continue
        for m in r.finditer(folded):
            for i, (a, b) in enumerate(spans):
                if a < m.end() and b > m.start():
                    covered[i] = True
    if instruction:
        inst = _instruction_ngrams(instruction, n)
        ws = [folded[a:b] for a, b in spans]
        for i in range(len(ws) - n + 1):
            if tuple(ws[i:i + n]) in inst:
                covered[i:i + n] = [True] * n
    return sum(covered), len(spans)


def line_pass_rate(text: str, lang: str = "fr", threshold: float = 0.3, min_tokens: int = 5) -> float | None:
    """Passing / eligible lines (at least ``min_tokens`` whitespace tokens; a line passes when
    its top label is ``lang`` with probability at least ``threshold``); ``None`` when no line
    is eligible (nothing to measure)."""
    lines = [ln for ln in (text or "").splitlines() if len(ln.split()) >= min_tokens]
    if not lines:
        return None
    preds = lid_model.identify_many(lines, min_words=1)
    return sum(p.lang == lang and p.score >= threshold for p in preds) / len(lines)


def determined(timeline: list[str]) -> bool:
    """Whether at least one segment has a known language. An answer with none is
    *undetermined*: its language metrics are ``None``, neither a pass nor a failure."""
    return any(seg != langid.UNKNOWN for seg in timeline)


def first_foreign(timeline: list[str], lang: str = "fr") -> int | None:
    """Index of the first segment not kept in ``lang``: another language, degenerate or
    unreadable (task versions before 4.0 and 2.0: the first known segment not in ``lang``,
    an ``unknown`` one passed over); code is passed over too. None when there is none (the
    answer never left ``lang``, or, for an older undetermined answer, nothing is known:
    ``determined`` tells the two apart)."""
    return next((i for i, seg in enumerate(timeline) if seg not in (langid.UNKNOWN, langid.CODE, lang)), None)


def starts_in(timeline: list[str], lang: str = "fr") -> bool:
    """Whether the first known segment is in ``lang`` (``starts_french``; False when no
    segment is known)."""
    return next((seg for seg in timeline if seg != langid.UNKNOWN), None) == lang


def all_in(timeline: list[str], lang: str = "fr") -> bool:
    """At least one known segment, and every known segment in ``lang`` (``fully_french``
    of a determined answer; False when no segment is known)."""
    return determined(timeline) and first_foreign(timeline, lang) is None


def survival(timelines: list[list[str]], lang: str = "fr"):
    """Share of answers still in ``lang`` at each segment, with a 95% band (Kaplan-Meier:
    an answer that ends before the last segment without leaving ``lang`` is censored
    there); a ``drift_eval.metrics.survival.Survival``. Undetermined answers (no known
    segment) are left out: they are neither at risk nor events."""
    from drift_eval.metrics.survival import survival_curve  # deferred, start-up: loads numpy

    kept = [t for t in timelines if determined(t)]
    return survival_curve([first_foreign(t, lang) for t in kept], [len(t) for t in kept])


def french_survival(timelines: list[list[str]], lang: str = "fr") -> ListValue:
    """lm-eval aggregation for ``language_timeline``: the share of answers still in ``lang``
    (French by default) at each segment (the survival curve; per-sample timelines stay in
    the logged samples)."""
    return ListValue((round(v, 6) for v in survival(timelines, lang).estimate), along="segments")


def neutral_names(scores: dict) -> dict:
    """``scores`` with the language-neutral metric names of the ``drift_<L>`` tasks: every
    ``french`` in a name becomes ``target`` (``fully_french`` -> ``fully_target``,
    ``french_turn_3`` -> ``target_turn_3``); docs/metrics.md says why drift_french keeps its
    own names."""
    return {k.replace("french", "target"): v for k, v in scores.items()}


def mean_language_score(scores: list[list[float]]) -> float:
    """lm-eval aggregation for ``language_scores``: the mean fastText probability of the
    segments' top language, over every segment of every answer."""
    flat = [p for row in scores for p in row]
    return sum(flat) / len(flat) if flat else 0.0


#: LCB's text normalisation (``normalize`` in its ``compute_metrics.py``), after the response
#: is cut at the first "\nQ:" and stripped: ``string.punctuation`` removed (ASCII only; "#"
#: is one of them), the em dash made a space, the Arabic comma removed
_LCB_TABLE = str.maketrans({**{c: None for c in string.punctuation}, "\u2014": " ", "\u060c": None})
#: ``_LCB_TABLE`` as two steps that give the same text faster: the characters it removes, then the em dash
_LCB_REMOVED = re.compile(f"[{re.escape(string.punctuation)}\u060c]+")


def segmenter_problem(lang: str) -> str | None:
    """Why ``lcb_tokens`` cannot segment ``lang`` here (one line), or None when it can."""
    return wordcut.problem(lang)


def lcb_tokens(line: str, lang: str = "fr") -> list[str]:
    """A line's tokens as LCB counts them: jieba's words without the spaces for Chinese,
    fugashi's for Japanese (``metrics.wordcut``), whitespace tokens (``str.split``) for
    every other language."""
    if lang == "zh":
        return list(_chinese_tokens(line))
    return wordcut.japanese_tagger().parse(line).split() if lang == "ja" else line.split()


def _chinese_tokens(line: str):
    """jieba's words of ``line`` without the spaces, cut block by block as they are read."""
    return (w for words in wordcut.chinese_blocks(line) for w in words if w.strip())


def _has_tokens(line: str, lang: str, least: int) -> bool:
    """``len(lcb_tokens(line, lang)) >= least``; in Chinese, the line is cut only until
    there are enough."""
    if lang != "zh":
        return len(lcb_tokens(line, lang)) >= least
    return sum(1 for _ in itertools.islice(_chinese_tokens(line), least)) >= least


def lcb_lines(text: str, min_tokens: int = 5, lang: str = "fr") -> list[str]:
    """The lines LCB classifies in a response, as it writes them: the text before the first
    ``"\nQ:"``, stripped, normalised (``_LCB_TABLE``), split at ``"\n"``, keeping lines of at
    least ``min_tokens`` tokens (``lcb_tokens``). Nothing else is changed: a no-break space
    or a tab stays inside the line that goes to fastText."""
    normal = _LCB_REMOVED.sub("", (text or "").split("\nQ:")[0].strip()).replace("\u2014", " ")
    return [ln for ln in normal.split("\n") if _has_tokens(ln, lang, min_tokens)]


def lcb_line_pass(text: str, lang: str = "fr", threshold: float = 0.3, min_tokens: int = 5) -> float | None:
    """The Language Confusion Benchmark's line-level pass for one response: 1.0 when every
    line of ``lcb_lines`` is labelled ``lang`` by fastText with a probability above
    ``threshold`` (at or below it LCB calls a line "unknown", which fails), 0.0 when a line
    fails, ``None`` when no line is long enough (LCB skips such responses)."""
    lines = lcb_lines(text, min_tokens, lang)
    if not lines:
        return None
    preds = lid_model.predict(lines, k=1, fold_whitespace=False)
    return float(all(p and p[0][0] == lang and p[0][1] > threshold for p in preds))


def timeline_labels(text: str, lang: str, segment_size: int = SEGMENT_TOKENS) -> list:
    """Each segment of an answer under the segment rule (``langid.label_answer``: cleaned with
    the whole answer's code and quotations in view; a short last piece joins the one before
    it); an empty answer is one unreadable segment."""
    labels = langid.label_answer(text, lang, size=segment_size, whole_tail=True) if text else []
    return labels or [langid.SegmentLabel(langid.UNKNOWN, 0.0, langid.UNKNOWN, 0.0, "too_short")]


def _prose(entries: list[str]) -> list[str]:
    """The parts that are not code: a fenced code block neither keeps nor loses a language."""
    return [e for e in entries if e != langid.CODE]


def kept(entries: list[str], lang: str = "fr") -> bool:
    """Whether every part (segment or turn) of an answer or conversation is kept: written in
    ``lang`` (its timeline entry is ``lang``: ``SegmentLabel.entry``), code aside; False
    when nothing but code is there (an answer of code only is unreadable)."""
    prose = _prose(entries)
    return bool(prose) and all(e == lang for e in prose)


#: why an answer or a conversation was not kept, first cause first (``loss_cause``)
CAUSES = ("left", "degenerate", "unreadable")


def loss_cause(entries: list[str], lang: str = "fr") -> str | None:
    """Why the parts ``entries`` (timeline entries: a language, ``degenerate`` or
    ``unreadable``) were not kept: ``left`` when a part is written in another language,
    else ``degenerate`` when a part is a loop or made-up words, else ``unreadable``; None
    when every part is kept. One cause per sample, so that the causes and the kept share
    add up to 1."""
    if kept(entries, lang):
        return None
    if left_for(entries, lang) is not None:
        return "left"
    return "degenerate" if langid.DEGENERATE in entries else "unreadable"


#: timeline entries that are no language: what a part is when it is written in none
#: (``langid.SegmentLabel.entry``), and the older tasks' ``unknown``
NO_LANGUAGE = (langid.DEGENERATE, langid.UNREADABLE, langid.CODE, langid.UNKNOWN)


def left_for(entries: list[str], lang: str = "fr") -> str | None:
    """The first other language that the parts ``entries`` are written in (None: none)."""
    return next((e for e in entries if e != lang and e not in NO_LANGUAGE), None)


def left_languages(values) -> str:
    """lm-eval aggregation of ``left_for``: each language left for, with its number of
    samples, most first (``en 12, zh 3``), or ``none``."""
    counts: dict = {}
    for v in values:
        if isinstance(v, str) and v:
            counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def cause_scores(entries: list[str], lang: str = "fr") -> dict:
    """The split of "not kept" by cause (``loss_cause``), one 0/1 value each, and the
    language left for."""
    cause = loss_cause(entries, lang)
    return {**{f"not_kept_{c}": float(cause == c) for c in CAUSES}, "left_for": left_for(entries, lang)}


def time_kept(entries: list[str], lang: str = "fr", sizes: list[int] | None = None) -> float:
    """The share of an answer (or conversation) that is kept before its first part that is
    not, in the parts' own sizes (``sizes``: metric tokens per segment; default: one per
    turn); 1 when every part is kept, 0 for none. Every answer is measured to its own end,
    so a dense script or a loop that holds fewer words per model token does not end the
    count early (docs/metrics.md, "Time in the language"). Code does not end it, nor is it
    time in the language by itself: an answer of code only, or whose first part that is not
    code is not kept, has none."""
    sizes = sizes or [1] * len(entries)
    total = sum(sizes)
    prose = _prose(entries)
    if not total or not prose or prose[0] != lang:
        return 0.0
    first = first_foreign(entries, lang)
    return 1.0 if first is None else sum(sizes[:first]) / total


def _kept_share(entries: list[str], lang: str) -> float | None:
    """Kept parts / parts, code aside (0 when there is only code; None with no part)."""
    prose = _prose(entries)
    return sum(e == lang for e in prose) / len(prose) if prose else (0.0 if entries else None)


def score_response(text: str, instruction: str = "", lang: str = "fr", segment_size: int = SEGMENT_TOKENS,
                   meta: dict | None = None) -> dict:
    """Every per-sample value of the single-turn task (docs/metrics.md). ``meta``: what the
    backend measured (``drift_eval.plugin.answers``: ``tokens``, ``natural_end``,
    ``natural_end_chars``); values that are not defined for this answer are ``None``.
    A segment counts for ``lang`` only when it is kept: written in ``lang``, not a loop,
    and words of ``lang`` (``langid.label_answer``); every answer is scored, an empty or
    unreadable one as not kept."""
    meta = meta or {}
    labels = timeline_labels(text, lang, segment_size)
    timeline = [x.entry for x in labels]
    starts = langid.token_starts(text)  # a segment's tokens are those that start inside it
    sizes = [bisect.bisect_left(starts, b) - bisect.bisect_left(starts, a)
             for a, b in langid.segment_spans(text, segment_size, whole_tail=True)]
    prose = _prose(timeline)
    starts = bool(prose) and prose[0] == lang
    later = any(e != lang for e in prose[1:])
    second = langid.second_half(text)
    second_lang = lid_model.identify(second).lang
    detected = crosscheck.detect(text)
    end, chars, tokens = meta.get("natural_end"), meta.get("natural_end_chars"), meta.get("tokens")
    ended = end is not None and chars is not None
    before = [x.entry for x in timeline_labels(text[:chars], lang, segment_size)] if ended and text[:chars] \
        else None if ended else timeline
    after = [x.entry for x in langid.label_answer(text[chars:], lang, size=segment_size, whole_tail=True)] \
        if ended else []
    loops = [x.degenerate >= langid.SegmentRule.degenerate for x in labels]
    return {
        "fully_french": float(kept(timeline, lang)),
        "french_fraction": _kept_share(timeline, lang),
        "time_in_french": time_kept(timeline, lang, sizes),
        "starts_french": float(starts),
        "drift_given_start": float(later) if starts else None,
        "started_then_left": float(starts and later),
        **cause_scores(timeline, lang),
        "second_half_french": float(second_lang == lang) if second_lang != langid.UNKNOWN else None,
        "echo_rate": float(restates_instruction(second, instruction, lang=lang)),
        "line_pass_rate": line_pass_rate(text, lang),
        "lcb_lpr": lcb_line_pass(text, lang),
        "langdetect_french": float(detected == lang) if detected != langid.UNKNOWN else None,
        "degenerate_share": sum(loops) / len(loops),
        "natural_end": end,
        "natural_end_share": end / tokens if end is not None and tokens else None,
        "fully_french_before_end": float(kept(before, lang)) if before else None,
        "french_after_end": _kept_share(after, lang),
        "language_timeline": timeline,
        "language_scores": [round(x.score, 4) for x in labels],
    }
