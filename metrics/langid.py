"""Language identification at segment level: the metric tokens, an answer cut into
segments, and the segment rule (``label_segments``), which gives each segment a language
and a status: kept (written in the target: its language, no loop, words of its word list,
``lexicon``), left, degenerate, unreadable or code (docs/metrics.md, "Kept: written in the
language"). fastText's model and its predictions are ``lid_model``'s; the seeded
``langdetect`` cross-check is ``crosscheck``'s. Empty or too-short text is ``"unknown"``,
never an error.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
from dataclasses import dataclass

from drift_eval.metrics import lexicon, lid_model
from drift_eval.metrics.languages import language
from drift_eval.metrics.lid_model import MIN_WORDS, UNKNOWN
from drift_eval.metrics.text import MARKS, SCRIPT_LETTERS, WORD_RE, fold, loop_shares, script_of, word_tokens

#: the version of the segment rule: what a segment's language and status are. Bump it with
#: any change to what the rule says (its settings, language facts, word lists, or code that
#: gives another output): every held-out set records the version and fingerprint
#: (``rule_fingerprint``) it was drawn for, and a changed rule needs a fresh draw
#: (tests/maths/test_langid_heldout.py). Code rewritten to give every output of the frozen
#: rule on the texts of its sets and fresh runs is a revision of the same rule
#: (``benchmarks/rule_outputs.py revise``)
RULE_VERSION = "2.3"
#: the files whose bytes are the rule (beside this one): the fastText model's reader, the word
#: tokens and folding, the language facts, the word lists' reader, the word segmenters
RULE_FILES = ("langid.py", "lid_model.py", "text.py", "languages.py", "languages.json", "lexicon.py", "wordcut.py")
#: tokens as the metrics count them: words (``text.WORD_RE``: a run of word characters, or
#: one Han or kana character) or single punctuation marks (model-independent)
TOKEN_RE = re.compile(rf"{WORD_RE.pattern}|[^\w\s{MARKS}]", re.UNICODE)


def rule_fingerprint() -> str:
    """SHA-256 over everything that decides a segment's language and status: the rule's
    source files (``RULE_FILES``), the fastText model file in use, and wordfreq's list files
    of the 14 targets, of English and of every language a segment can be given and checked
    against (all of wordfreq's lists). Any change to one of them changes the fingerprint."""
    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256(f"rule {RULE_VERSION}; wordfreq {lexicon.WORDFREQ_VERSION}\n".encode())
    paths = [os.path.join(here, name) for name in RULE_FILES] + [lid_model.check_model_file()] + lexicon.list_files(
        lexicon.available())
    for path in paths:
        with open(path, "rb") as fh:
            digest.update(os.path.basename(path).encode() + b"\0" + hashlib.sha256(fh.read()).digest())
    return digest.hexdigest()


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text or "")


def segments(text: str, size: int = 128, whole_tail: bool = False) -> list[str]:
    """Consecutive pieces of ``text`` holding ``size`` metric tokens each (see ``TOKEN_RE``;
    the last may hold fewer), cut from the text itself so that line breaks, code fences and
    quotes stay as they were. ``whole_tail``: a last piece of fewer than ``size // 2`` tokens
    joins the one before it, so that no segment is too short to be read (``segment_spans``)."""
    return [text[a:b] for a, b in segment_spans(text, size, whole_tail)]


@functools.lru_cache(maxsize=16)
def token_starts(text: str) -> tuple[int, ...]:
    """Where each metric token of ``text`` starts (``TOKEN_RE``), for the last few texts
    asked (an answer's segments and their sizes are read from the same starts)."""
    return tuple(m.start() for m in TOKEN_RE.finditer(text or ""))


def segment_spans(text: str, size: int = 128, whole_tail: bool = False) -> list[tuple[int, int]]:
    """Character spans of ``segments``: each runs from its first token's start to the next
    segment's first token's start (the last to the end of the text)."""
    found = token_starts(text or "")
    starts = list(found[::size])
    if whole_tail and len(starts) > 1 and len(found) - (len(starts) - 1) * size < size // 2:
        starts.pop()
    return [(a, b) for a, b in zip(starts, [*starts[1:], len(text or "")])]


