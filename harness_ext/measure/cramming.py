"""Cramming: how long a text ``m`` trainable input vectors make a frozen model produce.

For a target string of ``n`` tokens ``t_1 .. t_n`` the model reads a fixed *anchor* token
(the tokenizer's BOS token, else its EOS token; ``anchor=none`` or no tokenizer: nothing),
then ``m`` soft vectors, then the embeddings of ``t_1 .. t_{n-1}``. **The first target
token is predicted at the last soft vector**, token ``k`` at the position of ``t_{k-1}``:
all ``n`` tokens, the first included, must come from the soft vectors (the anchor is the
same for every string and carries nothing). The anchor is there because trained models
treat position 0 as an attention sink whose output hardly depends on its input: without
it a single soft vector at position 0 often cannot even produce one chosen token. A
string is *reconstructed* when the argmax of every one of the ``n`` predictions equals
its target token (teacher forcing; exactly what greedy decoding from the soft vectors
produces for ``n`` steps).

The vectors start as ``N(0, 1) * std(embedding table)`` and are optimised with AdamW
(lr 1e-2, betas (0.9, 0.9), weight decay 0.01) on the mean cross-entropy of the ``n``
predictions, the model frozen. All strings of one length are crammed together: one forward
pass per step for the batch, each row with its own vectors (the loss is a sum of per-row
losses and AdamW acts per element, so rows do not interact). A row stops at the first
exact reconstruction (checked on the forward pass of every step, before the update), when
its loss has not improved (fallen by a relative ``1e-3`` or gained a correct token) for
``patience`` steps, or after ``max_steps`` updates; stopped rows leave the batch.

``accessibility`` sweeps lengths and ``m``; ``hidden_radius`` measures ``r``, the largest
L-infinity norm of last-layer hidden states over random-token inputs, for the bound in
``drift_eval.metrics.accessibility``. ``run`` does everything for a model and tokenizer and
is what the CLI, the ``accessibility`` lm-eval task (served by ``hf-drift``) and the
benchmark call.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from drift_eval.errors import DriftUsageError
from drift_eval.files import prose_text
from drift_eval.measure.position_bias import fixed_length_sequences
from drift_eval.metrics import accessibility as acc

LR = 1e-2
BETAS = (0.9, 0.9)
WEIGHT_DECAY = 0.01
IMPROVEMENT = 1e-3  # relative fall of a row's loss that counts as progress for ``patience``


@dataclass
class CramResult:
    """Per row: reconstructed or not, updates taken, best number of correct tokens, and why
    it stopped (``exact``, ``patience`` or ``step_cap``)."""
    success: list[bool]
    steps: list[int]
    best_correct: list[int]
    stop: list[str]
    length: int
    m: int

    @property
    def accessibility(self) -> float:
        return float(np.mean(self.success)) if self.success else 0.0


@dataclass(frozen=True)
class Schedule:
    """How ``cram`` optimises: at most ``max_steps`` updates, a row stopped after ``patience``
    steps without improvement, the vectors drawn from ``seed``, AdamW learning rate ``lr``."""
    max_steps: int = 200
    patience: int = 50
    seed: int = 0
    lr: float = LR


def _rows_seed(seed: int, m: int, n: int) -> int:
    return (int(seed) * 1_000_003 + int(m) * 10_007 + int(n)) % (2 ** 63)


def cram(model, targets: torch.Tensor, m: int, schedule: Schedule = Schedule(), anchor: int | None = None,
         return_vectors: bool = False):
    """Cram each row of ``targets`` (rows x n token ids) into its own ``m`` soft vectors,
    optimised as ``schedule`` says and read after the fixed token ``anchor`` when one is
    given (position 0). Returns a ``CramResult``; with ``return_vectors`` also a (rows, m, d)
    float32 tensor holding, for every reconstructed row, the vectors that reconstructed it."""
    max_steps, patience, seed, lr = schedule.max_steps, schedule.patience, schedule.seed, schedule.lr
    if targets.ndim != 2 or targets.shape[1] < 1:
        raise ValueError("targets must be (rows, n) with n >= 1")
    if m < 1 or max_steps < 0 or patience < 1:
        raise ValueError(f"need m >= 1, max_steps >= 0, patience >= 1; got {m}, {max_steps}, {patience}")
    rows, n = targets.shape
    emb = model.get_input_embeddings()
    device = emb.weight.device
    dtype = emb.weight.dtype
    targets = targets.to(device)
    g = torch.Generator().manual_seed(_rows_seed(seed, m, n))
    std = emb.weight.detach().float().std().item()
    mem = (torch.randn(rows, m, emb.weight.shape[1], generator=g) * std).to(device).requires_grad_(True)
    opt = torch.optim.AdamW([mem], lr=lr, betas=BETAS, weight_decay=WEIGHT_DECAY)
    with torch.no_grad():
        prefix = emb(targets[:, :-1])  # (rows, n-1, d): teacher-forced target tokens 1..n-1
        head = emb(torch.tensor([[anchor]], device=device)) if anchor is not None else prefix[:, :0]
    a = head.shape[1]  # 0 or 1 positions before the soft vectors

    success = [False] * rows
    steps = [0] * rows
    best_correct = [0] * rows
    stop = ["step_cap"] * rows
    found = torch.zeros(rows, m, emb.weight.shape[1])
    best_loss = torch.full((rows,), float("inf"))
    since = torch.zeros(rows, dtype=torch.long)
    active = torch.arange(rows)
    was_training = model.training
    flags = [p.requires_grad for p in model.parameters()]
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        for step in range(max_steps + 1):
            idx = active.to(device)
            x = torch.cat([head[:1].expand(len(idx), a, -1), mem[idx].to(dtype), prefix[idx]], dim=1)
            logits = model(inputs_embeds=x, use_cache=False).logits[:, a + m - 1:].float()
            tgt = targets[idx]
            with torch.no_grad():
                correct = (logits.argmax(-1) == tgt).sum(1).cpu()
            loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt, reduction="none").mean(1)
            lc = loss.detach().cpu()
            keep = []
            for j, row in enumerate(active.tolist()):
                steps[row] = step
                c = int(correct[j])
                improved = c > best_correct[row] or lc[j] < best_loss[row] * (1 - IMPROVEMENT)
                best_correct[row] = max(best_correct[row], c)
                best_loss[row] = min(best_loss[row], lc[j])
                since[row] = 0 if improved else since[row] + 1
                if c == n:
                    success[row], stop[row] = True, "exact"
                    found[row] = mem[row].detach().cpu()
                elif since[row] >= patience:
                    stop[row] = "patience"
                elif step < max_steps:
                    keep.append(j)
            if not keep:
                break
            opt.zero_grad(set_to_none=True)
            loss[keep].sum().backward()
            opt.step()
            active = active[keep]
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
        model.train(was_training)
    result = CramResult(success=success, steps=steps, best_correct=best_correct, stop=stop, length=n, m=m)
    return (result, found) if return_vectors else result


def accessibility(model, targets_by_length: dict[int, torch.Tensor], ms, max_steps: int = 200,
                  patience: int = 50, seed: int = 0, anchor: int | None = None,
                  progress=None) -> dict[int, dict[int, CramResult]]:
    """``{m: {n: CramResult}}`` for every ``m`` and every length (one batch per length)."""
    schedule = Schedule(max_steps=max_steps, patience=patience, seed=seed)
    out: dict[int, dict[int, CramResult]] = {}
    for m in ms:
        out[int(m)] = {}
        for n in sorted(targets_by_length):
            res = cram(model, targets_by_length[n], int(m), schedule, anchor=anchor)
            out[int(m)][int(n)] = res
            if progress is not None:
                progress(res)
    return out


@torch.no_grad()
def widen_init(model, std: float = 0.3, seed: int = 0):
    """Re-draw every weight matrix (embeddings, attention, MLP, output) of a random-init
    model from ``N(0, std^2)``; norms and biases are kept. At the usual init scale (0.02) a
    small random model's later positions hardly depend on the soft vectors and almost
    nothing can be crammed; at ``std = 0.3`` the capacity grows with ``m``. For checking the
    measurement on random-init models; returns the model."""
    g = torch.Generator().manual_seed(int(seed))
    for p in model.parameters():
        if p.ndim == 2:
            p.copy_((torch.randn(p.shape, generator=g) * std).to(p.dtype))
    return model


@torch.no_grad()
def hidden_radius(model, sequences: int = 8, length: int = 64, seed: int = 0, vocab: int | None = None) -> float:
    """``r``: the largest absolute coordinate (L-infinity norm) of the last-layer hidden
    states (what the output projection reads) over ``sequences`` random-token inputs."""
    emb = model.get_input_embeddings()
    vocab = vocab or emb.weight.shape[0]
    g = torch.Generator().manual_seed(int(seed))
    ids = torch.randint(0, vocab, (sequences, length), generator=g).to(emb.weight.device)
    out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    return float(out.hidden_states[-1].float().abs().max())


def anchor_token(tokenizer) -> int | None:
    """The fixed token read before the soft vectors: the tokenizer's BOS token, else its EOS
    token (the document separator of models trained without BOS), else none."""
    if tokenizer is None:
        return None
    for tid in (getattr(tokenizer, "bos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(tid, int):
            return tid
    return None


def text_targets(tokenizer, text: str, lengths, strings: int) -> dict[int, torch.Tensor]:
    """``strings`` consecutive non-overlapping passages of ``max(lengths)`` tokens of
    ``text``; the targets of length ``n`` are the first ``n`` tokens of each passage."""
    passages = fixed_length_sequences(tokenizer, text, max(lengths), strings)
    return {int(n): passages[:, :n].clone() for n in lengths}


def random_targets(vocab: int, lengths, strings: int, seed: int = 0, exclude=()) -> dict[int, torch.Tensor]:
    """Uniformly random token ids (``exclude``, e.g. special tokens, left out); the targets of
    length ``n`` are the first ``n`` tokens of ``strings`` random rows."""
    allowed = torch.tensor(sorted(set(range(vocab)) - set(exclude)))
    g = torch.Generator().manual_seed(int(seed) + 7919)
    rows = allowed[torch.randint(0, len(allowed), (strings, max(lengths)), generator=g)]
    return {int(n): rows[:, :n].clone() for n in lengths}


@dataclass
class Settings:
    """What a run measures. ``targets``: ``text`` (passages of ``text``, by default the
    shipped prose) or ``random`` (uniform token ids, special tokens excluded)."""
    ms: list[int] = field(default_factory=lambda: [1, 2, 4])
    lengths: list[int] = field(default_factory=lambda: [2, 4, 8, 16])
    strings: int = 4
    max_steps: int = 100
    patience: int = 30
    seed: int = 0
    targets: str = "text"
    eps_ratio: float = 2048.0
    eps: float | None = None
    radius_sequences: int = 8
    radius_length: int = 64
    anchor: str = "bos"

    @classmethod
    def from_options(cls, **options) -> "Settings":
        """Validated settings from CLI or ``--metadata`` values (lists as lists or
        comma-separated strings); bad values raise ``DriftUsageError``."""
        s = cls()
        unknown = sorted(set(options) - set(asdict(s)))
        if unknown:
            raise DriftUsageError(f"unknown accessibility option(s) {', '.join(unknown)}: "
                                  f"use {', '.join(asdict(s))}")
        for key, value in options.items():
            if value is None:
                continue
            try:
                if key in ("ms", "lengths"):
                    items = value.split(",") if isinstance(value, str) else list(value)
                    value = sorted({int(str(v).strip()) for v in items if str(v).strip()})
                elif key in ("eps_ratio", "eps"):
                    value = float(value)
                elif key not in ("targets", "anchor"):
                    value = int(value)
            except (TypeError, ValueError):
                raise DriftUsageError(f"accessibility option {key}={value!r} is not a valid number "
                                      f"(lists: comma-separated integers such as 1,2,4)") from None
            setattr(s, key, value)
        if not s.ms or min(s.ms) < 1:
            raise DriftUsageError(f"ms must be integers >= 1 (soft vectors), got {s.ms}")
        if not s.lengths or min(s.lengths) < 1:
            raise DriftUsageError(f"lengths must be integers >= 1 (target tokens), got {s.lengths}")
        for key in ("strings", "max_steps", "patience", "radius_sequences", "radius_length"):
            if getattr(s, key) < 1:
                raise DriftUsageError(f"{key} must be >= 1, got {getattr(s, key)}")
        if s.targets not in ("text", "random"):
            raise DriftUsageError(f"unknown targets '{s.targets}': use text or random")
        if s.anchor not in ("bos", "none"):
            raise DriftUsageError(f"unknown anchor '{s.anchor}': use bos or none")
        if not s.eps_ratio > 0 or not math.isfinite(s.eps_ratio) or (
                s.eps is not None and not (s.eps > 0 and math.isfinite(s.eps))):
            raise DriftUsageError("eps_ratio and eps must be finite positive numbers")
        return s


def run(model, tokenizer, settings: Settings, text: str | None = None, progress=None) -> dict:
    """The whole measurement: targets, cramming sweep, radius, bound and fits (JSON-ready)."""
    vocab = model.get_output_embeddings().weight.shape[0]
    if settings.targets == "random":
        exclude = getattr(tokenizer, "all_special_ids", []) if tokenizer is not None else []
        targets = random_targets(vocab, settings.lengths, settings.strings, settings.seed, exclude)
    else:
        if tokenizer is None:
            raise DriftUsageError("targets=text needs a tokenizer: give one or use targets=random")
        if text is None:
            text = prose_text()
        targets = text_targets(tokenizer, text, settings.lengths, settings.strings)
    anchor = anchor_token(tokenizer) if settings.anchor == "bos" else None
    if anchor is not None and anchor >= vocab:
        anchor = None
    results = accessibility(model, targets, settings.ms, settings.max_steps, settings.patience,
                            settings.seed, anchor=anchor, progress=progress)
    r = hidden_radius(model, settings.radius_sequences, settings.radius_length, settings.seed)
    d = model.get_input_embeddings().weight.shape[1]
    bound = acc.capacity_bound(d, vocab, r=r, eps=settings.eps, eps_ratio=settings.eps_ratio)
    table = {m: {n: res.accessibility for n, res in by_n.items()} for m, by_n in results.items()}
    summary = acc.summarise(table, bound)
    return {
        "settings": asdict(settings),
        "anchor_token": anchor,
        "first_token": "predicted at the last soft vector"
                       + (f" (token {anchor} at position 0, before the soft vectors)" if anchor is not None
                          else " (nothing before the soft vectors)"),
        "accessibility": {str(m): {str(n): v for n, v in by_n.items()} for m, by_n in table.items()},
        "rows": {str(m): {str(n): asdict(res) for n, res in by_n.items()} for m, by_n in results.items()},
        "n50": {str(m): v for m, v in summary["n50"].items()},
        "line": summary["line"],
        "fitted_m": summary["fitted_m"],
        "bound": summary["bound"],
        "slope_ratio": summary["slope_ratio"],
    }


def serve(lm, requests, disable_tqdm: bool = False) -> list[str]:
    """Serve ``accessibility`` requests with an ``HFLM`` (``hf-drift``): each request's
    ``arguments[0]`` is the JSON of the settings; the answer is the JSON of ``run``."""
    out = []
    for r in requests:
        settings = Settings.from_options(**json.loads(r.args[0]))
        out.append(json.dumps(run(lm.model, lm.tokenizer, settings)))
    return out
