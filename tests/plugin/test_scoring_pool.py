"""Scoring drift answers in other processes while the run goes on
(``drift_eval.plugin.scoring``): the same values as lm-eval's own scoring in the main
process, read back by the answer lm-eval holds, and nothing lost when a worker fails."""
import os
import subprocess
import sys
import time

import pytest

from support.commands import LM_EVAL, last_line, results_of, run_lm_eval, samples_of

from drift_eval.errors import DriftUsageError
from drift_eval.plugin import scoring
from drift_eval.plugin.answers import Answer

FRENCH = ("Le marché du samedi matin est un lieu de rencontre pour tout le quartier. Les maraîchers "
          "installent leurs étals dès l'aube et proposent des légumes de saison, des fromages et du pain frais. ")
ENGLISH = "The market opens early on Saturday and the farmers sell vegetables, cheese and bread to everyone. "


def test_the_number_of_workers_is_checked():
    assert scoring.workers_setting("0") == 0 and scoring.workers_setting(3) == 3
    assert 1 <= scoring.workers_setting("auto") <= scoring.MAX_WORKERS
    for bad in ("-1", "two", 1.5, True, None):
        with pytest.raises(DriftUsageError, match="scoring_workers must be auto or a whole number >= 0"):
            scoring.workers_setting(bad)


@pytest.fixture(scope="module")
def french_tasks(task_manager):
    return task_manager.load(["drift_french_single", "drift_ja_single"])["tasks"]


def test_a_worker_loads_the_tasks_own_function_from_its_file(french_tasks):
    for name in ("drift_french_single", "drift_ja_single"):
        task = french_tasks[name]
        path, attr = scoring.function_of(task)
        assert os.path.samefile(path, task.config.process_results.__code__.co_filename) and attr == "process_results"
        doc, answer = list(task.eval_docs)[0], Answer(FRENCH)
        assert scoring._score(path, attr, doc, [answer])[0] == task.config.process_results(doc, [answer])
    assert scoring.function_of(object()) is None


def test_answers_scored_by_the_workers_score_as_in_the_main_process(french_tasks):
    task = french_tasks["drift_french_single"]
    docs = list(task.eval_docs)[:scoring.MIN_ANSWERS + 2]
    texts = [FRENCH * (i + 1) + (ENGLISH * i if i % 3 else "") for i in range(len(docs))]
    answers = [Answer(t, tokens=64 * (i + 1), forced_length=True, instruction_placement="system")
               for i, t in enumerate(texts)]
    pool = scoring.POOL
    before = (pool.submitted, pool.taken)
    sent = pool.submit(2, [(task, d, a) for d, a in zip(docs, answers)])
    assert sent == len(docs) and pool.submitted - before[0] == len(docs)
    for doc, answer in zip(docs, answers):
        assert task.process_results(doc, [answer]) == task.config.process_results(doc, [answer])
    assert pool.taken - before[1] == len(docs)
    # read once: lm-eval scoring the same answer again computes it itself
    assert task.process_results(docs[0], [answers[0]]) == task.config.process_results(docs[0], [answers[0]])
    assert pool.taken - before[1] == len(docs)
    # an equal text that is not the answer submitted is scored in the main process, not given its scores
    twin = Answer(str(answers[1]), tokens=1)
    assert pool.submit(2, [(task, docs[1], answers[1])] * scoring.MIN_ANSWERS) == scoring.MIN_ANSWERS
    assert pool.take("drift_french_single", [twin]) is None
    assert pool.take("drift_ja_single", [answers[1]]) is None  # another task's answer
    assert pool.take("drift_french_single", [answers[1]]) == task.config.process_results(docs[1], [answers[1]])


def test_a_short_call_or_no_workers_scores_in_the_main_process(french_tasks):
    task = french_tasks["drift_french_single"]
    doc = list(task.eval_docs)[0]
    answer = Answer(FRENCH)
    assert scoring.POOL.submit(2, [(task, doc, answer)] * (scoring.MIN_ANSWERS - 1)) == 0
    assert scoring.POOL.submit(0, [(task, doc, answer)] * scoring.MIN_ANSWERS) == 0
    assert scoring.POOL.take("drift_french_single", [answer]) is None


