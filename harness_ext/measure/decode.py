"""Free generation from prompt pairs: what the trajectories still carry of the prompt.

For one scene, every prompt (the base and each requested variant) starts ``samples``
sampled generations of ``generation_length`` tokens (the prompt as plain text, then
``"\n\n"``, as α's rows hold them; end-of-sequence suppressed, so every trajectory reaches
its length; temperature only, no top-k / top-p; under the run's compensation with the
prompt as the span). Each batch holds copies of one prompt and is seeded from (seed, scene,
prompt, batch), so a prompt's trajectories do not depend on which other prompts were asked
for. While a batch generates, ``capture`` keeps the residual stream (every block's output)
at the generated tokens ``t = 16, 32, …`` only, and those go to a temporary file (``Store``),
so memory holds one batch's generation, the token ids, and one layer's probe inputs
(``t × 2·samples × d``) at a time. The generation runs one token past its length so that
the hidden state at ``t = generation_length`` (which reads that token) exists; the extra
token is not part of the text.

Then, per variant: a cross-validated probe per layer and t (hidden states), a bag of the
generated tokens per t (text), and the fastText language of each trajectory per 128-token
segment (``drift_eval.metrics.decode``, ``drift_eval.metrics.langid``).
"""
from __future__ import annotations

import json
import os
import tempfile
import zlib
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from drift_eval.anatomy import decoder_blocks
from drift_eval.errors import DriftUsageError
from drift_eval.files import read_json, write_json_atomic
from drift_eval.measure.alpha_serving import batch_size_of
from drift_eval.measure.capture import capture
from drift_eval.measure.continuations import SEPARATOR, prompt_ids
from drift_eval.metrics import decode as dm
from drift_eval.metrics import langid, lid_model

BASE = "base"


@dataclass(frozen=True)
class Settings:
    """How trajectories are sampled and read (everything recorded in the answers)."""
    samples: int = 32  # trajectories per prompt
    generation_length: int = 512  # generated tokens per trajectory
    temperature: float = 1.0
    seed: int = 0
    folds: int = 5
    text_window: int = 64  # tokens up to t in the bag of tokens; 0: all tokens up to t
    first_centre: int = 16
    segment: int = 128  # metric tokens per language segment

    @classmethod
    def from_options(cls, **options) -> "Settings":
        """Checked settings; one ``DriftUsageError`` line for the first bad option."""
        known = {f: type(getattr(cls, f)) for f in cls.__dataclass_fields__}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise DriftUsageError(f"unknown decode option(s): {', '.join(unknown)}; known: {', '.join(known)}")
        vals = {}
        for k, v in options.items():
            typ = known[k]
            try:
                if isinstance(v, bool):
                    raise ValueError
                vals[k] = typ(v)
                if typ is int and float(v) != vals[k]:
                    raise ValueError
            except (TypeError, ValueError):
                raise DriftUsageError(f"{k} must be {'an integer' if typ is int else 'a number'}, got {v!r}") from None
        s = cls(**vals)
        if s.folds < 2:
            raise DriftUsageError(f"folds must be at least 2, got {s.folds}")
        if s.samples < s.folds:
            raise DriftUsageError(f"samples must be at least folds ({s.folds}) per prompt, got {s.samples}")
        if s.first_centre < 1 or s.generation_length < s.first_centre:
            raise DriftUsageError(f"generation_length must be at least first_centre ({s.first_centre}) tokens, got {s.generation_length}")
        if not s.temperature > 0:
            raise DriftUsageError(f"temperature must be above 0 (sampling), got {s.temperature}")
        if s.text_window < 0 or s.segment < 1:
            raise DriftUsageError("text_window must be >= 0 and segment >= 1")
        return s

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def _seed(seed: int, scene: str, prompt: str, batch: int) -> int:
    return zlib.crc32(f"{seed}:{scene}:{prompt}:{batch}".encode())


