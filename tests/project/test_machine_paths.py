"""Committed files name no folder of the machine that made them: no home, cache, temporary
or work-tree path in any git-tracked file under docs/ or benchmarks/ (nor in their file
names), only the portable forms of docs/results/README.md ("Names and paths"). And the
script that relabels published runs into those forms (benchmarks/portable_names.py) changes
nothing else."""
import json
import os
import re
import shutil
import subprocess

import pytest

from support.checks import benchmark
from support.handmade_results import write_output
from support.places import REPO

from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError
from drift_eval.files import CACHE_ENV
from drift_eval.plugin.local_models import gguf_content_key, smollm2_gguf

_NOT_AFTER = r"(?<![\w$.~-])"  # a path's own start, not a part of a relative path or a URL
MACHINE = [
    (_NOT_AFTER + r"/root/", "a home folder (/root/)"),
    (_NOT_AFTER + r"/home/[^/\s\"'`]+/", "a home folder (/home/<user>/)"),
    (_NOT_AFTER + r"/Users/[^/\s\"'`]+/", "a home folder (/Users/<user>/)"),
    (_NOT_AFTER + r"/work/", "a work tree (/work/)"),
    (_NOT_AFTER + r"/(?:tmp|var/tmp|var/folders|private/var)/", "a temporary folder"),
    (r"\b[A-Za-z]:(?:\\\\|\\|/)(?:Users|Documents and Settings)(?:\\\\|\\|/)", "a Windows home folder"),
    (r"__(?:root|home|Users|work|tmp)__", "a path as lm-eval writes it into a folder name"),
]
IN_DATA = [(r"\"~[/\\]", "a ~ path in a data value")]  # prose may document a default such as ~/.cache/...
#: text that every match of a rule holds: a file without any of it is not searched with that
#: rule (the files under docs/ hold about 70 MB of runs' samples)
HOLDS = dict(zip([p for p, _ in MACHINE + IN_DATA], [
    ("/root/",), ("/home/",), ("/Users/",), ("/work/",), ("/tmp/", "/var/folders/", "/private/var/"),
    ("Users", "Documents and Settings"), ("__root__", "__home__", "__Users__", "__work__", "__tmp__"), ('"~',)]))
REBUILT = ("docs/results/report.html", "docs/results/report.md", "docs/results/report-plots/")


def _tracked():
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z", "docs", "benchmarks"], cwd=REPO, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p and (REPO / p).is_file()]  # tracked and here


def _own_folders():
    """This machine's own home, cache and checkout folders, whatever they are called."""
    folders = {os.path.expanduser("~"), str(REPO), os.environ.get(CACHE_ENV) or ""}
    return [f.rstrip("/") + "/" for f in folders if f and f.rstrip("/").count("/") >= 1 and len(f) > 1]


def _findings(paths):
    found = []
    own = _own_folders()
    for rel in paths:
        text = (REPO / rel).read_bytes().decode("utf-8", errors="replace")
        rules = MACHINE + (IN_DATA if rel.endswith((".json", ".jsonl")) else [])
        for pattern, what in rules:
            for where, name in ((text, rel), (rel, f"the file name {rel}")):
                m = re.search(pattern, where) if any(h in where for h in HOLDS[pattern]) else None
                if m:
                    line = where.count("\n", 0, m.start()) + 1
                    found.append(f"{name}:{line}: {what}: ...{where[max(0, m.start() - 40):m.end() + 40]!r}...")
        found += [f"{rel}: this machine's folder {f}" for f in own if f in text]
    return found


def test_no_committed_file_under_docs_or_benchmarks_names_a_machine_folder():
    paths = [p for p in _tracked() if not p.startswith(REBUILT)]
    assert paths, "no tracked files found"
    assert _findings(paths) == []


def test_the_committed_report_names_no_machine_folder():
    assert _findings([p for p in _tracked() if p.startswith(REBUILT)]) == []


