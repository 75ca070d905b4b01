"""Portable names in published runs (docs/results/README.md, "Names and paths"): a model
folder, a GGUF file or a path of this machine in a results or samples file becomes the
model's readable name or a path inside the repository (``portable``), and ``relabel``
rewrites published files that way, changing nothing else."""
from __future__ import annotations

import glob
import json
import os
import re

from drift_eval.errors import DriftUsageError
from drift_eval.files import read_text, write_text_atomic
from drift_eval.plugin.local_models import gguf_content_key, smollm2_gguf
from drift_eval.plugin.sweep_folder import model_folder
from drift_eval.resultfiles.names import converted_gguf
from drift_eval.resultfiles.runfile import read_run_file, results_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


MODEL_KEYS = ("pretrained", "model", "model_name", "tokenizer", "peft", "delta")  # values naming a model folder


_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")


def _machine_path(text: str) -> bool:
    return os.path.isabs(text) or bool(_WINDOWS.match(text)) or text.startswith("~")


def gguf_keys(files=()) -> dict:
    """GGUF file name (without ``.gguf``) -> content key, for the bundled SmolLM2 (when
    installed) and each of ``files``."""
    paths = list(files)
    try:
        paths.insert(0, os.path.join(*smollm2_gguf()))
    except DriftUsageError:
        pass
    return {os.path.splitext(os.path.basename(p))[0]: gguf_content_key(p) for p in paths}


def _repo_file(parts: list) -> str | None:
    """The path in this repository of the file that ``parts`` (a path elsewhere) names: the
    longest tail, two parts or more, that starts with a top-level folder of the repository
    and names a file there."""
    for i in range(1, len(parts) - 1):
        tail = parts[i:]
        if os.path.isdir(os.path.join(REPO, tail[0])) and not tail[0].startswith(".") \
                and os.path.isfile(os.path.join(REPO, *tail)):
            return "/".join(tail)
    return None


def portable(text: str, key: str, keys: dict) -> str:
    """``text`` (the value of ``key``) in its portable form; unchanged when it is not a path
    on a machine. A path without a portable form is a ``DriftUsageError``."""
    if not isinstance(text, str) or not _machine_path(text):
        return text
    parts = [p for p in re.split(r"[\\/]", os.path.expanduser(text)) if p and p != "~"]
    converted = converted_gguf(text if not text.startswith("~") else os.path.expanduser(text))
    if converted:
        name, key_found = converted
        return f"$DRIFT_CACHE_DIR/gguf/{name}-{keys.get(name, key_found)}"
    in_repo = _repo_file(parts)
    if in_repo:
        return in_repo
    site = [i for i, part in enumerate(parts) if part in ("site-packages", "dist-packages")]
    if site and site[-1] < len(parts) - 1:
        return "$SITE_PACKAGES/" + "/".join(parts[site[-1] + 1:])
    if key in MODEL_KEYS and parts:
        return f"$MODELS/{parts[-1]}"
    raise DriftUsageError(f"'{key}' is {text}, a path on the machine that wrote it, with no portable form "
                          f"(docs/results/README.md, \"Names and paths\"): remove it or give it one by hand")


def _portable_tree(obj, keys: dict, key: str = ""):
    """``obj`` with every string value in its portable form (``model_args`` written as
    ``k=v,...`` too, and lm-eval's ``model_name_sanitized`` following its ``model_name``)."""
    from lm_eval.utils import sanitize_model_name  # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml

    if isinstance(obj, dict):
        out = {k: _portable_tree(v, keys, k) for k, v in obj.items()}
        name, sanitized = obj.get("model_name"), obj.get("model_name_sanitized")
        if isinstance(name, str) and isinstance(sanitized, str) and sanitized == sanitize_model_name(name):
            out["model_name_sanitized"] = sanitize_model_name(out["model_name"])
        return out
    if isinstance(obj, list):
        return [_portable_tree(v, keys, key) for v in obj]
    if isinstance(obj, str) and key == "model_args" and "=" in obj:
        pairs = [kv.split("=", 1) if "=" in kv else [kv] for kv in obj.split(",")]
        return ",".join("=".join([p[0], portable(p[1], p[0], keys)]) if len(p) == 2 else p[0] for p in pairs)
    return portable(obj, key, keys)


