"""The model a run with drift tasks hands to lm-eval's ``evaluate``: a delegating wrapper.

When, and only when, the tasks of an ``evaluate`` call include drift tasks (the project's
``YamlTask`` subclasses), the registration hook (``drift_eval.plugin.registration``) checks
the run (``drift_eval.plugin.run_check``) and passes ``DriftLM(lm, ...)`` to ``evaluate`` instead of the
user's model, in the manner of lm-eval's ``CachingLM``. The wrapper

* hands every request of another task to the user's model untouched, in one call per
  request type exactly as lm-eval makes it, so a mixed run's other tasks score as they do
  without the plugin;
* sends the drift tasks' ``generate_until`` requests with the forced length under the
  backend's own kwarg, checks that each prompt still holds the task's system prompt, and
  returns each answer as an ``Answer`` with its metadata (``drift_eval.plugin.backends``);
* serves the drift request types (``drift_eval.plugin.request_types``): conversations run
  here on any chat model, ``hf-drift`` included (``drift_eval.plugin.conversations``), so
  that each is wrapped once; a model that has the method (``hf-drift``) serves the others;
  any other pair was refused before the run;
* in a sweep, serves every request through its answer cache, a collaborator given to it
  (``answers``: ``drift_eval.plugin.cached_serving``);
* carries each conversation's keys and values between turns on lm-eval's own ``hf``
  model when the run's ``--metadata`` asks for it (``conversation_cache``:
  ``drift_eval.plugin.carry.StockCarry``; ``hf-drift`` carries them itself);
* hands each drift answer it returns to the scoring processes, which score it while the
  run goes on (``drift_eval.plugin.scoring``; ``scoring_workers`` in ``--metadata``);
* fills a data-parallel rank's missing metric keys of the drift tasks (``gather_object``);
* before the first document of a run whose drift tasks force their answers' length, checks
  that the backend really forces one (``drift_eval.plugin.forcing``: one short forced
  request), and stops with one line if it does not.

Everything else (``rank``, ``tokenizer``, ``apply_chat_template``...) is the user's model's.
The wrapper changes nothing on the model or its class; the drift tasks keep their
instruction in templates without a system role by rendering through
``drift_eval.plugin.chat.InstructionKeeping`` themselves.
"""
from __future__ import annotations

import dataclasses
import functools
import time

from drift_eval.errors import DriftUsageError
from drift_eval.logs import log
from drift_eval.plugin import backends, batches, chat, reasoning, scoring, servers
from drift_eval.plugin.answers import Answer, meta_of
from drift_eval.plugin.cached_serving import BUILTIN_TYPES
from drift_eval.plugin.chat import InstructionKeeping
from drift_eval.plugin.progress import RUN
from drift_eval.plugin.request_types import TYPES
from drift_eval.settings import CONVERSATION_CACHE_MB



def innermost(lm):
    """The model behind lm-eval's ``CachingLM`` (and behind a ``DriftLM``)."""
    while type(lm).__name__ in ("CachingLM", "DriftLM") and hasattr(lm, "lm"):
        lm = lm.lm
    return lm


def _instruction(request) -> str | None:
    doc = getattr(request, "doc", None)
    text = doc.get("system_prompt") if isinstance(doc, dict) else None
    return text if isinstance(text, str) and text.strip() else None


def _with_args(request, args):
    """A new request with ``args`` (``dataclasses.replace``: ``copy.copy`` would cache
    ``__slotnames__`` on lm-eval's ``Instance`` class)."""
    return dataclasses.replace(request, arguments=args)


