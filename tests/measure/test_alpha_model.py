"""The teacher-forced α measurement and continuation perplexity on real (tiny) models."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from drift_eval.anatomy import decoder_blocks

from support.models import CONTS, SCENE, TOK, forward_sums, rounding
from support.places import BENCHMARKS

from drift_eval.compensation import bias as comp
from drift_eval.errors import DriftUsageError
from drift_eval.measure import alpha, alpha_serving, continuations
from drift_eval.metrics import alpha as am
from drift_eval.plugin.local_models import save_untrained_twin, untrained_twin
from drift_eval.settings import CompensationConfig
from drift_eval.taskdata.alpha import read_continuations as read_bundled




def _reference(model, base, variant, cont_ids, windows, state=None):
    """Signal and noise computed the slow way: every row alone, full hidden states kept."""
    layers = [b.module for b in decoder_blocks(model)]
    t_pos = am.window_positions(windows)
    T = len(cont_ids[0])

    def run(prompt):
        ids = continuations.prompt_ids(TOK, prompt)
        outs = []
        for c in cont_ids:
            got = []
            hs = [layer.register_forward_hook(lambda m, a, o: got.append((o[0] if isinstance(o, tuple) else o)[0]))
                  for layer in layers]
            if state is not None and state.config.active:
                state.set_rows([len(ids)], [len(ids)], T)
            with torch.no_grad():
                model(input_ids=torch.tensor([ids + c]))
            if state is not None:
                state.clear_rows()
            for h in hs:
                h.remove()
            outs.append(torch.stack(got)[:, -T:, :].double())  # (L, T, d)
        return torch.stack(outs)  # (K, L, T, d)

    hb, hv = run(base), run(variant)
    var = hb.reshape(-1, *hb.shape[1:]).permute(1, 0, 2, 3).reshape(hb.shape[1], -1, hb.shape[-1]).var(1, unbiased=False)
    delta = (hv - hb)[:, :, t_pos - 1, :] / var.sqrt()[None, :, None, :]
    K = delta.shape[0]
    mean = delta.mean(0)
    pairs = sum((delta[i] * delta[j]).sum(-1) for i in range(K) for j in range(K) if i != j) / (K * (K - 1))
    noise = ((delta - mean) ** 2).sum(0) / (K - 1)
    d = delta.shape[-1]
    return (am.window_means((pairs / d).numpy(), windows), am.window_means(noise.sum(-1).numpy() / d, windows))


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_streamed_offsets_match_the_slow_reference(tiny_model, family, batch_size):
    model = tiny_model(family)
    cont_ids, T = continuations.continuation_ids(TOK, CONTS, 71)
    windows = am.octave_windows(T)
    assert [w.centre for w in windows] == [15.5, 31.5, 63.5]
    got = alpha.scene_offsets(model, TOK, SCENE["base"], {"detail": SCENE["detail"], "translation": SCENE["translation"]},
                              cont_ids, windows, alpha.Settings(batch_size=batch_size))
    for axis in ("detail", "translation"):
        S, N = _reference(model, SCENE["base"], SCENE[axis], cont_ids, windows)
        assert np.allclose(got[axis]["signal"], S, rtol=1e-4, atol=1e-9)
        assert np.allclose(got[axis]["noise"], N, rtol=1e-4, atol=1e-9)
        assert got[axis]["continuations"] == len(CONTS)


def test_offsets_follow_the_active_compensation(tiny_model):
    model = tiny_model("llama")
    state = comp.install(model, CompensationConfig("log", 1.0, "prompt"))
    cont_ids, T = continuations.continuation_ids(TOK, CONTS, 71)
    windows = am.octave_windows(T)
    got = alpha.scene_offsets(model, TOK, SCENE["base"], {"detail": SCENE["detail"]}, cont_ids, windows,
                              alpha.Settings(state, 3))
    S, _ = _reference(model, SCENE["base"], SCENE["detail"], cont_ids, windows, state)
    assert np.allclose(got["detail"]["signal"], S, rtol=1e-4)
    state.config = CompensationConfig("none")
    plain = alpha.scene_offsets(model, TOK, SCENE["base"], {"detail": SCENE["detail"]}, cont_ids, windows,
                                alpha.Settings(state, 3))
    assert not np.allclose(plain["detail"]["signal"], got["detail"]["signal"], rtol=1e-3)


def _nll_tolerance(model, logits, T, nll):
    """What float32 rounding allows in a summed continuation NLL: each of its ``T`` terms
    reads its logits' rounding twice (the log-sum-exp and the target's logit) and rounds its
    own sum over the vocabulary, and their sum rounds at the NLL's magnitude."""
    keys, vocab = logits.shape
    per_term = 2 * rounding(torch.float32, forward_sums(model, keys), float(logits.abs().max())) \
        + rounding(torch.float32, vocab, 1.0)
    return T * per_term + rounding(torch.float32, T, nll)


