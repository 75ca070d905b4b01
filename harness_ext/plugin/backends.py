"""What each lm-eval model backend does with the drift tasks' requests. Pure Python.

lm-eval's chat models (``hf``, ``vllm``, ``sglang``, ``local-chat-completions``,
``openai-chat-completions``, and ``hf-drift``) all have ``apply_chat_template`` and a batched
``generate_until``. They differ in what the drift tasks rely on:

* **Forced length.** ``drift_french_single`` asks for ``min_new_tokens = max_gen_toks`` in
  its generation kwargs: one task-level signal. Each backend receives it under its own
  name (``BACKENDS``): HF ``generate`` takes ``min_new_tokens``; vLLM's ``SamplingParams``
  ``min_tokens``; SGLang's sampling params ``min_new_tokens``; the OpenAI-compatible
  servers of llama-cpp-python and vLLM take ``min_tokens`` in the request body. The OpenAI
  service's request schema has no such field, and a model class not listed here may reject
  unknown kwargs, so they get nothing. A minimum length holds back only the tokens the
  backend counts as the end, and a chat model may end its turn on another one (Qwen's
  ``<|im_end|>`` beside ``<|endoftext|>``, Llama 3's ``<|eot_id|>``, Gemma's
  ``<end_of_turn>``), so the model's end-of-turn tokens go with it, under the backend's own
  name (``end_kwarg``): HF ``eos_token_id`` (every one of them then ends the answer, and
  ``min_new_tokens`` holds every one back), vLLM and SGLang ``stop_token_ids`` (their
  minimum covers those), llama.cpp-family servers a ``logit_bias`` of -100 on each in place
  of ``min_tokens`` (which holds back one end token only). Whether a backend really forces
  is checked before a run (``drift_eval.plugin.wrapper``).
* **What came back.** Every answer to a drift request comes back as an ``Answer`` with
  ``tokens`` (the engine's own count where it reports one, else the model tokenizer's count
  of the text), ``forced_length`` (when a length was asked: whether the backend forced it;
  a backend that reports fewer tokens than asked did not) and ``instruction_placement``.
  The engine's counts come from a chat-completions server's ``usage`` (``with_server_counts``)
  and from vLLM's ``RequestOutput`` (``EngineOutputs``: the generated tokens, the prompt's
  tokens and those its prefix cache served). For a reasoning model run with lm-eval's
  ``think_end_token`` (vLLM, ``hf``), lm-eval returns the text after the end of reasoning,
  so ``tokens`` counts that visible answer, ``trace_tokens`` the reasoning before it and
  ``trace`` holds its text (``drift_eval.plugin.reasoning``): a forced minimum counts both,
  and an answer left shorter than the length asked says ``forced_length`` false.

``drift_eval.plugin.wrapper`` applies this to the drift requests of a run, and only to them.
"""
from __future__ import annotations

import inspect
import json
import types
from dataclasses import dataclass

from drift_eval.plugin import reasoning
from drift_eval.plugin.answers import Answer, count_tokens, is_count, meta_of

FORCE_KWARG = "min_new_tokens"  # the task-level request for a forced length


@dataclass(frozen=True)
class Backend:
    model: str                 # lm-eval's model name, for messages and docs
    length_kwarg: str | None   # the backend's own name for a minimum generation length; None: cannot force
    chat_api: bool = False     # sends chat messages to a server (needs --apply_chat_template)
    reports_usage: bool = False  # the engine reports how many tokens it generated
    end_kwarg: str | None = None  # how the model's end-of-turn tokens go with a forced length (above)


# lm-eval model classes by name (the first one along a class's MRO applies), so that no
# optional backend (vllm, sglang) is imported to look it up.
BACKENDS = {
    "HFDriftLM": Backend("hf-drift", "min_new_tokens", end_kwarg="eos_token_id"),
    "HFLM": Backend("hf", "min_new_tokens", end_kwarg="eos_token_id"),
    "VLLM": Backend("vllm", "min_tokens", reports_usage=True, end_kwarg="stop_token_ids"),
    "SGLangLM": Backend("sglang", "min_new_tokens", reports_usage=True, end_kwarg="stop_token_ids"),
    "OpenAIChatCompletion": Backend("openai-chat-completions", None, chat_api=True, reports_usage=True),
    "OpenAICompletionsAPI": Backend("openai-completions", None),
    "LocalChatCompletion": Backend("local-chat-completions", "min_tokens", chat_api=True, reports_usage=True,
                                   end_kwarg="logit_bias"),
    "LocalCompletionsAPI": Backend("local-completions", "min_tokens", end_kwarg="logit_bias"),
}
SUPPRESS = -100.0  # the logit bias that holds a token back (the OpenAI API's floor)
OTHER = Backend("this model", None)


