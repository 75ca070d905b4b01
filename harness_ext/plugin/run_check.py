"""The run check: before an ``evaluate`` call with drift tasks builds a single request,
``for_run`` reads the run's settings from the tasks' ``--metadata`` (the conversation
cache, the scoring processes), names every problem that would stop the run part-way in one
``DriftUsageError`` line (``run_problems``: a request type the model cannot serve, a chat
endpoint without ``--apply_chat_template``, a missing chat template, a cache that cannot
be carried), checks that the backend forces a length where the tasks ask for one
(``drift_eval.plugin.forcing``), and returns the wrapper ``evaluate`` gets
(``drift_eval.plugin.wrapper.DriftLM``), or None for a run without drift tasks."""
from __future__ import annotations

from lm_eval.evaluator_utils import _handle_back_comp

from drift_eval.errors import DriftUsageError
from drift_eval.plugin import backends, cached_serving, scoring
from drift_eval.plugin.chat import probe
from drift_eval.plugin.forcing import check_forcing
from drift_eval.plugin.request_types import CONVERSATION, TYPES
from drift_eval.plugin.wrapper import DriftLM, innermost, needs_hf_drift
from drift_eval.settings import CONVERSATION_CACHE_MB, conversation_cache_setting


def drift_tasks(tasks: dict) -> dict:
    """The project's tasks among ``tasks`` (name -> task)."""
    # deferred, start-up: loads datasets, huggingface_hub, pandas, tqdm
    from drift_eval.plugin.task_base import YamlTask

    return {n: t for n, t in tasks.items() if isinstance(t, YamlTask)}


def sample_requests(task, name: str) -> list:
    """The requests a drift task builds for its first document (what it sends, and with
    which generation kwargs)."""
    docs = task.eval_docs
    if not len(docs):
        return []
    inst = task.construct_requests(doc=docs[0], ctx="", metadata=(name, 0, 1),
                                   apply_chat_template=False, chat_template=None)
    return inst if isinstance(inst, list) else [inst]


def request_types(task, name: str) -> set:
    """The request types a drift task sends."""
    return {i.request_type for i in sample_requests(task, name)}


def forced_length(task, name: str) -> int:
    """The length a drift task forces its answers to (0: none)."""
    return max((int((i.args[1] or {}).get(backends.FORCE_KWARG) or 0) for i in sample_requests(task, name)
                if i.request_type == "generate_until" and isinstance(i.args[1], dict)), default=0)


def conversation_cache_of(tasks: dict) -> tuple[str, int]:
    """The ``conversation_cache`` and ``conversation_cache_mb`` of the run's ``--metadata``
    (lm-eval hands it to every task's config), checked: one line for a bad value, or for
    tasks that were given different ones."""
    seen = set()
    for task in tasks.values():
        meta = getattr(getattr(task, "config", None), "metadata", None) or {}
        seen.add(conversation_cache_setting(meta.get("conversation_cache", "off"),
                                            meta.get("conversation_cache_mb", CONVERSATION_CACHE_MB)))
    if len(seen) > 1:
        raise DriftUsageError(f"the drift tasks were given different conversation_cache settings "
                              f"({', '.join(f'{m}/{mb} MiB' for m, mb in sorted(seen))}): give one in --metadata")
    return seen.pop() if seen else ("off", CONVERSATION_CACHE_MB)


def scoring_workers_of(tasks: dict) -> int:
    """The ``scoring_workers`` of the run's ``--metadata`` (``scoring.workers_setting``;
    ``auto`` where none is given), checked: one line for a bad value, or for tasks that
    were given different ones."""
    seen = {scoring.workers_setting((getattr(getattr(t, "config", None), "metadata", None) or {})
                                    .get("scoring_workers", scoring.AUTO)) for t in tasks.values()}
    if len(seen) > 1:
        raise DriftUsageError(f"the drift tasks were given different scoring_workers settings "
                              f"({', '.join(map(str, sorted(seen)))}): give one in --metadata")
    return seen.pop() if seen else 0


def run_problems(lm, tasks: dict, chat: bool, conversation_cache: str = "off") -> list[str]:
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
    if conversations and conversation_cache == "on" and not callable(getattr(model, "carried_conversations", None)):
        from drift_eval.plugin import carry  # deferred, start-up: loads huggingface_hub, torch, tqdm, transformers

        if backend.model != "hf" or not carry.stock_hf(model):
            problems.append(f"conversation_cache=on carries conversations on hf and hf-drift only, not on "
                            f"{backend.model} ({type(model).__name__}; servers reuse a shared prefix themselves: "
                            f"docs/backends.md); use conversation_cache=auto or off")
        elif not carry.can_carry(model):
            problems.append(f"conversation_cache=on: the key/value cache of {type(model.model).__name__} cannot be "
                            f"carried between turns (only full-attention and sliding-window layers can): use "
                            f"conversation_cache=auto or off")
    return problems


def tasks_of(task_dict) -> dict:
    """name -> task of what lm-eval hands ``evaluate`` (``TaskManager.load``'s dict, or the
    nested dict of earlier versions)."""
    if isinstance(task_dict, dict) and "tasks" in task_dict:
        return dict(task_dict["tasks"] or {})

    return _handle_back_comp(task_dict or {})[1]


def for_run(lm, tasks: dict, chat) -> DriftLM | None:
    """The model ``evaluate`` gets for ``tasks`` (name -> task): ``DriftLM`` around ``lm``
    when drift tasks are among them, after checking the run (one ``DriftUsageError`` line
    naming every problem, before any request is built); ``None`` (use ``lm`` as it is)
    when there are none."""
    ours = drift_tasks(tasks)
    if not ours:
        return None
    cache = conversation_cache_of(ours)
    workers = scoring_workers_of(ours)
    problems = run_problems(lm, ours, bool(chat), cache[0])
    if problems:
        raise DriftUsageError("; ".join(problems))
    wrapped = DriftLM(lm, ours, bool(chat), cache, workers, answers=cached_serving.current())
    forced = [name for name, task in ours.items() if forced_length(task, name)]
    if forced:
        check_forcing(wrapped, forced)
    return wrapped
