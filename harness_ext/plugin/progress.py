"""What a run with drift tasks spends its time on, measured, and progress lines that say so.

``RUN`` keeps, for the current run (reset when lm-eval's ``evaluate`` starts one with drift
tasks, ``drift_eval.plugin.registration``):

* ``generation``: seconds inside the model's generation calls for drift requests, and
  the answers and tokens they returned;
* ``scored_main``: seconds the main process spent in the drift tasks'
  ``process_results`` (lm-eval scores every document after generation: this is the
  scoring on the run's critical path, waits for the scoring processes included);
* ``aside``: CPU seconds the scoring processes spent on answers while the run went on
  (``drift_eval.plugin.scoring``).

While answers are generated in several calls (``DriftLM`` serves a long ``generate_until``
call batch by batch), ``line`` gives a progress line at most every ``EVERY`` seconds:
answers and tokens generated, the time left at the rate so far (lm-eval sends the longest
prompts first, so it errs long), and answers scored. ``summary`` is the line a run ends with.
Pure Python; time is ``time.perf_counter``.
"""
from __future__ import annotations

import threading
import time

from drift_eval.plugin.answers import is_count

EVERY = 30.0  # seconds between two progress lines


def duration(seconds: float) -> str:
    """``seconds`` as people read it: "48 s", "3 min 05 s", "1 h 02 min"."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class RunClock:
    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.started = time.perf_counter()
            self.generation = 0.0
            self.answers = self.tokens = 0
            self.counted = 0  # answers whose length the backend reported (a conversation's is not one number)
            self.scored_main = self.aside = 0.0
            self.documents_scored = 0
            self._last_line = None

    # ---------------------------------------------------------------- what the run reports
    def generated(self, seconds: float, answers) -> None:
        """One generation call of drift requests took ``seconds`` and returned ``answers``."""
        counts = [n for n in ((getattr(a, "meta", None) or {}).get("tokens") for a in answers) if is_count(n)]
        with self._lock:
            self.generation += seconds
            self.answers += len(answers)
            self.counted += len(counts)
            self.tokens += sum(counts)

    def scored(self, seconds: float) -> None:
        """The main process took ``seconds`` over one document's ``process_results``."""
        with self._lock:
            self.scored_main += seconds
            self.documents_scored += 1

    def scored_aside(self, cpu_seconds: float) -> None:
        """A scoring process spent ``cpu_seconds`` on one answer while the run went on."""
        with self._lock:
            self.aside += cpu_seconds

    # ---------------------------------------------------------------- what the run shows
    def line(self, task: str, done: int, total: int, scored: int | None, force: bool = False) -> str | None:
        """A progress line for ``done`` of ``total`` answers of one generation call of
        ``task``, or None when the last one is less than ``EVERY`` seconds old (``force``:
        the call's last line); ``scored``: how many of them the scoring processes have
        scored (None: there are none)."""
        now = time.perf_counter()
        with self._lock:
            if not force and self._last_line is not None and now - self._last_line < EVERY:
                return None
            self._last_line = now
            counted = self.counted == self.answers
            rate = self.tokens / self.generation if self.generation and counted else 0.0
            per_answer = self.generation / self.answers if self.answers else 0.0
            tokens = f" ({self.tokens:,} tokens" + (f", {rate:,.0f} tokens/s)" if rate else ")") if counted else ""
        left = f"; about {duration(per_answer * (total - done))} left" if done < total and per_answer else ""
        scoring = f"; {scored} of {done} scored while generating" if scored is not None else ""
        return f"{task}: {done} of {total} answers generated{tokens}{left}{scoring}"

    def _generated(self) -> str:
        if self.counted == self.answers:
            return f"{self.answers} answers, {self.tokens:,} tokens"
        return f"{self.answers} answers, {self.tokens:,} tokens in the {self.counted} of known length"

    def summary(self) -> str:
        """How the run's time went: generation, and scoring on and off the critical path."""
        with self._lock:
            wall = time.perf_counter() - self.started
            share = self.scored_main / wall if wall else 0.0
            return (f"drift tasks: {wall:.1f} s, of which generation {self.generation:.1f} s "
                    f"({self._generated()}); scoring: {self.documents_scored} documents, "
                    f"{self.aside:.1f} s of CPU in the scoring processes while the run went on, and "
                    f"{self.scored_main:.2f} s in the main process after generation ({share:.1%} of the run)")


RUN = RunClock()