def test_continuation_nll_matches_a_plain_forward(tiny_model):
    model = tiny_model("qwen2")
    cont_ids, T = continuations.continuation_ids(TOK, CONTS[:3], 40)
    prompts = [SCENE["base"], SCENE["translation"]]
    got = alpha.continuation_nll(model, TOK, prompts, cont_ids, batch_size=4)
    tol = {}
    for pi, p in enumerate(prompts):
        for ci, c in enumerate(cont_ids):
            ids = torch.tensor([continuations.prompt_ids(TOK, p) + c])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0]
            ref = float(torch.nn.functional.cross_entropy(logits[-T - 1:-1], ids[0, -T:], reduction="sum"))
            tol[pi, ci] = _nll_tolerance(model, logits, T, ref)
            assert abs(got[pi][ci] - ref) <= tol[pi, ci]
    # the bias toward the prompt changes the continuation's likelihood, by more than rounding could
    state = comp.install(model, CompensationConfig("const", 2.0, "prompt"))
    biased = alpha.continuation_nll(model, TOK, prompts, cont_ids, state, 4)
    assert abs(biased[0][0] - got[0][0]) > tol[0, 0]


def test_perplexity_requests_score_each_continuation_once_per_setting(tiny_model, monkeypatch):
    """serve_nll keeps the uncompensated scores on the model: the ``none`` setting scores each
    request once, a later compensated setting only its own scores, and its ``nll_none`` is
    the ``none`` run's, number for number; a model whose first setting is compensated scores
    both, once."""
    model = tiny_model("llama")
    calls = []
    real = alpha.continuation_nll

    def counted(model_, tok, prompts, cont_ids, state=None, batch_size=4):
        calls.append("none" if state is None or not state.config.active else state.config.label().split("@")[0])
        return real(model_, tok, prompts, cont_ids, state, batch_size)

    monkeypatch.setattr(alpha_serving, "continuation_nll", counted)
    reqs = [SimpleNamespace(args=(json.dumps({"prompt": p, "continuations": CONTS[:3], "length": 40}),))
            for p in (SCENE["base"], SCENE["translation"])]

    def lm_at(config, shared=None):
        state = comp.install(model, config)
        return SimpleNamespace(model=model, tokenizer=TOK, drift_state=state, batch_size=2,
                               uncompensated_nll=shared if shared is not None else {})

    shared = {}
    none = [json.loads(a) for a in alpha_serving.serve_nll(lm_at(CompensationConfig("none", 0.0, "prompt"), shared), reqs)]
    assert calls == ["none", "none"]
    for label, config in (("log:1", CompensationConfig("log", 1.0, "prompt")),
                          ("const:2", CompensationConfig("const", 2.0, "prompt"))):
        calls.clear()
        got = [json.loads(a) for a in alpha_serving.serve_nll(lm_at(config, shared), reqs)]
        assert calls == [label, label]  # the uncompensated scores come from the none setting
        assert [g["nll_none"] for g in got] == [n["nll"] for n in none]
        assert all(g["nll"] != g["nll_none"] for g in got)
    calls.clear()
    first = [json.loads(a) for a in alpha_serving.serve_nll(lm_at(CompensationConfig("log", 1.0, "prompt")), reqs)]
    assert calls == ["log:1", "none", "log:1", "none"]
    assert [f["nll_none"] for f in first] == [n["nll"] for n in none]


