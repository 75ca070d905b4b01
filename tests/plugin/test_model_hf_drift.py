"""hf-drift in process on the bundled SmolLM2-135M-Instruct (real weights, real tokenizer)."""
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from lm_eval.api.instance import Instance

from drift_eval.errors import DriftUsageError
from drift_eval.measure import calibration
from drift_eval.measure.calibration import fit_kappa
from drift_eval.plugin import generation, model
from drift_eval.plugin.answers import Answer
from drift_eval.plugin.model import HFDriftLM
from drift_eval.settings import CompensationConfig
from drift_eval.taskdata.french import calibration_prompt, system_prompt

pytestmark = pytest.mark.slow
SYSTEM = system_prompt("en")


@pytest.fixture(scope="module")
def lm(smollm2_dir):
    return HFDriftLM(pretrained=smollm2_dir, compensation="log", strength=1.0, device="cpu", batch_size=2)


@contextmanager
def setting(lm, config):
    """``lm`` under ``config`` inside the block; its own setting after."""
    previous = lm.compensation
    lm.set_compensation(config)
    try:
        yield lm
    finally:
        lm.set_compensation(previous)


def _prompt(lm, user):
    return lm.tokenizer.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        tokenize=False, add_generation_prompt=True)


def test_span_rows_cover_the_system_prompt_under_left_padding(lm):
    prompts = [_prompt(lm, "Hi."), _prompt(lm, "Tell me everything about the history of bread.")]
    ids, mask = lm.tok_batch_encode(prompts)
    span_end, prompt_len = lm.span_rows(prompts, mask, {p: {"system_prompt": SYSTEM} for p in prompts})
    assert prompt_len == mask.sum(1).tolist()
    for row, P in enumerate(span_end):
        real = ids[row][mask[row].bool()]
        assert lm.tokenizer.decode(real[:P]).endswith(SYSTEM)
        assert lm.tokenizer.convert_ids_to_tokens(int(real[P])) == "<|im_end|>"


def test_span_prompt_covers_the_whole_prompt(lm):
    with setting(lm, CompensationConfig("log", 1.0, "prompt")):
        prompts = [_prompt(lm, "Hi."), _prompt(lm, "Tell me a story.")]
        _, mask = lm.tok_batch_encode(prompts)
        assert lm.span_rows(prompts, mask, {}) == (mask.sum(1).tolist(), mask.sum(1).tolist())


def test_left_truncation_shifts_the_span(lm):
    prompt = _prompt(lm, "Tell me everything about the history of bread.")
    full = len(lm.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    docs = {prompt: {"system_prompt": SYSTEM}}
    (P_full,), _ = lm.span_rows([prompt], lm.tok_batch_encode([prompt])[1], docs)
    (P_cut,), _ = lm.span_rows([prompt], lm.tok_batch_encode([prompt], left_truncate_len=full - 3)[1], docs)
    assert P_cut == P_full - 3


def test_compensation_changes_generation_and_none_restores_it(lm):
    def run():
        doc = {"system_prompt": SYSTEM}
        req = Instance("generate_until", doc, (_prompt(lm, "Describe a forest."),
                       {"until": [], "max_gen_toks": 24, "min_new_tokens": 24, "do_sample": False}), 0)
        return lm.generate_until([req], disable_tqdm=True)[0]

    with setting(lm, CompensationConfig("none")):
        plain = run()
    with setting(lm, CompensationConfig("log", 3.0)):
        strong = run()
    with setting(lm, CompensationConfig("none")):
        assert run() == plain
    assert strong != plain


def test_head_calibration_is_per_layer_and_head_and_cached(lm, tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path))
    g = calibration.head_gammas(lm.model, lm.tokenizer, calibration_prompt())
    cfg = lm.model.config
    assert g.shape == (cfg.num_hidden_layers, cfg.num_attention_heads)
    assert float(g.min()) >= 0.0 and float(g.max()) <= calibration.KAPPA_MAX
    assert float(g.std()) > 0  # heads differ
    assert lm.model.config._attn_implementation == "drift_sdpa"  # restored after calibration
    again = calibration.head_gammas(lm.model, lm.tokenizer, calibration_prompt())  # from the cache file
    assert torch.equal(g, again)
    assert len(list(tmp_path.glob("head_calibration/*.json"))) == 1


