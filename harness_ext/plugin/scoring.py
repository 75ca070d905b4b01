"""Scoring the drift tasks' answers in other processes, while the run goes on.

lm-eval scores a task's documents one at a time, in the main process, after every request
of the run has been generated (``process_results``). A drift answer's scores cost
milliseconds (the language of each segment, loops, word lists: ``drift_eval.metrics``), so
at a family's size they add minutes after the engine has finished. Here, each drift
answer is handed to a pool of worker processes as soon as the model wrapper returns it
(``DriftLM``: after each of lm-eval's batches of a ``generate_until`` call, where those are
known in advance, ``drift_eval.plugin.batches``; else after the call; and after each batch
of conversations), while the run's next requests are generated. When lm-eval then calls the task's
``process_results`` for that answer (``YamlTask.process_results``), it takes the worker's
result (``take``) instead of computing it again.

* The worker runs the task's own ``process_results`` function (the one its YAML names,
  loaded from its file as lm-eval loads it) on the same document and answer
  (``Answer`` pickles with its metadata), so the values are the ones the main process
  would compute: lm-eval's per-document contract and ``--log_samples`` output do not
  change. Anything not submitted, or whose worker failed, is scored in the main process,
  as lm-eval does.
* An answer is known by the object lm-eval holds (its identity, kept alive here until it
  is taken), so a document is never given another one's scores.
* The pool has ``scoring_workers`` processes (the run's ``--metadata``; ``auto``: one per
  core this process may use, at most ``MAX_WORKERS``; ``0``: none, every answer is scored
  in the main process). It starts for the first call that brings at least ``MIN_ANSWERS``
  answers, so a short run does not pay for it, and stops when the process ends. Each
  worker reports the CPU time it spent (``progress.RUN``). Its
  processes are forked where the system can (Linux): they share the loaded language-ID
  model and word lists with the main process, and, unlike spawned ones, never import the
  user's script again (a script that calls lm-eval without an ``if __name__ ==
  "__main__"`` guard would run twice). They only score: no model, engine or GPU is used
  in them. Memory is what the submitted answers and their scores take until lm-eval reads
  them.
"""
from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

from drift_eval.errors import DriftUsageError
from drift_eval.plugin.progress import RUN
from drift_eval.settings import parse_number

MAX_WORKERS = 8
MIN_ANSWERS = 8  # a call that brings fewer answers is scored in the main process (the pool costs seconds to start)
AUTO = "auto"


def workers_setting(value=AUTO) -> int:
    """The number of scoring processes ``scoring_workers`` asks for (``auto``, or a whole
    number >= 0), checked: anything else is one ``DriftUsageError`` line."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        return max(1, min(cores, MAX_WORKERS))
    number = parse_number(value, whole=True)
    if number is None or number < 0:
        raise DriftUsageError(f"scoring_workers must be {AUTO} or a whole number >= 0, got {value!r}")
    return number


def function_of(task):
    """(file, name) by which a worker loads ``task``'s ``process_results`` function, as
    lm-eval loads it (a task's ``utils.py`` by its path, whatever the install: a wheel, an
    editable checkout), or None where it has no such file (it is then scored in the main
    process)."""
    fn = getattr(getattr(task, "config", None), "process_results", None)
    code = getattr(fn, "__code__", None)
    if code is None or not getattr(fn, "__name__", "").isidentifier() or not os.path.isfile(code.co_filename):
        return None
    return code.co_filename, fn.__name__


def _worker_start(parent: int) -> None:
    """In a new worker: Ctrl-C in the terminal is the main process's to handle (it stops
    the pool), and the worker ends with the main process, however that one ends (Linux's
    parent-death signal; elsewhere, when it finds itself orphaned at the start)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes  # deferred, optional: only where the platform has it

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


_LOADED: dict = {}  # in a worker: the task files it loaded, by path


def _score(path: str, name: str, doc, results):
    """In a worker: the task's ``process_results`` (``name`` in the file ``path``, loaded
    once) on one document, and the CPU seconds it took."""
    started = time.process_time()
    module = _LOADED.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(f"drift_scoring_task_{len(_LOADED)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED[path] = module
    return getattr(module, name)(doc, results), time.process_time() - started


class Pool:
    """The scoring processes of this process, and the answers submitted to them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._executor = None
        self._workers = 0
        self._pending: dict = {}  # id(answer) -> (answer, task name, future)
        self.submitted = self.taken = 0  # answers handed to the workers, and scores read back from them

    def submit(self, workers: int, items, expected: int | None = None) -> int:
        """Hand ``items`` ((task, doc, answer) each) to ``workers`` processes; returns how many
        went. Nothing goes when ``workers`` is 0, or when the call that brings them brings
        fewer than ``MIN_ANSWERS`` in all (``expected``, where it brings them batch by
        batch; else ``items`` themselves)."""
        items = [(task, doc, answer) for task, doc, answer in items if isinstance(answer, str)]
        if workers <= 0 or not items or max(len(items), expected or 0) < MIN_ANSWERS:
            return 0
        executor = self._start(workers)
        sent = 0
        for task, doc, answer in items:
            where = function_of(task)
            if where is None:
                continue
            future = executor.submit(_score, *where, doc, [answer])
            with self._lock:
                self._pending[id(answer)] = (answer, task.config.task, future)
                self.submitted += 1
            sent += 1
        return sent

    def take(self, task_name, results):
        """The worker's scores for ``results`` (lm-eval's list of one answer) of the task
        ``task_name``, or None where they were not submitted, or the worker failed."""
        if not isinstance(results, (list, tuple)) or len(results) != 1:
            return None
        with self._lock:
            entry = self._pending.get(id(results[0]))
            if entry is None or entry[0] is not results[0] or entry[1] != task_name:
                return None
            del self._pending[id(results[0])]
        try:
            scores, cpu = entry[2].result()
        except Exception:  # noqa: BLE001 (a worker that died, or raised: the main process scores it, and raises there)
            return None
        with self._lock:
            self.taken += 1
        RUN.scored_aside(cpu)
        return scores

    def finished(self) -> int:
        """Answers scored by the workers so far (read back or waiting to be)."""
        with self._lock:
            return self.taken + sum(1 for _, _, future in self._pending.values() if future.done())

    def _start(self, workers: int):
        with self._lock:
            if self._executor is None or self._workers != workers:
                if self._executor is not None:
                    self._executor.shutdown(wait=True)
                self._executor = ProcessPoolExecutor(
                    max_workers=workers, initializer=_worker_start, initargs=(os.getpid(),),
                    mp_context=multiprocessing.get_context(
                        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"))
                self._workers = workers
                atexit.register(self.close)
            return self._executor

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
            self._pending.clear()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


POOL = Pool()