class _Centres:
    """The ``block_output`` callback: counts the forward steps of ``generate`` (step 0 reads
    the prompt, step s the s-th generated token) and keeps each layer's last position at the
    steps in ``centres``."""

    def __init__(self, n_layers: int, centres: list[int]):
        self.index = {t: j for j, t in enumerate(centres)}
        self.step = -1
        self.kept = None
        self.n_layers = n_layers

    def start(self, batch: int, d: int):
        self.step = -1
        self.kept = torch.zeros(batch, self.n_layers, len(self.index), d)

    def __call__(self, layer, h):
        if layer == 0:
            self.step += 1
        j = self.index.get(self.step)
        if j is not None:
            self.kept[:, layer, j] = h[:, -1, :].float().cpu()


class Store:
    """The hidden states at the centres, ``(prompts, layers, t, samples, d)`` float32, in an
    unnamed temporary file written and read with plain file I/O (not mapped, so nothing of
    it stays resident): each batch writes its samples, each probe reads one prompt's layer."""

    def __init__(self, prompts: int, layers: int, centres: int, samples: int, d: int):
        self.shape = (prompts, layers, centres, samples, d)
        self._fh = tempfile.TemporaryFile(prefix="drift-decode-")
        self._fh.truncate(int(np.prod(self.shape)) * 4)

    def _offset(self, prompt, layer, t=0, sample=0) -> int:
        _, L, W, n, d = self.shape
        return ((((prompt * L + layer) * W + t) * n + sample) * d) * 4

    def write(self, prompt: int, first: int, block: np.ndarray) -> None:
        """``block``: (layers, t, batch, d) for samples ``first .. first + batch``."""
        block = np.ascontiguousarray(block, dtype=np.float32)
        for layer in range(block.shape[0]):
            for t in range(block.shape[1]):
                os.pwrite(self._fh.fileno(), block[layer, t].tobytes(), self._offset(prompt, layer, t, first))

    def read(self, prompt: int, layer: int) -> np.ndarray:
        """(t, samples, d) of one prompt and layer."""
        _, _, W, n, d = self.shape
        raw = os.pread(self._fh.fileno(), W * n * d * 4, self._offset(prompt, layer))
        return np.frombuffer(raw, dtype=np.float32).reshape(W, n, d)

    def close(self) -> None:
        self._fh.close()


@dataclass(frozen=True)
class Runtime:
    """How the passes of a decodability run go, which its results do not record: the
    compensation ``state`` (None: none), the rows of one pass (``batch_size``) and
    ``progress`` (called with the rows each pass did)."""
    state: object = None
    batch_size: int = 32
    progress: object = None


@dataclass(frozen=True)
class Record:
    """What ``run`` does with its results: writes them to ``path`` after each scene (None:
    nowhere), adds the keys of ``label`` (such as the model's name) to their head, and calls
    ``log`` (if given) with each finished scene's id and the summary so far."""
    path: str | None = None
    label: dict | None = None
    log: object = None


