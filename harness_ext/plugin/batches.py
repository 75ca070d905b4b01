"""The batches in which lm-eval's model will generate one call's requests, known before the
call, so that the drift wrapper can hand them over one batch at a time: each batch's
answers then go to the scoring processes (``drift_eval.plugin.scoring``) while the next
batch is generated, and the run can say how far it is (``drift_eval.plugin.progress``).

A batch is generated as one padded tensor (``hf``, ``hf-drift``) or one engine call
(``vllm``), and its answers can depend on which prompts share it. So the batches are
lm-eval's own: its ``Collator`` over the same arguments, grouped by generation kwargs
(``hf``) and sorted by the same key its model's ``generate_until`` uses (longest prompt
first, in the model's tokens, then the prompt's text), cut every ``batch_size``. A call given one batch
makes that batch again, unchanged. Where the batches cannot be known in advance (``batch_size``
auto, which lm-eval sizes or hands to the engine whole; a server, whose requests go out
concurrently) there is one call, as lm-eval makes it.
"""
from __future__ import annotations

from lm_eval.models.utils import Collator


def lm_eval_batches(model, backend: str, requests) -> list[list[int]] | None:
    """The indices of ``requests`` (as the backend takes them) in each batch lm-eval's
    ``backend`` model (``hf``, ``hf-drift`` or ``vllm``) would make of them in one call, in
    the order it generates them; None where they cannot be known in advance."""
    size = getattr(model, "batch_size", None)
    if backend not in ("hf", "hf-drift", "vllm") or isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return None
    if not callable(getattr(model, "tok_encode", None)):
        return None
    # hf groups a call's requests by generation kwargs first; vllm sends them all together
    collator = Collator([(r.args[0], r.args[1], i) for i, r in enumerate(requests)],
                        sort_fn=lambda x: (-len(model.tok_encode(x[0])), x[0]),
                        group_by=None if backend == "vllm" else "gen_kwargs", group_fn=lambda x: x[1])
    return [[x[2] for x in batch] for batch in collator.get_batched(n=size)]