def second_half(text: str) -> str:
    """The second half of ``text`` by metric tokens (with the middle one of an odd number),
    its tokens joined by spaces: those of the text from the middle token's start on."""
    text = text or ""
    starts = token_starts(text)
    return " ".join(tokens(text[starts[len(starts) // 2]:])) if starts else ""


# ---------------------------------------------------------------------------- the segment rule
#: words that only French grammar uses this often (articles, pronouns, prepositions,
#: elided forms); shared with Italian or Spanish ("la", "de", "il", "que", "en") left out
FRENCH_FUNCTION_WORDS = frozenset(
    "les des du une et est sont dans pour avec sur pas ne au aux ce cette ces qui nous vous ils elles "
    "leur leurs mais ou où très aussi être été avoir fait peut sans chez je tu on cela ça votre vos notre nos "
    "mon ma mes ton ta tes son sa ses puis donc alors comme plus l d qu c j n s".split())
ENGLISH_FUNCTION_WORDS = frozenset(
    "the and of to is in that it for with you this are be was on as by at from your have not or an can "
    "will they their there which would what when how these those been has had were".split())
#: code, URLs and e-mail addresses, removed before fastText: the alternatives of one pattern,
#: in order, each with what a text must hold for it to match there (``_code_in``)
_CODE_PARTS = (("`", r"```.*?(?:```|$)|`[^`\n]*`"), ("://", r"https?://\S+"), ("@", r"\S+@\S+\.\w+"))
_QUOTED_RE = re.compile(r"«[^»]{0,200}»|“[^”]{0,200}”|\"[^\"\n]{0,200}\"")
_NOT_BREAK = re.compile(r"[^\n]")
#: a word capitalised inside a sentence (after a word, a comma or a semicolon and a space): a
#: name; its capital is searched for first, then the two characters before it
_NAME_RE = re.compile(r"[A-ZÀ-Ý](?<=[\w,;] [A-ZÀ-Ý])[\w'’-]*")


@dataclass(frozen=True)
class SegmentRule:
    """The decision rule for one segment's language (docs/metrics.md, "Language ID"); its
    defaults are the values validated on ``tests/data/langid_segments.jsonl`` (French) and
    on the tuning parts of ``tests/data/langid/`` (every other target)."""
    function_share: float = 0.12    # target (English) function words among the words: target (English) grammar
    function_ratio: float = 2.0     # ... and at least this many times the other language's
    english_least: int = 3          # English grammar overrules fastText's target label from this many function words
    margin: float = 0.0             # target in fastText's top 3 within this of the top label
    degenerate: float = 0.45        # a segment whose loop share (``text.loop_shares``) is this high is a loop
    low_confidence: float = 0.6     # a loop labelled with a third language below this: unknown
    script_share: float = 0.5       # non-Latin target: its script's share of the words below this: left
    kana_share: float = 0.05        # kana among the Han and kana characters from this share on: Japanese
    same_script_margin: float = 0.3  # non-Latin target in fastText's top 3 within this of a same-script top label
    same_script_loop_confidence: float = 0.9  # a loop given to a same-script neighbour below this: unknown
    other_known_min: float = 0.5    # a segment given to another language with fewer of its words known: made up
    # each step can be switched off, for the ablations of benchmarks/answer_set.py
    cleaning: bool = True           # code, URLs, quotes, names and markup removed before fastText
    target_grammar: bool = True     # the target's function words decide
    margin_step: bool = True        # the target within ``margin`` of the top label decides
    english_grammar: bool = True    # English function words turn a third-language label into English
    loop_step: bool = True          # a low-confidence loop is unknown
    # whether the text is language (rule 2.0): each can be switched off for the ablations
    target_loop_step: bool = True   # a loop in the target language is degenerate, not kept
    word_step: bool = True          # made-up words (too few found in the word list) are degenerate


#: what a segment is, beyond its language: kept (written in the target), left (written in
#: another language), degenerate (a loop, or made-up words), unreadable (no language to
#: tell: too short once names and markup are gone, digits and symbols) or code (a fenced
#: code block and too few words around it: it neither keeps nor loses the answer's language)
KEPT, LEFT, DEGENERATE, UNREADABLE, CODE = "kept", "left", "degenerate", "unreadable", "code"
STATUSES = (KEPT, LEFT, DEGENERATE, UNREADABLE, CODE)


@dataclass(frozen=True)
class SegmentLabel:
    lang: str             # the decided language, or ``unknown``
    score: float          # fastText's probability of its top label on the cleaned text
    fasttext: str         # fastText's top label on the cleaned text
    degenerate: float     # its loop share: how much of it repeats text said earlier in the answer (``text.loop_shares``)
    reason: str           # what decided: fasttext, function_words, margin, loop, too_short, script, alias
    status: str = UNREADABLE  # kept, left, degenerate, unreadable or code (``STATUSES``)
    known_words: float | None = None  # share of its words in the word list of its language (``lexicon``)

    @property
    def known(self) -> bool:
        return self.lang != UNKNOWN

    @property
    def entry(self) -> str:
        """The segment in a language timeline: its language when it is written in one (kept
        or left), else its status (``degenerate``, ``unreadable``, ``code``)."""
        return self.lang if self.status in (KEPT, LEFT) else self.status


def _code_in(text: str) -> re.Pattern | None:
    """The pattern of ``_CODE_PARTS`` without the alternatives that cannot match in ``text``
    (the same matches, less searching), or None when none can."""
    return _code_pattern(tuple(need in text for need, _ in _CODE_PARTS))


@functools.lru_cache(maxsize=8)
def _code_pattern(present: tuple) -> re.Pattern | None:
    parts = [part for (_, part), here in zip(_CODE_PARTS, present) if here]
    return re.compile("|".join(parts), re.S) if parts else None


def clean_for_lid(text: str) -> str:
    """The prose of a segment: code, URLs, quoted titles, capitalised names inside sentences
    and markdown markup removed (they carry the names and code, not the answer's language)."""
    text = text or ""
    code = _code_in(text)
    text = code.sub(" ", text) if code else text
    text = _QUOTED_RE.sub(" ", text)
    text = _NAME_RE.sub(" ", text)
    text = re.sub(r"[#*_|>\-=~`]+", " ", text)
    return " ".join(text.split())


def script_counts(text: str) -> dict:
    """The number of words (``WORD_RE``: a Han or kana character is one) of each script in
    ``text`` (``languages.SCRIPTS``), by each word's first letter; words of digits or of
    another script are not counted. Words, not letters: a Latin name of twelve letters
    weighs as much as one Chinese character, not twelve."""
    return dict(_script_counts(text or ""))


@functools.lru_cache(maxsize=1 << 8)
def _script_counts(text: str) -> tuple:
    counts = dict.fromkeys(SCRIPT_LETTERS, 0)
    for word in word_tokens(text):
        name = script_of(word[0])
        if name is not None:
            counts[name] += 1
    return tuple(counts.items())


def _script_label(counts: dict, target, top: str) -> str:
    """The language of prose that is mostly not in ``target``'s script (by words): fastText's label,
    unless that is the target itself (romanised Hindi, say), then ``<target>-<script>``
    of the script that dominates."""
    if top != target.code:
        return top
    major = max(counts, key=counts.get)
    return f"{target.code}-{major}"


def left_language(text: str, target: str = "fr", rule: SegmentRule = SegmentRule()) -> bool:
    """Whether ``text``, scored as one segment, is known and not in ``target``."""
    label = label_segments([text], target, rule)[0]
    return label.known and label.lang != target


def opened_at(text: str, starts: list[int]) -> list[str]:
    """For each offset of ``starts`` (a segment's first character), the mark that opens the
    code or quotation it falls inside in the whole ``text`` (```` ``` ````, `````, or the
    quotation mark), else ``""``. A segment cut from the middle of a code block or a quotation
    has lost its opening mark; with it put back, the cleaning removes what the whole answer
    shows to be code or quoted, and pairs the segment's own quotation marks as the answer
    does (a segment that begins inside ``"cat"が"dog"`` would otherwise pair ``"が"``)."""
    found = _code_in(text or "") if "`" in (text or "") else None  # no code span without a backtick
    code = [(m.start(), m.end(), "```" if m.group().startswith("```") else "`")
            for m in (found.finditer(text) if found else ()) if m.group().startswith("`")]
    blank, last = [], 0  # the text with its code blanked out, line breaks kept
    for a, b, _ in code:
        blank += [(text or "")[last:a], _NOT_BREAK.sub(" ", text[a:b])]
        last = b
    blank.append((text or "")[last:])
    quotes = [(m.start(), m.end(), m.group()[0]) for m in _QUOTED_RE.finditer("".join(blank))]
    out = []
    for at in starts:
        mark = next((o for a, b, o in code if a < at < b), None)
        if mark is None:
            mark = next((o for a, b, o in quotes if a < at < b - 1), "")
        out.append(mark)
    return out


def label_answer(text: str, target: str = "fr", rule: SegmentRule = SegmentRule(),
                 size: int = 128, whole_tail: bool = False) -> list[SegmentLabel]:
    """The language of each ``size``-token segment of one answer (``segments``), each cleaned
    with the answer's code blocks and quotations in view (``opened_at``)."""
    spans = segment_spans(text, size, whole_tail)
    return label_segments([text[a:b] for a, b in spans], target, rule, opened=opened_at(text, [a for a, _ in spans]))


def label_segments(pieces: list[str], target: str = "fr", rule: SegmentRule = SegmentRule(),
                   opened: list[str] | None = None) -> list[SegmentLabel]:
    """The language of each consecutive piece of one answer under ``rule``, for any target of
    ``drift_eval.metrics.languages`` (docs/metrics.md, "Language ID" and "Every target
    language"). A Latin-script target is decided by fastText with the target's and English
    function words; a target in another script by the share of its script's words first.
    ``opened``: the mark each piece begins inside (``opened_at``), put back before cleaning."""
    spec = language(target)
    function_words = FRENCH_FUNCTION_WORDS if target == "fr" else spec.function_words
    opened = opened or [""] * len(pieces)
    cleaned = [clean_for_lid(o + (p or "")) if rule.cleaning else " ".join((p or "").split())
               for o, p in zip(opened, pieces)]
    preds = lid_model.predict(cleaned, k=3)
    loops = loop_shares(pieces)
    out = []
    for text, top, loop, o, p in zip(cleaned, preds, loops, opened, pieces):
        ws = word_tokens(fold(text))
        if len(ws) < MIN_WORDS or not top:
            out.append(_wordless(o + (p or ""), loop, rule))
            continue
        lang, score = top[0]
        if spec.latin:
            decided, reason = _latin_rule(spec, function_words, ws, top, loop, rule, text)
        else:
            decided, reason = _script_rule(spec, text, ws, top, loop, rule)
        status, reason, share = _written(spec, decided, reason, text, loop, rule)
        out.append(SegmentLabel(decided, score, lang, loop, reason, status, share))
    return out


def _wordless(piece: str, loop: float, rule) -> SegmentLabel:
    """A segment with fewer than three words once cleaned: code when it holds a fenced code
    block (a loop of code is degenerate), else unreadable."""
    if "```" not in piece:
        return SegmentLabel(UNKNOWN, 0.0, UNKNOWN, loop, "too_short", UNREADABLE)
    if rule.target_loop_step and loop >= rule.degenerate:
        return SegmentLabel(UNKNOWN, 0.0, UNKNOWN, loop, "loop", DEGENERATE)
    return SegmentLabel(UNKNOWN, 0.0, UNKNOWN, loop, "code", CODE)


def _written(spec, decided: str, reason: str, text: str, loop: float, rule) -> tuple[str, str, float | None]:
    """(status, reason, share of known words) of a segment whose language the rule decided
    (docs/metrics.md, "Kept: written in the language"): a segment in the target is kept
    only when it is not a loop and enough of its words are in the target's word list; one in
    another language left it, unless its words are made up (too few in that language's
    list, or, without a list, in the target's, for text in the target's script: a Cyrillic
    non-word that fastText calls Kyrgyz); an unknown one is degenerate when the loop step
    made it unknown, else unreadable; so is one with fewer than three words of letters, or
    of the target's script when the rule gives it the target."""
    if decided == UNKNOWN:
        return (DEGENERATE if reason == "loop" else UNREADABLE), reason, None
    if len(list(itertools.islice((w for w in word_tokens(text) if w[0].isalpha()), MIN_WORDS))) < MIN_WORDS:
        return UNREADABLE, "no_letters", None  # digits and symbols that fastText still gives a label
    counts = script_counts(text)
    script = max(counts, key=counts.get)
    if decided == spec.code:
        if rule.target_loop_step and loop >= rule.degenerate:
            return DEGENERATE, "loop", None
        if not rule.word_step:
            return KEPT, reason, None
        share = lexicon.known_share(text, spec.code, script)
        if share is None:
            return UNREADABLE, "too_few_words", None  # fewer than three words of the target's script to read
        if share < spec.known_min:
            return DEGENERATE, "made_up", share
        return KEPT, reason, share
    base = decided.split("-")[0]
    if not rule.word_step or base != decided:  # Hindi in Latin letters (hi-Latn) is Hindi, written: left
        return LEFT, reason, None
    if lexicon.has_list(base):
        share = lexicon.known_share(text, base, script)
        made_up = share is not None and share < rule.other_known_min
    else:
        share = lexicon.known_share(text, spec.code, script) if script in spec.prose_scripts else None
        made_up = share is not None and share < spec.known_min
    return (DEGENERATE, "made_up", share) if made_up else (LEFT, reason, share)


def _latin_rule(spec, function_words, ws, top, loop, rule, text: str) -> tuple[str, str]:
    target = spec.code
    lang, score = top[0]
    own = sum(w in function_words for w in ws)
    en = sum(w in ENGLISH_FUNCTION_WORDS for w in ws)
    target_score = dict(top).get(target, 0.0)
    if lang == target:
        # rule 2.3: English grammar that fastText gives the target (a line of the target over
        # an English list), counted on the words with their accents (Vietnamese "tờ" is not "to")
        marked = sum(w in ENGLISH_FUNCTION_WORDS for w in word_tokens(text.lower()))
        if rule.english_grammar and function_words and marked >= max(rule.english_least, rule.function_share * len(ws)) \
                and marked >= rule.function_ratio * max(own, 1):
            return "en", "function_words"
        return target, "fasttext"
    if rule.target_grammar and function_words and own >= rule.function_share * len(ws) \
            and own >= rule.function_ratio * max(en, 1):
        return target, "function_words"
    if rule.margin_step and target_score and score - target_score <= rule.margin:
        return target, "margin"
    if lang in spec.aliases:
        return target, "alias"
    if rule.english_grammar and function_words and lang != "en" and en >= rule.function_share * len(ws) \
            and en >= rule.function_ratio * max(own, 1):
        return "en", "function_words"  # English grammar that fastText calls a third language
    if rule.loop_step and loop >= rule.degenerate and lang not in (target, "en") and score < rule.low_confidence:
        return UNKNOWN, "loop"
    return lang, "fasttext"


def _script_rule(spec, text, ws, top, loop, rule) -> tuple[str, str]:
    target = spec.code
    lang, score = top[0]
    counts = script_counts(text)
    words = sum(counts.values())
    if not words:
        return UNKNOWN, "no_letters"  # digits, symbols, a table of numbers: no language to tell
    own = sum(counts[s] for s in spec.prose_scripts)
    if own < rule.script_share * words:
        en = sum(w in ENGLISH_FUNCTION_WORDS for w in ws)
        if rule.english_grammar and counts["Latn"] >= rule.script_share * words and lang not in ("en", target) \
                and en >= rule.function_share * len(ws):
            return "en", "function_words"  # English prose that fastText calls a third language
        return _script_label(counts, spec, lang), "script"
    if lang == target or lang in spec.aliases:
        return target, "fasttext" if lang == target else "alias"
    han_kana = counts["Hani"] + counts["Kana"]
    kana = counts["Kana"] >= rule.kana_share * han_kana
    if target == "ja":  # fastText did not say Japanese: kana decides (it calls kanji-heavy Japanese zh)
        return (target, "script") if kana else ((lang if lang != "ja" else "zh"), "script")
    if target == "zh":  # fastText did not say Chinese: kana makes it Japanese, Han alone Chinese
        return ("ja", "script") if kana else (target, "script")
    if target == "ko":
        return target, "script"
    # Cyrillic, Arabic and Devanagari are shared by several languages: fastText decides among them
    target_score = dict(top).get(target, 0.0)
    if rule.margin_step and target_score and score - target_score <= rule.same_script_margin:
        return target, "margin"
    if rule.loop_step and loop >= rule.degenerate and score < rule.same_script_loop_confidence:
        # a loop in the target's own script that fastText gives to a neighbour without
        # conviction (SmolLM2's Devanagari "मैलाला मैलाला ..." is Marathi to it at 0.77, a
        # Cyrillic "газары газары ..." Kyrgyz at 0.20): not words of either language, so
        # unknown; a real Ukrainian paragraph repeated stays Ukrainian (0.99)
        return UNKNOWN, "loop"
    return lang, "fasttext"