def _changed_strings(old, new, found: dict) -> dict:
    if isinstance(old, dict):
        for k in old:
            _changed_strings(old[k], new[k], found)
    elif isinstance(old, list):
        for a, b in zip(old, new):
            _changed_strings(a, b, found)
    elif isinstance(old, str) and old != new:
        if found.setdefault(old, new) != new:
            raise DriftUsageError(f"'{old}' would need two portable forms ({found[old]}, {new}): relabel it by hand")
    return found


def _relabel_text(text: str, path: str, keys: dict) -> tuple[str, int]:
    """(``text`` with its path values in their portable form, how many values changed). Only
    the changed JSON strings are replaced, each where it stands; the result is checked to
    parse as the relabelled document."""
    jsonl = path.endswith(".jsonl")
    try:
        docs = [json.loads(line) for line in text.splitlines() if line.strip()] if jsonl else [json.loads(text)]
    except ValueError as exc:
        raise DriftUsageError(f"{path} is not valid JSON{' lines' if jsonl else ''} ({exc}): it is not relabelled")
    try:
        wanted = [_portable_tree(d, keys) for d in docs]
    except DriftUsageError as exc:
        raise DriftUsageError(f"{path}: {exc.message}") from None
    found: dict = {}
    for d, w in zip(docs, wanted):
        _changed_strings(d, w, found)
    count = 0
    for old, new in found.items():
        for ascii_only in (False, True):
            token = json.dumps(old, ensure_ascii=ascii_only)
            count += text.count(token)
            text = text.replace(token, json.dumps(new, ensure_ascii=ascii_only))
    again = [json.loads(line) for line in text.splitlines() if line.strip()] if jsonl else [json.loads(text)]
    if again != wanted:
        raise DriftUsageError(f"{path}: a relabelled path also stands where it must not change: relabel it by hand")
    return text, count


def relabel(paths, gguf_files=()) -> list:
    """Relabel every JSON and JSON-lines file under ``paths`` (files or folders) in place,
    then rename model folders to the readable name; returns the lines it printed. Every
    file is read and checked before any is written."""
    keys = gguf_keys(gguf_files)
    files = []
    for p in paths:
        if os.path.isfile(p):
            files.append(p)
            continue
        if not os.path.isdir(p):
            raise DriftUsageError(f"{p} is not a file or a folder")
        files += sorted(f for f in glob.glob(os.path.join(glob.escape(p), "**", "*.json*"), recursive=True)
                        if f.endswith((".json", ".jsonl")) and "/cache/" not in f.replace(os.sep, "/"))
    planned = []
    for f in files:
        text = read_text(f, "JSON file")
        new, count = _relabel_text(text, f, keys)
        if new != text:
            planned.append((f, new, count))
    lines = []
    for f, new, count in planned:  # every file checked: now write
        write_text_atomic(f, new)
        lines.append(f"{f}: {count} path value(s) relabelled")
    for p in paths:
        if not os.path.isdir(p):
            continue
        renames = {}
        for res in results_files(p):
            folder = os.path.dirname(res)
            if os.path.abspath(folder) == os.path.abspath(p):
                continue
            rf = read_run_file(res)
            renames.setdefault(folder, set()).add(model_folder(rf.model_args, rf.raw))
        for folder, names in sorted(renames.items()):
            if len(names) > 1:
                raise DriftUsageError(f"{folder} holds results of several models ({', '.join(sorted(names))}): "
                                      f"give each its own folder")
            target = os.path.join(os.path.dirname(folder), names.pop())
            if target == folder:
                continue
            if os.path.exists(target):
                raise DriftUsageError(f"cannot rename {folder} to {target}: it exists; merge the two by hand")
            os.rename(folder, target)
            lines.append(f"{folder} -> {target}")
    for line in lines:
        print(line)
    return lines
