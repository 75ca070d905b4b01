"""Reading and writing the project's files: one JSON reader, one JSONL reader, atomic
writes, and the shipped prose. Pure Python, no torch.

* Writes go to a temporary file in the target's folder, then ``os.replace`` it: a reader
  sees the old file or the new one, never half of one.
* A cache that several processes may build at once (the ranks of a data-parallel run) is
  built under ``build_lock``: one process builds it, the others wait and then read it.
* Reads name the file and say what is wrong with it in one ``DriftUsageError`` line (not
  UTF-8, not JSON, a line that is not an object), never a traceback and never half a file.
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager

from .errors import DriftUsageError

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------- writing
@contextmanager
def atomic_open(path: str, mode: str = "w", encoding: str | None = "utf-8"):
    """``open`` for writing whose file appears at ``path`` only when the block succeeds."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def build_lock(path: str):
    """Hold an exclusive lock on ``path + ".lock"`` while building ``path``: processes that
    build the same file (or folder) take turns, so the first builds it and the others, once
    they hold the lock, find it built. The lock file stays (it is empty)."""
    import fcntl

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(f"{path}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_text_atomic(path: str, text: str) -> str:
    with atomic_open(path) as fh:
        fh.write(text)
    return path


def write_json_atomic(path: str, obj, indent: int | None = None) -> str:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=indent, ensure_ascii=False)
    return path


# ---------------------------------------------------------------------------- reading
def read_text(path: str, what: str = "file") -> str:
    """The whole of a UTF-8 text file."""
    if not os.path.isfile(path):
        raise DriftUsageError(f"{what} not found: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise DriftUsageError(f"{path} is not UTF-8 text (byte {exc.start}): give a UTF-8 {what}") from None


def read_json(path: str, what: str = "file"):
    """A JSON file; damage is one line naming the file."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DriftUsageError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}): the {what} is "
                              f"damaged; delete it and rerun what wrote it") from None


def read_jsonl(path: str, what: str = "file", required: tuple = ()) -> list[dict]:
    """A JSON-lines file of objects (blank lines skipped), each with the ``required`` keys;
    damage is one line naming the file and the line."""
    out = []
    for i, line in enumerate(read_text(path, what).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise DriftUsageError(f"{path} line {i} is not valid JSON: the {what} is damaged or was cut short; "
                                  f"delete it and rerun what wrote it") from None
        if not isinstance(obj, dict) or any(k not in obj for k in required):
            need = f" with {', '.join(repr(k) for k in required)} field(s)" if required else ""
            raise DriftUsageError(f"{path} line {i}: every line of the {what} must be a JSON object{need}")
        out.append(obj)
    return out


def prose_text() -> str:
    """The shipped English prose (``data/calibration_continuation.txt``, written for this
    project): the calibration conversation's answer, and the default text of the
    position-bias and accessibility measurements."""
    return read_text(os.path.join(HERE, "data", "calibration_continuation.txt"), "shipped prose").strip()