def backend_of(obj) -> Backend:
    cls = obj if isinstance(obj, type) else type(obj)
    for klass in cls.__mro__:
        if klass.__name__ in BACKENDS:
            return BACKENDS[klass.__name__]
    return OTHER


def backend_kwargs(gen_kwargs: dict, backend: Backend, end_ids=()) -> tuple[dict, int]:
    """(the generation kwargs for ``backend``, the forced length asked: 0 for none).

    ``min_new_tokens`` is taken out and, where the backend can force a length, put back
    under its own name, capped at ``max_gen_toks``, with the model's end-of-turn token ids
    ``end_ids`` under the backend's ``end_kwarg`` (added to any the kwargs already hold)."""
    kwargs = dict(gen_kwargs)
    asked = int(kwargs.pop(FORCE_KWARG, 0) or 0)
    if asked and "max_gen_toks" in kwargs:
        asked = min(asked, int(kwargs["max_gen_toks"]))
    if asked and backend.length_kwarg:
        ids = sorted({int(i) for i in end_ids})
        if ids and backend.end_kwarg == "logit_bias":
            # the bias on every end token forces the length by itself (for the whole answer:
            # it runs to max_gen_toks); min_tokens is left out, because llama-cpp-python's
            # server (0.3.16) drops every logits processor when both come in one request
            bias = dict(kwargs.get("logit_bias") or {})
            kwargs["logit_bias"] = {**{str(i): SUPPRESS for i in ids}, **bias}
            return kwargs, asked
        kwargs[backend.length_kwarg] = asked
        if ids and backend.end_kwarg:
            have = kwargs.get(backend.end_kwarg)
            have = [] if have is None else list(have) if isinstance(have, (list, tuple, set)) else [have]
            kwargs[backend.end_kwarg] = sorted({*ids, *(int(i) for i in have)})
    return kwargs, asked


# ---------------------------------------------------------------------------- the instruction
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


def placement(context, instruction: str, chat: bool, system_role: bool) -> str | None:
    """Where ``instruction`` sits in ``context``: ``system`` or ``user`` (a chat turn),
    ``plain`` (a prompt rendered without a chat template); ``None`` when it is absent.
    ``chat``: the prompt was rendered with the chat template; ``system_role``: the template
    has a system role (a rendered string does not say which turn holds the text)."""
    messages = _messages(context)
    if messages is not None:
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if instruction in (content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)):
                return "system" if m.get("role") in ("system", "developer") else "user"
        return None
    if instruction not in str(context):
        return None
    if not chat:
        return "plain"
    return "system" if system_role else "user"


# ---------------------------------------------------------------------------- answers
def answer(lm, backend: Backend, out, asked: int, where: str | None) -> Answer:
    """``out`` (what the backend returned) as an ``Answer`` with its token count, whether a
    forced length ``asked`` was honoured, and the instruction's placement ``where``."""
    meta = meta_of(out)
    measured = meta.get("tokens")  # what the backend itself reported
    if measured is None:
        meta["tokens"] = count_tokens(lm, out)
    if asked and "forced_length" not in meta:
        short = backend.reports_usage and isinstance(measured, int) and measured < asked
        # a reasoning model's minimum held back its trace and answer together: the visible
        # answer alone fell short of the length
        traced = bool(meta.get("trace_tokens") or meta.get("trace"))
        short = short or (traced and not (isinstance(meta["tokens"], int) and meta["tokens"] >= asked))
        meta["forced_length"] = backend.length_kwarg is not None and not short
    if where is not None:
        meta.setdefault("instruction_placement", where)
    return Answer(str(out), **meta)


