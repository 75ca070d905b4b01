"""Every path and environment variable a command takes is checked before any work: the
wrong kind (a file for a folder, a folder for a file, missing, under a file, unwritable)
is one line and exit 2, before a model loads or a run starts."""
import os

import pytest

from drift_eval.cli import main
from support.handmade_results import write_task_run


@pytest.fixture
def places(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "model").mkdir()  # a folder that is not a model folder (no config.json)
    return tmp_path


def _run(capsys, args, env=None, monkeypatch=None):
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err[-1] if err else ""


CASES = [
    (["report", "{results}", "-o", "{p}/folder"], {}, "error: -o {p}/folder is a folder: give a file"),
    (["report", "{results}", "-o", "{p}/file/r.html"], {}, "error: -o {p}/file/r.html: {p}/file is a file, not a folder"),
    (["report", "{p}/file"], {}, "error: results folder not found: {p}/file"),
    (["report", "{p}/missing"], {}, "error: results folder not found: {p}/missing"),
    (["leaderboard", "{results}", "-o", "{p}/file/b.md"], {}, "error: -o {p}/file/b.md: {p}/file is a file, not a folder"),
    (["gate", "{results}", "--policy", "{p}/folder"], {}, "error: {p}/folder is a folder where a policy file should be"),
    (["gate", "{results}", "--policy", "{p}/missing.yaml"], {}, "error: policy file not found: {p}/missing.yaml"),
    (["gate", "{results}", "--policy", "{p}/missing.yaml", "--junit-xml", "{p}/folder"], {},
     "error: --junit-xml {p}/folder is a folder: give a file"),
    (["sweep", "--output", "{p}/file"], {}, "error: --output {p}/file is a file: give a folder"),
    (["sweep", "--output", "{p}/file/out"], {}, "error: --output {p}/file/out: {p}/file is a file, not a folder"),
    (["demo", "--output", "{p}/file"], {}, "error: --output {p}/file is a file: give a folder"),
    (["decode", "--output", "{p}/folder"], {}, "error: --output {p}/folder is a folder: give a file"),
    (["decode", "--output", "{p}/file/x.json"], {}, "error: --output {p}/file/x.json: {p}/file is a file, not a folder"),
    (["alpha", "--model", "{p}/file"], {}, "error: --model {p}/file is a file: give a model folder"),
    (["alpha", "--model", "{p}/missing"], {}, "error: --model {p}/missing not found: give a model folder"),
    (["position-bias", "--model", "{p}/model"], {}, "error: --model {p}/model is not a model folder (no config.json"),
    (["accessibility", "--model", "{p}/file", "--gguf-file", "m.gguf"], {},
     "error: --model {p}/file is not a folder: give the folder that holds --gguf-file"),
    (["position-bias", "--text", "{p}/folder"], {}, "error: {p}/folder is a folder where a text file should be"),
    (["model-path"], {"DRIFT_CACHE_DIR": "{p}/file"}, "error: the cache folder {p}/file is a file (DRIFT_CACHE_DIR)"),
    (["model-path"], {"DRIFT_CACHE_DIR": "relative/cache"}, "error: DRIFT_CACHE_DIR='relative/cache' is not an absolute"),
    (["model-path"], {"DRIFT_CACHE_DIR": "{p}/file/cache"}, "error: cannot create the cache folder {p}/file/cache/"),
    (["demo", "--output", "{p}/new"], {"DRIFT_LID_MODEL": "{p}/folder"},
     "error: fastText language model {p}/folder is a folder, not a lid.176 file"),
    (["demo", "--output", "{p}/new"], {"DRIFT_LID_MODEL": "{p}/missing.ftz"},
     "error: fastText language model file not found: {p}/missing.ftz"),
]


@pytest.mark.parametrize("args, env, want", CASES)
def test_the_wrong_kind_of_path_is_one_line_and_exit_2_before_any_work(places, capsys, monkeypatch, args, env, want):
    results = write_task_run(places / "results", "m", [1, 0, 1])
    fill = lambda s: s.format(p=places, results=results)
    before = sorted(os.listdir(places))
    rc, line = _run(capsys, [fill(a) for a in args], {k: fill(v) for k, v in env.items()}, monkeypatch)
    assert rc == 2 and line.startswith("drift-eval: " + fill(want)), line
    assert sorted(os.listdir(places)) == before  # nothing was created (no run, no report, no demo folder)


@pytest.mark.skipif(os.geteuid() == 0, reason="every folder is writable for root")
def test_an_unwritable_folder_is_one_line(places, capsys, monkeypatch):
    ro = places / "ro"
    ro.mkdir(mode=0o555)
    rc, line = _run(capsys, ["report", places, "-o", ro / "r.html"])
    assert rc == 2 and line == f"drift-eval: error: -o {ro}/r.html: the folder {ro} is not writable"