def test_a_worker_that_fails_leaves_the_answer_to_the_main_process(french_tasks, monkeypatch):
    task = french_tasks["drift_french_single"]
    doc = list(task.eval_docs)[0]
    monkeypatch.setattr(scoring, "function_of", lambda task: (scoring.__file__, "no_such_function"))
    answers = [Answer(FRENCH) for _ in range(scoring.MIN_ANSWERS)]
    assert scoring.POOL.submit(2, [(task, doc, a) for a in answers]) == len(answers)
    monkeypatch.undo()
    assert task.process_results(doc, [answers[0]]) == task.config.process_results(doc, [answers[0]])


@pytest.mark.slow
@pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")
def test_a_run_scored_by_workers_logs_the_same_samples_and_results(smollm2_dir, tmp_path):
    """``lm_eval`` with ``--metadata scoring_workers=2`` and with ``0`` (every answer scored
    in the main process, as lm-eval does): the same samples and the same results."""
    runs = {}
    for workers in (0, 2):
        out = tmp_path / f"w{workers}"
        r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir}", "--tasks",
                         "drift_french_single,drift_ja_single", "--apply_chat_template", "--limit",
                         str(scoring.MIN_ANSWERS), "--gen_kwargs", "max_gen_toks=16", "--batch_size", "8",
                         "--device", "cpu", "--metadata", f'{{"scoring_workers": {workers}}}',
                         "--output_path", out, "--log_samples"])
        assert r.returncode == 0, r.stderr[-3000:]
        # one generate_until call (both tasks' answers), sent in lm-eval's two batches of 8, the
        # first batch's answers scored while the second is generated
        progress = [ln for ln in r.stderr.splitlines() if "answers generated" in ln]
        assert progress and "drift_french_single, drift_ja_single: 16 of 16 answers generated" in progress[-1], progress
        assert ("scored while generating" in progress[-1]) == bool(workers), progress
        summary = [ln for ln in r.stderr.splitlines() if "drift tasks:" in ln]
        assert len(summary) == 1 and "scoring: 16 documents" in summary[0], summary
        assert "in the main process after generation" in summary[0]
        runs[workers] = out
    for task in ("drift_french_single", "drift_ja_single"):
        assert samples_of(runs[2], task) == samples_of(runs[0], task)
    assert results_of(runs[2])["results"] == results_of(runs[0])["results"]
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir}", "--tasks",
                     "drift_french_single", "--limit", "1", "--device", "cpu", "--metadata",
                     '{"scoring_workers": "many"}', "--output_path", tmp_path / "bad"])
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert last_line(r.stderr) == "error: scoring_workers must be auto or a whole number >= 0, got 'many'"


WORKERS_OF_A_KILLED_RUN = r"""
import os, signal, sys
from lm_eval.tasks import TaskManager
from drift_eval.plugin import scoring
from drift_eval.plugin.answers import Answer
task = TaskManager().load(["drift_french_single"])["tasks"]["drift_french_single"]
doc = list(task.eval_docs)[0]
answers = [Answer("Le marché ouvre tôt le samedi.") for _ in range(scoring.MIN_ANSWERS)]
scoring.POOL.submit(2, [(task, doc, a) for a in answers])
assert scoring.POOL.take("drift_french_single", [answers[0]]) is not None
with open(f"/proc/self/task/{os.getpid()}/children") as fh:
    print(fh.read().strip(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads the process tree from /proc (Linux)")
@pytest.mark.slow  # a process killed with its workers, waited for
def test_the_workers_end_with_a_main_process_that_was_killed():
    # the exit is waited for, not the end of its output: workers left alive would hold the pipe open
    proc = subprocess.Popen([sys.executable, "-c", WORKERS_OF_A_KILLED_RUN], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    with proc.stdout:
        line = proc.stdout.readline()
    assert proc.wait(timeout=300) == -9, line
    pids = [int(p) for p in line.split()]
    assert len(pids) == 2, line

    def alive(pid):
        try:
            with open(f"/proc/{pid}/status") as fh:
                return "\nState:\tZ" not in fh.read()
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in pids), pids
