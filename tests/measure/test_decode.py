"""Free-generation decodability: the probes on cases with known answers, pooling and
intervals, language switches, option checks, and the measurement on a tiny model."""
import json

import numpy as np
import pytest
import torch

from drift_eval.anatomy import decoder_blocks
from drift_eval.errors import DriftUsageError
from drift_eval.measure import decode
from drift_eval.measure.decode import Settings, Store
from drift_eval.metrics import decode as dm
from drift_eval.metrics import stats
from drift_eval.tasks.drift_decode import utils
from support.models import forward_sums, rounding

N, D = 32, 64
Y = np.r_[np.zeros(N, int), np.ones(N, int)]


def test_probe_on_separable_prompts_is_right_and_on_identical_prompts_at_chance():
    rng = np.random.default_rng(0)
    cells = 20
    separable = rng.normal(size=(cells, 2 * N, D))
    separable[:, N:, :4] += 10.0  # the variant's trajectories sit 20 σ away, well separated
    identical = rng.normal(size=(cells, 2 * N, D))  # both prompts: the same distribution
    sep = dm.probe_correct(separable, Y)
    same = dm.probe_correct(identical, Y)
    assert sep.shape == (cells,) and same.shape == (cells,)
    acc_sep = dm.accuracy(sep.sum(), cells * 2 * N)
    acc_same = dm.accuracy(same.sum(), cells * 2 * N)
    assert acc_sep["accuracy"] >= 0.98 and acc_sep["upper"] == pytest.approx(1.0, abs=0.01)
    assert acc_same["lower"] <= 0.5 <= acc_same["upper"]
    assert abs(acc_same["accuracy"] - 0.5) < 0.05


def test_probe_of_one_matrix_and_its_seed():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2 * N, D))
    X[N:, :2] += 12.0
    assert dm.probe_correct(X, Y) >= 62
    assert dm.probe_correct(X, Y, seed=3) >= 62
    # with 51 training samples in 64 dimensions an L2 probe needs a wide margin: at 4 σ
    # along one coordinate it is right about 80% of the time, not 98%
    X[N:, :2] -= 12.0
    X[N:, 0] += 4.0
    assert 40 <= dm.probe_correct(X, Y) < 60


def test_text_probe_on_separable_and_identical_vocabularies():
    rng = np.random.default_rng(0)
    a = [list(rng.integers(0, 200, 64)) for _ in range(N)]
    b = [list(rng.integers(300, 500, 64)) for _ in range(N)]  # another language: other tokens
    c = [list(rng.integers(0, 200, 64)) for _ in range(N)]
    assert dm.text_correct(a + b, Y) == 2 * N
    pooled = sum(dm.text_correct([list(rng.integers(0, 200, 64)) for _ in range(2 * N)], Y, seed=s) for s in range(10))
    acc = dm.accuracy(pooled, 10 * 2 * N)
    assert acc["lower"] <= 0.5 <= acc["upper"]
    assert dm.text_correct(a + c, Y) <= 44


def test_probes_need_enough_samples_per_fold():
    with pytest.raises(ValueError, match="5-fold cross-validation needs at least 5 samples of each prompt"):
        dm.probe_correct(np.zeros((6, 3)), np.r_[np.zeros(3), np.ones(3)])


def test_store_round_trips_batches_of_samples():
    rng = np.random.default_rng(0)
    full = rng.normal(size=(2, 3, 4, 7, 5)).astype(np.float32)  # prompts, layers, t, samples, d
    store = Store(*full.shape)
    for p in range(2):
        for k0 in range(0, 7, 3):
            store.write(p, k0, full[p, :, :, k0:k0 + 3])
    for p in range(2):
        for layer in range(3):
            assert (store.read(p, layer) == full[p, layer]).all()
    store.close()


def test_centres_are_the_octave_window_centres():
    assert dm.centres(512) == [16, 32, 64, 128, 256, 512]
    assert dm.centres(100, 8) == [8, 16, 32, 64]
    with pytest.raises(ValueError):
        dm.centres(8)


def test_majority_language_and_switches():
    assert dm.majority_language(["fr", "en", "en", "fr", "zh"]) == "fr"  # a tie: the earlier
    assert dm.majority_language(["unknown", "unknown"]) == "unknown"
    assert dm.majority_language(["unknown", "de"]) == "de"
    sw = dm.switches("fr", ["fr", "en", "zh", "en", "fr", "unknown"])
    assert sw == {"switched": 4, "n": 6, "to": {"en": 2, "zh": 1, "unknown": 1}}


def test_accuracy_is_pooled_with_wilson_intervals():
    acc = dm.accuracy([[30, 64], [0, 40]], 64)
    assert acc["accuracy"] == [[30 / 64, 1.0], [0.0, 40 / 64]]
    assert (acc["lower"][0][0], acc["upper"][0][0]) == pytest.approx(stats.wilson_interval(30, 64))


