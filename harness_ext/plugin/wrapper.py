"""The model a run with drift tasks hands to lm-eval's ``evaluate``: a delegating wrapper.

When, and only when, the tasks of an ``evaluate`` call include drift tasks (the project's
``YamlTask`` subclasses), the registration hook (``drift_eval.plugin.registration``) checks
the run (``run_problems``) and passes ``DriftLM(lm, ...)`` to ``evaluate`` instead of the
user's model, in the manner of lm-eval's ``CachingLM``. The wrapper

* hands every request of another task to the user's model untouched, in one call per
  request type exactly as lm-eval makes it, so a mixed run's other tasks score as they do
  without the plugin;
* sends the drift tasks' ``generate_until`` requests with the forced length under the
  backend's own kwarg, checks that each prompt still holds the task's system prompt, and
  returns each answer as an ``Answer`` with its metadata (``drift_eval.plugin.backends``);
* serves the drift request types (``drift_eval.plugin.request_types``): a model that has
  the method (``hf-drift``) serves it; conversations run on any chat model
  (``drift_eval.plugin.conversations``); any other pair was refused before the run;
* fills a data-parallel rank's missing metric keys of the drift tasks (``gather_object``).

Everything else (``rank``, ``tokenizer``, ``apply_chat_template``...) is the user's model's.
The wrapper changes nothing on the model or its class; the drift tasks keep their
instruction in templates without a system role by rendering through
``drift_eval.plugin.chat.InstructionKeeping`` themselves.
"""
from __future__ import annotations

import dataclasses

from drift_eval.errors import DriftUsageError
from drift_eval.plugin import backends
from drift_eval.plugin.chat import InstructionKeeping, probe
from drift_eval.plugin.request_types import CONVERSATION, TYPES


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

    def __init__(self, lm, drift_tasks, chat: bool = True):
        self.lm = lm
        self.model = innermost(lm)
        self.drift_tasks = frozenset(drift_tasks)
        self.chat = bool(chat)
        self.backend = backends.backend_of(self.model)
        self.render = InstructionKeeping(self.model.apply_chat_template, self.backend.model) \
            if hasattr(self.model, "apply_chat_template") else None

    def __getattr__(self, name):
        if name.startswith("__") or name in ("lm", "model", "drift_tasks", "chat", "backend", "render"):
            raise AttributeError(name)  # not set yet (copying, unpickling): never the wrapped model's
        rt = TYPES.get(name)
        if rt is None or hasattr(self.lm, name):  # lm-eval's own, or a model that serves it (hf-drift)
            return getattr(self.lm, name)
        if rt.any_chat_model:
            serve = rt.serving_function()
            return lambda requests, disable_tqdm=False: serve(self, requests, disable_tqdm=disable_tqdm)

        def refuse(requests, *args, **kwargs):  # run_problems refuses such a run before it starts
            raise DriftUsageError(needs_hf_drift({getattr(r, "task_name", None) or "" for r in requests} - {""},
                                                 rt.needs))

        return refuse

    def _is_drift(self, request) -> bool:
        return getattr(request, "task_name", None) in self.drift_tasks

    # ------------------------------------------------------------------ generate_until
    def generate_until(self, requests, *args, **kwargs):
        drift = [i for i, r in enumerate(requests) if self._is_drift(r)]
        if not drift:
            return self.lm.generate_until(requests, *args, **kwargs)
        others = [i for i in range(len(requests)) if i not in set(drift)]
        out = [None] * len(requests)
        if others:  # exactly the call lm-eval makes without the drift tasks
            for i, a in zip(others, self.lm.generate_until([requests[i] for i in others], *args, **kwargs)):
                out[i] = a
        for i, a in zip(drift, self.generate_drift([requests[i] for i in drift], self.lm, *args, **kwargs)):
            out[i] = a
        return out

    def generate_drift(self, requests, target=None, *args, **kwargs):
        """Drift requests through ``target`` (the wrapped model by default): the forced
        length under the backend's kwarg, the instruction checked in every prompt, the
        answers with their metadata."""
        target = self.lm if target is None else target
        sent, plan = [], []
        for r in requests:
            context, gen = r.args[0], r.args[1]
            instruction = _instruction(r)
            where = None
            if instruction is not None:
                where = backends.placement(context, instruction, self.chat,
                                           self.render.system_role if self.render and self.chat else True)
                if where is None:
                    raise DriftUsageError(
                        f"{getattr(r, 'task_name', None) or 'a drift task'}: the prompt for the model lacks the task's "
                        f"system prompt (its chat template dropped it), so the model would never see the instruction")
            asked = 0
            if isinstance(gen, dict) and backends.FORCE_KWARG in gen:
                gen, asked = backends.backend_kwargs(gen, self.backend)
                r = _with_args(r, (context, gen, *r.args[2:]))
            sent.append(r)
            plan.append((asked, where))
        with _server_counts(self.model, self.backend):
            outputs = target.generate_until(sent, *args, **kwargs)
        return [out if out is None else backends.answer(self.model, self.backend, out, asked, where)
                for out, (asked, where) in zip(outputs, plan)]

    # ------------------------------------------------------------------ data-parallel runs
    def gather_object(self, obj, *args, **kwargs):
        return backends.fill_gathered_metrics(self.lm.gather_object(obj, *args, **kwargs), self.drift_tasks)


