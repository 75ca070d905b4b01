"""Reading and writing the project's files: one text, JSON and JSONL reader, atomic writes,
moving damaged files aside, a folder lock, and the shipped prose. Pure Python, no torch.

* Writes go to a temporary file in the target's folder, then ``os.replace`` it: a reader
  sees the old file or the new one, never half of one. A path that cannot be written is
  one ``DriftUsageError`` line.
* A cache that several processes may build at once (the ranks of a data-parallel run) is
  built under ``build_lock``: one process builds it, the others wait and then read it.
* Reads name the file and say what is wrong with it in one line (a ``DamagedFile`` when
  the file is there but is not UTF-8, not JSON, not the shape expected, or a folder),
  never a traceback and never half a file.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import tempfile
from contextlib import contextmanager

from drift_eval.errors import DamagedFile, DriftUsageError

HERE = os.path.dirname(os.path.abspath(__file__))
DAMAGED = ".damaged"
REWRITE = "delete it and rerun what wrote it"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


# ---------------------------------------------------------------------------- writing
def _file_in_the_way(path: str) -> str | None:
    """The first existing component above ``path`` that is not a folder, or None."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts)):
        above = os.sep.join(parts[:i]) or os.sep
        if os.path.lexists(above) and not os.path.isdir(above):
            return above
    return None


def _cannot_write(path: str, exc: OSError) -> DriftUsageError:
    reason = exc.strerror or type(exc).__name__
    blocker = _file_in_the_way(path)
    if isinstance(exc, IsADirectoryError) or os.path.isdir(path):
        reason = "a folder is in the way"
    elif blocker is not None:
        reason = f"{blocker} is a file, not a folder"
    return DriftUsageError(f"cannot write {path}: {reason}; give a writable path")


