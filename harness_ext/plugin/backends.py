"""What each lm-eval model backend needs so that the drift tasks run on it.

lm-eval's chat models (``hf``, ``vllm``, ``sglang``, ``local-chat-completions``,
``openai-chat-completions``, and ``hf-drift``) all have ``apply_chat_template`` and a batched
``generate_until``. They differ in what the drift tasks rely on, and this module bridges
them:

* **Forced length.** ``drift_french_single`` asks for ``min_new_tokens = max_gen_toks`` in
  its generation kwargs: one task-level signal. Each backend receives it under its own
  name (``BACKENDS``): HF ``generate`` takes ``min_new_tokens``; vLLM's ``SamplingParams``
  ``min_tokens``; SGLang's sampling params ``min_new_tokens``; the OpenAI-compatible
  servers of llama-cpp-python and vLLM take ``min_tokens`` in the request body. The OpenAI
  service's request schema has no such field, and a model class not listed here may reject
  unknown kwargs, so they get nothing: the run goes on unforced.
* **What came back.** Every answer to a drift request comes back as an ``Answer`` with
  ``tokens`` (the server's own count where it reports one, else the model tokenizer's count
  of the text), ``forced_length`` (when a length was asked: whether the backend forced it;
  a server that reports fewer tokens than asked did not) and ``instruction_placement``.
* **The instruction is never dropped.** lm-eval's HF and vLLM models silently drop the
  system message when a chat template rejects it. Here a template without a system role
  (one that raises on a system turn, or renders none) gets the instruction at the top of
  the first user message instead, as the template authors of Gemma- and Mistral-style
  models recommend (``instruction_placement: user``), and every prompt of a drift request
  is checked to contain its system prompt before it is generated.
* **Conversations** (``generate_conversation``) run on every model whose chat template
  renders them: ``serve_conversations``, each turn one batched ``generate_until``.
* **Data-parallel runs.** lm-eval gathers per-sample metrics across ranks by the keys of
  rank 0; a rank that scored no document lacks them. ``gather_object`` fills them in.

``adapt(cls)`` installs this on a model class (once). The registration hook runs
``prepare_run`` at the start of lm-eval's ``evaluate``: it adapts the model's class and
checks the task/model pair before any request is built or generated, so every
incompatibility is one line before any work.
"""
from __future__ import annotations

import copy
import functools
import inspect
import json
import logging
from dataclasses import dataclass

from ..errors import DriftUsageError
from .answers import Answer, meta_of
from .request_types import CONVERSATION, NEEDS

log = logging.getLogger("lm_eval_drift")

FORCE_KWARG = "min_new_tokens"  # the task-level request for a forced length
_PROBE = "\u2063DRIFT-INSTRUCTION\u2063"


@dataclass(frozen=True)
class Backend:
    model: str                 # lm-eval's model name, for messages and docs
    length_kwarg: str | None   # the backend's own name for a minimum generation length; None: cannot force
    chat_api: bool = False     # sends chat messages to a server (needs --apply_chat_template)
    reports_usage: bool = False  # the server reports how many tokens it generated


# lm-eval model classes by name (the first one along a class's MRO applies), so that no
# optional backend (vllm, sglang) is imported to look it up.
BACKENDS = {
    "HFDriftLM": Backend("hf-drift", "min_new_tokens"),
    "HFLM": Backend("hf", "min_new_tokens"),
    "VLLM": Backend("vllm", "min_tokens"),
    "SGLangLM": Backend("sglang", "min_new_tokens"),
    "OpenAIChatCompletion": Backend("openai-chat-completions", None, chat_api=True, reports_usage=True),
    "OpenAICompletionsAPI": Backend("openai-completions", None),
    "LocalChatCompletion": Backend("local-chat-completions", "min_tokens", chat_api=True, reports_usage=True),
    "LocalCompletionsAPI": Backend("local-completions", "min_tokens"),
}
OTHER = Backend("this model", None)


def backend_of(obj) -> Backend:
    cls = obj if isinstance(obj, type) else type(obj)
    for klass in cls.__mro__:
        if klass.__name__ in BACKENDS:
            return BACKENDS[klass.__name__]
    return OTHER