class EngineOutputs:
    """A stand-in for lm-eval's ``vllm`` model (or its ``hf`` model with ``think_end_token``)
    during one ``generate_until`` call: lm-eval's own method runs on it unchanged
    (``generate``), every attribute is the model's, and only ``_model_generate`` (and, for
    ``hf``, ``tok_batch_encode``, which names each row's prompt) is its own: it calls the
    model's and keeps what the engine returned, which lm-eval reduces to text: per prompt,
    the generated token ids, and on vLLM its ``RequestOutput`` (the prompt's token ids, the
    tokens its prefix cache served). Neither the model nor its class is changed."""

    def __init__(self, model):
        self._model = model
        self._outputs: list = []
        self._batches: list = []  # hf: the prompts of each batch, in the order of its rows

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_model", "_outputs", "_batches"):
            raise AttributeError(name)
        return getattr(self._model, name)

    def tok_batch_encode(self, strings, *args, **kwargs):
        self._batches.append(list(strings))
        return self._model.tok_batch_encode(strings, *args, **kwargs)

    def _model_generate(self, *args, **kwargs):
        outputs = self._model._model_generate(*args, **kwargs)
        context = kwargs.get("context")
        if context is not None and self._batches:  # hf: one row per prompt, the prompt's tokens first
            width = context.shape[1]
            rows = zip(self._batches[-1], outputs)
            self._outputs.extend((prompt, row[width:].tolist(), None) for prompt, row in rows)
        elif outputs and isinstance(outputs[0], dict):  # SGLang: a dict per prompt, in the order of the prompts
            prompts = kwargs["requests"] if "requests" in kwargs else args[0]
            self._outputs.extend((tuple(ids), list(o.get("output_ids") or ()), _SGLangOutput(ids, o))
                                 for ids, o in zip(prompts, outputs))
        else:  # vLLM: a RequestOutput per prompt, known by the prompt's token ids
            self._outputs.extend((tuple(o.prompt_token_ids or ()), list(o.outputs[0].token_ids), o) for o in outputs)
        return outputs

    @classmethod
    def observes(cls, model) -> bool:
        """Whether ``generate`` can observe ``model``: lm-eval's vLLM and SGLang models, or
        its ``hf`` model run with ``think_end_token`` (or a subclass of any)."""
        name = backend_of(model).model
        return ((name in ("vllm", "sglang") or (name == "hf" and reasoning.reasoning_marker(model)))
                and callable(getattr(type(model), "_model_generate", None)))

    @classmethod
    def generate(cls, model, requests, first_of_two: bool = False, via=None, **kwargs) -> list:
        """``model.generate_until(requests)``, each text as an ``Answer`` with what the engine
        reported, paired with its request by the prompt (a text it cannot pair, for a prompt
        that lm-eval truncated, is returned as it is): on vLLM its own counts; with
        ``think_end_token``, the trace that lm-eval cut off the answer (on ``hf`` the visible
        answer's count is made from its text, as for any ``hf`` answer); with ``first_of_two``
        (the first of a forced reasoning answer's two requests), that reasoning as generated
        instead (``reasoning.reasoning_of``). ``via``: a ``StandIn`` of ``model`` to observe
        instead of the model itself (its methods then run within the observed call)."""
        observer = cls(model if via is None else via)
        texts = type(model).generate_until(observer, requests, **kwargs)
        return cls._pair(model, requests, texts, observer._outputs, first_of_two)

    @staticmethod
    def _pair(model, requests, texts, outputs, first_of_two: bool) -> list:
        hf = backend_of(model).model == "hf"
        marker = reasoning.reasoning_marker(model)
        by_prompt: dict = {}
        for key, ids, output in outputs:
            by_prompt.setdefault(key, []).append((ids, output))
        out = []
        for request, text in zip(requests, texts):
            found = by_prompt.get(request.args[0] if hf else tuple(model.tok_encode(request.args[0])))
            if not found or not isinstance(text, str):
                out.append(text)
                continue
            ids, output = found.pop(0)
            if first_of_two:  # the reasoning as generated, for the visible answer's own request
                visible, trace, trace_text, raw = len(ids), 0, None, None
                meta = reasoning.reasoning_of(model, ids)
            else:
                visible, trace, trace_text, raw = reasoning.visible_split(model, ids, text, marker)
                meta = {}
            if output is not None:  # the engine's own counts (vLLM, SGLang)
                generated = getattr(output, "completion_tokens", None)
                if generated is not None and not ids:  # SGLang without the token ids: its count, where no trace is cut
                    visible = generated if not marker else count_tokens(model, text)
                meta.update(tokens=visible, prompt_tokens=len(output.prompt_token_ids))
                cached = getattr(output, "num_cached_tokens", None)
                if isinstance(cached, int):
                    meta["cached_prompt_tokens"] = int(cached)
            if trace:
                meta["trace_tokens"] = trace
                if trace_text is not None:
                    meta.update(trace=trace_text, trace_raw=raw)
            out.append(Answer(text, **meta) if meta else text)
        return out


class _SGLangOutput:
    """What SGLang's offline engine returned for one prompt (``{"text", "output_ids",
    "meta_info"}``), read as vLLM's ``RequestOutput`` is: the prompt's token ids, the
    generated tokens it counted (``meta_info.completion_tokens``) and those of the prompt
    its radix cache served (``meta_info.cached_tokens``)."""

    def __init__(self, prompt_ids, output: dict):
        info = output.get("meta_info") if isinstance(output.get("meta_info"), dict) else {}
        self.prompt_token_ids = list(prompt_ids)
        self.completion_tokens = info.get("completion_tokens") if is_count(info.get("completion_tokens")) else None
        self.num_cached_tokens = info.get("cached_tokens") if is_count(info.get("cached_tokens")) else None


