"""Data-parallel runs: ``accelerate launch --num_processes 2 --cpu -m lm_eval`` equals one
process sample for sample, a rank without documents works, and the GGUF and calibration
caches are built once while both ranks want them."""
import glob
import json

import pytest

from drift_eval.plugin.local_models import smollm2_gguf
from support.commands import LM_EVAL, accelerate_lm_eval, results_of, run_lm_eval, samples_of

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]

TASKS = ("drift_french_single", "drift_french_multiturn", "position_bias")


def _same(a, b):
    """Equal, up to the order in which the ranks' per-sample values were summed."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-12, nan_ok=True)
    return a == b


def _samples(out, task):
    return sorted(samples_of(out, task), key=lambda s: s["doc_id"])


def test_two_processes_equal_one_process_sample_for_sample(tmp_path):
    folder, name = smollm2_gguf()
    cache = tmp_path / "cache"  # empty: both ranks want the GGUF copy and the head calibration at once
    env = {"DRIFT_CACHE_DIR": str(cache)}
    args = ["--model", "hf-drift", "--model_args", f"pretrained={folder},gguf_file={name},compensation=head,strength=0.5",
            "--tasks", "drift_french,position_bias", "--apply_chat_template", "--limit", "3",
            "--gen_kwargs", "max_gen_toks=8", "--batch_size", "1", "--device", "cpu", "--log_samples",
            "--metadata", json.dumps({"length": 8, "sequences": 1})]
    two = accelerate_lm_eval(args + ["--output_path", tmp_path / "two"], env_extra=env)
    assert two.returncode == 0, two.stderr[-4000:]
    assert two.stderr.count("converting SmolLM2-135M-Instruct") == 1  # one rank converted, the other waited
    assert len(glob.glob(str(cache / "gguf" / "SmolLM2*"))) == 2  # the copy and its lock file
    assert not glob.glob(str(cache / "gguf" / ".partial-*")) and not glob.glob(str(cache / "**" / "*.tmp"))
    assert len(glob.glob(str(cache / "head_calibration" / "*.json"))) == 1
    one = run_lm_eval(args + ["--output_path", tmp_path / "one"], env_extra=env)
    assert one.returncode == 0, one.stderr[-4000:]
    res_two, res_one = results_of(tmp_path / "two")["results"], results_of(tmp_path / "one")["results"]
    for task in TASKS:
        a, b = _samples(tmp_path / "two", task), _samples(tmp_path / "one", task)
        assert [s["doc_id"] for s in a] == [s["doc_id"] for s in b] == list(range(len(b))), task
        for x, y in zip(a, b):
            assert x["resps"] == y["resps"], (task, x["doc_id"])
            assert {m: x[m] for m in x["metrics"]} == {m: y[m] for m in y["metrics"]}, (task, x["doc_id"])
        assert _same(res_two[task], res_one[task]), (task, res_two[task], res_one[task])
    assert len(_samples(tmp_path / "two", "position_bias")) == 1  # one document: rank 1 had none
    assert _same(res_two["drift_french"], res_one["drift_french"])