def backend_kwargs(gen_kwargs: dict, backend: Backend) -> tuple[dict, int]:
    """(the generation kwargs for ``backend``, the forced length asked: 0 for none).

    ``min_new_tokens`` is taken out and, where the backend can force a length, put back
    under its own name, capped at ``max_gen_toks``."""
    kwargs = dict(gen_kwargs)
    asked = int(kwargs.pop(FORCE_KWARG, 0) or 0)
    if asked and "max_gen_toks" in kwargs:
        asked = min(asked, int(kwargs["max_gen_toks"]))
    if asked and backend.length_kwarg:
        kwargs[backend.length_kwarg] = asked
    return kwargs, asked


# ---------------------------------------------------------------------------- the instruction
def _text(rendered) -> str:
    if isinstance(rendered, str):
        return rendered
    prompt = getattr(rendered, "prompt", None)  # lm-eval's JsonChatStr
    return prompt if isinstance(prompt, str) else json.dumps(rendered, ensure_ascii=False, default=str)


def _unadapted(lm, name):
    method = getattr(type(lm), name)
    if getattr(method, "_drift_wrapper", False):
        method = method.__wrapped__
    return functools.partial(method, lm)


def system_role(lm) -> bool:
    """Whether ``lm``'s chat template renders a system turn (probed once per model). A
    template that fails with and without one counts as having it: the real call then
    reports its own error."""
    if "_drift_system_role" not in vars(lm):
        render = _unadapted(lm, "apply_chat_template")
        try:
            ok = _PROBE in _text(render([{"role": "system", "content": _PROBE}, {"role": "user", "content": "?"}]))
        except Exception:  # noqa: BLE001 (a template may raise anything)
            try:
                render([{"role": "user", "content": "?"}])
                ok = False
            except Exception:  # noqa: BLE001
                ok = True
        if not ok:
            log.warning("lm-eval-drift: the chat template has no system role: the instruction goes at the top of "
                        "the first user message (instruction_placement: user)")
        vars(lm)["_drift_system_role"] = ok
    return vars(lm)["_drift_system_role"]


def keep_instruction(messages: list[dict], system_ok: bool) -> list[dict]:
    """The messages a template without a system role renders with the instruction kept: the
    system text at the top of the first user message."""
    system = [m for m in messages if m.get("role") == "system"]
    if system_ok or not system:
        return messages
    text = "\n\n".join(str(m.get("content", "")) for m in system)
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{text}\n\n{m.get('content', '')}"
            break
    else:
        rest.insert(0, {"role": "user", "content": text})
    return rest


def _messages(context):
    """The chat messages of a context that an API model sends as JSON, else None."""
    if isinstance(context, list):
        return context
    prompt = getattr(context, "prompt", None)
    if isinstance(prompt, str) and not isinstance(context, str):
        try:
            messages = json.loads(prompt)
        except ValueError:
            return None
        return messages if isinstance(messages, list) else None
    return None


def placement(lm, context, instruction: str) -> str | None:
    """Where ``instruction`` sits in ``context``: ``system`` or ``user`` (a chat turn),
    ``plain`` (a prompt rendered without a chat template); ``None`` when it is absent."""
    messages = _messages(context)
    if messages is not None:
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if instruction in (content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)):
                return "system" if m.get("role") in ("system", "developer") else "user"
        return None
    if instruction not in str(context):
        return None
    if not vars(lm).get("_drift_chat"):
        return "plain"
    return "system" if system_role(lm) else "user"


def _instruction(request) -> str | None:
    doc = getattr(request, "doc", None)
    text = doc.get("system_prompt") if isinstance(doc, dict) else None
    return text if isinstance(text, str) and text.strip() else None


# ---------------------------------------------------------------------------- answers
def count_tokens(lm, text: str) -> int | None:
    """Tokens of ``text`` under the model's tokenizer, or None where it has none."""
    tok = getattr(lm, "tokenizer", None)
    encode = getattr(tok, "encode", None)
    if not callable(encode):
        return None
    try:
        return len(encode(str(text), add_special_tokens=False))
    except TypeError:
        return len(encode(str(text)))


def _answer(lm, backend: Backend, out, asked: int, where: str | None):
    meta = meta_of(out)
    measured = meta.get("tokens")  # what the backend itself reported
    if measured is None:
        meta["tokens"] = count_tokens(lm, out)
    if asked and "forced_length" not in meta:
        short = backend.reports_usage and isinstance(measured, int) and measured < asked
        meta["forced_length"] = backend.length_kwarg is not None and not short
    if where is not None:
        meta.setdefault("instruction_placement", where)
    return Answer(str(out), **meta)


def _with_args(request, args):
    clone = copy.copy(request)
    clone.arguments = args
    return clone