class DriftLM:
    """``lm`` for a run whose drift tasks are ``drift_tasks``; ``chat``: the run applies the
    chat template (``--apply_chat_template``)."""

    def __init__(self, lm, drift_tasks, chat: bool = True, conversation_cache=("off", CONVERSATION_CACHE_MB),
                 scoring_workers: int = 0, answers=None):
        self.lm = lm
        # a sweep's answer cache (drift_eval.plugin.cached_serving.CachedServing), or None
        self.answers = answers
        self.model = innermost(lm)
        self.drift_tasks = frozenset(drift_tasks)
        # name -> task, where the run's tasks were given: their answers go to the scoring processes
        self.tasks = dict(drift_tasks) if isinstance(drift_tasks, dict) else {}
        self.scoring_workers = scoring_workers
        self.chat = bool(chat)
        self.backend = backends.backend_of(self.model)
        self.render = InstructionKeeping(self.model.apply_chat_template, self.backend.model) \
            if hasattr(self.model, "apply_chat_template") else None
        self.conversation_cache = conversation_cache

    def __getattr__(self, name):
        if name.startswith("__") or name in ("lm", "model", "drift_tasks", "chat", "backend", "render",
                                             "conversation_cache", "tasks", "scoring_workers", "answers"):
            raise AttributeError(name)  # not set yet (copying, unpickling): never the wrapped model's
        rt = TYPES.get(name)
        if rt is None:  # lm-eval's own
            own = getattr(self.lm, name)
            return self._served(name, own) if name in BUILTIN_TYPES else own
        if rt.any_chat_model:  # conversations: served here, on every chat model, hf-drift included
            # deferred, start-up: loads torch, tqdm
            from drift_eval.plugin.serving import SERVERS  # torch: only once a run serves a drift request type

            serve = SERVERS[name]
            return self._scored(self._served(
                name, lambda requests, disable_tqdm=False: serve(self, requests, disable_tqdm=disable_tqdm)))
        if hasattr(self.lm, name):  # a model that serves it (hf-drift)
            return self._served(name, getattr(self.lm, name))

        def refuse(requests, *args, **kwargs):  # run_problems refuses such a run before it starts
            raise DriftUsageError(needs_hf_drift({getattr(r, "task_name", None) or "" for r in requests} - {""},
                                                 rt.needs))

        return refuse

    def _served(self, rtype: str, serve):
        """``serve`` (the ``rtype`` requests' serving), through a sweep's answer cache where
        the run has one (``answers``)."""
        if self.answers is None:
            return serve
        return functools.partial(self.answers.serve, rtype, serve)

    def _scored(self, serve):
        """``serve`` (a request type's serving function), with its answers handed to the
        scoring processes as it returns them (``drift_eval.plugin.scoring``)."""
        def scored(requests, *args, **kwargs):
            answers = _timed(serve, requests, *args, **kwargs)
            self._to_scoring(requests, answers)
            return answers

        return scored

    def _to_scoring(self, requests, answers, expected: int | None = None, quiet: bool = False) -> None:
        """``answers`` to the scoring processes; ``expected``: how many answers the whole
        call brings (the pool starts for a call of at least ``scoring.MIN_ANSWERS``)."""
        if self.scoring_workers and self.tasks:
            sent = scoring.POOL.submit(self.scoring_workers, [
                (self.tasks[r.task_name], r.doc, a) for r, a in zip(requests, answers)
                if getattr(r, "task_name", None) in self.tasks], expected=expected)
            if sent and not quiet:
                log.info(f"scoring: {sent} answers handed to {self.scoring_workers} scoring processes while the run "
                         f"goes on")

    def carried_conversations(self):
        """What carries the conversations of a ``generate_conversation`` call between
        turns (a context manager of the call's specs and generation kwargs, yielding its
        ``ConversationStore`` or None), or None where every turn is re-encoded: the model's
        own (``hf-drift``), or, on lm-eval's ``hf`` with ``conversation_cache`` on or auto in
        the run's metadata, ``carry.StockCarry``."""
        own = getattr(self.model, "carried_conversations", None)
        if callable(own):
            return own
        setting, cap_mb = self.conversation_cache
        if setting == "off" or backends.backend_of(self.model).model != "hf":
            return None
        from drift_eval.plugin import carry  # deferred, start-up: loads huggingface_hub, torch, tqdm, transformers

        return carry.StockCarry(self.model, setting, cap_mb) if carry.stock_hf(self.model) else None

    def _is_drift(self, request) -> bool:
        return getattr(request, "task_name", None) in self.drift_tasks

    # ------------------------------------------------------------------ generate_until
    def generate_until(self, requests, *args, **kwargs):
        drift = [i for i, r in enumerate(requests) if self._is_drift(r)]
        if not drift:
            return self._served("generate_until", self.lm.generate_until)(requests, *args, **kwargs)
        ours = set(drift)
        others = [i for i in range(len(requests)) if i not in ours]
        out = [None] * len(requests)
        if others:  # exactly the call lm-eval makes without the drift tasks
            theirs = self._served("generate_until", self.lm.generate_until)([requests[i] for i in others], *args,
                                                                            **kwargs)
            for i, a in zip(others, theirs):
                out[i] = a
        for i, a in zip(drift, self._batch_by_batch([requests[i] for i in drift], args, kwargs)):
            out[i] = a
        return out

    def _batch_by_batch(self, requests, args, kwargs) -> list:
        """The drift requests of one ``generate_until`` call, handed to the model one of its
        own batches at a time where those are known in advance (``batches.lm_eval_batches``:
        the same batches, so the same answers), each batch's answers to the scoring
        processes as it returns, with a progress line (``progress.RUN``); else in one call."""
        plan = None
        if not args and not self._reasons_first(self.lm, args):
            plan = batches.lm_eval_batches(self.model, self.backend.model, self._prepared(requests)[0])
        if not plan or len(plan) == 1:
            answers = _timed(self.generate_drift, requests, self.lm, *args, **kwargs)
            self._to_scoring(requests, answers, expected=len(requests))
            return answers
        target = self.lm
        if self.lm is self.model:  # the progress lines below stand for lm-eval's bar of the call
            kwargs = {**kwargs, "disable_tqdm": True}
            target = self.call_target(show_tokens=True)  # hf-drift: each batch's tokens all the same
        return self._each_batch(requests, plan, target, kwargs)

    def call_target(self, carry=None, show_tokens: bool = False):
        """What the calls of one of the plugin's own calls go to: on ``hf-drift``, the model
        for that call (``HFDriftLM.for_call``: ``carry``, the conversations' store, and
        ``show_tokens``, token progress with lm-eval's bars off, passed as arguments); else
        the store's stand-in for the model (``carry.StockCarry``), or the model."""
        for_call = getattr(self.model, "for_call", None)
        if callable(for_call):
            return for_call(carry=carry, show_tokens=show_tokens)
        return carry.target if carry is not None and carry.target is not None else self.model

    def _each_batch(self, requests, plan, target, kwargs) -> list:
        names = sorted({getattr(r, "task_name", None) or "drift" for r in requests})
        task = ", ".join(names) if len(names) <= 3 else f"{len(names)} drift tasks"  # a family's call: 28
        answers, done, scored_before = [None] * len(requests), 0, scoring.POOL.finished()
        for n, idx in enumerate(plan, 1):
            got = _timed(self.generate_drift, [requests[i] for i in idx], target, **kwargs)
            for i, a in zip(idx, got):
                answers[i] = a
            self._to_scoring([requests[i] for i in idx], got, expected=len(requests), quiet=True)
            done += len(idx)
            scored = scoring.POOL.finished() - scored_before if self.scoring_workers else None
            line = RUN.line(task, done, len(requests), scored, force=n == len(plan))
            if line:
                log.info(line)
        return answers

    def generate_drift(self, requests, target=None, *args, chat: bool | None = None, **kwargs):
        """Drift requests through ``target`` (the wrapped model by default): the forced
        length under the backend's kwarg, the instruction checked in every prompt, the
        answers with their metadata. ``chat``: whether the prompts were rendered with the
        chat template (a conversation's turns always are), else the run's
        ``--apply_chat_template``."""
        target = self.lm if target is None else target
        if self._reasons_first(target, args):
            return self._reasoned(requests, target, chat=chat, **kwargs)
        sent, plan = self._prepared(requests, chat=chat)
        return self._answers(self._generate(target, sent, *args, **kwargs), plan)

    def _own(self, target) -> bool:
        """Whether ``target`` is the model, or a stand-in for it (``backends.StandIn``)."""
        return target is self.model or getattr(target, "stands_for", None) is self.model

    def _generate(self, target, sent, *args, first_of_two: bool = False, **kwargs) -> list:
        if self._own(target) and not args and backends.EngineOutputs.observes(self.model):
            # with vLLM's counts, and a reasoning model's trace
            return backends.EngineOutputs.generate(self.model, sent, first_of_two=first_of_two,
                                                   via=None if target is self.model else target, **kwargs)
        if backends.ServerCounts.applies(self.model, self.backend):
            return backends.ServerCounts.generate(target, self.model, sent, *args, **kwargs)
        return self._served("generate_until", target.generate_until)(sent, *args, **kwargs)

    # ------------------------------------------------------------------ reasoning models
    def _reasons_first(self, target, args) -> bool:
        """Whether a forced answer of this model takes two requests (``_reasoned``): a
        reasoning model (lm-eval's ``think_end_token``) whose generated tokens the plugin
        sees: ``hf-drift`` (its own answers say where the reasoning ended), and lm-eval's
        ``hf`` and ``vllm`` models served directly (``backends.EngineOutputs``)."""
        if not reasoning.reasoning_marker(self.model) or args:
            return False
        if self.backend.model == "hf-drift":
            return True
        return (self.backend.model in ("hf", "vllm") and self._own(target)
                and backends.EngineOutputs.observes(self.model))

    def _reasoned(self, requests, target, chat: bool | None = None, **kwargs) -> list:
        """A reasoning model's answers, the forced ones in two requests (docs/backends.md,
        "Reasoning models"): the first, unforced, lets the model reason, and keeps what
        lm-eval leaves out of its answer, through the last end marker
        (``reasoning.reasoning_of``), or, where the model opened a reasoning and never ended
        it, all of it with the marker added (``trace_ended`` false); the second continues
        the prompt and that reasoning with the visible answer, forced to the length asked,
        with a one-token marker held back as the end of text is. The answer is the
        second's, with the first's trace."""
        forced = [i for i, r in enumerate(requests) if _asks_length(r.args[1])]
        out = [None] * len(requests)
        rest = [i for i, r in enumerate(requests) if not _asks_length(r.args[1])]
        if rest:
            sent, plan = self._prepared([requests[i] for i in rest], chat=chat)
            for i, a in zip(rest, self._answers(self._generate(target, sent, **kwargs), plan)):
                out[i] = a
        if not forced:
            return out
        first = [_with_args(requests[i], (requests[i].args[0], _unforced(requests[i].args[1]), *requests[i].args[2:]))
                 for i in forced]
        sent, _ = self._prepared(first, chat=chat)
        thought = []
        for r, a in zip(sent, self._generate(target, sent, first_of_two=True, **kwargs)):
            m = {k: v for k, v in meta_of(a).items() if k in ("trace", "trace_tokens", "trace_raw")}
            if m:
                m["trace_ended"] = True
            else:  # no end marker: a reasoning the model opened and never ended, or none
                m = reasoning.unfinished_reasoning(self.model, r.args[0], str(a or ""))
                m.update({"trace_ended": False} if m else {})
            thought.append(m)
        second = []
        for i, m in zip(forced, thought):
            r = requests[i]
            gen = dict(r.args[1])
            gen["max_gen_toks"] = min(int(gen.get("max_gen_toks") or gen[backends.FORCE_KWARG]),
                                      int(gen[backends.FORCE_KWARG]))
            second.append(_with_args(r, (r.args[0] + (m.get("trace_raw") or ""), gen, *r.args[2:])))
        marker = reasoning.reasoning_marker(self.model)
        sent, plan = self._prepared(second, also_held=marker if len(marker) == 1 else (), chat=chat)
        answers = self._answers(self._generate(target, sent, **kwargs), plan)
        for i, a, m in zip(forced, answers, thought):
            out[i] = a if a is None or not m else Answer(str(a), **{**meta_of(a), **m})
        return out

    def _prepared(self, requests, also_held=(), chat: bool | None = None) -> tuple[list, list]:
        """(the requests as the backend takes them, (forced length asked, instruction
        placement) per request); ``also_held``: token ids a forced length holds back with
        the model's end-of-turn tokens; ``chat``: as for ``generate_drift``."""
        chat = self.chat if chat is None else chat
        sent, plan = [], []
        for r in requests:
            context, gen = r.args[0], r.args[1]
            instruction = _instruction(r)
            where = None
            if instruction is not None:
                where = backends.placement(context, instruction, chat,
                                           self.render.system_role if self.render and chat else True)
                if where is None:
                    raise DriftUsageError(
                        f"{getattr(r, 'task_name', None) or 'a drift task'}: the prompt for the model lacks the task's "
                        f"system prompt (its chat template dropped it), so the model would never see the instruction")
            asked = 0
            if isinstance(gen, dict) and backends.FORCE_KWARG in gen:
                ends = [*self.end_ids, *also_held] if _asks_length(gen) else ()
                gen, asked = backends.backend_kwargs(gen, self.backend, ends)
                r = _with_args(r, (context, gen, *r.args[2:]))
            sent.append(r)
            plan.append((asked, where))
        return sent, plan

    def _answers(self, outputs, plan) -> list:
        return [out if out is None else backends.answer(self.model, self.backend, out, asked, where)
                for out, (asked, where) in zip(outputs, plan)]

    # ------------------------------------------------------------------ forced length
    @functools.cached_property
    def end_ids(self) -> list[int]:
        """The model's end-of-turn token ids, which a forced length holds back with its
        end of text (``backends.backend_kwargs``): from its Hugging Face tokenizer and chat
        template where it has them (with the model's own end-of-text ids, for HF), else
        from a llama.cpp-family server's tokenizer (``drift_eval.plugin.servers``)."""
        kind = self.backend.end_kwarg
        if kind is None:
            return []
        tok = getattr(self.model, "tokenizer", None)
        ids: set = set()
        if callable(getattr(tok, "convert_ids_to_tokens", None)):  # a Hugging Face tokenizer
            ids |= set(chat.end_of_turn_ids(self._template(tok), tok))
            if kind == "eos_token_id":
                config = getattr(getattr(self.model, "model", None), "generation_config", None)
                for i in (getattr(config, "eos_token_id", None), getattr(tok, "eos_token_id", None)):
                    ids |= {int(x) for x in (i if isinstance(i, (list, tuple)) else [i]) if x is not None}
        elif kind == "logit_bias" and getattr(self.model, "base_url", None):
            ids |= set(servers.end_token_ids(self.model.base_url, getattr(self.model, "header", None)))
        return sorted(ids)

    def _template(self, tok):
        """A renderer of chats as text: the model's own (HF), or its tokenizer's where the
        model renders chats as messages for a server."""
        render = getattr(self.model, "apply_chat_template", None)
        try:
            as_text = render is not None and isinstance(render([{"role": "user", "content": "?"}]), str)
        except Exception:  # noqa: BLE001 (a template may raise anything)
            as_text = False
        if as_text or not getattr(tok, "chat_template", None):
            return render
        return lambda messages, **kw: tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    # ------------------------------------------------------------------ data-parallel runs
    def gather_object(self, obj, *args, **kwargs):
        return backends.fill_gathered_metrics(self.lm.gather_object(obj, *args, **kwargs), self.drift_tasks)


def needs_hf_drift(tasks, what: str) -> str:
    return (f"{', '.join(sorted(tasks)) or 'this task'} {what}, which only the 'hf-drift' model serves: "
            f"run it with --model hf-drift")


def _timed(generate, requests, *args, **kwargs) -> list:
    """``generate(requests, ...)``'s answers, its time and answers counted as generation
    (``progress.RUN``)."""
    started = time.perf_counter()
    answers = generate(requests, *args, **kwargs)
    RUN.generated(time.perf_counter() - started, answers)
    return answers


def _asks_length(gen) -> bool:
    """Whether the generation kwargs ``gen`` ask for a forced length."""
    return isinstance(gen, dict) and int(gen.get(backends.FORCE_KWARG) or 0) > 0


def _unforced(gen: dict) -> dict:
    return {k: v for k, v in gen.items() if k != backends.FORCE_KWARG}
