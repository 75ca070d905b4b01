"""drift-eval sweep on the bundled SmolLM2: standard lm-eval files per setting, one model
load, progress lines, and resuming without recomputing finished settings or answers."""
import glob
import json
import os
import shutil
import sqlite3

import pytest
from lm_eval.api.model import hash_args

from drift_eval.cli import main
from drift_eval.decide.results import load_output
from drift_eval.plugin.sweep import SweepOptions, run_sweep
from support.commands import REAL_SWEEP_ARGS


def _files(root, setting, pattern):
    return glob.glob(os.path.join(str(root), setting, "*", pattern))


@pytest.mark.slow
def test_sweep_writes_standard_results_per_setting(real_sweep):
    out, stdout = real_sweep["dir"], real_sweep["stdout"]
    assert stdout.count("loading ") == 1  # the model is loaded once for both settings
    assert "[1/2] none: running" in stdout and "[2/2] log:1: running" in stdout
    assert "[2/2] log:1: done in" in stdout and "sweep complete: 2 settings" in stdout
    for setting, comp in (("none", "none"), ("log_1", "log")):
        [res_file] = _files(out, setting, "results_*.json")
        assert os.path.basename(os.path.dirname(res_file)) == "SmolLM2-135M-Instruct.Q4_1"  # not the cache path
        res = json.load(open(res_file))
        assert res["config"]["model_args"]["compensation"] == comp
        assert res["config"]["model_args"]["pretrained"] == str(real_sweep["model"])
        assert 0.0 <= res["results"]["drift_french_single"]["fully_french,none"] <= 1.0
        assert "french_last_turn,none" in res["results"]["drift_french_multiturn_fixed"]
        assert res["configs"]["drift_french_single"]["generation_kwargs"]["max_gen_toks"] == 16
        for task in ("drift_french_single", "drift_french_multiturn_fixed", "position_bias"):
            [samples] = _files(out, setting, f"samples_{task}_*.jsonl")
            lines = open(samples).read().splitlines()
            assert len(lines) == (1 if task == "position_bias" else 2)
        # chat template applied as lm_eval --apply_chat_template does
        first = json.loads(open(_files(out, setting, "samples_drift_french_single_*.jsonl")[0]).readline())
        assert first["arguments"]["gen_args_0"]["arg_0"].startswith("<|im_start|>system\n")
        # issue 6: the profiles are list-valued metrics in the results JSON
        pb = res["results"]["position_bias"]
        for name in ("residual_aware", "attention_only", "abnar_zuidema", "gradient"):
            prof = pb[f"profile_{name},none"]
            assert isinstance(prof, list) and len(prof) == 8
            assert sum(prof) == pytest.approx(1.0, abs=1e-4)
    # lm-eval's printed table stays readable: a profile is one short cell
    assert "|profile of 8, peak" in stdout


@pytest.mark.slow
def test_sweep_resumes_without_recomputing(real_sweep, smollm2_dir, tmp_path):
    """Simulated interruption: log:1 lost its results, and its cache lost one conversation
    (as if the run stopped before that batch). Only that conversation is generated again,
    and the setting's left-over samples files are moved aside."""
    out = tmp_path / "out"
    shutil.copytree(real_sweep["dir"], out)
    # none as an earlier version left it: its model folder named after lm-eval's sanitised path
    os.rename(out / "none" / "SmolLM2-135M-Instruct.Q4_1", out / "none" / str(smollm2_dir).replace("/", "__"))
    before = {}
    for path in _files(out, "log_1", "samples_*.jsonl"):
        task = os.path.basename(path).split("_2")[0][len("samples_"):]
        before[task] = [json.loads(x)["resps"] for x in open(path)]  # kept: as if killed before the results
    [res_file] = _files(out, "log_1", "results_*.json")
    os.remove(res_file)
    conv = json.loads(open(_files(real_sweep["dir"], "log_1", "samples_drift_french_multiturn_fixed_*.jsonl")[0]).readline())
    args = conv["arguments"]["gen_args_0"]
    key = hash_args("generate_conversation", (args["arg_0"], args["arg_1"]))
    with sqlite3.connect(out / "log_1" / "cache" / "answers.sqlite") as db:
        assert db.execute("DELETE FROM answers WHERE key = ?", (key,)).rowcount == 1

    lines = []
    opts = dict(zip(REAL_SWEEP_ARGS[::2], REAL_SWEEP_ARGS[1::2]))
    options = SweepOptions(model_args=f"pretrained={smollm2_dir}", limit=float(opts["--limit"]),
                           gen_kwargs=opts["--gen-kwargs"], batch_size=2, metadata=opts["--metadata"])
    status = run_sweep(str(out), opts["--settings"], opts["--tasks"], options, log=lines.append)
    text = "\n".join(lines)
    assert status == {"none": "skipped", "log:1": "done"}
    assert "[1/2] none: results present, skipped" in text
    # 2 answers + 2 conversations + 1 measurement: only the deleted conversation runs again
    assert "requests answered by the model: 1, from the cache: 4" in text, text
    assert "moved aside: log_1/" in text
    for task, resps in before.items():
        [path] = _files(out, "log_1", f"samples_{task}_*.jsonl")
        assert [json.loads(x)["resps"] for x in open(path)] == resps
        assert os.path.basename(os.path.dirname(path)) == "SmolLM2-135M-Instruct.Q4_1"

    assert load_output(out).models == ["SmolLM2-135M-Instruct.Q4_1"]  # old and new folders: one model
    # a finished sweep does nothing, without loading the model
    again = []
    run_sweep(str(out), opts["--settings"], opts["--tasks"], options, log=again.append)
    assert not any(line.startswith("loading") for line in again) and again[-1].startswith("sweep complete")


def test_sweep_rejects_bad_options_with_one_line(tmp_path, capsys):
    assert main(["sweep", "--output", str(tmp_path), "--settings", "none,logt:1"]) == 2
    assert capsys.readouterr().err.strip() == ("drift-eval: error: unknown compensation 'logt': "
                                               "use one of none, log, const, head")
    (tmp_path / "sweep.json").write_text(json.dumps({"settings": ["none"], "tasks": ["drift_french"],
                                                      "options": {"limit": 5.0}}))
    assert main(["sweep", "--output", str(tmp_path), "--settings", "none", "--limit", "2",
                 "--model-args", "pretrained=/nonexistent"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a sweep run with other options" in err and len(err.splitlines()) == 1
    assert main(["sweep", "--output", str(tmp_path / "x"), "--model-args", "pretrained=/m,strength=2"]) == 2
    assert "give settings with --settings" in capsys.readouterr().err


def test_the_stop_point_for_tests_is_checked_before_anything_is_written(tmp_path, capsys, monkeypatch):
    """``DRIFT_EVAL_STOP_AT`` (where a test interrupts a sweep) must name one of the sweep's
    settings: anything else is one line and exit 2, before the output folder is made."""
    monkeypatch.setenv("DRIFT_EVAL_STOP_AT", "log:7")
    out = tmp_path / "out"
    assert main(["sweep", "--output", str(out), "--settings", "none,log:1", "--model-args", "pretrained=/m"]) == 2
    assert capsys.readouterr().err.strip() == ("drift-eval: error: DRIFT_EVAL_STOP_AT is 'log:7', not one of this "
                                               "sweep's settings (none, log:1): unset it")
    assert not out.exists()