def _answer(hidden, text, switched_base, switched_variant, to=None):
    lang = lambda k, prompt: {"prompt": prompt, "switched": k, "n": 32, "to": to or ({"zh": k} if k else {})}
    return {"centres": [16, 32], "hidden_correct": hidden, "text_correct": text, "predictions": 64,
            "languages": {"base": lang(switched_base, "en"), "variant": lang(switched_variant, "fr")}}


def test_summary_pools_scenes():
    answers = [_answer([[32, 40], [40, 60], [50, 64]], [33, 50], 0, 4),
               _answer([[32, 36], [44, 58], [52, 60]], [31, 46], 2, 11, {"zh": 9, "en": 2})]
    s = dm.summarise(answers)
    assert s["predictions"] == 128 and s["scenes"] == 2
    assert s["hidden_correct"] == [[64, 76], [84, 118], [102, 124]]
    assert s["median_layer"] == 1 and s["best_layer"] == 2
    assert s["hidden_accuracy"] == pytest.approx(118 / 128) and s["hidden_accuracy_best"] == pytest.approx(124 / 128)
    assert (s["hidden_accuracy_lower"], s["hidden_accuracy_upper"]) == pytest.approx(stats.wilson_interval(118, 128))
    assert s["text_accuracy"] == pytest.approx(96 / 128)
    assert s["hidden_accuracy_by_t"] == pytest.approx([84 / 128, 118 / 128])
    v = s["switches_variant"]
    assert v["per_scene"] == [4, 11] and v["mean"] == 7.5 and (v["min"], v["max"]) == (4, 11)
    assert v["to"] == {"zh": 13, "en": 2} and v["prompt_languages"] == {"fr": 2}
    with pytest.raises(ValueError, match="different positions"):
        dm.summarise([answers[0], dict(answers[1], centres=[16, 64])])


@pytest.mark.parametrize("options, needle", [
    (dict(samples=3), "samples must be at least folds (5)"),
    (dict(samples="many"), "samples must be an integer"),
    (dict(samples=7.5), "samples must be an integer"),
    (dict(temperature=0), "temperature must be above 0"),
    (dict(generation_length=8), "generation_length must be at least first_centre (16)"),
    (dict(folds=1), "folds must be at least 2"),
    (dict(text_window=-1), "text_window must be >= 0"),
    (dict(colour="red"), "unknown decode option(s): colour"),
])
def test_bad_settings_are_one_line(options, needle):
    with pytest.raises(DriftUsageError) as e:
        Settings.from_options(**options)
    assert needle in e.value.message and "\n" not in e.value.message


def test_task_docs_and_their_options():
    docs = utils.load_axis("translation", num_scenes=3, samples=8, generation_length=64, version=1.0,
                           num_conversations=4)["test"]  # other tasks' options are left alone
    assert len(docs) == 3 and docs[0]["axis"] == "translation" and docs[0]["variant"] != docs[0]["base"]
    settings = json.loads(docs[0]["settings"])
    assert settings["samples"] == 8 and settings["generation_length"] == 64 and settings["temperature"] == 1.0
    for kwargs, needle in [(dict(axis="colour"), "unknown axis 'colour'"), (dict(num_scenes=0), "num_scenes must be"),
                           (dict(samples=2), "samples must be at least folds")]:
        with pytest.raises(DriftUsageError, match=needle):
            utils.load_axis(**{"axis": "detail", **kwargs})


def test_generation_keeps_the_hidden_states_at_the_centres(tiny_model):
    """The hidden state kept at t is the block output at generated token t: the same as a
    plain forward over prompt + the first t generated tokens, within float32 rounding of
    that forward at the hidden states' magnitude."""
    class Tok:
        pad_token_id = eos_token_id = 0

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [1 + (ord(ch) % 127) for ch in text]}

    model = tiny_model("llama", layers=2)
    settings = decode.Settings.from_options(samples=5, generation_length=32, first_centre=8)
    store = decode.Store(1, 2, 3, 5, 32)
    tokens = decode.generate(model, Tok(), "s", {"base": "A red boat."}, settings, store,
                             decode.Runtime(batch_size=3))["base"]
    assert tokens.shape == (5, 32) and (tokens != model.generation_config.eos_token_id).all()  # suppressed
    again = decode.generate(model, Tok(), "s", {"base": "A red boat."}, settings, decode.Store(1, 2, 3, 5, 32),
                            decode.Runtime(batch_size=3))
    assert (again["base"] == tokens).all()  # seeded
    prompt = Tok()("A red boat." + "\n\n")["input_ids"]
    layers = [b.module for b in decoder_blocks(model)]
    for k in (0, 4):
        for j, t in enumerate([8, 16, 32]):
            got = []
            hooks = [m.register_forward_hook(lambda mod, a, o: got.append(o[0] if isinstance(o, tuple) else o))
                     for m in layers]
            with torch.no_grad():
                model(input_ids=torch.tensor([prompt + list(tokens[k, :t])]))
            for h in hooks:
                h.remove()
            keys = len(prompt) + t
            for layer in range(2):
                ref = got[layer][0, -1].numpy()
                tol = rounding(torch.float32, forward_sums(model, keys, logits=False), float(np.abs(ref).max()))
                assert np.abs(store.read(0, layer)[j, k] - ref).max() <= tol
