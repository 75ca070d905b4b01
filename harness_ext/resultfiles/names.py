"""Readable names for the models of lm-eval runs: a GGUF file's name, a hub name as it is, a
local folder's name, never a cache path; two models with one name told apart by a tag
(``unique_names``). ``drift-eval sweep`` names its folders with them, and the results
loader (``decide.results``) keys runs by them."""
from __future__ import annotations

import hashlib
import os
import re

_CACHE_KEY = re.compile(r"^(?P<name>.+)-(?P<key>[0-9a-f]{16})$")
_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")


def _is_path(text: str) -> bool:
    """A file-system path rather than a hub name: absolute (POSIX or Windows), ``~``- or
    ``.``-relative, or written with a placeholder for a machine's folder (``$DRIFT_CACHE_DIR/...``,
    ``$MODELS/...``: docs/results/README.md)."""
    return os.path.isabs(text) or bool(_WINDOWS.match(text)) or text.startswith(("~", ".", "$"))


def _parts(text: str) -> list:
    return [p for p in re.split(r"[\\/]", text) if p]


def converted_gguf(pretrained) -> tuple[str, str] | None:
    """(GGUF file name, content key) when ``pretrained`` is a folder of drift_eval's GGUF
    conversion cache (``.../gguf/<file name>-<key>``, on any machine or as
    ``$DRIFT_CACHE_DIR/gguf/<file name>-<key>``); None otherwise."""
    text = str(pretrained or "").rstrip("/\\")
    parts = _parts(text) if _is_path(text) else []
    match = _CACHE_KEY.match(parts[-1]) if len(parts) > 1 and parts[-2] == "gguf" else None
    return (match.group("name"), match.group("key")) if match else None


def model_name(model_args: dict, res: dict) -> str:
    """A readable name for a run's model: the GGUF file's name (``gguf_file``, or a
    converted GGUF cache folder ``.../gguf/<file>-<key>``), a hub name as it is, a local
    folder's name, never a cache path."""
    gguf = model_args.get("gguf_file")
    if isinstance(gguf, str) and gguf:
        return os.path.splitext(_parts(gguf)[-1])[0]
    pretrained = model_args.get("pretrained") or res.get("model_name") or res["config"].get("model") or "model"
    text = str(pretrained).rstrip("/\\")
    if _is_path(text):
        converted = converted_gguf(text)
        return converted[0] if converted else (_parts(text) or [text])[-1]
    return text


def _identity(model_args: dict) -> tuple[str, str]:
    """(what makes two runs' models one model, a short stable tag for it). A converted GGUF
    cache folder is its file's content key (``drift_eval.plugin.local_models``), so the same
    file is one model on every machine and under ``$DRIFT_CACHE_DIR``; any other model is
    ``pretrained`` and ``gguf_file`` as written, tagged by a hash of them."""
    converted = converted_gguf(model_args.get("pretrained"))
    if converted:
        return f"gguf content {converted[1]}", converted[1][:8]
    ident = f"{model_args.get('pretrained', '')}".rstrip("/\\") + f"|{model_args.get('gguf_file') or ''}"
    return ident, hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:8]  # a JSON name may hold a lone surrogate


def unique_names(files: list) -> dict:
    """RunFile -> model name; two different models with one readable name are told apart
    as ``<name>@<tag>``: a converted GGUF file's content key (its first 8 digits), else a
    hash of ``pretrained`` (and ``gguf_file``), never a path."""
    names = {id(rf): model_name(rf.model_args, rf.raw) for rf in files}
    idents = {}
    for rf in files:
        idents.setdefault(names[id(rf)], set()).add(_identity(rf.model_args))
    for rf in files:
        if len(idents[names[id(rf)]]) > 1:
            names[id(rf)] = f"{names[id(rf)]}@{_identity(rf.model_args)[1]}"
    return names
