"""Per-head dilution exponents for ``compensation=head``.

Under uniform attention a fixed span's share of a query's attention falls like
``P / (q + 1)``; a real head dilutes at its own rate. We measure it: the model reads a
calibration conversation (the drift_french tasks' system prompt, a user request, and a
fixed English prose answer shipped in ``data/calibration_continuation.txt``) with eager
attention; for every layer and head we take the attention mass ``m(q)`` that query ``q``
puts on the span's keys (token 0 excluded) and fit ``log m(q) = a - kappa * log((q+1)/P)``
by least squares over the answer's positions (the first ``SKIP`` skipped). The head's
strength is ``gamma = clip(kappa, 0, KAPPA_MAX)``: adding ``gamma * log((q+1)/P)`` to its
logits multiplies the span's weights by ``((q+1)/P)^gamma``, which cancels that head's own
decay when the span's share is small. ``log`` compensation is the special case
``gamma = 1`` for every head. Results are cached per model (``DRIFT_CACHE_DIR``), written
atomically under a lock, so the ranks of a data-parallel run measure once.
"""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import torch

from drift_eval.compensation import bias
from drift_eval.compensation.spans import system_span_end, token_count_before
from drift_eval.errors import DriftUsageError
from drift_eval.files import build_lock, cache_dir, move_aside, prose_text, read_json, write_json_atomic
from drift_eval.logs import log
from drift_eval.measure.capture import capture
from drift_eval.metrics.values import is_finite
from drift_eval.settings import CompensationConfig

VERSION = 2
SKIP = 8
KAPPA_MAX = 2.0
USER_PROMPT = "Tell me a long story about a lighthouse keeper."


def fit_kappa(shares: np.ndarray, qpos: np.ndarray, span_end: int) -> np.ndarray:
    """``kappa`` per row of ``shares`` (heads x queries) from a log-log least-squares fit."""
    x = np.log((qpos + 1.0) / span_end)
    y = np.log(np.clip(shares, 1e-12, None))
    xc = x - x.mean()
    slope = (y - y.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)
    return -slope


def model_fingerprint(model) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    for name, p in list(model.named_parameters())[:4]:
        h.update(name.encode())
        h.update(p.detach().float().flatten()[:4096].cpu().numpy().tobytes())
    h.update(f"v{VERSION}".encode())
    return h.hexdigest()[:20]


def _cached_gammas(path: str):
    """The cached strengths, or None when the file is damaged: it is then moved aside (with a
    warning) and the calibration runs again."""
    try:
        gamma = read_json(path, "calibration cache", expect=dict).get("gamma")
        ok = isinstance(gamma, list) and gamma and all(
            isinstance(row, list) and len(row) == len(gamma[0]) and row and all(
                is_finite(g) for g in row)
            for row in gamma)
    except DriftUsageError:
        ok = False
    if ok:
        return torch.tensor(gamma, dtype=torch.float32)
    moved = move_aside(path)
    log.warning("calibration cache %s is damaged: moved aside to %s; calibrating again", path,
                os.path.basename(moved))
    return None


def head_gammas(model, tokenizer, system: str, use_cache: bool = True) -> torch.Tensor:
    """(layers, heads) per-head strengths for ``model``, measured on the instruction
    ``system`` (the caller's: ``drift_eval.taskdata.french.calibration_prompt`` for
    the project's compensation); computed once per model and text, then cached."""
    text_key = hashlib.sha256(system.encode("utf-8")).hexdigest()[:12]
    path = os.path.join(cache_dir("head_calibration"), f"{model_fingerprint(model)}-{text_key}.json")
    if not use_cache:
        return _measure(model, tokenizer, system, path=None)
    with build_lock(path):  # the ranks of a data-parallel run: one measures, the others wait and read
        if os.path.lexists(path):
            cached = _cached_gammas(path)
            if cached is not None:
                return cached
        return _measure(model, tokenizer, system, path)


def _measure(model, tokenizer, system: str, path: str | None) -> torch.Tensor:
    """Measure the per-head strengths; write them to ``path`` (atomically) unless None."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": USER_PROMPT},
                {"role": "assistant", "content": prose_text()}]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        text = "\n\n".join(m["content"] for m in messages)
    end_char = system_span_end(text, tokenizer, system)
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    span_end = token_count_before(text, end_char, tokenizer, add_special_tokens=False)
    n = enc["input_ids"].shape[1]
    qpos = np.arange(n)
    keep = qpos >= span_end + SKIP
    rows = {}

    def span_shares(layer, out, weights):  # (1, heads, q, k) -> kappa per head
        shares = weights[0, :, :, 1:span_end].float().sum(-1).cpu().numpy()  # token 0 excluded
        rows[layer] = np.clip(fit_kappa(shares[:, keep], qpos[keep], span_end), 0.0, KAPPA_MAX)

    device = next(model.parameters()).device
    state = bias.install(model)  # keeps the model's own setting, restored below
    setting = state.config
    state.config = CompensationConfig("none")  # measure stock attention
    try:
        with bias.attention(model, "eager"), capture(model, attention_output=span_shares), \
                torch.no_grad():
            model(**{k: v.to(device) for k, v in enc.items()})
    finally:
        state.config = setting
    gamma = np.stack([rows[i] for i in sorted(rows)]).round(6)  # what the cache file holds, so both routes agree
    if path is not None:
        write_json_atomic(path, {"version": VERSION, "span_end": span_end, "tokens": int(n), "gamma": gamma.tolist()})
    return torch.tensor(gamma, dtype=torch.float32)