def test_the_rules_catch_each_kind_of_machine_path(tmp_path):
    """Known answers for the patterns: each machine path is caught, each portable form and
    relative path passes."""
    caught = ['"pretrained": "/root/.cache/lm-eval-drift/gguf/x-0123456789abcdef"',
              '"out": "/home/ana/run/x.json"', "see /Users/ana/models", "under /work/runs2/tasks/a.yaml",
              "-o /tmp/release_gating", r'"C:\\Users\\ana\\model"', "none/__root__.cache__bench-models__q/"]
    passed = ['"pretrained": "$DRIFT_CACHE_DIR/gguf/x-0123456789abcdef"', '"$MODELS/smollm2_random_init"',
              "tasks/drift_french/drift_french_single.yaml", "https://example.org/work/x", "docs/tmp/notes",
              "cached under `~/.cache/lm-eval-drift`"]
    for text in caught:
        assert any(re.search(p, text) and any(h in text for h in HOLDS[p]) for p, _ in MACHINE), text
    for text in passed:
        assert not any(re.search(p, text) for p, _ in MACHINE), text
    assert re.search(IN_DATA[0][0], '{"pretrained": "~/.cache/lm-eval-drift/gguf/x"}')


# ------------------------------------------------------------------------ relabelling
OLD_CACHE = "/root/.cache/lm-eval-drift/gguf/SmolLM2-135M-Instruct.Q4_1-0932cb8f3d829473"
OTHER_CACHE = "/home/ana/.cache/lm-eval-drift/gguf/SmolLM2-135M-Instruct.Q4_1-f0520c7f33d8094d"
BUNDLED = "$DRIFT_CACHE_DIR/gguf/SmolLM2-135M-Instruct.Q4_1-be7135aa9fde2aae"  # the bundled file's content key


def _published(root, pretrained, settings, folder):
    """A published sweep folder as the runs wrote it: lm-eval's sanitised path as the model
    folder, machine paths in the results and the manifest, lm-eval's own indentation."""
    write_output(root, settings=settings)
    for label in settings:
        setting = root / label.replace(":", "_")
        os.rename(setting / "__models__tiny", setting / folder)
        [res] = (setting / folder).glob("results_*.json")
        doc = json.loads(res.read_text())
        doc["config"]["model_args"]["pretrained"] = pretrained
        doc["config"]["model"] = pretrained
        doc["configs"]["drift_french_single"] = {"metadata": {"version": 2.1, "pretrained": pretrained,
                                                              "config_source": "/work/runs2/tasks/drift_french/"
                                                                               "drift_french_single.yaml"}}
        doc.update(model_name=pretrained, model_name_sanitized=pretrained.replace("/", "__"), note="café ✓")
        res.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    (root / "sweep.json").write_text(json.dumps({"settings": list(settings), "tasks": ["drift_french_single"],
                                                 "options": {"model_args": {"pretrained": pretrained}}}, indent=2))


