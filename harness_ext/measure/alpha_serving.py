"""The α study's two request types, served for lm-eval (``drift_eval.plugin.serving``):
``prompt_offsets`` (one scene's signal and noise curves, ``alpha.scene_offsets``) and
``continuation_nll`` (the perplexity cost of the bias, ``alpha.continuation_nll``). Each
request's JSON names what to measure; the answer is JSON."""
from __future__ import annotations

import json

from tqdm import tqdm

from drift_eval.anatomy import require_eager
from drift_eval.errors import DriftUsageError
from drift_eval.measure.alpha import Settings, continuation_nll, scene_offsets
from drift_eval.measure.continuations import continuation_ids
from drift_eval.metrics import alpha as am


def batch_size_of(lm_or_value) -> int:
    """The batch size of an lm-eval model (or a value): its ``batch_size``, 8 where it has
    none or it is ``auto``."""
    bs = getattr(lm_or_value, "batch_size", lm_or_value)
    try:
        return max(1, int(bs))
    except (TypeError, ValueError):
        return 8


def _lm_parts(lm):
    state = getattr(lm, "drift_state", None)
    return lm.model, lm.tokenizer, state


def serve_offsets(lm, requests, disable_tqdm: bool = False) -> list[str]:
    """``prompt_offsets`` requests: ``arguments[0]`` is JSON ``{"scene", "axis", "base",
    "variant", "continuations": [...], "length", "windows": {...}, "decompose"}``. Requests
    that share a base prompt and continuations (one scene's axes) share its base runs. The
    answer is JSON with the scene's signal and noise curves for the request's axis (and,
    with ``decompose``, the cross signals of the decomposition terms, ``parts``)."""
    model, tok, state = _lm_parts(lm)
    specs = [json.loads(r.args[0]) for r in requests]
    if any(s.get("decompose") for s in specs):
        require_eager(model, "the direct/relay decomposition")  # before any forward
    groups: dict = {}
    for i, s in enumerate(specs):
        key = (s["base"], tuple(s["continuations"]), s.get("length"), json.dumps(s.get("windows", {}), sort_keys=True),
               bool(s.get("decompose")))
        groups.setdefault(key, []).append(i)
    total = sum(len(specs[idx[0]]["continuations"]) * (1 + len(idx)) for idx in groups.values())
    bar = tqdm(total=total, desc=f"Teacher-forcing {len(groups)} scenes ({state.config.label() if state else 'none'})",
               disable=disable_tqdm or getattr(lm, "rank", 0) != 0)
    out = [None] * len(specs)
    try:
        for (base, conts, length, _, decompose), idx in groups.items():
            w = specs[idx[0]].get("windows", {})
            cont_ids, T = continuation_ids(tok, list(conts), length)
            windows = am.octave_windows(T, **w)
            variants = {specs[i]["axis"]: specs[i]["variant"] for i in idx}
            if len(variants) != len(idx):
                raise DriftUsageError("two requests of one scene ask for the same axis")
            curves = scene_offsets(model, tok, base, variants, cont_ids, windows,
                                   Settings(state, batch_size_of(lm), progress=bar.update, decompose=decompose))
            for i in idx:
                s = specs[i]
                out[i] = json.dumps({"scene": s.get("scene"), "axis": s["axis"], "length": T,
                                     "layers": len(curves[s["axis"]]["signal"]),
                                     "centres": [x.centre for x in windows],
                                     "compensation": state.config.label() if state else "none",
                                     **curves[s["axis"]]})
    finally:
        bar.close()
    return out


def serve_nll(lm, requests, disable_tqdm: bool = False) -> list[str]:
    """``continuation_nll`` requests: ``arguments[0]`` is JSON ``{"prompt", "continuations",
    "length"}``; the answer is JSON with the summed NLL per continuation under the active
    setting, the token count, and (when compensation is active) the same without it.

    Each continuation is scored once per setting: the scores without compensation are kept
    on the model (``lm.uncompensated_nll``, keyed by prompt, continuation tokens and batch
    size), so a ``none`` run, or the first compensated one, scores them and every later
    setting of the same loaded model (``drift-eval sweep``) reuses them, the same numbers."""
    model, tok, state = _lm_parts(lm)
    memo = getattr(lm, "uncompensated_nll", None)
    memo = {} if memo is None else memo
    out = []
    bs = batch_size_of(lm)
    for r in requests:
        s = json.loads(r.args[0])
        cont_ids, T = continuation_ids(tok, s["continuations"], s.get("length"))
        key = (s["prompt"], tuple(tuple(c) for c in cont_ids), bs)
        active = state is not None and state.config.active
        if active:
            nll = continuation_nll(model, tok, [s["prompt"]], cont_ids, state, bs)[0]
            if key not in memo:
                memo[key] = continuation_nll(model, tok, [s["prompt"]], cont_ids, None, bs)[0]
        else:
            nll = memo.get(key) or continuation_nll(model, tok, [s["prompt"]], cont_ids, state, bs)[0]
            memo[key] = nll
        res = {"nll": list(nll), "tokens": T, "compensation": state.config.label() if state else "none"}
        if active:
            res["nll_none"] = list(memo[key])
        out.append(json.dumps(res))
    return out
