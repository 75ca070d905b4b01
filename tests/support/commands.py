"""Console scripts run as a user runs them (``lm_eval``, ``drift-eval``, ``accelerate``),
readers of lm-eval output folders, and a plain lm-eval task run with the plugin off and on."""
import glob
import json
import os
import shutil
import subprocess
import sys


ENV = {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}

#: the smallest ``--metadata`` each study task runs with end to end (the end-to-end tests and
#: benchmarks/same_samples.py)
TINY_OPTIONS = {
    "drift_alpha": {"num_scenes": 2, "n_continuations": 2, "continuation_length": 71, "bootstrap_iters": 20},
    "drift_decode": {"num_scenes": 2, "samples": 5, "generation_length": 32},
    "position_bias": {"length": 24, "sequences": 2},
    "accessibility": {"ms": [1, 2], "lengths": [1, 2], "strings": 1, "max_steps": 2, "patience": 2,
                      "radius_sequences": 1, "radius_length": 8},
}


def console_script(name):
    """The script installed beside this interpreter (its venv), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.isfile(here) else shutil.which(name)


LM_EVAL = console_script("lm_eval")


DRIFT_EVAL = console_script("drift-eval")


def run_lm_eval(args, env_extra=None, timeout=900):
    """The real ``lm_eval`` command in a subprocess."""
    env = dict(os.environ, **ENV, **(env_extra or {}))
    return subprocess.run([LM_EVAL, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


def run_drift_eval(args, env_extra=None, timeout=900):
    """The real ``drift-eval`` command in a subprocess."""
    env = dict(os.environ, **ENV, **(env_extra or {}))
    return subprocess.run([DRIFT_EVAL or "drift-eval", *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout)


def results_of(out):
    """The one ``results_*.json`` under an ``lm_eval --output_path`` folder."""
    [res_file] = glob.glob(str(out / "*" / "results_*.json"))
    with open(res_file, encoding="utf-8") as fh:
        return json.load(fh)


def samples_of(out, task):
    [samples_file] = glob.glob(str(out / "*" / f"samples_{task}_*.jsonl"))
    with open(samples_file, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# Options of the one real sweep the sweep, report and gate tests share (bundled SmolLM2,
# 2 settings x (2 forced-length answers + 2 fixed-history conversations + 1 position-bias
# measurement), 16 tokens per answer).
REAL_SWEEP_ARGS = ["--settings", "none,log:1",
                   "--tasks", "drift_french_single,drift_french_multiturn_fixed,position_bias",
                   "--limit", "2", "--gen-kwargs", "max_gen_toks=16", "--batch-size", "2",
                   "--metadata", '{"length": 8, "sequences": 1}']


def accelerate_lm_eval(args, processes=2, env_extra=None, timeout=1200):
    """``accelerate launch --num_processes N --cpu -m lm_eval ARGS`` in a subprocess."""
    env = dict(os.environ, **ENV, **(env_extra or {}))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes), "--cpu",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "lm_eval",
           *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


# A plain lm-eval task (not a drift task) run with the plugin off, on, and beside a drift
# task: what tests/end_to_end/test_guest.py and the server test compare.
PLUGIN_OFF = {"LM_EVAL_DRIFT_AUTOLOAD": "0"}


QUESTIONS = [{"question": "What is the capital of Italy?", "answer": "Rome"},
             {"question": "What is the capital of Spain?", "answer": "Madrid"}]


PLAIN_SAMPLE_KEYS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash", "prompt_hash",
                     "target_hash", "exact_match")


def plain_task(folder) -> str:
    """A plain lm-eval YAML task on a local JSON-lines file (not a drift task): its folder,
    for ``--include_path``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "capitals.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    (folder / "plain_capitals.yaml").write_text(
        "task: plain_capitals\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        'doc_to_text: "{{question}}"\n'
        'doc_to_target: "{{answer}}"\n'
        'generation_kwargs:\n  until: ["\\n\\n"]\n  do_sample: false\n'
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n",
        encoding="utf-8")
    return str(folder)


def _plain_run(tmp_path, name, model, model_args, tasks, env=None, system=None):
    out = tmp_path / name
    args = ["--model", model, "--model_args", model_args, "--include_path", plain_task(tmp_path / "task"),
            "--tasks", tasks, "--apply_chat_template", "--limit", "2", "--gen_kwargs", "max_gen_toks=24",
            "--output_path", out, "--log_samples", "--seed", "0"]
    if model == "hf":
        args += ["--device", "cpu", "--batch_size", "2"]
    if system:
        args += ["--system_instruction", system]
    r = run_lm_eval(args, env)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def same_as_without_the_plugin(tmp_path, model, model_args, system=None):
    """The plain task alone with the plugin off, alone with it on, and beside
    ``drift_french_single`` with it on: the same prompts, answers and scores."""
    off = _plain_run(tmp_path, "off", model, model_args, "plain_capitals", PLUGIN_OFF, system)
    on = _plain_run(tmp_path, "on", model, model_args, "plain_capitals", None, system)
    mixed = _plain_run(tmp_path, "mixed", model, model_args, "plain_capitals,drift_french_single", None, system)
    want = [{k: s.get(k) for k in PLAIN_SAMPLE_KEYS} for s in samples_of(off, "plain_capitals")]
    assert len(want) == 2 and all(w["resps"][0][0] for w in want)
    for run in (on, mixed):
        assert [{k: s.get(k) for k in PLAIN_SAMPLE_KEYS} for s in samples_of(run, "plain_capitals")] == want
        assert results_of(run)["results"]["plain_capitals"] == results_of(off)["results"]["plain_capitals"]
    assert "fully_french,none" in results_of(mixed)["results"]["drift_french_single"]  # the drift task ran too
    return want


def not_json(constant):
    """``json.loads``'s ``parse_constant``: NaN and the infinities are not JSON (strict parsers
    reject them), so a test that reads one fails."""
    raise AssertionError(f"{constant} is not JSON")
