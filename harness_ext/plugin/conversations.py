"""Serving ``generate_conversation`` requests on any lm-eval chat model.

Turn k of every conversation is generated in one batched ``generate_until`` call of the
model (same batching, padding, stop sequences and, on ``hf-drift``, compensation as
single-turn tasks), as a drift request of the run (``DriftLM.generate_drift``: the
forced length under the backend's own kwarg, the instruction checked, the answer's
metadata). Each reply is appended as an assistant turn, and the next turn is rendered from
that history with the model's chat template, the instruction kept where the template has
no system role (``drift_eval.plugin.chat``). The system prompt is the compensation span in
every turn, so the bias follows it as history grows. The request's spec is
``drift_eval.conversation.ConversationSpec``.

On a model that carries conversations between turns (``conversation_cache=on|auto`` on
``hf-drift`` or lm-eval's ``hf``: ``DriftLM.carried_conversations``,
``drift_eval.plugin.carry``), each turn's prompts are named
with their conversation, so that a turn prefills only what follows the part of its prompt
that conversation already computed. An assistant turn whose prompt had to be re-encoded in
full although its conversation held a cache (the earlier prompt was not a prefix of it)
says ``"cache_reused": false`` in the logged conversation; nothing is added otherwise. On
an engine that reports how many prompt tokens its own prefix cache served (vLLM), one log
line sums them over the generated turns.
"""
from __future__ import annotations

from contextlib import nullcontext

from drift_eval.conversation import ConversationSpec, dump_messages
from drift_eval.errors import DriftUsageError
from drift_eval.logs import log
from drift_eval.plugin.answers import meta_of
from drift_eval.plugin.chat import keep_instruction


def run_conversations(drift_lm, requests, progress=None, show_tokens: bool = False) -> list[list[dict]]:
    """The conversations of ``requests`` on ``drift_lm`` (a ``DriftLM``); each one's full
    message list (system, user and assistant turns), as the spec wrote it. ``show_tokens``:
    token progress within each turn, where the model shows it (``hf-drift``)."""
    specs = [ConversationSpec.from_json(r.args[0]) for r in requests]
    gen_kwargs = [r.args[1] for r in requests]
    carry = drift_lm.carried_conversations()
    with carry(specs, gen_kwargs) if carry is not None else nullcontext() as store:
        target = drift_lm.call_target(carry=store, show_tokens=show_tokens)
        histories, re_encoded = _turns(drift_lm, specs, gen_kwargs, store, target, progress)
    if store is not None:
        log.info(f"conversation cache: {store.carried} of {store.positions} prompt positions of {len(specs)} "
                 f"conversations came from the carried keys and values")
    served = [meta_of(m["content"]) for h in histories for m in h if m["role"] == "assistant"]
    served = [m for m in served if isinstance(m.get("cached_prompt_tokens"), int)]
    if served:  # an engine that reports its prefix cache's work (vLLM)
        log.info(f"prefix cache: {sum(m['cached_prompt_tokens'] for m in served)} of "
                 f"{sum(m.get('prompt_tokens') or 0 for m in served)} prompt tokens of {len(served)} generated turns "
                 f"of {len(specs)} conversations came from the engine's prefix cache")
    for i, at in re_encoded:  # after every turn is rendered: the template never sees the mark
        histories[i][at]["cache_reused"] = False
    for history in histories:  # a reasoning model's trace of each turn, beside its reply
        for m in history:
            meta = meta_of(m["content"]) if m["role"] == "assistant" else {}
            m.update({k: meta[k] for k in TRACE_FIELDS if k in meta})
    return histories


#: what the logged conversation keeps of each turn's reasoning (``answers.Answer``)
TRACE_FIELDS = ("trace", "trace_tokens", "trace_ended")


def for_template(history: list[dict]) -> list[dict]:
    """The messages the chat template renders the next turn from: each generated reply as
    the model wrote it, its reasoning (``trace_raw``, through the end marker) before the
    visible answer, so that the template keeps or strips the reasoning as it does for the
    model's own conversations."""
    out = []
    for m in history:
        raw = meta_of(m["content"]).get("trace_raw") if m["role"] == "assistant" else None
        out.append({**m, "content": raw + str(m["content"])} if raw else m)
    return out


def _turns(drift_lm, specs, gen_kwargs, store, target, progress):
    """(the conversations' messages, the (conversation, message index) of each assistant
    turn re-encoded although its conversation held a cache); each turn's batch goes to
    ``target`` (``DriftLM.call_target``)."""
    from lm_eval.api.instance import Instance  # deferred, start-up: loads lm_eval

    histories = [[{"role": "system", "content": s.system_prompt}] for s in specs]
    re_encoded = []
    n_turns = max(len(s.user_turns) for s in specs)
    for turn in range(1, n_turns + 1):
        batch, owners = [], []
        for i, spec in enumerate(specs):
            if turn > len(spec.user_turns):
                continue
            histories[i].append({"role": "user", "content": spec.user_message(turn)})
            if not spec.generated(turn):
                histories[i].append({"role": "assistant", "content": spec.scripted_replies[turn - 1]})
                continue
            try:
                ctx = drift_lm.render(for_template(histories[i]), add_generation_prompt=True)
            except Exception as exc:
                raise DriftUsageError(f"conversation tasks need a model with a chat template ({exc})") from None
            batch.append(Instance("generate_until", {"system_prompt": spec.system_prompt}, (ctx, gen_kwargs[i]), i))
            owners.append(i)
        if batch:
            if store is not None:
                store.expect([(r.args[0], i) for r, i in zip(batch, owners)])
            # every turn is rendered with the chat template, whatever the run's --apply_chat_template
            for i, reply in zip(owners, drift_lm.generate_drift(batch, target, disable_tqdm=True, chat=True)):
                if store is not None and store.reused.pop(i, None) is False:
                    re_encoded.append((i, len(histories[i])))
                histories[i].append({"role": "assistant", "content": reply})
        if progress is not None:
            progress(turn, n_turns)
    return histories, re_encoded


def serve(drift_lm, requests, disable_tqdm: bool = False) -> list[str]:
    """``generate_conversation`` for any chat model, through the wrapper a drift run gets
    (``drift_lm``: a ``drift_eval.plugin.wrapper.DriftLM``): the whole conversation of each
    request as JSON text, exactly as the model saw it (the instruction folded into the first
    user message where the template has no system role)."""
    from tqdm import tqdm  # deferred, start-up: loads tqdm

    if not requests:
        return []
    n_turns = max(len(ConversationSpec.from_json(r.args[0]).user_turns) for r in requests)
    # every turn is shown (mininterval=0): turns replayed from a sweep's answer cache end
    # within tqdm's default interval, which would otherwise hide them until a generated one ends
    bar = tqdm(total=n_turns, desc=f"Running {len(requests)} conversations, turn by turn",
               disable=disable_tqdm or getattr(drift_lm.model, "rank", 0) != 0, mininterval=0)

    def advance(turn, n):
        bar.update(1)
        if turn == n:
            bar.close()  # its line ends before the conversation cache's INFO line starts

    try:  # hf-drift: token progress within each turn
        histories = run_conversations(drift_lm, requests, progress=advance, show_tokens=not disable_tqdm)
    finally:
        bar.close()
    system_ok = drift_lm.render.system_role
    return [dump_messages(keep_instruction(h, system_ok)) for h in histories]