def generate(model, tokenizer, scene: str, prompts: dict[str, str], settings: Settings, store: Store,
             runtime: Runtime = Runtime()) -> dict:
    """Sample ``settings.samples`` trajectories per prompt; hidden states at the centres go
    to ``store``. Returns ``{name: (samples, length) token ids}``."""
    from transformers import GenerationConfig  # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml

    state, batch_size, progress = runtime.state, runtime.batch_size, runtime.progress

    device = next(model.parameters()).device
    L = len(decoder_blocks(model))
    centres = dm.centres(settings.generation_length, settings.first_centre)
    eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None \
        else tokenizer.eos_token_id
    pad = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if t is not None))
    gen = GenerationConfig(do_sample=True, temperature=settings.temperature, top_k=0, top_p=1.0,
                           max_new_tokens=settings.generation_length + 1, min_new_tokens=settings.generation_length + 1,
                           eos_token_id=eos, pad_token_id=pad)
    keep = _Centres(L, centres)
    separator = tokenizer(SEPARATOR, add_special_tokens=False)["input_ids"]
    out = {}
    with capture(model, block_output=keep), torch.no_grad():
        for pi, (name, text) in enumerate(prompts.items()):
            span = len(prompt_ids(tokenizer, text))  # the prompt, as α's rows hold it, then the separator
            ids = prompt_ids(tokenizer, text) + list(separator)
            tokens = np.zeros((settings.samples, settings.generation_length), dtype=np.int64)
            for b, k0 in enumerate(range(0, settings.samples, batch_size)):
                k1 = min(settings.samples, k0 + batch_size)
                rows = torch.tensor([ids] * (k1 - k0), device=device)
                keep.start(k1 - k0, model.config.hidden_size)
                if state is not None and state.config.active:
                    state.set_rows([span] * (k1 - k0), [len(ids)] * (k1 - k0), settings.generation_length + 1)
                try:
                    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                        torch.manual_seed(_seed(settings.seed, scene, name, b))
                        seqs = model.generate(rows, attention_mask=torch.ones_like(rows), generation_config=gen)
                finally:
                    if state is not None:
                        state.clear_rows()
                tokens[k0:k1] = seqs[:, len(ids):len(ids) + settings.generation_length].cpu().numpy()
                store.write(pi, k0, keep.kept.permute(1, 2, 0, 3).numpy())
                if progress:
                    progress(k1 - k0)
            out[name] = tokens
    return out


def _languages(tokenizer, prompt: str, tokens: np.ndarray, segment: int) -> dict:
    texts = [tokenizer.decode(row, skip_special_tokens=True) for row in tokens]
    pieces = [langid.segments(t, segment) for t in texts]
    flat = lid_model.identify_many([p for ps in pieces for p in ps])
    labels, i = [], 0
    for ps in pieces:
        labels.append([x.lang for x in flat[i:i + len(ps)]])
        i += len(ps)
    majority = [dm.majority_language(lab) for lab in labels]
    lang = lid_model.identify(prompt).lang
    return {"prompt": lang, "segments": labels, "majority": majority, **dm.switches(lang, majority),
            "excerpt": texts[0][:300] if texts else ""}


def scene(model, tokenizer, scene_id: str, base: str, variants: dict[str, str], settings: Settings,
          runtime: Runtime = Runtime()) -> dict:
    """Per variant axis, the answer for one scene: correct held-out predictions per layer
    and t (``hidden_correct``) and per t (``text_correct``) out of ``predictions``, and the
    language of every trajectory of both prompts."""
    centres = dm.centres(settings.generation_length, settings.first_centre)
    prompts = {BASE: base, **variants}
    L, d = len(decoder_blocks(model)), model.config.hidden_size
    n = settings.samples
    store = Store(len(prompts), L, len(centres), n, d)
    try:
        tokens = generate(model, tokenizer, scene_id, prompts, settings, store, runtime)
        y = np.r_[np.zeros(n, int), np.ones(n, int)]
        langs = {name: _languages(tokenizer, text, tokens[name], settings.segment) for name, text in prompts.items()}
        out = {}
        for vi, axis in enumerate(variants, start=1):
            hidden = np.zeros((L, len(centres)), dtype=np.int64)
            for layer in range(L):  # one layer's cells at a time: 2n × d per cell
                cells = np.concatenate([store.read(0, layer), store.read(vi, layer)], axis=1)  # (t, 2n, d)
                hidden[layer] = dm.probe_correct(cells, y, settings.folds, settings.seed)
            text = []
            for t in centres:
                lo = 0 if settings.text_window == 0 else max(0, t - settings.text_window)
                bags = [list(r[lo:t]) for r in tokens[BASE]] + [list(r[lo:t]) for r in tokens[axis]]
                text.append(int(dm.text_correct(bags, y, settings.folds, settings.seed)))
            out[axis] = {"scene": scene_id, "axis": axis, "centres": centres, "layers": L, "predictions": 2 * n,
                         "hidden_correct": hidden.tolist(), "text_correct": text,
                         "languages": {"base": langs[BASE], "variant": langs[axis]},
                         "probe": dm.PROBE, "text_probe": dm.TEXT_PROBE, "settings": settings.as_dict(),
                         "compensation": runtime.state.config.label() if runtime.state is not None else "none"}
    finally:
        store.close()
    return out


