"""Output accessibility: the bound and fit maths, cramming on a random-init model, the CLI,
and the lm-eval task served by hf-drift."""
import json
import math

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from drift_eval.cli import main
from drift_eval.errors import DriftUsageError
from drift_eval.measure.cramming import (Schedule, Settings, accessibility, cram, hidden_radius, random_targets,
                                         widen_init)
from drift_eval.metrics import accessibility as acc
from drift_eval.plugin.wrapper import DriftLM
from support.commands import TINY_OPTIONS, results_of, run_lm_eval, samples_of


def wide_tiny_model(tiny_model, seed: int = 0):
    """conftest's 2-layer llama (hidden 32, vocab 128) with every weight matrix re-drawn from
    N(0, 0.3^2) instead of N(0, 0.02^2) (``widen_init``), which makes cramming possible."""
    return widen_init(tiny_model("llama", seed=seed, layers=2), std=0.3, seed=seed)


# ---------------------------------------------------------------------------------- maths
def test_bound_matches_the_seed_figure():
    b = acc.capacity_bound(2048, 50304)  # eps = r/2048
    assert b.C == pytest.approx(1573.6, abs=0.05)
    assert b.eps_rule == "eps = r/2048" and b.r_over_eps == 2048
    # the same precision given as an absolute eps for a measured r
    b2 = acc.capacity_bound(2048, 50304, r=3.5, eps=3.5 / 2048)
    assert b2.C == pytest.approx(b.C) and b2.eps == pytest.approx(3.5 / 2048)
    assert acc.capacity_bound(2048, 50304, r=3.5).eps == pytest.approx(3.5 / 2048)
    assert b.log_sequences(3) == pytest.approx(2048 * 3 * math.log(4097))
    # a coarser precision gives a smaller C: d ln(1 + 2*8) / ln 100
    assert acc.capacity_bound(10, 100, eps_ratio=8).C == pytest.approx(10 * math.log(17) / math.log(100))


def test_sigmoid_sampled_exactly_recovers_its_midpoint():
    n = np.arange(1, 41, 3)
    fit = acc.fit_n50(n, acc.sigmoid(n, 17.3, 2.5))
    assert fit["status"] == "fit"
    assert fit["n50"] == pytest.approx(17.3, abs=1e-4) and fit["width"] == pytest.approx(2.5, abs=1e-4)
    # a step between two sampled lengths: n50 between them
    step = acc.fit_n50([2, 4, 8, 16], [1.0, 1.0, 0.0, 0.0])
    assert 4 < step["n50"] < 8 and step["interpolated"] == pytest.approx(6.0)
    # a table that does not fall (noise from few strings): the 50% crossing, said so
    noisy = acc.fit_n50([1, 2, 4], [0.5, 0.5, 1.0])
    assert noisy["status"] == "interpolated" and noisy["n50"] == pytest.approx(2.0)


def test_n50_outside_the_lengths_tried_is_reported_as_such():
    assert acc.fit_n50([2, 4, 8], [1.0, 0.9, 0.75]) == {"status": "above_range", "n50": None, "width": None,
                                                        "interpolated": None}
    assert acc.fit_n50([2, 4, 8], [0.25, 0.0, 0.0])["status"] == "below_range"


def test_exact_line_has_r2_one_and_slope_ratio():
    line = acc.fit_line([1, 2, 4, 8], [4.5, 7.5, 13.5, 25.5])  # 3 m + 1.5
    assert line["slope"] == pytest.approx(3) and line["intercept"] == pytest.approx(1.5)
    assert line["r2"] == pytest.approx(1.0)
    assert acc.fit_line([1, 2, 3], [1, 3, 2])["r2"] == pytest.approx(0.25)
    assert acc.fit_line([1], [2])["slope"] is None
    assert acc.slope_ratio(30.0, 3.0) == pytest.approx(10.0) and acc.slope_ratio(30.0, -1.0) is None
    assert acc.slope_ratio(30.0, 1e-10) is None  # flat: equal n50s up to rounding


def test_summarise_recovers_a_linear_n50():
    lengths = np.arange(2, 60, 2)
    table = {m: dict(zip(lengths.tolist(), acc.sigmoid(lengths, 10 * m + 2, 1.5).tolist())) for m in (1, 2, 4)}
    out = acc.summarise(table, acc.capacity_bound(576, 49152))
    assert [out["n50"][m]["n50"] for m in (1, 2, 4)] == pytest.approx([12, 22, 42], abs=1e-3)
    assert out["line"]["slope"] == pytest.approx(10, abs=1e-3) and out["line"]["r2"] == pytest.approx(1.0)
    assert out["slope_ratio"] == pytest.approx(out["bound"]["C"] / 10, rel=1e-3)


@pytest.fixture(scope="module")
def wide(tiny_model):
    return wide_tiny_model(tiny_model)


def test_crammed_vectors_make_greedy_decoding_produce_the_target(wide):
    """Exact teacher-forced reconstruction means: from the anchor token and the soft vectors,
    greedy decoding produces the whole target, its first token included."""
    targets = random_targets(128, [3], 4, seed=1)[3]
    res, vectors = cram(wide, targets, m=2, schedule=Schedule(max_steps=200, patience=60), anchor=5,
                         return_vectors=True)
    assert sum(res.success) >= 2, res
    emb = wide.get_input_embeddings()
    for row in np.flatnonzero(res.success):
        x, produced = torch.cat([emb(torch.tensor([[5]])), vectors[row : row + 1]], dim=1), []
        with torch.no_grad():
            for _ in range(targets.shape[1]):
                tok = wide(inputs_embeds=x).logits[0, -1].argmax()
                produced.append(int(tok))
                x = torch.cat([x, emb(tok.view(1, 1))], dim=1)
        assert produced == targets[row].tolist()
        assert res.stop[row] == "exact" and res.best_correct[row] == 3
    assert all(s in ("exact", "patience", "step_cap") for s in res.stop)