def with_server_counts(texts: list, responses, model=None) -> list:
    """Chat-completion responses (one choice each): each parsed text as an ``Answer`` with
    the server's ``usage.completion_tokens`` (texts it cannot pair are returned as they
    are), and a reasoning model's trace (``reasoning.server_reasoning``)."""
    responses = responses if isinstance(responses, list) else [responses]
    if len(responses) != len(texts):
        return texts
    out = []
    for text, resp in zip(texts, responses):
        usage = resp.get("usage") if isinstance(resp, dict) else None
        n = usage.get("completion_tokens") if isinstance(usage, dict) else None
        ok = is_count(n) and len(resp.get("choices") or []) == 1
        if not (ok and isinstance(text, str)):
            out.append(text)
            continue
        meta = {"tokens": n, **reasoning.server_reasoning(model, resp, text)}
        if "trace_tokens" in meta:  # the server counted the reasoning apart: the rest is the answer
            meta["tokens"] = n - meta["trace_tokens"]
        elif "trace" in meta:  # one count for both: the visible answer's is made from its text
            meta["tokens"] = count_tokens(model, text) if model is not None else None
        out.append(Answer(text, **meta))
    return out


class StandIn:
    """A stand-in for a model during one call of the plugin's: lm-eval's own methods run on
    it unchanged, with the stand-in as ``self``; every attribute is the model's, every method
    of the model's class runs with the stand-in as ``self`` (so that the calls it makes reach
    the stand-in's own methods), and a subclass's own methods take the model's place for
    that call (``super()`` is not the model's: they call ``self.stands_for``'s). This is how
    the plugin changes what a model does for one call without changing the model object or
    its class. lm-eval's models write nothing on ``self`` during ``generate_until``, so
    nothing is lost with the stand-in."""

    def __init__(self, model):
        self.stands_for = model

    def __getattr__(self, name):
        if name.startswith("__") or name == "stands_for":
            raise AttributeError(name)
        model = self.stands_for
        if name not in vars(model):
            function = inspect.getattr_static(type(model), name, None)
            if isinstance(function, types.FunctionType):  # a method: it runs on the stand-in
                return types.MethodType(function, self)
        return getattr(model, name)


class ServerCounts(StandIn):
    """A stand-in (``StandIn``) for a chat-completions server model (lm-eval's
    ``TemplateAPI`` models) during one drift call (``generate``), on the synchronous and
    the concurrent paths alike: its ``parse_generations`` is the model's, with each text
    given the server's token count (``with_server_counts``). lm-eval hands a model's raw
    responses to nothing else."""

    def parse_generations(self, outputs, *args, **kwargs):
        return with_server_counts(self.stands_for.parse_generations(outputs, *args, **kwargs), outputs, self.stands_for)

    @classmethod
    def applies(cls, model, backend) -> bool:
        """Whether ``model`` is a chat-completions server model whose answers can carry the
        server's counts."""
        return backend.chat_api and callable(getattr(type(model), "parse_generations", None))

    @classmethod
    def generate(cls, target, model, requests, *args, **kwargs) -> list:
        """``target.generate_until(requests)`` with the server's counts, where ``target`` is
        ``model`` or lm-eval's ``CachingLM`` around it (a copy of it then sends what its
        cache lacks to the stand-in); a target of another kind is called as it is."""
        if target is model:
            return type(model).generate_until(cls(model), requests, *args, **kwargs)
        inner = vars(target).get("lm")
        if inner is not model or type(target).__name__ != "CachingLM":
            return target.generate_until(requests, *args, **kwargs)
        view = object.__new__(type(target))  # a copy of its attributes (its cache shared), its model the stand-in
        vars(view).update({**vars(target), "lm": cls(model)})
        return view.generate_until(requests, *args, **kwargs)


def fill_gathered_metrics(gathered, tasks=None):
    """lm-eval gathers ``{task: {metric key: [values]}}`` from every rank and reads each
    rank's list under rank 0's keys; a rank that scored no document has none. Fills them
    with empty lists, for ``tasks`` (every task when None); anything else is returned as
    it is."""
    if not isinstance(gathered, list) or not all(
            isinstance(part, dict) and all(isinstance(v, dict) for v in part.values()) for part in gathered):
        return gathered
    for task in {t for part in gathered for t in part}:
        if tasks is not None and task not in tasks:
            continue
        keys = {k for part in gathered for k in part.get(task, {})}
        for part in gathered:
            entry = part.setdefault(task, {})
            for k in keys:
                entry.setdefault(k, [])
    return gathered
