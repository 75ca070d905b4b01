"""The sweep's answer cache: JSON only, never code (a planted pickle never runs), a damaged file
set aside with a warning, answers type-checked and kept with their metadata, a run's
checkpoint checked before anything is stored, the answers served through the cache
(``plugin.cached_serving``) counted and stored, and concurrent writers losing nothing."""
import json
import pickle
import sqlite3
import subprocess
import sys
import threading
from functools import partial

import pytest
from lm_eval.api.model import CacheHook

from drift_eval.conversation import dump_messages
from drift_eval.errors import DamagedFile, DriftUsageError
from drift_eval.plugin import answer_cache as ac
from drift_eval.plugin.answer_cache import AnswerCache
from drift_eval.plugin.answers import Answer
from drift_eval.plugin.cached_serving import CachedServing
from support.checks import Planted, benchmark


# ---------------------------------------------------------------------- no code from data
def test_a_planted_pickle_in_the_answer_cache_never_runs(tmp_path):
    marker = tmp_path / "PWNED"
    warnings = []
    cache = AnswerCache(str(tmp_path / "cache"), warn=warnings.append)
    cache.put([("k1", "generate_until", "Bonjour")])
    with sqlite3.connect(cache.path) as db:  # a pickle where JSON belongs, as lm-eval's cache held
        db.execute("INSERT INTO answers VALUES (?, ?, ?)", ("k2", "generate_until", pickle.dumps(Planted(marker))))
    assert cache.get("k1", "generate_until") == "Bonjour"
    assert cache.get("k2", "generate_until") is None and cache.invalid == 1
    assert not marker.exists() and not warnings


@pytest.mark.parametrize("content", [b"", b"this is not a database" * 100, b"SQLite format 3\x00" + b"\x00" * 50])
def test_a_damaged_cache_file_is_rebuilt_with_a_warning(tmp_path, content):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "answers.sqlite").write_bytes(content)
    warnings = []
    cache = AnswerCache(str(folder), warn=warnings.append)
    cache.put([("k", "generate_until", "Salut")])
    assert cache.get("k", "generate_until") == "Salut"
    if content:
        assert len(warnings) == 1 and "moved aside to answers.sqlite.damaged" in warnings[0]
        assert (folder / "answers.sqlite.damaged").read_bytes() == content
    else:
        assert not warnings  # an empty file is an empty database