def test_rows_are_independent(wide):
    """Row 0 of a batch is crammed the same whatever the other rows are."""
    a = random_targets(128, [4], 3, seed=2)[4]
    b = a.clone()
    b[1:] = random_targets(128, [4], 3, seed=3)[4][1:]
    ra, rb = (cram(wide, t, m=1, schedule=Schedule(max_steps=40, patience=40)) for t in (a, b))
    assert (ra.success[0], ra.steps[0], ra.best_correct[0]) == (rb.success[0], rb.steps[0], rb.best_correct[0])


def test_two_vectors_reconstruct_more_than_one(wide):
    """On the wide random-init model, at n = 4: accessibility with m = 2 > with m = 1
    (measured 0.25 and 0.625 for these 8 random strings, 300 steps)."""
    targets = random_targets(128, [4], 8, seed=0)
    res = accessibility(wide, targets, [1, 2], max_steps=300, patience=60)
    a1, a2 = res[1][4].accessibility, res[2][4].accessibility
    assert a2 >= a1 + 0.25, (a1, a2)


def test_hidden_radius_is_the_largest_last_layer_coordinate(wide):
    r = hidden_radius(wide, sequences=2, length=8, seed=5)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 128, (2, 8), generator=g)
    with torch.no_grad():
        h = wide(input_ids=ids, output_hidden_states=True).hidden_states[-1]
    assert r == pytest.approx(h.abs().max().item()) and r > 0


def test_settings_reject_bad_values_with_one_line():
    s = Settings.from_options(ms="4,1,2", lengths=[8, 2], targets="random")
    assert s.ms == [1, 2, 4] and s.lengths == [2, 8]
    for bad, needle in [({"ms": "0,1"}, "ms must be"), ({"lengths": "a"}, "lengths='a'"),
                        ({"targets": "words"}, "use text or random"), ({"strings": 0}, "strings must be"),
                        ({"anchor": "eos"}, "use bos or none"),
                        ({"step_cap": 3}, "unknown accessibility option")]:
        with pytest.raises(DriftUsageError, match=needle):
            Settings.from_options(**bad)


# ----------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_cli_on_a_model_folder(tiny_model, smollm2_dir, tmp_path, capsys):
    """``drift-eval accessibility`` (its entry point, in this process) on a saved model folder."""
    model_dir = tmp_path / "wide"
    wide_tiny_model(tiny_model).save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(smollm2_dir).save_pretrained(model_dir)
    rc = main(["accessibility", "--model", str(model_dir), "--targets", "random", "--ms", "1,2",
               "--lengths", "1,2,4", "--strings", "4", "--max-steps", "40", "--radius-length", "16", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    res = json.loads(out.out)
    assert set(res["accessibility"]) == {"1", "2"} and set(res["accessibility"]["1"]) == {"1", "2", "4"}
    assert res["bound"]["d"] == 32 and res["bound"]["vocab"] == 128 and res["bound"]["eps_rule"] == "eps = r/2048"
    assert res["bound"]["C"] == pytest.approx(32 * math.log(4097) / math.log(128))
    assert res["bound"]["eps"] == pytest.approx(res["bound"]["r"] / 2048)
    assert res["anchor_token"] == 1  # SmolLM2's BOS token, <|im_start|>
    for m, by_n in res["accessibility"].items():
        for n, share in by_n.items():
            assert share == pytest.approx(np.mean(res["rows"][m][n]["success"]))
    assert len(res["rows"]["2"]["4"]["success"]) == 4
    rc = main(["accessibility", "--model", str(model_dir), "--targets", "words"])
    assert rc == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        "drift-eval: error: unknown targets 'words': use text or random"


def test_other_models_get_one_line_naming_hf_drift():
    class OtherModel:  # a model without the request type (lm-eval's hf, a server...)
        def generate_until(self, requests):
            return []

    class Request:
        task_name = "accessibility"

    with pytest.raises(DriftUsageError, match="accessibility optimises soft-prompt .* --model hf-drift"):
        DriftLM(OtherModel(), {"accessibility"}).accessibility([Request()])


@pytest.mark.slow
def test_lm_eval_task_served_by_hf_drift(smollm2_dir, tmp_path):
    """The real lm_eval command on the bundled SmolLM2 with tiny settings (the shipped prose)."""
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "accessibility",
                     "--metadata", json.dumps(TINY_OPTIONS["accessibility"]), "--device", "cpu",
                     "--output_path", tmp_path, "--log_samples"], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(tmp_path)["results"]["accessibility"]
    assert res["bound_C,none"] == pytest.approx(576 * math.log(4097) / math.log(49152))
    assert res["radius_r,none"] > 0 and res["eps,none"] == pytest.approx(res["radius_r,none"] / 2048)
    assert 0.0 <= res["mean_accessibility,none"] <= 1.0
    [sample] = samples_of(tmp_path, "accessibility")
    answer = json.loads(sample["resps"][0][0])
    assert set(answer["accessibility"]) == {"1", "2"} and set(answer["accessibility"]["1"]) == {"1", "2"}
    assert answer["settings"]["max_steps"] == 2 and max(answer["rows"]["1"]["2"]["steps"]) <= 2
    for m, fit in answer["n50"].items():  # a bracketed n50 is in the results JSON, and only then
        assert (f"n50_m{m},none" in res) == (fit["n50"] is not None)