def test_relabelling_changes_the_path_values_and_folder_names_only(tmp_path):
    names, tables = benchmark("portable_names"), benchmark("paired_tables")
    a, b = tmp_path / "single", tmp_path / "control"
    _published(a, OLD_CACHE, ("none", "log:0.25"), OLD_CACHE.replace("/", "__"))
    _published(b, OTHER_CACHE, ("const:0.25",), OTHER_CACHE.replace("/", "__"))
    before = {p.relative_to(tmp_path).as_posix(): p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    table_before = tables.table([str(a)], "drift_french_single", ["fully_french", "echo_rate"])

    assert len(load_output(a, b).models) == 2  # two cache keys of one file: two models before

    lines = names.relabel([str(a), str(b)])
    after = {p.relative_to(tmp_path).as_posix(): p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    renamed = {k.replace(OLD_CACHE.replace("/", "__"), "SmolLM2-135M-Instruct.Q4_1")
                .replace(OTHER_CACHE.replace("/", "__"), "SmolLM2-135M-Instruct.Q4_1"): v for k, v in before.items()}
    assert sorted(after) == sorted(renamed)
    for rel, text in renamed.items():
        if "samples_" in rel:
            assert after[rel] == text  # no path in them: byte for byte as they were
            continue
        expected = text
        for old in (OLD_CACHE, OTHER_CACHE):
            expected = expected.replace(f'"{old}"', f'"{BUNDLED}"').replace(
                f'"{old.replace("/", "__")}"', f'"{BUNDLED.replace("/", "__")}"')
        expected = expected.replace('"/work/runs2/tasks/drift_french/drift_french_single.yaml"',
                                    '"tasks/drift_french/drift_french_single.yaml"')
        assert after[rel] == expected, rel  # every other byte (order, indentation, non-ASCII) kept
    assert any(line.endswith("none/SmolLM2-135M-Instruct.Q4_1") for line in lines)
    out = load_output(a, b)
    assert out.models == ["SmolLM2-135M-Instruct.Q4_1"]  # one file, one model, one name
    assert tables.table([str(a)], "drift_french_single", ["fully_french", "echo_rate"]) == table_before
    assert names.relabel([str(a), str(b)]) == []  # nothing left to do


@pytest.mark.parametrize("value, key, portable", [
    ("/work/runs_out/models/smollm2_random_init", "pretrained", "$MODELS/smollm2_random_init"),
    ("/root/.cache/bench-models/qwen2.5-coder-0.5b-instruct/", "model_name", "$MODELS/qwen2.5-coder-0.5b-instruct"),
    ("C:\\Users\\ana\\models\\llama", "pretrained", "$MODELS/llama"),
    ("/work/main/benchmarks/results/conversation_speed.json", "out", "benchmarks/results/conversation_speed.json"),
    ("/usr/lib/python3/site-packages/lm_eval/tasks/x/x.yaml", "config_source", "$SITE_PACKAGES/lm_eval/tasks/x/x.yaml"),
    ("/root/.cache/lm-eval-drift/gguf/qwen-q4_k_m-d881ec3ba83fb305", "model",  # no GGUF file at hand: key kept
     "$DRIFT_CACHE_DIR/gguf/qwen-q4_k_m-d881ec3ba83fb305"),
    ("~/.cache/lm-eval-drift/gguf/x-0932cb8f3d829473", "pretrained", "$DRIFT_CACHE_DIR/gguf/x-0932cb8f3d829473"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "pretrained", "Qwen/Qwen2.5-0.5B-Instruct"),
    ("relative/folder", "pretrained", "relative/folder"),
])
def test_each_path_gets_its_portable_form(value, key, portable):
    names = benchmark("portable_names")
    assert names.portable(value, key, {}) == portable


def test_model_args_written_as_text_are_relabelled_value_by_value():
    names = benchmark("portable_names")
    doc = {"config": {"model_args": f"pretrained={OLD_CACHE},dtype=float32", "model": "hf-drift"}}
    assert names._portable_tree(doc, names.gguf_keys()) == {
        "config": {"model_args": f"pretrained={BUNDLED},dtype=float32", "model": "hf-drift"}}


def test_a_path_without_a_portable_form_stops_before_anything_is_written(tmp_path):
    names = benchmark("portable_names")
    _published(tmp_path / "run", OLD_CACHE, ("none",), "m")
    stray = tmp_path / "run" / "z.json"
    stray.write_text(json.dumps({"log_file": "/var/log/run.txt"}))
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(DriftUsageError, match=r"z\.json: 'log_file' is /var/log/run\.txt, a path on the machine"):
        names.relabel([str(tmp_path / "run")])
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before


def test_published_results_use_the_bundled_files_content_key():
    """Every converted SmolLM2 folder named in docs/results is the bundled file's, by the
    key it has today (``tests/plugin/test_gguf_content_key.py`` pins that key)."""
    key = gguf_content_key(os.path.join(*smollm2_gguf()))
    named = set()
    for path in (REPO / "docs" / "results").rglob("*.json"):
        named |= set(re.findall(r"SmolLM2-135M-Instruct\.Q4_1-([0-9a-f]{16})", path.read_text()))
    assert named == {key}
