"""The seeded ``langdetect`` cross-check, with langdetect's own verdicts in less time.

langdetect (1.0.9) reads a text one character at a time in pure Python: ``append`` copies
it character by character, ``cleaning_text`` counts its scripts, and ``_extract_ngrams``
runs every character through ``NGram.add_char``, which looks up the character's Unicode
block each time. On a forced 2 048-token answer that is about three quarters of the
cross-check's time. ``Detector`` here is langdetect's ``Detector`` with those three steps
written over whole strings (regular expressions, NumPy's counts over the code points, and
one ``NGram.normalize`` call per distinct character), so that it reaches langdetect's
sampling with the same text and the same n-grams. Its sampling (``_detect_block``) is
langdetect's, step for step: the same seeded random draws over the same n-gram list, with
the 55 languages' probabilities held in one NumPy array instead of a list. Each update
multiplies them by the same sums (each n-gram's summed once per trial), and each
normalisation divides them by the same sequential sum, element by element, so every
probability is the same float (``ARRAYS_CACHED`` n-grams' rows are kept as arrays).
``tests/maths/test_langid.py`` checks the n-grams and the probabilities, and the verdicts,
against langdetect's own classes on every committed answer and on generated text.

It also keeps a factory of its own (langdetect's profiles, seed 0) instead of setting the
seed on langdetect's ``DetectorFactory`` class for every caller in the process. The
metrics call ``detect`` here, and nothing else calls langdetect.
"""
from __future__ import annotations

import functools
import re

from drift_eval.metrics import langid
from drift_eval.metrics.text import code_points

UNKNOWN = "unknown"
_SPACES = re.compile(" {2,}")
_LATIN_OUT = re.compile("[A-z]+")
WORDS_CACHED = 1 << 16  # distinct (word, followed by a space) pairs whose n-grams are kept
WINDOWS_CACHED = 1 << 16  # distinct three-character windows whose n-grams are kept
ARRAYS_CACHED = 1 << 15  # distinct n-grams whose 55 probabilities are kept as an array (about 14 MB)


@functools.lru_cache(maxsize=1)
def _factory():
    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory  # deferred, start-up: loads langdetect

    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.set_seed(0)
    return factory


