"""The inputs of the teacher-forced measurements (``measure.alpha``, ``measure.decode``): the
prompts' and the shared continuations' token ids, and the continuations themselves
(bundled, WikiText-103, or a file)."""
from __future__ import annotations

import os

from drift_eval.errors import DriftUsageError
from drift_eval.files import read_jsonl, read_text
from drift_eval.settings import int_option

SEPARATOR = "\n\n"


def prompt_ids(tokenizer, text: str) -> list[int]:
    ids = tokenizer(text)["input_ids"]
    if not ids:
        raise DriftUsageError("a prompt is empty: give every prompt some text")
    return list(ids)


def continuation_ids(tokenizer, texts: list[str], length: int | None) -> tuple[list[list[int]], int]:
    """Token ids of ``SEPARATOR + text`` for each continuation, all cut to the same length:
    ``length`` if given (every continuation must reach it), else the shortest."""
    if not texts:
        raise DriftUsageError("no continuations: give at least two continuation texts")
    ids = [tokenizer(SEPARATOR + t, add_special_tokens=False)["input_ids"] for t in texts]
    shortest = min(len(i) for i in ids)
    if length is None:
        length = shortest
    elif shortest < length:
        raise DriftUsageError(f"a continuation has only {shortest} tokens but length={length} was asked: "
                              "use longer continuations or a smaller length")
    return [list(i[:length]) for i in ids], int(length)


def read_continuations(source: str = "bundled", n: int = 16, bundled=None) -> list[str]:
    """The shared continuations: ``bundled`` (the texts ``bundled()`` returns: the caller's,
    ``drift_eval.taskdata.alpha.read_continuations`` for the project's, written for
    it, see ``tasks/drift_alpha/README.md``), ``wikitext`` (WikiText-103 validation articles from the
    Hugging Face hub, as in the original study; needs the network), or a file: ``.jsonl``
    with a ``text`` field per line, or plain text whose passages are separated by blank
    lines holding only ``---``."""
    source = str(source)
    n = int_option("n_continuations (the α metric needs at least two continuations)", n, 2)
    if source == "bundled":
        if bundled is None:
            raise DriftUsageError("continuations 'bundled' needs the bundled texts (read_continuations(..., bundled=))")
        texts = bundled()
    elif source == "wikitext":
        texts = _wikitext(n)
    elif os.path.isfile(source):
        texts = _read_file(source)
    else:
        raise DriftUsageError(f"continuations '{source}' is neither bundled, wikitext nor an existing file")
    if len(texts) < n:
        raise DriftUsageError(f"{source} holds {len(texts)} continuations, fewer than the {n} asked for")
    return texts[:n]


def _read_file(path: str) -> list[str]:
    if path.endswith(".jsonl"):
        return [str(r["text"]) for r in read_jsonl(path, "continuation file", required=("text",))]
    parts = [p.strip() for p in read_text(path, "continuation file").split("\n---\n")]
    return [p for p in parts if p]


def _wikitext(n: int, min_chars: int = 6000) -> list[str]:
    """The first ``n`` WikiText-103 validation articles of at least ``min_chars`` characters,
    headings removed."""
    try:
        import datasets  # deferred, start-up: loads datasets, huggingface_hub, numpy, pandas, tqdm, yaml

        rows = datasets.load_dataset("Salesforce/wikitext", "wikitext-103-raw-v1", split="validation")["text"]
    except Exception as exc:  # offline, or the hub refused
        raise DriftUsageError("continuations=wikitext needs the Hugging Face hub (WikiText-103); "
                              f"it failed ({type(exc).__name__}); use the bundled continuations or a file") from None
    articles, cur = [], []
    for line in rows:
        s = line.strip()
        if s.startswith("= ") and not s.startswith("= = "):
            if cur:
                articles.append(" ".join(cur))
            cur = []
        elif s and not s.startswith("="):
            cur.append(s)
    if cur:
        articles.append(" ".join(cur))
    return [a for a in articles if len(a) >= min_chars][:n]
