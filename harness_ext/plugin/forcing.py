"""The forced-length check before a run (``check_forcing``): a run whose drift tasks force
their answers' length first sends one short forced request through the wrapper
(``drift_eval.plugin.wrapper.DriftLM``) and stops with one line unless the backend really
forced it. Checked once per model object."""
from __future__ import annotations

import json
import weakref

from drift_eval import inert
from drift_eval.errors import DriftUsageError
from drift_eval.plugin import backends
from drift_eval.plugin.answers import meta_of

#: the probe: a request whose natural answer is one word
FORCING_SYSTEM = "Answer in as few words as you can."
FORCING_PROMPT = "Reply with the single word: yes"
FORCING_TOKENS = 64
_forcing: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> why it does not force ('' if it does)


def check_forcing(lm, tasks) -> None:
    """For the wrapper ``lm`` of a run whose ``tasks`` force their answers' length: one
    line, before any document, unless the backend forces a minimum length: one
    short forced request (``FORCING_PROMPT``, whose natural answer is one word, with a
    minimum of ``FORCING_TOKENS`` tokens) must come back that long by the engine's own
    count (vLLM, a server's ``usage``), or 80% of it by a count made again from the text,
    which may differ by a few tokens (a backend that cannot count the tokens passes).
    Checked once per model object (a sweep's settings share it)."""
    known = _forcing.get(lm.model)
    if known is None:
        known = _forcing[lm.model] = _forcing_problem(lm)
    if known:
        raise DriftUsageError(f"{', '.join(sorted(tasks))} force answers to a length, but {known}; or run them "
                              f"unforced on purpose with --gen_kwargs min_new_tokens=0 (the results then say "
                              f"unforced)")


def _forcing_problem(lm) -> str:
    """Why the backend did not force the probe's length ('' when it did or cannot be
    told)."""
    from lm_eval.api.instance import Instance  # deferred, start-up: loads lm_eval

    backend = lm.backend
    if backend.length_kwarg is None:
        return (f"{backend.model} cannot force a minimum length (its requests have no such field): use a backend "
                f"that can (docs/backends.md)")
    gen = {"until": [], "max_gen_toks": FORCING_TOKENS, backends.FORCE_KWARG: FORCING_TOKENS, "do_sample": False,
           "temperature": 0.0}
    messages = [{"role": "system", "content": FORCING_SYSTEM}, {"role": "user", "content": FORCING_PROMPT}]
    context = (lm.render(messages, add_generation_prompt=True) if lm.chat and lm.render
               else f"{FORCING_SYSTEM}\n\n{FORCING_PROMPT}")
    probe = Instance("generate_until", {"system_prompt": FORCING_SYSTEM}, (context, gen), 0)
    sent, plan = lm._prepared([probe])
    if backends.EngineOutputs.observes(lm.model):
        outputs = backends.EngineOutputs.generate(lm.model, sent, disable_tqdm=True)
    else:
        # the model's own method: a sweep's answer cache neither stores nor counts it
        outputs = (backends.ServerCounts.generate(lm.model, lm.model, sent, disable_tqdm=True)
                   if backends.ServerCounts.applies(lm.model, backend)
                   else type(lm.model).generate_until(lm.model, sent, disable_tqdm=True))
    # the engine's own count must reach the length; a count made again from the text may differ by a few
    reported = backend.reports_usage and isinstance(meta_of(outputs[0]).get("tokens"), int)
    [answer] = lm._answers(outputs, plan)
    tokens = answer.meta.get("tokens")
    if tokens is not None:  # a reasoning model's minimum counts its trace too (backends.EngineOutputs)
        tokens += answer.meta.get("trace_tokens") or 0
    if tokens is None or tokens >= (FORCING_TOKENS if reported else 0.8 * FORCING_TOKENS):
        return ""
    sent_as = {k: v for k, v in sent[0].args[1].items() if k not in ("until", "do_sample", "temperature")}
    said = inert.terminal(str(answer)[:60], one_line=True)
    if backend.end_kwarg == "logit_bias" and not lm.end_ids:
        fix = ("the server named none of its end-of-turn tokens (it has no tokenize endpoint of the llama.cpp "
               "family), so only min_tokens was sent: serve the model with llama-cpp-python's or llama.cpp's "
               "server, or give lm-eval its tokenizer (--model_args tokenizer_backend=huggingface,tokenizer=...)")
    elif backend.end_kwarg == "logit_bias":
        fix = f"the logit bias on its end-of-turn tokens {lm.end_ids} did not hold them back (docs/backends.md)"
    else:
        fix = "see docs/backends.md for how each backend forces a length"
    return (f"{backend.model} did not force it: asked to reply to {FORCING_PROMPT!r} with at least "
            f"{FORCING_TOKENS} tokens (sent {json.dumps(sent_as, sort_keys=True)}), it returned {tokens} "
            f"tokens ('{said}'); {fix}")