# ---------------------------------------------------------------------------- wrappers
def _wrap_generate_until(original):
    @functools.wraps(original)
    def generate_until(self, requests, *args, **kwargs):
        if vars(self).get("_drift_busy"):  # an adapted subclass method is handling this call
            return original(self, requests, *args, **kwargs)
        backend = backend_of(self)
        sent, plan = [], []
        for r in requests:
            context, gen = r.args[0], r.args[1]
            instruction = _instruction(r)
            where = None
            if instruction is not None:
                where = placement(self, context, instruction)
                if where is None:
                    raise DriftUsageError(
                        f"{getattr(r, 'task_name', None) or 'a drift task'}: the prompt for the model lacks the task's "
                        f"system prompt (its chat template dropped it), so the model would never see the instruction")
            asked = 0
            if isinstance(gen, dict) and FORCE_KWARG in gen:
                gen, asked = backend_kwargs(gen, backend)
                r = _with_args(r, (context, gen, *r.args[2:]))
            sent.append(r)
            plan.append((asked, where, instruction is not None or asked > 0))
        vars(self)["_drift_busy"] = True
        try:
            outputs = original(self, sent, *args, **kwargs)
        finally:
            vars(self).pop("_drift_busy", None)
        return [_answer(self, backend, out, asked, where) if drift and out is not None else out
                for out, (asked, where, drift) in zip(outputs, plan)]

    generate_until._drift_wrapper = True
    return generate_until


def _wrap_apply_chat_template(original):
    @functools.wraps(original)
    def apply_chat_template(self, chat_history, *args, **kwargs):
        return original(self, keep_instruction(chat_history, system_role(self)), *args, **kwargs)

    apply_chat_template._drift_wrapper = True
    return apply_chat_template


def _wrap_parse_generations(original):
    """Chat-completion responses (one choice each): the text with the server's token count."""

    @functools.wraps(original)
    def parse_generations(self, outputs, *args, **kwargs):
        texts = original(self, outputs, *args, **kwargs)
        responses = outputs if isinstance(outputs, list) else [outputs]
        if len(responses) != len(texts):
            return texts
        out = []
        for text, resp in zip(texts, responses):
            usage = resp.get("usage") if isinstance(resp, dict) else None
            n = usage.get("completion_tokens") if isinstance(usage, dict) else None
            ok = isinstance(n, int) and not isinstance(n, bool) and len(resp.get("choices") or []) == 1
            out.append(Answer(text, tokens=n) if ok and isinstance(text, str) else text)
        return out

    parse_generations._drift_wrapper = True
    return parse_generations


def fill_gathered_metrics(gathered):
    """lm-eval gathers ``{task: {metric key: [values]}}`` from every rank and reads each
    rank's list under rank 0's keys; a rank that scored no document has none. Fills them
    with empty lists (anything else is returned as it is)."""
    if not isinstance(gathered, list) or not all(
            isinstance(part, dict) and all(isinstance(v, dict) for v in part.values()) for part in gathered):
        return gathered
    for task in {t for part in gathered for t in part}:
        keys = {k for part in gathered for k in part.get(task, {})}
        for part in gathered:
            entry = part.setdefault(task, {})
            for k in keys:
                entry.setdefault(k, [])
    return gathered


def _wrap_gather_object(original):
    @functools.wraps(original)
    def gather_object(self, obj, *args, **kwargs):
        return fill_gathered_metrics(original(self, obj, *args, **kwargs))

    gather_object._drift_wrapper = True
    return gather_object


def adapt(cls: type) -> type:
    """Install the drift behaviour on an lm-eval model class (idempotent; subclasses that
    override a method get it wrapped too)."""
    from lm_eval.api.model import LM

    if vars(cls).get("_drift_adapted"):
        return cls
    wrappers = {"generate_until": _wrap_generate_until, "gather_object": _wrap_gather_object}
    if getattr(cls, "apply_chat_template", None) is not LM.apply_chat_template:
        wrappers["apply_chat_template"] = _wrap_apply_chat_template
    parse = inspect.getattr_static(cls, "parse_generations", None)
    if backend_of(cls).chat_api and inspect.isfunction(parse):  # an instance method, not a staticmethod
        wrappers["parse_generations"] = _wrap_parse_generations
    for name, wrap in wrappers.items():
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "_drift_wrapper", False):
            setattr(cls, name, wrap(method))
    cls._drift_adapted = True
    return cls


