"""The sweep's answer cache: answers as JSON in an SQLite file, nothing ever unpickled.

One file per setting (``OUT/<setting>/cache/answers.sqlite``), one row per request:
lm-eval's request key (``hash_args(request type, arguments)``), the request type, and the
answer as JSON text. Every stored answer is checked on the way out against its request
type (a string for ``generate_until``, an ``Answer`` record with its metadata, a
``[float, bool]`` pair for ``loglikelihood``, the documented JSON shape of each drift
request type); an entry that fails is ignored (the request runs again and its row is
overwritten), with one warning. A file that is not such a cache (damaged, truncated,
foreign tables) is moved aside as ``*.damaged`` with a warning, and a fresh one started:
a cache is never fatal.

``export_rows`` and ``import_rows`` carry a cache between machines as JSON lines (a run
continued elsewhere resumes from them); imported rows pass the same checks as stored ones.
"""
from __future__ import annotations

import json
import os
import sqlite3

from drift_eval.errors import DamagedFile, DriftUsageError
from drift_eval.files import move_aside
from drift_eval.metrics.values import is_number
from drift_eval.plugin.answers import Answer
from drift_eval.plugin.request_types import check_answer

FILE = "answers.sqlite"
FORMAT = 1
_SCHEMA = {("table", "answers"), ("table", "format"), ("index", "sqlite_autoindex_answers_1")}


def encode(request_type: str, answer) -> str:
    """JSON text of an answer (an ``Answer`` keeps its metadata)."""
    if isinstance(answer, Answer):
        return json.dumps({"answer": answer.to_json()}, ensure_ascii=False)
    if isinstance(answer, tuple):
        answer = list(answer)
    return json.dumps(answer, ensure_ascii=False)  # a log-likelihood may be -inf: JSON's -Infinity


def decode(request_type: str, text: str):
    """The answer stored by ``encode``; ``ValueError`` when it is not a valid answer of
    ``request_type``."""
    try:
        obj = json.loads(text)
    except (TypeError, json.JSONDecodeError, RecursionError):
        raise ValueError("not JSON") from None
    if isinstance(obj, dict) and set(obj) == {"answer"}:
        obj = Answer.from_json(obj["answer"])
    if request_type == "generate_until":
        if not isinstance(obj, str):
            raise ValueError("a generate_until answer is text")
        return obj
    if request_type == "loglikelihood":
        if not isinstance(obj, list) or len(obj) != 2 or not is_number(obj[0]) or not isinstance(obj[1], bool):
            raise ValueError("a loglikelihood answer is [number, true|false]")
        return (float(obj[0]), obj[1])
    if request_type == "loglikelihood_rolling":
        if not is_number(obj):
            raise ValueError("a loglikelihood_rolling answer is a number")
        return float(obj)
    check_answer(request_type, obj)
    return obj


class AnswerCache:
    """``get``/``put`` answers by request; ``warn`` receives the one-line warnings."""

    def __init__(self, folder: str, warn=print):
        self.path = os.path.join(folder, FILE)
        self.warn = warn
        self.invalid = 0
        os.makedirs(folder, exist_ok=True)
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            moved = move_aside(self.path)
            self.warn(f"{self.path} is not a readable answer cache ({exc}): moved aside to {os.path.basename(moved)}; "
                      f"its answers are generated again")
            self._db = self._open()

    def _open(self):
        db = sqlite3.connect(self.path, timeout=60)
        try:
            db.execute("PRAGMA trusted_schema = OFF")
            db.execute("BEGIN IMMEDIATE")  # one opener at a time sets the file up: others wait, then see it whole
            found = set(db.execute("SELECT type, name FROM sqlite_master").fetchall())
            if found and found != _SCHEMA:
                raise sqlite3.DatabaseError("it holds other tables than an answer cache")
            db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, type TEXT NOT NULL, "
                       "value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS format (version INTEGER NOT NULL)")
            version = db.execute("SELECT version FROM format").fetchall()
            if not version:
                db.execute("INSERT INTO format VALUES (?)", (FORMAT,))
            elif version != [(FORMAT,)]:
                raise sqlite3.DatabaseError(f"cache format {version} is not {FORMAT}")
            db.commit()
        except BaseException:
            db.close()
            raise
        return db

    def __len__(self) -> int:
        try:
            return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        except sqlite3.DatabaseError:
            return 0

    def get(self, key: str, request_type: str):
        """The stored answer, or None (absent, or not a valid answer: then counted in
        ``invalid`` and run again)."""
        try:
            row = self._db.execute("SELECT type, value FROM answers WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            self._lost(exc)
            return None
        if row is None:
            return None
        try:
            if row[0] != request_type:
                raise ValueError("stored for another request type")
            return decode(request_type, row[1])
        except ValueError:
            self.invalid += 1
            return None

    def put(self, items) -> None:
        """Store ``(key, request type, answer)`` items in one transaction."""
        rows = [(k, t, encode(t, a)) for k, t, a in items]
        if not rows:
            return
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", rows)
        except sqlite3.DatabaseError as exc:
            self._lost(exc)

    def _lost(self, exc) -> None:
        """The file broke under us: move it aside and go on without caching."""
        self._db.close()
        moved = move_aside(self.path) if os.path.exists(self.path) else self.path
        self.warn(f"{self.path} stopped working ({exc}): moved aside to {os.path.basename(moved)}; answers are no "
                  f"longer cached in this run")
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, type TEXT NOT NULL, value TEXT NOT NULL)")

    def close(self) -> None:
        self._db.close()


def export_rows(folder: str) -> list[dict]:
    """Every answer stored in the cache in ``folder``, as ``{"key", "type", "answer"}``
    objects sorted by key (``answer``: the stored JSON, parsed). The file is opened read-only,
    so a run that is writing it goes on undisturbed; a file that is not an answer cache is a
    ``DamagedFile`` naming it."""
    path = os.path.join(folder, FILE)
    if not os.path.isfile(path):
        raise DriftUsageError(f"{path} not found: no answers are cached there")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            rows = db.execute("SELECT key, type, value FROM answers ORDER BY key").fetchall()
        finally:
            db.close()
        return [{"key": k, "type": t, "answer": json.loads(v)} for k, t, v in rows]
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise DamagedFile(path, f"{path} is not a readable answer cache ({exc}); delete it and rerun what "
                                f"wrote it") from None


def check_rows(rows: list[dict], source: str) -> list[tuple]:
    """``rows`` (as ``export_rows`` gives them, read from ``source``) as ``(key, request type,
    answer)`` items for ``AnswerCache.put``, each answer checked against its request type; a
    row that fails is a ``DamagedFile`` naming ``source`` and the row."""
    items = []
    for i, row in enumerate(rows, 1):
        key, rtype = row.get("key"), row.get("type")
        try:
            if not isinstance(key, str) or not isinstance(rtype, str):
                raise ValueError("key and type must be text")
            items.append((key, rtype, decode(rtype, json.dumps(row.get("answer"), ensure_ascii=False))))
        except ValueError as exc:
            raise DamagedFile(source, f"{source} row {i} is not a cached answer ({exc}); nothing was imported") from None
    return items


def import_items(folder: str, items: list[tuple]) -> int:
    """Store checked items (``check_rows``) in the cache in ``folder``, in one transaction."""
    cache = AnswerCache(folder)
    try:
        cache.put(items)
    finally:
        cache.close()
    return len(items)