class _server_counts:
    """For the duration of one drift call on a chat-completions server model, its
    ``parse_generations`` returns each text with the server's token count
    (``backends.with_server_counts``). lm-eval hands a model's raw responses to nothing
    else, so this one method is shadowed on the instance, and only for that call: the
    class is never touched, and other tasks' calls never see it."""

    def __init__(self, model, backend):
        parse = getattr(type(model), "parse_generations", None)
        self.model = model if backend.chat_api and callable(parse) and "parse_generations" not in vars(model) else None

    def __enter__(self):
        if self.model is not None:
            original = self.model.parse_generations

            def parse_generations(outputs, *args, **kwargs):
                return backends.with_server_counts(original(outputs, *args, **kwargs), outputs)

            vars(self.model)["parse_generations"] = parse_generations
        return self

    def __exit__(self, *exc):
        if self.model is not None:
            vars(self.model).pop("parse_generations", None)
        return False


# ---------------------------------------------------------------------------- the run check
def drift_tasks(tasks: dict) -> dict:
    """The project's tasks among ``tasks`` (name -> task)."""
    from drift_eval.plugin.task_base import YamlTask

    return {n: t for n, t in tasks.items() if isinstance(t, YamlTask)}


def request_types(task, name: str) -> set:
    """The request types a drift task sends (it builds one request to tell)."""
    docs = task.eval_docs
    if not len(docs):
        return set()
    inst = task.construct_requests(doc=docs[0], ctx="", metadata=(name, 0, 1),
                                   apply_chat_template=False, chat_template=None)
    return {i.request_type for i in (inst if isinstance(inst, list) else [inst])}


def needs_hf_drift(tasks, what: str) -> str:
    return (f"{', '.join(sorted(tasks)) or 'this task'} {what}, which only the 'hf-drift' model serves: "
            f"run it with --model hf-drift")


def run_problems(lm, tasks: dict, chat: bool) -> list[str]:
    """Everything that would stop the drift ``tasks`` on ``lm`` part-way, one phrase each."""
    model = innermost(lm)
    backend = backends.backend_of(model)
    by_type: dict = {}
    for name, task in tasks.items():
        for rtype in request_types(task, name):
            by_type.setdefault(rtype, []).append(name)
    problems = [needs_hf_drift(names, TYPES[rtype].needs) for rtype, names in by_type.items()
                if rtype in TYPES and not TYPES[rtype].any_chat_model and not hasattr(model, rtype)]
    single = by_type.get("generate_until", [])
    if backend.chat_api and not chat and single:
        problems.append(f"{', '.join(sorted(single))} on {backend.model} needs --apply_chat_template "
                        f"(a chat endpoint takes messages, not a prompt)")
    conversations = by_type.get(CONVERSATION.name, [])
    if conversations or (chat and single):
        render = getattr(model, "apply_chat_template", None)
        why = probe(render, backend.model).problem if render is not None else f"{backend.model} has none"
        if why:
            who = conversations or single
            need = (f"{CONVERSATION.needs}, which needs a chat template" if conversations
                    else "--apply_chat_template needs a chat template")
            problems.append(f"{', '.join(sorted(who))} {need}: {why}")
    return problems


def tasks_of(task_dict) -> dict:
    """name -> task of what lm-eval hands ``evaluate`` (``TaskManager.load``'s dict, or the
    nested dict of earlier versions)."""
    if isinstance(task_dict, dict) and "tasks" in task_dict:
        return dict(task_dict["tasks"] or {})
    from lm_eval.evaluator_utils import _handle_back_comp

    return _handle_back_comp(task_dict or {})[1]


def for_run(lm, tasks: dict, chat) -> DriftLM | None:
    """The model ``evaluate`` gets for ``tasks`` (name -> task): ``DriftLM`` around ``lm``
    when drift tasks are among them, after checking the run (one ``DriftUsageError`` line
    naming every problem, before any request is built); ``None`` (use ``lm`` as it is)
    when there are none."""
    ours = drift_tasks(tasks)
    if not ours:
        return None
    problems = run_problems(lm, ours, bool(chat))
    if problems:
        raise DriftUsageError("; ".join(problems))
    return DriftLM(lm, ours, bool(chat))
