"""Measured inputs of the positional-bias metric on a transformers model.

For fixed-length sequences (no padding), per layer t:

* ``lambda_t``: mean over tokens and sequences of ``|a| / (|x| + |a|)``, with ``x`` the
  decoder block's input (before its norm) and ``a`` the attention output after its output
  projection (forward hooks on the block and its attention module);
* ``A_t``: the attention kernel averaged over sequences and query heads (eager attention,
  since sdpa returns no weights; under GQA each query head counts once).

And the empirical influence: the L2 norm, per input position, of the gradient of the top
next-token probability at the last position with respect to the input embeddings, averaged
over sequences. The rollout maths is in ``drift_eval.metrics.rollout``; ``profiles`` puts both together.
"""
from __future__ import annotations
import json

import numpy as np
import torch

from drift_eval.compensation.bias import attention
from drift_eval.errors import DriftUsageError
from drift_eval.files import prose_text
from drift_eval.measure.capture import capture
from drift_eval.metrics import rollout as ro


def measure(model, input_ids: torch.Tensor) -> dict:
    """``lambdas`` (L,), ``kernels`` (L, n, n) and ``gradient_profile`` (n,) as NumPy arrays."""
    if input_ids.ndim != 2:
        raise ValueError("input_ids must be (sequences, length) with no padding")
    x_norm, lambdas, kernels = {}, {}, {}

    def block_input(t, x):
        x_norm[t] = x.detach().float().norm(dim=-1)

    def attention_output(t, a, weights):
        an = a.detach().float().norm(dim=-1)
        lambdas[t] = (an / (x_norm.pop(t) + an)).mean().item()
        kernels[t] = weights.float().mean(dim=(0, 1)).cpu().numpy()  # over sequences and heads

    with attention(model, "eager"), capture(model, block_input=block_input, attention_output=attention_output), \
            torch.no_grad():
        model(input_ids=input_ids)
    emb = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
    logits = model(inputs_embeds=emb).logits[:, -1].float()
    torch.softmax(logits, dim=-1).max(dim=-1).values.sum().backward()
    grad = emb.grad.float().norm(dim=-1).mean(dim=0).cpu().numpy()
    return {"lambdas": np.array([lambdas[t] for t in sorted(lambdas)]),
            "kernels": np.stack([kernels[t] for t in sorted(kernels)]),
            "gradient_profile": grad / grad.sum()}


def fixed_length_sequences(tokenizer, text: str, length: int, count: int) -> torch.Tensor:
    """``count`` consecutive, non-overlapping ``length``-token windows of ``text``."""
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"][0]
    if len(ids) < length * count:
        raise DriftUsageError(f"the text has {len(ids)} tokens; {count} sequences of {length} need "
                              f"{length * count}: give a longer text or fewer/shorter sequences")
    return ids[: length * count].reshape(count, length)


def profiles(model, input_ids: torch.Tensor) -> dict:
    """Predicted and empirical influence profiles, and their comparisons."""
    m = measure(model, input_ids)
    ks, lam, grad = list(m["kernels"]), m["lambdas"], m["gradient_profile"]
    predicted = {
        "residual_aware": ro.influence_profile(ro.rollout(ks, lam)),
        "attention_only": ro.influence_profile(ro.attention_only(ks, len(lam))),
        "abnar_zuidema": ro.influence_profile(ro.abnar_zuidema(ks, len(lam))),
    }
    comparison = {name: {"with_position_0": ro.compare(p, grad), "without_position_0": ro.compare(p, grad, True)}
                  for name, p in predicted.items()}
    return {"lambdas": lam.tolist(), "gradient": grad.tolist(),
            "profiles": {k: v.tolist() for k, v in predicted.items()}, "comparison": comparison}



def serve(lm, requests, disable_tqdm: bool = False) -> list[str]:
    """Serve ``position_profile`` requests with an ``HFLM`` (``hf-drift``): each request's
    ``arguments[0]`` is JSON ``{"length": n, "sequences": k}``; the answer is the JSON of
    ``profiles`` on the shipped prose."""
    out = []
    for r in requests:
        spec = json.loads(r.args[0])
        ids = fixed_length_sequences(lm.tokenizer, prose_text(), int(spec["length"]), int(spec["sequences"]))
        out.append(json.dumps(profiles(lm.model, ids.to(lm.model.device))))
    return out