@functools.lru_cache(maxsize=1)
def _detector_class():
    import numpy  # deferred, start-up: loads numpy
    from langdetect.detector import Detector as Stock  # deferred, start-up: loads langdetect
    from langdetect.lang_detect_exception import ErrorCode, LangDetectException  # deferred, start-up: loads langdetect
    from langdetect.utils.ngram import NGram  # deferred, start-up: loads langdetect

    class Detector(Stock):
        def append(self, text):
            # langdetect's three substitutions, each skipped where it cannot match (no "@" for
            # an address, none of the five marks that Vietnamese letters are composed with)
            text = self.URL_RE.sub(" ", text)
            text = self.MAIL_RE.sub(" ", text) if "@" in text else text
            text = NGram.normalize_vi(text) if any(mark in text for mark in NGram.DMARK_CLASS) else text
            # langdetect keeps a space only where the character before it (in the text, up to
            # max_text_length characters) is not one
            self.text += _SPACES.sub(" ", text[:self.max_text_length])

        def cleaning_text(self):
            # langdetect's counts of the characters 'A' to 'z' and of those from U+0300 on
            # (its block test beside it is never false), over the code points at once
            codes = code_points(self.text)
            if numpy.count_nonzero((codes >= 0x41) & (codes <= 0x7a)) * 2 < numpy.count_nonzero(codes >= 0x300):
                self.text = _LATIN_OUT.sub("", self.text)

        def _extract_ngrams(self):
            # NGram.add_char starts afresh after every space, so the n-grams come word by word:
            # a word's are those of ' ' + word (+ ' ' where a space follows it), the same
            # wherever it recurs in the text
            text = self.text.translate(_table(self.text))
            pieces = text.split(" ")
            result: list = []
            for i, word in enumerate(pieces):
                if word:
                    result.extend(word_ngrams(word, i < len(pieces) - 1))
            return result

        def _init_probability(self):
            return numpy.array(super()._init_probability())

        def _detect_block(self):
            # langdetect's, step for step with the same seeded draws: each trial draws an alpha,
            # then n-grams one by one, multiplying every language's probability by the n-gram's
            # factor (weight + its probability there; summed once per n-gram and trial), and
            # every fifth draw normalises and stops once one language holds nearly all
            self.cleaning_text()
            ngrams = self._extract_ngrams()
            if not ngrams:
                raise LangDetectException(ErrorCode.CantDetectError, "No features in text.")
            draw = self.random
            draw.seed(self.seed)
            langprob = numpy.zeros(len(self.langlist))
            for _ in range(self.n_trial):
                prob = self._init_probability()
                weight = (self.alpha + draw.gauss(0.0, 1.0) * self.ALPHA_WIDTH) / self.BASE_FREQ
                factors: dict = {}
                i = 0
                while True:
                    word = draw.choice(ngrams)
                    factor = factors.get(word)
                    if factor is None:
                        factor = factors[word] = weight + row(word)
                    prob *= factor
                    if i % 5 == 0 and (_normalize(prob) > self.CONV_THRESHOLD or i >= self.ITERATION_LIMIT):
                        break
                    i += 1
                langprob += prob / self.n_trial
            self.langprob = langprob.tolist()

    def _normalize(prob) -> float:
        # langdetect's: the sum taken in order, each probability divided by it, the largest
        total = sum(prob.tolist())
        if not total:
            raise ZeroDivisionError("float division by zero")  # as langdetect's own division
        prob /= total
        return max(0.0, float(prob.max()))

    @functools.lru_cache(maxsize=ARRAYS_CACHED)
    def row(word: str):
        return numpy.array(known[word])

    def _table(text):
        chars = set(text)
        for ch in chars - table.keys():
            table[ch] = NGram.normalize(ch)
        return {ord(ch): table[ch] for ch in chars}

    table: dict = {}
    known = _factory().word_lang_prob_map

    def ending_at(window: str) -> tuple:
        # the known 1-, 2- and 3-grams that end at the window's last character (a window of two
        # or three); none inside a capitalised word, which langdetect skips
        if window[-1].isupper() and window[-2].isupper():
            return ()
        return tuple(w for w in (window[-1], window[-2:], window)[:len(window)] if w != " " and w in known)

    windows: dict = {}

    @functools.lru_cache(maxsize=WORDS_CACHED)
    def word_ngrams(word: str, spaced: bool) -> tuple:
        # langdetect's, character by character: at the second character its 1- and 2-gram, at
        # each later one its 1-, 2- and 3-gram; each three-character window's are read once
        s = f" {word} " if spaced else f" {word}"
        out = list(ending_at(s[:2])) if len(s) > 1 else []
        for i in range(2, len(s)):
            window = s[i - 2:i + 1]
            grams = windows.get(window)
            if grams is None:
                grams = ending_at(window)
                if len(windows) < WINDOWS_CACHED:
                    windows[window] = grams
            out += grams
        return tuple(out)

    Detector.word_ngrams = staticmethod(word_ngrams)
    Detector.row = staticmethod(row)
    Detector.windows = windows
    return Detector


def clear_cache() -> None:
    """Forget the words' n-grams read so far (benchmarks time a cold start with it)."""
    _detector_class().word_ngrams.cache_clear()
    _detector_class().row.cache_clear()
    _detector_class().windows.clear()


def detect(text: str) -> str:
    """langdetect's seeded verdict for ``text`` (``detect(text)`` with seed 0); ``unknown``
    for a text of fewer words than language ID reads (``langid.MIN_WORDS``) or where
    langdetect finds no features."""
    from langdetect.lang_detect_exception import LangDetectException  # deferred, start-up: loads langdetect

    if len(langid.WORD_RE.findall(text or "")) < langid.MIN_WORDS:
        return UNKNOWN

    detector = _detector_class()(_factory())
    detector.append(text)
    try:
        return detector.detect()
    except LangDetectException:
        return UNKNOWN