# ---------------------------------------------------------------------------- conversations
def serve_conversations(lm, requests, disable_tqdm: bool = False) -> list[str]:
    """``generate_conversation`` for any chat model: the whole conversation of each request
    as JSON text, exactly as the model saw it (the instruction folded into the first user
    message where the template has no system role)."""
    from tqdm import tqdm

    from ..measure.conversation import ConversationSpec, dump_messages, run_conversations

    adapt(type(lm))
    n_turns = max((len(ConversationSpec.from_json(r.args[0]).user_turns) for r in requests), default=0)
    # every turn is shown (mininterval=0): turns replayed from a sweep's answer cache end
    # within tqdm's default interval, which would otherwise hide them until a generated one ends
    bar = tqdm(total=n_turns, desc=f"Running {len(requests)} conversations, turn by turn",
               disable=disable_tqdm or getattr(lm, "rank", 0) != 0, mininterval=0)
    try:
        histories = run_conversations(lm, requests, progress=lambda turn, n: bar.update(1))
    finally:
        bar.close()
    ok = system_role(lm) if histories else True
    return [dump_messages(keep_instruction(h, ok)) for h in histories]


# ---------------------------------------------------------------------------- the run check
def request_types(task, name: str) -> set:
    """The request types a task sends (the project's tasks build one request to tell)."""
    from .task_base import YamlTask

    if not isinstance(task, YamlTask):
        return set()
    docs = task.eval_docs
    if not len(docs):
        return set()
    inst = task.construct_requests(doc=docs[0], ctx="", metadata=(name, 0, 1),
                                   apply_chat_template=False, chat_template=None)
    return {i.request_type for i in (inst if isinstance(inst, list) else [inst])}


def needs_hf_drift(tasks, what: str) -> str:
    return (f"{', '.join(sorted(tasks)) or 'this task'} {what}, which only the 'hf-drift' model serves: "
            f"run it with --model hf-drift")


def _chat_problem(lm) -> str | None:
    """Why ``lm`` cannot render a chat with the instruction kept, or None."""
    try:
        rendered = lm.apply_chat_template([{"role": "system", "content": _PROBE}, {"role": "user", "content": "?"}])
    except Exception as exc:  # noqa: BLE001 (lm-eval and templates raise many kinds)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return f"{backend_of(lm).model} has none ({first})"
    if _PROBE not in _text(rendered):
        return f"the chat template of {backend_of(lm).model} drops the instruction even in the first user message"
    return None


def run_problems(lm, tasks: dict, chat: bool) -> list[str]:
    """Everything that would stop ``tasks`` on ``lm`` part-way, one phrase each."""
    from .task_base import YamlTask

    by_type: dict = {}
    for name, task in tasks.items():
        for rtype in request_types(task, name):
            by_type.setdefault(rtype, []).append(name)
    problems = []
    for rtype, what in NEEDS.items():
        if rtype != CONVERSATION and rtype in by_type and getattr(getattr(type(lm), rtype, None),
                                                                   "_drift_fallback", False):
            problems.append(needs_hf_drift(by_type[rtype], what))
    backend = backend_of(lm)
    drift_single = [n for n in by_type.get("generate_until", []) if isinstance(tasks[n], YamlTask)]
    if backend.chat_api and not chat and drift_single:
        problems.append(f"{', '.join(sorted(drift_single))} on {backend.model} needs --apply_chat_template "
                        f"(a chat endpoint takes messages, not a prompt)")
    conversations = by_type.get(CONVERSATION, [])
    if conversations or (chat and drift_single):
        why = _chat_problem(lm)
        if why:
            who = conversations or drift_single
            need = (f"{NEEDS[CONVERSATION]}, which needs a chat template" if conversations
                    else "--apply_chat_template needs a chat template")
            problems.append(f"{', '.join(sorted(who))} {need}: {why}")
    return problems


def _tasks_of(task_dict) -> dict:
    if isinstance(task_dict, dict) and "tasks" in task_dict:
        return dict(task_dict["tasks"] or {})
    from lm_eval.evaluator_utils import _handle_back_comp

    return _handle_back_comp(task_dict or {})[1]


def prepare_run(lm, task_dict, apply_chat_template) -> None:
    """Adapt ``lm``'s class and check the run: raises one ``DriftUsageError`` line naming
    every problem, before any request is built."""
    inner = lm.lm if type(lm).__name__ == "CachingLM" else lm
    adapt(type(inner))
    vars(inner)["_drift_chat"] = bool(apply_chat_template)
    problems = run_problems(inner, _tasks_of(task_dict), bool(apply_chat_template))
    if problems:
        raise DriftUsageError("; ".join(problems))