def test_head_setting_survives_its_own_calibration(lm, tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path))  # forces a fresh calibration
    lm.drift_state.head_gammas = None
    with setting(lm, CompensationConfig("head", 0.5)):
        assert lm.drift_state.head_gammas is not None
        assert lm.drift_state.config == CompensationConfig("head", 0.5)


def test_fit_kappa_recovers_known_exponents():
    q = np.arange(40, 400)
    P = 40
    shares = np.stack([0.3 * ((q + 1) / P) ** -k for k in (0.0, 0.5, 1.0)])
    assert fit_kappa(shares, q, P) == pytest.approx([0.0, 0.5, 1.0], abs=1e-9)


@pytest.mark.parametrize("args, needle", [
    (dict(compensation="bogus"), "unknown compensation"),
    (dict(strength=-0.5), "strength"),
    (dict(span="user"), "unknown span"),
    (dict(gguf_file="missing.gguf"), "GGUF file not found"),
])
def test_bad_model_args(smollm2_dir, args, needle):
    with pytest.raises(DriftUsageError, match=needle):
        HFDriftLM(pretrained=smollm2_dir, device="cpu", **args)


def test_forced_answers_record_where_the_model_wanted_to_end(lm):
    """Greedy decoding is the same up to the end the model chose, so the free answer's length
    is the forced answer's natural end, and the forced answer starts with the free one."""
    def run(gen):
        req = Instance("generate_until", {"system_prompt": SYSTEM}, (_prompt(lm, "Say hello in one short sentence."),
                       dict(gen, until=[], do_sample=False)), 0)
        return lm.generate_until([req], disable_tqdm=True)[0]

    with setting(lm, CompensationConfig("log", 1.0)):
        free = run({"max_gen_toks": 40})
        forced = run({"max_gen_toks": 40, "min_new_tokens": 40})
    assert isinstance(free, Answer) and isinstance(forced, Answer)
    assert "forced_length" not in free.meta and "natural_end" not in free.meta
    assert free.meta["tokens"] < 40  # ended by itself
    assert forced.meta["forced_length"] is True and forced.meta["tokens"] == 40
    assert forced.meta["natural_end"] == free.meta["tokens"]
    assert forced[: forced.meta["natural_end_chars"]] == free and forced.startswith(free)


def test_the_reserved_cache_generates_what_the_stock_cache_generates(lm, monkeypatch):
    """Two left-padded prompts, compensation on: greedy answers are identical with the
    reserved cache and with transformers' own, and generate received the reserved one."""
    reqs = [Instance("generate_until", {"system_prompt": SYSTEM}, (_prompt(lm, user), {
        "max_gen_toks": 48, "min_new_tokens": 48, "until": [], "do_sample": False}), i)
        for i, user in enumerate(["Hi", "Describe the water cycle for a class of ten-year-olds."])]
    used = []

    def spy(config, capacity):
        cache = generation.reserved_cache(config, capacity)
        used.append((capacity, {type(layer).__name__ for layer in cache.layers}))
        return cache

    with setting(lm, CompensationConfig("log", 1.0)):
        monkeypatch.setattr(model, "reserved_cache", spy)
        reserved = lm.generate_until(reqs, disable_tqdm=True)
        monkeypatch.setattr(model, "reserved_cache", lambda config, capacity: None)
        stock = lm.generate_until(reqs, disable_tqdm=True)
    assert [str(a) for a in reserved] == [str(a) for a in stock]
    width = max(len(lm.tok_encode(r.args[0])) for r in reqs)
    assert used == [(width + 48, {"ReservedLayer"})]
