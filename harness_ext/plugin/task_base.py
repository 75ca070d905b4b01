"""Base for the project's Python task classes, built by lm-eval from their YAML."""
from __future__ import annotations

import json
import time

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from drift_eval import __version__
from drift_eval.catalogue import STAMP
from drift_eval.errors import DriftUsageError
from drift_eval.plugin.chat import InstructionKeeping
from drift_eval.plugin.progress import RUN
from drift_eval.plugin.scoring import POOL
from drift_eval.settings import int_option


def check_generation_kwargs(gen: dict, where: str = "--gen_kwargs") -> dict:
    """The generation options every backend relies on, checked before any request runs:
    ``max_gen_toks`` >= 1, ``min_new_tokens`` >= 0, ``temperature`` >= 0, ``until`` text."""
    if not isinstance(gen, dict):
        raise DriftUsageError(f"{where} must be key=value options, got {gen!r}")
    if "max_gen_toks" in gen:
        gen["max_gen_toks"] = int_option(f"{where} max_gen_toks", gen["max_gen_toks"], 1)
    if "min_new_tokens" in gen:
        gen["min_new_tokens"] = int_option(f"{where} min_new_tokens", gen["min_new_tokens"], 0)
    t = gen.get("temperature", 0.0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
        raise DriftUsageError(f"{where} temperature must be a number >= 0, got {t!r}")
    until = gen.get("until", [])
    if not (isinstance(until, str) or (isinstance(until, list) and all(isinstance(u, str) for u in until))):
        raise DriftUsageError(f"{where} until must be text or a list of texts, got {until!r}")
    return gen


class YamlTask(ConfigurableTask):
    """A ``ConfigurableTask`` named by ``class: !function ...`` in a task YAML: lm-eval hands
    the whole config, ``class`` entry included, which ``TaskConfig`` does not accept. The
    package version joins the task's metadata (so results files say which version scored
    them), generation options are checked before the first request is built, and prompts
    are rendered with the instruction kept where the chat template has no system role
    (``drift_eval.plugin.chat``). Being a ``YamlTask`` is what makes a task a drift task
    (``drift_eval.plugin.wrapper``)."""

    def __init__(self, config=None):
        config = dict(config or {})
        config.pop("class", None)
        config["metadata"] = {**(config.get("metadata") or {}), STAMP: __version__}
        super().__init__(config=config)

    def build_all_requests(self, *, rank: int = 0, world_size: int = 1, chat_template=None, **kwargs):
        """lm-eval's, after checking the generation kwargs (the model and chat template are
        checked before, by ``run_check.for_run``), rendering chats through
        ``InstructionKeeping``, plus: a rank of a data-parallel run that gets
        no documents (a task with fewer documents than ranks) builds the first document's
        requests anyway. lm-eval runs each request type with a barrier after it, so every
        rank must send the same types; it scores only the rank's own documents, so these
        answers are never counted."""
        if self.config.generation_kwargs is not None:
            check_generation_kwargs(self.config.generation_kwargs, f"{self.config.task} generation kwargs")
        if chat_template is not None:
            kwargs["chat_template"] = InstructionKeeping(chat_template)
        try:
            super().build_all_requests(rank=rank, world_size=world_size, **kwargs)
        except ValueError:
            if world_size <= 1 or self._instances:
                raise
        if world_size > 1 and not self._instances:
            kwargs.update(limit=1, samples=None, cache_requests=False, rewrite_requests_cache=False)
            super().build_all_requests(rank=0, world_size=1, **kwargs)

    def process_results(self, doc, results):
        """lm-eval's, or, for an answer the model wrapper handed to the scoring processes
        while the run went on, their result: the same function on the same document and
        answer (``drift_eval.plugin.scoring``)."""
        started = time.perf_counter()
        taken = POOL.take(self.config.task, results)
        scores = taken if taken is not None else super().process_results(doc, results)
        RUN.scored(time.perf_counter() - started)
        return scores

    def request(self, doc, request_type, argument, gen_kwargs=None, **kwargs):
        """One request of the drift ``request_type`` (a ``drift_eval.plugin.request_types``
        record) for ``doc``: ``arguments`` are ``argument`` (a JSON-able value is sent as JSON
        text) and the generation kwargs."""
        if not isinstance(argument, str):
            argument = json.dumps(argument, ensure_ascii=False)
        return Instance(request_type=request_type.name, doc=doc, arguments=(argument, gen_kwargs or {}), idx=0,
                        metadata=kwargs.get("metadata", (None, None, None)))
