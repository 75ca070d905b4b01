"""Teacher-forced prompt pairs: hidden-state offsets for α and continuation perplexity.

A prompt ``x`` and a variant ``x'`` are each followed by the same continuation tokens ``c``
(``measure.continuations``: ``"\\n\\n"`` + the continuation text, tokenised once, cut to
``length`` tokens), and the model reads both under its active compensation setting (the bias goes from the
continuation's queries to the prompt's keys, token 0 excepted). Forward hooks on the
decoder blocks keep the residual stream (block outputs) only at the window positions, and
the per-scene sums of Δ and Δ² are streamed, so memory does not grow with the number of
continuations. The maths (σ units, unbiased signal, noise, windows, fits) is in
``drift_eval.metrics.alpha``.

Rows are batched across continuations and variants with left padding, position ids from
the attention mask, and logits for the last position only.

With ``decompose=True`` the same runs also split every layer's offset into the residual
stream it received, the attention output read from the prompt's keys (direct), the
attention output read from the continuation's keys (relay) and the rest of the block (the
MLP), all at the window positions; this needs eager attention (the weights and value
states, read through ``capture(attention_values=...)``). The algebra is in
``tasks/drift_alpha/README.md``; the fits in ``drift_eval.metrics.alpha.decomposition``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np
import torch

from drift_eval.anatomy import decoder_blocks, output_projection, require_eager
from drift_eval.errors import DriftUsageError
from drift_eval.measure.capture import capture
from drift_eval.measure.continuations import continuation_ids, prompt_ids
from drift_eval.metrics import alpha as am


# ---------------------------------------------------------------------------- forwards
class _Windows:
    """Keeps, per layer, the block outputs at chosen columns (and optionally the sums of
    the last ``T`` positions of chosen rows, for σ): the ``block_output`` callback of
    ``capture``."""

    def __init__(self, n_layers):
        self.cols = None
        self.stat_rows = None  # rows whose last ``T`` positions feed the σ statistics
        self.T = 0
        self.windows = [None] * n_layers
        self.sums = [None] * n_layers
        self.sumsqs = [None] * n_layers

    def __call__(self, i, h):
        self.windows[i] = h[:, self.cols, :].float()
        if self.stat_rows is not None and len(self.stat_rows):
            tail = h[self.stat_rows, -self.T:, :].double()
            self.sums[i] = tail.sum((0, 1))
            self.sumsqs[i] = (tail * tail).sum((0, 1))


class _Parts:
    """Per layer, at the window columns, the four terms of the block's output (the
    ``block_input``, ``attention_output`` and ``attention_values`` callbacks of ``capture``):

    * ``residual``: the block's input (the residual stream it adds to);
    * ``direct``: ``W_O · Σ_{keys j of the prompt} A_ij v_j``, what the queries read from the
      prompt's keys, through the output projection (bias left out);
    * ``relay``: the same over the continuation's keys;
    * ``mlp``: the block's output minus its input minus the attention output: the MLP (and,
      in families with a norm after attention, what that norm changes).

    ``residual + direct + relay + mlp`` is the block output minus the output projection's
    bias, which every run shares. That rests on one structural identity of the family's
    attention block, ``direct + relay + bias = attention output``, which ``check`` verifies
    on a forward's captures (``scene_offsets`` does it on its first batch)."""

    NAMES = ("residual", "direct", "relay", "mlp")

    def __init__(self, blocks):
        self.cols = None
        self.first_key = 0  # the first continuation key column
        self.keys = 0       # keys each query attends over in the last forward
        projections = [output_projection(b.attention) for b in blocks]
        self.w_out = [p.weight for p in projections]
        self.b_out = [p.bias for p in projections]
        n = len(blocks)
        self.inp, self.attn, self.direct, self.relay = [None] * n, [None] * n, [None] * n, [None] * n

    def block_input(self, i, x):
        self.inp[i] = x[:, self.cols, :].float()

    def attention_output(self, i, out, _weights):
        self.attn[i] = out[:, self.cols, :].float()

    def attention_values(self, i, v, w):
        w = w[:, :, self.cols, :].float()  # (B, heads, positions, keys)
        v = v.float().repeat_interleave(w.shape[1] // v.shape[1], dim=1)  # key/value heads -> query heads
        k0 = self.first_key
        self.keys = w.shape[-1]
        w_out = self.w_out[i].float()
        self.direct[i] = (w[..., :k0] @ v[:, :, :k0]).transpose(1, 2).flatten(2) @ w_out.T
        self.relay[i] = (w[..., k0:] @ v[:, :, k0:]).transpose(1, 2).flatten(2) @ w_out.T

    def attention_gaps(self, dtype) -> list[tuple[float, float]]:
        """Per layer, (the largest gap between ``direct + relay + bias`` and the attention
        output, what rounding allows for it): ``identity_tolerance`` for sums over the keys
        and the hidden size, at the attention output's magnitude."""
        out = []
        for i, attn in enumerate(self.attn):
            bias = self.b_out[i]
            rebuilt = self.direct[i] + self.relay[i] + (0.0 if bias is None else bias.float())
            scale = float(attn.abs().max())
            out.append((float((rebuilt - attn).abs().max()),
                        identity_tolerance(dtype, self.keys + attn.shape[-1], scale)))
        return out

    def check(self, model) -> None:
        """One line, naming the model family and the gap, unless the parts of the last
        forward add up to each layer's attention output within rounding."""
        dtype = next(model.parameters()).dtype
        for layer, (gap, tol) in enumerate(self.attention_gaps(dtype)):
            if not gap <= tol:
                family = getattr(model.config, "model_type", type(model).__name__)
                raise DriftUsageError(
                    f"the direct/relay decomposition does not add up for the model family '{family}': at layer "
                    f"{layer} the parts differ from the attention output by {gap:.3g}, where {str(dtype)[6:]} "
                    f"rounding allows {tol:.3g}; its attention block is not the structure the decomposition "
                    f"assumes (drift_eval.measure.alpha), so measure alpha without the decomposition")

    def terms(self, out):
        """(B, layers, 4, positions, d) from the block outputs ``out`` (B, layers, positions, d)."""
        inp, attn = torch.stack(self.inp, 1), torch.stack(self.attn, 1)
        return torch.stack([inp, torch.stack(self.direct, 1), torch.stack(self.relay, 1), out - inp - attn], 2)


def identity_tolerance(dtype, n: int, scale: float) -> float:
    """What rounding allows between two computations of a sum of ``n`` products at
    magnitude ``scale``: ``eps · n · scale``, with ``eps`` that of ``dtype`` or of float32,
    in which the decomposition's parts are computed, whichever is coarser (the standard
    bound for a length-``n`` dot product; blocked summation stays well inside it)."""
    eps = max(torch.finfo(dtype).eps, torch.finfo(torch.float32).eps)
    return float(eps * n * scale)


#: the pairs (p, q), p <= q, of decomposition terms whose cross products are streamed
PAIRS = [(p, q) for p in range(len(_Parts.NAMES)) for q in range(p, len(_Parts.NAMES))]


def _padded(rows: list[list[int]], pad_id: int, device):
    """Left-padded ids, mask and position ids."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), pos.to(device)


def _takes_logits_to_keep(model) -> bool:
    """Whether the model's forward names ``logits_to_keep`` (most causal-LM families do);
    without it every position's logits are computed and the callers slice them."""
    return "logits_to_keep" in inspect.signature(type(model).forward).parameters


def _forward(model, state, ids, mask, pos, prompt_lens, T, logits_to_keep):
    """One forward under the active compensation (span = each row's prompt)."""
    if state is not None and state.config.active:
        P = torch.tensor(prompt_lens)
        state.set_rows(P, P, T)
    try:
        kw = dict(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
        if _takes_logits_to_keep(model):
            kw["logits_to_keep"] = logits_to_keep
        return model(**kw)
    finally:
        if state is not None:
            state.clear_rows()


def _pad_id(tokenizer) -> int:
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if tid is not None:
            return int(tid)
    return 0


# ---------------------------------------------------------------------------- α
@dataclass
class SceneSums:
    """Streamed sufficient statistics of one scene: σ from its base runs, and per axis the
    sums of Δ and Δ² over continuations at the window positions."""

    base_sum: torch.Tensor
    base_sumsq: torch.Tensor
    base_count: int = 0
    delta_sum: dict = field(default_factory=dict)
    delta_sumsq: dict = field(default_factory=dict)
    k: dict = field(default_factory=dict)
    part_sum: dict = field(default_factory=dict)  # axis -> (4, L, positions, d): Σ_c of each term's Δ
    part_prod: dict = field(default_factory=dict)  # axis -> (len(PAIRS), L, positions, d): Σ_c Δ_p Δ_q

    def curves(self, windows) -> dict:
        n = self.base_count
        mean = (self.base_sum / n).cpu().numpy()
        var = (self.base_sumsq / n).cpu().numpy() - mean ** 2  # (L, d)
        out = {}
        for axis in self.delta_sum:
            S, N = am.signal_noise(self.delta_sum[axis].cpu().numpy(), self.delta_sumsq[axis].cpu().numpy(),
                                   self.k[axis], var[:, None, :])
            out[axis] = {"signal": am.window_means(S, windows).tolist(),
                         "noise": am.window_means(N, windows).tolist(), "continuations": self.k[axis]}
            if axis in self.part_sum:
                out[axis]["parts"] = self._part_signals(axis, var, windows)
        return out

    def _part_signals(self, axis, var, windows) -> dict:
        """The cross signals S_pq of the decomposition terms (σ units, unbiased pair
        estimator, window means): a symmetric (4, 4, L, windows) array whose sum over p, q is
        the layer's signal."""
        sums = self.part_sum[axis].cpu().numpy()
        P = len(_Parts.NAMES)
        grid = [[None] * P for _ in range(P)]
        for j, (p, q) in enumerate(PAIRS):
            S = am.cross_signal(sums[p], sums[q], self.part_prod[axis][j].cpu().numpy(), self.k[axis], var[:, None, :])
            grid[p][q] = grid[q][p] = am.window_means(S, windows).tolist()
        return {"names": list(_Parts.NAMES), "signal": grid}


@dataclass(frozen=True)
class Settings:
    """How an α measurement runs: the compensation ``state`` (None: none), the rows of one
    forward pass (``batch_size``), the octave windows (``width``, ``first_centre``, at most
    ``max_octaves``), the bootstrap resamples over scenes, whether the direct / relay
    decomposition is measured too (``decompose``), and ``progress`` (called with the rows
    each forward pass did)."""
    state: object = None
    batch_size: int = 8
    width: int = 16
    first_centre: int = 16
    max_octaves: int = 7
    bootstrap_iters: int = 1000
    decompose: bool = False
    progress: object = None


def scene_offsets(model, tokenizer, base: str, variants: dict[str, str], cont_ids: list[list[int]],
                  windows, run: Settings = Settings()) -> dict:
    """Per axis, the window signal and noise curves (layers x windows) of one scene; with
    ``run.decompose``, also the cross signals of the decomposition terms (``parts``)."""
    state, batch_size, progress, decompose = run.state, run.batch_size, run.progress, run.decompose
    if len(cont_ids) < 2:
        raise DriftUsageError("the α metric needs at least two continuations")
    if decompose:
        require_eager(model, "the direct/relay decomposition")
    T = len(cont_ids[0])
    L = len(decoder_blocks(model))
    device = next(model.parameters()).device
    t_pos = am.window_positions(windows)
    prompts = {"base": prompt_ids(tokenizer, base)}
    prompts.update({axis: prompt_ids(tokenizer, text) for axis, text in variants.items()})
    order = ["base", *variants]
    jobs = [(ci, name) for ci in range(len(cont_ids)) for name in order]
    d = model.config.hidden_size
    sums = SceneSums(torch.zeros(L, d, dtype=torch.float64, device=device),
                     torch.zeros(L, d, dtype=torch.float64, device=device))
    for axis in variants:
        sums.delta_sum[axis] = torch.zeros(L, len(t_pos), d, dtype=torch.float64, device=device)
        sums.delta_sumsq[axis] = torch.zeros_like(sums.delta_sum[axis])
        sums.k[axis] = 0
        if decompose:
            sums.part_sum[axis] = torch.zeros(len(_Parts.NAMES), L, len(t_pos), d, dtype=torch.float64, device=device)
            sums.part_prod[axis] = torch.zeros(len(PAIRS), L, len(t_pos), d, dtype=torch.float64, device=device)
    base_windows, base_terms = {}, {}
    pad = _pad_id(tokenizer)
    cap = _Windows(L)
    parts = _Parts(decoder_blocks(model)) if decompose else None
    hooks = dict(block_input=parts.block_input, attention_output=parts.attention_output,
                 attention_values=parts.attention_values) if decompose else {}
    with capture(model, block_output=cap, **hooks), torch.no_grad():
        for b0 in range(0, len(jobs), batch_size):
            batch = jobs[b0:b0 + batch_size]
            rows = [prompts[name] + cont_ids[ci] for ci, name in batch]
            ids, mask, pos = _padded(rows, pad, device)
            width = ids.shape[1]
            cap.T = T
            cap.cols = torch.as_tensor(width - T + t_pos - 1, device=device)
            if parts is not None:
                parts.cols, parts.first_key = cap.cols, width - T
            cap.stat_rows = torch.as_tensor([i for i, (_, n) in enumerate(batch) if n == "base"],
                                            dtype=torch.long, device=device)
            _forward(model, state, ids, mask, pos, [len(prompts[n]) for _, n in batch], T, 1)
            if parts is not None and b0 == 0:
                parts.check(model)  # the identity the decomposition rests on, before anything is summed
            win = torch.stack(cap.windows, 1)  # (B, L, positions, d)
            terms = parts.terms(win) if parts is not None else None  # (B, L, 4, positions, d)
            if len(cap.stat_rows):
                sums.base_sum += torch.stack(cap.sums)
                sums.base_sumsq += torch.stack(cap.sumsqs)
                sums.base_count += len(cap.stat_rows) * T
            for i, (ci, name) in enumerate(batch):
                if name == "base":
                    base_windows[ci] = win[i]
                    if terms is not None:
                        base_terms[ci] = terms[i]
            for i, (ci, name) in enumerate(batch):
                if name != "base":
                    delta = (win[i] - base_windows[ci]).double()
                    sums.delta_sum[name] += delta
                    sums.delta_sumsq[name] += delta * delta
                    sums.k[name] += 1
                    if terms is not None:
                        dt = (terms[i] - base_terms[ci]).double().transpose(0, 1)  # (4, L, positions, d)
                        sums.part_sum[name] += dt
                        for j, (p, q) in enumerate(PAIRS):
                            sums.part_prod[name][j] += dt[p] * dt[q]
                    if all(sums.k[a] > ci for a in variants):
                        base_windows.pop(ci, None)
                        base_terms.pop(ci, None)
            if progress:
                progress(len(batch))
    return sums.curves(windows)


def measure(model, tokenizer, scenes: list[dict], continuations: list[str], length: int | None = None,
            run: Settings = Settings()) -> dict:
    """α and β per layer and axis for ``scenes`` (dicts: ``base`` and its variants by axis
    name, measured in that order; a variant without text is left out) over shared
    ``continuations``; see ``drift_eval.metrics.alpha.summarise``. With
    ``run.decompose`` each axis also gets ``decomposition`` (``metrics.alpha.decomposition``)."""
    state, width, first_centre, max_octaves = run.state, run.width, run.first_centre, run.max_octaves
    bootstrap_iters, decompose = run.bootstrap_iters, run.decompose
    if decompose:
        require_eager(model, "the direct/relay decomposition")
    cont_ids, T = continuation_ids(tokenizer, continuations, length)
    windows = am.octave_windows(T, width, first_centre, max_octaves)
    if len(windows) < 3:
        raise DriftUsageError(f"continuations of {T} tokens hold only {len(windows)} window(s); the fit "
                              f"needs 3 (at least {am.length_for(3, width, first_centre)} tokens)")
    per_axis: dict[str, list] = {}
    for scene in scenes:
        variants = {axis: text for axis, text in scene.items() if axis != "base" and text}
        curves = scene_offsets(model, tokenizer, scene["base"], variants, cont_ids, windows, run)
        for axis, c in curves.items():
            per_axis.setdefault(axis, []).append(c)
    centres = [w.centre for w in windows]
    out = {"length": T, "continuations": len(cont_ids), "windows": [w.as_list() for w in windows],
           "compensation": state.config.label() if state is not None else "none", "axes": {}}
    for axis, cs in per_axis.items():
        S = np.array([c["signal"] for c in cs])
        N = np.array([c["noise"] for c in cs])
        out["axes"][axis] = am.summarise(S, N, centres, iters=bootstrap_iters)
        if decompose:
            out["axes"][axis]["decomposition"] = am.decomposition(
                [c["parts"]["signal"] for c in cs], S, centres, cs[0]["parts"]["names"], iters=bootstrap_iters)
    return out


# ---------------------------------------------------------------------------- perplexity
def continuation_nll(model, tokenizer, prompts: list[str], cont_ids: list[list[int]], state=None,
                     batch_size: int = 4) -> list[list[float]]:
    """Summed negative log-likelihood of each continuation after each prompt (nats), under
    the active compensation: ``[prompt][continuation]``."""
    T = len(cont_ids[0])
    device = next(model.parameters()).device
    pad = _pad_id(tokenizer)
    jobs = [(pi, ci) for pi in range(len(prompts)) for ci in range(len(cont_ids))]
    p_ids = [prompt_ids(tokenizer, p) for p in prompts]
    out = [[0.0] * len(cont_ids) for _ in prompts]
    with torch.no_grad():
        for b0 in range(0, len(jobs), batch_size):
            batch = jobs[b0:b0 + batch_size]
            rows = [p_ids[pi] + cont_ids[ci] for pi, ci in batch]
            ids, mask, pos = _padded(rows, pad, device)
            res = _forward(model, state, ids, mask, pos, [len(p_ids[pi]) for pi, _ in batch], T, T + 1)
            logits = res.logits[:, -(T + 1):-1, :]
            target = ids[:, -T:]
            for i, (pi, ci) in enumerate(batch):
                nll = torch.nn.functional.cross_entropy(logits[i].float(), target[i], reduction="sum")
                out[pi][ci] = float(nll)
    return out