def test_measure_pools_scenes_and_fits_every_layer(tiny_model):
    model = tiny_model("llama", layers=2)
    scenes = [SCENE, {"base": "Two cats slept on a warm roof.", "detail": "Two dogs slept on a warm roof."}]
    res = alpha.measure(model, TOK, scenes, CONTS, 71, alpha.Settings(batch_size=6, bootstrap_iters=50))
    assert res["length"] == 71 and [w[2] for w in res["windows"]] == [15.5, 31.5, 63.5]
    assert res["axes"]["detail"]["scenes"] == 2 and res["axes"]["translation"]["scenes"] == 1
    assert len(res["axes"]["detail"]["alpha"]) == 2
    json.dumps(res)  # JSON-ready


def test_bad_inputs_are_refused_with_one_line(tiny_model):
    with pytest.raises(DriftUsageError, match="only .* tokens"):
        continuations.continuation_ids(TOK, ["short", "texts"], 71)
    with pytest.raises(DriftUsageError, match="needs 3"):
        alpha.measure(tiny_model("llama"), TOK, [SCENE], CONTS, 30)
    with pytest.raises(DriftUsageError, match="at least two"):
        continuations.read_continuations("bundled", 1, bundled=read_bundled)
    with pytest.raises(DriftUsageError, match="neither"):
        continuations.read_continuations("/no/such/file.jsonl", 4)


def test_continuation_files(tmp_path):
    j = tmp_path / "c.jsonl"
    j.write_text('{"text": "one"}\n{"text": "two"}\n', encoding="utf-8")
    assert continuations.read_continuations(str(j), 2) == ["one", "two"]
    t = tmp_path / "c.txt"
    t.write_text("first passage\nstill first\n---\nsecond passage\n", encoding="utf-8")
    assert continuations.read_continuations(str(t), 2) == ["first passage\nstill first", "second passage"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('["no text field"]\n', encoding="utf-8")
    with pytest.raises(DriftUsageError, match="'text' field"):
        continuations.read_continuations(str(bad), 2)


@pytest.mark.slow
def test_wikitext_continuations_without_network_say_what_to_do():
    code = ("from drift_eval.measure.continuations import read_continuations\n"
            "try:\n    read_continuations('wikitext', 4)\nexcept SystemExit as e:\n    print(e)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300).stdout
    assert "continuations=wikitext needs the Hugging Face hub" in out and "use the bundled continuations" in out


def test_untrained_twin_is_saved_whole_with_the_seeded_weights(tiny_model_dir, tmp_path):
    """The twin folder holds what ``drift-eval alpha --random-init`` measures: the config's
    weights from seed 0 (the fixture was built that way, so they are its own weights), and
    loads as a model folder with its tokenizer; an existing folder is refused."""
    target = save_untrained_twin(str(tiny_model_dir), str(tmp_path / "twin"))
    saved = load_file(str(tmp_path / "twin" / "model.safetensors"))
    original = load_file(str(tiny_model_dir / "model.safetensors"))
    assert saved.keys() == original.keys()
    assert all(torch.equal(saved[k], original[k]) for k in saved)
    fresh = untrained_twin(str(tiny_model_dir)).state_dict()
    loaded = AutoModelForCausalLM.from_pretrained(target).state_dict()
    assert all(torch.equal(loaded[k], fresh[k]) for k in fresh)
    assert AutoTokenizer.from_pretrained(target).chat_template == AutoTokenizer.from_pretrained(tiny_model_dir).chat_template
    assert [p.name for p in tmp_path.iterdir()] == ["twin"]  # no partial folder left beside it

    with pytest.raises(DriftUsageError, match="exists"):
        save_untrained_twin(str(tiny_model_dir), target)
    with pytest.raises(DriftUsageError, match="no config.json"):
        save_untrained_twin(str(tmp_path), str(tmp_path / "twin2"))
    script = BENCHMARKS / "protocol_runs.py"
    r = subprocess.run([sys.executable, str(script), "twin", target, "--model", str(tiny_model_dir)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "exists" in r.stderr