def _nearest_folder(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


def check_output_file(path: str, what: str) -> str:
    """``path`` (absolute) once it is known a file can be written there: not a folder, no
    file where one of its folders should be, and the nearest existing folder writable.
    Otherwise one ``DriftUsageError`` line naming ``what`` (an option: ``-o``,
    ``--junit-xml``...). Checked before any work, so that nothing is computed for a path
    that cannot take it."""
    path = os.path.abspath(path)
    blocker = _file_in_the_way(path)
    if os.path.isdir(path):
        raise DriftUsageError(f"{what} {path} is a folder: give a file")
    if blocker is not None:
        raise DriftUsageError(f"{what} {path}: {blocker} is a file, not a folder")
    folder = _nearest_folder(path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DriftUsageError(f"{what} {path}: the folder {folder} is not writable")
    return path


def check_output_folder(path: str, what: str) -> str:
    """``path`` (absolute) once it is known to be a folder that can be made or written: not
    a file, no file where one of the folders above it should be, the nearest existing
    folder writable; otherwise one ``DriftUsageError`` line naming ``what``."""
    path = os.path.abspath(path)
    blocker = _file_in_the_way(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise DriftUsageError(f"{what} {path} is a file: give a folder")
    if blocker is not None:
        raise DriftUsageError(f"{what} {path}: {blocker} is a file, not a folder")
    folder = path if os.path.isdir(path) else _nearest_folder(path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DriftUsageError(f"{what} {path}: the folder {folder} is not writable")
    return path


@contextmanager
def atomic_open(path: str, mode: str = "w", encoding: str | None = "utf-8"):
    """``open`` for writing whose file appears at ``path`` only when the block succeeds
    (with the permissions a plain ``open`` would give it)."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "is a folder", path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, os.stat(path).st_mode & 0o7777 if os.path.isfile(path) else 0o666 & ~_UMASK)
        os.replace(tmp, path)
        _sync_folder(folder)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from None
        raise


def _sync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomic(path: str, text: str) -> str:
    with atomic_open(path) as fh:
        fh.write(text)
    return path


def write_json_atomic(path: str, obj, indent: int | None = None) -> str:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=indent, ensure_ascii=False)
    return path


def move_aside(path: str, suffix: str = DAMAGED) -> str:
    """Rename ``path`` to ``path + suffix`` (``.1``, ``.2``... if taken); returns the new name."""
    target, i = path + suffix, 0
    while os.path.lexists(target):
        i += 1
        target = f"{path}{suffix}.{i}"
    os.replace(path, target)
    return target


@contextmanager
def _locked(path: str, busy: str | None):
    """Hold an exclusive ``flock`` on the file ``path`` (created, left in place, empty) for
    the block. ``busy`` None: wait for the holder; otherwise refuse at once with ``busy``."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_UMASK)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if busy is None else fcntl.LOCK_NB))
        except BlockingIOError:
            raise DriftUsageError(busy) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def build_lock(path: str):
    """Processes that build the same file or folder ``path`` (the ranks of a data-parallel
    run) take turns on ``path + ".lock"``: the first builds it, the others, once they hold
    the lock, find it built."""
    return _locked(f"{path}.lock", busy=None)


def folder_lock(folder: str, what: str):
    """Hold ``folder`` (a ``.lock`` file in it) for the block; a second holder is refused at
    once with one line (``what`` names the first one's work)."""
    return _locked(os.path.join(folder, ".lock"),
                   busy=f"{folder} is in use by another {what}: wait for it to end, or use another folder")


# ---------------------------------------------------------------------------- the cache folder
CACHE_ENV = "DRIFT_CACHE_DIR"


def cache_dir(*parts: str) -> str:
    """The folder ``parts`` under the project's cache (``DRIFT_CACHE_DIR``, default
    ``~/.cache/lm-eval-drift``), created if needed. A cache root that is not a usable folder
    (a file, an empty or relative value, a folder that cannot be written) is one
    ``DriftUsageError`` line."""
    env = os.environ.get(CACHE_ENV)
    if env is not None and not os.path.isabs(env):
        raise DriftUsageError(f"{CACHE_ENV}={env!r} is not an absolute folder path: set it to one, or unset it")
    root = env or os.path.join(os.path.expanduser("~"), ".cache", "lm-eval-drift")
    path = os.path.join(root, *parts)
    for folder in (root, path):
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise DriftUsageError(f"the cache folder {folder} is a file ({CACHE_ENV}): move it away, or set "
                                  f"{CACHE_ENV} to a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise DriftUsageError(f"cannot create the cache folder {path} ({exc.strerror or type(exc).__name__}): set "
                              f"{CACHE_ENV} to a writable folder") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise DriftUsageError(f"the cache folder {path} is not writable: set {CACHE_ENV} to a writable folder")
    return path


# ---------------------------------------------------------------------------- reading
def read_text(path: str, what: str = "file", remedy: str = REWRITE, max_bytes: int | None = None) -> str:
    """The whole of a UTF-8 text file. ``remedy`` ends the message of a damaged file."""
    if os.path.isdir(path):
        raise DamagedFile(path, f"{path} is a folder where a {what} should be: move it away")
    if not os.path.isfile(path):
        raise DriftUsageError(f"{what} not found: {path}")
    try:
        if max_bytes is not None and os.path.getsize(path) > max_bytes:
            raise DamagedFile(path, f"{path} is larger than {max_bytes} bytes: not a {what}")
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise DriftUsageError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        cut = " or was cut inside a character" if exc.end >= len(data) - 3 and exc.reason.startswith("unexpected end") \
            else ""
        raise DamagedFile(path, f"{path} is not UTF-8 text{cut} (byte {exc.start}): the {what} is damaged; "
                                f"{remedy}") from None


def read_json(path: str, what: str = "file", remedy: str = REWRITE, expect: type | None = None,
              max_bytes: int | None = None):
    """A JSON file; damage (or, with ``expect``, a top-level value of another type) is one
    line naming the file."""
    text = read_text(path, what, remedy, max_bytes)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DamagedFile(path, f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}): the {what} is damaged "
                                f"or was cut short; {remedy}") from None
    except RecursionError:
        raise DamagedFile(path, f"{path} nests too deep to be a {what}; {remedy}") from None
    if expect is not None and not isinstance(obj, expect):
        raise DamagedFile(path, f"{path} holds a JSON {type(obj).__name__}, not the JSON "
                                f"{'object' if expect is dict else expect.__name__} of a {what}; {remedy}")
    return obj


def read_jsonl(path: str, what: str = "file", required: tuple = (), remedy: str = REWRITE,
               line_ends: bool = False) -> list[dict]:
    """A JSON-lines file of objects (blank lines skipped), each with the ``required`` keys;
    damage is one line naming the file and the line. ``line_ends``: the last line must end
    in a newline too (files written a line at a time, where a missing one means cut short)."""
    text = read_text(path, what, remedy)
    out = []
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise DamagedFile(path, f"{path} line {i} is not valid JSON: the {what} is damaged or was cut short; "
                                    f"{remedy}") from None
        if not isinstance(obj, dict) or any(k not in obj for k in required):
            need = f" with {', '.join(repr(k) for k in required)} field(s)" if required else ""
            raise DamagedFile(path, f"{path} line {i}: every line of the {what} must be a JSON object{need}; {remedy}")
        out.append(obj)
    if line_ends and lines[-1].strip():
        raise DamagedFile(path, f"{path} line {len(lines)} has no line end: the {what} was cut short; {remedy}")
    return out


def prose_text() -> str:
    """The shipped English prose (``data/calibration_continuation.txt``, written for this
    project): the calibration conversation's answer, and the default text of the
    position-bias and accessibility measurements."""
    return read_text(os.path.join(HERE, "data", "calibration_continuation.txt"), "shipped prose").strip()