def test_a_cache_with_foreign_tables_is_set_aside(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    with sqlite3.connect(folder / "answers.sqlite") as db:
        db.execute("CREATE TABLE unnamed (key TEXT PRIMARY KEY, value BLOB)")  # SqliteDict's layout
    warnings = []
    AnswerCache(str(folder), warn=warnings.append).close()
    assert "holds other tables than an answer cache" in warnings[0]


@pytest.mark.parametrize("rtype, value", [
    ("generate_until", "Bonjour"),
    ("loglikelihood", (-1.5, True)),
    ("loglikelihood", (float("-inf"), False)),
    ("loglikelihood_rolling", -12.25),
    ("generate_conversation", json.dumps([{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}])),
    ("continuation_nll", json.dumps({"nll": [1.0], "tokens": 4, "compensation": "none"})),
])
def test_cached_answers_round_trip_and_are_type_checked(rtype, value):
    assert ac.decode(rtype, ac.encode(rtype, value)) == value
    for other in ("generate_until", "loglikelihood", "generate_conversation", "position_profile"):
        if other != rtype and not (other == "generate_until" and isinstance(value, str)):
            with pytest.raises(ValueError):
                ac.decode(other, ac.encode(rtype, value))


def test_answers_keep_their_metadata_through_the_cache(tmp_path):
    a = Answer("Bonjour tout le monde", tokens=7, forced_length=True, natural_end=3)
    cache = AnswerCache(str(tmp_path))
    cache.put([("k", "generate_until", a)])
    cache.close()
    b = AnswerCache(str(tmp_path)).get("k", "generate_until")
    assert isinstance(b, Answer) and b == a and b.meta == a.meta
    with sqlite3.connect(tmp_path / "answers.sqlite") as db:  # an answer record with a field it does not know
        db.execute("UPDATE answers SET value = ?", (json.dumps({"answer": {"text": "x", "evil": 1}}),))
    assert AnswerCache(str(tmp_path)).get("k", "generate_until") is None


def test_a_run_checkpoint_carries_every_answer_and_is_checked_before_anything_is_stored(tmp_path, capsys):
    """A sweep's answer caches leave as JSON lines and come back answer for answer; a
    damaged checkpoint is named with its row and stores nothing, not even its good files."""
    runs = benchmark("protocol_runs")
    conversation = json.dumps([{"role": "user", "content": "Salut"}, {"role": "assistant", "content": "Bonjour"}])
    stored = {"none": [("a", "generate_until", Answer("Bonjour à tous", tokens=5, forced_length=True, natural_end=2)),
                       ("b", "loglikelihood", (float("-inf"), False)),
                       ("c", "generate_conversation", conversation)],
              "log_0.25": [("d", "generate_until", "Au revoir")]}
    for setting, items in stored.items():
        cache = AnswerCache(str(tmp_path / "run" / setting / "cache"))
        cache.put(items)
        cache.close()
    runs.checkpoint(str(tmp_path / "run"), str(tmp_path / "ckpt"))
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["log_0.25.jsonl", "none.jsonl"]
    runs.restore(str(tmp_path / "ckpt"), str(tmp_path / "again"))
    for setting, items in stored.items():
        cache = AnswerCache(str(tmp_path / "again" / setting / "cache"))
        assert len(cache) == len(items)
        for key, rtype, answer in items:
            back = cache.get(key, rtype)
            assert back == answer and type(back) is type(answer)
            if isinstance(answer, Answer):
                assert back.meta == answer.meta

    lines = (tmp_path / "ckpt" / "none.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["type"] = "generate_until"  # a log-likelihood pair is not an answer text
    (tmp_path / "ckpt" / "none.jsonl").write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n")
    with pytest.raises(DamagedFile, match=r"none\.jsonl row 2 is not a cached answer"):
        runs.restore(str(tmp_path / "ckpt"), str(tmp_path / "third"))
    assert not (tmp_path / "third").exists()  # log_0.25.jsonl, read first and good, was not stored either
    with pytest.raises(DriftUsageError, match="holds no answer cache"):
        runs.checkpoint(str(tmp_path / "ckpt"), str(tmp_path / "ckpt2"))
    r = subprocess.run([sys.executable, runs.__file__, "restore", str(tmp_path / "ckpt"), str(tmp_path / "third")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "row 2" in r.stderr


class _Backend:
    """A backend that answers like HFLM: each generated answer goes through its cache hook
    as it is produced (here an Answer with metadata), and conversations call back into
    ``generate_until`` for their turns."""

    def __init__(self):
        self.cache_hook = CacheHook(None)
        self.calls = []

    def set_cache_hook(self, hook):
        self.cache_hook = hook

    def generate_until(self, requests, disable_tqdm=False):
        out = []
        for r in requests:
            a = Answer(f"réponse à {r.args[0]}", tokens=len(r.args[0]), forced_length=True, natural_end=None)
            self.cache_hook.add_partial("generate_until", r.args, a)
            out.append(a)
        self.calls.append(("generate_until", len(requests)))
        return out

    def generate_conversation(self, requests, disable_tqdm=False, turns=None):
        """``turns``: what serves the turns (the drift wrapper's road to the model)."""
        turns = (turns or self.generate_until)([_Request((r.args[0] + " turn", {})) for r in requests])
        self.calls.append(("generate_conversation", len(requests)))
        return [dump_messages([{"role": "user", "content": r.args[0]}, {"role": "assistant", "content": t}])
                for r, t in zip(requests, turns)]


class _Request:
    def __init__(self, args):
        self.args = args


def test_the_sweep_serves_cached_answers_with_their_metadata(tmp_path):
    def run(backend):
        cache = AnswerCache(str(tmp_path))
        answers = CachedServing(cache, chunk=2)
        backend.set_cache_hook(answers)
        try:
            single = answers.serve("generate_until", backend.generate_until,
                                   [_Request((f"q{i}", {"max_gen_toks": 8})) for i in range(3)]
                                   + [_Request(("s", {"do_sample": True}))])
            turns = partial(answers.serve, "generate_until", backend.generate_until)
            convs = answers.serve("generate_conversation", partial(backend.generate_conversation, turns=turns),
                                  [_Request((f"c{i}", {})) for i in range(3)])
        finally:
            cache.close()
        return single, convs, answers

    first, convs, a1 = run(_Backend())
    backend = _Backend()
    again, convs2, a2 = run(backend)
    assert [x.meta for x in again] == [x.meta for x in first] and again == first and convs2 == convs
    assert (a1.generated, a1.cached) == (7, 0)
    assert (a2.generated, a2.cached) == (1, 6)  # only the sampled answer runs again
    assert backend.calls == [("generate_until", 1)]  # the conversations' turns were not cached on their own


def test_concurrent_cache_writers_keep_every_answer(tmp_path):
    def writer(k):
        cache = AnswerCache(str(tmp_path))
        for i in range(40):
            cache.put([(f"{k}-{i}", "generate_until", f"answer {k} {i}")])
        cache.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cache = AnswerCache(str(tmp_path))
    assert len(cache) == 120 and cache.get("2-39", "generate_until") == "answer 2 39"