# ---------------------------------------------------------------------------- lm-eval
def serve(lm, requests, disable_tqdm: bool = False) -> list[str]:
    """``free_generation`` requests: ``arguments[0]`` is JSON ``{"scene", "axis", "base",
    "variant", "settings": {...}}``. Requests of one scene with the same settings share the
    base prompt's trajectories. The answer is the scene's JSON for the request's axis."""
    model, tok, state = lm.model, lm.tokenizer, getattr(lm, "drift_state", None)
    specs = [json.loads(r.args[0]) for r in requests]
    groups: dict = {}
    for i, s in enumerate(specs):
        settings = Settings.from_options(**s.get("settings", {}))  # every request checked before any work
        groups.setdefault((s["scene"], s["base"], settings), []).append(i)
    total = sum(g[2].samples * (1 + len(idx)) for g, idx in groups.items())
    bar = tqdm(total=total, desc=f"Sampling trajectories of {len(groups)} scenes", unit="trajectory",
               disable=disable_tqdm or getattr(lm, "rank", 0) != 0)
    out = [None] * len(specs)
    try:
        for (scene_id, base, settings), idx in groups.items():
            variants = {specs[i]["axis"]: specs[i]["variant"] for i in idx}
            if len(variants) != len(idx):
                raise DriftUsageError("two requests of one scene ask for the same axis")
            answers = scene(model, tok, scene_id, base, variants, settings,
                            Runtime(state, batch_size_of(lm), bar.update))
            for i in idx:
                out[i] = json.dumps(answers[specs[i]["axis"]], ensure_ascii=False)
    finally:
        bar.close()
    return out


# ---------------------------------------------------------------------------- command line
def run(model, tokenizer, scenes: list[dict], axes: list[str], settings: Settings, runtime: Runtime = Runtime(),
        record: Record = Record()) -> dict:
    """Every scene's answers and the per-axis summaries. With ``record.path``, each finished
    scene is written there at once (atomically) and a rerun with the same settings skips the
    scenes already in it, so a long run can be stopped and resumed."""
    path, label, log = record.path, record.label, record.log
    head = {"settings": settings.as_dict(), "axes": list(axes), **(label or {}),
            "compensation": runtime.state.config.label() if runtime.state is not None else "none"}
    res = dict(head, scenes={})
    if path and os.path.isfile(path):
        old = read_json(path, "decode results file")
        if not isinstance(old, dict) or {k: old.get(k) for k in head} != head:
            raise DriftUsageError(f"{path} holds a run with other settings; give another --output or remove it")
        res["scenes"] = old.get("scenes") or {}
    for s in scenes:
        if s["id"] in res["scenes"]:
            continue
        res["scenes"][s["id"]] = scene(model, tokenizer, s["id"], s["base"], {a: s[a] for a in axes}, settings,
                                       runtime)
        res["summary"] = summarise(res, [x["id"] for x in scenes])
        if path:
            write_json_atomic(path, res)
        if log:
            log(s["id"], res["summary"])
    res["summary"] = summarise(res, [x["id"] for x in scenes])
    return res


def summarise(res: dict, scene_ids: list[str]) -> dict:
    """Per axis, ``drift_eval.metrics.decode.summarise`` over the listed scenes present."""
    done = [res["scenes"][i] for i in scene_ids if i in res["scenes"]]
    return {axis: dm.summarise([s[axis] for s in done]) for axis in res["axes"]} if done else {}
