"""A sweep's answer cache on the road to the model: an explicit collaborator of the drift
wrapper (``DriftLM(..., answers=)``), never a method set on the model.

``drift-eval sweep`` runs each setting inside ``serving(answers)``; the wrapper the run
gets (``drift_eval.plugin.run_check.for_run``) then serves every request type through
``CachedServing.serve``: answers already in the cache (``drift_eval.plugin.answer_cache``)
are returned from it, the rest go to the model and are stored. lm-eval's own request types
are stored as the backend produces them (its cache hook: ``add_partial``), the project's
own every ``chunk`` requests. The turns of a conversation (the ``generate_until`` calls
made inside ``generate_conversation``) are cached too, and counted apart: an interrupted
conversation run replays its finished turns from the cache (greedy turns render the same
history again) and generates from the first missing one.
"""
from __future__ import annotations

import contextlib
import contextvars

from drift_eval.plugin.request_types import CONVERSATION

#: lm-eval's own request types
BUILTIN_TYPES = ("generate_until", "loglikelihood", "loglikelihood_rolling")

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("drift_eval_cached_serving", default=None)


@contextlib.contextmanager
def serving(answers: "CachedServing"):
    """Inside the block, the drift wrapper of a run serves its requests through ``answers``."""
    token = _CURRENT.set(answers)
    try:
        yield answers
    finally:
        _CURRENT.reset(token)


def current() -> "CachedServing | None":
    """The ``CachedServing`` of the ``serving`` block this runs in, or None."""
    return _CURRENT.get()


class CachedServing:
    """Counts the requests that reach the model and serves the rest from ``cache`` (an
    ``answer_cache.AnswerCache``, or None: every request is generated and counted)."""

    def __init__(self, cache, chunk: int):
        self.cache, self.chunk = cache, max(1, chunk)
        self.generated = 0
        self.cached = 0
        self.turns_cached = 0  # conversation turns served from the cache
        self._depth = 0
        self._storing = None   # the lm-eval request type whose answers the hook stores now

    # the backend's cache hook (lm-eval's CacheHook interface)
    def add_partial(self, attr, req, res):
        if self.cache is None or attr != self._storing or _sampled(attr, req):
            return
        # deferred, start-up: loads jinja2, lm_eval, numpy, requests, tqdm, yaml
        from lm_eval.api.model import hash_args

        self.cache.put([(hash_args(attr, req), attr, res)])

    def serve(self, rtype: str, original, requests, *args, **kwargs) -> list:
        """``original(requests, ...)`` (the ``rtype`` requests' serving), through the cache;
        a call made inside another's serving (a conversation's turns) is counted as turns,
        and only lm-eval's own types are looked up there."""
        top = self._depth == 0
        self._depth += 1
        try:
            if not top and rtype not in BUILTIN_TYPES:
                return original(requests, *args, **kwargs)
            return self._serve(rtype, original, requests, *args, count=top, **kwargs)
        finally:
            self._depth -= 1

    def _serve(self, rtype, original, requests, *args, count: bool = True, **kwargs):
        """``count``: False for the turns inside a conversation (the conversation is the
        request that is counted)."""
        # deferred, start-up: loads jinja2, lm_eval, numpy, requests, tqdm, yaml
        from lm_eval.api.model import hash_args

        keys = [hash_args(rtype, r.args) for r in requests]
        out = [None] * len(requests)
        if self.cache is not None:
            out = [None if _sampled(rtype, r.args) else self.cache.get(k, rtype) for k, r in zip(keys, requests)]
        todo = [i for i, o in enumerate(out) if o is None]
        if count:
            self.cached += len(requests) - len(todo)
            self.generated += len(todo)
        else:
            self.turns_cached += len(requests) - len(todo)
        if rtype in BUILTIN_TYPES:  # one call, as lm-eval makes it; the hook stores each answer
            self._storing = rtype
            try:
                answers = original([requests[i] for i in todo], *args, **kwargs) if todo else []
            finally:
                self._storing = None
            for i, a in zip(todo, answers):
                out[i] = a
            if self.cache is not None:  # and for a backend without the hook, all of them now
                self.cache.put([(keys[i], rtype, out[i]) for i in todo if not _sampled(rtype, requests[i].args)])
            return out
        if rtype != CONVERSATION.name:
            # keep requests that share work together in a chunk: prompt_offsets requests of
            # one scene (its four axes) share the scene's base runs
            todo.sort(key=lambda i: str(requests[i].args[0]))
        for start in range(0, len(todo), self.chunk):
            idx = todo[start:start + self.chunk]
            answers = original([requests[i] for i in idx], *args, **kwargs)
            for i, a in zip(idx, answers):
                out[i] = a
            if self.cache is not None:
                self.cache.put([(keys[i], rtype, out[i]) for i in idx])
        return out


def _sampled(rtype, args) -> bool:
    """Sampled answers are never cached (lm-eval's rule)."""
    return rtype == "generate_until" and len(args) > 1 and isinstance(args[1], dict) and bool(args[1].get("do_sample"))
